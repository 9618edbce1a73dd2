"""One partition as this broker sees it (Kafka's ``Partition``).

Owned by one process's ``ReplicaManager`` and never shared between
processes: what the processes must agree on lives in the ``Log``'s shared
slot (log end offset, high watermark, log start offset, leader epoch) and in
the files. A ``Partition`` adds the replica's place in the partition: the
leader, the leader epoch and the in-sync replica set (ISR). With one broker
this broker leads every partition at epoch 0 and the ISR is {this broker};
cluster mode will set them from the controller's LeaderAndIsr decisions.

Every method takes the partition lock itself (the slot's ``lockf`` lock,
re-entrant within a process), so no handler locks a partition or calls its
``Log`` directly: the checks a replicated partition needs (leader, epoch,
ISR size) live here once.

The high watermark is written only here: storage appends and reports log end
offsets, and ``maybe_increment_high_watermark`` moves the high watermark to
the smallest log end offset over the ISR (Kafka's
``maybeIncrementLeaderHW``). Storage still clamps it into
[log_start_offset, log_end_offset] when the log is truncated or its start
moves; that is an invariant of the log, not a replication decision.
"""

from __future__ import annotations

from operator import attrgetter

from kafkapy.protocol.errors import ErrorCode
from kafkapy.storage.errors import OffsetOutOfRange, RecordError
from kafkapy.storage.log import FetchData
from kafkapy.storage.producer_state import ProducerStateError

# Kafka's special ListOffsets timestamps.
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP = -1, -2, -3
NOTHING_READ = FetchData((), 0)  # what a caught-up consumer reads
LONG_MAX = 2**63 - 1


