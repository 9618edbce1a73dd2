"""Test helpers: the kio classes under test, Hypothesis strategies for
entities in kafkapy's value domain, and conversion to kio's value domain.

Strategies are built from the same field metadata the codec uses
(``kafka_type``, ``tag``, the type annotation's optionality), but written
independently of the codec so that a misreading of the schema in one does not
hide in the other.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib
import pkgutil
import types
import typing
import uuid

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as KioErrorCode

APIS = (
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "create_topics",
    "delete_topics",
    "init_producer_id",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "describe_groups",
    "list_groups",
    "delete_groups",
    "describe_configs",
    "create_partitions",
)


def versions(api: str) -> list[int]:
    mod = importlib.import_module(f"kio.schema.{api}")
    return sorted(int(m.name[1:]) for m in pkgutil.iter_modules(mod.__path__) if m.name[0] == "v")


def top_class(api: str, version: int, kind: str):
    mod = importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")
    for obj in vars(mod).values():
        if (
            isinstance(obj, type)
            and dataclasses.is_dataclass(obj)
            and obj.__module__ == mod.__name__
            and getattr(obj, "__type__", None) is not None
            and obj.__type__.name == kind
        ):
            return obj
    raise LookupError(f"{api} v{version} {kind}")


def all_classes(kind: str | None = None) -> list[type]:
    kinds = (kind,) if kind else ("request", "response")
    return [top_class(a, v, k) for a in APIS for v in versions(a) for k in kinds]


def class_id(cls) -> str:
    return f"{cls.__module__.split('.')[2]}.v{cls.__version__}.{cls.__type__.name}"


# --- field introspection (independent of the codec's) ---------------------


def _optional(tp):
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp):
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return inner, True
    return tp, False


@functools.cache
def field_info(cls):
    """[(name, kafka_type, nullable, is_array, elem_type, elem_nullable, tagged)]."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        tp, nullable = _optional(hints[f.name])
        is_array = typing.get_origin(tp) is tuple
        elem, elem_nullable = _optional(typing.get_args(tp)[0]) if is_array else (tp, False)
        kafka_type = f.metadata.get("kafka_type")
        if cls.__name__ == "RequestHeader" and f.name == "client_id":
            kafka_type = "legacy_string"
        out.append((f.name, kafka_type, nullable, is_array, elem, elem_nullable, "tag" in f.metadata))
    return tuple(out)


