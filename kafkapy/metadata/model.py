"""The cluster-metadata model every metadata store hands out.

Named after what Kafka keeps in ZooKeeper (kafka.zk.KafkaZkClient's znodes):

* ``BrokerInfo``  — ``/brokers/ids/<id>``: id, endpoints, rack (ephemeral in
  ZooKeeper, so never written by the embedded store either: it is this
  process tree's own registration);
* ``TopicInfo``   — ``/brokers/topics/<name>``: topic id and the replica
  assignment of each partition, plus ``/config/topics/<name>`` overrides;
* ``PartitionState`` — ``/brokers/topics/<name>/partitions/<p>/state``
  (Kafka's ``LeaderIsrAndControllerEpoch``) with the partition's ``replicas``
  from the topic znode beside it; ``partition_epoch`` is the state znode's
  version, bumped by every leader or ISR change;
* ``controller_id`` / ``controller_epoch`` — ``/controller``,
  ``/controller_epoch``;
* ``broker_configs`` — ``/config/brokers/<entity>`` (``<default>`` or an id);
* ``entity_configs`` — the user and client entities (``/config/users/<user>``,
  ``/config/clients/<client-id>``, ``/config/users/<user>/clients/<client-id>``,
  any name possibly ``<default>``): client quotas and SCRAM credentials
  (contract below); and the IP entities (``/config/ips/<ip>``: connection
  creation rate quotas);
* ``producer_id_block_end`` — the end of ``/latest_producer_id_block``.

Standalone (the embedded store) the one broker is the controller and leads
every partition: its ``PartitionState`` is replicas = isr = [broker_id],
leader = broker_id, leader_epoch = 0, partition_epoch = 0. The embedded
store does not write those: ``TopicInfo.partitions`` holds only the
partitions whose state was set explicitly (a ZooKeeper store sets all), and
``Metadata.partition_state`` derives the others from ``controller_id``, so a
10,000-partition topic stays one line of the metadata file.

Which shared-table slot holds a partition is not metadata: the slot map of
``kafkapy.storage.shared.SharedPartitionTable`` (``slot_for``) says.

User and client entity configs (Kafka's ConfigType.USER / CLIENT entities).
``Metadata.entity_configs`` maps an entity key to its ``{key: value}`` config
(strings, as in the znode). A key is ``(entity_type, name)`` where the pair
is the znode path below ``/config`` with names sanitized as Kafka stores them
(``sanitize``; ``<default>`` as it is): build keys with ``user_entity(user)``,
``client_entity(client_id)``, ``user_client_entity(user, client_id)`` (None
or ``DEFAULT_ENTITY`` for a default name) and read them back with
``entity_names(key)`` -> ``(user, client_id)`` (unsanitized; None for a part
the entity does not have). Examples: ``("users", "alice")``, ``("clients",
"c1")``, ``("users", "alice/clients/c1")``, ``("users",
"<default>/clients/<default>")``; IP entities are ``ip_entity(ip)``
(``("ips", "127.0.0.1")``). An entity with no config is absent (never
an empty dict). Quota keys (``producer_byte_rate``, ...) and SCRAM keys
(``SCRAM-SHA-256`` = ``salt=...,stored_key=...,server_key=...,iterations=N``)
share a user's entity, so change them only key by key, through
``MetadataStore.alter_entity_configs(entity, set, delete)`` (atomic, other
keys of the entity untouched, every process sees it through the generation).
Standalone they are persisted in the embedded store's file (``"entity_configs":
{"users/alice": {...}}``); in a cluster in ZooKeeper, followed by every broker
from ``/config/changes`` into its image.

Ownership: a ``Metadata`` returned by a store's ``current()`` is shared by
every caller in the process; treat it as read-only and change metadata only
through ``MetadataStore.update``.
"""

from __future__ import annotations

import urllib.parse
import uuid
from dataclasses import dataclass, field

