"""Sans-IO Kafka protocol: headers, the kio-schema-driven codec, error codes.

``api`` (the API table) lives beside these modules and is imported directly
(``kafkapy.protocol.api``); it is not re-exported here to keep this package
importable on its own.
"""

from .codec import (
    ZERO_UUID,
    DecodeError,
    Parts,
    RecordsRegions,
    decode,
    encode,
    encode_to_bytes,
)
from .errors import ErrorCode, KafkaError
from .headers import (
    RequestHeaderInfo,
    encode_response,
    read_request_header,
    skip_tagged_fields,
)

__all__ = (
    "ZERO_UUID",
    "DecodeError",
    "Parts",
    "RecordsRegions",
    "decode",
    "encode",
    "encode_to_bytes",
    "ErrorCode",
    "KafkaError",
    "RequestHeaderInfo",
    "encode_response",
    "read_request_header",
    "skip_tagged_fields",
)
