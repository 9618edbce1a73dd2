"""The codec's encode side: ``Parts`` (the bytes and file regions of one
message), ``RecordsRegions`` (a ``records`` value made of both), a writer per
kafka_type, a write plan per kio class (tagged fields written only when they
differ from their default, as Kafka does) and ``encode`` /
``encode_to_bytes``. The values accepted are ``codec``'s docstring.

``_WRITE_PLANS`` is filled lazily and idempotently (see ``codec``); a
``Parts`` is owned by the one caller building a message.
"""

from __future__ import annotations

import struct
from operator import attrgetter

from kafkapy._core.types import FileRegion
from kafkapy.protocol.fields import (
    _FIXED_CODES,
    _I16,
    _I32,
    _UVARINT_1,
    _coerce_fixed,
    _FieldSpec,
    _split_fields,
    _tagged_default,
    unsigned_varint_bytes,
)


class RecordsRegions:
    """A ``records`` value assembled from byte strings and file regions.

    ``size`` is the total byte count of ``parts`` (it becomes the length
    prefix); FileRegions are sent by the processor with ``os.sendfile``.
    """

    __slots__ = ("parts", "size")

    def __init__(self, parts: list, size: int) -> None:
        self.parts = parts
        self.size = size

    def __repr__(self) -> str:
        return f"RecordsRegions(parts={self.parts!r}, size={self.size})"


class Parts:
    """Accumulator for an encoded message: bytes plus FileRegions.

    Every byte goes into one ``bytearray`` (``buf``); a FileRegion is
    remembered with the position in ``buf`` where it belongs, so writers
    append with ``buf += ...`` (no list of small bytes objects) and
    ``parts()`` cuts ``buf`` only at region boundaries.
    Owned by the single caller building one message; never shared.
    """

    __slots__ = ("buf", "_regions", "_region_bytes")

    def __init__(self) -> None:
        self.buf = bytearray()
        self._regions: list[tuple[int, FileRegion]] = []
        self._region_bytes = 0

    def write(self, data) -> None:
        self.buf += data

    def region(self, region: FileRegion) -> None:
        self._regions.append((len(self.buf), region))
        self._region_bytes += region.length

    @property
    def size(self) -> int:
        return len(self.buf) + self._region_bytes

    def parts(self) -> list:
        """The message as ``bytes`` and ``FileRegion`` parts, in order;
        adjacent bytes are merged into one object and empty ones dropped."""
        buf = self.buf
        if not self._regions:
            return [bytes(buf)] if buf else []
        out: list = []
        start = 0
        for position, region in self._regions:
            if position > start:
                out.append(bytes(buf[start:position]))
                start = position
            out.append(region)
        if start < len(buf):
            out.append(bytes(buf[start:]))
        return out

# ---------------------------------------------------------------------------
# Writers: writer(out: Parts, buf: bytearray, value) -> None
# (buf is out.buf, passed along to save an attribute lookup per field)
# ---------------------------------------------------------------------------


def _write_fixed_single(code: str, kafka_type: str):
    pack = struct.Struct(">" + code).pack
    coerce = _coerce_fixed(kafka_type)

    def write(out, buf, value):
        try:
            buf += pack(value)
        except (struct.error, TypeError):
            # kio's timedelta/datetime/None values; plain ints never get here.
            buf += pack(coerce(value))

    return write


def _write_legacy_string(nullable: bool):
    pack_i16 = _I16.pack

    def write(out, buf, value):
        if value is None:
            if not nullable:
                raise TypeError("None for a non-nullable string")
            buf += b"\xff\xff"
            return
        data = value.encode()
        buf += pack_i16(len(data))
        buf += data

    return write


def _write_compact_string(nullable: bool):
    table = _UVARINT_1

    def write(out, buf, value):
        if value is None:
            if not nullable:
                raise TypeError("None for a non-nullable string")
            buf.append(0)
            return
        data = value.encode()
        n = len(data) + 1
        buf += table[n] if n < 128 else unsigned_varint_bytes(n)
        buf += data

    return write


def _bytes_len(value) -> int:
    return value.nbytes if type(value) is memoryview else len(value)


