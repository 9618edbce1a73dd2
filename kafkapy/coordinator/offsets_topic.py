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
    return ensure_internal_topic(broker, OFFSETS_TOPIC, config["offsets.topic.num.partitions"],
                                 offsets_topic_configs(config), config["offsets.topic.replication.factor"])


def ensure_internal_topic(broker, topic: str, num_partitions: int, configs: dict,
                          replication_factor: int) -> tuple[int, int]:
    """``ensure_offsets_topic`` for any coordinator's internal topic
    (``__transaction_state`` too)."""
    info = broker.metadata().topics.get(topic)
    if info is not None:
        return E.NONE, info.num_partitions
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


def await_replication(broker, partition, required_offset: int, timeout_ms: int) -> int:
    """Wait until ``partition``'s high watermark passed ``required_offset``
    (an acks=-1 append by a coordinator), at most ``timeout_ms``: its error
    code (REQUEST_TIMED_OUT when the time ran out). With the ISR the leader
    alone (a standalone broker) the append already moved the high watermark
    and nothing waits; in a cluster the wait is one follower fetch round
    trip, started by waking the followers' fetches parked on this
    partition's log end offset."""
    done, code = partition.check_enough_replicas_reach_offset(required_offset)
    if done or code:
        return code
    broker.replica_manager.wake_delayed_operations()
    deadline = time.monotonic() + timeout_ms / 1000
    pause = 0.0002
    while time.monotonic() < deadline:  # bounded by timeout_ms
        time.sleep(pause)
        pause = min(pause * 2, 0.005)
        done, code = partition.check_enough_replicas_reach_offset(required_offset)
        if done or code:
            return code
    return E.REQUEST_TIMED_OUT


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
    """The persistence interface ``GroupCoordinator`` uses.

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
        if not records:
            return E.NONE, -1
        if self.ensure():
            return E.COORDINATOR_NOT_AVAILABLE, -1
        now = self.clock_ms()
        replica_manager = self.broker.replica_manager
        txn = {}
        if producer is not None:
            leader = replica_manager.get_partition(self.topic, partition)
            if leader is None:
                return E.NOT_COORDINATOR, -1
            with leader.lock():
                sequence = leader.log.next_sequence(*producer)
            txn = {"producer_id": producer[0], "producer_epoch": producer[1], "base_sequence": sequence,
                   "is_transactional": True}
        batch = build_batch([(k, v, [], now) for k, v in records], **txn)
        try:
            # acks=-1, as Kafka's coordinator appends (offsets.commit.required.acks).
            code, result, message = replica_manager.append_records(
                self.topic, partition, memoryview(bytearray(batch)), -1)
        except OSError as exc:
            log.error("append to %s-%d failed: %s", self.topic, partition, exc)
            return E.COORDINATOR_NOT_AVAILABLE, -1
        if code == E.NONE:
            code = self._await_replication(partition, result.last_offset + 1)
        if code == E.NONE:
            return E.NONE, result.first_offset
        # Kafka's GroupMetadataManager error mapping of a failed append.
        if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT):
            return E.COORDINATOR_NOT_AVAILABLE, -1
        if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
            return E.NOT_COORDINATOR, -1
        if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
            return E.INVALID_COMMIT_OFFSET_SIZE, -1
        if code in (E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED):
            return code, -1
        log.error("append to %s-%d failed: %s", self.topic, partition, message)
        return E.UNKNOWN_SERVER_ERROR, -1

    def _await_replication(self, partition_id: int, required_offset: int) -> int:
        """acks=-1: the append counts once the high watermark passed it (Kafka's
        coordinator waits in the DelayedProduce purgatory; this process has one
        thread, so it waits here, bounded by ``offsets.commit.timeout.ms``)."""
        partition = self.broker.replica_manager.get_partition(self.topic, partition_id)
        if partition is None:
            return E.NOT_LEADER_OR_FOLLOWER
        return await_replication(self.broker, partition, required_offset, self.config[self.append_timeout_key])

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
