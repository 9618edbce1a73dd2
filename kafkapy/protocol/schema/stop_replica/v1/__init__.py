from .request import StopReplicaRequest
from .response import StopReplicaResponse
