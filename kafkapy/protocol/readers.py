"""The codec's decode side: a reader per kafka_type, a read plan per kio
class (its steps, consecutive fixed-width fields read with one Struct, tagged
fields by tag, the slot setters) and ``decode``, which turns every short read
or bad length into ``DecodeError``. The value domain is ``codec``'s docstring.

``_READ_PLANS`` is filled lazily and idempotently (see ``codec``); the plans
are built once per class and shared.
"""

from __future__ import annotations

import struct
import uuid

from kafkapy.protocol.fields import (
    _FIXED_CODES,
    _I16,
    _I32,
    ZERO_UUID,
    DecodeError,
    _FieldSpec,
    _split_fields,
    _tagged_default,
    read_unsigned_varint,
)
from kafkapy.protocol.writers import Parts, _field_writer


# ---------------------------------------------------------------------------
# Readers: reader(buf: memoryview, offset) -> (value, new_offset)
# buf is a 1-D unsigned-byte memoryview; struct.error / IndexError /
# ValueError raised by short reads are turned into DecodeError by decode().
# ---------------------------------------------------------------------------


def _read_legacy_string(nullable: bool):
    unpack_i16 = _I16.unpack_from

    def read(buf, off):
        (n,) = unpack_i16(buf, off)
        off += 2
        if n < 0:
            if n == -1 and nullable:
                return None, off
            raise DecodeError(f"invalid string length {n}")
        end = off + n
        if end > len(buf):
            raise DecodeError(f"string length {n} exceeds remaining bytes")
        return str(buf[off:end], "utf-8"), end

    return read


def _read_compact_string(nullable: bool):
    def read(buf, off):
        n, off = read_unsigned_varint(buf, off)
        if n == 0:
            if nullable:
                return None, off
            raise DecodeError("null for a non-nullable string")
        end = off + n - 1
        if end > len(buf):
            raise DecodeError(f"string length {n - 1} exceeds remaining bytes")
        return str(buf[off:end], "utf-8"), end

    return read


def _read_legacy_bytes(nullable: bool, as_view: bool):
    unpack_i32 = _I32.unpack_from

    def read(buf, off):
        (n,) = unpack_i32(buf, off)
        off += 4
        if n < 0:
            if n == -1 and nullable:
                return None, off
            raise DecodeError(f"invalid bytes length {n}")
        end = off + n
        if end > len(buf):
            raise DecodeError(f"bytes length {n} exceeds remaining bytes")
        view = buf[off:end]
        return (view if as_view else view.tobytes()), end

    return read


def _read_compact_bytes(nullable: bool, as_view: bool):
    def read(buf, off):
        n, off = read_unsigned_varint(buf, off)
        if n == 0:
            if nullable:
                return None, off
            raise DecodeError("null for non-nullable bytes")
        end = off + n - 1
        if end > len(buf):
            raise DecodeError(f"bytes length {n - 1} exceeds remaining bytes")
        view = buf[off:end]
        return (view if as_view else view.tobytes()), end

    return read


def _read_uuid(buf, off):
    end = off + 16
    if end > len(buf):
        raise DecodeError("truncated uuid")
    return uuid.UUID(bytes=buf[off:end].tobytes()), end


def _read_fixed(code: str):
    s = struct.Struct(">" + code)
    unpack = s.unpack_from
    size = s.size

    def read(buf, off):
        return unpack(buf, off)[0], off + size

    return read


def _primitive_reader(kafka_type: str, flexible: bool, nullable: bool):
    if kafka_type in _FIXED_CODES:
        return _read_fixed(_FIXED_CODES[kafka_type])
    if kafka_type == "legacy_string":
        return _read_legacy_string(nullable)
    if kafka_type == "string":
        return _read_compact_string(nullable) if flexible else _read_legacy_string(nullable)
    if kafka_type in ("bytes", "records"):
        as_view = kafka_type == "records"
        if flexible:
            return _read_compact_bytes(nullable, as_view)
        return _read_legacy_bytes(nullable, as_view)
    if kafka_type == "uuid":
        return _read_uuid
    raise TypeError(f"unsupported kafka_type {kafka_type!r}")


