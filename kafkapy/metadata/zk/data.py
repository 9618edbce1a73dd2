"""Kafka's ZooKeeper znodes: paths and data, as Apache Kafka 3.9 (ZooKeeper mode) writes and reads them.

Pure functions, no ZooKeeper client: a store built on kazoo calls these to
turn the model of ``kafkapy.metadata.model`` into znode bytes and
back. The facts are Kafka's ``kafka.zk.ZkData`` (``core/src/main/scala/kafka/zk/ZkData.scala``
at 3.9.0) unless a line says otherwise.

Encoding. Kafka writes compact JSON with Jackson (no spaces). Jackson writes
a map's keys in the map's iteration order, which for Kafka's Scala maps is
not the order of the source: immutable maps of more than four entries and
every ``mutable.Map`` iterate in hash order. The encoders here reproduce
that order (``_scala_immutable_order``, ``_scala_mutable_order``,
``_java_properties_order``), so what kafkapy writes is byte-for-byte what a
Kafka 3.9 broker built with Scala 2.13 writes (timestamps aside), e.g.
``{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3,1]}``
(the order Kafka's own docs/implementation.html shows). Readers never
depend on key order.

Decoding. Kafka reads with typed getters that reject a wrong JSON type
(``kafka.utils.json.DecodeJson``: an ``Int`` must be a JSON integer in the
int32 range, a ``String`` a JSON string, ``null`` allowed only where the
field is optional). The decoders here apply the same types and tolerate the
same optional fields; anything else raises ``ValueError`` naming the znode
and quoting the data. Where Kafka silently treats unparsable data as empty
(the topic znode, config znodes, config-change notifications) we raise
instead and say so in the function's docstring: the caller decides.

Znode versions. ZooKeeper's ``Stat.version`` of a znode is not in its data;
the partition-state znode's version is the partition epoch (Kafka's
``LeaderAndIsr.partitionEpoch``), passed to ``decode_partition_state``.

meta.properties (the log dir's ``version=0``, ``broker.id``, ``cluster.id``)
is not a znode: ``kafkapy.storage.checkpoints`` reads and writes it.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from kafkapy.metadata.model import (  # noqa: F401  (sanitize, desanitize: re-exported)
    BrokerInfo,
    EndPoint,
    PartitionState,
    desanitize,
    sanitize,
)
from kafkapy.metadata.store import ProducerIdsBlock
from kafkapy.storage.checkpoints import topic_id_to_str

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# --------------------------------------------------------------------------- paths

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LATEST_PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CONSUMERS_PATH = "/consumers"  # the old consumer's offsets (OffsetCommit v0)
FEATURE_PATH = "/feature"

# Kafka's config entity types (org.apache.kafka.server.config.ConfigType).
CONFIG_TYPE_TOPIC = "topics"
CONFIG_TYPE_CLIENT = "clients"
CONFIG_TYPE_USER = "users"
CONFIG_TYPE_BROKER = "brokers"
CONFIG_TYPE_IP = "ips"
CONFIG_TYPES = (CONFIG_TYPE_TOPIC, CONFIG_TYPE_CLIENT, CONFIG_TYPE_USER, CONFIG_TYPE_BROKER, CONFIG_TYPE_IP)
# The entity name of a cluster-wide default (ZooKeeperInternals.DEFAULT_STRING).
DEFAULT_ENTITY = "<default>"

# zookeeper.set.acl=true (ZkData.defaultAcls): every znode kafkapy creates gets
# creator-all plus world-read, except the old consumers' path (left open: old
# consumers write under it) and these, which hold credentials and broker
# passwords and get creator-all only (ZkData.SensitiveRootPaths, matched as
# prefixes of the path below the chroot).
CONSUMERS_PATH = "/consumers"
SENSITIVE_ROOT_PATHS = (f"{CONFIG_PATH}/{CONFIG_TYPE_USER}", f"{CONFIG_PATH}/{CONFIG_TYPE_BROKER}",
                        "/delegation_token/tokens")


def sensitive_path(path: str) -> bool:
    """ZkData.sensitivePath: ``path`` is under one of ``SENSITIVE_ROOT_PATHS``."""
    return any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS)


# The persistent znodes every Kafka broker makes sure exist at start-up
# (ZkData.PersistentZkPaths), parents before children.
PERSISTENT_PATHS = (
    CONSUMERS_PATH, BROKER_IDS_PATH, TOPICS_PATH, CONFIG_CHANGES_PATH, DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH, ISR_CHANGE_NOTIFICATION_PATH, LATEST_PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
) + tuple(f"{CONFIG_PATH}/{t}" for t in CONFIG_TYPES)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}"


def config_entity_path(entity_type: str, sanitized_name: str) -> str:
    """``/config/<type>/<name>``; ``sanitized_name`` as Kafka stores it (see ``sanitize``
    for users and clients; topics and broker ids are used as they are)."""
    return f"{config_entity_type_path(entity_type)}/{sanitized_name}"


def topic_config_path(topic: str) -> str:
    return config_entity_path(CONFIG_TYPE_TOPIC, topic)


def broker_config_path(entity: str | int) -> str:
    """``/config/brokers/<id>`` or ``/config/brokers/<default>`` (entity ``DEFAULT_ENTITY``)."""
    return config_entity_path(CONFIG_TYPE_BROKER, str(entity))


def user_config_path(user: str) -> str:
    """``/config/users/<sanitized principal>`` (the user's name URL-encoded, ``sanitize``);
    ``DEFAULT_ENTITY`` for the default quota."""
    name = user if user == DEFAULT_ENTITY else sanitize(user)
    return config_entity_path(CONFIG_TYPE_USER, name)


def config_entity_parents(key: tuple) -> tuple:
    """The znodes a (user, client-id) entity goes under (``/config/users/<u>``,
    ``/config/users/<u>/clients``), parents first; () for other entities."""
    entity_type, name = key
    user, sep, _ = name.partition("/clients/")
    if entity_type != CONFIG_TYPE_USER or not sep:
        return ()
    return (config_entity_path(CONFIG_TYPE_USER, user), config_entity_path(CONFIG_TYPE_USER, f"{user}/clients"))


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def config_change_path(sequence: str = "") -> str:
    """The notification znode; created PERSISTENT_SEQUENTIAL with ``sequence`` empty,
    ZooKeeper appends the 10-digit sequence number."""
    return f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}{sequence}"


def isr_change_path(sequence: str = "") -> str:
    """Created PERSISTENT_SEQUENTIAL with ``sequence`` empty, like ``config_change_path``."""
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}{sequence}"


def sequence_number(name: str, prefix: str) -> int:
    """The sequence number of a sequential znode (``config_change_0000000042`` -> 42).

    ``name`` may be a full path; Kafka takes what follows the last ``prefix``
    (IsrChangeNotificationSequenceZNode.sequenceNumber)."""
    at = name.rfind(prefix)
    digits = name[at + len(prefix):] if at >= 0 else ""
    if at < 0 or not digits.isascii() or not digits.isdigit():
        raise ValueError(f"{name!r} is not a {prefix}<sequence> znode")
    return int(digits)


# ------------------------------------------------------------------ zookeeper.connect

ZOOKEEPER_DEFAULT_PORT = 2181


@dataclass(frozen=True)
class ZkConnect:
    """A parsed ``zookeeper.connect``: ``hosts`` as (host, port), ``chroot`` or None."""

    hosts: tuple
    chroot: str | None

    @property
    def hosts_string(self) -> str:
        """The servers without the chroot ("h1:2181,h2:2181"): what Kafka connects
        with to create a missing chroot before connecting under it."""
        return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.hosts)

    def path(self, znode: str) -> str:
        """The absolute path of ``znode`` for a client that does not apply the chroot itself."""
        return znode if self.chroot is None else self.chroot + ("" if znode == "/" else znode)


def parse_zookeeper_connect(connect: str) -> ZkConnect:
    """Split ``zookeeper.connect`` as ZooKeeper's ConnectStringParser does.

    ``"h1:2181,h2:2181/kafkapy"`` -> hosts (("h1", 2181), ("h2", 2181)), chroot
    "/kafkapy". The chroot starts at the first '/'; a lone "/" means none; a
    chroot must be a valid ZooKeeper path (PathUtils.validatePath: no trailing
    '/', no empty, "." or ".." segments). Hosts are comma separated, blanks
    dropped, the port defaults to 2181, IPv6 literals in brackets. Kafka
    (KafkaZkClient.apply with createChrootIfNecessary) first connects to the
    hosts alone and creates the chroot if missing.
    """
    chroot = None
    at = connect.find("/")
    if at >= 0:
        chroot = connect[at:]
        connect = connect[:at]
        if chroot == "/":
            chroot = None
        else:
            validate_zk_path(chroot)
    hosts = []
    for entry in connect.split(","):
        entry = entry.strip()
        if not entry:
            continue
        if entry.startswith("["):
            end = entry.find("]")
            if end < 0:
                raise ValueError(f"{entry} starts with '[' but has no matching ']:'")
            host, rest = entry[1:end], entry[end + 1:]
            port_text = rest[1:] if rest.startswith(":") else None
            if rest and port_text is None:
                raise ValueError(f"bad ZooKeeper address {entry!r}")
        else:
            host, _, port_text = entry.partition(":")
            port_text = port_text or None
        port = ZOOKEEPER_DEFAULT_PORT
        if port_text is not None:
            port_text = port_text.split(":")[0]
            if not port_text.isascii() or not port_text.isdigit():
                raise ValueError(f"bad port in ZooKeeper address {entry!r}")
            port = int(port_text)
        hosts.append((host, port))
    if not hosts:
        raise ValueError(f"no ZooKeeper host in {connect!r}")
    return ZkConnect(tuple(hosts), chroot)


def validate_zk_path(path: str) -> None:
    """ZooKeeper's PathUtils.validatePath, raising ValueError."""
    if not path:
        raise ValueError("Path length must be > 0")
    if path[0] != "/":
        raise ValueError(f"Path must start with / character: {path!r}")
    if len(path) == 1:
        return
    if path[-1] == "/":
        raise ValueError(f"Path must not end with / character: {path!r}")
    for segment in path[1:].split("/"):
        if segment == "":
            raise ValueError(f"empty node name specified in {path!r}")
        if segment in (".", ".."):
            raise ValueError(f"relative paths not allowed in {path!r}")
    for c in path:
        o = ord(c)
        if o == 0 or 0 < o <= 0x1F or 0x7F <= o <= 0x9F or 0xD800 <= o <= 0xF8FF or 0xFFF0 <= o <= 0xFFFF:
            raise ValueError(f"invalid character {c!r} in {path!r}")


# ------------------------------------------------------------------ JSON as Jackson

def _java_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as an unsigned 32-bit value."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def _signed(x: int) -> int:
    return x - (1 << 32) if x & 0x80000000 else x


def _scala_improve(h: int) -> int:
    # scala.collection.Hashing.improve (Scala 2.13), applied to key.## by immutable.HashMap
    h = (h + (~(h << 9) & 0xFFFFFFFF)) & 0xFFFFFFFF
    h ^= h >> 14
    h = (h + (h << 4)) & 0xFFFFFFFF
    return h ^ (h >> 10)


def _scala_immutable_order(keys: Sequence[str]) -> list:
    """Iteration order of a Scala 2.13 immutable ``Map`` built from ``keys`` in order.

    Up to four entries it is Map1..Map4 (insertion order); beyond, a CHAMP
    trie keyed on 5-bit slices of the improved hash, low bits first, each
    node's own entries before its sub-nodes'. Checked against the two
    examples in Kafka's docs/implementation.html (partition state, broker).
    """
    keys = list(dict.fromkeys(keys))
    if len(keys) <= 4:
        return keys

    def walk(group, shift):
        slots = {}
        for k in group:
            slots.setdefault((_scala_improve(_java_hash(k)) >> shift) & 31, []).append(k)
        ordered = sorted(slots.items())
        out = [g[0] for _, g in ordered if len(g) == 1]
        for _, g in ordered:
            if len(g) > 1:
                out += walk(g, shift + 5) if shift < 30 else g
        return out

    return walk(keys, 0)


def _scala_mutable_order(keys: Sequence[str], buckets: int) -> list:
    """Iteration order of a Scala 2.13 ``mutable.HashMap`` with ``buckets`` buckets:
    bucket (improved hash & (buckets - 1)) ascending, then the hash (signed) ascending."""
    def h(k):
        x = _java_hash(k)
        return x ^ (x >> 16)
    return sorted(dict.fromkeys(keys), key=lambda k: (h(k) & (buckets - 1), _signed(h(k))))


def _scala_mutable_buckets(initial: int, size: int) -> int:
    """Buckets of a Scala 2.13 ``mutable.HashMap`` that starts with ``initial`` and
    receives ``size`` entries one by one: it doubles before an insert when
    size + 1 reaches three quarters of the table."""
    buckets = initial
    for n in range(size):
        if n + 1 >= int(buckets * 0.75):
            buckets *= 2
    return buckets


def _java_properties_order(keys: Sequence[str]) -> list:
    """Iteration order of java.util.Properties (a ConcurrentHashMap since Java 9):
    bin (spread hash & (n - 1)) ascending, insertion order within a bin; the
    table starts at 16 and doubles when the size reaches three quarters."""
    keys = list(dict.fromkeys(keys))
    n = 16
    while len(keys) >= n - (n >> 2):
        n *= 2

    def spread(k):
        x = _java_hash(k)
        return (x ^ (x >> 16)) & 0x7FFFFFFF
    return sorted(keys, key=lambda k: spread(k) & (n - 1))  # sort is stable: insertion order


def _in_order(values: Mapping, order: Iterable[str]) -> dict:
    return {k: values[k] for k in order}


def _dumps(obj) -> bytes:
    # Jackson's default: compact, UTF-8, non-ASCII unescaped.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def _loads(data: bytes | bytearray | memoryview | str | None, what: str):
    if data is None:
        raise ValueError(f"{what}: no data")
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{what}: data is not UTF-8: {bytes(data)[:200]!r}") from None
    else:
        text = data
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as e:
        raise ValueError(f"{what}: not JSON ({e}): {text[:200]!r}") from None


def _object(value, what: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{what}: expected a JSON object, got {value!r:.200}")
    return value


def _field(obj: dict, key: str, what: str):
    if key not in obj:
        raise ValueError(f"{what}: no '{key}' in {json.dumps(obj)[:200]}")
    return obj[key]


def _as_int(value, what: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        kind = "Int" if hi == INT32_MAX else "Long"
        raise ValueError(f"{what}: expected `{kind}` value, received {json.dumps(value)[:100]}")
    return value


def _as_str(value, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what}: expected `String` value, received {json.dumps(value)[:100]}")
    return value


def _as_int_list(value, what: str) -> tuple:
    if not isinstance(value, list):
        raise ValueError(f"{what}: expected JSON array, received {json.dumps(value)[:100]}")
    return tuple(_as_int(v, what) for v in value)


def _int(obj: dict, key: str, what: str) -> int:
    return _as_int(_field(obj, key, what), f"{what} '{key}'")


def _str(obj: dict, key: str, what: str) -> str:
    return _as_str(_field(obj, key, what), f"{what} '{key}'")


_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")


def _java_parse_long(text: str, what: str, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    # Java's Integer/Long.parseXxx: optional sign, ASCII digits, nothing else
    if not _JAVA_INT.match(text) or not lo <= int(text) <= hi:
        raise ValueError(f"{what}: {text[:100]!r} is not a number")
    return int(text)


# ------------------------------------------------------------------ /cluster/id

def encode_cluster_id(cluster_id: str) -> bytes:
    """``{"version":"1","id":"<id>"}``: this version is a JSON string (ClusterIdZNode.toJson)."""
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    what = CLUSTER_ID_PATH
    return _str(_object(_loads(data, what), what), "id", what)


# ------------------------------------------------------------------ /consumers/<group>/offsets/<topic>/<partition>

def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    """Where OffsetCommit v0 writes (ConsumerOffset.path); ValueError for a path
    ZooKeeper refuses (an empty group, ".", control characters), which Kafka
    answers as the exception it is (UNKNOWN_SERVER_ERROR). A group with "/"
    names nested znodes, as in Kafka."""
    path = f"{CONSUMERS_PATH}/{group}/offsets/{topic}/{partition}"
    validate_zk_path(path)
    return path


def encode_consumer_offset(offset: int) -> bytes:
    """The offset as decimal text, no JSON (ConsumerOffset.encode)."""
    return str(int(offset)).encode("ascii")


_LONG_TEXT = re.compile(r"[+-]?[0-9]+")


def decode_consumer_offset(data: bytes) -> int:
    """Java's ``Long.parseLong`` of the text (ConsumerOffset.decode); ValueError otherwise."""
    what = "consumer offset"
    text = bytes(data or b"").decode("utf-8", "replace")
    if not _LONG_TEXT.fullmatch(text) or not INT64_MIN <= int(text) <= INT64_MAX:
        raise ValueError(f"{what}: {text[:100]!r} is not a long")
    return int(text)


# ------------------------------------------------------------------ /controller, /controller_epoch

# What a ZooKeeper-mode controller writes as kraftControllerEpoch; a KRaft
# controller migrating the cluster writes its own epoch (ControllerZNode.encode).
NO_KRAFT_CONTROLLER_EPOCH = -1


@dataclass(frozen=True)
class ControllerRegistration:
    """``/controller`` (ephemeral). ``kraft_controller_epoch``: None if absent (Kafka before
    3.4 wrote version 1 without it), -1 for a ZooKeeper controller, else the
    epoch of the KRaft controller that claimed the cluster during migration."""

    broker_id: int
    timestamp_ms: int | None = None
    kraft_controller_epoch: int | None = NO_KRAFT_CONTROLLER_EPOCH
    version: int = 2


def encode_controller(broker_id: int, timestamp_ms: int,
                      kraft_controller_epoch: int = NO_KRAFT_CONTROLLER_EPOCH) -> bytes:
    """``{"version":2,"brokerid":1,"timestamp":"<ms>","kraftControllerEpoch":-1}``
    (timestamp as a string)."""
    return _dumps({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms),
                   "kraftControllerEpoch": kraft_controller_epoch})


def decode_controller(data: bytes) -> ControllerRegistration:
    """Kafka reads ``brokerid`` (required) and ``kraftControllerEpoch`` (optional);
    ``timestamp`` and ``version`` are informational and read leniently here."""
    what = CONTROLLER_PATH
    obj = _object(_loads(data, what), what)
    broker_id = _int(obj, "brokerid", what)
    kraft = obj.get("kraftControllerEpoch")
    if kraft is not None:
        kraft = _as_int(kraft, f"{what} 'kraftControllerEpoch'")
    timestamp = obj.get("timestamp")
    timestamp = int(timestamp) if isinstance(timestamp, str) and _JAVA_INT.match(timestamp) else None
    version = obj.get("version")
    return ControllerRegistration(broker_id, timestamp, kraft,
                                  version if isinstance(version, int) and not isinstance(version, bool) else 1)


def encode_controller_epoch(epoch: int) -> bytes:
    """The epoch as decimal text, not JSON (ControllerEpochZNode). Kafka creates the
    znode with 0 and the first elected controller moves it to 1."""
    return str(_as_int(epoch, CONTROLLER_EPOCH_PATH)).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    if data is None:
        raise ValueError(f"{CONTROLLER_EPOCH_PATH}: no data")
    try:
        text = bytes(data).decode("ascii")
    except UnicodeDecodeError:
        raise ValueError(f"{CONTROLLER_EPOCH_PATH}: not a number: {bytes(data)[:50]!r}") from None
    return _java_parse_long(text, CONTROLLER_EPOCH_PATH, INT32_MIN, INT32_MAX)


# ------------------------------------------------------------------ /brokers/ids/<id>

BROKER_REGISTRATION_VERSION = 5  # Kafka writes 5 from inter.broker.protocol.version 2.7
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's listener endpoint syntax (SocketServerConfigs.URI_PARSE_REGEXP), matched whole.
_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)\Z", re.DOTALL)


@dataclass(frozen=True)
class BrokerRegistration:
    """``/brokers/ids/<id>`` (ephemeral) beyond the model: what the znode also carries."""

    broker: BrokerInfo
    version: int = BROKER_REGISTRATION_VERSION
    jmx_port: int = -1
    timestamp_ms: int | None = None
    features: dict = field(default_factory=dict)  # name -> {"min_version": n, "max_version": m}


def endpoint_connection_string(ep: EndPoint) -> str:
    """Kafka's EndPoint.connectionString: ``NAME://host:port``, ``NAME://[v6]:port``,
    ``NAME://:port`` for the wildcard host (empty in the model, null in Kafka)."""
    if not ep.host:
        return f"{ep.listener_name}://:{ep.port}"
    host = f"[{ep.host}]" if ":" in ep.host else ep.host
    return f"{ep.listener_name}://{host}:{ep.port}"


def parse_endpoint(text: str, protocol_map: Mapping[str, str] | None = None) -> EndPoint:
    """One ``NAME://host:port`` (SocketServerConfigs.listenerListToEndPoints); the listener
    name is upper-cased; its security protocol comes from ``protocol_map``
    (default: the listener named after a protocol uses that protocol)."""
    m = _ENDPOINT.match(text)
    if not m:
        raise ValueError(f"Unable to parse {text} to a broker endpoint")
    name = m.group(1).upper()
    port = _java_parse_long(m.group(3), f"endpoint {text}", INT32_MIN, INT32_MAX)
    if protocol_map is None:
        protocol = name if name in SECURITY_PROTOCOLS else None
    else:
        protocol = protocol_map.get(name)
    if protocol is None:
        raise ValueError(f"No security protocol defined for listener {name}")
    return EndPoint(m.group(2), port, name, protocol)


def _broker_endpoints(broker: BrokerInfo) -> tuple:
    return tuple(broker.endpoints) or (EndPoint(broker.host, broker.port),)


def encode_broker(broker: BrokerInfo, timestamp_ms: int, jmx_port: int = -1,
                  version: int = BROKER_REGISTRATION_VERSION, features: Mapping | None = None) -> bytes:
    """The registration a Kafka 3.9 broker writes (BrokerIdZNode.encode).

    Top-level ``host``/``port`` are those of the first endpoint whose security
    protocol is PLAINTEXT, else null and -1 (for pre-0.10 clients);
    ``endpoints`` every listener as ``NAME://host:port``;
    ``listener_security_protocol_map`` (version >= 4) name -> protocol;
    ``rack`` only if set; ``features`` (version >= 5) the supported feature
    ranges, empty for a ZooKeeper-mode broker (KafkaServer registers
    BrokerFeatures.createEmpty()). A model broker without ``endpoints`` is
    one PLAINTEXT listener at host:port.
    """
    endpoints = _broker_endpoints(broker)
    names = [ep.listener_name for ep in endpoints]
    if len(set(names)) != len(names):
        raise ValueError(f"There is more than one end point with the same listener name: {names}")
    plaintext = next((ep for ep in endpoints if ep.security_protocol == "PLAINTEXT"), None)
    values = {
        "version": version,
        "host": (plaintext.host or None) if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [endpoint_connection_string(ep) for ep in endpoints],
        "jmx_port": jmx_port,
        "timestamp": str(timestamp_ms),
    }
    if broker.rack is not None and version >= 3:
        values["rack"] = broker.rack
    if version >= 4:
        values["listener_security_protocol_map"] = _in_order(
            {ep.listener_name: ep.security_protocol for ep in endpoints}, _scala_immutable_order(names))
    if version >= 5:
        values["features"] = {k: dict(v) for k, v in (features or {}).items()}
    # a mutable.Map of six entries, then up to three added: 16 buckets
    return _dumps(_in_order(values, _scala_mutable_order(values, 16)))


def decode_broker_registration(broker_id: int, data: bytes) -> BrokerRegistration:
    """Any registration version Kafka 3.9 reads (1..5; BrokerIdZNode.decode).

    Required: ``version`` (>= 1), ``jmx_port``; version 1: ``host`` and ``port``;
    later: ``endpoints``, with ``listener_security_protocol_map`` optional
    (default: each of the four protocol names maps to itself). Optional:
    ``rack`` (null allowed), ``features``, ``timestamp``. The model's
    ``host``/``port`` are the first endpoint's.
    """
    what = broker_path(broker_id)
    obj = _object(_loads(data, what), what)
    version = _int(obj, "version", what)
    jmx_port = _int(obj, "jmx_port", what)
    if version < 1:
        raise ValueError(f"{what}: Unsupported version of broker registration: {json.dumps(obj)[:200]}")
    if version == 1:
        endpoints = (EndPoint(_str(obj, "host", what), _int(obj, "port", what)),)
    else:
        protocol_map = obj.get("listener_security_protocol_map")
        if protocol_map is not None:
            protocol_map = _object(protocol_map, f"{what} 'listener_security_protocol_map'")
            # keys are taken as written (Kafka: new ListenerName(k), not normalised),
            # values upper-cased (SecurityProtocol.forName)
            protocol_map = {k: _as_str(v, f"{what} listener {k}").upper() for k, v in protocol_map.items()}
            for name, protocol in protocol_map.items():
                if protocol not in SECURITY_PROTOCOLS:
                    raise ValueError(f"{what}: unknown security protocol {protocol} for listener {name}")
        raw = _field(obj, "endpoints", what)
        if not isinstance(raw, list):
            raise ValueError(f"{what}: 'endpoints' must be a JSON array")
        texts = [_as_str(t, f"{what} endpoint") for t in raw]
        # Kafka joins the list with ',' and splits it again as a CSV list
        texts = [t.strip() for t in ",".join(texts).strip().split(",") if t.strip()] if texts else []
        try:
            endpoints = tuple(parse_endpoint(t, protocol_map) for t in texts)
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None
        names = [ep.listener_name for ep in endpoints]
        if len(set(names)) != len(names):
            raise ValueError(f"{what}: There is more than one end point with the same listener name: {names}")
    rack = obj.get("rack")
    if rack is not None:
        rack = _as_str(rack, f"{what} 'rack'")
    features = obj.get("features")
    if features is None:
        features = {}
    else:
        features = _object(features, f"{what} 'features'")
        for name, ranges in features.items():
            for label, v in _object(ranges, f"{what} feature {name}").items():
                _as_int(v, f"{what} feature {name} {label}")
    timestamp = obj.get("timestamp")
    timestamp = int(timestamp) if isinstance(timestamp, str) and _JAVA_INT.match(timestamp) else None
    if endpoints:
        host, port = endpoints[0].host, endpoints[0].port
    else:
        host = obj.get("host") if isinstance(obj.get("host"), str) else ""
        port = obj.get("port") if isinstance(obj.get("port"), int) else -1
    broker = BrokerInfo(broker_id, host, port, rack, endpoints)
    return BrokerRegistration(broker, version, jmx_port, timestamp, dict(features))


def decode_broker(broker_id: int, data: bytes) -> BrokerInfo:
    return decode_broker_registration(broker_id, data).broker


def broker_id_from_path(path: str) -> int:
    """``/brokers/ids/3`` or ``3`` -> 3."""
    name = path.rsplit("/", 1)[-1]
    return _java_parse_long(name, f"broker znode {path!r}", INT32_MIN, INT32_MAX)


# ------------------------------------------------------------------ /brokers/topics/<topic>

TOPIC_ZNODE_VERSION = 3


@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<topic>``: the topic id and each partition's replicas, plus the
    replicas being added or removed by a reassignment in progress."""

    topic_id: uuid.UUID | None
    partitions: dict  # partition -> tuple of broker ids
    adding_replicas: dict = field(default_factory=dict)
    removing_replicas: dict = field(default_factory=dict)


def uuid_to_kafka(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded (22 characters)."""
    return topic_id_to_str(topic_id.bytes)


_BASE64URL = re.compile(r"[A-Za-z0-9_-]*={0,2}\Z")


def uuid_from_kafka(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString: URL-safe base64 (padding optional), exactly 16 bytes."""
    if len(text) > 24 or not _BASE64URL.match(text):
        raise ValueError(f"Input string `{text[:24]}` is not a base64 UUID")
    stripped = text.rstrip("=")
    try:
        raw = base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))
    except ValueError:
        raise ValueError(f"Input string `{text}` is not a base64 UUID") from None
    if len(raw) != 16:
        raise ValueError(f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal "
                         "to the expected 16 bytes of a base64-encoded UUID")
    return uuid.UUID(bytes=raw)


def _partition_map(assignment: Mapping[int, Sequence[int]]) -> dict:
    values = {str(p): [int(b) for b in r] for p, r in assignment.items()}
    buckets = _scala_mutable_buckets(16, len(values))
    return _in_order(values, _scala_mutable_order(values, buckets))


def encode_topic(topic_id: uuid.UUID | None, partitions: Mapping[int, Sequence[int]],
                 adding_replicas: Mapping[int, Sequence[int]] | None = None,
                 removing_replicas: Mapping[int, Sequence[int]] | None = None) -> bytes:
    """``{"partitions":{"0":[1,2]},"topic_id":"<base64>","adding_replicas":{},
    "removing_replicas":{},"version":3}`` (TopicZNode.encode); ``topic_id``
    omitted when None; adding/removing hold only partitions with replicas
    in motion."""
    adding = {p: r for p, r in (adding_replicas or {}).items() if r}
    removing = {p: r for p, r in (removing_replicas or {}).items() if r}
    values = {"version": TOPIC_ZNODE_VERSION, "partitions": _partition_map(partitions),
              "adding_replicas": _partition_map(adding), "removing_replicas": _partition_map(removing)}
    if topic_id is not None:
        values["topic_id"] = uuid_to_kafka(topic_id)
    # a mutable.Map built from four entries has 8 buckets, and topic_id fits
    return _dumps(_in_order(values, _scala_mutable_order(values, 8)))


def decode_topic(topic: str, data: bytes) -> TopicAssignment:
    """Any version (1..3; Kafka does not read ``version``): ``partitions`` (absent: no
    partitions), ``topic_id`` (absent before version 3), ``adding_replicas`` /
    ``removing_replicas`` (absent: none). Kafka reads unparsable data as a
    topic without id or partitions; this raises ValueError."""
    what = topic_path(topic)
    obj = _object(_loads(data, what), what)
    topic_id = obj.get("topic_id")
    if topic_id is not None:
        try:
            topic_id = uuid_from_kafka(_as_str(topic_id, f"{what} 'topic_id'"))
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None

    def partition_map(key):
        raw = obj.get(key)
        if raw is None:
            return {}
        out = {}
        for p, replicas in _object(raw, f"{what} '{key}'").items():
            pid = _java_parse_long(p, f"{what} '{key}' partition", INT32_MIN, INT32_MAX)
            out[pid] = _as_int_list(replicas, f"{what} '{key}' partition {p}")
        return dict(sorted(out.items()))

    partitions = partition_map("partitions")
    adding = {p: r for p, r in partition_map("adding_replicas").items() if p in partitions}
    removing = {p: r for p, r in partition_map("removing_replicas").items() if p in partitions}
    return TopicAssignment(topic_id, partitions, adding, removing)


# ------------------------------------------------------------------ partition state

# Kafka's LeaderRecoveryState: written only when not RECOVERED.
LEADER_RECOVERED = 0
LEADER_RECOVERING = 1


@dataclass(frozen=True)
class PartitionStateZNode:
    """``/brokers/topics/<t>/partitions/<p>/state`` (Kafka's LeaderIsrAndControllerEpoch).

    ``state.replicas`` come from the topic znode, ``state.partition_epoch``
    is the state znode's ``Stat.version``: neither is in the JSON."""

    state: PartitionState
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERED


def encode_partition_state(state: PartitionState, controller_epoch: int,
                           leader_recovery_state: int = LEADER_RECOVERED) -> bytes:
    """``{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3,1]}``,
    plus ``"leader_recovery_state":1`` only while RECOVERING (TopicPartitionStateZNode.encode)."""
    if leader_recovery_state not in (LEADER_RECOVERED, LEADER_RECOVERING):
        raise ValueError(f"Value {leader_recovery_state} is not a valid leader recovery state")
    values = {"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
              "controller_epoch": controller_epoch, "isr": list(state.isr)}
    if leader_recovery_state != LEADER_RECOVERED:
        values["leader_recovery_state"] = leader_recovery_state
    return _dumps(_in_order(values, _scala_immutable_order(list(values))))


def decode_partition_state(data: bytes, replicas: Sequence[int] = (), zk_version: int = 0,
                           topic: str = "?", partition: int = -1) -> PartitionStateZNode:
    """Required: ``leader``, ``leader_epoch``, ``isr``, ``controller_epoch``; optional
    ``leader_recovery_state`` (absent: RECOVERED). ``replicas`` (from the topic
    znode) and ``zk_version`` (the znode's version = partition epoch) fill the
    model's other fields."""
    what = partition_state_path(topic, partition)
    obj = _object(_loads(data, what), what)
    leader = _int(obj, "leader", what)
    leader_epoch = _int(obj, "leader_epoch", what)
    isr = _as_int_list(_field(obj, "isr", what), f"{what} 'isr'")
    recovery = obj.get("leader_recovery_state", LEADER_RECOVERED)
    recovery = _as_int(recovery, f"{what} 'leader_recovery_state'")
    if recovery not in (LEADER_RECOVERED, LEADER_RECOVERING):
        raise ValueError(f"{what}: Value {recovery} is not a valid leader recovery state")
    controller_epoch = _int(obj, "controller_epoch", what)
    state = PartitionState(tuple(replicas), leader, leader_epoch, isr, zk_version)
    return PartitionStateZNode(state, controller_epoch, recovery)


# ------------------------------------------------------------------ /config/<type>/<name>

def encode_config(config: Mapping[str, str]) -> bytes:
    """``{"version":1,"config":{"k":"v"}}`` (ConfigEntityZNode.encode); values are strings,
    keys in the order of Kafka's java.util.Properties."""
    values = {str(k): _as_str(v, f"config {k}") for k, v in config.items()}
    return _dumps({"version": 1, "config": _in_order(values, _java_properties_order(list(values)))})


def decode_config(data: bytes | None) -> dict:
    """The entity's overrides. No data (a znode created empty) is no overrides, as in
    Kafka; so is a JSON value without a ``config`` object. Kafka also reads
    unparsable data as empty; this raises ValueError. Values must be strings."""
    if data is None or len(data) == 0:
        return {}
    what = "config znode"
    obj = _loads(data, what)
    if not isinstance(obj, dict) or not isinstance(obj.get("config"), dict):
        return {}
    return {k: _as_str(v, f"{what} '{k}'") for k, v in obj["config"].items()}


def encode_config_change(entity_type: str, sanitized_name: str) -> bytes:
    """``{"version":2,"entity_path":"topics/<t>"}``: the body of a
    ``/config/changes/config_change_`` sequential znode written after a config change."""
    return _dumps({"version": 2, "entity_path": f"{entity_type}/{sanitized_name}"})


def decode_config_change(data: bytes) -> tuple:
    """(entity type, sanitized entity name) of a notification, versions 1 and 2
    (ZkConfigManager): version 1 ``{"version":1,"entity_type":"topics","entity_name":"t"}``
    (types topics and clients only), version 2 ``{"version":2,"entity_path":"topics/t"}``
    (the name may itself hold '/', e.g. users/<u>/clients/<c>). Kafka ignores a
    notification that is not JSON; this raises ValueError for it as for others."""
    what = "config change notification"
    obj = _loads(data, what)
    if not isinstance(obj, dict):
        raise ValueError(f"{what} has an unexpected value: {json.dumps(obj)[:200]}")
    version = _int(obj, "version", what)
    if version == 1:
        entity_type = obj.get("entity_type")
        if entity_type not in (CONFIG_TYPE_TOPIC, CONFIG_TYPE_CLIENT):
            raise ValueError("Version 1 config change notification must have 'entity_type' set to "
                             f"'clients' or 'topics'. Received: {json.dumps(obj)[:200]}")
        name = obj.get("entity_name")
        if not isinstance(name, str):
            raise ValueError("Version 1 config change notification does not specify 'entity_name'. "
                             f"Received: {json.dumps(obj)[:200]}")
        return entity_type, name
    if version == 2:
        entity_path = obj.get("entity_path")
        if not isinstance(entity_path, str):
            raise ValueError("Version 2 config change notification must specify 'entity_path'. "
                             f"Received: {json.dumps(obj)[:200]}")
        entity_type, sep, name = entity_path.partition("/")
        if not sep or entity_type not in CONFIG_TYPES:
            raise ValueError("Version 2 config change notification must have 'entity_path' starting with "
                             f"one of {', '.join(repr(t) + '/' for t in CONFIG_TYPES)}. "
                             f"Received: {json.dumps(obj)[:200]}")
        return entity_type, name
    raise ValueError(f"Config change notification has unsupported version '{version}', "
                     "supported versions are 1 and 2.")


# ------------------------------------------------------------------ /admin/delete_topics/<t>

# Kafka creates the marker with no data (KafkaZkClient.createDeleteTopicPath):
# only its name says which topic; ZooKeeper returns empty bytes for it.
DELETE_TOPIC_DATA = b""


# ------------------------------------------------------------------ /isr_change_notification

def encode_isr_change(partitions: Iterable[tuple]) -> bytes:
    """``{"version":1,"partitions":[{"topic":"t","partition":0}]}`` for (topic, partition)
    pairs, each once (Kafka's is a Set; in the order given here)."""
    seen = list(dict.fromkeys((str(t), int(p)) for t, p in partitions))
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in seen]})


def decode_isr_change(data: bytes) -> set:
    """The set of (topic, partition) of a notification; ``partitions`` is required."""
    what = ISR_CHANGE_NOTIFICATION_PATH
    obj = _object(_loads(data, what), what)
    entries = _field(obj, "partitions", what)
    if not isinstance(entries, list):
        raise ValueError(f"{what}: 'partitions' must be a JSON array")
    out = set()
    for entry in entries:
        entry = _object(entry, f"{what} partition")
        out.add((_str(entry, "topic", what), _int(entry, "partition", what)))
    return out


# ------------------------------------------------------------------ /log_dir_event_notification

LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1  # LogDirEventNotificationSequenceZNode.LogDirFailureEvent


def log_dir_event_path(sequence: str = "") -> str:
    """Created PERSISTENT_SEQUENTIAL with ``sequence`` empty (Kafka's propagateLogDirEvent)."""
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}{sequence}"


