"""A broker's ZooKeeper client (Kafka's KafkaZkClient, the parts cluster mode starts with).

The only module that imports kazoo. Everything written or read is Kafka's
znode format (``kafkapy.coordination.zk_data``), so a kafkapy cluster's
ZooKeeper reads like an Apache Kafka 3.9 one:

* ``connect`` — ``zookeeper.connect`` with an optional chroot, created when
  missing as Kafka does, then a session under it (``zookeeper.session.timeout.ms``,
  ``zookeeper.connection.timeout.ms``); Kafka's persistent paths are created;
* ``get_or_create_cluster_id`` — ``/cluster/id``, created once;
* ``register_broker`` — the ephemeral ``/brokers/ids/<id>``; one left by
  another live session is ``BrokerIdInUse`` (Kafka: "broker id already
  registered"); one left by this session (a retry) is kept;
* ``try_elect_controller`` — Kafka's registerControllerAndIncrementControllerEpoch:
  one multi-op creates the ephemeral ``/controller`` and sets
  ``/controller_epoch`` to epoch + 1 conditional on the version read, so two
  brokers can never both win, and a stale reader's write fails.

Ownership: one client per process that needs ZooKeeper, used by one thread
(kazoo runs its own threads for the session underneath).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kafkapy.coordination import zk_data

_NEW_CLUSTER_ID_BYTES = 16


class BrokerIdInUse(RuntimeError):
    """``/brokers/ids/<id>`` belongs to another live broker."""


@dataclass(frozen=True)
class Election:
    elected: bool
    controller_id: int  # the controller now (-1: none)
    controller_epoch: int  # the epoch this broker won with, or the current one


class ZkClient:
    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None):
        self.connect_spec = zk_data.parse_zookeeper_connect(connect)
        self.session_timeout_s = session_timeout_ms / 1000
        self.connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000
        self.zk: KazooClient | None = None

    # -- session ------------------------------------------------------------------------------
    def connect(self) -> "ZkClient":
        spec = self.connect_spec
        if spec.chroot:
            root = KazooClient(hosts=spec.hosts_string, timeout=self.session_timeout_s)
            try:
                root.start(timeout=self.connection_timeout_s)
                root.ensure_path(spec.chroot)
            finally:
                root.stop()
                root.close()
        hosts = spec.hosts_string + (spec.chroot or "")
        self.zk = KazooClient(hosts=hosts, timeout=self.session_timeout_s)
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
    def register_broker(self, broker, timestamp_ms: int | None = None) -> None:
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
