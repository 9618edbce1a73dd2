"""Idempotent-producer state of one partition, kept the way Kafka keeps it.

For every producer id seen in the log the map holds the producer epoch and
the metadata of its last 5 batches (first/last sequence, first/last offset,
timestamp): enough to answer a retried batch with the offsets it got the first
time, and to reject sequence gaps and zombie epochs.  5 is Kafka's
``NUM_BATCHES_TO_RETAIN`` and the client's cap on in-flight requests per
connection with idempotence (``max.in.flight.requests.per.connection <= 5``),
so any batch a client can still be retrying is in the cache.

Ownership: one ``ProducerStateManager`` per ``Log`` object per process, never
shared; every method is called under the partition's lock (see
``kafkapy.storage.shared``).  Several handler workers keep their own map of
the same partition: the log is the single source of truth and each map is a
cache of it, brought up to date by ``catch_up`` reading the batch headers
appended since ``applied_offset``.

Snapshot files (``%020d.snapshot``, the offset being the ``applied_offset``
the map covers, exclusive) use Kafka's format version 1, big-endian::

    version            int16   1
    crc                uint32  CRC-32C of every byte after this field
    producer_entries   int32 count, then per producer:
        producer_id int64, epoch int16, last_sequence int32, last_offset int64,
        offset_delta int32, timestamp int64, coordinator_epoch int32,
        current_txn_first_offset int64 (-1: no open transaction)

As in Kafka, only each producer's *last* batch is written, so after a restart
a retry of one of the 4 older batches is answered OUT_OF_ORDER_SEQUENCE rather
than as a duplicate, unless ``catch_up`` re-reads those batches from the log.

Transactions (Kafka's ongoingTxns / unreplicatedTxns): a producer's first
transactional batch opens its transaction (``current_txn_first_offset``, in
the snapshot); its COMMIT/ABORT control batch closes it, which makes a
``CompletedTxn`` that stays "unreplicated" until the high watermark passes
its marker. The first unstable offset is the smallest first offset of the
open and the unreplicated transactions; ``Log`` derives the last stable
offset from it. The marker's coordinator epoch is in its record, not in the
batch header: ``read_marker`` (set by ``Log``) reads it when catching up.
Catching up with ``on_completed`` hands every completed transaction to the
caller with the last stable offset right after it: the appender of a marker
uses it to write the aborted-transaction index; other workers catching up
pass nothing, so an entry is written once.
"""

from __future__ import annotations

import collections
import os
import re
import struct

import crc32c

__all__ = [
    "BatchMetadata",
    "ProducerStateEntry",
    "ProducerStateError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "TransactionCoordinatorFencedError",
    "CompletedTxn",
    "CorruptSnapshotError",
    "ProducerStateManager",
    "increment_sequence",
    "decrement_sequence",
    "snapshot_file_name",
]

# Kafka's error codes for the checks made here.
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52

# RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH / NO_SEQUENCE / NO_TIMESTAMP
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
# check_verified's token for an append whose partition was not verified.
NOT_VERIFIED = ()

NUM_BATCHES_TO_RETAIN = 5
_INT32_MAX = 2**31 - 1

# v2 batch attributes bits
_TRANSACTIONAL = 0x10
_CONTROL = 0x20

PRODUCER_SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
_PREFIX = struct.Struct(">hI")  # version, crc
_CRC_COVERS_FROM = _PREFIX.size  # 6: everything after the crc field
_COUNT = struct.Struct(">i")
# producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp,
# coordinator_epoch, current_txn_first_offset: 46 bytes per producer.
_ENTRY = struct.Struct(">qhiqiqiq")


class ProducerStateError(Exception):
    """An incoming batch breaks the producer's epoch/sequence rules.

    ``error_code`` is the Kafka error code for the partition's response.
    """

    error_code = OUT_OF_ORDER_SEQUENCE_NUMBER

    def __init__(self, message: str = "", error_code: int | None = None):
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class OutOfOrderSequenceError(ProducerStateError):
    error_code = OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(ProducerStateError):
    error_code = INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(ProducerStateError):
    error_code = INVALID_TXN_STATE


class TransactionCoordinatorFencedError(ProducerStateError):
    error_code = TRANSACTION_COORDINATOR_FENCED


class CorruptSnapshotError(Exception):
    """A snapshot file failed its version, length or CRC check."""


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence numbers are int32 that wrap to 0 after 2147483647."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


