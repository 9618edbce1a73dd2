"""A Fetch request body (v4-v17) read in one pass, and its response
written in one pass.

Every replication round reads several of these at the leader (each
follower's Fetch, and again each time a parked one is woken and run
again), and every consumer poll one: the generic codec spent ~6-11 us on a
one-partition FetchRequest v12 (one reader call per field, one entity per
level). ``decode_request`` reads the same bytes with one ``struct`` read for
the request's fixed fields and one per partition, and builds the very
entities the codec builds (kio's classes through the codec's own slot
setters; tagged fields at the codec's defaults), so every handler sees one
meaning, as ``produce_wire`` does for Produce.

It reads only the common shape and leaves the rest to the codec: it returns
None for anything else (a tagged field present at any level, a negative
count or length, a length past the end, invalid UTF-8, a null where the
schema has none), and the caller decodes with the codec, which then answers
or raises exactly as before. ``tests/unit/protocol/test_fetch_request_wire.py``
checks that for every version both give equal entities, and that on
truncated and mutated bodies this one gives None or the codec's entity.

The response goes the other way, as Produce's does:
``install_response_writer`` makes the codec's writer for a
FetchResponse version (v4+) a one-pass one: one ``struct`` pack for a
partition's fixed fields, the codec's own field writers for its aborted
transactions and records (file regions stay regions). It writes what a
Fetch answer from this broker usually holds; a tagged field away from its
default (a diverging epoch, the current leader, a snapshot id, node
endpoints) or a value the packs refuse sends the whole response to the
codec's writer, from the same start. The test holds both to the same bytes.
"""

from __future__ import annotations

import struct
import uuid
from functools import cache

from kafkapy.protocol import one_pass, writers
from kafkapy.protocol.codec import DecodeError, unsigned_varint_bytes
from kafkapy.protocol.entities import _plan
from kafkapy.protocol.fields import _split_fields
from kafkapy.protocol.one_pass import I16 as _I16, I32 as _I32, Unusual, element_class, read_name as _name
from kafkapy.protocol.one_pass import read_length as _count
from kafkapy.protocol.readers import _read_plan

FIRST_VERSION = 4  # message format v2 only; older bodies go through the codec

_NEW = object.__new__
_UUID = uuid.UUID


class _Shape:
    """One version's layout and the codec's setters for its entities."""

    __slots__ = ("head", "flexible", "topic_ids", "forgotten", "rack", "part", "tag_defaults",
                 "setters", "topic_cls", "topic_setters", "part_cls", "part_setters", "part_tags",
                 "forgotten_cls", "forgotten_setters")


@cache
def _shape(cls, version: int) -> _Shape:
    s = _Shape()
    s.flexible = bool(cls.__flexible__)
    head = ">"
    if version <= 14:
        head += "i"  # replica_id (v15+: the replica_state tag)
    head += "iiib"  # max_wait, min_bytes, max_bytes, isolation_level
    if version >= 7:
        head += "ii"  # session_id, session_epoch
    s.head = struct.Struct(head)
    s.topic_ids = version >= 13
    s.forgotten = version >= 7
    s.rack = version >= 11
    part = ">i"
    if version >= 9:
        part += "i"  # current_leader_epoch
    part += "q"  # fetch_offset
    if version >= 12:
        part += "i"  # last_fetched_epoch
    if version >= 5:
        part += "q"  # log_start_offset
    part += "i"  # partition_max_bytes
    s.part = struct.Struct(part)
    plan = _read_plan(cls)
    s.setters = tuple(plan.setters)
    s.tag_defaults = tuple(plan.tag_defaults)
    s.topic_cls = element_class(cls, "topics")
    s.topic_setters = tuple(_read_plan(s.topic_cls).setters)
    s.part_cls = element_class(s.topic_cls, "partitions")
    part_plan = _read_plan(s.part_cls)
    s.part_setters = tuple(part_plan.setters)
    s.part_tags = tuple(part_plan.tag_defaults)
    if s.forgotten:
        s.forgotten_cls = element_class(cls, "forgotten_topics_data")
        s.forgotten_setters = tuple(_read_plan(s.forgotten_cls).setters)
    wanted = len(s.head.format) - 1 + 1 + s.forgotten + s.rack + len(s.tag_defaults)
    if (len(s.setters), len(s.topic_setters), len(s.part_setters)) != (
            wanted, 2, len(s.part.format) - 1 + len(s.part_tags)):
        raise TypeError(f"{cls.__qualname__}: not the Fetch shape this reader knows")
    return s


def decode_request(cls, version: int, buf: memoryview, off: int):
    """The FetchRequest v``version`` at ``buf[off:]`` as the codec decodes
    it, or None (decode it with the codec)."""
    try:
        return _decode(_shape(cls, version), cls, buf, off)
    except (struct.error, IndexError, ValueError, DecodeError):  # UnicodeDecodeError is a ValueError
        return None


def _topic(buf, off, flexible, end, topic_ids):
    """A topic's id (v13+) or name, or (None, off) for anything else."""
    if topic_ids:
        if off + 16 > end:
            return None, off
        return _UUID(bytes=buf[off:off + 16].tobytes()), off + 16
    return _name(buf, off, flexible, end)