def _write_bytes(flexible: bool, nullable: bool, records: bool):
    pack_i32 = _I32.pack

    def write_prefix(buf, n):
        if flexible:
            buf += unsigned_varint_bytes(n + 1)
        else:
            buf += pack_i32(n)

    def write(out, buf, value):
        if value is None:
            if not nullable:
                raise TypeError("None for non-nullable bytes")
            if flexible:
                buf.append(0)
            else:
                buf += b"\xff\xff\xff\xff"
            return
        if records and type(value) is RecordsRegions:
            write_prefix(buf, value.size)
            # A wrong size would desynchronise the client's parser for the
            # rest of the connection, so it is checked, not trusted.
            total = 0
            for part in value.parts:
                if type(part) is FileRegion:
                    out.region(part)
                    total += part.length
                else:
                    buf += part
                    total += _bytes_len(part)
            if total != value.size:
                raise ValueError(f"RecordsRegions.size {value.size} != {total} bytes of parts")
            return
        write_prefix(buf, _bytes_len(value))
        buf += value

    return write


_ZERO_UUID_BYTES = bytes(16)


def _write_uuid(out, buf, value):
    buf += _ZERO_UUID_BYTES if value is None else value.bytes


def _primitive_writer(kafka_type: str, flexible: bool, nullable: bool):
    if kafka_type in _FIXED_CODES:
        return _write_fixed_single(_FIXED_CODES[kafka_type], kafka_type)
    if kafka_type == "legacy_string":
        return _write_legacy_string(nullable)
    if kafka_type == "string":
        return _write_compact_string(nullable) if flexible else _write_legacy_string(nullable)
    if kafka_type in ("bytes", "records"):
        return _write_bytes(flexible, nullable, kafka_type == "records")
    if kafka_type == "uuid":
        return _write_uuid
    raise TypeError(f"unsupported kafka_type {kafka_type!r}")


def _array_writer(spec: _FieldSpec, flexible: bool):
    nullable = spec.nullable
    pack_i32 = _I32.pack
    table = _UVARINT_1

    def write_count(buf, items):
        if items is None:
            if not nullable:
                raise TypeError(f"None for non-nullable array {spec.name}")
            if flexible:
                buf.append(0)
            else:
                buf += b"\xff\xff\xff\xff"
            return False
        n = len(items)
        if flexible:
            buf += table[n + 1] if n < 127 else unsigned_varint_bytes(n + 1)
        else:
            buf += pack_i32(n)
        return True

    if spec.entity is not None:
        write_elem = _entity_writer(spec.entity)

        def write_entity_array(out, buf, items):
            if write_count(buf, items):
                for item in items:
                    write_elem(out, buf, item)

        return write_entity_array

    if spec.kafka_type in _FIXED_CODES:
        code = _FIXED_CODES[spec.kafka_type]
        coerce = _coerce_fixed(spec.kafka_type)
        # One Struct packs the count prefix and all elements; arrays of
        # broker ids (replicas, ISR) are written 3x per Metadata partition,
        # and a cached packer halves their cost against formatting a struct
        # format per call.  Cached for counts whose compact prefix is one
        # byte (< 127 elements): bounded cache, covers real replica lists.
        packers: dict[int, object] = {}
        prefix_code = "B" if flexible else "i"

        def packer_for(n):
            packer = packers.get(n)
            if packer is None:
                packer = struct.Struct(">%s%d%s" % (prefix_code, n, code)).pack
                if n < 127:
                    packers[n] = packer
            return packer

        def write_fixed_array(out, buf, items):
            if items is None:
                write_count(buf, None)
                return
            n = len(items)
            if flexible and n >= 127:
                write_count(buf, items)
                buf += struct.pack(">%d%s" % (n, code), *[coerce(v) for v in items])
                return
            pack = packer_for(n)
            prefix = n + 1 if flexible else n
            try:
                buf += pack(prefix, *items)
            except (struct.error, TypeError):
                buf += pack(prefix, *[coerce(v) for v in items])

        return write_fixed_array

    write_elem = _primitive_writer(spec.kafka_type, flexible, spec.elem_nullable)

    def write_array(out, buf, items):
        if write_count(buf, items):
            for item in items:
                write_elem(out, buf, item)

    return write_array


def _field_writer(spec: _FieldSpec, flexible: bool):
    if spec.array:
        return _array_writer(spec, flexible)
    if spec.entity is not None:
        write_entity = _entity_writer(spec.entity)
        if not spec.nullable:
            return write_entity

        def write_nullable_entity(out, buf, value):
            if value is None:
                buf.append(0xFF)
            else:
                buf.append(1)
                write_entity(out, buf, value)

        return write_nullable_entity
    return _primitive_writer(spec.kafka_type, flexible, spec.nullable)


