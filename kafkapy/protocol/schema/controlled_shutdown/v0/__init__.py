from .request import ControlledShutdownRequest
from .response import ControlledShutdownResponse
