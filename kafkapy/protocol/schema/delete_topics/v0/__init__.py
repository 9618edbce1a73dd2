from .request import DeleteTopicsRequest
from .response import DeleteTopicsResponse

__all__ = (
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
)
