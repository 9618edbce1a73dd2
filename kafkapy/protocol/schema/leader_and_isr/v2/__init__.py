from .request import LeaderAndIsrRequest
from .response import LeaderAndIsrResponse
