"""A request frame's most frequent reads, in plain Python (twin of ``request_read``).

``read_request_header(buf, info_cls, error_cls)``: request header v1
(``api_key int16, api_version int16, correlation_id int32, client_id
nullable string``) from the start of ``buf`` (any bytes-like object, no size
prefix), as ``info_cls(api_key, api_version, correlation_id, client_id,
offset)``, ``offset`` being where the header ends. ControlledShutdown v0
(api key 7) has header v0: no client id, ``offset`` 8. A buffer shorter than
10 bytes, a client id length below -1 or past the end, or a client id that is
not UTF-8 raise ``error_cls(message)``. ``protocol.headers`` passes its
``RequestHeaderInfo`` and ``DecodeError``: ``_core`` imports no protocol.

``read_produce_request(buf, off, shape)``: a ProduceRequest body (v3+) at
``buf[off:]`` in one pass, as the codec's entities, the records a slice of
``buf`` (a ``memoryview`` of the caller's buffer when ``buf`` is one: no
copy). ``shape = produce_shape(cls, flexible, setters, topic_cls,
topic_setters, part_cls, part_setters)`` is made once per request version
(``protocol.produce_wire``): the codec's entity classes (the request, a
topic, a partition) and their slot setters in field order (4, 2 and 2), with
which the codec builds the very same entities. It reads only the common
shape and returns None for anything else, for the codec to decode (and
answer or refuse) as before: a negative count or length other than null
records or a null transactional id, a count or length past the end, a
tagged field present, invalid UTF-8, a varint longer than 5 bytes, a
truncated body.
"""

import struct

_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_HEADER_V0_SIZE = 8  # api_key, api_version, correlation_id
_CONTROLLED_SHUTDOWN_KEY = 7  # its v0 is the one request with header v0 (Kafka's ApiKeys.requestHeaderVersion)
_ACKS_TIMEOUT = struct.Struct(">hi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_NEW = object.__new__
_NEW_TUPLE = tuple.__new__


def read_request_header(buf, info_cls, error_cls):
    if type(buf) is not memoryview:
        buf = memoryview(buf)
    if len(buf) < _HEADER.size:
        raise error_cls(f"request of {len(buf)} bytes is shorter than a header")
    api_key, api_version, correlation_id, n = _HEADER.unpack_from(buf, 0)
    if api_key == _CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return _NEW_TUPLE(info_cls, (api_key, api_version, correlation_id, None, _HEADER_V0_SIZE))
    offset = _HEADER.size
    if n == -1:
        return _NEW_TUPLE(info_cls, (api_key, api_version, correlation_id, None, offset))
    if n < 0:
        raise error_cls(f"invalid client_id length {n}")
    end = offset + n
    if end > len(buf):
        raise error_cls(f"client_id length {n} exceeds remaining bytes")
    try:
        client_id = str(buf[offset:end], "utf-8")
    except UnicodeDecodeError as e:
        raise error_cls(f"client_id is not UTF-8: {e}") from None
    return _NEW_TUPLE(info_cls, (api_key, api_version, correlation_id, client_id, end))


class _Unusual(Exception):
    """A varint longer than Kafka's 5 bytes: the codec's to refuse."""


def _uvarint(buf, off):
    """An unsigned varint of at most 5 bytes (IndexError when truncated)."""
    b = buf[off]
    if b < 0x80:
        return b, off + 1
    value = b & 0x7F
    for i in range(1, 5):
        b = buf[off + i]
        value |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return value, off + i + 1
    raise _Unusual


def _length(buf, off, flexible):
    """An array's count or a byte string's length: compact or int32; -1: null."""
    if flexible:
        n, off = _uvarint(buf, off)
        return n - 1, off
    return _I32.unpack_from(buf, off)[0], off + 4


def _string_length(buf, off, flexible):
    """A string's length: compact or int16; -1: null."""
    if flexible:
        n, off = _uvarint(buf, off)
        return n - 1, off
    return _I16.unpack_from(buf, off)[0], off + 2


def produce_shape(cls, flexible, setters, topic_cls, topic_setters, part_cls, part_setters):
    if (len(setters), len(topic_setters), len(part_setters)) != (4, 2, 2):
        raise TypeError(f"{cls.__qualname__}: not the Produce shape this reader knows")
    return cls, bool(flexible), tuple(setters), topic_cls, tuple(topic_setters), part_cls, tuple(part_setters)


def read_produce_request(buf, off, shape):
    try:
        return _read_produce(buf, off, *shape)
    except (struct.error, IndexError, ValueError, _Unusual):  # UnicodeDecodeError is a ValueError
        return None


def _read_produce(buf, off, cls, flexible, setters, topic_cls, topic_setters, part_cls, part_setters):
    end = len(buf)
    n, off = _string_length(buf, off, flexible)
    if n >= 0:
        if off + n > end:
            return None
        transactional_id = str(buf[off:off + n], "utf-8")
        off += n
    elif n == -1:
        transactional_id = None
    else:
        return None
    acks, timeout = _ACKS_TIMEOUT.unpack_from(buf, off)
    off += 6
    count, off = _length(buf, off, flexible)
    if count < 0 or count > end - off:
        return None
    topics = []
    for _ in range(count):
        n, off = _string_length(buf, off, flexible)
        if n < 0 or off + n > end:
            return None
        name = str(buf[off:off + n], "utf-8")
        off += n
        pcount, off = _length(buf, off, flexible)
        if pcount < 0 or pcount > end - off:
            return None
        partitions = []
        for _ in range(pcount):
            index = _I32.unpack_from(buf, off)[0]
            n, off = _length(buf, off + 4, flexible)
            if n >= 0:
                if off + n > end:
                    return None
                records = buf[off:off + n]
                off += n
            elif n == -1:
                records = None
            else:
                return None
            if flexible:
                if buf[off] != 0:
                    return None  # a tagged field: the codec's
                off += 1
            part = _NEW(part_cls)
            part_setters[0](part, index)
            part_setters[1](part, records)
            partitions.append(part)
        if flexible:
            if buf[off] != 0:
                return None
            off += 1
        topic = _NEW(topic_cls)
        topic_setters[0](topic, name)
        topic_setters[1](topic, tuple(partitions))
        topics.append(topic)
    if flexible and buf[off] != 0:
        return None
    request = _NEW(cls)
    for setter, value in zip(setters, (transactional_id, acks, timeout, tuple(topics))):
        setter(request, value)
    return request
