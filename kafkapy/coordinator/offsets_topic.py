"""``__consumer_offsets`` as the coordinator's store: create, append, replay.

Owned by the group-coordinator process (its own ``Broker`` view); the only
writer of this topic. Appends go through the partition's ``Log`` under its
shared-table lock like any produce, so the supervisor's maintenance
(flush, checkpoints, the cleaner) sees them as ordinary log data.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from kafkapy._core import load as _load_core
from kafkapy._core.records_py import build_batch, decode_records
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.storage.control_records import CorruptRecordError, parse_end_txn_marker
from kafkapy.protocol.topics import TopicError

log = logging.getLogger("kafkapy.coordinator")

OFFSETS_TOPIC = "__consumer_offsets"
_batch = _load_core("batch")

# Replay reads this much of a partition per step, so the coordinator loop
# can answer requests (COORDINATOR_LOAD_IN_PROGRESS) between steps.
LOAD_READ_BYTES = 1 << 20


def offsets_topic_configs(config) -> dict:
    """Kafka's GroupMetadataManager topic configs for __consumer_offsets."""
    return {"cleanup.policy": "compact", "compression.type": "producer",
            "segment.bytes": str(config["offsets.topic.segment.bytes"])}


def ensure_offsets_topic(broker, config) -> tuple[int, int]:
    """Create ``__consumer_offsets`` if it does not exist (Kafka does this on
    the first FindCoordinator). Returns ``(error_code, num_partitions)``;
    COORDINATOR_NOT_AVAILABLE while it cannot exist (e.g.
    ``offsets.topic.replication.factor`` above the number of brokers)."""
    return ensure_internal_topic(broker, OFFSETS_TOPIC, lambda: (
        config["offsets.topic.num.partitions"], offsets_topic_configs(config),
        config["offsets.topic.replication.factor"]))


def ensure_internal_topic(broker, topic: str, creation) -> tuple[int, int]:
    """``ensure_offsets_topic`` for any coordinator's internal topic
    (``__transaction_state`` too). ``creation()``: the topic's
    ``(num_partitions, configs, replication_factor)``, asked only when the
    topic is missing: the stores call this before every append (3 times
    per transaction); building the configs dict with its config lookups
    made a call on an existing topic cost 2.5 us instead of 1.4 us."""
    info = broker.metadata().topics.get(topic)
    if info is not None:
        return E.NONE, info.num_partitions
    num_partitions, configs, replication_factor = creation()
    try:
        info = broker.admin.create_topic(topic, num_partitions, configs, replication_factor=replication_factor)
        return E.NONE, info.num_partitions
    except TopicError as exc:
        if exc.error_code == E.TOPIC_ALREADY_EXISTS:  # another process won the race
            info = broker.metadata().topics.get(topic)
            if info is not None:
                return E.NONE, info.num_partitions
        log.warning("cannot create %s: %s", topic, exc.message)
        return E.COORDINATOR_NOT_AVAILABLE, 0


@dataclass
class PendingAppend:
    """An acks=-1 coordinator append the high watermark had not passed yet
    (``OffsetsTopicStore.begin_append``): ``poll_append`` settles it."""

    partition: object  # the leader's replication Partition
    required_offset: int  # the high watermark must reach this
    first_offset: int  # the appended batch's base offset
    deadline: float  # monotonic seconds: REQUEST_TIMED_OUT from then


_TRANSACTIONAL = 0x10  # batch attribute bits
_CONTROL = 0x20


def _is_commit(batch) -> bool:
    try:
        return parse_end_txn_marker(batch).is_commit
    except CorruptRecordError:
        log.warning("a control batch of a coordinator topic is not a transaction marker; taken as ABORT")
        return False


def _read_batches(partition, offset: int):
    """``(offset, bytes, batch headers)`` per read step of ``partition`` from
    ``offset`` to its log end offset (``LOAD_READ_BYTES`` a step)."""
    with partition.lock():
        end = partition.log_end_offset
    while offset < end:
        with partition.lock():  # the regions' files stay put while read
            data = partition.read_records(offset, LOAD_READ_BYTES, end)
            chunks = []
            for region in data.regions:
                fd = os.open(region.path, os.O_RDONLY)
                try:
                    chunks.append(os.pread(fd, region.length, region.position))
                finally:
                    os.close(fd)
        buf = b"".join(chunks)
        headers = _batch.scan_batches(buf, 0, -1, False)[0] if buf else []
        if not headers:
            return
        yield offset, buf, headers
        last = headers[-1]
        offset = last.base_offset + last.last_offset_delta + 1


