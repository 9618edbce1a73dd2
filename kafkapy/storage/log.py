"""Log: one partition's log, shared by several processes (Kafka's UnifiedLog).

Directory ``<topic>-<partition>/`` holds ``%020d.log/.index/.timeindex``
segments (``storage.local_log``), ``leader-epoch-checkpoint``,
``partition.metadata`` and the producer-state snapshots ``%020d.snapshot``
(written by ProducerStateManager).

Job (Kafka's UnifiedLog): the offsets and the rules above the segments: the
high watermark and log start offset, appends as leader (validation, offsets,
producer state) and as follower, transaction markers, the last stable offset
and aborted transactions, leader epochs, retention and DeleteRecords,
truncation's effect on offsets, epochs and producer state, and
offset-for-timestamp lookups.

Concurrency model (docs/architecture.md, "State shared by handler workers"):
every handler worker opens its own Log object on the same directory.  Every
public method except ``open`` must be called with the partition lock held
(``with log.lock():``).  The authoritative mutable scalars (log_end_offset,
high_watermark, log_start_offset, recovery_point, the active segment's size,
index entry counts, max timestamp, index cadence, flush bookkeeping) live in
the PartitionState slot; the Log and its LocalLog keep only per-process
caches.  Each method starts with ``_sync()`` (``LocalLog.sync``): if the
slot's ``generation`` differs from the one this process last saw, another
process changed the segment list (roll, retention, truncation, close), so
the LocalLog drops every handle and reloads the list from disk (and the
leader-epoch cache is invalidated); otherwise it copies the active segment's
counters from the slot.  Anything that changes the segment list bumps
``generation``.  Which class writes which slot field: ``storage.local_log``.

Pieces, as Kafka cuts them: ``storage.local_log.LocalLog`` (``local``) holds
the segments of the directory (the segment list, roll, reading, truncating
and flushing segments, the directory itself); ``storage.log_loader.LogLoader``
loads the directory for the first process to open it (``open`` with a fresh
slot); ``storage.leader_epoch_cache.LeaderEpochFileCache``
(``leader_epoch_cache``) owns the ``leader-epoch-checkpoint``;
ProducerStateManager (``_psm``) is this process's idempotent-producer map;
this class holds the rest.  It keeps Kafka's pre-3.0 name, ``Log``, which
the broker uses throughout.

Ownership: the Log object (and its LocalLog) is owned by one process and is
not thread-safe on its own; the partition lock (process + thread exclusive)
guards it.
"""

import logging
import os
import time
import uuid
from collections import namedtuple
from operator import attrgetter

from kafkapy._core import load
from kafkapy._core.types import AppendCheckError
from kafkapy.metrics import probes
from kafkapy.storage import checkpoints, recompress
from kafkapy.storage.cleaner import truncate_cleaner_checkpoint
from kafkapy.storage.control_records import (ABORT, COMMIT, CorruptRecordError, EndTxnMarker,
                                             build_end_txn_marker_batch, parse_end_txn_marker)
from kafkapy.storage.config import LONG_MAX, LogConfig
from kafkapy.storage.errors import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    RECORD_LIST_TOO_LARGE,
    UNKNOWN_TOPIC_OR_PARTITION,
    InconsistentTopicId,
    KafkaStorageError,
    OffsetOutOfRange,
    OffsetsOutOfOrder,
    RecordError,
    StorageError,
)
from kafkapy.storage.leader_epoch_cache import LeaderEpochFileCache
from kafkapy.storage.local_log import FetchData, LocalLog, _active_fields
from kafkapy.storage.log_loader import LogLoader
from kafkapy.storage.producer_state import ProducerStateError, ProducerStateManager, increment_sequence
from kafkapy.storage.transaction_index import AbortedTxn, TransactionIndex
from kafkapy.storage.segment import DELETED_SUFFIX, LogSegment, segment_file_name

from kafkapy.storage.shared import FIELD

batch = load("batch")
_F_GENERATION = FIELD["generation"]
_F_ACTIVE_BASE_OFFSET = FIELD["active_base_offset"]
_F_ACTIVE_SIZE = FIELD["active_size"]
_F_UNFLUSHED_MESSAGES = FIELD["unflushed_messages"]
_F_LAST_FLUSH_MS = FIELD["last_flush_ms"]
_F_LEADER_EPOCH = FIELD["leader_epoch"]
_F_FIRST_BATCH_TIMESTAMP = FIELD["first_batch_timestamp"]
_F_LOG_START_OFFSET = FIELD["log_start_offset"]
_F_TOPIC_ID_HIGH = FIELD["topic_id_high"]
_F_TOPIC_ID_LOW = FIELD["topic_id_low"]
assert _F_TOPIC_ID_LOW == _F_TOPIC_ID_HIGH + 1
# An append writes log_end_offset .. first_batch_timestamp in one store.
assert FIELD["high_watermark"] == 1 and _F_ACTIVE_BASE_OFFSET == 2 and _F_ACTIVE_SIZE == 3
assert _F_UNFLUSHED_MESSAGES == 9 and _F_FIRST_BATCH_TIMESTAMP == 10
_INT32_MAX = 2**31 - 1
_CONTROL = 0x20  # v2 batch attributes: control batch (a transaction marker)

logger = logging.getLogger("kafkapy.storage")

UNSUPPORTED_COMPRESSION_TYPE = 76

# ListOffsets special timestamps (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

SNAPSHOT_SUFFIX = ".snapshot"

# ``leader_epoch``: the epoch a leader's append ran at (-1 for a follower's),
# so acks=all can tell a leadership that went away and came back between the
# append and its look at the high watermark from one that never moved.
AppendResult = namedtuple(
    "AppendResult",
    ("first_offset", "last_offset", "log_append_time_ms", "log_start_offset", "record_count", "duplicate",
     "leader_epoch"),
)
_new_tuple = tuple.__new__