def snapshot_file_name(offset: int) -> str:
    return "%020d%s" % (offset, SNAPSHOT_SUFFIX)


# One appended batch of a producer.  first/last_offset are absolute log
# offsets; timestamp is the batch's max timestamp (log append time if used).
BatchMetadata = collections.namedtuple(
    "BatchMetadata", ("first_seq", "last_seq", "first_offset", "last_offset", "timestamp"))

# A transaction ended by a marker at ``last_offset`` (Kafka's CompletedTxn).
# ``is_aborted`` is None when the marker's type was not read.
CompletedTxn = collections.namedtuple("CompletedTxn", ("producer_id", "first_offset", "last_offset", "is_aborted"))


class ProducerStateEntry:
    """One producer id: epoch, its last batches (oldest first), transaction state."""

    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "batches")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH,
                 coordinator_epoch: int = -1, last_timestamp: int = NO_TIMESTAMP,
                 current_txn_first_offset: int = -1, batches=(),
                 max_batches: int = NUM_BATCHES_TO_RETAIN):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        # maxlen drops the oldest batch when a 6th is appended.
        self.batches = collections.deque(batches, maxlen=max_batches)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        if not self.batches:
            return 0
        last = self.batches[-1]
        return last.last_offset - last.first_offset

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int):
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def _set_epoch(self, producer_epoch: int) -> None:
        # A new epoch starts a new sequence space: the old batches can no
        # longer be duplicates of anything.
        if producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch

    def __eq__(self, other):
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__ if k != "batches") \
            and list(self.batches) == list(other.batches)

    def __repr__(self):
        return (f"ProducerStateEntry(producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
                f"coordinator_epoch={self.coordinator_epoch}, last_timestamp={self.last_timestamp}, "
                f"current_txn_first_offset={self.current_txn_first_offset}, batches={list(self.batches)})")


def _batch_identity(header, first_offset: int, last_offset: int) -> tuple:
    # Fields that assign_offsets never rewrites (it patches baseOffset,
    # partitionLeaderEpoch, the timestamp type, maxTimestamp and the CRC), so
    # the identity taken from an incoming batch before its append equals the
    # one read back from the log afterwards.
    return (first_offset, last_offset, header.batch_length, header.base_timestamp,
            header.producer_id, header.producer_epoch, header.base_sequence, header.records_count)