class OffsetsTopicStore:
    """The persistence interface ``GroupMetadataManager`` uses.

    ``coordinator.transaction.state_store.TransactionStateStore`` is this for
    ``__transaction_state``: the class attributes name the topic and the
    settings it reads."""

    topic = OFFSETS_TOPIC
    num_partitions_key = "offsets.topic.num.partitions"
    append_timeout_key = "offsets.commit.timeout.ms"

    def __init__(self, broker, config, clock_ms=None):
        self.broker = broker
        self.config = config
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.monotonic = time.monotonic  # append deadlines (a test may set it)
        info = broker.metadata().topics.get(self.topic)
        # The partition count is fixed once the topic exists (changing it
        # would move groups); before that, the configured count is what
        # FindCoordinator will create.
        self.num_partitions = info.num_partitions if info is not None \
            else config[self.num_partitions_key]
        self.open_transactions: dict[int, dict] = {}  # see ``replay``

    def exists(self) -> bool:
        return self.broker.metadata().topics.get(self.topic) is not None

    def ensure_topic(self) -> tuple[int, int]:
        return ensure_offsets_topic(self.broker, self.config)

    def ensure(self) -> int:
        error, n = self.ensure_topic()
        if not error:
            self.num_partitions = n
        return error

    def partition_exists(self, topic: str, partition: int) -> bool:
        info = self.broker.metadata().topics.get(topic)
        return info is not None and 0 <= partition < info.num_partitions

    def topics(self) -> dict:
        """``{name: (topic_id, num_partitions)}`` of every topic (what KIP-848
        assignors and subscriptions resolve against)."""
        return {name: (info.topic_id, info.num_partitions)
                for name, info in self.broker.metadata().topics.items()}

    def append(self, partition: int, records) -> int:
        """Append ``[(key, value_or_None)]`` as one batch; Kafka's error mapping
        for a failed group-metadata append (GroupMetadataManager)."""
        return self._append(partition, records)[0]

    def append_transactional(self, partition: int, records, producer_id: int, producer_epoch: int):
        """``append`` in a transactional batch of the producer (TxnOffsetCommit,
        Kafka's origin COORDINATOR: the batch continues the producer's
        sequence on this partition, which only this process writes):
        ``(error_code, base offset)``."""
        return self._append(partition, records, (producer_id, producer_epoch))

    def _append(self, partition: int, records, producer=None) -> tuple[int, int]:
        """``begin_append``, then wait here for the high watermark, bounded by
        the append timeout: the group coordinator's rare admin appends (group
        deletion, offset expiry, OffsetDelete); its commits, assignments and
        KIP-848 records park instead (``GroupMetadataManager.append_then``, as
        Kafka's wait in the DelayedProduce purgatory). With the ISR the
        leader alone (a standalone broker) nothing waits; in a cluster the
        wait is one follower fetch round trip."""
        code, first_offset, pending = self.begin_append(partition, records, producer)
        pause = 0.0002
        while pending is not None:  # bounded by pending.deadline (poll_append)
            time.sleep(pause)
            pause = min(pause * 2, 0.005)
            settled = self.poll_append(pending)
            if settled is not None:
                return settled
        return code, first_offset

    def begin_append(self, partition: int, records, producer=None, verification=None):
        """Append ``[(key, value_or_None)]`` as one batch (``producer``: its
        ``(id, epoch)`` for a transactional batch; ``verification``:
        ``Log.append_as_leader``'s, a TxnOffsetCommit's KIP-890 token) with acks=-1 without
        waiting: ``(error_code, base offset, None)`` once settled (the
        mapped error, as ``append`` answers it; at once when the high
        watermark already passed the batch: always with the ISR the leader
        alone), else ``(NONE, base offset, PendingAppend)`` for
        ``poll_append`` after the followers' parked fetches were woken."""
        if not records:
            return E.NONE, -1, None
        if self.ensure():
            return E.COORDINATOR_NOT_AVAILABLE, -1, None
        now = self.clock_ms()
        replica_manager = self.broker.replica_manager
        txn = {}
        if producer is not None:
            leader = replica_manager.get_partition(self.topic, partition)
            if leader is None:
                return E.NOT_COORDINATOR, -1, None
            with leader.lock():
                sequence = leader.log.next_sequence(*producer)
            txn = {"producer_id": producer[0], "producer_epoch": producer[1], "base_sequence": sequence,
                   "is_transactional": True}
        batch = build_batch([(k, v, [], now) for k, v in records], **txn)
        try:
            # acks=-1, as Kafka's coordinator appends (offsets.commit.required.acks).
            code, result, message = replica_manager.append_records(
                self.topic, partition, memoryview(bytearray(batch)), -1, verification)
        except OSError as exc:
            log.error("append to %s-%d failed: %s", self.topic, partition, exc)
            return E.COORDINATOR_NOT_AVAILABLE, -1, None
        if code == E.NONE:
            leader = replica_manager.get_partition(self.topic, partition)
            if leader is None:
                code = E.NOT_LEADER_OR_FOLLOWER
            else:
                required = result.last_offset + 1
                done, code = leader.check_enough_replicas_reach_offset(required)
                if not (done or code):
                    # The followers' fetches are parked on the old log end offset.
                    replica_manager.wake_delayed_operations()
                    deadline = self.monotonic() + self.config[self.append_timeout_key] / 1000
                    return E.NONE, result.first_offset, PendingAppend(leader, required, result.first_offset, deadline)
        return (*self._append_outcome(partition, code, result.first_offset if code == E.NONE else -1, message), None)

    def poll_append(self, pending: PendingAppend):
        """A ``begin_append`` left waiting: ``(error_code, base offset)`` as
        ``append`` would have answered it once the high watermark passed it,
        leadership moved or the append timeout ran out
        (REQUEST_TIMED_OUT, mapped); None while it still waits."""
        done, code = pending.partition.check_enough_replicas_reach_offset(pending.required_offset)
        if not (done or code):
            if self.monotonic() < pending.deadline:
                return None
            code = E.REQUEST_TIMED_OUT
        return self._append_outcome(pending.partition.partition_id, code, pending.first_offset, "")

    def _append_outcome(self, partition: int, code: int, first_offset: int, message: str) -> tuple[int, int]:
        """Kafka's GroupMetadataManager error mapping of a failed append."""
        if code == E.NONE:
            return E.NONE, first_offset
        if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT):
            return E.COORDINATOR_NOT_AVAILABLE, -1
        if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
            return E.NOT_COORDINATOR, -1
        if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
            return E.INVALID_COMMIT_OFFSET_SIZE, -1
        if code in (E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED, E.INVALID_TXN_STATE):
            # INVALID_TXN_STATE: a verified TxnOffsetCommit whose transaction
            # ended between the answer and the append (a stale token), as Kafka's.
            return code, -1
        log.error("append to %s-%d failed: %s", self.topic, partition, message or code)
        return E.UNKNOWN_SERVER_ERROR, -1

    def replay(self, partitions=None):
        """Yield ``(partition, key, value)`` for every record of ``partitions``
        (default: all), partition by partition in offset order; yields
        ``None`` between read steps so the caller can serve requests while
        loading. Records written in transactions (TxnOffsetCommit) are
        yielded where their COMMIT marker is, never when aborted (Kafka's
        loading of pending transactional offsets); those of transactions
        still open at the end are left in ``open_transactions[partition]``
        (producer id -> [(key, value, batch offset)])."""
        info = self.broker.metadata().topics.get(self.topic)
        if info is None:
            return
        for p in (range(info.num_partitions) if partitions is None else sorted(partitions)):
            partition = self.broker.replica_manager.get_partition(self.topic, p)
            if partition is None:
                continue
            # producer id -> [(key, value, batch offset)] of its open transaction
            open_txns = self.open_transactions[p] = {}
            with partition.lock():
                start = partition.log_start_offset
            for offset, buf, headers in _read_batches(partition, start):
                for h in headers:
                    batch = memoryview(buf)[h.position:h.position + h.batch_length + 12]
                    if h.attributes & _CONTROL:
                        # A transaction's marker: its records here apply
                        # (COMMIT) or never do (ABORT).
                        held = open_txns.pop(h.producer_id, None)
                        if held and h.base_offset >= offset and _is_commit(batch):
                            for key, value, _batch_offset in held:
                                yield p, key, value
                        continue
                    for rec_offset, _ts, key, value, _hdrs in decode_records(batch):
                        if rec_offset < offset or key is None:
                            continue
                        if h.attributes & _TRANSACTIONAL:
                            open_txns.setdefault(h.producer_id, []).append((key, value, h.base_offset))
                        else:
                            yield p, key, value
                yield None

    def markers_since(self, partition_id: int, start: int) -> tuple[list, int]:
        """The transaction markers of partition ``partition_id`` from offset
        ``start``: ``([(offset, producer id, commit)], the offset after what
        was read)`` (how the group coordinator learns of markers another
        process appended here: WriteTxnMarkers from another broker's
        transaction coordinator)."""
        partition = self.broker.replica_manager.get_partition(self.topic, partition_id)
        if partition is None:
            return [], start
        found = []
        end = start
        for _offset, buf, headers in _read_batches(partition, start):
            for h in headers:
                if h.attributes & _CONTROL:
                    batch = memoryview(buf)[h.position:h.position + h.batch_length + 12]
                    found.append((h.base_offset, h.producer_id, _is_commit(batch)))
            end = headers[-1].base_offset + headers[-1].last_offset_delta + 1
        return found, end