def _default_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _append_settings(config: LogConfig) -> tuple:
    """What ``append_as_leader`` needs from ``config`` (~0.5 us to derive,
    so once per config, not per append): (log_append_time, max batch size or
    -1, how far a timestamp may lie before and after the broker's clock
    (-1: any), target codec or None, the least segment.ms minus jitter)."""
    log_append_time = config.log_append_time
    difference = config.message_timestamp_difference_max_ms
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    # Kafka's LogConfig: a side left at LONG_MAX takes difference.max.ms.
    before = difference if before >= LONG_MAX else before
    after = difference if after >= LONG_MAX else after
    return (
        log_append_time,
        config.max_message_bytes if config.max_message_bytes >= 0 else -1,
        -1 if log_append_time or before >= LONG_MAX else before,
        -1 if log_append_time or after >= LONG_MAX else after,
        recompress.target_codec(config.compression_type),
        # The jitter is below min(segment.jitter.ms, segment.ms): no segment
        # rolls by time before waiting longer than this (tested first in an
        # append, without a call).
        max(0, config.max_segment_ms - min(max(config.segment_jitter_ms, 0), config.segment_ms)),
    )


def _topic_id_of(slot: tuple) -> bytes | None:
    """The partition.metadata topic id a slot records (see Log._check_topic_id), or None."""
    high, low = slot[_F_TOPIC_ID_HIGH], slot[_F_TOPIC_ID_LOW]
    if high == 0 and low == 0:
        return None
    return high.to_bytes(8, "big", signed=True) + low.to_bytes(8, "big", signed=True)


