"""A Produce request body (v3-v11) read in one pass, and its response
written in one pass.

The generic codec walks the version's schema plan, one reader call per
field and one entity per level; for the smallest and most frequent request
a broker gets (one batch for one partition) that was about a quarter of the
handling (in-process, ~13 us of ~52 us: ``perf/README.md``, "Requests
handled in the processor"). ``decode_request`` reads the same bytes in one
pass and builds the very entities the codec builds (kio's classes, filled
through the same slot setters: the records a ``memoryview`` of ``buf``, no
copy), so every handler sees one meaning. The pass is ``_core``'s
(``request_read``, given the classes and setters once per version): 0.5 us
compiled for a one-partition v8 body, 2.9 us for 16 partitions, against
3.3-3.9 and 13 us for its Python twin, which is this module's former reader
(``perf/bench_core.py``).

It reads only the common shape and leaves the rest to the codec: it returns
None for anything else (a negative count or length other than a null
records field or transactional id, a length past the end, a tagged field
present, invalid UTF-8), and the caller decodes with the codec, which then
answers or raises exactly as before. ``tests/unit/protocol/test_produce_wire.py``
checks, for the compiled read and its twin, that for every version both give
equal entities, and that on truncated and mutated bodies this one gives None
or the codec's entity.

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

from kafkapy._core import load
from kafkapy.protocol import one_pass
from kafkapy.protocol.codec import unsigned_varint_bytes
from kafkapy.protocol.one_pass import I16 as _I16, I32 as _I32, Unusual, element_class
from kafkapy.protocol.readers import _read_plan

FIRST_VERSION = 3  # message format v2 only; older bodies go through the codec


def _entities(cls):
    """``(setters, topic class, topic setters, partition class, partition
    setters)`` for one version's ProduceRequest: the codec's own setters, in
    the fields' order, so the entities are the codec's."""
    plan = _read_plan(cls)
    topic_cls = element_class(cls, "topic_data")
    part_cls = element_class(topic_cls, "partition_data")
    return (tuple(plan.setters), topic_cls, tuple(_read_plan(topic_cls).setters),
            part_cls, tuple(_read_plan(part_cls).setters))


def request_decoder(request_read):
    """``decode_request`` over one implementation of ``_core``'s read
    (``request_read`` or its twin ``request_read_py``: the tests hold both
    to the codec)."""
    read = request_read.read_produce_request
    # request class -> its produce_shape, made on a version's first request;
    # shared by the process's threads: each store is one dict assignment under
    # the GIL, and two threads racing make two equal shapes.
    shapes = {}

    def shape_of(cls):
        shape = shapes[cls] = request_read.produce_shape(cls, bool(cls.__flexible__), *_entities(cls))
        return shape

    def decode_request(cls, version: int, buf: memoryview, off: int):
        """The ProduceRequest v``version`` at ``buf[off:]`` as the codec
        decodes it, or None (decode it with the codec)."""
        return read(buf, off, shapes.get(cls) or shape_of(cls))

    return decode_request


decode_request = request_decoder(load("request_read"))


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
