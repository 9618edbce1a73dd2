"""Broker configuration: one table (Kafka's ``ConfigDef``) is the source of truth.

``BROKER_CONFIGS`` declares every broker setting kafkapy reads, with Kafka's
name, type, default, validator, importance and a one-line doc.  Everything
else is derived from it: parsing and validation (``BrokerConfig.from_props``),
the rendered ``server.properties`` (``render_properties``), and the test that
keeps ``config/server.properties`` in step with the table.

``TOPIC_CONFIGS`` is the topic-level table (Kafka's ``LogConfig``): each topic
key names the broker key that supplies its default (its "synonym"), so a topic
without overrides behaves exactly as the broker's ``log.*`` settings say.

Parsing follows Kafka's ``ConfigDef.parseType``: values are trimmed; booleans
are ``true``/``false`` in any case; ``int``/``short``/``long`` are decimal with
an optional sign and must fit 32/16/64 bits; ``list`` is comma-separated with
whitespace around commas ignored (an empty string is an empty list).  Errors
use Kafka's wording: ``Invalid value X for configuration Y: reason``.

Ownership: a ``BrokerConfig`` is built once by the supervisor before it forks
and is never mutated afterwards; children inherit it read-only.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import textwrap
from decimal import Decimal
from collections import namedtuple
from typing import Any, Callable, Iterable, Mapping, Optional

from kafkapy.storage.config import InvalidConfigError  # noqa: F401  (raised here, imported from here)

log = logging.getLogger("kafkapy.config")

__all__ = [
    "BOOLEAN", "INT", "SHORT", "LONG", "DOUBLE", "STRING", "LIST", "PASSWORD", "CLASS",
    "HIGH", "MEDIUM", "LOW", "NO_DEFAULT",
    "ConfigException", "InvalidConfigError", "Password", "Range", "ValidString", "ValidList",
    "ConfigKey", "TopicConfigKey", "Endpoint", "BROKER_CONFIGS", "TOPIC_CONFIGS",
    "BrokerConfig", "load_properties", "parse_properties", "parse_overrides",
    "validate_topic_configs", "topic_config_values", "log_config_for", "render_properties",
]

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


def _metadata_version(name: str, value: str) -> None:
    segments = value.split(".")
    keep = 3 if value.startswith("0.") else 2
    key = value if keep >= len(segments) else ".".join(segments[:keep])
    if key not in _IBP_VERSIONS:
        raise ConfigException(name, value, f"Version {value} is not a valid version")


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
        return _java_double(float(value))
    return str(value)


def _java_double(x: float) -> str:
    """Java's ``Double.toString``: plain decimals for 1e-3 <= |x| < 1e7, otherwise
    "d.dddE<n>" (Double.MAX_VALUE is "1.7976931348623157E308"), as Kafka's
    DescribeConfigs shows a double."""
    if x != x or x in (float("inf"), float("-inf")):
        return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)  # Python's shortest round-trip form is plain decimal here
    sign, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    text = "".join(map(str, digits))
    return ("-" if sign else "") + text[0] + "." + (text[1:] or "0") + "E" + str(len(text) - 1 + exponent)


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
        value = parse_typed(self.name, self.type, raw)
        if value is not None and self.validator is not None:
            self.validator(self.name, value)
        return value

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
        value = parse_typed(self.name, self.type, raw)
        if value is not None and self.validator is not None:
            self.validator(self.name, value)
        return value


# ---------------------------------------------------------------------------
# The broker table
# ---------------------------------------------------------------------------

_SERVER = "Server Basics"
_SOCKET = "Socket Server Settings"
_LOG = "Log Basics"
_FLUSH = "Log Flush Policy"
_RETENTION = "Log Retention Policy"
_CLEANER = "Log Cleaner"
_REPLICATION = "Replication"
_ZOOKEEPER = "ZooKeeper"
_GROUP = "Group Coordinator"
_TXN = "Transaction Coordinator"
_KAFKAPY = "kafkapy"
_SECURITY = "Security"

GROUP_ORDER = (_SERVER, _SOCKET, _SECURITY, _LOG, _FLUSH, _RETENTION, _CLEANER, _REPLICATION,
               _ZOOKEEPER, _GROUP, _TXN, _KAFKAPY)

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
DEFAULT_SECURITY_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

# Kafka's smallest segment: LegacyRecord.RECORD_OVERHEAD_V0 = crc 4 + magic 1 +
# attributes 1 + key length 4 + value length 4 = 14 bytes.
MIN_SEGMENT_BYTES = 14

# 1 MiB of records plus the 12-byte log overhead (offset i64 + size i32).
DEFAULT_MESSAGE_MAX_BYTES = 1024 * 1024 + 12


def _k(name, type_, default, validator, importance, group, doc) -> ConfigKey:
    return ConfigKey(name, type_, default, validator, importance, doc, group)


_BROKER_KEYS = [
    # --- Server Basics
    _k("broker.id", INT, -1, None, HIGH, _SERVER,
       "Id of this broker; must be unique in the cluster. -1: not set."),
    _k("reserved.broker.max.id", INT, 1000, _at_least(0), MEDIUM, _SERVER,
       "Largest broker.id that may be configured by hand."),
    _k("broker.rack", STRING, None, None, MEDIUM, _SERVER,
       "Rack of this broker, used for rack-aware replica placement (e.g. an availability zone)."),
    _k("background.threads", INT, 10, _at_least(1), HIGH, _SERVER,
       "Threads for background work such as deleting expired log files."),
    _k("advertised.host.name", STRING, None, None, HIGH, _SERVER,
       "Deprecated (removed in Kafka 3.0): host given to clients; use advertised.listeners."),
    _k("auto.create.topics.enable", BOOLEAN, True, None, HIGH, _SERVER,
       "Create a topic with num.partitions partitions when a client asks for its metadata."),
    _k("max.request.partition.size.limit", INT, 2000, _at_least(1), MEDIUM, _SERVER,
       "Most partitions one DescribeTopicPartitions response describes (KIP-966)."),
    _k("delete.topic.enable", BOOLEAN, True, None, HIGH, _SERVER,
       "Allow DeleteTopics; when false, deletion requests are refused."),
    _k("controlled.shutdown.enable", BOOLEAN, True, None, MEDIUM, _SERVER,
       "Move partition leadership away before shutting down (cluster mode)."),
    _k("controlled.shutdown.max.retries", INT, 3, None, MEDIUM, _SERVER,
       "How many times a stopping broker asks the controller to move its leaderships before it stops anyway."),
    _k("controlled.shutdown.retry.backoff.ms", LONG, 5000, None, MEDIUM, _SERVER,
       "Wait between controlled shutdown tries (after an error, or with leaderships left to move)."),
    _k("request.timeout.ms", INT, 30000, _at_least(0), HIGH, _SERVER,
       "How long the broker waits for a response to a request it sent itself (controller, replica fetch)."),
    # --- Socket Server Settings
    _k("listeners", STRING, "PLAINTEXT://:9092", None, HIGH, _SOCKET,
       "Comma-separated NAME://host:port endpoints to listen on; an empty host binds all interfaces."),
    _k("advertised.listeners", STRING, None, None, HIGH, _SOCKET,
       "Endpoints published to clients in Metadata responses, if different from listeners."),
    _k("listener.security.protocol.map", STRING, DEFAULT_SECURITY_PROTOCOL_MAP, None, LOW, _SOCKET,
       "NAME:PROTOCOL pairs giving each listener name its security protocol."),
    _k("inter.broker.listener.name", STRING, None, None, MEDIUM, _SOCKET,
       "Listener brokers use to reach each other (controller requests, replica fetches); "
       "unset: the first advertised listener."),
    _k("security.inter.broker.protocol", STRING, "PLAINTEXT",
       ValidString("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), MEDIUM, _SECURITY,
       "Security protocol brokers use to reach each other: the listener named after it (not with "
       "inter.broker.listener.name)."),
    _k("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", None, MEDIUM, _SECURITY,
       "SASL mechanism of the brokers' own connections (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), with the "
       "username and password of the inter-broker listener's JAAS entry."),
    _k("num.network.threads", INT, 3, _at_least(1), HIGH, _SOCKET,
       "Network processor processes that read requests and write responses."),
    _k("num.io.threads", INT, 8, _at_least(1), HIGH, _SOCKET,
       "Request handler worker processes that decode requests and do the disk I/O."),
    _k("queued.max.requests", INT, 500, _at_least(1), HIGH, _SOCKET,
       "Requests that may wait for a handler before processors stop reading more."),
    _k("queued.max.request.bytes", LONG, -1, None, MEDIUM, _SOCKET,
       "Bytes of queued requests allowed before processors stop reading more; -1: no limit."),
    _k("socket.send.buffer.bytes", INT, 102400, None, HIGH, _SOCKET,
       "SO_SNDBUF of accepted sockets; -1: the OS default."),
    _k("socket.receive.buffer.bytes", INT, 102400, None, HIGH, _SOCKET,
       "SO_RCVBUF of accepted sockets; -1: the OS default."),
    _k("socket.request.max.bytes", INT, 104857600, _at_least(1), HIGH, _SOCKET,
       "Largest request accepted; a larger size prefix closes the connection (guards memory)."),
    _k("socket.listen.backlog.size", INT, 50, _at_least(1), MEDIUM, _SOCKET,
       "Backlog of pending connections passed to listen()."),
    _k("connections.max.idle.ms", LONG, 600000, None, MEDIUM, _SOCKET,
       "Connections idle for longer than this are closed."),
    _k("max.connections", INT, INT_MAX, _at_least(0), MEDIUM, _SOCKET,
       "Most connections the broker accepts at once."),
    _k("max.connections.per.ip", INT, INT_MAX, _at_least(0), MEDIUM, _SOCKET,
       "Most connections accepted from one IP address."),
    # Connection limits and client quotas (kafkapy/server/quotas; docs/architecture.md,
    # "Quotas and connection limits"); max.connections and
    # max.connection.creation.rate also as listener.name.<listener>.<key>.
    _k("max.connections.per.ip.overrides", STRING, "", None, MEDIUM, _SOCKET,
       "Per-IP or hostname overrides of max.connections.per.ip: 'hostName:100,127.0.0.1:200'."),
    _k("max.connection.creation.rate", INT, INT_MAX, _at_least(0), MEDIUM, _SOCKET,
       "Most new connections accepted per second by the broker (or a listener); more are delayed."),
    _k("quota.window.num", INT, 11, _at_least(1), LOW, _SOCKET,
       "Samples kept in memory for client quotas."),
    _k("quota.window.size.seconds", INT, 1, _at_least(1), LOW, _SOCKET,
       "Time span of each sample of client quotas."),
    _k("controller.quota.window.num", INT, 11, _at_least(1), LOW, _SOCKET,
       "Samples kept in memory for controller mutation quotas."),
    _k("controller.quota.window.size.seconds", INT, 1, _at_least(1), LOW, _SOCKET,
       "Time span of each sample of controller mutation quotas."),
    _k("fetch.max.bytes", INT, 57671680, _at_least(1024), MEDIUM, _SOCKET,
       "Largest number of bytes returned for one Fetch request."),
    _k("max.incremental.fetch.session.cache.slots", INT, 1000, _at_least(0), MEDIUM, _SOCKET,
       "Most incremental fetch sessions (KIP-227) kept, in 8 shards of slots/8."),
    # Kafka's fixed MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (KIP-227 named it a config).
    _k("min.incremental.fetch.session.eviction.ms", LONG, 120000, _at_least(0), LOW, _SOCKET,
       "A fetch session unused this long may be evicted by any new one."),
    # --- Security (kafkapy.server.security reads them, per listener through
    # listener.name.<listener>.<key> overrides, as Kafka's ListenerName.configPrefix)
    _k("ssl.keystore.type", STRING, "JKS", None, MEDIUM, _SECURITY,
       "Format of the key store; kafkapy reads PEM only (Kafka's ssl.keystore.type=PEM)."),
    _k("ssl.keystore.location", STRING, None, None, HIGH, _SECURITY,
       "PEM file with the private key and its certificate chain."),
    _k("ssl.keystore.password", PASSWORD, None, None, HIGH, _SECURITY,
       "Store password; not used for PEM key stores (Kafka refuses it with PEM)."),
    _k("ssl.keystore.certificate.chain", PASSWORD, None, None, HIGH, _SECURITY,
       "Certificate chain in PEM, given inline instead of ssl.keystore.location."),
    _k("ssl.keystore.key", PASSWORD, None, None, HIGH, _SECURITY,
       "Private key in PEM (PKCS#8, encrypted when ssl.key.password is set), inline."),
    _k("ssl.key.password", PASSWORD, None, None, HIGH, _SECURITY,
       "Password of the private key."),
    _k("ssl.truststore.type", STRING, "JKS", None, MEDIUM, _SECURITY,
       "Format of the trust store; kafkapy reads PEM only."),
    _k("ssl.truststore.location", STRING, None, None, HIGH, _SECURITY,
       "PEM file with the CA certificates client certificates are verified against."),
    _k("ssl.truststore.password", PASSWORD, None, None, HIGH, _SECURITY,
       "Store password; not used for PEM trust stores."),
    _k("ssl.truststore.certificates", PASSWORD, None, None, HIGH, _SECURITY,
       "Trusted certificates in PEM, inline instead of ssl.truststore.location."),
    _k("ssl.client.auth", STRING, "none", ValidString("required", "requested", "none"), MEDIUM, _SECURITY,
       "Client certificates: required, requested (verified when sent) or none."),
    _k("ssl.enabled.protocols", LIST, ["TLSv1.2", "TLSv1.3"], None, MEDIUM, _SECURITY,
       "TLS versions accepted."),
    _k("ssl.protocol", STRING, "TLSv1.3", None, MEDIUM, _SECURITY,
       "TLS protocol of the context (TLSv1.2 or TLSv1.3); ssl.enabled.protocols bounds it."),
    _k("ssl.cipher.suites", LIST, [], None, LOW, _SECURITY,
       "Cipher suites allowed (TLS 1.2 names, OpenSSL or IANA spelling); empty: the defaults."),
    _k("ssl.endpoint.identification.algorithm", STRING, "https", None, LOW, _SECURITY,
       "Host name verification of the peer; a server does not verify client host names."),
    _k("ssl.principal.mapping.rules", STRING, "DEFAULT", None, LOW, _SECURITY,
       "Rules mapping a client certificate's distinguished name to a user name (Kafka's syntax)."),
    _k("sasl.enabled.mechanisms", LIST, ["GSSAPI"], None, MEDIUM, _SECURITY,
       "SASL mechanisms offered on SASL listeners; kafkapy implements PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
       "OAUTHBEARER (unsecured JWS validator)."),
    _k("sasl.jaas.config", PASSWORD, None, None, MEDIUM, _SECURITY,
       "JAAS login module configuration (PLAIN users: user_<name>=\"<password>\")."),
    _k("sasl.server.max.receive.size", INT, 524288, None, LOW, _SECURITY,
       "Largest request accepted before a SASL connection has authenticated."),
    _k("connection.failed.authentication.delay.ms", INT, 100, _at_least(0), LOW, _SECURITY,
       "Delay before a connection that failed authentication is answered and closed."),
    _k("authorizer.class.name", STRING, "",
       ValidString("", "kafka.security.authorizer.AclAuthorizer",
                   "org.apache.kafka.metadata.authorizer.StandardAuthorizer"), LOW, _SECURITY,
       "The authorizer: Kafka's ACL authorizer class name enables ACLs (server/security/authorizer.py)."),
    _k("super.users", STRING, "", None, LOW, _SECURITY,
       "Principals allowed everything, separated by ';' (User:admin;User:broker)."),
    _k("allow.everyone.if.no.acl.found", BOOLEAN, False, None, LOW, _SECURITY,
       "With an authorizer: allow an operation on a resource that has no ACLs at all."),
    _k("connections.max.reauth.ms", LONG, 0, _at_least(0), MEDIUM, _SECURITY,
       "Session lifetime told to SASL clients (KIP-368); a connection not re-authenticated within it is "
       "closed on its next request; 0: sessions do not expire. Per listener and mechanism as "
       "listener.name.<l>.<mechanism>.connections.max.reauth.ms."),
    # --- Log Basics
    _k("log.dirs", LIST, None, None, HIGH, _LOG,
       "Comma-separated directories holding the partition logs; log.dir is used if unset."),
    _k("log.dir", LIST, ["/tmp/kafka-logs"], None, HIGH, _LOG,
       "Directory holding the partition logs when log.dirs is not set."),
    _k("num.partitions", INT, 1, _at_least(1), MEDIUM, _LOG,
       "Partitions of an automatically created topic (and the CreateTopics default)."),
    _k("default.replication.factor", INT, 1, None, MEDIUM, _LOG,
       "Replication factor of an automatically created topic (and the CreateTopics default)."),
    _k("num.recovery.threads.per.data.dir", INT, 1, _at_least(1), HIGH, _LOG,
       "Parallelism per log dir for recovery at start-up and flushing at shutdown."),
    _k("message.max.bytes", INT, DEFAULT_MESSAGE_MAX_BYTES, _at_least(0), HIGH, _LOG,
       "Largest record batch accepted (topic override: max.message.bytes)."),
    _k("log.segment.bytes", INT, 1073741824, _at_least(MIN_SEGMENT_BYTES), HIGH, _LOG,
       "Size at which the active segment is rolled."),
    _k("log.roll.ms", LONG, None, None, HIGH, _LOG,
       "Age of the active segment's first record at which it is rolled; log.roll.hours if unset."),
    _k("log.roll.hours", INT, 168, _at_least(1), HIGH, _LOG,
       "Segment roll age in hours, used when log.roll.ms is unset."),
    _k("log.roll.jitter.ms", LONG, None, None, HIGH, _LOG,
       "Random jitter subtracted from the roll age; log.roll.jitter.hours if unset."),
    _k("log.roll.jitter.hours", INT, 0, _at_least(0), HIGH, _LOG,
       "Roll jitter in hours, used when log.roll.jitter.ms is unset."),
    _k("log.index.size.max.bytes", INT, 10485760, _at_least(4), MEDIUM, _LOG,
       "Preallocated size of each offset and time index; a full index rolls the segment."),
    _k("log.index.interval.bytes", INT, 4096, _at_least(0), MEDIUM, _LOG,
       "Bytes appended between two offset index entries."),
    _k("log.message.timestamp.type", STRING, "CreateTime", ValidString(*TIMESTAMP_TYPES), MEDIUM, _LOG,
       "Whether stored timestamps are the producer's (CreateTime) or the broker's (LogAppendTime)."),
    _k("log.message.timestamp.difference.max.ms", LONG, LONG_MAX, _at_least(0), MEDIUM, _LOG,
       "Largest allowed gap between a CreateTime timestamp and the broker's clock."),
    _k("log.message.timestamp.before.max.ms", LONG, LONG_MAX, _at_least(0), MEDIUM, _LOG,
       "How far a CreateTime timestamp may lie before the broker's clock (KIP-937)."),
    _k("log.message.timestamp.after.max.ms", LONG, LONG_MAX, _at_least(0), MEDIUM, _LOG,
       "How far a CreateTime timestamp may lie after the broker's clock (KIP-937)."),
    _k("log.message.format.version", STRING, "3.0-IV1", _metadata_version, MEDIUM, _LOG,
       "Deprecated since Kafka 3.0: ignored, batches are always stored in format v2."),
    _k("log.message.downconversion.enable", BOOLEAN, True, None, LOW, _LOG,
       "Whether old fetch versions may get records converted to an older format."),
    _k("log.preallocate", BOOLEAN, False, None, MEDIUM, _LOG,
       "Preallocate segment files at their full size on roll."),
    _k("compression.type", STRING, "producer", ValidString(*COMPRESSION_TYPES), HIGH, _LOG,
       "Final compression of stored batches; producer keeps the producer's codec."),
    _k("compression.gzip.level", INT, -1, GzipLevel(), MEDIUM, _LOG,
       "Level of gzip when compression.type recompresses to gzip; -1: zlib's default (6)."),
    _k("compression.lz4.level", INT, 9, Range.between(1, 17), MEDIUM, _LOG,
       "Level of lz4 when compression.type recompresses to lz4."),
    _k("compression.zstd.level", INT, 3, Range.between(-131072, 22), MEDIUM, _LOG,
       "Level of zstd when compression.type recompresses to zstd."),
    _k("min.insync.replicas", INT, 1, _at_least(1), HIGH, _LOG,
       "In-sync replicas required for an acks=all produce to succeed."),
    # --- Log Flush Policy
    _k("log.flush.interval.messages", LONG, LONG_MAX, _at_least(1), HIGH, _FLUSH,
       "Records appended to a partition before its log is fsynced."),
    _k("log.flush.interval.ms", LONG, None, None, HIGH, _FLUSH,
       "Most time a record may stay unflushed; log.flush.scheduler.interval.ms if unset."),
    _k("log.flush.scheduler.interval.ms", LONG, LONG_MAX, None, HIGH, _FLUSH,
       "How often the flusher checks whether any log needs an fsync."),
    _k("log.flush.offset.checkpoint.interval.ms", INT, 60000, _at_least(0), HIGH, _FLUSH,
       "How often recovery-point checkpoints are written."),
    _k("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, _at_least(0), HIGH, _FLUSH,
       "How often log-start-offset checkpoints are written."),
    # --- Log Retention Policy
    _k("log.retention.hours", INT, 168, None, HIGH, _RETENTION,
       "Time-based retention in hours; overridden by log.retention.minutes and log.retention.ms."),
    _k("log.retention.minutes", INT, None, None, HIGH, _RETENTION,
       "Time-based retention in minutes; overridden by log.retention.ms."),
    _k("log.retention.ms", LONG, None, None, HIGH, _RETENTION,
       "Time-based retention in milliseconds; -1: keep forever."),
    _k("log.retention.bytes", LONG, -1, None, HIGH, _RETENTION,
       "Size a partition may reach before its oldest segments are deleted; -1: no limit."),
    _k("log.retention.check.interval.ms", LONG, 300000, _at_least(1), MEDIUM, _RETENTION,
       "How often segments are checked against the retention limits."),
    _k("log.cleanup.policy", LIST, ["delete"], ValidList(*CLEANUP_POLICIES), MEDIUM, _RETENTION,
       "delete: drop old segments; compact: keep the latest record per key."),
    _k("log.segment.delete.delay.ms", LONG, 60000, _at_least(0), HIGH, _RETENTION,
       "Delay between renaming a segment to .deleted and removing its files."),
    _k("log.local.retention.ms", LONG, -2, _at_least(-2), MEDIUM, _RETENTION,
       "Tiered storage: time local segments are kept; -2: retention.ms (tiered storage is off here)."),
    _k("log.local.retention.bytes", LONG, -2, _at_least(-2), MEDIUM, _RETENTION,
       "Tiered storage: local size kept per partition; -2: retention.bytes (tiered storage is off here)."),
    # --- Log Cleaner
    _k("log.cleaner.backoff.ms", LONG, 15000, _at_least(0), MEDIUM, _CLEANER,
       "The amount of time to sleep when there are no logs to clean."),
    _k("log.cleaner.enable", BOOLEAN, True, None, MEDIUM, _CLEANER,
       "Run the log cleaner for compacted topics."),
    _k("log.cleaner.threads", INT, 1, _at_least(0), MEDIUM, _CLEANER,
       "Background threads that clean compacted logs."),
    _k("log.cleaner.dedupe.buffer.size", LONG, 134217728, None, MEDIUM, _CLEANER,
       "Memory for deduplicating keys, over all cleaner threads."),
    _k("log.cleaner.io.buffer.size", INT, 524288, _at_least(0), MEDIUM, _CLEANER,
       "Memory for the cleaner's read and write buffers, over all cleaner threads."),
    _k("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, None, MEDIUM, _CLEANER,
       "Load factor of the cleaner's deduplication buffer."),
    _k("log.cleaner.io.max.bytes.per.second", DOUBLE, 1.7976931348623157e308, None, MEDIUM, _CLEANER,
       "Throttle on the cleaner's read plus write I/O."),
    _k("log.cleaner.delete.retention.ms", LONG, 86400000, _at_least(0), MEDIUM, _CLEANER,
       "How long tombstones are kept in compacted topics."),
    _k("log.cleaner.min.compaction.lag.ms", LONG, 0, _at_least(0), MEDIUM, _CLEANER,
       "Minimum age of a record before it may be compacted."),
    _k("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, _at_least(1), MEDIUM, _CLEANER,
       "Maximum age of a record before it must be eligible for compaction."),
    _k("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, Range.between(0.0, 1.0), MEDIUM, _CLEANER,
       "Dirty-to-total ratio at which a log becomes eligible for cleaning."),
    # --- Replication
    _k("unclean.leader.election.enable", BOOLEAN, False, None, HIGH, _REPLICATION,
       "Allow an out-of-sync replica to become leader (may lose data)."),
    _k("replica.lag.time.max.ms", LONG, 30000, None, HIGH, _REPLICATION,
       "A follower that has not caught up for this long leaves the ISR."),
    _k("num.replica.fetchers", INT, 1, None, HIGH, _REPLICATION,
       "Fetcher threads per source broker."),
    _k("num.replica.alter.log.dirs.threads", INT, None, None, HIGH, _REPLICATION,
       "Threads moving replicas between log dirs; unset: one per log dir."),
    _k("auto.leader.rebalance.enable", BOOLEAN, True, None, HIGH, _REPLICATION,
       "Move leadership back to preferred replicas in the background."),
    _k("leader.imbalance.check.interval.seconds", LONG, 300, _at_least(1), HIGH, _REPLICATION,
       "How often the controller checks partition leadership balance."),
    _k("leader.imbalance.per.broker.percentage", INT, 10, None, HIGH, _REPLICATION,
       "Leader imbalance allowed per broker, in percent, before a rebalance."),
    _k("replica.fetch.max.bytes", INT, 1048576, _at_least(0), MEDIUM, _REPLICATION,
       "Bytes a follower asks for per partition in one fetch."),
    _k("replica.fetch.wait.max.ms", INT, 500, None, HIGH, _REPLICATION,
       "Longest wait a follower's fetch asks the leader for."),
    _k("replica.fetch.min.bytes", INT, 1, None, HIGH, _REPLICATION,
       "Bytes a follower's fetch waits for."),
    _k("replica.fetch.backoff.ms", INT, 1000, _at_least(0), MEDIUM, _REPLICATION,
       "How long a follower waits before fetching a partition again after an error."),
    _k("replica.fetch.response.max.bytes", INT, 10485760, _at_least(0), MEDIUM, _REPLICATION,
       "Bytes a follower asks for in one fetch across partitions."),
    _k("replica.socket.timeout.ms", INT, 30000, None, HIGH, _REPLICATION,
       "Socket timeout of replica fetch connections."),
    _k("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, None, HIGH, _REPLICATION,
       "How often high watermarks are checkpointed to disk."),
    # Kafka's dynamic-only broker quotas (DynamicConfig.Broker): set with AlterConfigs
    # on the broker (replication.quota: docs/architecture.md, "Partition reassignment")
    _k("leader.replication.throttled.rate", LONG, LONG_MAX, _at_least(0), MEDIUM, _REPLICATION,
       "Bytes/s this broker sends as leader for leader.replication.throttled.replicas."),
    _k("follower.replication.throttled.rate", LONG, LONG_MAX, _at_least(0), MEDIUM, _REPLICATION,
       "Bytes/s this broker's fetchers take in for follower.replication.throttled.replicas."),
    _k("replica.alter.log.dirs.io.max.bytes.per.second", LONG, LONG_MAX, _at_least(0), MEDIUM, _REPLICATION,
       "Bytes/s of replica moves between log dirs (accepted; such moves are not supported)."),
    # --- ZooKeeper
    _k("zookeeper.max.in.flight.requests", INT, 10, _at_least(1), HIGH, _ZOOKEEPER,
       "Unacknowledged requests the ZooKeeper client sends before blocking."),
    _k("zookeeper.connect", STRING, None, None, HIGH, _ZOOKEEPER,
       "host:port[,host:port][/chroot] of the ZooKeeper ensemble; unset: embedded single-broker metadata."),
    _k("zookeeper.session.timeout.ms", INT, 18000, None, HIGH, _ZOOKEEPER,
       "ZooKeeper session timeout."),
    _k("zookeeper.connection.timeout.ms", INT, None, None, HIGH, _ZOOKEEPER,
       "Longest wait to connect to ZooKeeper; zookeeper.session.timeout.ms if unset."),
    # --- Group Coordinator
    _k("group.initial.rebalance.delay.ms", INT, 3000, None, MEDIUM, _GROUP,
       "How long the first rebalance of an empty group waits for more members."),
    _k("group.min.session.timeout.ms", INT, 6000, None, MEDIUM, _GROUP,
       "Smallest session timeout a consumer may ask for."),
    _k("group.max.session.timeout.ms", INT, 1800000, None, MEDIUM, _GROUP,
       "Largest session timeout a consumer may ask for."),
    _k("group.max.size", INT, INT_MAX, _at_least(1), MEDIUM, _GROUP,
       "Most members one consumer group may have."),
    # KIP-848 (the "consumer" group protocol): the broker, not the client,
    # owns session and heartbeat timing; a member's ConsumerGroupHeartbeat
    # cannot ask for other values. Kafka checks min <= value <= max for both
    # (GroupCoordinatorConfig); server.coordinator_process.coordinator_config does too.
    _k("group.consumer.heartbeat.interval.ms", INT, 5000, _at_least(1), MEDIUM, _GROUP,
       "Heartbeat interval given to members of consumer (KIP-848) groups."),
    _k("group.consumer.min.heartbeat.interval.ms", INT, 5000, _at_least(1), MEDIUM, _GROUP,
       "Smallest allowed group.consumer.heartbeat.interval.ms."),
    _k("group.consumer.max.heartbeat.interval.ms", INT, 15000, _at_least(1), MEDIUM, _GROUP,
       "Largest allowed group.consumer.heartbeat.interval.ms."),
    _k("group.consumer.session.timeout.ms", INT, 45000, _at_least(1), MEDIUM, _GROUP,
       "Session timeout of members of consumer (KIP-848) groups."),
    _k("group.consumer.min.session.timeout.ms", INT, 45000, _at_least(1), MEDIUM, _GROUP,
       "Smallest allowed group.consumer.session.timeout.ms."),
    _k("group.consumer.max.session.timeout.ms", INT, 60000, _at_least(1), MEDIUM, _GROUP,
       "Largest allowed group.consumer.session.timeout.ms."),
    _k("group.consumer.assignors", LIST, ["uniform", "range"], None, MEDIUM, _GROUP,
       "Server-side assignors of consumer groups (uniform, range, or Kafka's class names); "
       "the first is the default."),
    _k("group.consumer.max.size", INT, INT_MAX, _at_least(1), MEDIUM, _GROUP,
       "Most members one consumer (KIP-848) group may have."),
    _k("offsets.topic.num.partitions", INT, 50, _at_least(1), HIGH, _GROUP,
       "Partitions of __consumer_offsets (do not change after deployment)."),
    _k("offsets.topic.replication.factor", SHORT, 3, _at_least(1), HIGH, _GROUP,
       "Replication factor of __consumer_offsets."),
    _k("offsets.topic.segment.bytes", INT, 104857600, _at_least(1), HIGH, _GROUP,
       "Segment size of __consumer_offsets."),
    _k("offsets.retention.minutes", INT, 10080, _at_least(1), HIGH, _GROUP,
       "How long committed offsets of an empty group are kept."),
    _k("offsets.retention.check.interval.ms", LONG, 600000, _at_least(1), HIGH, _GROUP,
       "How often stale offsets are looked for."),
    _k("offsets.commit.timeout.ms", INT, 5000, _at_least(1), HIGH, _GROUP,
       "Longest wait for an offset commit to be replicated."),
    _k("offset.metadata.max.bytes", INT, 4096, None, HIGH, _GROUP,
       "Largest metadata string stored with an offset commit."),
    # --- Transaction Coordinator
    _k("transactional.id.expiration.ms", INT, 604800000, _at_least(1), HIGH, _TXN,
       "How long a transactional id is kept without status updates."),
    _k("transaction.max.timeout.ms", INT, 900000, _at_least(1), HIGH, _TXN,
       "Largest transaction timeout a producer may ask for."),
    _k("transaction.state.log.num.partitions", INT, 50, _at_least(1), HIGH, _TXN,
       "Partitions of __transaction_state."),
    _k("transaction.state.log.replication.factor", SHORT, 3, _at_least(1), HIGH, _TXN,
       "Replication factor of __transaction_state."),
    _k("transaction.state.log.min.isr", INT, 2, _at_least(1), HIGH, _TXN,
       "min.insync.replicas of __transaction_state."),
    _k("transaction.state.log.segment.bytes", INT, 104857600, _at_least(1), HIGH, _TXN,
       "Segment size of __transaction_state."),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, _at_least(1), LOW, _TXN,
       "How often transactions open past their timeout are looked for (and aborted)."),
    _k("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000, _at_least(1), LOW, _TXN,
       "How often transactional ids past transactional.id.expiration.ms are removed."),
    _k("producer.id.expiration.ms", INT, 86400000, _at_least(1), LOW, _TXN,
       "How long idempotence state of an inactive producer id is kept."),
    # --- kafkapy's own
    _k("prometheus.host", STRING, "127.0.0.1", None, LOW, _KAFKAPY,
       "Address of the Prometheus metrics endpoint."),
    _k("prometheus.port", INT, 0, Range.between(0, 65535), LOW, _KAFKAPY,
       "Port of the Prometheus metrics endpoint; 0: no endpoint."),
    _k("kafkapy.shutdown.timeout.ms", LONG, 30000, _at_least(0), MEDIUM, _KAFKAPY,
       "Bound on a clean shutdown after SIGTERM; children still alive after it are killed."),
]

BROKER_CONFIGS: dict[str, ConfigKey] = {key.name: key for key in _BROKER_KEYS}

# Keys accepted (parsed, validated, shown by DescribeConfigs) that change
# nothing yet, and why. Setting one logs a warning at start-up; the README
# lists them (a test keeps the two in step).
NOT_IN_EFFECT: dict[str, str] = {
    "zookeeper.max.in.flight.requests": "kazoo pipelines a session's requests without this bound",
    "num.replica.alter.log.dirs.threads": "replicas are never moved between log dirs",
    "replica.high.watermark.checkpoint.interval.ms":
        "high watermarks are checkpointed with the recovery points "
        "(log.flush.offset.checkpoint.interval.ms)",
    "producer.id.expiration.ms": "producer state is kept until its data leaves the log (no timed expiry yet)",
    "background.threads": "background work (retention, flush, checkpoints) runs in the "
                          "supervisor process, one task at a time",
    "num.recovery.threads.per.data.dir": "logs are recovered one at a time by the supervisor",
    "queued.max.request.bytes": "request memory is bounded by each processor's 64 MiB arena and "
                                "queued.max.requests",
    "advertised.host.name": "removed in Kafka 3.0; advertised.listeners is used",
    "replica.alter.log.dirs.io.max.bytes.per.second": "replicas are never moved between log dirs (no "
                                                      "AlterReplicaLogDirs)",
    "log.cleaner.threads": "compaction runs in one log-cleaner process, one log at a time (the value "
                           "still divides log.cleaner.dedupe.buffer.size, as Kafka's cleaner threads share it)",
    "log.message.format.version": "deprecated since Kafka 3.0; batches are always stored in format v2",
    "log.local.retention.ms": "no tiered storage: local retention is retention.ms",
    "log.local.retention.bytes": "no tiered storage: local retention is retention.bytes",
}
assert len(BROKER_CONFIGS) == len(_BROKER_KEYS), "duplicate broker config key"
for _key in _BROKER_KEYS:  # a default must pass its own validator (Kafka's define() checks too)
    if _key.has_default and _key.default is not None and _key.validator is not None:
        _key.validator(_key.name, _key.default)
del _key

# ---------------------------------------------------------------------------
# Listeners
# ---------------------------------------------------------------------------

class Endpoint(namedtuple("Endpoint", ("listener_name", "host", "port", "security_protocol"),
                          defaults=("PLAINTEXT",))):
    """One listener: name (upper-case), host ("" = all interfaces), port, and
    its security protocol (from listener.security.protocol.map)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        """Alias of ``listener_name`` (Kafka's ``EndPoint.listenerName``)."""
        return self.listener_name

