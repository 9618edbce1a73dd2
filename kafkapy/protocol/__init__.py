"""Sans-IO Kafka protocol: headers, the kio-schema-driven codec, error codes.

``api`` (the API table) lives beside these modules and is imported directly
(``kafkapy.protocol.api``); it is not re-exported here to keep this package
importable on its own.
"""

import sys as _sys


def _import_kio_quietly() -> None:
    """Import kio's primitive types without its hypothesis hook.

    kio registers a hypothesis strategy for each of its types at import time
    whenever hypothesis is importable (a test-only library that happens to be
    installed in development and CI environments). That registration builds
    hypothesis's unicode tables: 0.2 s with hypothesis's on-disk cache in the
    working directory and 3-10 s of CPU without it (measured with cProfile in
    a handler worker whose first request paid for it), in every broker
    process. A process that already imported hypothesis (a property test)
    keeps kio's strategies.
    """
    if "hypothesis" in _sys.modules:
        import kio.static  # noqa: F401
        return
    _sys.modules["hypothesis"] = None  # makes ``import hypothesis`` raise ImportError
    try:
        import kio.static  # noqa: F401
        import kio.static.primitive  # noqa: F401
    finally:
        del _sys.modules["hypothesis"]


_import_kio_quietly()

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