# Kafka's ZooKeeper controller epoch starts at 0 (/controller_epoch absent)
# and the first elected controller bumps it to 1.
INITIAL_CONTROLLER_EPOCH = 1
# Kafka's "no broker" for a leader or controller id.
NO_BROKER = -1

# Kafka's config entity types of users and clients (ConfigType) and the name of
# a default entity (ZooKeeperInternals.DEFAULT_STRING).
ENTITY_USERS = "users"
ENTITY_CLIENTS = "clients"
ENTITY_IPS = "ips"
DEFAULT_ENTITY = "<default>"


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user principal or client id as a znode name
    (URL-encoded as Java's URLEncoder does, with ``*`` -> ``%2A`` and space -> ``%20``)."""
    # Java's URLEncoder leaves [A-Za-z0-9.*_-] alone and encodes space as '+';
    # Kafka then rewrites '*' and '+' so the result also is a legal JMX name.
    # Python's quote differs only in leaving '~' alone (and encodes '*' and ' ' as Kafka ends up).
    return urllib.parse.quote(name, safe="", encoding="utf-8").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize (Java's URLDecoder: '+' is a space)."""
    return urllib.parse.unquote_plus(name, encoding="utf-8", errors="strict")


def _entity_name(name: str | None) -> str:
    return DEFAULT_ENTITY if name is None or name == DEFAULT_ENTITY else sanitize(name)


def user_entity(user: str | None) -> tuple:
    """The entity key of ``/config/users/<user>`` (None: the default user)."""
    return (ENTITY_USERS, _entity_name(user))


def client_entity(client_id: str | None) -> tuple:
    """The entity key of ``/config/clients/<client-id>`` (None: the default client)."""
    return (ENTITY_CLIENTS, _entity_name(client_id))


def ip_entity(ip: str | None) -> tuple:
    """The entity key of ``/config/ips/<ip>`` (None: the default IP)."""
    return (ENTITY_IPS, _entity_name(ip))


def ip_name(key: tuple) -> str:
    """The IP of an IP entity key (``DEFAULT_ENTITY`` for the default)."""
    return key[1] if key[1] == DEFAULT_ENTITY else desanitize(key[1])


def user_client_entity(user: str | None, client_id: str | None) -> tuple:
    """The entity key of ``/config/users/<user>/clients/<client-id>``."""
    return (ENTITY_USERS, f"{_entity_name(user)}/{ENTITY_CLIENTS}/{_entity_name(client_id)}")


def entity_key(user: str | None = None, client_id: str | None = None, *,
               user_default: bool = False, client_default: bool = False) -> tuple:
    """The key of the entity naming ``user`` and/or ``client_id`` (``*_default``: the
    default of that part); ValueError when it names neither."""
    has_user, has_client = user is not None or user_default, client_id is not None or client_default
    if has_user and has_client:
        return user_client_entity(user, client_id)
    if has_user:
        return user_entity(user)
    if has_client:
        return client_entity(client_id)
    raise ValueError("an entity names a user, a client id or both")


def entity_names(key: tuple) -> tuple:
    """``(user, client_id)`` of an entity key, unsanitized; ``DEFAULT_ENTITY`` for a
    default part and None for a part the entity does not have (both for an IP
    entity)."""
    entity_type, name = key
    unname = lambda n: n if n == DEFAULT_ENTITY else desanitize(n)  # noqa: E731
    if entity_type == ENTITY_CLIENTS:
        return None, unname(name)
    if entity_type == ENTITY_IPS:
        return None, None  # neither part (``ip_name`` has its name)
    if entity_type != ENTITY_USERS:
        raise ValueError(f"not a user, client or IP entity: {key!r}")
    user, sep, client = name.partition(f"/{ENTITY_CLIENTS}/")
    return unname(user), (unname(client) if sep else None)


def entity_path(key: tuple) -> str:
    """``users/alice/clients/c1``: the entity's path below ``/config`` (the
    ``entity_path`` of its change notification; the embedded file's key)."""
    return f"{key[0]}/{key[1]}"


def entity_from_path(path: str) -> tuple:
    entity_type, sep, name = path.partition("/")
    if not sep or entity_type not in (ENTITY_USERS, ENTITY_CLIENTS, ENTITY_IPS) or not name:
        raise ValueError(f"not a user, client or IP entity path: {path!r}")
    return (entity_type, name)


@dataclass(frozen=True)
class EndPoint:
    """One listener a broker advertises (Kafka's ``kafka.cluster.EndPoint``)."""

    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True)
class BrokerInfo:
    """A registered broker (``/brokers/ids/<broker_id>``); ``host``/``port``
    are its first advertised endpoint's."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple = ()  # EndPoint, in listener order


@dataclass(frozen=True)
class PartitionState:
    """Assignment, leader and ISR of one partition (``LeaderIsrAndControllerEpoch``
    plus the partition's replicas; ``partition_epoch`` = the state znode version)."""

    replicas: tuple
    leader: int
    leader_epoch: int
    isr: tuple
    partition_epoch: int = 0
    # Replicas on an offline log dir of a live broker, as UpdateMetadata's
    # offline_replicas said (the broker image only; brokers not live are
    # offline replicas without being listed here).
    offline_replicas: tuple = ()

    def to_json(self) -> dict:
        data = {"replicas": list(self.replicas), "leader": self.leader,
                "leader_epoch": self.leader_epoch, "isr": list(self.isr),
                "partition_epoch": self.partition_epoch}
        if self.offline_replicas:
            data["offline_replicas"] = list(self.offline_replicas)
        return data

    @classmethod
    def from_json(cls, data: dict) -> "PartitionState":
        return cls(tuple(data["replicas"]), data["leader"], data["leader_epoch"],
                   tuple(data["isr"]), data.get("partition_epoch", 0), tuple(data.get("offline_replicas", ())))

    @classmethod
    def single_broker(cls, broker_id: int) -> "PartitionState":
        """The standalone broker's partition: it alone replicates and leads it,
        at epoch 0. One shared (frozen) object per broker id: a Metadata
        answer over 10,000 partitions asks for it 10,000 times."""
        state = _SINGLE_BROKER.get(broker_id)
        if state is None:
            state = _SINGLE_BROKER[broker_id] = cls((broker_id,), broker_id, 0, (broker_id,), 0)
        return state


_SINGLE_BROKER: dict = {}
# A cluster-mode partition the controller has not told this broker about yet:
# no replicas known, no leader (clients get LEADER_NOT_AVAILABLE and retry).
UNKNOWN_PARTITION_STATE = PartitionState((), NO_BROKER, -1, (), -1)


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict = field(default_factory=dict)  # topic config overrides
    # partition -> PartitionState, only where set explicitly; see Metadata.partition_state
    partitions: dict = field(default_factory=dict)

    def replicas(self, partition: int) -> tuple | None:
        state = self.partitions.get(partition)
        return state.replicas if state is not None else None


@dataclass
class Metadata:
    topics: dict = field(default_factory=dict)  # name -> TopicInfo
    producer_id_block_end: int = 0
    # entity ("<default>" or a broker id as a string) -> {broker key: raw value}
    broker_configs: dict = field(default_factory=dict)
    brokers: dict = field(default_factory=dict)  # broker_id -> BrokerInfo (live registrations)
    controller_id: int = NO_BROKER
    controller_epoch: int = 0
    # user/client entity key -> {key: value}: quotas and SCRAM credentials
    # (module docstring); only entities with a config
    entity_configs: dict = field(default_factory=dict)
    # Cluster mode (the broker's metadata image): every partition's state is
    # explicit, and one the controller has not sent yet is unknown (leader
    # -1), never derived from the standalone rule.
    cluster_mode: bool = False

    def broker_dynamic(self, entity: str) -> dict:
        return self.broker_configs.get(entity, {})

    def by_id(self, topic_id) -> TopicInfo | None:
        for info in self.topics.values():
            if info.topic_id == topic_id:
                return info
        return None

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """The partition's assignment, leader and ISR; None if there is no such partition.

        Partitions without an explicit state are the standalone broker's
        (module docstring): led by the controller at epoch 0.
        """
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            return None
        state = info.partitions.get(partition)
        return state if state is not None else self._unset_state()

    def _unset_state(self) -> PartitionState:
        """The state of a partition with none set: in a cluster not known yet
        (no leader), standalone this broker's (module docstring)."""
        return UNKNOWN_PARTITION_STATE if self.cluster_mode else PartitionState.single_broker(
            self.controller_id)

    def partition_states(self, info: TopicInfo):
        """Every partition's state of topic ``info``, in partition order (the
        derived ones are one shared object: see ``partition_state``)."""
        default = self._unset_state()
        explicit = info.partitions
        if not explicit:
            return [default] * info.num_partitions
        return [explicit.get(p, default) for p in range(info.num_partitions)]

    # -- the embedded store's file ------------------------------------------------
    # Only the persistent facts: broker registrations and the controller are
    # this process tree's own (ZooKeeper keeps them in ephemeral znodes), and
    # standalone the controller epoch never moves from its first value.

    def to_json(self, live: bool = False) -> dict:
        """The persistent facts; with ``live`` also the brokers and the
        controller (the cluster-mode image keeps what the controller sent)."""
        topics = {}
        for name, t in self.topics.items():
            entry = {"topic_id": str(t.topic_id), "num_partitions": t.num_partitions,
                     "configs": t.configs}
            if t.partitions:
                entry["partitions"] = {str(p): s.to_json() for p, s in sorted(t.partitions.items())}
            topics[name] = entry
        out = {
            "version": 1,
            "producer_id_block_end": self.producer_id_block_end,
            "broker_configs": {entity: dict(c) for entity, c in self.broker_configs.items() if c},
            "topics": topics,
        }
        if self.entity_configs:
            out["entity_configs"] = {entity_path(k): dict(c) for k, c in sorted(self.entity_configs.items()) if c}
        if live:
            out["controller_id"] = self.controller_id
            out["controller_epoch"] = self.controller_epoch
            out["brokers"] = [_broker_to_json(b) for _, b in sorted(self.brokers.items())]
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Metadata":
        """Reads files of every kafkapy version: a topic's ``slots`` (shared-table
        slots, written before the slot map moved to the shared table) are ignored."""
        md = cls(producer_id_block_end=data.get("producer_id_block_end", 0),
                 broker_configs={entity: dict(c) for entity, c in data.get("broker_configs", {}).items()})
        for name, t in data.get("topics", {}).items():
            partitions = {int(p): PartitionState.from_json(s) for p, s in t.get("partitions", {}).items()}
            md.topics[name] = TopicInfo(name, uuid.UUID(t["topic_id"]), t["num_partitions"],
                                        dict(t.get("configs", {})), partitions)
        md.entity_configs = {entity_from_path(p): dict(c) for p, c in data.get("entity_configs", {}).items() if c}
        if "brokers" in data:
            md.controller_id = data.get("controller_id", NO_BROKER)
            md.controller_epoch = data.get("controller_epoch", 0)
            md.brokers = {b["id"]: _broker_from_json(b) for b in data["brokers"]}
        return md


def _broker_to_json(b: BrokerInfo) -> dict:
    return {"id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack,
            "endpoints": [[e.host, e.port, e.listener_name, e.security_protocol] for e in b.endpoints]}


def _broker_from_json(data: dict) -> BrokerInfo:
    return BrokerInfo(data["id"], data["host"], data["port"], data.get("rack"),
                      tuple(EndPoint(*e) for e in data.get("endpoints", ())))