def encode_log_dir_event(broker_id: int) -> bytes:
    """``{"version":1,"broker":<id>,"event":1}``: a log dir of the broker failed."""
    return _dumps({"version": 1, "broker": int(broker_id), "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    """The broker id of a log-dir event notification (only ``broker`` is read, as Kafka does)."""
    what = LOG_DIR_EVENT_NOTIFICATION_PATH
    return _int(_object(_loads(data, what), what), "broker", what)


# ------------------------------------------------------------------ /latest_producer_id_block

def encode_producer_id_block(block: ProducerIdsBlock) -> bytes:
    """``{"version":1,"broker":0,"block_start":"0","block_end":"999"}``: start and end
    (inclusive: the last id) as strings (ProducerIdBlockZNode)."""
    return _dumps({"version": 1, "broker": block.assigned_broker_id,
                   "block_start": str(block.first_producer_id), "block_end": str(block.last_producer_id)})


def decode_producer_id_block(data: bytes) -> ProducerIdsBlock:
    """``broker`` an Int, ``block_start``/``block_end`` strings holding longs;
    size = end - start + 1 must fit an Int (Math.toIntExact)."""
    what = LATEST_PRODUCER_ID_BLOCK_PATH
    obj = _object(_loads(data, what), what)
    broker = _int(obj, "broker", what)
    start = _java_parse_long(_str(obj, "block_start", what), f"{what} 'block_start'")
    end = _java_parse_long(_str(obj, "block_end", what), f"{what} 'block_end'")
    size = end - start + 1
    if not INT32_MIN <= size <= INT32_MAX:
        raise ValueError(f"{what}: block size {size} overflows an int")
    return ProducerIdsBlock(broker, start, size)


def next_producer_id_block(current: ProducerIdsBlock | None, broker_id: int,
                           size: int = 1000) -> ProducerIdsBlock:
    """The block ZkProducerIdManager writes next: the first at 0, then right after
    the current one; raises when the ids would pass the long range."""
    if current is None:
        return ProducerIdsBlock(broker_id, 0, size)
    if current.last_producer_id > INT64_MAX - size:
        raise ValueError("Have exhausted all producerIds.")
    return ProducerIdsBlock(broker_id, current.next_block_first_id, size)

