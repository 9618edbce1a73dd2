"""Kafka's ``ConfigDef`` machinery, shared by both config tables: the value
types (``ConfigDef.Type``) and importance levels, ``NO_DEFAULT``, the errors
(``ConfigException``; ``InvalidConfigError``, defined by storage, is imported
from here), ``Password`` (``secret``: the text of a value that may be one),
the validators (``Range``, ``ValidString``, ``ValidList``, ...), parsing and
formatting of one value (``parse_typed``, ``format_value``) and the records
the tables are made of (``ConfigKey`` for a broker key, ``TopicConfigKey`` for
a topic key).

Parsing follows Kafka's ``ConfigDef.parseType``: values are trimmed; booleans
are ``true``/``false`` in any case; ``int``/``short``/``long`` are decimal with
an optional sign and must fit 32/16/64 bits; ``list`` is comma-separated with
whitespace around commas ignored (an empty string is an empty list).  Errors
use Kafka's wording: ``Invalid value X for configuration Y: reason``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Optional

from kafkapy.protocol.java_text import java_double
from kafkapy.storage.config import InvalidConfigError  # noqa: F401  (raised by the tables' checks, imported from here)

# ---------------------------------------------------------------------------
# Types, importance, errors
# ---------------------------------------------------------------------------

BOOLEAN = "boolean"
INT = "int"
SHORT = "short"
LONG = "long"
DOUBLE = "double"
STRING = "string"
LIST = "list"
PASSWORD = "password"
CLASS = "class"

HIGH = "high"
MEDIUM = "medium"
LOW = "low"

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_BITS = {SHORT: 16, INT: 32, LONG: 64}


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


# A key whose default is NO_DEFAULT must be set (Kafka's NO_DEFAULT_VALUE).
NO_DEFAULT = _NoDefault()


class ConfigException(Exception):
    """A bad broker configuration (Kafka's ``ConfigException``).

    ``ConfigException(message)`` or ``ConfigException(name, value, reason)``;
    the latter reads "Invalid value V for configuration N: reason".
    """

    def __init__(self, name_or_message: str, value: Any = None, reason: Optional[str] = None,
                 *, has_value: Optional[bool] = None):
        if has_value is None:
            has_value = value is not None or reason is not None
        if has_value:
            self.name: Optional[str] = name_or_message
            self.value = value
            message = f"Invalid value {value} for configuration {name_or_message}"
            if reason:
                message += f": {reason}"
        else:
            self.name = None
            self.value = None
            message = name_or_message
        super().__init__(message)


class Password:
    """A secret value; its repr never shows the secret (Kafka's ``Password``)."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


def secret(value) -> str | None:
    return value.value if isinstance(value, Password) else value


# ---------------------------------------------------------------------------
# Validators: callables (name, parsed_value) -> None raising ConfigException.
# str() gives the "Valid Values" column of Kafka's docs.
# ---------------------------------------------------------------------------


class Range:
    """Numeric bounds, inclusive (Kafka's ``ConfigDef.Range``)."""

    def __init__(self, min_value=None, max_value=None):
        self.min_value = min_value
        self.max_value = max_value

    @classmethod
    def at_least(cls, min_value) -> "Range":
        return cls(min_value, None)

    @classmethod
    def between(cls, min_value, max_value) -> "Range":
        return cls(min_value, max_value)

    def __call__(self, name: str, value) -> None:
        if self.min_value is not None and value < self.min_value:
            raise ConfigException(name, value, f"Value must be at least {self.min_value}")
        if self.max_value is not None and value > self.max_value:
            raise ConfigException(name, value, f"Value must be no more than {self.max_value}")

    def __str__(self) -> str:
        if self.min_value is None:
            return f"[...,{self.max_value}]"
        if self.max_value is None:
            return f"[{self.min_value},...]"
        return f"[{self.min_value},...,{self.max_value}]"


class ValidString:
    """One of a fixed set of strings, case-sensitive (Kafka's ``ValidString.in``)."""

    def __init__(self, *options: str):
        self.options = tuple(options)

    def __call__(self, name: str, value: str) -> None:
        if value not in self.options:
            raise ConfigException(name, value, "String must be one of: " + ", ".join(self.options))

    def __str__(self) -> str:
        return "[" + ", ".join(self.options) + "]"


class ValidList:
    """Every list element is one of a fixed set (Kafka's ``ValidList.in``)."""

    def __init__(self, *options: str):
        self._element = ValidString(*options)

    def __call__(self, name: str, value: list) -> None:
        for element in value:
            self._element(name, element)

    def __str__(self) -> str:
        return str(self._element)


def _at_least(n):
    return Range.at_least(n)


class GzipLevel:
    """compression.gzip.level: 1..9 or -1, zlib's default (Kafka's GZIP levelValidator)."""

    def __call__(self, name: str, value) -> None:
        if value > 9 or (value < 1 and value != -1):
            raise ConfigException(name, value, "Value must be between 1 and 9 or equal to -1")

    def __str__(self) -> str:
        return "[1,...,9] or -1"


# message.format.version (deprecated; Kafka's MetadataVersionValidator): the
# MetadataVersion strings Kafka 3.9 knows, "0.8.0" .. "4.0-IV1".  A release
# without its "-IVn" names its latest production version (4.0 has none).
_IBP_RELEASES = (
    ("0.8.0", ""), ("0.8.1", ""), ("0.8.2", ""), ("0.9.0", ""), ("0.10.0", "IV1"), ("0.10.1", "IV2"),
    ("0.10.2", "IV0"), ("0.11.0", "IV2"), ("1.0", "IV0"), ("1.1", "IV0"), ("2.0", "IV1"), ("2.1", "IV2"),
    ("2.2", "IV1"), ("2.3", "IV1"), ("2.4", "IV1"), ("2.5", "IV0"), ("2.6", "IV0"), ("2.7", "IV2"),
    ("2.8", "IV1"), ("3.0", "IV1"), ("3.1", "IV0"), ("3.2", "IV0"), ("3.3", "IV3"), ("3.4", "IV0"),
    ("3.5", "IV2"), ("3.6", "IV2"), ("3.7", "IV4"), ("3.8", "IV0"), ("3.9", "IV0"), ("4.0", "IV1"))
_IBP_VERSIONS = frozenset(
    [release for release, _last in _IBP_RELEASES if release != "4.0"]
    + [f"{release}-IV{n}" for release, last in _IBP_RELEASES if last for n in range(int(last[2:]) + 1)])


class MetadataVersionValidator:
    """Kafka's MetadataVersionValidator: a release or one of its "-IVn" names."""

    def __call__(self, name: str, value: str) -> None:
        segments = value.split(".")
        keep = 3 if value.startswith("0.") else 2
        key = value if keep >= len(segments) else ".".join(segments[:keep])
        if key not in _IBP_VERSIONS:
            raise ConfigException(name, value, f"Version {value} is not a valid version")

    def __str__(self) -> str:  # Kafka lists every version it knows
        names = [f"{release}-IV{n}" if last else release
                 for release, last in _IBP_RELEASES for n in range(int(last[2:]) + 1 if last else 1)]
        return "[" + ", ".join(names) + "]"


_metadata_version = MetadataVersionValidator()


# ---------------------------------------------------------------------------
# Keys and parsing
# ---------------------------------------------------------------------------

# Java's Integer.parseInt/Long.parseLong: optional sign then ASCII digits only
# (Python's int() would also take "1_000", " 7 " and non-ASCII digits).
_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")
_DOUBLE_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[dDfF]?\Z"
                        r"|[+-]?(?:Infinity|NaN)\Z")
_LIST_SPLIT_RE = re.compile(r"\s*,\s*")


def parse_typed(name: str, type_: str, raw: Any) -> Any:
    """Parse one raw value as Kafka's ``ConfigDef.parseType`` does.

    ``raw`` is normally a string; already-typed values (from code) are
    accepted when they are of the right Python type.
    """
    if raw is None:
        return None
    if not isinstance(raw, str):
        return _coerce_typed(name, type_, raw)
    trimmed = raw.strip()
    if type_ == BOOLEAN:
        lowered = trimmed.lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
        raise ConfigException(name, raw, "Expected value to be either true or false")
    if type_ in _BITS:
        if not _INTEGER_RE.match(trimmed):
            raise ConfigException(name, raw, f"Not a number of type {type_.upper()}")
        value = int(trimmed)
        bits = _BITS[type_]
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise ConfigException(name, raw, f"Not a number of type {type_.upper()}")
        return value
    if type_ == DOUBLE:
        if not _DOUBLE_RE.match(trimmed):
            raise ConfigException(name, raw, "Not a number of type DOUBLE")
        return float(trimmed.rstrip("dDfF").replace("Infinity", "inf"))
    if type_ == LIST:
        if not trimmed:
            return []
        return _LIST_SPLIT_RE.split(trimmed)
    if type_ == PASSWORD:
        return Password(trimmed)
    if type_ in (STRING, CLASS):
        return trimmed
    raise ConfigException(name, raw, f"Unknown type {type_}")


def _coerce_typed(name: str, type_: str, value: Any) -> Any:
    if type_ == BOOLEAN and isinstance(value, bool):
        return value
    if type_ in _BITS and isinstance(value, int) and not isinstance(value, bool):
        return parse_typed(name, type_, str(value))
    if type_ == DOUBLE and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if type_ == LIST and isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value]
    if type_ == PASSWORD and isinstance(value, Password):
        return value
    if type_ in (STRING, CLASS, PASSWORD):
        return parse_typed(name, type_, str(value))
    raise ConfigException(name, value, f"Expected value of type {type_}")


