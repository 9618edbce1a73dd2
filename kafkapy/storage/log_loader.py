"""LogLoader: a partition directory made into a loaded Log, after a clean shutdown or a crash.

Job (Kafka's ``LogLoader``), in this order, for the first process to open
the partition since the slot was made (``Log.open`` with the slot's
generation 0):

1. finish every cleaner swap a crash left past its commit point
   (``complete_swaps``: a ``<base>.log.swap`` replaces the segments it
   covers; ``storage.cleaner`` writes the swap files and completes its own
   swaps with ``complete_swap``);
2. remove strays (``.deleted``, ``.cleaned``, ``.swap``, ``.tmp``) and
   indexes whose ``.log`` is gone;
3. open the segments, rebuilding the indexes of those below the recovery
   point that are missing or fail their sanity check; without a clean
   shutdown, recover every segment from the one holding the recovery point
   on (a segment with an invalid tail is truncated to its last valid batch
   and every later segment deleted);
4. publish the partition's offsets (log end, log start, recovery point,
   high watermark) and the active segment's counters into the slot, and
   bump its generation;
5. truncate the leader-epoch cache to the log, then load producer state
   (after recovery: replayed from the newest snapshot at or below the first
   recovered segment, rebuilding the ``.txnindex`` of every recovered
   segment on the way).

File format: the directory as ``storage.log`` describes it; swap files are
``<base>.log.swap`` and ``<base>.txnindex.swap`` (``storage.cleaner``).
Nothing here writes a format of its own.

Ownership: a LogLoader is a one-shot helper of ``Log.open``, which runs it
with the partition lock held; it fills in the Log it is given (its
LocalLog's segment list and generation, its leader-epoch cache and producer
state, as Kafka's LogLoader fills the LogSegments, leader-epoch cache and
ProducerStateManager that UnifiedLog hands it) and keeps nothing. The
module functions are safe from any process holding that lock.
"""

import bisect
import logging
import os

from kafkapy.storage import checkpoints
from kafkapy.storage.errors import CorruptIndexError
from kafkapy.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    file_batches,
    segment_bases,
    segment_file_name,
    unlink_if_exists,
)
from kafkapy.storage.shared import FIELD
from kafkapy.storage.transaction_index import TransactionIndex

logger = logging.getLogger("kafkapy.storage")
_F_GENERATION = FIELD["generation"]

# Left behind by an interrupted compaction / segment swap (Kafka's LogLoader removes them).
_STRAY_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp")
# A swap file is read this much at a time to find its last offset: the
# cleaner's default read buffer (log.cleaner.io.buffer.size, 512 KiB).
_SWAP_READ_BYTES = 524288


