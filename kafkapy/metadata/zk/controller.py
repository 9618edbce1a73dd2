"""The controller's ZooKeeper reads, writes and watches (Kafka's KafkaZkClient, controller side).

Wraps a connected ``kafkapy.metadata.zk.client.ZkClient`` and uses its
KazooClient (``client.zk``); every znode is read and written in Kafka's
format (``kafkapy.metadata.zk.data``).

* Reads (Kafka's initializeControllerContext): live brokers with the czxid
  of their registration (Kafka's broker epoch), topics with their ids and
  assignments, partition states with their znode versions (the partition
  epoch), topics marked for deletion, ISR change notifications. Many znodes
  are read pipelined, one round trip.
* Fenced writes: every controller write is a multi-op that starts with a
  check of ``/controller_epoch`` at the version this controller won its
  election with, so a deposed controller's write fails whatever it writes
  (``ControllerMoved``; the controller then resigns, as Kafka's does). Partition
  states are written one multi-op per partition (as Kafka's pipelined
  MultiRequests), all sent before any answer is read: a lost znode version
  fails that partition only (returned; the caller re-reads and decides again).
* ``/admin/preferred_replica_election`` read and, once acted on, deleted (fenced).
* Partition reassignment: ``/brokers/topics/<t>`` set with adding/removing
  replicas, ``/admin/reassign_partitions`` read and trimmed (fenced).
* Topic deletion removes ``/brokers/topics/<t>`` with its partition znodes,
  ``/config/topics/<t>`` and ``/admin/delete_topics/<t>`` in one fenced multi-op.
* The leader's ISR writes (``LeaderIsrWriter``, not the controller's): the state
  znode set conditional on its version, keeping leader, leader epoch and
  controller epoch, then a sequential ``/isr_change_notification/isr_change_``.

Watches are kazoo's (``ChildrenWatch``/``DataWatch``: re-armed after every event
and after a new session); their callbacks run on kazoo's thread and must only
queue work. A watch whose ``active()`` turns false stops at its next event.

Ownership: one ``ZkController`` per elected term, used by the controller's event
thread; the ``ZkClient`` underneath is the controller child's.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

from kafkapy.metadata.zk import data as zk_data
from kafkapy.metadata.model import PartitionState

log = logging.getLogger("kafkapy.controller")

# Kafka's PreferredReplicaElectionZNode: a ZooKeeper-triggered preferred election
# (the old kafka-preferred-replica-election tool, or a hand-written znode).
PREFERRED_REPLICA_ELECTION_PATH = zk_data.ADMIN_PATH + "/preferred_replica_election"


# Kafka's ReassignPartitionsZNode: a reassignment written straight to ZooKeeper
# (the old kafka-reassign-partitions tool, or by hand): {"version":1,"partitions":
# [{"topic":t,"partition":p,"replicas":[..]}]}; the controller deletes each entry as
# its partition completes, and the znode with the last one.
REASSIGN_PARTITIONS_PATH = zk_data.ADMIN_PATH + "/reassign_partitions"


def encode_partition_reassignment(entries) -> bytes:
    """``{(topic, partition): replicas}`` as ReassignPartitionsZNode's JSON."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(entries.items())]},
        separators=(",", ":")).encode()


