"""A broker's ZooKeeper client (Kafka's KafkaZkClient, the parts cluster mode starts with).

The only module that imports kazoo. Everything written or read is Kafka's
znode format (``kafkapy.metadata.zk.data``), so a kafkapy cluster's
ZooKeeper reads like an Apache Kafka 3.9 one:

* ``connect`` — ``zookeeper.connect`` with an optional chroot, created when
  missing as Kafka does, then a session under it (``zookeeper.session.timeout.ms``,
  ``zookeeper.connection.timeout.ms``); Kafka's persistent paths are created;
  ``ZkSecurity`` (built by ``kafkapy.server.security.zookeeper`` from Kafka's
  keys) adds SASL DIGEST-MD5 (a JAAS ``Client`` section), TLS
  (``zookeeper.ssl.*``) and ``zookeeper.set.acl`` (every znode created with
  ZkData.defaultAcls: creator-all + world-read, creator-only on sensitive
  paths, ``/consumers`` open);
* ``get_or_create_cluster_id`` — ``/cluster/id``, created once;
* ``register_broker`` — the ephemeral ``/brokers/ids/<id>``; one left by
  another live session is ``BrokerIdInUse`` (Kafka: "broker id already
  registered"); one left by this session (a retry) is kept;
* ``try_elect_controller`` — Kafka's registerControllerAndIncrementControllerEpoch:
  one multi-op creates the ephemeral ``/controller`` and sets
  ``/controller_epoch`` to epoch + 1 conditional on the version read, so two
  brokers can never both win, and a stale reader's write fails;
* the admin paths (AdminZkClient): ``read_admin_state`` (topics with ids,
  assignments and versions, topic and broker configs, topics marked for
  deletion, the producer-id block) and ``AdminWrites``, one multi-op of
  conditional writes (topic creation in Kafka's order, assignment changes,
  deletion markers, entity configs with their change notification, the next
  producer-id block); ``create_topic``, ``set_topic_assignment``,
  ``mark_topic_for_deletion``, ``set_entity_config`` and
  ``new_producer_id_block`` are Kafka's single operations on top of it;
* ``set_consumer_offset`` / ``get_consumer_offset`` — OffsetCommit and
  OffsetFetch v0's ``/consumers/<group>/offsets/<topic>/<partition>``.

Ownership: one client per process that needs ZooKeeper, used by one thread
(kazoo runs its own threads for the session underneath).
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
import uuid
from dataclasses import dataclass

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import (BadVersionError, ConnectionClosedError, ConnectionLoss, KazooException,
                              NodeExistsError, NoNodeError, RolledBackError, SessionExpiredError)
from kazoo.handlers import utils as kazoo_utils
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.retry import KazooRetry
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from kafkapy.metadata.zk import data as zk_data
from kafkapy.metadata.store import ProducerIdsBlock
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError

log = logging.getLogger("kafkapy.zookeeper")

_NEW_CLUSTER_ID_BYTES = 16


# Any ZooKeeper client failure (connection lost, session expired, a timeout):
# what callers outside this package catch, so kazoo stays imported here only.
ZkError = KazooException


class BrokerIdInUse(RuntimeError):
    """``/brokers/ids/<id>`` belongs to another live broker."""


@dataclass(frozen=True)
class Election:
    elected: bool
    controller_id: int  # the controller now (-1: none)
    controller_epoch: int  # the epoch this broker won with, or the current one


@dataclass(frozen=True)
class ZkTls:
    """TLS to ZooKeeper (Kafka's ``zookeeper.ssl.*``), as kazoo takes it: PEM files
    (``certfile`` and ``keyfile`` may be one file holding both), the key's password,
    host-name checking, and the handshake's bounds (``options``: ssl.OP_NO_* flags
    added to the defaults; ``ciphers``: an OpenSSL cipher string; None: defaults)."""

    ca: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    keyfile_password: str | None = None
    check_hostname: bool = True
    options: int = 0
    ciphers: str | None = None

    def kazoo_kwargs(self) -> dict:
        return {"use_ssl": True, "ca": self.ca, "certfile": self.certfile, "keyfile": self.keyfile,
                "keyfile_password": self.keyfile_password, "verify_certs": True,
                "check_hostname": self.check_hostname}


@dataclass(frozen=True)
class ZkSecurity:
    """How a broker's session authenticates and what its znodes allow:
    ``sasl`` (pure-sasl options, e.g. DIGEST-MD5 with username and password),
    ``tls``, and ``set_acl`` (Kafka's ``zookeeper.set.acl``)."""

    set_acl: bool = False
    sasl: dict | None = None
    tls: ZkTls | None = None


def default_acls(set_acl: bool, path: str) -> list:
    """ZkData.defaultAcls for a znode at ``path`` (below the chroot)."""
    if not set_acl or path == zk_data.CONSUMERS_PATH:
        return list(OPEN_ACL_UNSAFE)
    if zk_data.sensitive_path(path):
        return list(CREATOR_ALL_ACL)
    return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


class _SecureKazooClient(KazooClient):
    """kazoo's client with ``zookeeper.set.acl``'s ACLs on every create that names
    none: single creates, ``ensure_path`` (whose creates go through
    ``create_async``) and multi-op creates alike, so no call site can forget them."""

    def create_async(self, path, value=b"", acl=None, *args, **kwargs):
        return super().create_async(path, value, acl if acl else default_acls(True, path), *args, **kwargs)

    def transaction(self):
        return _SecureTransaction(self)


class _SecureTransaction(TransactionRequest):
    def create(self, path, value=b"", acl=None, *args, **kwargs):
        return super().create(path, value, acl if acl else default_acls(True, path), *args, **kwargs)


class _KafkaHandler(SequentialThreadingHandler):
    """kazoo's threading handler, connecting as ZooKeeper's Java client does.

    * Each connection attempt is bounded by the session timeout divided by the
      number of servers (the Java client's ClientCnxn connectTimeout). kazoo
      gives one attempt the whole session timeout: a server that drops
      packets (cut off by the network; SYNs unanswered) then costs a
      reconnecting session its life, and a new session its connection
      timeout, before the next server is tried. Seen with one member of three
      cut off (tests/system/test_zookeeper_node_partition.py).
    * TLS: the versions and cipher suites of ``zookeeper.ssl.enabled.protocols``
      / ``zookeeper.ssl.cipher.suites``, which kazoo's connection code takes
      only through its handler.
    """

    def __init__(self, connect_timeout_s: float, tls: ZkTls | None = None):
        super().__init__()
        self.connect_timeout_s = connect_timeout_s
        self.tls = tls

    def create_connection(self, *args, **kwargs):
        timeout = kwargs.get("timeout")
        if timeout is not None:
            kwargs["timeout"] = min(timeout, self.connect_timeout_s)
        if kwargs.get("use_ssl") and self.tls is not None:
            kwargs["options"] = ssl.create_default_context().options | self.tls.options
            kwargs["ciphers"] = self.tls.ciphers
        return kazoo_utils.create_tcp_connection(socket, *args, **kwargs)


def _reconnect_retry() -> KazooRetry:
    """How a lost connection is tried again: without end, at most ~1 s apart.

    ZooKeeper's own Java client, Kafka's, sleeps a random 0-1 s between
    attempts. kazoo's default doubles its sleep up to an hour: after 7 s
    without a server it waits 6.4 s more, so a broker reconnects seconds
    after ZooKeeper is back (minutes after a long outage), and a session
    ZooKeeper restored at its restart with a 4-18 s timeout can expire
    while the broker sleeps, moving every leadership for nothing (seen when
    a SIGKILLed ZooKeeper took a few seconds to start on a loaded machine).
    The sleeps here are 0.1 s doubled up to 0.7 s, times kazoo's jitter
    (0.6-1.4): at most ~1 s."""
    return KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=0.7)


