"""A Produce request body (v3-v11) read in one pass, and its response
written in one pass.

The generic codec walks the version's schema plan, one reader call per
field and one entity per level; for the smallest and most frequent request
a broker gets (one batch for one partition) that was about a quarter of the
handling (in-process, ~13 us of ~52 us: ``perf/README.md``, "Requests
handled in the processor"). ``decode_request`` reads the same bytes with
three ``struct`` reads per partition and builds the very entities the codec
builds (kio's classes, filled through the same slot setters: the records a
``memoryview`` of ``buf``, no copy), so every handler sees one meaning.

It reads only the common shape and leaves the rest to the codec: it returns
None for anything else (a negative count or length other than a null
records field or transactional id, a length past the end, a tagged field
present, invalid UTF-8), and the caller decodes with the codec, which then
answers or raises exactly as before. ``tests/unit/protocol/test_produce_wire.py``
checks that for every version both give equal entities, and that on
truncated and mutated bodies this one gives None or the codec's entity.

The response goes the other way: ``install_response_writer`` makes the
codec's writer for a ProduceResponse version (v3+) a one-pass one that
packs a partition's fixed fields with one ``struct`` call (the generic
writer: one step per field and per nesting level, ~4.3 us of a one-partition
response against ~1.3 us). It writes only what a Produce answer from this
broker holds: no record errors, no ``current_leader`` or ``node_endpoints``
(KIP-951's tagged fields, left at their defaults), integer times; anything
else is written by the codec's own writer, from the same start. The test
holds both to the same bytes for every version.
"""

from __future__ import annotations

import dataclasses
import struct
from functools import cache

from kafkapy.protocol import one_pass
from kafkapy.protocol.codec import DecodeError, unsigned_varint_bytes
from kafkapy.protocol.one_pass import I16 as _I16, I32 as _I32, Unusual, element_class
from kafkapy.protocol.one_pass import read_length as _length, read_string_length as _string_length
from kafkapy.protocol.readers import _read_plan

FIRST_VERSION = 3  # message format v2 only; older bodies go through the codec

_ACKS_TIMEOUT = struct.Struct(">hi")
_NEW = object.__new__


@cache
def _shape(cls):
    """``(request setters, topic class, topic setters, partition class,
    partition setters)`` for one version's ProduceRequest: the codec's own
    setters, in the fields' order, so the entities are the codec's."""
    plan = _read_plan(cls)
    topic_cls = element_class(cls, "topic_data")
    part_cls = element_class(topic_cls, "partition_data")
    setters = tuple(plan.setters)
    topic_setters = tuple(_read_plan(topic_cls).setters)
    part_setters = tuple(_read_plan(part_cls).setters)
    if (len(setters), len(topic_setters), len(part_setters)) != (4, 2, 2):
        raise TypeError(f"{cls.__qualname__}: not the Produce shape this reader knows")
    return setters, topic_cls, topic_setters, part_cls, part_setters


def decode_request(cls, version: int, buf: memoryview, off: int):
    """The ProduceRequest v``version`` at ``buf[off:]`` as the codec decodes
    it, or None (decode it with the codec)."""
    try:
        return _decode(cls, buf, off, bool(cls.__flexible__))
    except (struct.error, IndexError, ValueError, DecodeError):  # UnicodeDecodeError is a ValueError
        return None


def _decode(cls, buf, off, flexible):
    setters, topic_cls, topic_setters, part_cls, part_setters = _shape(cls)
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


# -- the response ---------------------------------------------------------------

# index, error_code, base_offset, log_append_time (v2+); with log_start_offset (v5+).
_PARTITION_V3 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")


def install_response_writer(cls) -> None:
    """Make the codec write ``cls``, one version's ProduceResponse, with
    ``_response_writer`` from FIRST_VERSION on (once per version the
    Produce handler answers)."""
    one_pass.install(cls, FIRST_VERSION, _response_writer)


def _response_writer(cls, generic):
    flexible = bool(cls.__flexible__)
    topic_cls = element_class(cls, "responses")
    part_cls = element_class(topic_cls, "partition_responses")
    part_fields = {f.name: f for f in dataclasses.fields(part_cls)}
    if "log_append_time" not in part_fields:
        raise TypeError(f"{cls.__qualname__}: not the Produce response shape this writer knows")
    fixed = _PARTITION_V5 if "log_start_offset" in part_fields else _PARTITION_V3
    pack_fixed = fixed.pack
    has_errors = "record_errors" in part_fields  # with error_message (v8+)
    leader_field = part_fields.get("current_leader")
    no_leader = leader_field.default if leader_field is not None else None
    has_endpoints = any(f.name == "node_endpoints" for f in dataclasses.fields(cls))
    pack_i16, pack_i32 = _I16.pack, _I32.pack
    count = one_pass.count_writer(flexible)

    def string(value):
        if value is None:
            return b"\x00" if flexible else b"\xff\xff"
        data = value.encode()
        return (unsigned_varint_bytes(len(data) + 1) if flexible else pack_i16(len(data))) + data

    def write(out, buf, response):
        start = len(buf)
        try:
            topics = response.responses
            buf += count(len(topics))
            for topic in topics:
                buf += string(topic.name)
                partitions = topic.partition_responses
                buf += count(len(partitions))
                for p in partitions:
                    if fixed is _PARTITION_V5:
                        buf += pack_fixed(p.index, p.error_code, p.base_offset, p.log_append_time, p.log_start_offset)
                    else:
                        buf += pack_fixed(p.index, p.error_code, p.base_offset, p.log_append_time)
                    if has_errors:
                        if p.record_errors:
                            raise Unusual
                        buf += count(0)
                        buf += string(p.error_message)
                    if flexible:
                        if leader_field is not None and p.current_leader is not no_leader:
                            raise Unusual
                        buf.append(0)
                if flexible:
                    buf.append(0)
            buf += pack_i32(response.throttle_time)
            if flexible:
                if has_endpoints and response.node_endpoints:
                    raise Unusual
                buf.append(0)
        except (Unusual, struct.error, TypeError, AttributeError):
            # kio's timedelta/datetime values, record errors, tagged fields
            # set: the codec's writer, from the same start.
            del buf[start:]
            generic(out, buf, response)

    return write