# NAME://host:port, with an IPv6 host in brackets (Kafka's EndPoint regex).
_LISTENER_RE = re.compile(r"\A(?P<name>[^:/]+)://(?:\[(?P<ip6>[0-9a-fA-F:.%]*)\]|(?P<host>[0-9A-Za-z\-%._]*)):(?P<port>-?[0-9]+)\Z")
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _parse_security_protocol_map(raw: str) -> dict[str, str]:
    key = "listener.security.protocol.map"
    mapping: dict[str, str] = {}
    for entry in _LIST_SPLIT_RE.split(raw.strip()) if raw.strip() else []:
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip() or not protocol.strip():
            raise ConfigException(key, raw, f"Entry {entry!r} is not of the form NAME:PROTOCOL")
        protocol = protocol.strip().upper()
        if protocol not in _SECURITY_PROTOCOLS:
            raise ConfigException(key, raw, f"Invalid security protocol `{protocol}`")
        mapping[name.strip().upper()] = protocol
    return mapping


def _parse_listeners(key: str, raw: str, protocol_map: Mapping[str, str],
                     require_distinct_ports: bool) -> list[Endpoint]:
    endpoints: list[Endpoint] = []
    for entry in _LIST_SPLIT_RE.split(raw.strip()) if raw.strip() else []:
        if not entry:
            continue
        match = _LISTENER_RE.match(entry)
        if match is None:
            raise ConfigException(key, raw, f"Unable to parse {entry} to a broker endpoint")
        name = match["name"].upper()
        host = match["ip6"] if match["ip6"] is not None else match["host"]
        port = int(match["port"])
        if not 0 <= port <= 65535:
            raise ConfigException(key, raw, f"Port {port} of listener {name} is out of range [0,65535]")
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigException(key, raw, f"No security protocol defined for listener {name}")
        endpoints.append(Endpoint(name, host, port, protocol))
    names = [ep.listener_name for ep in endpoints]
    if len(set(names)) != len(names):
        raise ConfigException(key, raw, "Each listener must have a different name")
    if require_distinct_ports:
        ports = [ep.port for ep in endpoints if ep.port != 0]
        if len(set(ports)) != len(ports):
            raise ConfigException(key, raw, "Each listener must have a different port")
    return endpoints