class LogLoader:
    """Load ``log`` (a Log whose slot is fresh) from its directory: see the module docstring."""

    def __init__(self, log, had_clean_shutdown: bool, recovery_point: int, log_start_offset, high_watermark):
        self.log = log
        self.dir = log.dir
        self.had_clean_shutdown = had_clean_shutdown
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark

    def load(self) -> None:
        """Start-up load: remove strays, open segments, rebuild broken indexes,
        recover unflushed segments, then publish the partition's state into the slot."""
        log = self.log
        local = log.local
        state = log.state
        had_clean_shutdown, recovery_point = self.had_clean_shutdown, self.recovery_point
        log_start_offset, high_watermark = self.log_start_offset, self.high_watermark
        complete_swaps(self.dir)  # a cleaner swap past its commit point is finished, as Kafka's LogLoader does
        self._remove_stray_files()
        bases = segment_bases(self.dir)
        # Without a clean shutdown every segment from the one holding the
        # recovery point on is rebuilt anyway; its untrimmed, zero-filled
        # index tail would only fail the sanity check noisily.
        first_recovered = bases[max(0, bisect.bisect_right(bases, recovery_point) - 1)] \
            if bases and not had_clean_shutdown else None
        segments = []
        try:
            for base in bases:
                had_indexes = LogSegment.index_files_exist(self.dir, base)
                segment = local._open_segment(base)
                segments.append(segment)
                if first_recovered is not None and base >= first_recovered:
                    continue
                problem = None if had_indexes else "missing index files"
                if problem is None:
                    try:
                        segment.offset_index.sanity_check(segment.size)
                        segment.time_index.sanity_check()
                    except CorruptIndexError as e:
                        problem = str(e)
                if problem is not None:
                    logger.warning("%s: rebuilding indexes of segment %d: %s", self.dir, base, problem)
                    self._recover_segment(segment)
            if not segments:
                start = log_start_offset or 0
                segments.append(local._open_segment(start, create=True))
            local._segments = segments
            local._bases = [s.base_offset for s in segments]

            if not had_clean_shutdown:
                self._recover_from(recovery_point)

            active = local._segments[-1]
            # The active segment's indexes are preallocated (trimmed on close).
            active.resize_indexes(log.config.segment_index_bytes)
            log_end_offset = active.read_next_offset()
            active.load_max_timestamp()
            _, last_index_position = active.offset_index.lookup(active.offset_index.last_offset)
            active.bytes_since_last_index_entry = (
                active.size - last_index_position if active.offset_index.entries else active.size)
        except BaseException:
            for segment in segments:
                segment.close()
            local._segments, local._bases = [], []
            raise

        first_base = local._segments[0].base_offset
        start = max(log_start_offset or 0, first_base)
        start = min(start, log_end_offset)
        if had_clean_shutdown:
            recovery_point = log_end_offset
        state.log_end_offset = log_end_offset
        state.log_start_offset = start
        state.recovery_point = max(start, min(recovery_point, log_end_offset))
        hw = high_watermark if high_watermark is not None else start
        state.high_watermark = min(max(hw, start), log_end_offset)
        state.unflushed_messages = 0
        state.last_flush_ms = log._clock_ms()
        state.first_batch_timestamp = active.first_batch_max_timestamp() if active.size else -1
        local._publish_active(active)
        local._generation = max(state.generation, 0) + 1
        state.store(_F_GENERATION, (local._generation, len(local._segments)))

        trimmed = log.leader_epoch_cache.truncate(start, log_end_offset)
        state.leader_epoch = trimmed[-1][0] if trimmed else -1

        log._psm = log._new_psm()
        log._psm.truncate(start, log_end_offset)
        if first_recovered is not None:
            self._rebuild_txn_indexes(first_recovered, log_end_offset)
        else:
            log._psm.load(log_end_offset, log._read_headers_from)

    def _rebuild_txn_indexes(self, first_recovered: int, log_end_offset: int) -> None:
        """After recovery: the ``.txnindex`` of every segment from
        ``first_recovered`` on, from producer state replayed from the newest
        snapshot at or below it (Kafka's LogSegment.recover with its
        producer state). Leaves the log's producer state caught up to the
        log end (the load it replaces)."""
        log = self.log
        for segment in log.local._segments:
            if segment.base_offset >= first_recovered:
                TransactionIndex(self.dir, segment.base_offset).delete()
        log._psm.rebuild_to(first_recovered, log._read_headers_from)
        log._psm.catch_up(log_end_offset, log._read_headers_from, log._index_completed_txn)

    def _remove_stray_files(self) -> None:
        names = os.listdir(self.dir)
        log_bases = set()
        for name in names:
            if name.endswith(_STRAY_SUFFIXES):
                logger.info("%s: removing stray file %s", self.dir, name)
                os.unlink(os.path.join(self.dir, name))
            elif name.endswith(LOG_SUFFIX) and name[:20].isdigit():
                log_bases.add(name[:20])
        for name in names:
            # An index without its .log is an orphan of an interrupted delete.
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                if name.endswith(suffix) and name[:20].isdigit() and name[:20] not in log_bases:
                    logger.info("%s: removing orphan index %s", self.dir, name)
                    os.unlink(os.path.join(self.dir, name))

    def _recover_segment(self, segment: LogSegment) -> int:
        config = self.log.config
        truncated = segment.recover(config.max_message_bytes if config.max_message_bytes > 0 else -1)
        if truncated:
            logger.warning("%s: truncated %d invalid bytes at position %d of segment %d",
                           self.dir, truncated, segment.size, segment.base_offset)
        return truncated

    def _recover_from(self, recovery_point: int) -> None:
        """Recover every segment holding offsets >= recovery_point; after a segment whose
        tail was invalid, every later segment is deleted (it cannot be trusted to follow)."""
        segments, bases = self.log.local._segments, self.log.local._bases
        i = max(0, bisect.bisect_right(bases, recovery_point) - 1)
        while i < len(segments):
            segment = segments[i]
            truncated = self._recover_segment(segment)
            if truncated and i + 1 < len(segments):
                doomed = segments[i + 1:]
                logger.warning("%s: deleting %d segments after the corrupt segment %d: %s", self.dir,
                               len(doomed), segment.base_offset, [s.base_offset for s in doomed])
                for s in doomed:
                    s.close()
                    for p in s.file_paths():
                        try:
                            os.unlink(p)
                        except FileNotFoundError:
                            pass
                del segments[i + 1:]
                del bases[i + 1:]
            if i + 1 < len(segments):
                segment.on_become_inactive()
            i += 1


# ------------------------------------------------------------------ cleaner swaps


def complete_swap(dir_path: str, base: int, covered) -> None:
    """Finish the swap of ``<base>.log.swap`` over the segments at ``base`` and ``covered``."""
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        unlink_if_exists(os.path.join(dir_path, segment_file_name(base, suffix)))
    for other in covered:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX):
            unlink_if_exists(os.path.join(dir_path, segment_file_name(other, suffix)))
    txn_path = os.path.join(dir_path, segment_file_name(base, TXN_INDEX_SUFFIX))
    if os.path.exists(txn_path + SWAP_SUFFIX):
        os.rename(txn_path + SWAP_SUFFIX, txn_path)
    if os.path.exists(txn_path) and os.path.getsize(txn_path) == 0:
        os.unlink(txn_path)
    log_path = os.path.join(dir_path, segment_file_name(base, LOG_SUFFIX))
    os.rename(log_path + SWAP_SUFFIX, log_path)
    checkpoints.fsync_dir(dir_path)


def complete_swaps(dir_path: str) -> int:
    """At load, before strays are removed: finish every committed swap
    (``<base>.log.swap``) a crash interrupted; returns how many."""
    done = 0
    for name in sorted(os.listdir(dir_path)):
        if not (name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and name[:20].isdigit()):
            continue
        base = int(name[:20])
        path = os.path.join(dir_path, name)
        last = None
        for last, _view in file_batches(path, os.path.getsize(path), _SWAP_READ_BYTES):
            pass
        next_offset = last.base_offset + last.last_offset_delta + 1 if last is not None else base + 1
        covered = [int(n[:20]) for n in os.listdir(dir_path)
                   if n.endswith(LOG_SUFFIX) and n[:20].isdigit() and base < int(n[:20]) < next_offset]
        logger.warning("%s: completing the interrupted swap of cleaned segment %d over %s",
                       dir_path, base, covered)
        complete_swap(dir_path, base, covered)
        done += 1
    return done