class ZkClient:
    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None, security: ZkSecurity | None = None):
        self.connect_spec = zk_data.parse_zookeeper_connect(connect)
        self.session_timeout_s = session_timeout_ms / 1000
        self.connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000
        self.security = security or ZkSecurity()
        self.zk: KazooClient | None = None

    def _kazoo(self, hosts: str) -> KazooClient:
        """A kazoo client on ``hosts`` with this broker's authentication, TLS and ACLs."""
        sec = self.security
        servers = max(1, len(self.connect_spec.hosts))
        kwargs = {"hosts": hosts, "timeout": self.session_timeout_s,
                  "handler": _KafkaHandler(self.session_timeout_s / servers, sec.tls),
                  "connection_retry": _reconnect_retry()}
        if sec.sasl is not None:
            kwargs["sasl_options"] = dict(sec.sasl)  # kazoo adds to it
        if sec.tls is not None:
            kwargs.update(sec.tls.kazoo_kwargs())
        return (_SecureKazooClient if sec.set_acl else KazooClient)(**kwargs)

    # -- session ------------------------------------------------------------------------------
    def connect(self) -> "ZkClient":
        spec = self.connect_spec
        if spec.chroot:
            root = self._kazoo(spec.hosts_string)
            try:
                root.start(timeout=self.connection_timeout_s)
                root.ensure_path(spec.chroot)
            finally:
                root.stop()
                root.close()
        hosts = spec.hosts_string + (spec.chroot or "")
        self.zk = self._kazoo(hosts)
        try:
            self.zk.start(timeout=self.connection_timeout_s)
            for path in zk_data.PERSISTENT_PATHS:
                self.zk.ensure_path(path)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
            self.zk = None

    def __enter__(self) -> "ZkClient":
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def on_new_session(self, callback) -> None:
        """Call ``callback()`` (from kazoo's thread) when a lost session was
        replaced by a new one: its ephemeral znodes are gone and must be
        created again."""
        lost = threading.Event()

        def listener(state):
            if state == KazooState.LOST:
                lost.set()
            elif state == KazooState.CONNECTED and lost.is_set():
                lost.clear()
                callback()

        self.zk.add_listener(listener)

    def until_connected(self, op):
        """``op()``, again after the connection is back whenever it fails on a lost
        connection (Kafka's KafkaZkClient.retryRequestsUntilConnected: a ZooKeeper
        node lost or a quorum re-electing delays an admin write, it does not fail
        it). Bounded by the session and connection timeouts: by then kazoo has moved
        the session to another server, or it expired and kazoo opened a new one.
        A write whose answer was lost may have landed: sent again, its condition
        fails and the caller reads again, as in Kafka.

        A session found expired on reconnecting fails the requests kazoo held
        for it (SessionExpiredError); kazoo then opens a new session, and
        ``op`` is sent again on it. This is only for clients that own
        nothing ephemeral (the admin path's): their writes are conditional,
        and they have no registration to lose with the session."""
        deadline = time.monotonic() + self.session_timeout_s + self.connection_timeout_s
        while True:
            try:
                return op()
            except ConnectionClosedError:
                raise  # closed by this process: nothing comes back
            except (ConnectionLoss, SessionExpiredError) as exc:
                if not self._wait_connected(deadline):
                    raise
                log.info("ZooKeeper %s during a request; sending it again",
                         "session expired" if isinstance(exc, SessionExpiredError) else "connection lost")

    def _wait_connected(self, deadline: float) -> bool:
        while not self.zk.connected:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)  # kazoo's state changes are seen within a poll; bounded by deadline
        return True

    @property
    def session_id(self) -> int:
        return self.zk.client_id[0]

    # -- cluster id ---------------------------------------------------------------------------
    def get_or_create_cluster_id(self, new_id) -> str:
        """``/cluster/id``, created with ``new_id()`` when absent (Kafka's
        createOrGetClusterId: whoever creates it first wins)."""
        try:
            data, _ = self.zk.get(zk_data.CLUSTER_ID_PATH)
            return zk_data.decode_cluster_id(data)
        except NoNodeError:
            pass
        candidate = new_id()
        try:
            self.zk.create(zk_data.CLUSTER_ID_PATH, zk_data.encode_cluster_id(candidate), makepath=True)
            return candidate
        except NodeExistsError:
            data, _ = self.zk.get(zk_data.CLUSTER_ID_PATH)
            return zk_data.decode_cluster_id(data)

    # -- brokers ------------------------------------------------------------------------------
    def register_broker(self, broker, timestamp_ms: int | None = None, wait_s: float = 0.0) -> None:
        """``/brokers/ids/<id>``, ephemeral in this session. BrokerIdInUse when
        another session holds it, after waiting up to ``wait_s`` for it to go:
        registering again after a session expiry, the node may still be our
        old session's, which ZooKeeper deletes only when it expires that
        session itself (after a ZooKeeper pause, seconds after the client saw
        it expire; Kafka's KAFKA-7165 waits likewise)."""
        deadline = time.monotonic() + wait_s
        while True:  # bounded by wait_s
            try:
                self._register_once(broker, timestamp_ms)
                return
            except BrokerIdInUse as exc:
                if time.monotonic() >= deadline:
                    raise
                log.info("%s; waiting for ZooKeeper to expire that session", exc)
                time.sleep(0.5)

    def _register_once(self, broker, timestamp_ms: int | None) -> None:
        path = zk_data.broker_path(broker.broker_id)
        data = zk_data.encode_broker(broker, timestamp_ms if timestamp_ms is not None
                                     else int(time.time() * 1000))
        try:
            self.zk.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            try:
                _, stat = self.zk.get(path)
            except NoNodeError:  # its owner's session just ended: try once more
                self.zk.create(path, data, ephemeral=True, makepath=True)
                return
            if stat.ephemeralOwner != self.session_id:
                raise BrokerIdInUse(
                    f"broker id {broker.broker_id} is already registered in ZooKeeper by another "
                    f"live broker (session 0x{stat.ephemeralOwner:x})") from None

    def live_brokers(self) -> dict:
        """``{broker_id: BrokerInfo}`` of the registered brokers."""
        out = {}
        for child in self.zk.get_children(zk_data.BROKER_IDS_PATH):
            try:
                data, _ = self.zk.get(zk_data.BROKER_IDS_PATH + "/" + child)
            except NoNodeError:
                continue
            broker_id = int(child)
            out[broker_id] = zk_data.decode_broker(broker_id, data)
        return out

    # -- controller ---------------------------------------------------------------------------
    def controller_id(self) -> int:
        try:
            data, _ = self.zk.get(zk_data.CONTROLLER_PATH)
        except NoNodeError:
            return -1
        return zk_data.decode_controller(data).broker_id

    def controller_epoch(self) -> tuple[int, int]:
        """``(epoch, znode version)``; (0, -1) before any controller was elected."""
        try:
            data, stat = self.zk.get(zk_data.CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            return 0, -1
        return zk_data.decode_controller_epoch(data), stat.version

    def try_elect_controller(self, broker_id: int, timestamp_ms: int | None = None) -> Election:
        epoch, version = self.controller_epoch()
        if version < 0:
            try:
                self.zk.create(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            epoch, version = self.controller_epoch()
        controller = zk_data.encode_controller(broker_id, timestamp_ms if timestamp_ms is not None
                                               else int(time.time() * 1000))
        txn = self.zk.transaction()
        txn.create(zk_data.CONTROLLER_PATH, controller, ephemeral=True)
        txn.set_data(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(epoch + 1), version)
        results = txn.commit()
        if not any(isinstance(r, Exception) for r in results):
            return Election(True, broker_id, epoch + 1)
        if any(isinstance(r, (NodeExistsError, BadVersionError)) for r in results):
            current, _ = self.controller_epoch()
            return Election(False, self.controller_id(), current)
        raise next(r for r in results if isinstance(r, Exception))

    def watch_controller(self, callback) -> None:
        """Call ``callback(event)`` when ``/controller`` is created, changed or
        deleted (re-armed after every event: kazoo's DataWatch)."""
        self.zk.DataWatch(zk_data.CONTROLLER_PATH, lambda data, stat, event=None: callback(event))

    # -- admin (Kafka's AdminZkClient / KafkaZkClient admin paths) --------------------------
    # Any broker's admin path writes these; the controller's watches act on them. Reads are
    # pipelined (one round trip for all topics, as Kafka's batched requests); writes go
    # through ``AdminWrites``, one multi-op conditional on the versions read, so a change
    # computed from a stale read never lands (the caller reads again and retries).

    def read_admin_state(self, all_topics: bool = True) -> "AdminState":
        """The broker configs (``/config/brokers``) and ``/latest_producer_id_block``,
        with every topic (``all_topics``) or none yet: ``AdminState.read_topics``
        reads the ones asked for (the admin path touches a few topics, and reading
        all of 1,000 costs ~0.35 s)."""
        block, block_version = self.get_producer_id_block()
        state = AdminState(self, self.read_entity_configs(zk_data.CONFIG_TYPE_BROKER), block, block_version)
        if all_topics:
            state.read_all_topics()
        return state

    def _read_topics(self, state: "AdminState", names) -> None:
        """Fill ``state`` with topics ``names``: ``/brokers/topics/<t>`` (id, assignment,
        version), ``/config/topics/<t>`` and ``/admin/delete_topics/<t>``, one round trip."""
        paths = []
        for name in names:
            paths += [zk_data.topic_path(name), zk_data.topic_config_path(name), zk_data.delete_topic_path(name)]
        found = self.get_with_stat(paths)
        for name in names:
            state.read.add(name)
            if zk_data.delete_topic_path(name) in found:
                state.marked_for_deletion.add(name)
            config = found.get(zk_data.topic_config_path(name))
            if config is not None:
                state.topic_configs[name] = self._entity_config(zk_data.CONFIG_TYPE_TOPIC, name, *config)
            topic = found.get(zk_data.topic_path(name))
            if topic is None:
                continue
            data, stat = topic
            try:
                znode = zk_data.decode_topic(name, data)
            except ValueError as exc:
                # Kafka reads it as a topic without partitions; it still exists
                log.warning("unreadable topic znode: %s", exc)
                znode = zk_data.TopicAssignment(None, {})
            state.topics[name] = ZkTopic(name, znode.topic_id, dict(znode.partitions), stat.version,
                                         bool(znode.adding_replicas or znode.removing_replicas))

    def topic_names(self) -> list:
        """Every topic with a topic znode (Kafka's getAllTopicsInCluster), being deleted or not."""
        return self._children(zk_data.TOPICS_PATH)

    def read_entity_configs(self, entity_type: str, names=None) -> dict:
        """``{name: EntityConfig}`` of ``/config/<entity_type>/*`` (or of ``names`` only;
        absent ones are left out). Unreadable data counts as no overrides, as in Kafka."""
        return {name: self._entity_config(entity_type, name, data, stat) for name, (data, stat)
                in self._get_children_data(zk_data.config_entity_type_path(entity_type), names).items()}

    @staticmethod
    def _entity_config(entity_type: str, name: str, data, stat) -> "EntityConfig":
        try:
            configs = zk_data.decode_config(data)
        except ValueError as exc:
            log.warning("unreadable config of %s/%s: %s", entity_type, name, exc)
            configs = {}
        return EntityConfig(configs, stat.version)

    def get_entity_config(self, entity_type: str, name: str) -> "EntityConfig":
        """One entity's overrides and znode version (-1: no znode)."""
        return self.read_entity_configs(entity_type, [name]).get(name, EntityConfig({}, -1))

    def read_user_client_entities(self, keys=None, absent=None) -> dict:
        """``{entity key: EntityConfig}`` of user, client and IP entities (``metadata.user_entity``
        ...; ``/config/users/<u>``, ``/config/users/<u>/clients/<c>``, ``/config/clients/<c>``,
        ``/config/ips/<ip>``):
        of ``keys`` (absent ones left out), or every one (None). With ``absent`` (a
        set), the paths of missing parents of user/client entities among ``keys`` are
        added to it (a new one is created under them)."""
        if keys is None:
            users = self._children(zk_data.config_entity_type_path(zk_data.CONFIG_TYPE_USER))
            keys = [(zk_data.CONFIG_TYPE_USER, u) for u in users]
            keys += [(zk_data.CONFIG_TYPE_CLIENT, c)
                     for c in self._children(zk_data.config_entity_type_path(zk_data.CONFIG_TYPE_CLIENT))]
            keys += [(zk_data.CONFIG_TYPE_IP, ip)
                     for ip in self._children(zk_data.config_entity_type_path(zk_data.CONFIG_TYPE_IP))]
            pending = [(u, self.zk.get_children_async(
                zk_data.config_entity_path(zk_data.CONFIG_TYPE_USER, f"{u}/clients"))) for u in users]
            for user, result in pending:
                try:
                    keys += [(zk_data.CONFIG_TYPE_USER, f"{user}/clients/{c}") for c in result.get()]
                except NoNodeError:
                    continue
        paths = {zk_data.config_entity_path(*k): k for k in keys}
        parents = [p for p in {zk_data.config_entity_parents(k) for k in keys} if p]
        wanted = list(paths) + [path for pair in parents for path in pair]
        found = self.get_with_stat(wanted)
        if absent is not None:
            absent.update(p for pair in parents for p in pair if p not in found)
        return {k: self._entity_config(k[0], k[1], *found[p]) for p, k in paths.items() if p in found}

    def get_producer_id_block(self) -> tuple:
        """``(ProducerIdsBlock or None, znode version)``: None while no block was
        written (the znode empty, as created among the persistent paths)."""
        try:
            data, stat = self.zk.get(zk_data.LATEST_PRODUCER_ID_BLOCK_PATH)
        except NoNodeError:
            return None, -1
        return (zk_data.decode_producer_id_block(data) if data else None), stat.version

    # -- the old consumer's offsets (OffsetCommit / OffsetFetch v0) -----------------------------
    # Kafka's handler thread waits for ZooKeeper to come back (retryRequestUntilConnected);
    # these run in the group coordinator's one thread, so each step waits at most a
    # session timeout and then fails (the request answers UNKNOWN_SERVER_ERROR).
    def set_consumer_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """KafkaZkClient.setOrCreateConsumerOffset: set the znode, or create it with
        its parents when it is missing (a racing creator's znode is then set)."""
        path = zk_data.consumer_offset_path(group, topic, partition)
        data = zk_data.encode_consumer_offset(offset)
        wait_s = self.session_timeout_s
        try:
            self.zk.set_async(path, data).get(timeout=wait_s)
        except NoNodeError:
            try:
                self.zk.ensure_path_async(path.rsplit("/", 1)[0]).get(timeout=wait_s)
                self.zk.create_async(path, data).get(timeout=wait_s)
            except NodeExistsError:
                self.zk.set_async(path, data).get(timeout=wait_s)

    def get_consumer_offset(self, group: str, topic: str, partition: int) -> int | None:
        """KafkaZkClient.getConsumerOffset: None without the znode."""
        path = zk_data.consumer_offset_path(group, topic, partition)
        try:
            data, _stat = self.zk.get_async(path).get(timeout=self.session_timeout_s)
        except NoNodeError:
            return None
        return zk_data.decode_consumer_offset(data)

    def writes(self) -> "AdminWrites":
        return AdminWrites(self)

    def create_topic(self, topic: str, assignment, configs=None, topic_id=None) -> uuid.UUID:
        """AdminZkClient.createTopicWithAssignment: TOPIC_ALREADY_EXISTS when the topic
        exists or is marked for deletion; else ``/config/topics/<t>`` and then
        ``/brokers/topics/<t>`` with a new topic id (in one multi-op here)."""
        topic_id = topic_id or uuid.uuid4()

        def write(batch):
            if self.zk.exists(zk_data.delete_topic_path(topic)) is not None:
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' is marked for deletion.")
            if self.zk.exists(zk_data.topic_path(topic)) is not None:
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
            config = self.get_entity_config(zk_data.CONFIG_TYPE_TOPIC, topic)
            batch.create_topic(topic, topic_id, assignment, configs or {}, config.version)

        self._retry(write)
        return topic_id

    def set_topic_assignment(self, topic: str, topic_id, assignment, version: int) -> None:
        """AdminZkClient's add-partitions write: the whole assignment, conditional on the
        topic znode's ``version`` (``ZkConflict`` if it moved)."""
        batch = self.writes()
        batch.set_topic_assignment(topic, topic_id, assignment, version)
        batch.commit()

    def mark_topic_for_deletion(self, topic: str) -> bool:
        """AdminZkClient.deleteTopic: ``/admin/delete_topics/<t>``; False if it was marked
        already; UNKNOWN_TOPIC_OR_PARTITION if there is no such topic."""
        if self.zk.exists(zk_data.topic_path(topic)) is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic `{topic}` to delete does not exist")
        batch = self.writes()
        batch.mark_topic_for_deletion(topic)
        try:
            batch.commit()
        except ZkConflict:
            return False
        return True

    def set_entity_config(self, entity_type: str, name: str, configs, version: int | None = None) -> None:
        """AdminZkClient.changeEntityConfig: ``/config/<type>/<name>`` created or set, then a
        ``/config/changes/config_change_<seq>`` notification. ``version`` None: whatever
        is there (Kafka's last writer wins); else conditional on it (-1: must be absent)."""
        def write(batch):
            current = version if version is not None else self.get_entity_config(entity_type, name).version
            batch.set_entity_config(entity_type, name, configs, current)

        self._retry(write, retries=1 if version is not None else _WRITE_RETRIES)

    def new_producer_id_block(self, broker_id: int, size: int = 1000) -> ProducerIdsBlock:
        """ZkProducerIdManager.getNewProducerIdBlock: read ``/latest_producer_id_block``,
        write the next block conditional on its version, again until it lands."""
        blocks = []

        def write(batch):
            current, version = self.get_producer_id_block()
            blocks[:] = [zk_data.next_producer_id_block(current, broker_id, size)]
            batch.set_producer_id_block(blocks[0], version)

        # Kafka tries until it lands: each conflict is another broker's block
        # landing, so a few brokers asking at once can take this one's first
        # ten tries (a two-broker test saw it).
        self._retry(write, retries=_PRODUCER_ID_BLOCK_RETRIES)
        return blocks[0]

    def _retry(self, write, retries: int = None) -> None:
        """``write(batch)`` on a fresh batch and commit it, again on ``ZkConflict``."""
        retries = _WRITE_RETRIES if retries is None else retries
        for attempt in range(retries):
            batch = self.writes()
            write(batch)
            try:
                batch.commit()
                return
            except ZkConflict:
                if attempt == retries - 1:
                    raise

    def watch_children(self, path: str, callback) -> None:
        """Call ``callback(children)`` now and whenever ``path``'s children change
        (kazoo's ChildrenWatch, re-armed after every event and a new session), from
        kazoo's callback thread."""
        self.zk.ChildrenWatch(path, callback)

    def get_with_stat(self, paths) -> dict:
        """``{path: (data, stat)}`` of the ``paths`` that exist, in one round trip."""
        pending = [(p, self.zk.get_async(p)) for p in paths]
        out = {}
        for path, result in pending:
            try:
                out[path] = result.get()
            except NoNodeError:
                continue
        return out

    def delete_quietly(self, paths) -> None:
        """Delete ``paths`` (pipelined); ones already gone are fine."""
        pending = [self.zk.delete_async(p) for p in paths]
        for result in pending:
            try:
                result.get()
            except NoNodeError:
                pass

    def _children(self, path: str) -> list:
        try:
            return self.zk.get_children(path)
        except NoNodeError:
            return []

    def _get_children_data(self, parent: str, names=None) -> dict:
        names = self._children(parent) if names is None else list(names)
        found = self.get_with_stat([f"{parent}/{n}" for n in names])
        return {n: found[f"{parent}/{n}"] for n in names if f"{parent}/{n}" in found}


# How often a write computed from a read is tried before giving up: a conflict means
# another broker wrote the same znode between our read and write, which is rare.
_WRITE_RETRIES = 10
_PRODUCER_ID_BLOCK_RETRIES = 1000


class ZkConflict(RuntimeError):
    """A conditional admin write lost: a znode it depends on changed (or appeared, or
    went) since it was read. Read again and recompute."""


@dataclass
class ZkTopic:
    """``/brokers/topics/<name>``: ``partitions`` is partition -> replicas; ``version``
    the znode's version (the fence of an assignment change)."""

    name: str
    topic_id: uuid.UUID | None
    partitions: dict
    version: int
    reassigning: bool = False  # replicas being added or removed (a reassignment in progress)


@dataclass(frozen=True)
class EntityConfig:
    """``/config/<type>/<name>``: the overrides and the znode's version (-1: absent)."""

    configs: dict
    version: int = -1


class AdminState:
    """What the admin path read from ZooKeeper (``ZkClient.read_admin_state``): every
    broker config entity and the producer-id block, and the topics read so far
    (``read_topics``: by name; ``read_all_topics``: every topic, config or marker).
    Made without a client it is complete as filled (tests)."""

    def __init__(self, client=None, broker_configs=None, producer_id_block: ProducerIdsBlock | None = None,
                 producer_id_block_version: int = -1, topics=None, topic_configs=None,
                 marked_for_deletion=None, entity_configs=None, absent_paths=None):
        self.client = client
        self.broker_configs = dict(broker_configs or {})  # entity -> EntityConfig
        self.producer_id_block = producer_id_block
        self.producer_id_block_version = producer_id_block_version
        self.topics = dict(topics or {})  # name -> ZkTopic
        self.topic_configs = dict(topic_configs or {})  # name -> EntityConfig
        self.marked_for_deletion = set(marked_for_deletion or ())
        self.read: set = set()  # topic names read, present or not
        self.complete = client is None
        # user/client entities (metadata.user_entity ...): key -> EntityConfig, as read
        self.entity_configs = dict(entity_configs or {})
        self.entities_read: set = set()
        self.entities_complete = client is None
        # parents (/config/users/<u>, .../clients) of user/client entities read, found absent
        self.absent_paths = set(absent_paths or ())

    def read_entities(self, keys) -> None:
        """Read the user/client entities ``keys`` not read yet (one round trip)."""
        if self.entities_complete:
            return
        keys = [k for k in dict.fromkeys(keys) if k not in self.entities_read]
        if keys:
            self.entities_read.update(keys)
            self.entity_configs.update(self.client.read_user_client_entities(keys, self.absent_paths))

    def read_all_entities(self) -> None:
        if self.entities_complete:
            return
        found = self.client.read_user_client_entities(None)
        for key, config in found.items():
            if key not in self.entities_read:
                self.entities_read.add(key)
                self.entity_configs[key] = config
        self.entities_complete = True

    def read_topics(self, names) -> None:
        """Read topics ``names`` not read yet (one round trip for all of them)."""
        if self.complete:
            return
        names = [n for n in dict.fromkeys(names) if n not in self.read]
        if names:
            self.client._read_topics(self, names)

    def read_all_topics(self) -> None:
        """Read every topic: those with a topic znode, a config or a deletion marker."""
        if self.complete:
            return
        client = self.client
        names = set(client._children(zk_data.TOPICS_PATH))
        names |= set(client._children(zk_data.DELETE_TOPICS_PATH))
        names |= set(client._children(zk_data.config_entity_type_path(zk_data.CONFIG_TYPE_TOPIC)))
        self.read_topics(sorted(names))
        self.complete = True


class AdminWrites:
    """Admin znode writes committed as one multi-op (all or none), each conditional on
    what was read: a znode known absent is created (NodeExists if it appeared), a
    known one set with its version. ``commit`` raises ``ZkConflict`` when a condition
    failed, or TOPIC_ALREADY_EXISTS when a topic to create exists (Kafka's
    NodeExistsException -> TopicExistsException). Owned by one thread."""

    def __init__(self, client: ZkClient):
        self.client = client
        self.txn = client.zk.transaction()
        self.ops = []  # (path, what a NodeExists on it means), in txn order

    def __len__(self) -> int:
        return len(self.ops)

    def _create(self, path: str, data: bytes, topic: str | None = None, sequence: bool = False) -> None:
        self.txn.create(path, data, sequence=sequence)
        self.ops.append((path, topic))

    def _set(self, path: str, data: bytes, version: int) -> None:
        """Set conditional on ``version``, or create when -1 (known absent)."""
        if version < 0:
            self._create(path, data)
        else:
            self.txn.set_data(path, data, version)
            self.ops.append((path, None))

    def create_topic(self, topic: str, topic_id, assignment, configs, config_version: int = -1) -> None:
        """Kafka's order: the config (created or set: one may be left from a failed
        create), then the topic znode (version 3: topic id, replicas)."""
        self._set(zk_data.topic_config_path(topic), zk_data.encode_config(configs), config_version)
        self._create(zk_data.topic_path(topic), zk_data.encode_topic(topic_id, assignment), topic=topic)

    def set_topic_assignment(self, topic: str, topic_id, assignment, version: int) -> None:
        self.txn.set_data(zk_data.topic_path(topic), zk_data.encode_topic(topic_id, assignment), version)
        self.ops.append((zk_data.topic_path(topic), None))

    def mark_topic_for_deletion(self, topic: str) -> None:
        self._create(zk_data.delete_topic_path(topic), zk_data.DELETE_TOPIC_DATA)

    def set_entity_config(self, entity_type: str, name: str, configs, version: int) -> None:
        """The config, then its change notification (``config_change_<seq>``)."""
        self._set(zk_data.config_entity_path(entity_type, name), zk_data.encode_config(configs), version)
        self._create(zk_data.config_change_path(), zk_data.encode_config_change(entity_type, name),
                     sequence=True)

    def create_config_parent(self, path: str) -> None:
        """An empty znode a user/client entity goes under (``/config/users/<u>`` and
        ``.../clients``), as Kafka's recursive create leaves them."""
        self._create(path, b"")

    def set_producer_id_block(self, block: ProducerIdsBlock, version: int) -> None:
        self._set(zk_data.LATEST_PRODUCER_ID_BLOCK_PATH, zk_data.encode_producer_id_block(block), version)

    def commit(self) -> None:
        if not self.ops:
            return
        results = self.txn.commit()
        failed = [(op, r) for op, r in zip(self.ops, results)
                  if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if not failed:
            return
        (path, topic), error = failed[0]
        if isinstance(error, NodeExistsError) and topic is not None:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
        if isinstance(error, (NodeExistsError, BadVersionError, NoNodeError)):
            raise ZkConflict(f"{path}: {type(error).__name__}")
        raise error
