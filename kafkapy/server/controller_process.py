"""The controller child: the broker's ZooKeeper session (cluster mode).

Forked by the supervisor when ``zookeeper.connect`` is set (docs/architecture.md,
"Cluster mode"). It owns the broker's one session, as Kafka's broker owns
its one KafkaZkClient:

* registers ``/brokers/ids/<broker.id>`` with the advertised endpoints; a
  broker id another live broker holds stops it (exit 1, which stops the
  broker: a dead child takes the broker down);
* runs the controller election: elected when ``/controller`` is absent,
  watching it to run again when it goes;
* while elected, acts as Kafka's KafkaController
  (``kafkapy.controller.kafka_controller.Controller``);
  resigns when ``/controller`` names another broker, when a fenced write
  finds ``/controller_epoch`` moved, or when the session is lost;
* on a lost session (kazoo opens a new one by itself), registers and runs
  the election again, as Kafka's broker does after a session expiry;
* follows ``/config`` into the broker's metadata image
  (``zk_store.follow_config_changes``), and with an authorizer the ACLs
  (``acl_store.follow_acl_changes``);
* runs the ISR job of the partitions this broker leads
  (``kafkapy.replication.isr_job.IsrJob``);
* serves the local door (``controller_channel.LocalDoor``) through which
  this broker's handler workers hand ControlledShutdown and ElectLeaders to
  the controller;
* stopped by the supervisor, last of the children, closes the session, so
  the registration and a held ``/controller`` go at once rather than at the
  session timeout.
"""

from __future__ import annotations

import logging
import threading

from kafkapy.metadata.zk.client import BrokerIdInUse, ZkError
from kafkapy.replication.isr_job import IsrJob
from kafkapy.server import child_signals
from kafkapy.server.security.zookeeper import zk_client

log = logging.getLogger("kafkapy.controller")
_TICK_S = 0.2


def controller_main(config, broker_info, table=None, make_broker=None) -> None:
    stop = threading.Event()
    # Set from another thread: the handler runs on this thread, which may be
    # inside stop.wait() holding the Event's lock (set() would deadlock there).
    child_signals.on_stop(lambda: threading.Thread(target=stop.set, daemon=True).start())
    client = zk_client(config).connect()
    broker = make_broker(-1) if make_broker is not None else None
    follower = isr_job = controller = door = None
    elected = [None]  # the current Controller, for the door's threads
    try:
        new_session = threading.Event()
        controller_moved = threading.Event()
        client.on_new_session(new_session.set)
        try:
            client.register_broker(broker_info)
        except BrokerIdInUse as exc:
            log.error("%s; stopping", exc)
            raise SystemExit(1) from None
        log.info("registered broker %d in ZooKeeper", broker_info.broker_id)
        # Each thread its own image object (a store caches per object): the
        # config follower's, the controller's, and the ISR job's Broker's.
        image = None
        if table is not None:
            from kafkapy.metadata.zk import store as zk_store
            from kafkapy.metadata.image import MetadataImage

            image = MetadataImage(config.log_dirs[0], table, broker_info)
            if hasattr(zk_store, "follow_config_changes"):
                follower = zk_store.follow_config_changes(client, MetadataImage(config.log_dirs[0], table,
                                                                                broker_info))
            if config["authorizer.class.name"]:
                # ACLs: ZooKeeper's /kafka-acl* into this broker's image, kept current
                # from the change notifications (metadata.acl_store).
                from kafkapy.metadata.acl_store import follow_acl_changes
                from kafkapy.server.security.authorizer import parse_super_users

                follow_acl_changes(client, config.log_dirs[0], table)
                from kafkapy.server.security.inter_broker import inter_broker_protocol

                if inter_broker_protocol(config) == "PLAINTEXT" and \
                        "User:ANONYMOUS" not in parse_super_users(config["super.users"]):
                    log.warning("an authorizer is set and the inter-broker listener is PLAINTEXT (User:ANONYMOUS), "
                                "which is not in super.users: replication and the controller's requests are "
                                "refused unless User:ANONYMOUS has ClusterAction on the cluster")
        if broker is not None:
            isr_job = IsrJob(broker, client, config["replica.lag.time.max.ms"]).start()
        client.watch_controller(lambda _event: controller_moved.set())
        controller = _elect(client, config, broker_info.broker_id, image)
        door = _open_door(config, elected)
        offline_seen = 0  # the offline log dirs already told to the controller
        while not stop.wait(_TICK_S):
            elected[0] = controller
            if broker is not None:
                offline_seen = _propagate_log_dir_failures(client, broker, offline_seen)
            if new_session.is_set():
                new_session.clear()
                log.warning("ZooKeeper session was lost; registering again")
                controller = _resign(controller)
                # Our old session's registration outlives it until ZooKeeper
                # expires it (a paused ensemble does so after it resumes);
                # three session timeouts bound that wait.
                client.register_broker(broker_info, wait_s=3 * config["zookeeper.session.timeout.ms"] / 1000)
                client.watch_controller(lambda _event: controller_moved.set())
                controller_moved.set()
            if controller is not None and controller.moved.is_set():
                controller = _resign(controller)
                controller_moved.set()
            if controller_moved.is_set():
                controller_moved.clear()
                try:
                    current = client.controller_id()
                    if controller is not None and current != broker_info.broker_id:
                        controller = _resign(controller)
                    if current == -1:
                        controller = _elect(client, config, broker_info.broker_id, image) or controller
                except ZkError as exc:  # disconnected (ZooKeeper restarting): look again
                    log.warning("controller election: ZooKeeper %s; trying again", type(exc).__name__)
                    controller_moved.set()
                    stop.wait(1.0)
    finally:
        elected[0] = None
        if door is not None:
            door.stop()
        _resign(controller)
        if isr_job is not None:
            isr_job.stop()
        if follower is not None:
            follower.stop()
        client.close()
        if broker is not None:
            broker.close()