def format_value(type_: str, value: Any) -> Optional[str]:
    """The string a properties file would hold for a parsed value (None for null)."""
    if value is None or value is NO_DEFAULT:
        return None
    if type_ == BOOLEAN:
        return "true" if value else "false"
    if type_ == LIST:
        return ",".join(value)
    if type_ == PASSWORD:
        return value.value if isinstance(value, Password) else str(value)
    if type_ == DOUBLE:
        return java_double(float(value))
    return str(value)


def parse_checked(name: str, type_: str, validator, raw: Any) -> Any:
    """``raw`` parsed as ``type_`` and, unless null, passed through ``validator``
    (ConfigDef's parse then ensureValid): a broker key's and a topic key's parse."""
    value = parse_typed(name, type_, raw)
    if value is not None and validator is not None:
        validator(name, value)
    return value


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    """One broker setting (Kafka's ``ConfigDef.ConfigKey``)."""

    name: str
    type: str
    default: Any
    validator: Optional[Callable[[str, Any], None]]
    importance: str
    doc: str
    # Section of server.properties the key is rendered under.
    group: str = "Server Basics"

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    def parse(self, raw: Any) -> Any:
        return parse_checked(self.name, self.type, self.validator, raw)

    def default_string(self) -> Optional[str]:
        return format_value(self.type, self.default)


@dataclasses.dataclass(frozen=True)
class TopicConfigKey:
    """One topic-level setting (Kafka's ``LogConfig``) and the broker key behind its default."""

    name: str
    type: str
    default: Any
    validator: Optional[Callable[[str, Any], None]]
    # Broker key whose (derived) value is this topic key's default; None if
    # the topic key has no broker-level synonym.
    synonym: Optional[str]
    doc: str

    def parse(self, raw: Any) -> Any:
        return parse_checked(self.name, self.type, self.validator, raw)
