"""LocalLog: the segments of one partition directory, as this process sees them (Kafka's LocalLog).

File format: directory ``<topic>-<partition>/`` holds the segments
``%020d.log/.index/.timeindex/.txnindex`` (``storage.segment``); when the
partition is deleted it is renamed ``<topic>-<partition>.<uuid-hex>-delete``.
Its other files (``leader-epoch-checkpoint``, ``partition.metadata``, the
producer-state snapshots ``%020d.snapshot``) are the Log's (``storage.log``).

Job (Kafka's LocalLog): the segment list (opening, rolling and removing
segments), reading from segments (the file region of a fetch, batch headers,
the ``.txnindex`` entries of aborted transactions), truncating segments,
flushing them and the directory, and the directory itself (renamed for
deletion, handles released on close). The rules above the segments (offsets
a client may see, appends, producer state, transactions, leader epochs,
retention decisions) are the Log's, which holds one LocalLog (``log.local``).

Concurrency model (docs/architecture.md, "State shared by handler workers"):
every handler worker opens its own Log, and so its own LocalLog, on the same
directory; every method must be called with the partition lock held. The
authoritative mutable scalars live in the PartitionState slot; this object
keeps only per-process caches: open file descriptors, index mappings, the
segment list (``_segments``, ``_bases``), the generation it last saw and when
its active segment was created here (``_created_ms``). ``sync`` (every public
method of the Log starts with it): if the slot's ``generation`` differs from
the one this object last saw, another process changed the segment list (roll,
retention, truncation, a cleaner swap, close), so every handle is dropped and
the list reloaded from disk; otherwise the active segment's counters are
copied from the slot. Whatever changes the segment list bumps ``generation``
(``_bump_generation``; LogLoader and the cleaner's swap likewise).

Slot fields, split as Kafka splits them: the segment list's (generation,
segment_count), the active segment's counters, log_end_offset,
recovery_point and the flush bookkeeping (unflushed_messages, last_flush_ms,
first_batch_timestamp) are written here; high_watermark, log_start_offset,
leader_epoch and the topic id by the Log. An append is the exception: the
Log's ``_write_batches`` writes log end offset, high watermark and the
active segment's counters in one store (see there).

Ownership: owned by its Log's process and not thread-safe on its own; the
partition lock (process + thread exclusive) guards it. Its underscored
attributes are the storage package's (the Log, LogLoader and the cleaner's
swap reach them under that lock), not the rest of the broker's.
"""

import bisect
import logging
import os
import time
import uuid
from collections import namedtuple

from kafkapy._core.types import FileRegion
from kafkapy.metrics import probes
from kafkapy.storage import checkpoints
from kafkapy.storage.errors import StorageError
from kafkapy.storage.segment import LogSegment
from kafkapy.storage.segment import segment_bases as _segment_bases  # a module global: tests watch _reload's listing
from kafkapy.storage.shared import FIELD
from kafkapy.storage.transaction_index import TransactionIndex

_F_GENERATION = FIELD["generation"]
_F_SEGMENT_COUNT = FIELD["segment_count"]
_F_ACTIVE_BASE_OFFSET = FIELD["active_base_offset"]
_F_ACTIVE_SIZE = FIELD["active_size"]
assert _F_SEGMENT_COUNT == _F_GENERATION + 1

logger = logging.getLogger("kafkapy.storage")

DELETE_DIR_SUFFIX = "-delete"

FetchData = namedtuple("FetchData", ("regions", "size"))


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>`` -> (topic, partition); None for anything else (e.g. ``-delete`` dirs)."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def _active_fields(active) -> tuple:
    """The slot's active_base_offset .. bytes_since_last_index_entry for
    ``active`` (a LogSegment), in ``PartitionState.FIELDS`` order."""
    return (active.base_offset, active.size, active.offset_index.entries, active.time_index.entries,
            active.max_timestamp, active.offset_of_max_timestamp, active.bytes_since_last_index_entry)