def _read_array_count(flexible: bool, nullable: bool, min_elem_size: int):
    unpack_i32 = _I32.unpack_from

    if flexible:

        def read_count(buf, off):
            n, off = read_unsigned_varint(buf, off)
            if n == 0:
                if nullable:
                    return -1, off
                raise DecodeError("null for a non-nullable array")
            n -= 1
            # Check before allocating: every element takes at least
            # min_elem_size bytes, so a count near 2**32 in a small frame is
            # rejected here instead of becoming a multi-GiB allocation.
            if n * min_elem_size > len(buf) - off:
                raise DecodeError(f"array count {n} exceeds remaining bytes")
            return n, off

    else:

        def read_count(buf, off):
            (n,) = unpack_i32(buf, off)
            off += 4
            if n < 0:
                if n == -1 and nullable:
                    return -1, off
                raise DecodeError(f"invalid array count {n}")
            if n * min_elem_size > len(buf) - off:
                raise DecodeError(f"array count {n} exceeds remaining bytes")
            return n, off

    return read_count


def _array_reader(spec: _FieldSpec, flexible: bool):
    if spec.entity is not None:
        elem_read = _entity_reader(spec.entity)
        min_size = _read_plan(spec.entity).min_size
    elif spec.kafka_type in _FIXED_CODES:
        code = _FIXED_CODES[spec.kafka_type]
        min_size = struct.calcsize(">" + code)
        read_count = _read_array_count(flexible, spec.nullable, min_size)
        unpack_from = struct.unpack_from

        def read_fixed_array(buf, off):
            n, off = read_count(buf, off)
            if n < 0:
                return None, off
            # n is bounded by the remaining bytes, so the format and the
            # tuple are bounded by the frame size.
            return unpack_from(">%d%s" % (n, code), buf, off), off + n * min_size

        return read_fixed_array
    else:
        elem_read = _primitive_reader(spec.kafka_type, flexible, spec.elem_nullable)
        min_size = _min_size_primitive(spec.kafka_type, flexible)

    read_count = _read_array_count(flexible, spec.nullable, max(min_size, 1))

    def read_array(buf, off):
        n, off = read_count(buf, off)
        if n < 0:
            return None, off
        items = []
        append = items.append
        for _ in range(n):
            item, off = elem_read(buf, off)
            append(item)
        return tuple(items), off

    return read_array


def _min_size_primitive(kafka_type: str, flexible: bool) -> int:
    if kafka_type in _FIXED_CODES:
        return struct.calcsize(">" + _FIXED_CODES[kafka_type])
    if kafka_type == "uuid":
        return 16
    if kafka_type == "legacy_string":
        return 2
    if flexible:
        return 1
    return 2 if kafka_type == "string" else 4


class _ReadPlan:
    """Compiled read steps for one entity class.

    ``steps``: list of (is_group, reader); a group reader returns a tuple of
    consecutive fixed-width values.  ``setters`` set the slots of a new
    instance in the order values are produced (untagged fields, then tagged
    ones); setting slots directly is ~30% faster than calling the frozen
    dataclass ``__init__`` with keywords.
    """

    __slots__ = ("cls", "steps", "flexible", "tag_readers", "tag_defaults", "setters", "min_size", "reader")


_READ_PLANS: dict[type, _ReadPlan] = {}


def _read_plan(cls) -> _ReadPlan:
    plan = _READ_PLANS.get(cls)
    if plan is not None:
        return plan
    flexible, plain, tagged = _split_fields(cls)

    steps: list = []
    min_size = 0
    run: list[str] = []

    def flush_run():
        nonlocal min_size
        if not run:
            return
        s = struct.Struct(">" + "".join(run))
        unpack = s.unpack_from
        size = s.size
        min_size += size

        def read_group(buf, off):
            return unpack(buf, off), off + size

        steps.append((True, read_group))
        run.clear()

    for spec in plain:
        if not spec.array and spec.entity is None and spec.kafka_type in _FIXED_CODES:
            run.append(_FIXED_CODES[spec.kafka_type])
            continue
        flush_run()
        steps.append((False, _field_reader(spec, flexible)))
        min_size += _field_min_size(spec, flexible)
    flush_run()
    if flexible:
        min_size += 1  # the tag buffer's count

    plan = _ReadPlan()
    plan.cls = cls
    plan.steps = steps
    plan.flexible = flexible
    plan.tag_readers = {s.tag: (i, _field_reader(s, flexible)) for i, s in enumerate(tagged)}
    plan.tag_defaults = [_tagged_default_value(cls, s, flexible) for s in tagged]
    plan.setters = [_slot_setter(cls, s.name) for s in plain + tagged]
    plan.min_size = min_size
    _READ_PLANS[cls] = plan
    plan.reader = _make_entity_reader(plan)
    return plan


