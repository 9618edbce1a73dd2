from .request import UpdateMetadataRequest
from .response import UpdateMetadataResponse