def _write_group(codes: list[str], kafka_types: list[str]):
    pack = struct.Struct(">" + "".join(codes)).pack
    coercers = [_coerce_fixed(t) for t in kafka_types]

    def write(out, buf, values):
        try:
            buf += pack(*values)
        except (struct.error, TypeError):
            buf += pack(*[c(v) for c, v in zip(coercers, values)])

    return write


class _WritePlan:
    __slots__ = ("steps", "flexible", "tagged", "writer")


_WRITE_PLANS: dict[type, _WritePlan] = {}


def _write_plan(cls) -> _WritePlan:
    plan = _WRITE_PLANS.get(cls)
    if plan is not None:
        return plan
    flexible, plain, tagged = _split_fields(cls)

    steps: list = []
    run: list[_FieldSpec] = []

    def flush_run():
        if not run:
            return
        names = [s.name for s in run]
        if len(run) == 1:
            steps.append(
                (attrgetter(names[0]), _write_fixed_single(_FIXED_CODES[run[0].kafka_type], run[0].kafka_type))
            )
        else:
            steps.append(
                (attrgetter(*names), _write_group([_FIXED_CODES[s.kafka_type] for s in run], [s.kafka_type for s in run]))
            )
        run.clear()

    for spec in plain:
        if not spec.array and spec.entity is None and spec.kafka_type in _FIXED_CODES:
            run.append(spec)
            continue
        flush_run()
        steps.append((attrgetter(spec.name), _field_writer(spec, flexible)))
    flush_run()

    tagged_steps = []
    for spec in tagged:
        write = _field_writer(spec, flexible)
        default = _tagged_default(spec)
        scratch = Parts()
        write(scratch, scratch.buf, default)
        tagged_steps.append((spec.tag, attrgetter(spec.name), write, default, bytes(scratch.buf)))

    plan = _WritePlan()
    plan.steps = steps
    plan.flexible = flexible
    plan.tagged = tagged_steps
    _WRITE_PLANS[cls] = plan
    plan.writer = _make_entity_writer(plan)
    return plan


def _entity_writer(cls):
    return _write_plan(cls).writer


def _make_entity_writer(plan: _WritePlan):
    steps = plan.steps
    tagged = plan.tagged

    if not plan.flexible:

        def write_entity(out, buf, obj):
            for get, write in steps:
                write(out, buf, get(obj))

        return write_entity

    if not tagged:

        def write_entity(out, buf, obj):
            for get, write in steps:
                write(out, buf, get(obj))
            buf.append(0)  # empty tag buffer

        return write_entity

    def write_entity(out, buf, obj):
        for get, write in steps:
            write(out, buf, get(obj))
        present = None
        for tag, get, write, default, default_bytes in tagged:
            value = get(obj)
            if value is default or value == default:
                continue
            scratch = Parts()
            write(scratch, scratch.buf, value)
            data = bytes(scratch.buf)
            # Written only when it differs from the default, as Kafka does:
            # librdkafka 2.0.2 cannot parse an ApiVersions v3 response with a
            # default-valued tag followed by another tag.
            if data == default_bytes:
                continue
            if present is None:
                present = []
            present.append((tag, data))
        if present is None:
            buf.append(0)
            return
        buf += unsigned_varint_bytes(len(present))
        for tag, data in present:
            buf += unsigned_varint_bytes(tag)
            buf += unsigned_varint_bytes(len(data))
            buf += data

    return write_entity


def encode(entity, out: Parts, cls=None) -> None:
    """Append the encoding of ``entity`` to ``out``.

    ``cls`` is the kio schema class to encode as; by default
    ``type(entity)`` (pass it when ``entity`` is a stand-in object).
    """
    _write_plan(cls or type(entity)).writer(out, out.buf, entity)


def encode_to_bytes(entity, cls=None) -> bytes:
    """Encode to one ``bytes`` object (no RecordsRegions with file regions)."""
    out = Parts()
    encode(entity, out, cls)
    if out._regions:
        raise ValueError("message contains file regions; use encode() with Parts")
    return bytes(out.buf)