def _slot_setter(cls, name: str):
    descriptor = cls.__dict__.get(name)
    if hasattr(descriptor, "__set__"):
        return descriptor.__set__  # slots: bypasses the frozen __setattr__
    setattr_ = object.__setattr__
    return lambda obj, value: setattr_(obj, name, value)


def _field_min_size(spec: _FieldSpec, flexible: bool) -> int:
    if spec.array:
        return 1 if flexible else 4
    if spec.entity is not None:
        return 1 if spec.nullable else _read_plan(spec.entity).min_size
    return _min_size_primitive(spec.kafka_type, flexible)


def _field_reader(spec: _FieldSpec, flexible: bool):
    if spec.array:
        return _array_reader(spec, flexible)
    if spec.entity is not None:
        read_entity = _entity_reader(spec.entity)
        if not spec.nullable:
            return read_entity

        # KIP-893 nullable struct: an int8 marker, -1 for null.
        def read_nullable_entity(buf, off):
            marker = buf[off]
            if marker >= 0x80:
                return None, off + 1
            return read_entity(buf, off + 1)

        return read_nullable_entity
    return _primitive_reader(spec.kafka_type, flexible, spec.nullable)


def _entity_reader(cls):
    return _read_plan(cls).reader


def _make_entity_reader(plan: _ReadPlan):
    cls = plan.cls
    steps = plan.steps
    setters = plan.setters
    new = object.__new__
    flexible = plan.flexible
    tag_readers = plan.tag_readers
    tag_defaults = plan.tag_defaults

    def read_entity(buf, off):
        values: list = []
        append = values.append
        extend = values.extend
        for is_group, read in steps:
            value, off = read(buf, off)
            if is_group:
                extend(value)
            else:
                append(value)
        if flexible:
            # Nearly every tag buffer is empty (a single 0 byte).
            if buf[off] == 0:
                off += 1
                values += tag_defaults
            else:
                tag_values = tag_defaults[:]
                off = _read_tag_buffer(buf, off, tag_readers, tag_values)
                values += tag_values
        obj = new(cls)
        for setter, value in zip(setters, values):
            setter(obj, value)
        return obj, off

    return read_entity


def _read_tag_buffer(buf, off, tag_readers, tag_values) -> int:
    count, off = read_unsigned_varint(buf, off)
    # A tag takes at least 2 bytes (tag and size varints).
    if count * 2 > len(buf) - off:
        raise DecodeError(f"tag count {count} exceeds remaining bytes")
    for _ in range(count):
        tag, off = read_unsigned_varint(buf, off)
        size, off = read_unsigned_varint(buf, off)
        end = off + size
        if end > len(buf):
            raise DecodeError(f"tagged field {tag} size {size} exceeds remaining bytes")
        known = tag_readers.get(tag)
        if known is not None:
            index, read = known
            # Read within the tag's declared size, so a lying size cannot make
            # the field consume bytes that belong to the next one.
            tag_values[index], _ = read(buf[:end], off)
        # Unknown tags are skipped (KIP-482): newer clients may send them.
        off = end
    return off


def _tagged_default_value(cls, spec: _FieldSpec, flexible: bool):
    """The decoded value of an absent tagged field, in our value domain."""
    default = _tagged_default(spec)
    if default is None:
        return ZERO_UUID if spec.kafka_type == "uuid" else None
    out = Parts()
    _field_writer(spec, flexible)(out, out.buf, default)
    value, _ = _field_reader(spec, flexible)(memoryview(bytes(out.buf)), 0)
    if isinstance(value, memoryview):
        value = value.tobytes()
    return value


_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError)


def decode(cls, buf, offset: int = 0):
    """Decode one ``cls`` message from ``buf`` at ``offset``.

    Returns ``(entity, new_offset)``; bytes after ``new_offset`` are left to
    the caller.  Raises only ``DecodeError`` on malformed input.
    """
    read = _read_plan(cls).reader
    if type(buf) is not memoryview:
        buf = memoryview(buf)
    if buf.ndim != 1 or buf.format != "B":
        buf = buf.cast("B")
    if offset < 0 or offset > len(buf):
        raise DecodeError(f"offset {offset} outside buffer of {len(buf)} bytes")
    try:
        return read(buf, offset)
    except DecodeError:
        raise
    except _DECODE_ERRORS as e:  # short reads and invalid UTF-8
        raise DecodeError(f"malformed {cls.__name__}: {e}") from None