# ---------------------------------------------------------------------------
# BrokerConfig
# ---------------------------------------------------------------------------

_MS_PER_MINUTE = 60 * 1000
_MS_PER_HOUR = 60 * _MS_PER_MINUTE


class BrokerConfig:
    """Parsed, validated broker settings.

    ``cfg["log.segment.bytes"]`` gives a known key's typed value (None when
    unset and without default) or an unknown key's raw string.  Derived
    settings follow Kafka's ``KafkaConfig`` rules and are computed once.
    Immutable after construction (built by the supervisor before forking).
    """

    def __init__(self, values: Mapping[str, Any], originals: Mapping[str, str],
                 unknown: Mapping[str, str]):
        self._values = dict(values)
        self.originals: dict[str, str] = dict(originals)  # as given, before parsing
        self.unknown: dict[str, str] = dict(unknown)      # keys not in BROKER_CONFIGS
        self._derive()

    # -- construction -------------------------------------------------------

    @classmethod
    def from_props(cls, props: Mapping[str, Any], warn_unknown: bool = True) -> "BrokerConfig":
        values: dict[str, Any] = {}
        for name, key in BROKER_CONFIGS.items():
            if name in props:
                values[name] = key.parse(props[name])
            elif not key.has_default:
                raise ConfigException(f'Missing required configuration "{name}" which has no default value.')
            else:
                values[name] = key.default
        unknown = {k: v for k, v in props.items() if k not in BROKER_CONFIGS}
        # listener.name.<listener>.<key>: per-listener overrides (read by
        # kafkapy.server.security.listener_config), known by their prefix.
        reported = [k for k in unknown if warn_unknown and not k.startswith("listener.name.")]
        for name in sorted(reported):
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
        return cls(values, {k: v for k, v in props.items()}, unknown)

    @classmethod
    def from_file(cls, path: str, overrides: Optional[Mapping[str, str]] = None) -> "BrokerConfig":
        props = load_properties(path)
        props.update(overrides or {})
        return cls.from_props(props)

    def with_overrides(self, overrides: Mapping[str, Any]) -> "BrokerConfig":
        props = dict(self.originals)
        props.update(overrides)
        # The file's unknown keys were reported once at start-up; dynamic
        # configs rebuild the config in every process on each change.
        return BrokerConfig.from_props(props, warn_unknown=False)

    # -- access ---------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        if name in self.unknown:
            return self.unknown[name]
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return name in self._values or name in self.unknown

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def is_set(self, name: str) -> bool:
        """True when the key was given explicitly (file or override), not defaulted."""
        return name in self.originals

    def values(self) -> dict[str, Any]:
        """Typed values of every known key."""
        return dict(self._values)

    def __repr__(self) -> str:
        return f"BrokerConfig(broker_id={self.broker_id}, listeners={self.listeners}, log_dirs={self.log_dirs})"

    # -- derived values (Kafka's KafkaConfig rules) ---------------------------

    def _derive(self) -> None:
        v = self._values
        # log.retention.ms > log.retention.minutes > log.retention.hours; any negative = -1.
        if v["log.retention.ms"] is not None:
            retention_ms, retention_key = v["log.retention.ms"], "log.retention.ms"
        elif v["log.retention.minutes"] is not None:
            retention_ms, retention_key = v["log.retention.minutes"] * _MS_PER_MINUTE, "log.retention.minutes"
        else:
            retention_ms, retention_key = v["log.retention.hours"] * _MS_PER_HOUR, "log.retention.hours"
        if retention_ms < 0:
            retention_ms = -1
        if retention_ms == 0:
            raise ConfigException(retention_key, v[retention_key],
                                  "log.retention.ms must be unlimited (-1) or, greater than or equal to 1")
        self.log_retention_ms: int = retention_ms

        if v["log.roll.ms"] is not None:
            self.log_roll_ms: int = v["log.roll.ms"]
        else:
            self.log_roll_ms = v["log.roll.hours"] * _MS_PER_HOUR
        if self.log_roll_ms < 1:
            raise ConfigException("log.roll.ms", self.log_roll_ms, "log.roll.ms must be greater than or equal to 1")

        if v["log.roll.jitter.ms"] is not None:
            self.log_roll_jitter_ms: int = v["log.roll.jitter.ms"]
        else:
            self.log_roll_jitter_ms = v["log.roll.jitter.hours"] * _MS_PER_HOUR
        if self.log_roll_jitter_ms < 0:
            raise ConfigException("log.roll.jitter.ms", self.log_roll_jitter_ms,
                                  "log.roll.jitter.ms must be greater than or equal to 0")

        if v["log.flush.interval.ms"] is not None:
            self.log_flush_interval_ms: int = v["log.flush.interval.ms"]
        else:
            self.log_flush_interval_ms = v["log.flush.scheduler.interval.ms"]

        dirs = v["log.dirs"] if v["log.dirs"] is not None else v["log.dir"]
        dirs = [d for d in (dirs or []) if d]
        if not dirs:
            raise ConfigException("log.dirs", self.originals.get("log.dirs", self.originals.get("log.dir")),
                                  "At least one log directory must be defined via log.dirs or log.dir.")
        if len(set(dirs)) != len(dirs):
            raise ConfigException("log.dirs", ",".join(dirs), "Duplicate log directory")
        self.log_dirs: list[str] = dirs

        broker_id = v["broker.id"]
        if not -1 <= broker_id <= v["reserved.broker.max.id"]:
            raise ConfigException("broker.id", broker_id,
                                  "broker.id must be greater than or equal to -1 and not greater than "
                                  "reserved.broker.max.id")
        self.broker_id: int = broker_id

        protocol_map = _parse_security_protocol_map(v["listener.security.protocol.map"])
        self.listeners: list[Endpoint] = _parse_listeners("listeners", v["listeners"], protocol_map, True)
        if not self.listeners:
            raise ConfigException("listeners", v["listeners"], "At least one listener is required")
        if v["advertised.listeners"] is not None:
            advertised = _parse_listeners("advertised.listeners", v["advertised.listeners"], protocol_map, False)
            for ep in advertised:
                if ep.host == "0.0.0.0":
                    raise ConfigException("advertised.listeners", v["advertised.listeners"],
                                          "advertised.listeners cannot use the nonroutable meta-address "
                                          "0.0.0.0. Use a routable IP address.")
            self.advertised_listeners: list[Endpoint] = advertised
        else:
            self.advertised_listeners = list(self.listeners)
        # The listener other brokers reach this one on (Kafka's interBrokerListenerName).
        names = [ep.listener_name for ep in self.advertised_listeners]
        if v["inter.broker.listener.name"] and "security.inter.broker.protocol" in self.originals:
            raise ConfigException("security.inter.broker.protocol", v["security.inter.broker.protocol"],
                                  "Only one of inter.broker.listener.name and security.inter.broker.protocol "
                                  "should be set.")
        if "security.inter.broker.protocol" in self.originals:
            self.inter_broker_listener_name: str = v["security.inter.broker.protocol"]
        else:
            self.inter_broker_listener_name = v["inter.broker.listener.name"] or names[0]
        if self.inter_broker_listener_name not in names:
            raise ConfigException("inter.broker.listener.name", self.inter_broker_listener_name,
                                  "inter.broker.listener.name must be a listener name defined in "
                                  "advertised.listeners. The valid options based on currently configured "
                                  f"listeners are {','.join(names)}")
        inter_broker = next(ep for ep in self.advertised_listeners
                            if ep.listener_name == self.inter_broker_listener_name)
        if inter_broker.security_protocol.startswith("SASL") and v["zookeeper.connect"]:
            # Kafka's check; the broker's own login is read from the listener's
            # JAAS entry (kafkapy.server.security.inter_broker). Only in cluster
            # mode: a standalone broker opens no inter-broker connection, and a
            # SASL-only standalone broker must not need GSSAPI enabled.
            mechanism = v["sasl.mechanism.inter.broker.protocol"]
            override = self.originals.get(f"listener.name.{inter_broker.listener_name.lower()}"
                                          ".sasl.enabled.mechanisms")
            enabled = ([m.strip() for m in override.split(",")] if override is not None
                       else v["sasl.enabled.mechanisms"])
            if mechanism not in enabled:
                raise ConfigException("sasl.mechanism.inter.broker.protocol", mechanism,
                                      "sasl.mechanism.inter.broker.protocol must be included in "
                                      "sasl.enabled.mechanisms when SASL is used for inter-broker communication")
            if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                raise ConfigException("sasl.mechanism.inter.broker.protocol", mechanism,
                                      "kafkapy's brokers authenticate to each other with PLAIN, SCRAM-SHA-256 "
                                      "or SCRAM-SHA-512")

        if v["zookeeper.connection.timeout.ms"] is not None:
            self.zookeeper_connection_timeout_ms: int = v["zookeeper.connection.timeout.ms"]
        else:
            self.zookeeper_connection_timeout_ms = v["zookeeper.session.timeout.ms"]

    # Plain conveniences for values handlers read often.
    @property
    def message_max_bytes(self) -> int:
        return self._values["message.max.bytes"]

    @property
    def num_network_threads(self) -> int:
        return self._values["num.network.threads"]

    @property
    def num_io_threads(self) -> int:
        return self._values["num.io.threads"]