class ProducerStateManager:
    """The producer-id map of one partition plus its snapshot files in ``log_dir``."""

    def __init__(self, log_dir: str, max_batches_per_producer: int = NUM_BATCHES_TO_RETAIN):
        self.log_dir = log_dir
        self.max_batches_per_producer = max_batches_per_producer
        self.producers: dict[int, ProducerStateEntry] = {}
        # Next log offset whose batch this map has not applied yet.
        self.applied_offset = 0
        # Identity of the batch that ends at applied_offset - 1 (None: unknown).
        # catch_up compares it with the log to notice that another worker
        # truncated the log and appended different batches at these offsets.
        self._last_applied = None
        # Where that batch starts in its segment's file (-1: unknown): a hint
        # for ``read_headers_from``, which then reads from there instead of
        # finding the batch through the offset index. In the steady state of
        # transactions (the coordinator appends a marker right after a
        # processor appended the data, and the processor its next batch right
        # after the marker) the index walk read ~19 headers of a 4 KiB index
        # interval to find the 1 batch before the 1 or 2 to apply. The
        # identity check below is what makes the hint safe: a batch read at a
        # wrong position is not the one applied last, and the map is rebuilt.
        self._last_applied_position = -1
        # producer id -> first offset of its open transaction.
        self.ongoing_txns: dict[int, int] = {}
        # Completed transactions whose marker the high watermark has not
        # passed yet: (first_offset, marker offset), in marker order.
        self.unreplicated_txns: list[tuple[int, int]] = []
        # header -> EndTxnMarker of a control batch (Log._read_marker); None:
        # markers are applied without their coordinator epoch and type.
        self.read_marker = None

    # --- validation and update on the produce path ------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def check(self, header):
        """Validate an incoming batch (``producer_id >= 0``) before it is appended.

        Returns ``None`` to append it, or ``(first_offset, last_offset,
        timestamp)`` of the identical batch already in the log (a retry: answer
        with those offsets and append nothing).  Raises ``ProducerStateError``
        with error 47 for a stale epoch, 45 for a sequence gap or a new epoch
        not starting at 0, 48 for a non-transactional batch inside an open
        transaction.  The map must be caught up to the log end first.
        """
        entry = self.producers.get(header.producer_id)
        if entry is None:
            # KIP-360: a producer whose state was removed with its data
            # (retention, DeleteRecords) or expired may continue with any
            # sequence instead of failing with UNKNOWN_PRODUCER_ID.
            return None
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        last_seq = increment_sequence(first_seq, header.last_offset_delta)
        duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return (duplicate.first_offset, duplicate.last_offset, duplicate.timestamp)
        current_epoch = entry.producer_epoch
        if epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {epoch} is older than the current epoch {current_epoch}")
        if current_epoch != NO_PRODUCER_EPOCH:
            if epoch != current_epoch:
                if first_seq != 0:
                    raise OutOfOrderSequenceError(
                        f"producer {header.producer_id} new epoch {epoch} must start at sequence 0, got {first_seq}")
            elif not _in_sequence(entry.last_seq, first_seq):
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} epoch {epoch}: sequence {first_seq} does not follow "
                    f"{entry.last_seq}")
        if entry.current_txn_first_offset >= 0 and not header.attributes & _TRANSACTIONAL:
            raise InvalidTxnStateError(
                f"producer {header.producer_id} sent a non-transactional batch inside the transaction "
                f"started at offset {entry.current_txn_first_offset}")
        return None

    # --- KIP-890 partition verification ----------------------------------------

    def verification_token(self, producer_id: int):
        """None when ``producer_id`` has a transaction open here (its
        partition was verified by its first batch: nothing to ask), else
        the token a Produce takes before asking the transaction coordinator
        whether the partition is in the producer's transaction, and gives
        back to ``check_verified`` with the answer (Kafka's
        VerificationGuard, made when verification starts and dropped by the
        producer's next transactional append). Kafka's guard is an object in
        one process; a kafkapy produce may be verified in one process and
        appended in another, so the token is what a marker changes in the
        producer's entry (its epoch, timestamp and coordinator epoch, all
        in the snapshot): a marker written between the start and the append
        (the transaction the answer was about ended) makes it stale. The
        map must be caught up to the log end first."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return (NO_PRODUCER_EPOCH, NO_TIMESTAMP, -1)
        if entry.current_txn_first_offset >= 0:
            return None
        return (entry.producer_epoch, entry.last_timestamp, entry.coordinator_epoch)

    def check_verified(self, header, token) -> None:
        """Kafka 3.9's append check with transaction.partition.verification.enable:
        a transactional data batch of a producer with no transaction open
        here is appended only with the token its verification started with
        (``NOT_VERIFIED``: none), else INVALID_TXN_STATE (48). Caught up first."""
        if header.attributes & _TRANSACTIONAL:
            current = self.verification_token(header.producer_id)
            if current is not None and current != token:
                raise InvalidTxnStateError("Record was not part of an ongoing transaction")

    def check_end_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Validate a COMMIT/ABORT marker before the leader appends it (Kafka's
        ProducerAppendInfo.appendEndTxnMarker checks): a producer epoch older
        than the producer's is INVALID_PRODUCER_EPOCH, a coordinator epoch
        older than the last marker's TRANSACTION_COORDINATOR_FENCED. The map
        must be caught up to the log end first."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {producer_id} at epoch {producer_epoch}, older than {entry.producer_epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, older than "
                f"{entry.coordinator_epoch}")

    def update(self, header, first_offset: int, last_offset: int, timestamp: int, position: int = -1) -> None:
        """Record a batch just appended at ``first_offset..last_offset``.

        ``header`` may be the incoming batch's header (its base_offset is not
        used); ``timestamp`` is the batch's max timestamp, or the log append
        time when the topic uses LogAppendTime. ``position``: where the batch
        starts in its segment's file, if known (-1 if not).
        """
        self._apply(header, first_offset, last_offset, timestamp)
        self.applied_offset = last_offset + 1
        self._last_applied = _batch_identity(header, first_offset, last_offset)
        self._last_applied_position = position

    def update_marker(self, header, offset: int, marker, timestamp: int, read_headers_from,
                      on_completed=None, position: int = -1) -> None:
        """Record a COMMIT/ABORT marker this process just appended at
        ``offset`` from what it appended (``header``, its ``EndTxnMarker``)
        rather than reading it back from the log as ``catch_up`` would (the
        header walk from the offset index and the marker's pread); the same
        result, ``on_completed`` as in ``catch_up``. A map not caught up to
        ``offset`` catches up from the log instead. ``position`` as in
        ``update``."""
        if self.applied_offset != offset:
            self.catch_up(offset + 1, read_headers_from, on_completed)
            return
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerStateEntry(
                header.producer_id, max_batches=self.max_batches_per_producer)
        completed = self._apply_marker(entry, header.producer_epoch, marker, offset, timestamp)
        self.applied_offset = offset + 1
        self._last_applied = _batch_identity(header, offset, offset)
        self._last_applied_position = position
        if completed is not None and on_completed is not None:
            on_completed(completed, self.last_stable_offset_after(completed))

    def _apply(self, header, first_offset: int, last_offset: int, timestamp: int):
        """Apply one batch; returns the CompletedTxn a marker completes, else None."""
        producer_id = header.producer_id
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(
                producer_id, max_batches=self.max_batches_per_producer)
        if header.attributes & _CONTROL:
            marker = self.read_marker(header) if self.read_marker is not None else None
            return self._apply_marker(entry, header.producer_epoch, marker, first_offset, timestamp)
        entry._set_epoch(header.producer_epoch)
        first_seq = header.base_sequence
        entry.batches.append(BatchMetadata(
            first_seq, increment_sequence(first_seq, header.last_offset_delta),
            first_offset, last_offset, timestamp))
        entry.last_timestamp = timestamp
        if header.attributes & _TRANSACTIONAL and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing_txns[producer_id] = first_offset
        return None

    def _apply_marker(self, entry, producer_epoch: int, marker, offset: int, timestamp: int):
        """A COMMIT/ABORT marker at ``offset``: the producer's open transaction,
        if any, is over (a marker without one, e.g. for a transaction that
        wrote nothing here, completes nothing). Returns the CompletedTxn or None."""
        entry._set_epoch(producer_epoch)
        if marker is not None:
            entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = timestamp
        first_offset = entry.current_txn_first_offset
        if first_offset < 0:
            return None
        entry.current_txn_first_offset = -1
        self.ongoing_txns.pop(entry.producer_id, None)
        self.unreplicated_txns.append((first_offset, offset))
        return CompletedTxn(entry.producer_id, first_offset, offset,
                            None if marker is None else not marker.is_commit)

    # --- transactions: the first unstable offset ---------------------------------

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """Kafka's firstUnstableOffset after onHighWatermarkUpdated: the
        smallest first offset of the open transactions and of the completed
        ones whose marker is at or above ``high_watermark``; None if none."""
        unreplicated = self.unreplicated_txns
        if unreplicated and unreplicated[0][1] < high_watermark:
            unreplicated[:] = [t for t in unreplicated if t[1] >= high_watermark]
        first = min(self.ongoing_txns.values(), default=None)
        for first_offset, _ in unreplicated:
            if first is None or first_offset < first:
                first = first_offset
        return first

    def last_stable_offset_after(self, completed) -> int:
        """Kafka's lastStableOffset(completedTxn), called right after the
        marker was applied: the first offset of the earliest transaction still
        open (of another producer: this one's is closed), else the offset
        after the marker."""
        return min(self.ongoing_txns.values(), default=completed.last_offset + 1)

    # --- catching up with the log ----------------------------------------------

    def catch_up(self, log_end_offset: int, read_headers_from, on_completed=None) -> None:
        """Apply the batches in ``[applied_offset, log_end_offset)``.

        ``read_headers_from(offset)`` yields the ``BatchHeader`` of every batch
        whose last offset is >= ``offset``, in log order, with absolute
        ``base_offset`` (and ``position``, the batch's place in its segment's
        file, where the log has one); ``read_headers_from(offset, position)``
        may start at ``position`` of the segment holding ``offset`` instead
        (a hint: its first header is checked here, never trusted).  If the map is ahead of the log, or the batch it
        applied last is no longer in the log (another worker truncated and
        appended), the map is rebuilt from the newest usable snapshot.
        ``on_completed(completed_txn, last_stable_offset)`` is called for
        every transaction a marker in that range completes.
        """
        if self.applied_offset > log_end_offset:
            self._reload(log_end_offset, 0)
        if self.applied_offset >= log_end_offset:
            return
        headers = None
        last_applied = self._last_applied
        if last_applied is not None and last_applied[1] == self.applied_offset - 1:
            position = self._last_applied_position
            headers = iter(read_headers_from(last_applied[1], position) if position >= 0
                           else read_headers_from(last_applied[1]))
            previous = next(headers, None)
            if previous is None or _batch_identity(
                    previous, previous.base_offset,
                    previous.base_offset + previous.last_offset_delta) != last_applied:
                self._reload(log_end_offset, 0)
                headers = None
        if headers is None:
            headers = read_headers_from(self.applied_offset)
        applied_offset = self.applied_offset
        last = None
        for header in headers:
            base_offset = header.base_offset
            if base_offset >= log_end_offset:
                break
            last_offset = base_offset + header.last_offset_delta
            if last_offset < applied_offset:
                continue
            if header.producer_id >= 0:
                completed = self._apply(header, base_offset, last_offset, header.max_timestamp)
                if completed is not None and on_completed is not None:
                    on_completed(completed, self.last_stable_offset_after(completed))
            last = header
        self.applied_offset = log_end_offset
        if last is not None and last.base_offset + last.last_offset_delta == log_end_offset - 1:
            self._last_applied = _batch_identity(
                last, last.base_offset, last.base_offset + last.last_offset_delta)
            self._last_applied_position = last.position
        else:
            self._last_applied = None
            self._last_applied_position = -1

    def rebuild_to(self, offset: int, read_headers_from, on_completed=None) -> None:
        """Recovery: the map as of ``offset`` from the newest valid snapshot at
        or below it (none deleted, unlike ``load``), then the batches after it
        up to ``offset``; ``on_completed`` as in ``catch_up``."""
        self.producers = {}
        self.applied_offset = 0
        for snapshot_offset, path in reversed(self._list_snapshots()):
            if snapshot_offset > offset:
                continue
            try:
                entries = read_snapshot(path, self.max_batches_per_producer)
            except (CorruptSnapshotError, OSError):
                continue
            self.producers = {entry.producer_id: entry for entry in entries}
            self.applied_offset = snapshot_offset
            break
        self._after_reload()
        self.catch_up(offset, read_headers_from, on_completed)

    def load(self, log_end_offset: int, read_headers_from) -> None:
        """Start-up: newest valid snapshot at or below the log end, then catch up.

        Snapshots above the log end (the log was truncated after they were
        written) and corrupt ones are deleted.  Without a snapshot the map is
        rebuilt from the first batch of the log.
        """
        self._reload(log_end_offset, 0)
        self.catch_up(log_end_offset, read_headers_from)

    def truncate(self, log_start_offset: int, log_end_offset: int) -> None:
        """The log now spans ``[log_start_offset, log_end_offset)``: forget the map.

        Deletes snapshots outside ``[log_start_offset, log_end_offset]``, then
        reloads the newest remaining one (or starts empty at
        ``log_start_offset``); the next ``catch_up`` reads the rest.  Unlike
        Kafka this always resets, even when the log end equals
        ``applied_offset``: in another worker the same end offset may now hold
        different batches.
        """
        for offset, path in self._list_snapshots():
            if offset < log_start_offset or offset > log_end_offset:
                _unlink(path)
        self._reload(log_end_offset, log_start_offset)

    def _reload(self, log_end_offset: int, fallback_offset: int) -> None:
        self.producers = {}
        self._last_applied = None
        self._last_applied_position = -1
        for offset, path in reversed(self._list_snapshots()):
            if offset > log_end_offset:
                _unlink(path)
                continue
            try:
                entries = read_snapshot(path, self.max_batches_per_producer)
            except (CorruptSnapshotError, OSError):
                _unlink(path)
                continue
            self.producers = {entry.producer_id: entry for entry in entries}
            self.applied_offset = offset
            self._after_reload()
            return
        self.applied_offset = fallback_offset
        self._after_reload()

    def _after_reload(self) -> None:
        # Open transactions come back from the snapshot; which completed ones
        # were not yet replicated is not in it (as in Kafka).
        self._last_applied = None
        self._last_applied_position = -1
        self.ongoing_txns = {pid: e.current_txn_first_offset for pid, e in self.producers.items()
                             if e.current_txn_first_offset >= 0}
        self.unreplicated_txns = []

    # --- snapshots ---------------------------------------------------------------

    def _list_snapshots(self) -> list[tuple[int, str]]:
        """``(offset, path)`` of every snapshot file, oldest first.

        Read from the directory each time, not cached: other workers write
        and delete snapshots of the same partition.
        """
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            match = _SNAPSHOT_NAME.match(name)
            if match:
                found.append((int(match.group(1)), os.path.join(self.log_dir, name)))
        found.sort()
        return found

    def snapshot_offsets(self) -> list[int]:
        return [offset for offset, _ in self._list_snapshots()]

    def latest_snapshot_offset(self) -> int | None:
        snapshots = self._list_snapshots()
        return snapshots[-1][0] if snapshots else None

    def take_snapshot(self, offset: int, durable: bool = True) -> None:
        """Write the map as ``%020d.snapshot`` for ``offset`` (== applied_offset).

        Written to a temporary file, fsynced and renamed, so a crash leaves
        either no file or a complete one (a torn file would also fail its CRC).
        """
        if offset != self.applied_offset:
            raise ValueError(f"snapshot offset {offset} differs from the map's applied offset "
                             f"{self.applied_offset}: catch_up first")
        path = os.path.join(self.log_dir, snapshot_file_name(offset))
        write_snapshot(path, self.producers.values(), durable)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete snapshot files with offset < ``offset`` (retention removed their segments)."""
        for snapshot_offset, path in self._list_snapshots():
            if snapshot_offset >= offset:
                break
            _unlink(path)

    def remove_expired_producers(self, now_ms: int, producer_id_expiration_ms: int) -> None:
        """Forget producers idle for ``producer.id.expiration.ms`` (Kafka default 86400000)."""
        expired = [pid for pid, entry in self.producers.items()
                   if entry.current_txn_first_offset < 0
                   and now_ms - entry.last_timestamp >= producer_id_expiration_ms]
        for pid in expired:
            del self.producers[pid]


def encode_snapshot(entries) -> bytes:
    parts = []
    for entry in entries:
        parts.append(_ENTRY.pack(
            entry.producer_id, entry.producer_epoch, entry.last_seq, entry.last_data_offset,
            entry.last_offset_delta, entry.last_timestamp, entry.coordinator_epoch,
            entry.current_txn_first_offset))
    body = _COUNT.pack(len(parts)) + b"".join(parts)
    return _PREFIX.pack(PRODUCER_SNAPSHOT_VERSION, crc32c.crc32c(body)) + body


def decode_snapshot(data: bytes, max_batches: int = NUM_BATCHES_TO_RETAIN) -> list[ProducerStateEntry]:
    if len(data) < _PREFIX.size + _COUNT.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header")
    version, crc = _PREFIX.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    computed = crc32c.crc32c(memoryview(data)[_CRC_COVERS_FROM:])
    if crc != computed:
        raise CorruptSnapshotError(f"snapshot CRC {crc:#010x} != computed {computed:#010x}")
    (count,) = _COUNT.unpack_from(data, _CRC_COVERS_FROM)
    position = _CRC_COVERS_FROM + _COUNT.size
    if count < 0 or len(data) != position + count * _ENTRY.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes cannot hold {count} entries")
    entries = []
    for (producer_id, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first_offset) in _ENTRY.iter_unpack(memoryview(data)[position:]):
        batches = ()
        if last_offset >= 0:
            # Kafka stores one offset delta for both spaces: in a v2 batch
            # the sequence and the offset advance together record by record.
            batches = (BatchMetadata(decrement_sequence(last_seq, offset_delta), last_seq,
                                     last_offset - offset_delta, last_offset, timestamp),)
        entries.append(ProducerStateEntry(
            producer_id, epoch, coordinator_epoch, timestamp,
            txn_first_offset if txn_first_offset >= 0 else -1, batches, max_batches))
    return entries


def read_snapshot(path: str, max_batches: int = NUM_BATCHES_TO_RETAIN) -> list[ProducerStateEntry]:
    with open(path, "rb") as f:
        return decode_snapshot(f.read(), max_batches)


def write_snapshot(path: str, entries, durable: bool = True) -> None:
    """``durable`` False: no fsyncs (the caller syncs the filesystem afterwards,
    as LogManager.shutdown does once for every partition)."""
    data = encode_snapshot(entries)
    # The pid keeps two workers snapshotting the same offset apart; both
    # write the same bytes, so whichever rename lands last is right.
    tmp_path = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp_path, path)
    if not durable:
        return
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