class LocalLog:
    """The segments of one partition directory: see the module docstring.

    ``file_caches``: the owner's caches of other files in the directory (the
    Log's LeaderEpochFileCache): ``invalidate()`` when the segment list is
    reloaded (the process that changed it may have rewritten them too),
    ``flush()`` before the directory's fsync.
    """

    def __init__(self, dir_path, topic, partition, config, state, clock_ms, fsync, file_caches=()):
        self.dir = dir_path
        self.topic = topic
        self.partition = partition
        self.config = config
        self.state = state
        self._clock_ms = clock_ms
        self._fsync = fsync
        self._file_caches = file_caches
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._generation = None
        # Jitter is derived from the partition, not drawn at random, so that
        # every process agrees on when the active segment must roll.
        self._created_ms = clock_ms()
        # Segment files renamed to .deleted by this object: (path, renamed_at_ms),
        # collected by the LogManager which removes them after file.delete.delay.ms.
        self.pending_deletions: list[tuple[str, int]] = []
        self.closed = False

    def _open_segment(self, base: int, **kw) -> LogSegment:
        return LogSegment.open(self.dir, base, self.config.segment_index_bytes, self.config.index_interval_bytes, **kw)

    # ------------------------------------------------------------------ sync

    def _publish_active(self, active: LogSegment) -> None:
        self.state.store(_F_ACTIVE_BASE_OFFSET, _active_fields(active))

    def sync(self) -> tuple:
        """Catch up with the slot (see the module docstring); returns the
        slot's fields as read (``PartitionState.snapshot``), one read for
        callers that need several of them."""
        if self.closed:
            raise StorageError(f"{self.dir}: log is closed")
        slot = self.state.snapshot()
        if slot[_F_GENERATION] != self._generation:
            self._reload(slot)
            return slot
        active = self._segments[-1]
        (active.size, active.offset_index.entries, active.time_index.entries, active.max_timestamp,
         active.offset_of_max_timestamp, active.bytes_since_last_index_entry) = \
            slot[_F_ACTIVE_SIZE:_F_ACTIVE_SIZE + 6]
        return slot

    def _close_segments(self) -> None:
        for segment in self._segments:
            segment.close()
        self._segments, self._bases = [], []

    def _reload(self, slot: tuple) -> None:
        """Another process changed the segment list: the files are the truth,
        the slot (``slot``: its snapshot, taken under the lock) has the counters."""
        self._close_segments()
        for cache in self._file_caches:
            cache.invalidate()
        active_base = slot[_F_ACTIVE_BASE_OFFSET]
        # The only segment is the active one: no need to list the directory
        # (a listdir was ~15 % of a worker's first use of a partition).
        bases = (active_base,) if slot[_F_SEGMENT_COUNT] == 1 else _segment_bases(self.dir)
        segments = []
        try:
            for base in bases:
                if base == active_base:
                    try:
                        segment = self._open_segment(base, size=slot[_F_ACTIVE_SIZE],
                                                     index_entries=slot[FIELD["index_entries"]],
                                                     time_index_entries=slot[FIELD["time_index_entries"]])
                    except FileNotFoundError:
                        break  # reported below, as when the listing lacks it
                    # A close() elsewhere trimmed these; the active segment needs the room back.
                    segment.resize_indexes(self.config.segment_index_bytes)
                    (segment.max_timestamp, segment.offset_of_max_timestamp,
                     segment.bytes_since_last_index_entry) = slot[FIELD["active_max_timestamp"]:
                                                                  FIELD["bytes_since_last_index_entry"] + 1]
                    segment._max_timestamp_loaded = True
                    segments.append(segment)
                    break
                segments.append(self._open_segment(base))
        except BaseException:
            for segment in segments:
                segment.close()
            raise
        if not segments or segments[-1].base_offset != active_base:
            for segment in segments:
                segment.close()
            raise StorageError(f"{self.dir}: active segment {active_base} missing on disk")
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._generation = slot[_F_GENERATION]

    def _bump_generation(self) -> None:
        """Tell other processes the segment list changed (call it after every
        change): they reload it on their next ``sync``.  The count beside
        the generation lets that reload skip listing the directory when the
        active segment is the only one."""
        self._generation = self.state.generation + 1
        self.state.store(_F_GENERATION, (self._generation, len(self._segments)))

    # ------------------------------------------------------------------ segments

    @property
    def active_segment(self) -> LogSegment:
        self.sync()
        return self._segments[-1]

    def segments(self) -> list[LogSegment]:
        """The current segments, oldest first (call under the lock; do not keep them)."""
        self.sync()
        return list(self._segments)

    def size_in_bytes(self) -> int:
        self.sync()
        return sum(s.size for s in self._segments)

    def _floor_index(self, offset: int) -> int:
        return bisect.bisect_right(self._bases, offset) - 1

    def _segment_holding(self, offset: int) -> LogSegment:
        """The segment whose base offset is the greatest <= ``offset``."""
        return self._segments[self._floor_index(offset)]

    # ------------------------------------------------------------------ roll

    def roll(self, new_offset: int, before_roll=None) -> LogSegment:
        """Start a new active segment at ``new_offset`` (no-op if the active
        one is empty there); ``before_roll(new_offset)`` runs once the roll is
        certain, before the active segment becomes inactive (the Log's
        producer-state snapshot)."""
        state = self.state
        active = self._segments[-1]
        if active.base_offset == new_offset and active.size == 0:
            return active
        if new_offset < active.base_offset:
            raise StorageError(f"{self.dir}: cannot roll to {new_offset} below active segment {active.base_offset}")
        if before_roll is not None:
            before_roll(new_offset)
        active.on_become_inactive()
        segment = self._open_segment(new_offset, create=True)
        self._segments.append(segment)
        self._bases.append(new_offset)
        self._created_ms = self._clock_ms()
        state.first_batch_timestamp = -1
        self._publish_active(segment)
        self._bump_generation()
        # The rolled segment is flushed by LogManager.flush_dirty_logs (Kafka
        # schedules that flush asynchronously too): an fsync of up to
        # segment.bytes (1 GiB) of dirty pages would stall this produce.
        return segment

    def remove_and_delete_segments(self, doomed, now_ms: int, reason: str) -> None:
        """Take ``doomed`` (segments of this log) out of the list, rename
        their files ``.deleted`` (removed after file.delete.delay.ms) and
        tell other processes (Kafka's removeAndDeleteSegments)."""
        for segment in doomed:
            self._segments.remove(segment)
            logger.info("%s: deleting segment %d (%d bytes) by %s", self.dir, segment.base_offset, segment.size,
                        reason)
            self._rename_deleted(segment, now_ms)
        self._bases = [s.base_offset for s in self._segments]
        self._bump_generation()

    def _rename_deleted(self, segment: LogSegment, now_ms: int) -> None:
        for path in segment.rename_deleted():
            self.pending_deletions.append((path, now_ms))

    # ------------------------------------------------------------------ read

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int, log_end_offset: int,
             min_one_batch: bool) -> FetchData:
        """The file region of the batch holding ``fetch_offset`` and those
        after it in the same segment, up to ``max_bytes`` (at least one batch
        with ``min_one_batch``), none whose last offset is >= ``max_offset``
        (at most ``log_end_offset``, the log end offset). The Log checks the
        offsets first."""
        max_segment_index, max_position = len(self._segments), None
        if max_offset < log_end_offset:
            max_segment_index = self._floor_index(max_offset)
            found = self._segments[max_segment_index].translate_offset(max_offset)
            max_position = found[0] if found is not None else self._segments[max_segment_index].size
        i = max(0, self._floor_index(fetch_offset))
        while i < len(self._segments) and i <= max_segment_index:
            segment = self._segments[i]
            limit = max_position if i == max_segment_index and max_position is not None else segment.size
            result = segment.read(fetch_offset, max_bytes, limit, min_one_batch)
            if result is not None:
                position, length = result
                if length <= 0:
                    return FetchData([], 0)
                return FetchData([FileRegion(segment.path, segment.inode, position, length)], length)
            i += 1
        return FetchData([], 0)

    def _read_headers_from(self, offset: int, position: int = -1):
        """Headers (absolute offsets, file positions) of every batch whose last offset >= ``offset``,
        in order; what the ProducerStateManager reads to catch up.

        ``position`` >= 0: the caller's word that the batch holding ``offset``
        starts there in the segment holding ``offset``; the walk starts there
        without the offset-index lookup and header walk of
        ``translate_offset``. Not checked here: the caller checks the first
        header is the batch it expects (``ProducerStateManager.catch_up``)."""
        i = self._floor_index(offset)
        if i < 0:
            i, position = 0, -1
        for segment in self._segments[i:]:
            if position >= 0:
                start, position = position, -1
            else:
                found = segment.translate_offset(offset)
                if found is None:
                    continue
                start = found[0]
            yield from segment.headers(start)

    def read_batch_headers(self, start_offset: int, end_offset: int | None = None):
        """Headers of the batches overlapping [start_offset, end_offset); for tools and tests."""
        self.sync()
        out = []
        for h in self._read_headers_from(start_offset):
            if end_offset is not None and h.base_offset >= end_offset:
                break
            out.append(h)
        return out

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list:
        """Kafka's collectAbortedTransactions: the aborted transactions
        overlapping [start_offset, upper_bound_offset), from the ``.txnindex``
        of the segment holding ``start_offset`` and the later ones, in marker
        order, stopping at an entry whose last stable offset reaches the bound."""
        self.sync()
        found = []
        for segment in self._segments[max(0, self._floor_index(start_offset)):]:
            entries, complete = TransactionIndex(self.dir, segment.base_offset).collect_aborted_txns(
                start_offset, upper_bound_offset)
            found += entries
            if complete:
                break
        return found

    def fetch_upper_bound_offset(self, fetch_data) -> int:
        """Kafka's upper bound of a fetch's data for its aborted transactions
        (LocalLog.addAbortedTransactions): the offset of the first
        offset-index entry at or after the end of ``fetch_data`` (from
        ``read``) in its segment, else the next segment's base offset, else the
        log end offset."""
        self.sync()
        if not fetch_data.regions:
            return self.state.log_end_offset
        region = fetch_data.regions[0]
        for i, segment in enumerate(self._segments):
            if segment.path == region.path:
                break
        else:
            return self.state.log_end_offset
        index = segment.offset_index
        end = region.position + region.length
        lo, hi = 0, index.entries
        while lo < hi:
            mid = (lo + hi) // 2
            if index.entry(mid)[1] < end:
                lo = mid + 1
            else:
                hi = mid
        if lo < index.entries:
            return index.entry(lo)[0]
        return self._segments[i + 1].base_offset if i + 1 < len(self._segments) else self.state.log_end_offset

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> int:
        """Remove the segments above ``offset`` and every batch of the last
        one whose last offset >= ``offset`` (a mid-batch ``offset`` removes
        that whole batch); returns the new log end offset, the end of what
        remains. ``offset`` is at or above the first segment's base offset."""
        now_ms = self._clock_ms()
        doomed = [s for s in self._segments if s.base_offset > offset]
        for segment in doomed:
            self._segments.remove(segment)
            self._rename_deleted(segment, now_ms)
        self._bases = [s.base_offset for s in self._segments]
        active = self._segments[-1]
        if doomed:
            # The surviving last segment was trimmed when it became inactive; it is active again.
            active.resize_indexes(self.config.segment_index_bytes)
            active.load_max_timestamp()
            _, p = active.offset_index.lookup(active.offset_index.last_offset)
            active.bytes_since_last_index_entry = active.size - p if active.offset_index.entries else active.size
        active.truncate_to(offset)
        TransactionIndex(self.dir, active.base_offset).truncate_to(offset)
        log_end_offset = active.read_next_offset()
        logger.info("%s: truncated to offset %d (log end offset now %d)", self.dir, offset, log_end_offset)
        self._truncated(log_end_offset)
        return log_end_offset

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at ``new_offset``; the
        recovery point becomes ``new_offset``."""
        now_ms = self._clock_ms()
        for segment in self._segments:
            self._rename_deleted(segment, now_ms)
        segment = self._open_segment(new_offset, create=True)
        self._segments, self._bases = [segment], [new_offset]
        self._truncated(new_offset)
        self.state.recovery_point = new_offset

    def _truncated(self, log_end_offset: int) -> None:
        """The slot after a truncation: the log end offset, the recovery
        point no further, the active segment's counters; other processes reload."""
        state = self.state
        active = self._segments[-1]
        state.log_end_offset = log_end_offset
        state.recovery_point = min(state.recovery_point, log_end_offset)
        state.first_batch_timestamp = active.first_batch_max_timestamp() if active.size else -1
        self._created_ms = self._clock_ms()
        self._publish_active(active)
        self._bump_generation()

    # ------------------------------------------------------------------ flush / close / delete

    def flush(self, up_to_offset: int | None = None, already_synced: bool = False) -> None:
        """fsync every segment holding offsets in [recovery_point, up_to_offset) and the directory;
        recovery_point becomes ``up_to_offset`` (default log_end_offset).

        ``already_synced``: the caller read ``up_to_offset`` under the lock,
        then synced the whole filesystem (LogManager's batched flush), so only
        the bookkeeping is left to do here."""
        self.sync()
        state = self.state
        if up_to_offset is None:
            up_to_offset = state.log_end_offset
        up_to_offset = min(up_to_offset, state.log_end_offset)
        flush_all = up_to_offset == state.log_end_offset
        if up_to_offset > state.recovery_point or (flush_all and state.unflushed_messages):
            started = time.monotonic()
            first = max(0, self._floor_index(state.recovery_point))
            for segment in self._segments[first:]:
                if already_synced or (segment.base_offset >= up_to_offset and not flush_all):
                    break
                segment.flush(self._fsync)
            if self._fsync is os.fsync and not already_synced:
                for cache in self._file_caches:
                    cache.flush()
                checkpoints.fsync_dir(self.dir)
            state.recovery_point = max(state.recovery_point, up_to_offset)
            probes.log.flushed(time.monotonic() - started)
        if flush_all:
            state.unflushed_messages = 0
        state.last_flush_ms = self._clock_ms()

    def release(self) -> None:
        """Drop this process's handles without touching the files."""
        if not self.closed:
            self._close_segments()
            self.closed = True

    def close(self) -> None:
        """Kafka's close of the segments: the active one's final time-index
        entry and trimmed index files; other processes reload (generation
        bump) and re-extend the indexes. The caller releases the handles."""
        active = self._segments[-1]
        active.on_become_inactive()
        self._publish_active(active)
        self._bump_generation()

    def delete(self) -> str:
        """Rename the directory to ``<topic>-<partition>.<uuid-hex>-delete`` (removed later); returns the new path."""
        if not self.closed:
            self.sync()
            self._bump_generation()
            self.release()
        parent = os.path.dirname(os.path.abspath(self.dir))
        target = os.path.join(
            parent, f"{partition_dir_name(self.topic, self.partition)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.rename(self.dir, target)
        if self._fsync is os.fsync:
            checkpoints.fsync_dir(parent)
        return target

    def __repr__(self) -> str:
        return f"LocalLog({self.dir!r})"