# ---------------------------------------------------------------------------
# Topic-level configs
# ---------------------------------------------------------------------------


def _throttled_replicas(name: str, value) -> None:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker,...``."""
    from kafkapy.replication.quota import parse_throttled_replicas

    try:
        parse_throttled_replicas(",".join(value or ()), -1)
    except ValueError as exc:
        raise ConfigException(name, ",".join(value or ()), str(exc)) from None


def _t(name, type_, default, validator, synonym, doc) -> TopicConfigKey:
    return TopicConfigKey(name, type_, default, validator, synonym, doc)


_TOPIC_KEYS = [
    _t("cleanup.policy", LIST, ["delete"], ValidList(*CLEANUP_POLICIES), "log.cleanup.policy",
       "delete and/or compact."),
    _t("compression.type", STRING, "producer", ValidString(*COMPRESSION_TYPES), "compression.type",
       "Final compression of stored batches; producer keeps the producer's codec."),
    _t("delete.retention.ms", LONG, 86400000, _at_least(0), "log.cleaner.delete.retention.ms",
       "How long tombstones are kept in a compacted topic."),
    _t("file.delete.delay.ms", LONG, 60000, _at_least(0), "log.segment.delete.delay.ms",
       "Delay before a deleted segment's files are removed."),
    _t("flush.messages", LONG, LONG_MAX, _at_least(1), "log.flush.interval.messages",
       "Records appended before the log is fsynced; 1 fsyncs every append."),
    _t("flush.ms", LONG, LONG_MAX, _at_least(0), "log.flush.interval.ms",
       "Most time a record may stay unflushed."),
    _t("index.interval.bytes", INT, 4096, _at_least(0), "log.index.interval.bytes",
       "Bytes appended between two offset index entries."),
    _t("max.message.bytes", INT, DEFAULT_MESSAGE_MAX_BYTES, _at_least(0), "message.max.bytes",
       "Largest record batch accepted."),
    _t("message.timestamp.type", STRING, "CreateTime", ValidString(*TIMESTAMP_TYPES),
       "log.message.timestamp.type", "CreateTime or LogAppendTime."),
    _t("message.timestamp.difference.max.ms", LONG, LONG_MAX, _at_least(0),
       "log.message.timestamp.difference.max.ms",
       "Largest allowed gap between a CreateTime timestamp and the broker's clock."),
    _t("min.compaction.lag.ms", LONG, 0, _at_least(0), "log.cleaner.min.compaction.lag.ms",
       "Minimum age of a record before it may be compacted."),
    _t("max.compaction.lag.ms", LONG, LONG_MAX, _at_least(1), "log.cleaner.max.compaction.lag.ms",
       "Maximum age before a record must be eligible for compaction."),
    _t("min.cleanable.dirty.ratio", DOUBLE, 0.5, Range.between(0.0, 1.0), "log.cleaner.min.cleanable.ratio",
       "Dirty ratio above which the log becomes eligible for cleaning."),
    _t("min.insync.replicas", INT, 1, _at_least(1), "min.insync.replicas",
       "In-sync replicas required for acks=all."),
    _t("preallocate", BOOLEAN, False, None, "log.preallocate",
       "Preallocate segment files on roll."),
    _t("retention.bytes", LONG, -1, None, "log.retention.bytes",
       "Size limit of the partition; -1: none."),
    _t("retention.ms", LONG, 604800000, _at_least(-1), "log.retention.ms",
       "Time limit of a segment's records; -1: none."),
    _t("segment.bytes", INT, 1073741824, _at_least(MIN_SEGMENT_BYTES), "log.segment.bytes",
       "Segment size at which the log rolls."),
    _t("segment.index.bytes", INT, 10485760, _at_least(4), "log.index.size.max.bytes",
       "Size of each segment's offset and time index."),
    _t("segment.jitter.ms", LONG, 0, _at_least(0), "log.roll.jitter.ms",
       "Random jitter subtracted from segment.ms."),
    _t("segment.ms", LONG, 604800000, _at_least(1), "log.roll.ms",
       "Segment age at which the log rolls."),
    _t("unclean.leader.election.enable", BOOLEAN, False, None, "unclean.leader.election.enable",
       "Allow an out-of-sync replica to become leader (accepted, not enforced)."),
    _t("message.downconversion.enable", BOOLEAN, True, None, "log.message.downconversion.enable",
       "Allow conversion to older formats for old fetch versions (accepted, not enforced)."),
    _t("leader.replication.throttled.replicas", LIST, [], _throttled_replicas, None,
       "Replicas (partition:broker or *) whose leader-side replication is throttled."),
    _t("follower.replication.throttled.replicas", LIST, [], _throttled_replicas, None,
       "Replicas (partition:broker or *) whose follower-side replication is throttled."),
    # Kafka 3.9's other topic keys (KIP-390, KIP-937, KIP-405/950, the deprecated format version).
    _t("compression.gzip.level", INT, -1, GzipLevel(), "compression.gzip.level",
       "Level of gzip when compression.type recompresses to gzip; -1: zlib's default (6)."),
    _t("compression.lz4.level", INT, 9, Range.between(1, 17), "compression.lz4.level",
       "Level of lz4 when compression.type recompresses to lz4."),
    _t("compression.zstd.level", INT, 3, Range.between(-131072, 22), "compression.zstd.level",
       "Level of zstd when compression.type recompresses to zstd."),
    _t("message.timestamp.before.max.ms", LONG, LONG_MAX, _at_least(0), "log.message.timestamp.before.max.ms",
       "How far a CreateTime timestamp may lie before the broker's clock; unset: difference.max.ms."),
    _t("message.timestamp.after.max.ms", LONG, LONG_MAX, _at_least(0), "log.message.timestamp.after.max.ms",
       "How far a CreateTime timestamp may lie after the broker's clock; unset: difference.max.ms."),
    _t("message.format.version", STRING, "3.0-IV1", _metadata_version, "log.message.format.version",
       "Deprecated since Kafka 3.0: ignored (accepted, not in effect)."),
    _t("remote.storage.enable", BOOLEAN, False, None, None,
       "Tiered storage for this topic; true is refused: the broker has no remote log storage."),
    _t("local.retention.ms", LONG, -2, _at_least(-2), "log.local.retention.ms",
       "Tiered storage's local retention time; -2: retention.ms (accepted, not in effect)."),
    _t("local.retention.bytes", LONG, -2, _at_least(-2), "log.local.retention.bytes",
       "Tiered storage's local retention size; -2: retention.bytes (accepted, not in effect)."),
    _t("remote.log.copy.disable", BOOLEAN, False, None, None,
       "Tiered storage: stop copying to remote storage; true is refused in ZooKeeper mode."),
    _t("remote.log.delete.on.disable", BOOLEAN, False, None, None,
       "Tiered storage: delete remote data on disable; true is refused in ZooKeeper mode."),
]

TOPIC_CONFIGS: dict[str, TopicConfigKey] = {key.name: key for key in _TOPIC_KEYS}

# Broker keys whose topic default is a derived value rather than the key itself
# (e.g. segment.ms falls back through log.roll.ms to log.roll.hours).
_DERIVED_TOPIC_DEFAULTS = {
    "retention.ms": "log_retention_ms",
    "segment.ms": "log_roll_ms",
    "segment.jitter.ms": "log_roll_jitter_ms",
    "flush.ms": "log_flush_interval_ms",
}


def validate_topic_configs(configs: Mapping[str, Optional[str]]) -> dict[str, str]:
    """Check CreateTopics/AlterConfigs topic configs; returns the trimmed strings.

    Raises ``InvalidConfigError`` for a null value, an unknown key, or a value
    that does not parse or validate (Kafka's messages).
    """
    nulls = sorted(k for k, v in configs.items() if v is None)
    if nulls:
        raise InvalidConfigError(nulls[0], "Null value not supported for topic configs: " + ",".join(nulls))
    result: dict[str, str] = {}
    for name, raw in configs.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise InvalidConfigError(name, f"Unknown topic config name: {name}")
        try:
            key.parse(raw)
        except ConfigException as exc:
            raise InvalidConfigError(name, str(exc)) from None
        result[name] = raw.strip()
    parsed = {name: TOPIC_CONFIGS[name].parse(raw) for name, raw in result.items()}
    # Tiered storage (Kafka's LogConfig.validate in ZooKeeper mode): kafkapy
    # has no remote log storage, as a broker with remote.log.storage.system.enable=false.
    if parsed.get("remote.log.delete.on.disable") or parsed.get("remote.log.copy.disable"):
        raise InvalidConfigError("remote.log.copy.disable",
                                 "It is invalid to set `remote.log.delete.on.disable` or "
                                 "`remote.log.copy.disable` under Zookeeper's mode.")
    if parsed.get("remote.storage.enable"):
        raise InvalidConfigError("remote.storage.enable",
                                 "Tiered Storage functionality is disabled in the broker. "
                                 "Topic cannot be configured with remote log storage.")
    min_lag = parsed.get("min.compaction.lag.ms", 0)
    max_lag = parsed.get("max.compaction.lag.ms", LONG_MAX)
    if min_lag > max_lag:
        raise InvalidConfigError("min.compaction.lag.ms",
                                 f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                                 f"max.compaction.lag.ms ({max_lag})")
    return result


def topic_config_defaults(broker: BrokerConfig) -> dict[str, Any]:
    """Each topic key's value when the topic has no override (from its broker synonym)."""
    defaults: dict[str, Any] = {}
    for name, key in TOPIC_CONFIGS.items():
        if name in _DERIVED_TOPIC_DEFAULTS:
            defaults[name] = getattr(broker, _DERIVED_TOPIC_DEFAULTS[name])
        elif key.synonym is not None:
            defaults[name] = broker[key.synonym]
        else:
            defaults[name] = key.default
    return defaults


def topic_config_values(broker: BrokerConfig, topic_overrides: Mapping[str, str]) -> dict[str, Any]:
    """Effective typed topic configs: overrides over the broker's defaults.

    Overrides are parsed here too, so a stored override that no longer
    validates raises ``InvalidConfigError`` instead of being silently used.
    """
    values = topic_config_defaults(broker)
    for name, raw in topic_overrides.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise InvalidConfigError(name, f"Unknown topic config name: {name}")
        try:
            values[name] = key.parse(raw)
        except ConfigException as exc:
            raise InvalidConfigError(name, str(exc)) from None
    return values


def log_config_for(broker: BrokerConfig, topic_overrides: Mapping[str, str]):
    """Build the storage layer's ``LogConfig`` for one topic.

    Field names are the topic keys with dots replaced by underscores; fields
    the ``LogConfig`` dataclass does not declare are left out, so storage may
    add or drop fields without breaking this function.
    """
    from kafkapy.storage.config import LogConfig  # lazy: server sits above storage

    values = topic_config_values(broker, topic_overrides)
    fields = {f.name: f for f in dataclasses.fields(LogConfig)}
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        field = name.replace(".", "_")
        if field not in fields:
            continue
        if field == "cleanup_policy":
            value = _cleanup_policy_for(fields[field], value)
        kwargs[field] = value
    return LogConfig(**kwargs)


def _cleanup_policy_for(field: dataclasses.Field, policies: list[str]):
    # LogConfig may hold the policy as the comma-joined string or as a
    # sequence; follow whatever its default is.
    default = field.default
    if default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        default = field.default_factory()  # type: ignore[misc]
    if isinstance(default, str):
        return ",".join(policies)
    if isinstance(default, tuple):
        return tuple(policies)
    if isinstance(default, frozenset):
        return frozenset(policies)
    return list(policies)


# ---------------------------------------------------------------------------
# Java .properties
# ---------------------------------------------------------------------------

_PROPS_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str) -> dict[str, str]:
    """Read a Java ``.properties`` file (as ``java.util.Properties.load``).

    UTF-8 is tried first; a file that is not valid UTF-8 is read as
    ISO-8859-1, the encoding ``Properties.load(InputStream)`` assumes.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text, source=path)


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_PROPS_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue  # blank or comment: never continued
        while _ends_with_escape(line) and i <= len(natural):
            line = line[:-1]
            if i == len(natural):
                break
            line += natural[i].lstrip(_PROPS_WHITESPACE)
            i += 1
        yield start + 1, line


def _ends_with_escape(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(s: str, source: str, lineno: int) -> str:
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(s):
            break
        c = s[i]
        if c == "u":
            digits = s[i + 1:i + 5]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigException(f"{source}:{lineno}: Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse ``.properties`` text: ``#``/``!`` comments, ``key=value``,
    ``key: value`` and ``key value``, backslash line continuation (leading
    whitespace of the continuation dropped), escapes ``\\t \\n \\r \\f
    \\uXXXX`` and ``\\<any>`` for that character.  Later keys win."""
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        # The key ends at the first unescaped '=', ':' or whitespace.
        i = 0
        key_end = len(line)
        value_start = len(line)
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:":
                key_end, value_start = i, i + 1
                break
            if c in _PROPS_WHITESPACE:
                key_end = i
                j = i
                while j < len(line) and line[j] in _PROPS_WHITESPACE:
                    j += 1
                if j < len(line) and line[j] in "=:":
                    j += 1
                value_start = j
                break
            i += 1
        while value_start < len(line) and line[value_start] in _PROPS_WHITESPACE:
            value_start += 1
        key = _unescape(line[:key_end], source, lineno)
        value = _unescape(line[value_start:], source, lineno)
        props[key] = value
    return props