# --- strategies in kafkapy's value domain ----------------------------------

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
    "timedelta_i32": (-(2**31), 2**31 - 1),
}
# kio represents these as datetime.timedelta / aware datetime, whose ranges
# are narrower than int64 milliseconds (timedelta: +-999999999 days; datetime:
# year 1..9999, and kio refuses negative timestamps).
# kio's writer goes through float seconds (timedelta.total_seconds() * 1000),
# exact only while the microsecond count fits in 53 bits; kafkapy's codec
# takes any int64 (tested separately).
_TIMEDELTA_I64 = (-(2**53 // 1000), 2**53 // 1000)
_DATETIME_I64 = (0, 253_402_300_799_000)

KNOWN_ERROR_CODES = sorted(int(e) for e in KioErrorCode)


def _primitive(kafka_type: str, nullable: bool, small: bool):
    if kafka_type in _INT_RANGES:
        lo, hi = _INT_RANGES[kafka_type]
        return st.integers(lo, hi)
    if kafka_type == "timedelta_i64":
        return st.integers(*_TIMEDELTA_I64)
    if kafka_type == "datetime_i64":
        s = st.integers(*_DATETIME_I64)
        return st.one_of(st.just(-1), s) if nullable else s
    if kafka_type == "error_code":
        return st.sampled_from(KNOWN_ERROR_CODES)
    if kafka_type == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "uuid":
        return st.one_of(st.just(uuid.UUID(int=0)), st.uuids())
    size = 8 if small else 40
    if kafka_type in ("string", "legacy_string"):
        s = st.text(max_size=size)
    elif kafka_type in ("bytes", "records"):
        s = st.binary(max_size=size * 4 if kafka_type == "records" else size)
    else:
        raise AssertionError(kafka_type)
    return st.one_of(st.none(), s) if nullable else s


def entities(cls, depth: int = 0):
    """Strategy for instances of ``cls`` with values in kafkapy's domain."""
    small = depth > 0
    kwargs = {}
    for name, kafka_type, nullable, is_array, elem, elem_nullable, _tagged in field_info(cls):
        if dataclasses.is_dataclass(elem):
            inner = entities(elem, depth + 1)
        else:
            inner = _primitive(kafka_type, elem_nullable if is_array else nullable, small)
        if is_array:
            inner = st.lists(inner, max_size=2 if depth else 3).map(tuple)
            if nullable:
                inner = st.one_of(st.none(), inner)
        elif dataclasses.is_dataclass(elem) and nullable:
            inner = st.one_of(st.none(), inner)
        kwargs[name] = inner
    return st.builds(cls, **kwargs)


# --- conversion to kio's value domain (for cross-checking with kio) -------

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def to_kio(entity):
    cls = type(entity)
    kwargs = {}
    for name, kafka_type, nullable, is_array, elem, elem_nullable, _tagged in field_info(cls):
        value = getattr(entity, name)
        if value is None:
            kwargs[name] = None
        elif is_array:
            kwargs[name] = tuple(_value_to_kio(v, kafka_type, elem) for v in value)
        else:
            kwargs[name] = _value_to_kio(value, kafka_type, elem)
    return cls(**kwargs)


def _value_to_kio(value, kafka_type, elem):
    if dataclasses.is_dataclass(elem):
        return None if value is None else to_kio(value)
    if kafka_type == "error_code":
        return KioErrorCode(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64":
        return None if value == -1 else _EPOCH + datetime.timedelta(milliseconds=value)
    if kafka_type == "uuid":
        return None if value.int == 0 else value
    if kafka_type == "records":
        return bytes(value)
    return value


# --- a seeded generator (no Hypothesis) for fast bulk fuzzing ---------------


def random_entity(cls, rng, min_items: int = 0, depth: int = 0, max_items: int = 3):
    """A random valid instance of ``cls``; arrays get min_items..max_items elements."""
    kwargs = {}
    for name, kafka_type, nullable, is_array, elem, elem_nullable, _tagged in field_info(cls):

        def one(elem_nullable_=elem_nullable if is_array else nullable):
            if dataclasses.is_dataclass(elem):
                if not is_array and nullable and rng.random() < 0.3:
                    return None
                return random_entity(elem, rng, min_items, depth + 1, max_items)
            return _random_primitive(kafka_type, elem_nullable_, rng)

        if is_array:
            if nullable and rng.random() < 0.1:
                kwargs[name] = None
            else:
                kwargs[name] = tuple(one() for _ in range(rng.randint(min_items, max_items if depth < 2 else min(2, max_items))))
        else:
            kwargs[name] = one()
    return cls(**kwargs)


def _random_primitive(kafka_type, nullable, rng):
    if nullable and kafka_type not in ("uuid", "datetime_i64") and rng.random() < 0.15:
        return None
    if kafka_type in _INT_RANGES:
        lo, hi = _INT_RANGES[kafka_type]
        return rng.choice((0, -1, 1, lo, hi, rng.randint(lo, hi))) if lo < 0 else rng.randint(lo, hi)
    if kafka_type == "timedelta_i64":
        return rng.randint(*_TIMEDELTA_I64)
    if kafka_type == "datetime_i64":
        return rng.randint(*_DATETIME_I64)
    if kafka_type == "error_code":
        return rng.choice(KNOWN_ERROR_CODES)
    if kafka_type == "float64":
        return rng.uniform(-1e9, 1e9)
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    n = rng.randint(0, 12)
    if kafka_type in ("string", "legacy_string"):
        return "".join(rng.choice("abcxyz-._é€") for _ in range(n))
    return bytes(rng.getrandbits(8) for _ in range(n * 3))