def _elect(client, config, broker_id: int, image):
    """Run the election; the started ``Controller`` if this broker won, else None."""
    from kafkapy.controller.kafka_controller import Controller
    from kafkapy.metadata.zk.controller import ZkController

    result = client.try_elect_controller(broker_id)
    if not result.elected:
        log.info("broker %d is the controller (epoch %d)", result.controller_id, result.controller_epoch)
        return None
    log.info("broker %d is the controller (epoch %d)", broker_id, result.controller_epoch)
    epoch, version = ZkController.epoch_version(client)
    if epoch != result.controller_epoch:
        log.warning("controller epoch moved to %d right after the election at %d: not acting", epoch,
                    result.controller_epoch)
        return None
    from kafkapy.server.security.inter_broker import client_security

    return Controller(config, broker_id, client, epoch, version, image, client_security(config)).start()


def _open_door(config, elected):
    """The local door through which this broker's handler workers reach the
    controller (``controller_channel.LocalDoor``); None if its address is taken
    (a stale broker on the same log dir would also hold the log-dir lock)."""
    from kafkapy.server.controller_channel import LocalDoor

    def answer(message):
        controller = elected[0]
        if controller is None or not controller.active:
            return ("not_controller",)
        return controller.ask(message)

    try:
        return LocalDoor(config, answer).start()
    except OSError as exc:
        log.error("the controller's local door cannot open: %s", exc)
        return None


def _propagate_log_dir_failures(client, broker, seen: int) -> int:
    """A log dir of this broker went offline since ``seen`` (the shared
    table's offline-dirs word, storage.log_dirs): write Kafka's
    ``/log_dir_event_notification/log_dir_event_<seq>`` (propagateLogDirEvent)
    so the controller moves leadership off its partitions. Returns the word
    now told (unchanged if ZooKeeper failed: tried again next tick)."""
    mask = broker.replica_manager.log_manager.failure_channel.offline_mask()
    if not mask & ~seen:
        return seen
    from kafkapy.metadata.zk.controller import LeaderIsrWriter

    try:
        LeaderIsrWriter(client).notify_log_dir_event(broker.broker_id)
    except ZkError as exc:
        log.warning("log dir event notification: ZooKeeper %s; trying again", type(exc).__name__)
        return seen
    log.info("notified the controller of offline log dirs %s", ", ".join(
        broker.replica_manager.log_manager.failure_channel.offline_dirs()))
    return mask


def _resign(controller):
    if controller is not None:
        log.info("broker %d resigns as controller (epoch %d)", controller.broker_id, controller.epoch)
        controller.stop()
    return None