class Log:
    """One partition's log.  Build it with ``Log.open``.

    The log reports its log end offset; it never decides the high watermark.
    Replication (``kafkapy.replication.Partition``) writes it, from the log
    end offsets of the in-sync replicas. The log only keeps the invariant
    log_start_offset <= high_watermark <= log_end_offset when it is loaded,
    truncated or its start moves, and ``update_high_watermark`` is the
    setter replication and recovery call.
    """

    # The last config given to any Log of this process and its
    # _append_settings: a topic's partitions share one LogConfig, so a
    # worker's first uses of 10,000 partitions derive them once. Replaced
    # whole (one tuple store), so threads never see a mismatched pair.
    _last_settings: tuple = (None, None)
    # The LogManager's LogDirFailureChannel (set on the logs it opens; None:
    # a Log opened on its own, e.g. by a tool): ``io_error`` reports to it.
    failure_channel = None

    def __init__(self, dir_path, topic, partition, config, state, clock_ms, fsync, producer_state_factory):
        self.dir = dir_path
        self.topic = topic
        self.partition = partition
        self.state = state
        self._clock_ms = clock_ms
        self._fsync = fsync
        # The leader-epoch-checkpoint and this process's copy of it (Kafka's leaderEpochCache).
        self.leader_epoch_cache = LeaderEpochFileCache(dir_path, state, fsync)
        # This process's segments of the directory (Kafka's localLog).
        self.local = local = LocalLog(dir_path, topic, partition, config, state, clock_ms, fsync,
                                      (self.leader_epoch_cache,))
        self.config = config
        # Bound methods of ``local`` kept as attributes: the hot paths call
        # them without a delegating frame of their own.
        self._sync = local.sync
        self._read_headers_from = local._read_headers_from
        self._psm_factory = producer_state_factory
        # This process's idempotent-producer map: a cache of the log that
        # catch_up refreshes under the lock (it notices truncations itself).
        self._psm = None
        self.topic_id: bytes | None = None
        # The shared-table slot index of ``state`` (set by LogManager; None for a local state).
        self.state_slot = getattr(state, "index", None)
        self._pid = os.getpid()

    # ------------------------------------------------------------------ config

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """Take a (new) config and derive what every append needs from it.

        Computed per append these lookups were ~0.8 us of a ~13 us append of
        one small batch; LogConfig is frozen, so a change of config always
        comes through here.
        """
        self._config = config
        self.local.config = config
        last_config, settings = Log._last_settings
        if last_config is not config:
            settings = _append_settings(config)
            Log._last_settings = (config, settings)
        (self._log_append_time, self._max_batch_size, self._timestamp_before, self._timestamp_after,
         self._codec, self._roll_after_min_ms) = settings
        # segment.ms minus this partition's jitter, for the active segment's base offset.
        self._roll_after = (None, 0)

    def _roll_after_ms(self, base_offset: int) -> int:
        """segment.ms (Kafka's maxSegmentMs) less the jitter of the segment at ``base_offset`` (Kafka's rollJitterMs)."""
        base, roll_ms = self._roll_after
        if base != base_offset:
            roll_ms = self._config.max_segment_ms - self._roll_jitter_ms(base_offset)
            self._roll_after = (base_offset, roll_ms)
        return roll_ms

    # ------------------------------------------------------------------ open

    @classmethod
    def open(cls, dir_path: str, topic: str, partition: int, config: LogConfig, state, topic_id: bytes | None = None,
             clock_ms=_default_clock_ms, *, had_clean_shutdown: bool = False, recovery_point: int | None = None,
             log_start_offset: int | None = None, high_watermark: int | None = None, fsync=os.fsync,
             producer_state_factory=None, sync_metadata: bool = True) -> "Log":
        """Open the partition directory ``dir_path`` (created if missing).

        Takes the partition lock itself.  If ``state.generation`` is 0 the
        slot is fresh: the log is loaded from disk (recovering every segment
        from ``recovery_point`` unless ``had_clean_shutdown``) and the slot is
        filled in.  Otherwise another process already did that, and this
        object just maps the segments the slot describes (only the active one
        when the slot's ``segment_count`` is 1).  ``topic_id`` is checked
        against partition.metadata (written if missing; InconsistentTopicId
        if it differs), unless the slot records that id as the file's
        already.

        ``sync_metadata`` False: a new ``partition.metadata`` is written
        without its fsyncs; the caller makes it durable (LogManager.create_logs
        does one syncfs for a whole topic).
        """
        if producer_state_factory is None:
            producer_state_factory = ProducerStateManager
        log = cls(dir_path, topic, partition, config, state, clock_ms, fsync, producer_state_factory)
        with state.lock():
            slot = state.snapshot()
            if slot[_F_GENERATION] <= 0:
                os.makedirs(dir_path, exist_ok=True)
                log._check_topic_id(topic_id, sync_metadata)
                LogLoader(log, had_clean_shutdown, recovery_point or 0, log_start_offset, high_watermark).load()
            else:
                # Reading partition.metadata was ~20 % of a worker's first
                # use of a partition; the slot says what it holds.
                known = _topic_id_of(slot)
                if known is not None and (topic_id is None or topic_id == known):
                    log.topic_id = known
                    log.local._reload(slot)
                else:
                    log._check_topic_id(topic_id)   # may record the id in the slot
                    log._sync()
        return log

    def topic_uuid(self) -> "uuid.UUID | None":
        """The topic id from partition.metadata as a uuid.UUID (None if unknown)."""
        return uuid.UUID(bytes=self.topic_id) if self.topic_id is not None else None

    def owned_here(self) -> bool:
        """False in a child forked after this object was opened (it must open its own)."""
        return self._pid == os.getpid()

    def lock(self, timeout_s: float | None = None):
        return self.state.lock() if timeout_s is None else self.state.lock(timeout_s)

    def _check_topic_id(self, topic_id: bytes | None, sync_metadata: bool = True) -> None:
        """Read partition.metadata (write it if missing and ``topic_id`` is
        given); record the id it holds in the slot (``_topic_id_of``)."""
        on_disk = checkpoints.read_partition_metadata(self.dir)
        self.topic_id = on_disk if on_disk is not None else topic_id
        if topic_id is not None:
            if on_disk is None:
                checkpoints.write_partition_metadata(self.dir, topic_id,
                                                     fsync=sync_metadata and self._fsync is os.fsync)
            elif on_disk != topic_id:
                raise InconsistentTopicId(
                    f"{self.dir}: partition.metadata has topic id {checkpoints.topic_id_to_str(on_disk)}, "
                    f"expected {checkpoints.topic_id_to_str(topic_id)}")
        if self.topic_id is not None and len(self.topic_id) == 16:
            self.state.store(_F_TOPIC_ID_HIGH, (int.from_bytes(self.topic_id[:8], "big", signed=True),
                                                int.from_bytes(self.topic_id[8:], "big", signed=True)))

    # ------------------------------------------------------------------ properties

    # The slot's fields, read through attrgetter (C) rather than a Python getter.
    log_end_offset = property(attrgetter("state.log_end_offset"))
    high_watermark = property(attrgetter("state.high_watermark"))
    log_start_offset = property(attrgetter("state.log_start_offset"))
    recovery_point = property(attrgetter("state.recovery_point"))

    # What the LocalLog keeps, under the names the broker uses.
    active_segment = property(attrgetter("local.active_segment"))
    pending_deletions = property(attrgetter("local.pending_deletions"))
    closed = property(attrgetter("local.closed"))

    def segments(self) -> list[LogSegment]:
        """The current segments, oldest first (call under the lock; do not keep them)."""
        return self.local.segments()

    def size_in_bytes(self) -> int:
        return self.local.size_in_bytes()

    def legacy_offsets_before(self, timestamp: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0 (Kafka's UnifiedLog.legacyFetchOffsetsBefore; call
        under the lock): segment base offsets (raised to the log start offset)
        paired with the segment file's modification time, plus the log end
        offset at the clock's now when the active segment holds data; from the
        newest entry (LATEST, -1), the oldest (EARLIEST, -2) or the newest
        modified at or before ``timestamp``, up to ``max_num_offsets`` offsets
        going back, largest first."""
        segments = self.segments()
        log_start_offset = self.state.log_start_offset
        entries = [(max(s.base_offset, log_start_offset), os.stat(s.path).st_mtime_ns // 1_000_000)
                   for s in segments]
        if segments[-1].size > 0:
            entries.append((self.state.log_end_offset, self._clock_ms()))
        if timestamp == LATEST_TIMESTAMP:
            start = len(entries) - 1
        elif timestamp == EARLIEST_TIMESTAMP:
            start = 0
        else:
            start = len(entries) - 1
            while start >= 0 and entries[start][1] > timestamp:
                start -= 1
        count = max(0, min(max_num_offsets, start + 1))
        return sorted((entries[start - j][0] for j in range(count)), reverse=True)

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log_start_offset, log_end_offset]; returns it."""
        state = self.state
        hw = min(max(offset, state.log_start_offset), state.log_end_offset)
        state.high_watermark = hw
        return hw

    # ------------------------------------------------------------------ append

    def append_as_leader(self, records, leader_epoch: int, high_watermark_limit: int = -1,
                         verification=None) -> AppendResult:
        """Validate, assign offsets to and append a produce request's batches.

        ``records`` is a writable memoryview (offsets, leader epoch and, with
        LogAppendTime, timestamps are patched in place).  Raises RecordError
        with Kafka's error code; then nothing was written.

        The high watermark is replication's (kafkapy.replication.Partition):
        it passes ``high_watermark_limit``, the smallest log end offset of the
        other in-sync replicas (``LONG_MAX`` when the ISR is this replica
        alone), and the high watermark becomes min(new log end offset, limit)
        if that is higher, in the same slot store as the append (a second
        store after it was ~0.5 us, 6 % of an in-process append of one small
        batch); the default -1 leaves it as it is.

        The slot is read once (``_sync``'s snapshot) and written back with one
        store (log end offset, high watermark, the active segment's counters,
        unflushed messages, first batch timestamp: adjacent in
        ``PartitionState.FIELDS``): per-field access was ~2.5 us of a ~12 us
        append of one small batch (Kafka's append holds these in fields of
        one object; ours live in the shared table so every worker sees them).

        ``verification`` (a client's Produce with
        transaction.partition.verification.enable): the token its partition
        verification started with, or ``NOT_VERIFIED``; a transactional batch
        of a producer with no transaction open here needs the current one
        (``ProducerStateManager.check_verified``). None: not checked (the
        coordinators' own appends, the setting off).
        """
        slot = self._sync()
        if len(records) == 0:
            return AppendResult(-1, -1, -1, slot[_F_LOG_START_OFFSET], 0, False, leader_epoch)
        now_ms = self._clock_ms()
        try:
            headers, record_count, offset_count, max_timestamp = batch.check_append(
                records, self._max_batch_size, now_ms, self._timestamp_before,
                self._timestamp_after)
            codec = self._codec
            if codec is not None and recompress.needs_recompression(headers, codec):
                records = self._recompress(records, headers, codec)
                headers, record_count, offset_count, max_timestamp = batch.check_append(
                    records, self._max_batch_size, now_ms, self._timestamp_before,
                    self._timestamp_after)
        except AppendCheckError as e:
            raise RecordError(e.error_code, str(e)) from None
        config = self._config
        size = len(records)
        if size > config.segment_bytes:
            raise RecordError(RECORD_LIST_TOO_LARGE,
                              f"{size} bytes do not fit in a segment of {config.segment_bytes} bytes")
        if self._log_append_time:
            log_append_time_ms = max_timestamp = now_ms
        else:
            log_append_time_ms = -1

        psm = None
        if headers[0].producer_id >= 0:
            if len(headers) != 1:
                # Kafka accepts exactly one batch per partition from v3 producers.
                raise RecordError(INVALID_RECORD, "an idempotent produce must carry exactly one batch")
            psm = self._producer_state()
            duplicate = self._psm_check(psm, headers[0])
            if duplicate is not None:
                first, last, timestamp = duplicate
                return AppendResult(first, last, timestamp if log_append_time_ms >= 0 else -1,
                                    slot[_F_LOG_START_OFFSET], headers[0].records_count, True, leader_epoch)
            if verification is not None:
                self._check_verified(psm, headers[0], verification)

        first_offset = slot[0]
        next_offset = first_offset + offset_count
        epochs = ((leader_epoch, first_offset),) if leader_epoch >= 0 and slot[_F_LEADER_EPOCH] < leader_epoch \
            else ()
        self._write_batches(records, headers, slot, now_ms, first_offset, next_offset, record_count,
                            max_timestamp, log_append_time_ms,
                            max(slot[1], min(next_offset, high_watermark_limit)), leader_epoch, epochs)
        if psm is not None:
            # The batch's place in the active segment (just written at its
            # end), remembered for the next catch_up (see ProducerStateManager).
            h = headers[0]
            psm.update(batch.read_header(records, h.position), first_offset, next_offset - 1, max_timestamp,
                       self.local._segments[-1].size - size + h.position)
        # tuple.__new__ skips the namedtuple's Python-level __new__ (~0.15 us).
        return _new_tuple(AppendResult, (first_offset, next_offset - 1, log_append_time_ms,
                                         slot[_F_LOG_START_OFFSET], record_count, False, leader_epoch))

    def append_as_follower(self, records, high_watermark: int | None = None) -> AppendResult:
        """Append batches fetched from the leader, as they are (Kafka's
        appendAsFollower): offsets, leader epochs and timestamps were assigned
        by the leader and are kept. CRCs are verified; the leader's limits
        (batch size, timestamps, one producer per request) are not applied,
        as Kafka does not apply them to replication. The first batch must
        start at the log end offset (Kafka's UnexpectedAppendOffsetException;
        a gap after it, left by compaction on the leader, is allowed) and
        offsets must increase; otherwise OffsetsOutOfOrder and nothing is
        written. Each batch whose partition leader epoch is newer than the
        latest cached one starts that epoch at its base offset. Producer
        state is not touched here: it catches up from the log on its next
        use, as every worker's does. The high watermark is left to
        replication: ``high_watermark`` (the leader's) becomes it after the
        append, clamped as ``update_high_watermark`` clamps it, in the
        append's own slot store. Raises RecordError on a corrupt batch."""
        slot = self._sync()
        if len(records) == 0:
            if high_watermark is not None:
                self.update_high_watermark(high_watermark)
            return AppendResult(-1, -1, -1, slot[_F_LOG_START_OFFSET], 0, False, -1)
        headers, _end, error = batch.scan_batches(records, 0, -1, True, -1)
        if error:
            raise RecordError(error, f"invalid record batch from the leader (error {error})")
        log_end_offset = slot[0]
        first_offset = headers[0].base_offset
        if first_offset < log_end_offset:
            raise OffsetsOutOfOrder(f"{self.dir}: the leader's batch starts at {first_offset}, below the "
                                    f"log end offset {log_end_offset}")
        record_count = 0
        max_timestamp = -1
        expected = first_offset
        epochs = []
        latest_epoch = slot[_F_LEADER_EPOCH]
        control = 0
        for h in headers:
            if h.base_offset < expected:
                raise OffsetsOutOfOrder(f"{self.dir}: batch at {h.base_offset} after one ending at "
                                        f"{expected - 1}")
            expected = h.base_offset + h.last_offset_delta + 1
            record_count += h.records_count
            control |= h.attributes & _CONTROL
            max_timestamp = max(max_timestamp, h.max_timestamp)
            if h.partition_leader_epoch > latest_epoch:
                latest_epoch = h.partition_leader_epoch
                epochs.append((latest_epoch, h.base_offset))
        if len(records) > self._config.segment_bytes:
            raise RecordError(RECORD_LIST_TOO_LARGE,
                              f"{len(records)} bytes do not fit in a segment of "
                              f"{self._config.segment_bytes} bytes")
        psm = None
        if control:
            # Transaction markers: the aborted-transaction index is written by
            # whoever appends the marker, from producer state caught up to it.
            psm = self._producer_state()
            psm.catch_up(log_end_offset, self._read_headers_from)
        if high_watermark is None:
            high_watermark = slot[1]
        else:  # update_high_watermark's clamp, to the new log end offset
            high_watermark = min(max(high_watermark, slot[_F_LOG_START_OFFSET]), expected)
        self._write_batches(records, headers, slot, self._clock_ms(), first_offset, expected, record_count,
                            max_timestamp, -1, high_watermark, None, epochs)
        if psm is not None:
            psm.catch_up(self.state.log_end_offset, self._read_headers_from, self._index_completed_txn)
        return _new_tuple(AppendResult, (first_offset, expected - 1, -1, slot[_F_LOG_START_OFFSET],
                                          record_count, False, -1))

    def append_control_batch(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                             leader_epoch: int, high_watermark_limit: int = -1) -> AppendResult:
        """Append a transaction's COMMIT or ABORT marker (the transaction
        coordinator's WriteTxnMarkers, origin coordinator; never from a
        produce request). Kafka's checks first (RecordError with
        INVALID_PRODUCER_EPOCH for an older producer epoch,
        TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch); an
        aborted transaction with data here gets its ``.txnindex`` entry.
        ``leader_epoch`` and ``high_watermark_limit`` as in ``append_as_leader``."""
        slot = self._sync()
        first_offset = slot[0]
        psm = self._producer_state()
        psm.catch_up(first_offset, self._read_headers_from)
        try:
            psm.check_end_txn_marker(producer_id, producer_epoch, coordinator_epoch)
        except ProducerStateError as e:
            raise RecordError(e.error_code, str(e)) from None
        now_ms = self._clock_ms()
        records = memoryview(bytearray(build_end_txn_marker_batch(
            producer_id, producer_epoch, coordinator_epoch, commit, now_ms)))
        headers, _end, _error = batch.scan_batches(records, 0, -1, False, -1)
        log_append_time_ms = now_ms if self._log_append_time else -1
        epochs = ((leader_epoch, first_offset),) if leader_epoch >= 0 and slot[_F_LEADER_EPOCH] < leader_epoch \
            else ()
        self._write_batches(records, headers, slot, now_ms, first_offset, first_offset + 1, 1, now_ms,
                            log_append_time_ms, max(slot[1], min(first_offset + 1, high_watermark_limit)),
                            leader_epoch, epochs)
        # The marker's timestamp is now_ms whether or not the topic uses LogAppendTime.
        psm.update_marker(headers[0], first_offset, EndTxnMarker(COMMIT if commit else ABORT, coordinator_epoch),
                          now_ms, self._read_headers_from, self._index_completed_txn,
                          self.local._segments[-1].size - len(records))
        return _new_tuple(AppendResult, (first_offset, first_offset, log_append_time_ms,
                                          slot[_F_LOG_START_OFFSET], 1, False, leader_epoch))

    def next_sequence(self, producer_id: int, producer_epoch: int) -> int:
        """The base sequence the producer's next batch here must carry (for
        the one writer that appends on a producer's behalf: the group
        coordinator's TxnOffsetCommit batches): 0 in a new epoch."""
        slot = self._sync()
        psm = self._producer_state()
        psm.catch_up(slot[0], self._read_headers_from)
        entry = psm.producers.get(producer_id)
        if entry is None or entry.producer_epoch != producer_epoch:
            return 0
        return increment_sequence(entry.last_seq, 1)

    def _index_completed_txn(self, completed, last_stable_offset: int) -> None:
        """``ProducerStateManager.catch_up``'s ``on_completed`` for whoever
        appended the marker: an aborted transaction goes into the ``.txnindex``
        of the segment holding its marker."""
        if completed.is_aborted is None:
            logger.warning("%s: the marker at offset %d could not be read; its transaction is not indexed",
                           self.dir, completed.last_offset)
        if not completed.is_aborted:
            return
        segment = self.local._segment_holding(completed.last_offset)
        TransactionIndex(self.dir, segment.base_offset).append(AbortedTxn(
            completed.producer_id, completed.first_offset, completed.last_offset, last_stable_offset))

    def _read_marker(self, header):
        """The EndTxnMarker of the control batch ``header`` (from
        ``_read_headers_from``: ``position`` is in the segment holding its
        base offset); None if it cannot be read as one."""
        segment = self.local._segment_holding(header.base_offset)
        data = os.pread(segment.fd, header.batch_length + 12, header.position)
        try:
            return parse_end_txn_marker(data)
        except CorruptRecordError as e:
            logger.warning("%s: control batch at offset %d is not a transaction marker: %s", self.dir,
                           header.base_offset, e)
            return None

    # ------------------------------------------------------------------ transactions: LSO, aborted txns

    def last_stable_offset(self) -> int:
        """Kafka's lastStableOffset: the first offset of the earliest
        transaction still open (or completed with its marker at or above the
        high watermark) if it is below the high watermark, else the high
        watermark. What read_committed fetches and ListOffsets read up to."""
        slot = self._sync()
        psm = self._producer_state()
        psm.catch_up(slot[0], self._read_headers_from)
        high_watermark = slot[1]
        first_unstable = psm.first_unstable_offset(high_watermark)
        if first_unstable is None or first_unstable >= high_watermark:
            return high_watermark
        # An open transaction whose start DeleteRecords or retention removed
        # is unstable from the log start on (Kafka's updateFirstUnstableOffset).
        return max(first_unstable, slot[_F_LOG_START_OFFSET])

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset) (``LocalLog``'s)."""
        return self.local.collect_aborted_transactions(start_offset, upper_bound_offset)

    def fetch_upper_bound_offset(self, fetch_data) -> int:
        """Where ``fetch_data``'s aborted transactions end (``LocalLog``'s)."""
        return self.local.fetch_upper_bound_offset(fetch_data)

    def aborted_transactions(self, fetch_offset: int, fetch_data) -> list[AbortedTxn]:
        """What a read_committed Fetch answers beside ``fetch_data`` (``read``
        at ``fetch_offset``, up to the last stable offset)."""
        if not fetch_data.regions:
            return []
        local = self.local
        return local.collect_aborted_transactions(fetch_offset, local.fetch_upper_bound_offset(fetch_data))

    def _write_batches(self, records, headers, slot, now_ms, first_offset, next_offset, record_count,
                       max_timestamp, log_append_time_ms, high_watermark, assign_epoch, epochs) -> None:
        """What leader and follower appends share: roll if the segment must,
        (leader: ``assign_epoch`` not None) offsets and epoch written in
        place, the segment write, one slot store, new leader epochs
        (``epochs``: (epoch, start offset) in order), the flush rules."""
        config = self._config
        size = len(records)
        first_batch_timestamp = slot[_F_FIRST_BATCH_TIMESTAMP]
        local = self.local
        active = local._segments[-1]
        active_size = active.size
        offset_index, time_index = active.offset_index, active.time_index
        # Kafka's LogSegment.shouldRoll: size, time (timeWaitedForRoll: the
        # incoming batch's timestamp minus the segment's first batch
        # timestamp, else wall time since creation), a full index, or an
        # offset beyond the segment's relative-offset range. Tested inline
        # (attributes, no properties or calls): ~1 us per append before.
        waited_ms = (max_timestamp - first_batch_timestamp if first_batch_timestamp >= 0
                     else now_ms - local._created_ms)
        if (active_size > config.segment_bytes - size
                or (active_size and waited_ms > self._roll_after_min_ms
                    and waited_ms > self._roll_after_ms(active.base_offset))
                or offset_index.entries >= offset_index.full_at
                or time_index.entries >= time_index.full_at
                or not 0 <= next_offset - 1 - active.base_offset <= _INT32_MAX):
            # A relative-offset overflow in an empty segment cannot be fixed by rolling.
            if active_size:
                active = self._roll(first_offset)
                active_size = 0
        if active_size == 0:
            first_batch_timestamp = log_append_time_ms if log_append_time_ms >= 0 else headers[0].max_timestamp
        if assign_epoch is not None:
            batch.assign_offsets(records, headers, first_offset, assign_epoch, log_append_time_ms)
        active.append(records, first_offset, headers, log_append_time_ms)
        unflushed_messages = slot[_F_UNFLUSHED_MESSAGES] + record_count
        self.state.store(0, (
            next_offset, high_watermark,
            *_active_fields(active), unflushed_messages, first_batch_timestamp))
        for epoch, start_offset in epochs:
            self.leader_epoch_cache.assign(epoch, start_offset)
        if unflushed_messages >= config.flush_messages or now_ms - slot[_F_LAST_FLUSH_MS] >= config.flush_ms:
            local.flush()
        probes.log.appended(self.topic, size, record_count)

    def _recompress(self, records, headers, codec):
        """compression.type is a codec the batches are not in: rewrite them (see storage.recompress).
        The caller validates the result again (``check_append``)."""
        from kafkapy._core.records_py import CorruptRecordError, UnsupportedCompressionError

        try:
            level_key = recompress.LEVEL_KEYS.get(codec)
            level = getattr(self._config, level_key) if level_key else None
            return memoryview(recompress.recompress(records, headers, codec, level))
        except CorruptRecordError as e:
            raise RecordError(CORRUPT_MESSAGE, f"cannot decode records to recompress them: {e}") from None
        except UnsupportedCompressionError as e:
            raise RecordError(UNSUPPORTED_COMPRESSION_TYPE, str(e)) from None

    def _roll_jitter_ms(self, base_offset: int) -> int:
        # Derived from the partition, not drawn at random, so that every
        # process agrees on when the active segment must roll.
        jitter = self.config.segment_jitter_ms
        if jitter <= 0:
            return 0
        return (hash((self.topic, self.partition, base_offset)) & 0x7FFFFFFF) % min(jitter, self.config.segment_ms)

    # ------------------------------------------------------------------ roll

    def roll(self) -> LogSegment:
        """Start a new active segment at log_end_offset (no-op if the active one is empty there)."""
        self._sync()
        return self._roll(self.state.log_end_offset)

    def _roll(self, new_offset: int) -> LogSegment:
        return self.local.roll(new_offset, self._snapshot_producer_state)

    def _snapshot_producer_state(self, offset: int) -> None:
        """Before a roll to ``offset``: producer state caught up and snapshotted there."""
        psm = self._producer_state()
        psm.catch_up(self.state.log_end_offset, self._read_headers_from)
        psm.take_snapshot(offset)

    # ------------------------------------------------------------------ read

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> FetchData:
        """Kafka's UnifiedLog.read: the file region to send for a fetch at ``fetch_offset``.

        ``max_offset`` (the high watermark for consumers, log_end_offset for
        followers; None means log_end_offset): batches whose last offset is
        >= max_offset are not returned.  The region starts at the batch that
        contains ``fetch_offset`` and stays inside one segment.
        """
        self._sync()
        state = self.state
        log_end_offset = state.log_end_offset
        if fetch_offset < state.log_start_offset or fetch_offset > log_end_offset:
            raise OffsetOutOfRange(
                f"offset {fetch_offset} outside [{state.log_start_offset}, {log_end_offset}] of {self.dir}")
        if max_offset is None or max_offset > log_end_offset:
            max_offset = log_end_offset
        if fetch_offset >= max_offset:
            return FetchData([], 0)
        return self.local.read(fetch_offset, max_bytes, max_offset, log_end_offset, min_one_batch)
    def read_batch_headers(self, start_offset: int, end_offset: int | None = None):
        """Headers of the batches overlapping [start_offset, end_offset); for tools and tests."""
        return self.local.read_batch_headers(start_offset, end_offset)

    # ------------------------------------------------------------------ timestamps

    def offset_for_timestamp(self, timestamp: int):
        """Kafka's fetchOffsetByTimestamp: (offset, timestamp) or None.

        -2 (earliest): (log_start_offset, -1); -1 (latest): (log_end_offset, -1);
        -3 (max timestamp): ``max_timestamp_offset()``.  Otherwise the first
        segment whose largest timestamp >= ``timestamp``, then the first batch
        in it whose max timestamp >= ``timestamp``: its base offset (records
        are opaque here, so never a later offset than Kafka's record-level
        answer) and the batch's max timestamp.
        """
        self._sync()
        state = self.state
        if timestamp == EARLIEST_TIMESTAMP:
            return state.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return state.log_end_offset, -1
        if timestamp == MAX_TIMESTAMP:
            return self.max_timestamp_offset()
        for segment in self.local._segments:
            if segment.largest_timestamp() >= timestamp and segment.max_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, state.log_start_offset)
                if found is not None:
                    return self._record_level(found, lambda recs: next(
                        ((o, t) for o, t in recs if t >= timestamp and o >= found[0]), None))
        return None

    def _record_level(self, batch_answer, pick):
        """Refine a batch-level (offset, timestamp) answer to the record Kafka would name.

        Kafka's searchForTimestamp and offsetOfMaxTimestamp look at records,
        decompressing if needed; this reads the one batch holding
        ``batch_answer``'s offset and applies ``pick`` to its
        ``[(offset, timestamp)]``. If the batch cannot be decoded (a codec
        the machine lacks), the batch-level answer stands.
        """
        from kafkapy._core.records_py import decode_records

        try:
            data = self.read(batch_answer[0], 1, self.state.log_end_offset, True)
            if not data.regions:
                return batch_answer
            region = data.regions[0]
            fd = os.open(region.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                raw = os.pread(fd, region.length, region.position)
            finally:
                os.close(fd)
            records = [(r[0], r[1]) for r in decode_records(raw)]
        except Exception:  # noqa: BLE001 - an undecodable batch keeps the batch-level answer
            return batch_answer
        return pick(records) or batch_answer

    def max_timestamp_offset(self):
        """(offset, timestamp) of the batch with the highest timestamp (its last offset), or (-1, -1)."""
        self._sync()
        best_ts, best_offset = -1, -1
        start = self.state.log_start_offset
        for segment in self.local._segments:
            segment.load_max_timestamp()
            if segment.max_timestamp > best_ts and segment.offset_of_max_timestamp >= start:
                best_ts, best_offset = segment.max_timestamp, segment.offset_of_max_timestamp
        if best_offset < 0:
            return best_offset, best_ts
        # The segment tracks the batch; KAFKA-16310: answer the first record
        # carrying the maximum timestamp.
        return self._record_level((best_offset, best_ts), lambda recs: next(
            ((o, t) for o, t in recs if t == best_ts), None))

    # ------------------------------------------------------------------ retention

    def delete_retention_segments(self, now_ms: int | None = None) -> int:
        """Kafka's deleteOldSegments for cleanup.policy=delete; returns how many segments went.

        Three passes, Kafka's order: segments wholly below log_start_offset,
        then retention.bytes, then retention.ms (by each segment's largest
        timestamp).  A segment is never deleted if it reaches past the high
        watermark (so log_start_offset never exceeds it), and an empty active
        segment is kept; if every segment must go, the log rolls first so an
        empty active segment remains.  log_start_offset moves up to the new
        first segment.
        """
        self._sync()
        if now_ms is None:
            now_ms = self._clock_ms()
        config = self.config
        deleted = self._delete_segments_where(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.state.log_start_offset)
        if "delete" not in config.cleanup_policy:
            return deleted
        if config.retention_bytes >= 0:
            diff = sum(s.size for s in self.local._segments) - config.retention_bytes
            if diff > 0:
                remaining = [diff]

                def over_size(seg, nxt):
                    if remaining[0] - seg.size >= 0:
                        remaining[0] -= seg.size
                        return True
                    return False

                deleted += self._delete_segments_where(over_size)
        if config.retention_ms >= 0:
            deleted += self._delete_segments_where(
                lambda seg, nxt: now_ms - seg.largest_timestamp() > config.retention_ms)
        return deleted

    def _delete_segments_where(self, predicate) -> int:
        state = self.state
        segments = self.local._segments
        deletable = []
        for i, segment in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper_bound = nxt.base_offset if nxt is not None else state.log_end_offset
            if upper_bound > state.high_watermark:
                break
            if nxt is None and segment.size == 0:
                break
            if not predicate(segment, nxt):
                break
            deletable.append(segment)
        if not deletable:
            return 0
        if len(deletable) == len(segments):
            self._roll(state.log_end_offset)
        now_ms = self._clock_ms()
        self.local.remove_and_delete_segments(deletable, now_ms, "retention")
        for segment in deletable:
            self._rename_snapshot_deleted(segment.base_offset, now_ms)
        new_start = self.local._segments[0].base_offset
        if new_start > state.log_start_offset:
            self._increment_log_start_offset(new_start)
        return len(deletable)

    def _rename_snapshot_deleted(self, base_offset: int, now_ms: int) -> None:
        path = os.path.join(self.dir, segment_file_name(base_offset, SNAPSHOT_SUFFIX))
        try:
            os.rename(path, path + DELETED_SUFFIX)
        except FileNotFoundError:
            return
        self.local.pending_deletions.append((path + DELETED_SUFFIX, now_ms))

    def _increment_log_start_offset(self, new_start: int) -> None:
        state = self.state
        state.log_start_offset = new_start
        if state.high_watermark < new_start:
            state.high_watermark = new_start
        if state.recovery_point < new_start:
            state.recovery_point = new_start
        self.leader_epoch_cache.truncate(new_start, state.log_end_offset)

    def active_producers(self) -> list:
        """DescribeProducers: this partition's producer-state entries, caught up to the log end."""
        self._sync()
        psm = self._producer_state()
        psm.catch_up(self.state.log_end_offset, self._read_headers_from)
        return sorted(psm.producers.values(), key=lambda e: e.producer_id)

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: raise log_start_offset to ``offset`` (<= high watermark); returns the new start.

        Segments wholly below it go at the next retention pass, as in Kafka.
        """
        self._sync()
        state = self.state
        if offset > state.high_watermark or offset < 0:
            raise OffsetOutOfRange(
                f"cannot delete records up to {offset}: high watermark is {state.high_watermark}")
        if offset > state.log_start_offset:
            self._increment_log_start_offset(offset)
        return state.log_start_offset

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch whose last offset >= ``offset`` (Kafka's truncateTo).

        Returns False if there was nothing to remove.  A mid-batch ``offset``
        removes that whole batch; log_end_offset becomes the end of what remains.
        """
        self._sync()
        state = self.state
        if offset < 0:
            raise ValueError("cannot truncate to a negative offset")
        if offset >= state.log_end_offset:
            # Kafka's truncateTo still truncates the leader-epoch cache at the
            # log end offset: an epoch this broker started as leader without
            # appending (its entry at the log end offset) must go, or the new
            # leader would answer the same diverging epoch for ever.
            self.leader_epoch_cache.invalidate()  # another process may have written it
            self.leader_epoch_cache.truncate(state.log_start_offset, state.log_end_offset)
            return False
        if offset < self.local._segments[0].base_offset or offset < state.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self._after_truncation(self.local.truncate_to(offset))
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at ``new_offset`` (Kafka's truncateFullyAndStartAt)."""
        self._sync()
        state = self.state
        self.local.truncate_fully_and_start_at(new_offset)
        state.log_start_offset = new_offset
        self.leader_epoch_cache.clear()
        self._after_truncation(new_offset)
        state.high_watermark = new_offset

    def _after_truncation(self, log_end_offset: int) -> None:
        """The offsets above the segments after LocalLog truncated them to ``log_end_offset``."""
        state = self.state
        # Kafka keeps logStartOffset = min(target, logStartOffset): the start never passes the end.
        state.log_start_offset = min(state.log_start_offset, log_end_offset)
        state.high_watermark = min(max(state.high_watermark, state.log_start_offset), log_end_offset)
        if "compact" in self.config.cleanup_policy:
            truncate_cleaner_checkpoint(os.path.dirname(self.dir), self.topic, self.partition,
                                        self.local._segments[-1].base_offset)
        self.leader_epoch_cache.truncate(state.log_start_offset, log_end_offset)
        self._producer_state().truncate(state.log_start_offset, log_end_offset)

    # ------------------------------------------------------------------ producer state

    def _producer_state(self):
        if self._psm is None:
            self._psm = self._new_psm()
            self._psm.load(self.state.log_end_offset, self._read_headers_from)
        return self._psm

    def _new_psm(self):
        psm = self._psm_factory(self.dir)
        psm.read_marker = self._read_marker
        return psm

    def transaction_verification_token(self, producer_id: int):
        """``ProducerStateManager.verification_token`` with the map caught up
        to the log end (the caller holds the slot lock)."""
        self._sync()
        psm = self._producer_state()
        psm.catch_up(self.state.log_end_offset, self._read_headers_from)
        return psm.verification_token(producer_id)

    def open_transaction_known(self, producer_id: int) -> bool:
        """Without the lock: this process's map is caught up and has
        ``producer_id``'s transaction open (a Produce's fast path past
        verification; the append checks again under the lock)."""
        psm = self._psm
        return psm is not None and producer_id in psm.ongoing_txns \
            and psm.applied_offset == self.state.log_end_offset

    @staticmethod
    def _check_verified(psm, header, token) -> None:
        try:
            psm.check_verified(header, token)
        except ProducerStateError as e:
            raise RecordError(e.error_code, str(e)) from None

    def _psm_check(self, psm, header):
        psm.catch_up(self.state.log_end_offset, self._read_headers_from)
        try:
            return psm.check(header)
        except ProducerStateError as e:
            raise RecordError(e.error_code, str(e)) from None

    # ------------------------------------------------------------------ leader epochs

    def become_leader(self, leader_epoch: int) -> None:
        """Kafka's Partition.makeLeader: ``leader_epoch`` starts at the log end
        offset, recorded in the leader-epoch checkpoint now rather than by the
        first append (which was a file write of ~30 us on the first produce to
        every new partition).  Not fsynced: the caller makes it durable (topic
        creation syncs the file system once)."""
        with self.state.lock():
            self._sync()
            self.leader_epoch_cache.assign(leader_epoch, self.state.log_end_offset)

    def leader_epoch_entries(self) -> list[tuple[int, int]]:
        self._sync()
        return self.leader_epoch_cache.epoch_entries()

    def latest_epoch(self) -> int:
        self._sync()
        return self.leader_epoch_cache.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch <= ``epoch``, its end offset), or (-1, -1)."""
        self._sync()
        return self.leader_epoch_cache.end_offset_for(epoch, self.state.log_end_offset)

    # ------------------------------------------------------------------ flush / close / delete

    def flush(self, up_to_offset: int | None = None, already_synced: bool = False) -> None:
        """fsync the segments up to ``up_to_offset`` (default log_end_offset),
        the leader-epoch checkpoint and the directory (``LocalLog.flush``)."""
        self.local.flush(up_to_offset, already_synced)

    def io_error(self, exc: OSError, what: str):
        """The KafkaStorageError for an OSError met while ``what``; the log's
        dir goes offline first (storage.log_dirs). A partition directory
        that is gone while its log dir is there was deleted meanwhile by
        another process (DeleteTopics, StopReplica): that is no dir failure,
        and the answer is UNKNOWN_TOPIC_OR_PARTITION."""
        what = f"{what} {self.topic}-{self.partition}"
        if isinstance(exc, FileNotFoundError) and not os.path.isdir(self.dir) \
                and os.path.isdir(os.path.dirname(self.dir)):
            return StorageError(f"{what}: the partition was deleted meanwhile ({exc})", UNKNOWN_TOPIC_OR_PARTITION)
        channel = self.failure_channel
        if channel is None:
            return KafkaStorageError(f"Error while {what} in {self.dir}: {exc}", os.path.dirname(self.dir))
        return channel.io_error(self.dir, exc, what)

    def release(self) -> None:
        """Drop this process's handles without touching the files (a worker letting go)."""
        if not self.local.closed:
            self.local.release()
            self._psm = None

    def close(self, durable: bool = True) -> None:
        """Kafka's close: producer snapshot at log_end_offset, final time-index entry, trimmed
        index files.  Other processes reload (generation bump) and re-extend the indexes.
        ``durable`` False: the snapshot is not fsynced (the caller syncs the filesystem).

        Takes the partition lock itself (it is re-entrant).  If the partition
        was deleted meanwhile (directory gone or holding another topic id),
        only this process's handles are dropped: the slot may already belong
        to another partition.
        """
        if self.closed:
            return
        with self.state.lock():
            try:
                if not self._still_ours():
                    return
                self._sync()
                state = self.state
                psm = self._producer_state()
                psm.catch_up(state.log_end_offset, self._read_headers_from)
                psm.take_snapshot(state.log_end_offset, durable and self._fsync is os.fsync)
                self.local.close()
            finally:
                self.release()

    def _still_ours(self) -> bool:
        if not os.path.isdir(self.dir):
            return False
        if self.topic_id is not None:
            try:
                if checkpoints.read_partition_metadata(self.dir) not in (None, self.topic_id):
                    return False
            except checkpoints.CheckpointError:
                return False
        return self.state.generation >= 1

    def delete(self) -> str:
        """Rename the directory to ``<topic>-<partition>.<uuid-hex>-delete`` (removed later); returns the new path."""
        self._psm = None
        return self.local.delete()

    def __repr__(self) -> str:
        return f"Log({self.dir!r})"