def parse_overrides(args: Iterable[str]) -> dict[str, str]:
    """``--override key=value`` arguments (as kafka-server-start.sh) to a dict; later wins."""
    overrides: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key.strip():
            raise ConfigException(f"Invalid command line properties: {arg!r} (expected key=value)")
        overrides[key.strip()] = value
    return overrides


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------


def _escape_properties(text: str, is_key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c in "=:#!" and is_key:
            out.append("\\" + c)
        elif c == " " and (is_key or i == 0):
            out.append("\\ ")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        else:
            out.append(c)
    return "".join(out)


def render_properties(values: Optional[Mapping[str, Any]] = None) -> str:
    """Render a ``server.properties`` from the table, in Kafka's file style.

    Every key gets its doc, type, default, valid values and importance as
    comments.  Keys in ``values`` are written as settings; every other key is
    written commented out with its default, so the file documents defaults
    without pinning them.
    """
    values = dict(values or {})
    unknown = sorted(set(values) - set(BROKER_CONFIGS))
    if unknown:
        raise ConfigException(f"Cannot render unknown configuration(s): {', '.join(unknown)}")
    lines = ["# kafkapy broker configuration, rendered from kafkapy.server.config.BROKER_CONFIGS.",
             "# Names, types and defaults follow Apache Kafka's broker configs.", ""]
    for group in GROUP_ORDER:
        keys = [k for k in _BROKER_KEYS if k.group == group]
        if not keys:
            continue
        lines.append(f"############################# {group} #############################")
        lines.append("")
        for key in keys:
            for doc_line in textwrap.wrap(key.doc, width=76):
                lines.append(f"# {doc_line}")
            if not key.has_default:
                shown = "(required)"
            else:
                shown = key.default_string()
                shown = "null" if shown is None else shown
            facts = [f"Type: {key.type}", f"Default: {shown}"]
            if key.validator is not None:
                facts.append(f"Valid values: {key.validator}")
            facts.append(f"Importance: {key.importance}")
            lines.append("# " + ", ".join(facts))
            if key.name in values:
                raw = values[key.name]
                text = raw if isinstance(raw, str) else format_value(key.type, key.parse(raw))
                lines.append(f"{_escape_properties(key.name, True)}={_escape_properties(text or '', False)}")
            else:
                default = key.default_string() if key.has_default else None
                lines.append(f"#{key.name}={_escape_properties(default or '', False)}")
            lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Dynamic broker configs and DescribeConfigs entries
# ---------------------------------------------------------------------------

# DescribeConfigs ConfigSource ids (Kafka's DescribeConfigsResponse.ConfigSource).
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# DescribeConfigs v3+ config_type ids (Kafka's DescribeConfigsResponse.ConfigType).
CONFIG_TYPE_IDS = {BOOLEAN: 1, STRING: 2, INT: 3, SHORT: 4, LONG: 5, DOUBLE: 6, LIST: 7,
                   CLASS: 8, PASSWORD: 9}

# The metadata store's entity name for the cluster-wide dynamic default
# (Kafka's ZooKeeper path /config/brokers/<default>).
DEFAULT_BROKER_ENTITY = "<default>"

# Broker keys that may change at run time: Kafka's DynamicLogConfig makes
# every broker synonym of a topic config reconfigurable (log.retention.ms but
# not log.retention.hours, message.max.bytes, compression.type, ...), and
# kafkapy applies exactly those: each process rebuilds its open logs'
# LogConfig when the metadata generation moves.  The connection limits
# (Kafka's DynamicConnectionQuota) are dynamic too: the acceptor reads them
# again when the generation moves.  Kafka's other dynamic keys
# (num.io.threads, num.network.threads, listeners, ...) size processes forked
# at start-up here, so they are refused like any read-only key.
CONNECTION_LIMIT_CONFIGS = frozenset({"max.connections", "max.connections.per.ip",
                                      "max.connections.per.ip.overrides", "max.connection.creation.rate"})
# Of those, the keys a listener may override (listener.name.<l>.<key>), at run time too.
LISTENER_CONNECTION_LIMIT_CONFIGS = ("max.connections", "max.connection.creation.rate")
DYNAMIC_BROKER_CONFIGS = CONNECTION_LIMIT_CONFIGS | frozenset(
    key.synonym for key in _TOPIC_KEYS if key.synonym is not None and key.synonym in BROKER_CONFIGS
    # Kafka keeps log.message.format.version read-only (DynamicLogConfig)
    and key.synonym != "log.message.format.version") | {
    # the replication throttles (kafkapy.replication.quota), read per request
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    # Kafka's LogCleaner.ReconfigurableConfigs: the log-cleaner process reads
    # them from the effective config each pass (log.cleaner.threads only
    # divides the dedupe buffer: NOT_IN_EFFECT)
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms"}

# Broker keys whose value falls back through other keys (Kafka's
# DynamicBrokerConfig.brokerConfigSynonyms), most specific first.
BROKER_SYNONYMS = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.retention.minutes": ("log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}


class NonDynamicConfigError(Exception):
    """AlterConfigs on a broker key that cannot change at run time: INVALID_REQUEST (42)."""

    error_code = 42

    def __init__(self, names):
        self.names = sorted(names)
        self.message = "Cannot update these configs dynamically: Set(" + ", ".join(self.names) + ")"
        super().__init__(self.message)


@dataclasses.dataclass
class ConfigEntry:
    """One DescribeConfigs result entry; ``synonyms`` are ``(name, value, source)``."""

    name: str
    value: Optional[str]
    source: int
    read_only: bool
    is_sensitive: bool
    synonyms: list
    config_type: int
    documentation: Optional[str]


def validate_dynamic_broker_configs(configs: Mapping[str, Optional[str]]) -> dict[str, str]:
    """Check a dynamic broker config set; returns the trimmed strings.

    Unknown or read-only keys raise ``NonDynamicConfigError``; a null value or
    a value that does not parse raises ``InvalidConfigError``.
    """
    refused = [name for name in configs if name not in DYNAMIC_BROKER_CONFIGS and _listener_key(name) is None]
    if refused:
        raise NonDynamicConfigError(refused)
    result: dict[str, str] = {}
    for name, raw in configs.items():
        if raw is None:
            raise InvalidConfigError(name, f"Null value not supported for : {name}")
        try:
            BROKER_CONFIGS[_listener_key(name) or name].parse(raw)
        except ConfigException as exc:
            raise InvalidConfigError(name, str(exc)) from None
        if name == "max.connections.per.ip.overrides":
            _check_ip_overrides(name, raw)
        result[name] = raw.strip()
    return result


def _listener_key(name: str) -> Optional[str]:
    """The connection-limit key a ``listener.name.<l>.<key>`` name overrides, else None."""
    if name.startswith("listener.name."):
        for key in LISTENER_CONNECTION_LIMIT_CONFIGS:
            if name.endswith("." + key) and len(name) > len("listener.name.") + len(key) + 1:
                return key
    return None


def _check_ip_overrides(name: str, raw: str) -> None:
    """``host:count,...`` with whole counts (Kafka's DynamicConnectionQuota
    validation; host names are resolved when applied, not here)."""
    for item in raw.split(","):
        item = item.strip()
        host, sep, count = item.rpartition(":")
        if item and (not sep or not host or not count.strip().isdigit()):
            raise InvalidConfigError(name, f"Invalid entry in {name}: {item}")


def effective_broker_config(static: "BrokerConfig", cluster_dynamic: Mapping[str, str],
                            broker_dynamic: Mapping[str, str]) -> "BrokerConfig":
    """Kafka's precedence: per-broker dynamic > cluster-default dynamic > static file > default.

    Raises ``InvalidConfigError`` when the layered result does not validate
    (e.g. a derived check such as log.retention.ms = 0).
    """
    if not cluster_dynamic and not broker_dynamic:
        return static
    layered = dict(cluster_dynamic)
    layered.update(broker_dynamic)
    try:
        return static.with_overrides(layered)
    except ConfigException as exc:
        raise InvalidConfigError(getattr(exc, "name", None), str(exc)) from None


def check_reconfiguration(current: "BrokerConfig", new: "BrokerConfig") -> None:
    """The run-time bounds Kafka's reconfigurable components put on a change
    (``validateReconfiguration``), beyond each key's validator: the log
    cleaner's thread count, while the cleaner runs (log.cleaner.enable, read
    at start-up), may not drop below 1, below half or above double its
    current value.  Raises ``InvalidConfigError`` (INVALID_CONFIG)."""
    threads, now = new["log.cleaner.threads"], current["log.cleaner.threads"]
    if not current["log.cleaner.enable"] or threads == now:
        return
    if threads < 1:
        reason = "Log cleaner threads should be at least 1"
    elif threads < now // 2:
        reason = f"Log cleaner threads cannot be reduced to less than half the current value {now}"
    elif threads > now * 2:
        reason = f"Log cleaner threads cannot be increased to more than double the current value {now}"
    else:
        return
    raise InvalidConfigError("log.cleaner.threads", reason)


def _broker_layers(static: "BrokerConfig", cluster_dynamic, broker_dynamic):
    """``(source, {name: raw string})`` from most to least specific."""
    return ((SOURCE_DYNAMIC_BROKER, broker_dynamic), (SOURCE_DYNAMIC_DEFAULT_BROKER, cluster_dynamic),
            (SOURCE_STATIC_BROKER, {k: v for k, v in static.originals.items() if k in BROKER_CONFIGS}))


def _broker_synonyms(name: str, layers) -> list:
    out = []
    for synonym in BROKER_SYNONYMS.get(name, (name,)):
        key = BROKER_CONFIGS[synonym]
        for source, values in layers:
            if synonym in values:
                out.append((synonym, _formatted(key, values[synonym]), source))
        if key.has_default and key.default is not None:
            out.append((synonym, key.default_string(), SOURCE_DEFAULT))
    return out


def _formatted(key, raw: str) -> Optional[str]:
    try:
        return format_value(key.type, key.parse(raw))
    except ConfigException:
        return raw


def broker_config_entries(static: "BrokerConfig", cluster_dynamic: Mapping[str, str],
                          broker_dynamic: Mapping[str, str]) -> list[ConfigEntry]:
    """DescribeConfigs of a broker id: every broker key with its source and synonyms."""
    layers = _broker_layers(static, cluster_dynamic, broker_dynamic)
    entries = []
    for name in sorted(BROKER_CONFIGS):
        key = BROKER_CONFIGS[name]
        value = key.default_string() if key.has_default else None
        for _source, values in layers:
            if name in values:
                value = _formatted(key, values[name])
                break
        synonyms = _broker_synonyms(name, layers)
        source = synonyms[0][2] if synonyms else SOURCE_DEFAULT
        sensitive = key.type == PASSWORD
        entries.append(ConfigEntry(name, None if sensitive else value, source,
                                   name not in DYNAMIC_BROKER_CONFIGS, sensitive, synonyms,
                                   CONFIG_TYPE_IDS.get(key.type, 0), key.doc))
    return entries


def cluster_default_entries(cluster_dynamic: Mapping[str, str]) -> list[ConfigEntry]:
    """DescribeConfigs of broker "" (the cluster default): only its dynamic keys, as Kafka."""
    entries = []
    for name in sorted(cluster_dynamic):
        key = BROKER_CONFIGS.get(name)
        if key is None:
            continue
        value = _formatted(key, cluster_dynamic[name])
        entries.append(ConfigEntry(name, value, SOURCE_DYNAMIC_DEFAULT_BROKER, False, False,
                                   [(name, value, SOURCE_DYNAMIC_DEFAULT_BROKER)],
                                   CONFIG_TYPE_IDS.get(key.type, 0), key.doc))
    return entries


def topic_config_entries(effective: "BrokerConfig", static: "BrokerConfig",
                         cluster_dynamic: Mapping[str, str], broker_dynamic: Mapping[str, str],
                         overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """DescribeConfigs of a topic: each topic key, its override or broker-derived default.

    ``effective`` is the layered broker config (for derived defaults such as
    retention.ms from log.retention.hours); the layers give the sources.
    """
    values = topic_config_values(effective, overrides)
    layers = _broker_layers(static, cluster_dynamic, broker_dynamic)
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        key = TOPIC_CONFIGS[name]
        synonyms = []
        if name in overrides:
            synonyms.append((name, format_value(key.type, values[name]), SOURCE_DYNAMIC_TOPIC))
        if key.synonym is not None and key.synonym in BROKER_CONFIGS:
            synonyms.extend(_broker_synonyms(key.synonym, layers))
        source = synonyms[0][2] if synonyms else SOURCE_DEFAULT
        entries.append(ConfigEntry(name, format_value(key.type, values[name]), source, False,
                                   key.type == PASSWORD, synonyms, CONFIG_TYPE_IDS.get(key.type, 0),
                                   key.doc))
    return entries
