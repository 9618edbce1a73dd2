"""What the codec's readers and writers share (Kafka's protocol.types: its
Field and Type): a kio class's field specs (``_field_specs``, split into plain
and tagged fields by ``_split_fields``), a tagged field's default, the
fixed-width kafka_types' struct codes, unsigned varints, the millisecond
coercion of kio's timedelta/datetime values, ``ZERO_UUID`` and
``DecodeError``. The codec's contract is ``codec``'s docstring.

No mutable state.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import types
import typing
import uuid

ZERO_UUID = uuid.UUID(int=0)


class DecodeError(Exception):
    """The bytes are not a valid encoding of the requested message."""


# ---------------------------------------------------------------------------
# Primitives
# ---------------------------------------------------------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# struct codes of the fixed-width kafka_types.  Consecutive fixed-width fields
# of an entity are read and written with one Struct call (a Fetch partition
# header is 6 such fields: one unpack_from instead of six).
_FIXED_CODES = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float64": "d",
    "bool": "?",
    "error_code": "h",
    "timedelta_i32": "i",
    "timedelta_i64": "q",
    "datetime_i64": "q",
}

_ONE_US = datetime.timedelta(microseconds=1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

# One-byte varints are by far the most common (lengths+1 and counts+1 below
# 128), so they come from a table.
_UVARINT_1 = [bytes((i,)) for i in range(128)]


def unsigned_varint_bytes(value: int) -> bytes:
    if value < 128:
        if value < 0:
            raise ValueError(f"unsigned varint cannot be negative: {value}")
        return _UVARINT_1[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_unsigned_varint(buf, offset: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (Kafka's 32-bit limit)."""
    try:
        b = buf[offset]
    except IndexError:
        raise DecodeError("truncated varint") from None
    if b < 0x80:
        return b, offset + 1
    value = b & 0x7F
    shift = 7
    end = min(offset + 5, len(buf))
    offset += 1
    while offset < end:
        b = buf[offset]
        offset += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, offset
        shift += 7
    raise DecodeError("varint longer than 5 bytes or truncated")


def _to_ms_int(value) -> int:
    """Convert kio's timedelta/datetime values (or None) to int milliseconds.

    Rounds to the nearest millisecond: kio's reader builds datetimes through
    float seconds, so 15361379169609 ms can come back as ...608.999 ms.
    """
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return (value // _ONE_US + 500) // 1000
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            return round(value.timestamp() * 1000)
        return ((value - _EPOCH) // _ONE_US + 500) // 1000
    return int(value)


def _coerce_fixed(kafka_type: str):
    if kafka_type in ("timedelta_i32", "timedelta_i64", "datetime_i64"):
        return _to_ms_int
    if kafka_type == "float64":
        return float
    if kafka_type == "bool":
        return bool
    return int


# ---------------------------------------------------------------------------
# Field descriptions (built from dataclasses.fields + type hints)
# ---------------------------------------------------------------------------


def _unwrap_optional(tp):
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != len(typing.get_args(tp)) and len(args) == 1:
            return args[0], True
    return tp, False


class _FieldSpec:
    __slots__ = (
        "name",
        "kafka_type",
        "tag",
        "nullable",
        "array",
        "elem_nullable",
        "entity",
        "default",
    )

    def __init__(self, cls, field: dataclasses.Field, hint) -> None:
        self.name = field.name
        self.kafka_type = field.metadata.get("kafka_type")
        self.tag = field.metadata.get("tag")
        self.default = field.default
        top, self.nullable = _unwrap_optional(hint)
        self.array = typing.get_origin(top) is tuple
        if self.array:
            elem = typing.get_args(top)[0]
            elem, self.elem_nullable = _unwrap_optional(elem)
        else:
            elem, self.elem_nullable = top, False
        self.entity = elem if dataclasses.is_dataclass(elem) else None
        if self.entity is None and self.kafka_type is None:
            raise TypeError(f"{cls.__name__}.{field.name}: no kafka_type")
        if cls.__name__ == "RequestHeader" and field.name == "client_id":
            # Kafka keeps RequestHeader.client_id a legacy nullable string even
            # in header v2, so that any broker can read the client id of a
            # request whose version it does not understand.
            self.kafka_type = "legacy_string"
            self.nullable = True


def _field_specs(cls) -> list[_FieldSpec]:
    hints = typing.get_type_hints(cls)
    return [_FieldSpec(cls, f, hints[f.name]) for f in dataclasses.fields(cls)]


def _split_fields(cls):
    """``(flexible, plain fields, tagged fields by tag)`` of a kio class; both plans start here."""
    flexible = bool(getattr(cls, "__flexible__", False))
    specs = _field_specs(cls)
    plain = [s for s in specs if s.tag is None]
    tagged = sorted((s for s in specs if s.tag is not None), key=lambda s: s.tag)
    if tagged and not flexible:
        raise TypeError(f"{cls.__name__}: tagged fields in a non-flexible version")
    return flexible, plain, tagged


_IMPLICIT_DEFAULTS = {
    "string": "",
    "bytes": b"",
    "uuid": ZERO_UUID,
    "bool": False,
    "float64": 0.0,
}


def _tagged_default(spec: _FieldSpec):
    """Kafka's default of a tagged field: the declared one, else the type's
    zero value (0, "", empty array, struct of defaults)."""
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.nullable:
        return None
    if spec.array:
        return ()
    if spec.entity is not None:
        kwargs = {}
        for sub in _field_specs(spec.entity):
            kwargs[sub.name] = _tagged_default(sub)
        return spec.entity(**kwargs)
    return _IMPLICIT_DEFAULTS.get(spec.kafka_type, 0)