def decode_partition_reassignment(data: bytes) -> dict:
    """ReassignPartitionsZNode's JSON -> ``{(topic, partition): replicas}``; ValueError if unreadable."""
    try:
        return {(str(e["topic"]), int(e["partition"])): tuple(int(b) for b in e["replicas"])
                for e in json.loads(data)["partitions"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"unreadable {REASSIGN_PARTITIONS_PATH}: {exc}") from None


class ControllerMoved(Exception):
    """``/controller_epoch`` moved past this controller's: another broker is controller."""


@dataclass(frozen=True)
class LiveBroker:
    info: object  # BrokerInfo
    broker_epoch: int  # the czxid of /brokers/ids/<id> (Kafka's broker epoch)


class ZkController:
    def __init__(self, client, epoch_zk_version: int):
        self.client = client
        self.zk = client.zk
        self.epoch_zk_version = epoch_zk_version

    @staticmethod
    def epoch_version(client) -> tuple:
        """``(controller epoch, znode version)`` of ``/controller_epoch``."""
        data, stat = client.zk.get(zk_data.CONTROLLER_EPOCH_PATH)
        return zk_data.decode_controller_epoch(data), stat.version

    # -- reads ----------------------------------------------------------------------------
    def _get_many(self, paths) -> dict:
        return self.client.get_with_stat(paths)

    def live_brokers(self) -> dict:
        """``{broker_id: LiveBroker}`` of the registered brokers."""
        ids = self._children(zk_data.BROKER_IDS_PATH)
        found = self._get_many([zk_data.BROKER_IDS_PATH + "/" + i for i in ids])
        out = {}
        for child in ids:
            entry = found.get(zk_data.BROKER_IDS_PATH + "/" + child)
            if entry is None:
                continue
            try:
                broker_id = zk_data.broker_id_from_path(child)
                out[broker_id] = LiveBroker(zk_data.decode_broker(broker_id, entry[0]), entry[1].czxid)
            except ValueError as exc:
                log.warning("ignoring unreadable broker registration %s: %s", child, exc)
        return out

    def topic_names(self) -> list:
        return self._children(zk_data.TOPICS_PATH)

    def read_topics(self, names) -> dict:
        """``{topic: (TopicAssignment, znode version)}`` of the topics ``names`` that
        exist and are readable."""
        names = list(names)
        found = self._get_many([zk_data.topic_path(n) for n in names])
        out = {}
        for name in names:
            entry = found.get(zk_data.topic_path(name))
            if entry is None:
                continue
            try:
                out[name] = zk_data.decode_topic(name, entry[0]), entry[1].version
            except ValueError as exc:
                log.warning("ignoring unreadable topic znode: %s", exc)
        return out

    def set_topic_id(self, name: str, topic, version: int, topic_id) -> bool:
        """Give a topic znode written without an id (an older tool's, version 1 or 2)
        ``topic_id`` (Kafka's controller does, setTopicIds), fenced and conditional on
        ``version``; False if the znode moved meanwhile."""
        txn = self._fenced()
        txn.set_data(zk_data.topic_path(name), zk_data.encode_topic(
            topic_id, topic.partitions, topic.adding_replicas, topic.removing_replicas), version)
        results = txn.commit()
        self._raise_if_moved(results)
        return not any(isinstance(r, Exception) for r in results)

    def read_partition_states(self, assignments: dict) -> dict:
        """``{(topic, partition): PartitionState or None}`` for the partitions of
        ``assignments`` (``{(topic, partition): replicas}``): None where no state
        znode exists (or it is unreadable); ``partition_epoch`` = its version."""
        paths = {tp: zk_data.partition_state_path(*tp) for tp in assignments}
        found = self._get_many(paths.values())
        out = {}
        for tp, path in paths.items():
            entry = found.get(path)
            if entry is None:
                out[tp] = None
                continue
            try:
                out[tp] = zk_data.decode_partition_state(entry[0], assignments[tp], entry[1].version,
                                                         tp[0], tp[1]).state
            except ValueError as exc:
                log.warning("unreadable partition state: %s", exc)
                out[tp] = None
        return out

    def topics_marked_for_deletion(self) -> list:
        return self._children(zk_data.DELETE_TOPICS_PATH)

    def isr_change_notifications(self) -> tuple:
        """``(children, {(topic, partition)})``: the notifications there now and the
        partitions they name (unreadable ones are skipped, and deleted too)."""
        children = self._children(zk_data.ISR_CHANGE_NOTIFICATION_PATH)
        paths = [zk_data.ISR_CHANGE_NOTIFICATION_PATH + "/" + c for c in children]
        partitions = set()
        for path, (data, _stat) in self._get_many(paths).items():
            try:
                partitions |= zk_data.decode_isr_change(data)
            except ValueError as exc:
                log.warning("ignoring ISR change notification %s: %s", path, exc)
        return children, partitions

    def preferred_replica_election(self):
        """``[(topic, partition)]`` of ``/admin/preferred_replica_election`` (Kafka's
        PreferredReplicaElectionZNode: ``{"version": 1, "partitions": [{"topic": t,
        "partition": p}]}``), or None when it is absent or unreadable."""
        try:
            data, _stat = self.zk.get(PREFERRED_REPLICA_ELECTION_PATH)
        except NoNodeError:
            return None
        try:
            return sorted({(str(e["topic"]), int(e["partition"])) for e in json.loads(data)["partitions"]})
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable %s: %s", PREFERRED_REPLICA_ELECTION_PATH, exc)
            return None

    def delete_preferred_replica_election(self) -> None:
        """Kafka's deletePreferredReplicaElection, fenced by the controller epoch."""
        txn = self._fenced()
        txn.delete(PREFERRED_REPLICA_ELECTION_PATH)
        results = txn.commit()
        self._raise_if_moved(results)

    # -- partition reassignment (controller/reassignment.py) ---------------------------------
    def partition_reassignment(self, with_czxid: bool = False):
        """``{(topic, partition): replicas}`` of ``/admin/reassign_partitions`` (with
        ``with_czxid``: and the znode's creation zxid), or None when it is absent; an
        unreadable one is deleted (Kafka logs and drops it)."""
        try:
            data, stat = self.zk.get(REASSIGN_PARTITIONS_PATH)
        except NoNodeError:
            return None
        try:
            entries = decode_partition_reassignment(data)
        except ValueError as exc:
            log.warning("%s; deleting it", exc)
            self._set_or_delete_reassignment({})
            return None
        return (entries, stat.czxid) if with_czxid else entries

    def watch_creation(self, path: str, callback, active) -> None:
        """``callback()`` when ``path`` is created (and now, if it exists), not on its
        data changes (Kafka's ZNodeChangeHandler.handleCreation), while ``active()``."""
        seen = [None]

        def on_data(_data, stat, _event=None):
            if not active():
                return False
            czxid = None if stat is None else stat.czxid
            if czxid is not None and czxid != seen[0]:
                callback()
            seen[0] = czxid
            return None

        self.zk.DataWatch(path, on_data)

    def remove_from_zk_reassignment(self, entries) -> None:
        """Kafka's maybeRemoveFromZkReassignment: ``entries`` ``((topic, partition,
        replicas or None), ...)`` leave the znode (None: whatever their target)."""
        current = self.partition_reassignment()
        if not current:
            return
        left = {tp: r for tp, r in current.items()
                if not any(tp == (t, p) and (want is None or tuple(want) == tuple(r)) for t, p, want in entries)}
        if left != current:
            self._set_or_delete_reassignment(left)

    def _set_or_delete_reassignment(self, left: dict) -> None:
        txn = self._fenced()
        if left:
            txn.set_data(REASSIGN_PARTITIONS_PATH, encode_partition_reassignment(left))
        else:
            txn.delete(REASSIGN_PARTITIONS_PATH)
        results = txn.commit()
        self._raise_if_moved(results)

    def write_topic_assignment(self, effect) -> None:
        """``/brokers/topics/<t>`` with the replicas, adding and removing replicas of
        ``effect`` (a ``WriteTopicAssignment``), fenced by the controller epoch
        (Kafka's setTopicAssignmentRaw)."""
        txn = self._fenced()
        txn.set_data(zk_data.topic_path(effect.topic), zk_data.encode_topic(
            effect.topic_id, dict(effect.partitions), dict(effect.adding), dict(effect.removing)))
        results = txn.commit()
        self._raise_if_moved(results)
        failed = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if failed:
            raise failed[0]

    def _children(self, path: str) -> list:
        try:
            return self.zk.get_children(path)
        except NoNodeError:
            return []

    # -- fenced writes --------------------------------------------------------------------
    def _fenced(self):
        txn = self.zk.transaction()
        txn.check(zk_data.CONTROLLER_EPOCH_PATH, self.epoch_zk_version)
        return txn

    def _raise_if_moved(self, results) -> None:
        if results and isinstance(results[0], (BadVersionError, NoNodeError)):
            raise ControllerMoved(f"/controller_epoch is no longer at version {self.epoch_zk_version}")

    def write_partition_states(self, writes) -> set:
        """``WritePartitionState`` effects, each created (expected_version None) or set
        at its expected version, fenced by the controller epoch. Returns the
        ``(topic, partition)`` whose condition failed (another writer was first);
        raises ControllerMoved when the epoch check failed."""
        if not writes:
            return set()
        parents = {zk_data.topic_partitions_path(w.topic) for w in writes if w.expected_version is None}
        for w in writes:
            if w.expected_version is None:
                parents.add(zk_data.partition_path(w.topic, w.partition))
        for path in sorted(parents, key=len):  # Kafka's createTopicPartitions: empty parents
            try:
                self.zk.create(path, b"")
            except NodeExistsError:
                pass
        pending = []
        for w in writes:
            txn = self._fenced()
            path = zk_data.partition_state_path(w.topic, w.partition)
            data = zk_data.encode_partition_state(w.state, w.controller_epoch)
            if w.expected_version is None:
                txn.create(path, data)
            else:
                txn.set_data(path, data, w.expected_version)
            pending.append((w, txn.commit_async()))
        lost = set()
        for w, result in pending:
            results = result.get()
            self._raise_if_moved(results)
            if any(isinstance(r, Exception) and not isinstance(r, RolledBackError) for r in results):
                log.info("partition state write of %s-%d lost its condition: %s", w.topic, w.partition,
                         [type(r).__name__ for r in results])
                lost.add((w.topic, w.partition))
        return lost

    def delete_topic(self, topic: str) -> None:
        """``/brokers/topics/<t>`` with everything under it, ``/config/topics/<t>`` and
        ``/admin/delete_topics/<t>`` (Kafka's order), one fenced multi-op."""
        txn = self._fenced()
        for path in self._subtree(zk_data.topic_path(topic)):
            txn.delete(path)
        for path in (zk_data.topic_config_path(topic), zk_data.delete_topic_path(topic)):
            if self.zk.exists(path) is not None:
                txn.delete(path)
        results = txn.commit()
        self._raise_if_moved(results)
        failed = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if failed:
            raise failed[0]

    def _subtree(self, root: str) -> list:
        """``root`` and every znode under it, children before parents (bounded by the topic's size)."""
        try:
            children = self.zk.get_children(root)
        except NoNodeError:
            return []
        out = []
        for child in children:
            out += self._subtree(root + "/" + child)
        return out + [root]

    def delete_isr_change_notifications(self, children) -> None:
        """Processed notifications go (fenced, as Kafka's deleteIsrChangeNotifications)."""
        self._delete_notifications(zk_data.ISR_CHANGE_NOTIFICATION_PATH, children)

    def _delete_notifications(self, root: str, children) -> None:
        """Delete ``root``'s processed ``children`` in one multi-op fenced by the controller epoch."""
        if not children:
            return
        txn = self._fenced()
        for child in children:
            txn.delete(root + "/" + child)
        results = txn.commit()
        self._raise_if_moved(results)
        if any(isinstance(r, NoNodeError) for r in results):
            # one went meanwhile (a previous controller's cleanup): delete the rest one by one
            self.client.delete_quietly([root + "/" + c for c in children])

    def log_dir_event_notifications(self) -> tuple:
        """``(children, {broker id})``: the log-dir event notifications there now
        and the brokers they name (Kafka's getBrokerIdsFromLogDirEvents;
        unreadable ones are skipped, and deleted too)."""
        root = zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH
        children = self._children(root)
        brokers = set()
        for path, (data, _stat) in self._get_many([root + "/" + c for c in children]).items():
            try:
                brokers.add(zk_data.decode_log_dir_event(data))
            except ValueError as exc:
                log.warning("ignoring log dir event notification %s: %s", path, exc)
        return children, brokers

    def delete_log_dir_event_notifications(self, children) -> None:
        """Processed notifications go (Kafka's deleteLogDirEventNotifications, fenced)."""
        self._delete_notifications(zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH, children)

    # -- watches --------------------------------------------------------------------------
    def watch_children(self, path: str, callback, active) -> None:
        """``callback(children)`` now and on every change while ``active()``."""
        def on_children(children):
            if not active():
                return False
            callback(children)
            return None

        self.zk.ChildrenWatch(path, on_children)

    def watch_data(self, path: str, callback, active) -> None:
        """``callback()`` on every change of ``path``'s data (not the first call) while ``active()``."""
        first = [True]

        def on_data(_data, _stat, _event=None):
            if not active():
                return False
            if first[0]:
                first[0] = False
                return None
            callback()
            return None

        self.zk.DataWatch(path, on_data)

    def watch_exists(self, path: str, callback, active) -> None:
        """``callback()`` whenever ``path`` exists: now if it does, and at each
        creation or change while ``active()`` (kazoo's DataWatch fires on both)."""
        def on_data(data, _stat, _event=None):
            if not active():
                return False
            if data is not None:
                callback()
            return None

        self.zk.DataWatch(path, on_data)


class LeaderIsrWriter:
    """The ISR writes of a partition's leader (Kafka's pre-AlterPartition ZooKeeper path,
    ``Partition.updateIsr`` then ``ReplicaManager.recordIsrChange``), on the broker's
    own ``ZkClient``; not fenced by the controller epoch, only by the state znode's
    version (the partition epoch the leader has)."""

    def __init__(self, client):
        self.zk = client.zk

    def update_isr(self, topic: str, partition: int, leader_id: int, leader_epoch: int, isr,
                   partition_epoch: int):
        """Set the ISR if the znode is at ``partition_epoch`` and still names this
        leader at this leader epoch; keeps its controller epoch. Returns the new
        partition epoch (znode version), or None when the condition failed."""
        path = zk_data.partition_state_path(topic, partition)
        current = self._read_own(topic, partition, leader_id, leader_epoch)
        if current is None or current.state.partition_epoch != partition_epoch:
            return None
        new = PartitionState((), leader_id, leader_epoch, tuple(isr), partition_epoch)
        try:
            stat = self.zk.set(path, zk_data.encode_partition_state(new, current.controller_epoch,
                                                                    current.leader_recovery_state),
                               version=partition_epoch)
        except (BadVersionError, NoNodeError):
            return None
        return stat.version

    def own_state(self, topic: str, partition: int, leader_id: int, leader_epoch: int):
        """``(isr, partition epoch)`` of the state znode when it names this leader
        at this leader epoch, else None. Every controller write moves the leader
        epoch, so such a znode at a version the leader does not have holds its own
        earlier ISR write whose answer or local apply was lost."""
        current = self._read_own(topic, partition, leader_id, leader_epoch)
        return None if current is None else (tuple(current.state.isr), current.state.partition_epoch)

    def _read_own(self, topic: str, partition: int, leader_id: int, leader_epoch: int):
        """The state znode (``PartitionStateZNode``, partition epoch = its version)
        if it names this leader at this leader epoch, else None."""
        try:
            data, stat = self.zk.get(zk_data.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        current = zk_data.decode_partition_state(data, (), stat.version, topic, partition)
        if (current.state.leader, current.state.leader_epoch) != (leader_id, leader_epoch):
            return None
        return current

    def notify_log_dir_event(self, broker_id: int) -> None:
        """``/log_dir_event_notification/log_dir_event_<seq>`` for this broker
        (Kafka's propagateLogDirEvent): a log dir of it went offline."""
        self.zk.create(zk_data.log_dir_event_path(), zk_data.encode_log_dir_event(broker_id), sequence=True)

    def notify_isr_change(self, partitions) -> None:
        """``/isr_change_notification/isr_change_<seq>`` naming ``partitions``."""
        self.zk.create(zk_data.isr_change_path(), zk_data.encode_isr_change(partitions), sequence=True)