def _decode(s: _Shape, cls, buf, off):
    flexible = s.flexible
    end = len(buf)
    values = list(s.head.unpack_from(buf, off))
    off += s.head.size
    count, off = _count(buf, off, flexible)
    if count < 0 or count > end - off:
        return None
    part_unpack, part_size = s.part.unpack_from, s.part.size
    topic_cls, topic_setters = s.topic_cls, s.topic_setters
    part_cls, part_setters, part_tags = s.part_cls, s.part_setters, s.part_tags
    topic_ids = s.topic_ids
    topics = []
    for _ in range(count):
        topic, off = _topic(buf, off, flexible, end, topic_ids)
        if topic is None:
            return None
        pcount, off = _count(buf, off, flexible)
        if pcount < 0 or pcount > end - off:
            return None
        partitions = []
        for _ in range(pcount):
            fields = part_unpack(buf, off)
            off += part_size
            if flexible:
                if buf[off] != 0:
                    return None  # a tagged field: the codec's
                off += 1
                fields += part_tags
            part = _NEW(part_cls)
            for setter, value in zip(part_setters, fields):
                setter(part, value)
            partitions.append(part)
        if flexible:
            if buf[off] != 0:
                return None
            off += 1
        entity = _NEW(topic_cls)
        topic_setters[0](entity, topic)
        topic_setters[1](entity, tuple(partitions))
        topics.append(entity)
    values.append(tuple(topics))
    if s.forgotten:
        count, off = _count(buf, off, flexible)
        if count < 0 or count > end - off:
            return None
        forgotten = []
        for _ in range(count):
            topic, off = _topic(buf, off, flexible, end, topic_ids)
            if topic is None:
                return None
            n, off = _count(buf, off, flexible)
            if n < 0 or off + 4 * n > end:
                return None
            indexes = struct.unpack_from(f">{n}i", buf, off)
            off += 4 * n
            if flexible:
                if buf[off] != 0:
                    return None
                off += 1
            entity = _NEW(s.forgotten_cls)
            s.forgotten_setters[0](entity, topic)
            s.forgotten_setters[1](entity, indexes)
            forgotten.append(entity)
        values.append(tuple(forgotten))
    if s.rack:
        rack, off = _name(buf, off, flexible, end)
        if rack is None:
            return None
        values.append(rack)
    if flexible:
        if buf[off] != 0:
            return None
        values += s.tag_defaults
    request = _NEW(cls)
    for setter, value in zip(s.setters, values):
        setter(request, value)
    return request


# -- the response ---------------------------------------------------------------


def install_response_writer(cls) -> None:
    """Make the codec write ``cls``, one version's FetchResponse, with
    ``_response_writer`` from FIRST_VERSION on (once per version the Fetch
    handler answers)."""
    one_pass.install(cls, FIRST_VERSION, _response_writer)


def _field_writers(cls) -> dict:
    flexible, plain, tagged = _split_fields(cls)
    return {f.name: writers._field_writer(f, flexible) for f in plain}


def _tag_defaults(cls) -> tuple:
    """``(getter, default)`` of each tagged field of ``cls``."""
    return tuple((get, default) for _tag, get, _write, default, _bytes in writers._write_plan(cls).tagged)


def _response_writer(cls, generic):
    flexible = bool(cls.__flexible__)
    top = [n for n, _, _ in _plan(cls)]
    topic_cls = element_class(cls, "responses")
    part_cls = element_class(topic_cls, "partitions")
    part_fields = [n for n, _, _ in _plan(part_cls)]
    if "last_stable_offset" not in part_fields or "aborted_transactions" not in part_fields:
        raise TypeError(f"{cls.__qualname__}: not the Fetch response shape this writer knows")
    head = ">i" + ("hi" if "session_id" in top else "")
    pack_head = struct.Struct(head).pack
    with_session = "session_id" in top
    fixed_format = ">ihqq" + ("q" if "log_start_offset" in part_fields else "")
    pack_part = struct.Struct(fixed_format).pack
    with_start = "log_start_offset" in part_fields
    with_replica = "preferred_read_replica" in part_fields
    topic_ids = "topic_id" in [n for n, _, _ in _plan(topic_cls)]
    field_writers = _field_writers(part_cls)
    write_aborted, write_records = field_writers["aborted_transactions"], field_writers["records"]
    part_tags = _tag_defaults(part_cls)
    top_tags = _tag_defaults(cls)
    pack_i16, pack_i32 = _I16.pack, _I32.pack
    count = one_pass.count_writer(flexible)

    def write(out, buf, response):
        start = len(buf)
        regions = len(out._regions)
        region_bytes = out._region_bytes
        try:
            if with_session:
                buf += pack_head(response.throttle_time, response.error_code, response.session_id)
            else:
                buf += pack_head(response.throttle_time)
            topics = response.responses
            buf += count(len(topics))
            for topic in topics:
                if topic_ids:
                    buf += topic.topic_id.bytes
                else:
                    data = topic.topic.encode()
                    buf += unsigned_varint_bytes(len(data) + 1) if flexible else pack_i16(len(data))
                    buf += data
                partitions = topic.partitions
                buf += count(len(partitions))
                for p in partitions:
                    if with_start:
                        buf += pack_part(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                         p.log_start_offset)
                    else:
                        buf += pack_part(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
                    for get, default in part_tags:
                        if get(p) is not default:
                            raise Unusual
                    write_aborted(out, buf, p.aborted_transactions)
                    if with_replica:
                        buf += pack_i32(p.preferred_read_replica)
                    write_records(out, buf, p.records)
                    if flexible:
                        buf.append(0)
                if flexible:
                    buf.append(0)
            if flexible:
                for get, default in top_tags:
                    value = get(response)
                    if value is not default and value != default:
                        raise Unusual
                buf.append(0)
        except (Unusual, struct.error, TypeError, AttributeError):
            # Tagged fields set, kio's timedelta values: the codec's writer,
            # from the same start (file regions noted since are dropped too).
            del buf[start:]
            del out._regions[regions:]
            out._region_bytes = region_bytes
            generic(out, buf, response)

    return write
