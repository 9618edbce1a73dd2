"""The leader's ISR job (Kafka's isr-expiration task and maybeExpandIsr on the
pre-AlterPartition ZooKeeper path): run in the broker's controller child
(``server/controller_process.py``), which holds the ZooKeeper session its
writes go through. See ``IsrJob``."""

from __future__ import annotations

import logging
import threading
import time

from kafkapy.metadata.zk.client import ZkError
from kafkapy.metrics import probes

log = logging.getLogger("kafkapy.controller")
# The ISR job's tick: expansion is checked every tick (Kafka expands on the
# follower's fetch; this is within a quarter second of it), shrinking every
# replica.lag.time.max.ms / 2 (Kafka's isr-expiration task).
_ISR_TICK_S = 0.25


class IsrJob:
    """The ISR of the partitions this broker leads (brief item 5; Kafka's
    isr-expiration task and maybeExpandIsr on the pre-AlterPartition ZooKeeper
    path): for each partition the image and the slot say this broker leads,
    shrink the followers out of sync for ``replica.lag.time.max.ms``
    (checked every half of it) and add those caught up
    (``Partition.maybe_expand_isr_candidates``, every tick), counted by the
    high watermark from before the write (``Partition.prepare_isr_expansion``,
    Kafka's PendingExpandIsr: once the znode names a replica the controller
    may elect it); write the new ISR
    to the state znode conditional on its version (the partition epoch), then
    ``Partition.update_isr`` with the new version (the high watermark may move:
    parked operations are woken), then one ``/isr_change_notification`` for the
    round (Kafka's recordIsrChange then its propagation task: a notification
    that fails is sent again next round, the local ISR is not held back). A
    write that lost its version to the controller is dropped: the controller
    changed the partition, and its LeaderAndIsr brings the new epoch. One that
    lost it to this leader's own earlier write (answered by a lost connection,
    or whose round failed before the local apply: the znode still names this
    leader at this leader epoch, which every controller write moves) adopts
    the znode's ISR and version, so the change is decided again next round
    instead of failing on a stale partition epoch until the next
    LeaderAndIsr."""

    def __init__(self, broker, client, lag_ms: int):
        from kafkapy.metadata.zk.controller import LeaderIsrWriter

        self.broker = broker
        self.writer = LeaderIsrWriter(client)
        self.lag_ms = lag_ms
        self._stop = threading.Event()
        self._next_shrink = time.monotonic() + lag_ms / 2000
        self._unnotified: set = set()  # (topic, partition) changed, notification not yet written
        self.thread = threading.Thread(target=self._run, name="isr-job", daemon=True)

    def start(self) -> "IsrJob":
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self.thread is not threading.current_thread():
            self.thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(_ISR_TICK_S):
            shrink = time.monotonic() >= self._next_shrink
            if shrink:
                self._next_shrink = time.monotonic() + self.lag_ms / 2000
            try:
                self.run_once(shrink)
            except ZkError as exc:  # the session is lost or reconnecting
                log.warning("ISR job: ZooKeeper %s; trying again next round", type(exc).__name__)
            except Exception:
                log.exception("ISR job failed; trying again next round")

    def run_once(self, shrink: bool, now_ms: int | None = None) -> list:
        """One round; returns the ``(topic, partition, new isr)`` written."""
        broker = self.broker
        me = broker.broker_id
        md = broker.metadata()
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        written = []
        try:
            self._decide(md, me, shrink, now_ms, written)
        finally:  # what was written is applied even when a later write failed
            self._apply(written)
        return [(name, p, new_isr) for name, p, new_isr, *_ in written]

    def _decide(self, md, me: int, shrink: bool, now_ms: int, written: list) -> None:
        """Write each led partition's ISR change; ``written`` gets ``(topic,
        partition, isr, version, partition)`` of those ZooKeeper now holds."""
        broker = self.broker
        for name, info in md.topics.items():
            for p, state in info.partitions.items():
                if state.leader != me:
                    continue
                partition = broker.replica_manager.get_partition(name, p)
                if partition is None or not partition.is_leader:
                    continue
                slot = partition.state  # aligned words, read without the lock for the quick checks
                full = bin(slot.isr_mask).count("1") >= slot.replica_count
                if full and (not shrink or slot.replica_count <= 1):
                    continue  # the common case: nothing to add, and no shrink due (no lock taken)
                out = partition.get_out_of_sync_replicas(now_ms, self.lag_ms) if shrink else frozenset()
                add = frozenset() if full else partition.maybe_expand_isr_candidates()
                if add:
                    # Kafka expands on the follower's fetch, and only for a live broker
                    # (isReplicaIsrEligible): a follower that has not fetched lately (a dead
                    # one whose log end offset the leader kept) is not added.
                    fetched = partition.replica_states()
                    add = frozenset(b for b in add if b in md.brokers and b in fetched
                                    and now_ms - fetched[b][3] <= self.lag_ms
                                    and b not in state.offline_replicas)  # its log dir failed
                if not out and not add and not slot.pending_isr_mask:
                    continue
                with slot.lock():  # one view: a LeaderAndIsr between the reads would mix two states
                    isr, replicas = partition.isr, partition.replicas
                    leader_epoch, partition_epoch = partition.leader_epoch, partition.partition_epoch
                    # Counted by the high watermark before ZooKeeper names
                    # them (the controller may elect them from then on).
                    add, moved = partition.prepare_isr_expansion(add)
                if moved:
                    self.broker.replica_manager.wake_delayed_operations()
                if not out and not add:
                    continue
                order = [r for r in state.isr if r in isr] + [r for r in replicas if r in isr and r not in state.isr]
                new_isr = tuple(r for r in order if r not in out) + tuple(r for r in replicas if r in add
                                                                        and r not in isr)
                version = self.writer.update_isr(name, p, me, leader_epoch, new_isr, partition_epoch)
                if version is None:
                    own = self.writer.own_state(name, p, me, leader_epoch)
                    if own is not None and own[1] > partition_epoch:
                        log.info("%s-%d: ISR %s at partition epoch %d in ZooKeeper is this leader's own "
                                 "earlier write; taking it (was %s at %d)", name, p, list(own[0]), own[1],
                                 sorted(isr), partition_epoch)
                        written.append((name, p, own[0], own[1], partition))
                        continue
                    log.info("ISR change of %s-%d to %s lost its version %d: the controller moved it", name, p,
                             list(new_isr), partition_epoch)
                    continue
                log.info("%s-%d: ISR %s -> %s (partition epoch %d)", name, p, sorted(isr), list(new_isr), version)
                written.append((name, p, new_isr, version, partition))

    def _apply(self, written: list) -> None:
        """The written ISRs into the partitions, then the notification of every
        change not yet notified (kept for the next round if it fails)."""
        moved = False
        for _name, _p, new_isr, version, partition in written:
            before = partition.isr
            moved |= bool(partition.update_isr(new_isr, version))
            if set(new_isr) - set(before):
                probes.replica.isr_expanded()
            if set(before) - set(new_isr):
                probes.replica.isr_shrunk()
        if moved:
            self.broker.replica_manager.wake_delayed_operations()
        self._unnotified.update((name, p) for name, p, *_ in written)
        if self._unnotified:
            try:
                self.writer.notify_isr_change(sorted(self._unnotified))
            except ZkError as exc:
                log.warning("ISR change notification of %d partitions failed (%s); trying again next round",
                            len(self._unnotified), type(exc).__name__)
                return
            self._unnotified.clear()
