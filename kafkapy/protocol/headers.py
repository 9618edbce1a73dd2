"""Request and response headers.

Request header v1 (non-flexible requests) is
``api_key int16, api_version int16, correlation_id int32, client_id
nullable legacy string``; header v2 (flexible requests) adds a tag buffer.
``client_id`` stays a legacy string in v2 so that a broker can read the
header of a request whose version it does not know, and answer it.
The caller reads v1 with ``read_request_header`` and, once the API table says
the version is flexible, skips the tag buffer with ``skip_tagged_fields``.
Request header v0 (no client id) is ControlledShutdown v0's alone, as in
Kafka; ``read_request_header`` reads it for that request (client id None).
The read itself is ``_core.request_read``'s (every request's first, ~0.2 us
compiled against ~1 us in Python: ``perf/bench_core.py``).

Response header v0 is ``correlation_id int32``; v1 adds an empty tag buffer.
The ApiVersions response always uses v0 (clients parse it before they know
the broker's versions); the caller decides via ``flexible_header``.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkapy._core import load

from .codec import DecodeError, Parts, encode, read_unsigned_varint

__all__ = (
    "RequestHeaderInfo",
    "read_request_header",
    "skip_tagged_fields",
    "encode_response",
)

CONTROLLED_SHUTDOWN_KEY = 7  # its v0 is the one request with header v0 (Kafka's ApiKeys.requestHeaderVersion)
_SIZE = struct.Struct(">i")


class RequestHeaderInfo(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    offset: int
    """Where the header (v1 part) ends in the buffer."""


def header_reader(request_read):
    """``read_request_header`` over one implementation of ``_core``'s read
    (``request_read`` or its twin ``request_read_py``: the tests run both)."""
    read = request_read.read_request_header

    def read_request_header(buf) -> RequestHeaderInfo:
        """Read request header v1 fields from the start of ``buf`` (no size
        prefix); ``DecodeError`` when it is short, its client id length is
        below -1 or past the end, or the client id is not UTF-8."""
        return read(buf, RequestHeaderInfo, DecodeError)

    return read_request_header


read_request_header = header_reader(load("request_read"))


def skip_tagged_fields(buf, offset: int) -> int:
    """Skip a tag buffer at ``offset`` (header v2); return where it ends.

    No header tags are defined for client requests that kafkapy serves, so
    every tag is skipped, checking only that sizes stay inside ``buf``.
    """
    count, offset = read_unsigned_varint(buf, offset)
    # A tag takes at least 2 bytes (tag and size varints).
    if count * 2 > len(buf) - offset:
        raise DecodeError(f"tag count {count} exceeds remaining bytes")
    for _ in range(count):
        _tag, offset = read_unsigned_varint(buf, offset)
        size, offset = read_unsigned_varint(buf, offset)
        offset += size
        if offset > len(buf):
            raise DecodeError(f"tagged field size {size} exceeds remaining bytes")
    return offset


def encode_response(correlation_id: int, body_entity, flexible_header: bool, body_cls=None) -> list:
    """Encode a full response frame: size prefix, header v0/v1, body.

    Returns ``bytes`` and ``FileRegion`` parts for the processor to send in
    order.  ``body_cls`` is needed only when ``body_entity`` is a stand-in
    object rather than a kio instance.
    """
    out = Parts()
    buf = out.buf
    # The size prefix is patched in once the body is written; it counts
    # header + body, not itself.
    buf += b"\x00\x00\x00\x00"
    buf += _SIZE.pack(correlation_id)
    if flexible_header:
        buf.append(0)
    encode(body_entity, out, body_cls)
    buf[0:4] = _SIZE.pack(out.size - 4)
    return out.parts()