class Partition:
    __slots__ = ("topic", "partition_id", "topic_id", "log", "slot", "state", "local_broker_id",
                 "leader_id", "leader_epoch", "isr", "remote_log_end_offsets", "high_watermark_limit")

    def __init__(self, topic: str, partition_id: int, topic_id, log, slot: int, local_broker_id: int):
        self.topic = topic
        self.partition_id = partition_id
        self.topic_id = topic_id
        self.log = log
        self.slot = slot  # index of the log's shared-table slot (what delayed operations watch)
        self.state = log.state
        self.local_broker_id = local_broker_id
        # The one broker leads every partition at epoch 0 (see module docstring).
        self.leader_id = local_broker_id
        self.leader_epoch = 0
        self.isr = frozenset((local_broker_id,))
        # Log end offsets of the other replicas, as their fetches report them
        # (none yet: one broker), and the smallest over the other ISR members,
        # which bounds the high watermark (LONG_MAX: the ISR is this broker).
        self.remote_log_end_offsets: dict[int, int] = {}
        self.high_watermark_limit = LONG_MAX

    # -- state ---------------------------------------------------------------------
    # The shared slot's fields (what every process sees), read through attrgetter (C).
    high_watermark = property(attrgetter("state.high_watermark"))
    log_start_offset = property(attrgetter("state.log_start_offset"))
    log_end_offset = property(attrgetter("state.log_end_offset"))

    def lock(self):
        """Hold the partition still (its slot lock, re-entrant in this
        process): for a caller reading the file regions a read returned."""
        return self.log.lock()

    def make_leader(self, leader_epoch: int, isr) -> None:
        """Kafka's ``makeLeader``: lead at ``leader_epoch`` (recorded in the
        leader-epoch checkpoint at the log end offset) with ``isr``; with the
        ISR this broker alone its whole log is committed at once."""
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.isr = frozenset(isr)
        self._update_high_watermark_limit()
        self.log.become_leader(leader_epoch)
        with self.log.lock():
            self.maybe_increment_high_watermark()

    def _update_high_watermark_limit(self) -> None:
        others = [self.remote_log_end_offsets.get(b, 0) for b in self.isr if b != self.local_broker_id]
        self.high_watermark_limit = min(others) if others else LONG_MAX

    def maybe_increment_high_watermark(self) -> bool:
        """Kafka's ``maybeIncrementLeaderHW``: move the high watermark up to
        the smallest log end offset over the ISR; the caller holds the
        partition lock. True if it moved. (An append applies the same rule in
        its own slot store: ``high_watermark_limit``.)"""
        state = self.state
        new_high_watermark = min(state.log_end_offset, self.high_watermark_limit)
        if new_high_watermark > state.high_watermark:
            state.high_watermark = new_high_watermark
            return True
        return False

    # -- produce -------------------------------------------------------------------
    def append_records_to_leader(self, records, acks: int):
        """Append one partition's records of a produce request; returns
        ``(error_code, AppendResult or None, error message or None)``.

        acks=-1 is refused before anything is written when the ISR is smaller
        than ``min.insync.replicas`` (Kafka's ``appendRecordsToLeader``).
        """
        log = self.log
        if records is None or len(records) == 0:
            return ErrorCode.CORRUPT_MESSAGE, None, "Produce request has no records"
        if acks == -1 and len(self.isr) < log.config.min_insync_replicas:
            isr = ",".join(map(str, sorted(self.isr)))
            return (ErrorCode.NOT_ENOUGH_REPLICAS, None,
                    f"The size of the current ISR Set({isr}) is insufficient to satisfy "
                    f"the min.isr requirement of {log.config.min_insync_replicas} for partition "
                    f"{self.topic}-{self.partition_id}")
        try:
            with self.state.lock():
                # The high watermark moves in the append's own slot store.
                result = log.append_as_leader(records, self.leader_epoch, self.high_watermark_limit)
        except RecordError as exc:
            return exc.error_code, None, str(exc)
        except ProducerStateError as exc:
            return exc.error_code, None, str(exc)
        return ErrorCode.NONE, result, None

    # -- reads ---------------------------------------------------------------------
    def fetch_records(self, fetch_offset: int, max_bytes: int, min_one_batch: bool):
        """A consumer fetch (up to the high watermark): ``(FetchData or None
        when ``fetch_offset`` is out of range, high_watermark, log_start_offset)``.

        A consumer that has caught up fetches at the high watermark: nothing
        to read, so no lock and no ``Log.read`` (two lockf calls, a generation
        check and an empty read; the idle path of every long poll, and most
        partitions of a 16-partition consumer between appends). The slot's
        fields are aligned 8-byte words, read whole; log_start_offset never
        passes the high watermark, so fetch_offset == high_watermark is in
        range.
        """
        state = self.state
        high_watermark = state.high_watermark
        if fetch_offset == high_watermark:
            log_start_offset = state.log_start_offset
            if log_start_offset <= fetch_offset:
                return NOTHING_READ, high_watermark, log_start_offset
        log = self.log
        with log.lock():
            high_watermark = state.high_watermark
            log_start_offset = state.log_start_offset
            try:
                data = log.read(fetch_offset, max_bytes, high_watermark, min_one_batch)
            except OffsetOutOfRange:
                data = None
        return data, high_watermark, log_start_offset

    def read_records(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None):
        """Up to ``max_offset`` (None: the log end offset) from ``fetch_offset``,
        at least one whole batch; what a coordinator loading its partition reads."""
        with self.log.lock():
            return self.log.read(fetch_offset, max_bytes, max_offset, True)

    def fetch_offset_for_timestamp(self, timestamp: int):
        """ListOffsets: ``(offset, timestamp)`` for Kafka's special timestamps
        (LATEST = the high watermark, EARLIEST = the log start offset,
        MAX_TIMESTAMP) or the first offset at or after ``timestamp``;
        ``(-1, -1)`` when none is below the high watermark."""
        log = self.log
        with log.lock():
            high_watermark = self.state.high_watermark
            if timestamp == LATEST_TIMESTAMP:
                return high_watermark, -1
            if timestamp == EARLIEST_TIMESTAMP:
                return self.state.log_start_offset, -1
            if timestamp == MAX_TIMESTAMP:
                found = log.max_timestamp_offset()
            elif timestamp >= 0:
                found = log.offset_for_timestamp(timestamp)
            else:
                found = None
        if found is None or found[0] >= high_watermark:
            return -1, -1
        return found

    def delete_records_on_leader(self, offset: int):
        """DeleteRecords: ``(error_code, low watermark)``; -1 means the high
        watermark, anything beyond it is OFFSET_OUT_OF_RANGE."""
        log = self.log
        with log.lock():
            if offset == -1:
                offset = self.state.high_watermark
            try:
                return ErrorCode.NONE, log.delete_records(offset)
            except OffsetOutOfRange:
                return ErrorCode.OFFSET_OUT_OF_RANGE, -1

    def active_producers(self) -> list:
        """DescribeProducers: the producer state's entries."""
        with self.log.lock():
            return self.log.active_producers()

    def size_in_bytes(self) -> int:
        with self.log.lock():
            return self.log.size_in_bytes()

    def release(self) -> None:
        """This process lets go of the partition's files (they stay on disk)."""
        self.log.release()

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition_id}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={sorted(self.isr)}, "
                f"hw={self.high_watermark}, leo={self.log_end_offset})")
