"""Log compaction (``cleanup.policy=compact``): Kafka's LogCleaner, one pass at a time.

Scheduling (Kafka's LogCleanerManager). Each log dir keeps
``cleaner-offset-checkpoint`` (Kafka's offset-checkpoint format: ``0``, the
count, then ``topic partition offset`` lines): per partition, the first
dirty offset, where the last pass's offset map ended. For a log:

* first dirty offset: the checkpoint, reset to the log start offset when it
  is below it or past the log end offset (a truncated or recreated log);
* first uncleanable offset: the lowest of the last stable offset, the
  active segment's base, and (``min.compaction.lag.ms`` > 0) the base of
  the first dirty segment whose largest timestamp is within the lag of now;
* clean bytes: the segments below the first dirty offset; cleanable bytes:
  the segments from the one holding the first dirty offset up to the one
  holding the first uncleanable offset; dirty ratio = cleanable / (clean +
  cleanable);
* the log is cleaned when its ratio is above ``min.cleanable.dirty.ratio``
  (Kafka compares with ``>``), or when ``max.compaction.lag.ms`` forces it
  (the first batch of a dirty inactive segment is older than the lag) and
  there are cleanable bytes. ``clean_logs`` cleans the eligible logs
  dirtiest first (Kafka cleans the dirtiest one per cleaner-thread
  iteration; here one pass takes them all, in that order).

A pass (the partition lock is held to decide and to swap, not while
segments are read and the cleaned groups written; memory is one read
buffer, one batch's records and the offset map, bounded by
``CleanerConfig``: docs/architecture.md, "The log cleaner"; its reads and
writes together held to ``log.cleaner.io.max.bytes.per.second`` by a
``Throttler``, Kafka's):

1. The offset map: the last offset of each key (its MD5 digest) in [first
   dirty, first uncleanable), aborted transactions' records and markers
   left out; a full map ends the pass's range where it filled.
2. The segments below the map's end are grouped (Kafka's
   groupSegmentsBySize: a group's log bytes stay within ``segment.bytes``,
   its offset and time index bytes within ``segment.index.bytes``, its
   offsets within an int of its base) and each group whose content changes,
   or that has more than one segment, is rewritten into one segment at the
   group's first base offset.
3. A record stays when its offset is past the map's end, or it has a key
   whose map offset is not later than its own, and it has a value or its
   batch's delete horizon has not passed. Records without a key go.
4. Tombstones and transaction markers (Kafka 3.x, KIP-534): a batch with a
   surviving tombstone, or a marker whose transaction has no data left, is
   rewritten with the delete-horizon attribute (0x40) and its base
   timestamp set to now + ``delete.retention.ms`` the first time a pass
   keeps it; a later pass past that horizon drops the tombstones and the
   marker. A COMMIT marker's transaction has data left while a pass still
   meets a batch of it; an ABORT marker's while an aborted batch of it is
   met (that pass drops the aborted records and keeps the marker and its
   ``.txnindex`` entry; the next pass finds no data and starts the
   horizon). The batch holding an active producer's last data offset (or
   its last marker, if it has no data) is kept, empty if need be, as is the
   last batch below the first uncleanable offset, so producer state and
   offsets survive; an empty batch goes once it is neither (Kafka's
   DELETE_EMPTY). A producer idle for ``producer.id.expiration.ms`` with no
   open transaction is not active (Kafka expires it from its producer
   state; see ``_Pass``). ``.txnindex`` entries of the rewritten group are the
   ABORT markers it keeps with data still present (Kafka's
   CleanedTransactionMetadata).
5. Kept records keep their offsets; batches whose records all survive are
   copied byte for byte; others are rebuilt uncompressed, one batch per run
   of consecutive offsets (kafkapy's batches are dense:
   ``scan_batches`` checks base..base+count-1), with the batch's producer,
   sequence, leader epoch, timestamp type and flags.

Crash safety (Kafka's .cleaned/.swap): a group's data goes to
``<base>.log.cleaned`` and its aborted-transaction entries to
``<base>.txnindex.cleaned``, both fsynced; the index becomes
``.txnindex.swap``, then the log ``.log.swap``: that rename is the commit
point. Completing a swap (here at once, or by the LogLoader when the log
is loaded after a crash: ``storage.log_loader.complete_swap``) removes the
indexes of the group's first segment and every file of the other segments
the swap covers (bases up to its last offset), renames the
``.txnindex.swap`` over the ``.txnindex`` (an empty one is removed) and the
``.log.swap`` over the ``.log``. Before the commit point load removes the
``.cleaned`` strays and the old segments stand; after it, load finishes
the swap. Either way no offset is lost or
duplicated. Other processes holding old segments keep reading the old
inodes until the bumped generation makes them reload the list.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import struct
import time
from collections import namedtuple
from dataclasses import dataclass

import crc32c

from kafkapy._core import load as _load_core
from kafkapy._core.offset_map_py import slots_and_capacity
from kafkapy._core.records_py import build_batch, decode_records
from kafkapy.metrics import probes
from kafkapy.storage import checkpoints
from kafkapy.storage.control_records import CorruptRecordError, parse_end_txn_marker
from kafkapy.storage.log_loader import complete_swap
from kafkapy.storage.segment import CLEANED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TXN_INDEX_SUFFIX, BatchReadStopped, \
    file_batches, segment_file_name, unlink_if_exists
from kafkapy.storage.transaction_index import TransactionIndex, encode_entry

log = logging.getLogger("kafkapy.storage.cleaner")

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_DELETE_HORIZON = 0x40   # Kafka's DELETE_HORIZON_FLAG_MASK: baseTimestamp holds the delete horizon
_LOG_APPEND_TIME = 0x08
_INT_MAX = 2**31 - 1
# v2 batch header: baseOffset i64, batchLength i32, leaderEpoch i32, magic i8, crc u32, then the
# CRC-covered part from attributes i16, lastOffsetDelta i32, baseTimestamp i64 on.
_CRC_AT, _ATTRIBUTES_AT, _BASE_TIMESTAMP_AT = 17, 21, 27

LogToClean = namedtuple("LogToClean", ("first_dirty_offset", "uncleanable_offset", "first_uncleanable_offset",
                                       "clean_bytes", "cleanable_bytes", "ratio", "need_compaction_now",
                                       "reset_checkpoint"))


class CleanerStats:
    """Kafka's cleaner metrics for this process's last ``clean_logs`` pass:
    ``max_dirty_percent`` (the dirtiest compacted log, LogCleanerManager's
    max-dirty-percent), ``max_clean_time_secs`` (the longest cleaning of one
    log, max-clean-time-secs) and ``recopy_percent`` (bytes written over
    bytes read by the last cleaning, cleaner-recopy-percent); published
    through the log probe. Owned by the process that runs the cleaner."""

    def __init__(self):
        self.max_dirty_percent = 0
        self.max_clean_time_secs = 0.0
        self.recopy_percent = 0
        self.passes = 0  # logs cleaned
        self.last_clean_time_secs = 0.0  # the last log's cleaning


stats = CleanerStats()


# The offset map (Kafka's SkimpyOffsetMap): offset_map.ENTRY_BYTES a slot, a 16-byte
# digest and an 8-byte offset.
_offset_maps = _load_core("offset_map")


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's cleaner settings (Kafka's CleanerConfig): the offset map's
    memory (``log.cleaner.dedupe.buffer.size`` over ``log.cleaner.threads``,
    filled to ``log.cleaner.io.buffer.load.factor``) and the read and write
    buffers (``log.cleaner.io.buffer.size``, grown to hold a larger batch);
    ``producer.id.expiration.ms``: a producer idle that long (no open
    transaction) is not active, so its last batch and marker are not kept
    for it (Kafka's removeExpiredProducers takes it out of the producer state
    the cleaner asks; kafkapy's producer state keeps it, see ``_Pass``)."""

    dedupe_buffer_size: int = 134217728
    io_buffer_size: int = 524288
    load_factor: float = 0.9
    threads: int = 1
    io_max_bytes_per_second: float = 1.7976931348623157e308  # Kafka's default, Double.MAX_VALUE
    producer_id_expiration_ms: int = 86400000

    @classmethod
    def from_broker(cls, config) -> "CleanerConfig":
        return cls(int(config["log.cleaner.dedupe.buffer.size"]), int(config["log.cleaner.io.buffer.size"]),
                   float(config["log.cleaner.io.buffer.load.factor"]), max(1, int(config["log.cleaner.threads"])),
                   float(config["log.cleaner.io.max.bytes.per.second"]), int(config["producer.id.expiration.ms"]))

    @property
    def map_memory(self) -> int:
        """The offset map's bytes: this cleaner's share of the dedupe buffer."""
        return self.dedupe_buffer_size // self.threads

    @property
    def max_map_entries(self) -> int:
        return slots_and_capacity(self.map_memory, self.load_factor)[1]

    def new_offset_map(self):
        return _offset_maps.OffsetMap(self.map_memory, self.load_factor)


DEFAULT_CONFIG = CleanerConfig()


class Throttler:
    """Kafka's Throttler, as its cleaner uses it: every byte the cleaner reads
    or writes is counted (``maybe_throttle``), and once a check interval
    (300 ms) has passed, a rate above ``rate()`` bytes per second sleeps
    until the bytes of the interval fit the rate, then a new interval starts.
    The sleep goes in slices of at most 100 ms, reading ``rate()`` again in
    each (a dynamic change of ``log.cleaner.io.max.bytes.per.second`` applies
    to the sleep in progress) and ending early when ``should_stop()``; a rate
    of 0 or less waits until it changes. Owned by one cleaner (one thread);
    ``clock`` and ``sleep`` are ``time``'s unless a test gives its own."""

    CHECK_INTERVAL_S = 0.3
    SLICE_S = 0.1

    def __init__(self, rate, clock=time.monotonic, sleep=time.sleep):
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self.period_start = clock()
        self.observed = 0

    def maybe_throttle(self, observed: int, should_stop=None) -> None:
        self.observed += observed
        elapsed = self.clock() - self.period_start
        if elapsed < self.CHECK_INTERVAL_S:
            return
        if self.observed > self.rate() * elapsed:
            while True:  # each turn sleeps a slice, or ends the wait
                rate = self.rate()
                now = self.clock()
                wait = self.SLICE_S if rate <= 0 else self.period_start + self.observed / rate - now
                if wait <= 0 or (should_stop is not None and should_stop()):
                    break
                self.sleep(min(wait, self.SLICE_S))
        self.period_start = self.clock()
        self.observed = 0


# ------------------------------------------------------------------ the checkpoint


def read_cleaner_checkpoint(log_dir: str) -> dict:
    try:
        return checkpoints.read_offset_checkpoint(os.path.join(log_dir, CLEANER_CHECKPOINT))
    except (FileNotFoundError, checkpoints.CheckpointError):
        return {}


def _rewrite_cleaner_checkpoint(log_dir: str, change) -> None:
    """Read-modify-write of the dir's checkpoint: ``change(offsets)`` edits the
    dict in place and returns whether to write it. The supervisor, the
    coordinator process and the replica fetchers (truncations) all update
    the same file, so this holds an exclusive flock on the dir."""
    fd = os.open(log_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        offsets = read_cleaner_checkpoint(log_dir)
        if change(offsets):
            checkpoints.write_offset_checkpoint(os.path.join(log_dir, CLEANER_CHECKPOINT), offsets)
    finally:
        os.close(fd)  # releases the lock


def update_cleaner_checkpoint(log_dir: str, topic: str, partition: int, offset: int | None) -> None:
    """Set (``offset`` None: remove) one partition's entry; entries of
    partitions whose directory is gone are dropped on the way."""
    def change(offsets):
        if offset is None:
            offsets.pop((topic, partition), None)
        else:
            offsets[(topic, partition)] = offset
        for tp in [tp for tp in offsets if tp != (topic, partition)
                   and not os.path.isdir(os.path.join(log_dir, f"{tp[0]}-{tp[1]}"))]:
            del offsets[tp]
        return True

    _rewrite_cleaner_checkpoint(log_dir, change)


def truncate_cleaner_checkpoint(log_dir: str, topic: str, partition: int, offset: int) -> None:
    """Kafka's maybeTruncateCheckpoint, after a truncation: an entry above
    ``offset`` (the active segment's base) comes down to it, so records
    written again above it count as dirty."""
    def change(offsets):
        if offsets.get((topic, partition), 0) <= offset:
            return False
        offsets[(topic, partition)] = offset
        return True

    if read_cleaner_checkpoint(log_dir).get((topic, partition), 0) > offset:
        _rewrite_cleaner_checkpoint(log_dir, change)


# ------------------------------------------------------------------ scheduling


def _floor(segments, offset: int):
    """Index of the segment holding ``offset`` (the last one with base <= offset), at least 0."""
    i = 0
    for j, segment in enumerate(segments):
        if segment.base_offset <= offset:
            i = j
    return i


def to_clean(lg, now_ms: int, checkpoint: int | None) -> LogToClean | None:
    """Kafka's cleanableOffsets + LogToClean for ``lg`` (under its lock); None for an empty log."""
    segments = lg.segments()
    start, end = lg.log_start_offset, lg.log_end_offset
    first_dirty, reset = (start, checkpoint is not None) \
        if checkpoint is None or checkpoint < start or checkpoint > end else (checkpoint, False)
    active_base = segments[-1].base_offset
    uncleanable = min(lg.last_stable_offset(), active_base)
    dirty_inactive = segments[_floor(segments, first_dirty):-1] if first_dirty < active_base else []
    lag_ms = max(lg.config.min_compaction_lag_ms, 0)
    if lag_ms > 0:
        young = [s.base_offset for s in dirty_inactive if s.largest_timestamp() > now_ms - lag_ms]
        if young:
            uncleanable = min(uncleanable, young[0])
    uncleanable = max(first_dirty, uncleanable)
    first_uncleanable = segments[_floor(segments[:-1], uncleanable)].base_offset \
        if len(segments) > 1 and uncleanable < active_base else active_base
    clean_bytes = sum(s.size for s in segments if s.base_offset < first_dirty)
    low = min(first_dirty, first_uncleanable)
    cleanable_bytes = sum(s.size for i, s in enumerate(segments)
                          if s.base_offset < first_uncleanable
                          and (s.base_offset >= low or (i + 1 < len(segments) and segments[i + 1].base_offset > low)))
    total = clean_bytes + cleanable_bytes
    if total == 0:
        return None
    # Kafka's maxCompactionDelay: the earliest first-batch timestamp of the dirty inactive segments.
    firsts = [t for t in (s.first_batch_max_timestamp() for s in dirty_inactive) if t > 0]
    clean_until = now_ms - max(lg.config.max_compaction_lag_ms, 0)
    need_now = bool(firsts) and min(firsts) < clean_until
    return LogToClean(first_dirty, uncleanable, first_uncleanable, clean_bytes, cleanable_bytes,
                      cleanable_bytes / total, need_now, reset)


def _eligible(lg, ltc: LogToClean | None) -> bool:
    return ltc is not None and ((ltc.need_compaction_now and ltc.cleanable_bytes > 0)
                                or ltc.ratio > lg.config.min_cleanable_dirty_ratio)


def _checkpoint_of(lg) -> int | None:
    return read_cleaner_checkpoint(os.path.dirname(lg.dir)).get((lg.topic, lg.partition))


def dirty_ratio(lg, now_ms: int, checkpoints_of_dir: dict | None = None) -> float:
    """The log's cleanable ratio now (0 for a log that is not compacted or is
    empty); ``checkpoints_of_dir``: its log dir's cleaner checkpoint, if read already."""
    if "compact" not in lg.config.cleanup_policy:
        return 0.0
    with lg.lock():
        checkpoint = _checkpoint_of(lg) if checkpoints_of_dir is None \
            else checkpoints_of_dir.get((lg.topic, lg.partition))
        ltc = to_clean(lg, now_ms, checkpoint)
    return ltc.ratio if ltc else 0.0


def clean_logs(logs, now_ms: int, config: CleanerConfig = DEFAULT_CONFIG, should_stop=None,
               throttler: Throttler | None = None) -> int:
    """One cleaner pass over ``logs``: every eligible compacted log, dirtiest
    first; records the dirtiest ratio in ``stats``; returns segments rewritten.
    ``should_stop()``, if given, is asked between logs and between a log's
    groups: True gives the pass up there (nothing half-swapped).
    ``throttler``: the cleaner's, kept across passes; else one at
    ``config``'s rate for this pass."""
    if throttler is None:
        throttler = Throttler(lambda: config.io_max_bytes_per_second)
    ranked = []
    by_dir: dict[str, dict] = {}  # each dir's checkpoint read once a pass, not once a log
    for lg in logs:
        try:
            log_dir = os.path.dirname(lg.dir)
            if log_dir not in by_dir:
                by_dir[log_dir] = read_cleaner_checkpoint(log_dir)
            ranked.append((dirty_ratio(lg, now_ms, by_dir[log_dir]), lg))
        except Exception:
            log.exception("%s: computing the dirty ratio failed", lg.dir)
    stats.max_dirty_percent = int(100 * max((r for r, _ in ranked), default=0.0))
    rewritten = 0
    cleaned_before = stats.passes
    longest = 0.0
    for _ratio, lg in sorted(ranked, key=lambda x: -x[0]):
        if should_stop is not None and should_stop():
            break
        passes = stats.passes
        try:
            rewritten += clean_log(lg, now_ms, config=config, should_stop=should_stop, throttler=throttler)
            if stats.passes > passes:
                longest = max(longest, stats.last_clean_time_secs)
        except Exception:
            log.exception("%s: cleaning failed", lg.dir)
    if stats.passes > cleaned_before:
        # Kafka's max-clean-time-secs is its cleaners' last cleaning's: a pass
        # that cleaned nothing leaves it (and the recopy percent) as it was.
        stats.max_clean_time_secs = longest
    probes.log.cleaned(stats.max_dirty_percent, stats.max_clean_time_secs, stats.recopy_percent)
    return rewritten


# ------------------------------------------------------------------ one pass


def _key_hash(key) -> bytes:
    """The offset map's key: the record key's MD5 (Kafka's SkimpyOffsetMap
    stores the same 16-byte digest instead of the key)."""
    return hashlib.md5(key, usedforsecurity=False).digest()


def _file_identity(path: str) -> tuple:
    """What changes when a segment file is replaced, truncated or written to."""
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


# A segment as the pass saw it under the lock: what it reads, and what the
# swap checks is still so.
_Seg = namedtuple("_Seg", ("base_offset", "path", "size", "index_entries", "time_index_entries", "identity"))


def clean_log(lg, now_ms: int, force: bool = False, config: CleanerConfig = DEFAULT_CONFIG,
              should_stop=None, throttler: Throttler | None = None) -> int:
    """Clean ``lg`` if it is compacted and due; returns the segments rewritten.
    ``force`` (tests, tools): clean now, from the log start as if there were
    no checkpoint, whatever the ratio. ``throttler``: the one ``clean_logs``
    shares across its logs; None cleans unthrottled.

    The log's lock is held twice, briefly: to decide and note what the
    segments are, and to swap the cleaned groups in. Reading the segments,
    building the offset map and writing the cleaned groups happen without
    it (Kafka's cleaner threads likewise hold the log's lock only to replace
    segments), so producers and readers of the partition go on meanwhile.
    A group whose segments changed in between (truncated, deleted, replaced)
    makes the pass give up its work; the next pass starts again."""
    if "compact" not in lg.config.cleanup_policy:
        return 0
    log_dir = os.path.dirname(lg.dir)
    started = time.monotonic()
    with lg.lock():
        checkpoint = None if force else _checkpoint_of(lg)
        ltc = to_clean(lg, now_ms, checkpoint)
        if ltc is not None and ltc.reset_checkpoint:
            update_cleaner_checkpoint(log_dir, lg.topic, lg.partition, ltc.first_dirty_offset)
        if not (_eligible(lg, ltc) or (force and ltc is not None and ltc.cleanable_bytes > 0)):
            return 0
        cleaning = _Pass(lg, now_ms, ltc, config, should_stop, throttler)
    try:
        try:
            end_offset, read, written = cleaning.build()
        except BatchReadStopped:
            return 0
        rewritten = 0
        if end_offset is not None:
            with lg.lock():
                rewritten = cleaning.swap()
                if rewritten >= 0:
                    update_cleaner_checkpoint(log_dir, lg.topic, lg.partition, end_offset)
    finally:
        cleaning.discard_leftovers()
    if rewritten < 0:
        log.info("%s: segments changed while they were cleaned; the pass is given up", lg.dir)
        return 0
    elapsed = time.monotonic() - started
    stats.passes += 1
    stats.last_clean_time_secs = elapsed
    stats.recopy_percent = int(100 * written / read) if read else 0
    if rewritten:
        log.info("%s: cleaned up to offset %s, %d segments rewritten, %.1f%% of %d bytes recopied in %.3f s",
                 lg.dir, end_offset, rewritten, 100 * written / max(read, 1), read, elapsed)
    return rewritten


class _Pass:
    """One cleaning pass of one log (Kafka's doClean): made under the log's
    lock (what the segments are), ``build`` without it, ``swap`` under it."""

    def __init__(self, lg, now_ms: int, ltc: LogToClean, config: CleanerConfig = DEFAULT_CONFIG,
                 should_stop=None, throttler: Throttler | None = None):
        self.lg = lg
        self.should_stop = should_stop
        # Called with the bytes of each read and each write.
        self.throttle = None if throttler is None else \
            (lambda n: throttler.maybe_throttle(n, should_stop))
        self.now_ms = now_ms
        self.ltc = ltc
        self.config = config
        self.horizon_ms = now_ms + lg.config.delete_retention_ms
        # Kafka's CleanedTransactionMetadata, carried across the groups of the pass.
        self.committed_seen: set[int] = set()
        self.aborted_seen: dict[int, bool] = {}
        segments = lg.segments()
        active = len(segments) - 1
        self.segments = [_Seg(s.base_offset, s.path, s.size, s.offset_index.entries, s.time_index.entries,
                              None if i == active else _file_identity(s.path)) for i, s in enumerate(segments)]
        # Kafka's lastRecordsOfActiveProducers. Kafka's broker drops a
        # producer idle for producer.id.expiration.ms with no open transaction
        # from its producer state (isProducerExpired, checked every
        # producer.id.expiration.check.interval.ms, 10 min); kafkapy's
        # producer state has no timed expiry, so the cleaner applies the same
        # rule here: without it an idle producer's last batch and last
        # transaction's marker would stay for ever.
        expiry_ms = config.producer_id_expiration_ms
        self.last_of_producer = {e.producer_id: (e.last_data_offset, e.producer_epoch)
                                 for e in lg.active_producers()
                                 if e.current_txn_first_offset >= 0 or now_ms - e.last_timestamp < expiry_ms}
        self.built: list[tuple[list[_Seg], list, bool]] = []  # (group, .txnindex entries, changed)
        self.cleaned_paths: list[str] = []

    def _batches(self, segment: _Seg):
        return file_batches(segment.path, segment.size, self.config.io_buffer_size, self.should_stop,
                                self.throttle)

    def build(self):
        """Map, clean and write every group to its ``.cleaned`` file; ``(end
        offset or None when there is nothing to clean, bytes read, bytes written)``."""
        segments = self.segments
        self.aborted = _aborted_batches(self._batches(s) for s in segments)
        # Kafka maps and cleans up to the base of the segment holding the
        # first uncleanable offset: every cleaned segment ends below it.
        upper = self.ltc.first_uncleanable_offset
        self.offset_map, latest = self._offset_map(segments, upper)
        if latest < 0:
            return None, 0, 0
        end_offset = latest + 1
        self.upper = upper
        self.latest = latest
        cleaned = [s for s in segments[:-1] if s.base_offset < end_offset]
        groups = group_segments_by_size(cleaned, self.lg.config.segment_bytes, self.lg.config.max_index_size, upper)
        read = written = 0
        for group in groups:
            entries, changed, size = self._clean_group(group)
            read += sum(s.size for s in group)
            if not changed and len(group) == 1:
                written += group[0].size
                continue
            written += size
            self.built.append((group, entries, changed))
        return end_offset, read, written

    def swap(self) -> int:
        """Under the log's lock: swap the built groups in; the segments
        rewritten, or -1 (nothing swapped) when a group's segments are not
        what the pass read any more."""
        lg = self.lg
        live = lg.segments()
        bases = {s.base_offset: s for s in live[:-1]}  # never the active segment
        for group, _entries, _changed in self.built:
            for seg in group:
                try:
                    same = seg.base_offset in bases and _file_identity(seg.path) == seg.identity
                except FileNotFoundError:
                    same = False
                if not same:
                    return -1
        rewritten = 0
        done = False
        try:
            for group, entries, _changed in self.built:
                _swap_in(lg, [bases[seg.base_offset] for seg in group], entries)
                rewritten += len(group)
            done = True
        finally:
            if self.built:
                # Whatever was swapped, other processes must reload; after a
                # failure part-way this process's own list is not to be
                # trusted either.
                lg.local._bump_generation()
                if not done:
                    lg.local._generation = -1
        return rewritten

    def discard_leftovers(self) -> None:
        """Remove the ``.cleaned`` files no swap took."""
        for path in self.cleaned_paths:
            unlink_if_exists(path)

    def _offset_map(self, segments, upper: int):
        """Kafka's buildOffsetMap over [first dirty, upper): key digest -> last
        offset, and the last offset mapped. When the next batch would take the
        map past its capacity it stops there (Kafka's "offset map is full"):
        the pass cleans up to the last offset mapped, and the next pass goes
        on from it. A first batch with more keys than the map holds cannot be
        cleaned (Kafka refuses the log likewise)."""
        first_dirty = self.ltc.first_dirty_offset
        offsets = self.config.new_offset_map()
        room = offsets.capacity
        latest = -1
        for i, s in enumerate(segments):
            if s.base_offset >= upper:
                break
            if i + 1 < len(segments) and segments[i + 1].base_offset <= first_dirty:
                continue  # wholly below the first dirty offset: clean already
            for h, view in self._batches(s):
                if h.base_offset < first_dirty or h.base_offset >= upper:
                    continue
                if not h.attributes & _CONTROL and h.base_offset not in self.aborted:
                    if len(offsets) and len(offsets) + h.records_count > room:
                        log.info("%s: the offset map is full (%d keys); cleaning up to offset %d",
                                 self.lg.dir, len(offsets), latest)
                        return offsets, latest
                    put = offsets.put
                    try:
                        for offset, _ts, key, _value, _hdrs in decode_records(view):
                            if key is not None:
                                put(_key_hash(key), offset)
                    except OverflowError:
                        raise OverflowError(
                            f"{self.lg.dir}: the batch at offset {h.base_offset} has more keys than the offset map "
                            f"holds ({room}): raise log.cleaner.dedupe.buffer.size or lower log.cleaner.threads"
                        ) from None
                latest = max(latest, h.base_offset + h.last_offset_delta)
        return offsets, latest

    def _emptied(self, h) -> bytes:
        """What is left of batch ``h`` with no records (Kafka's RETAIN_EMPTY or
        DELETE): an active producer's last data batch (or last marker, if it
        has no data) stays as an empty batch with its producer fields; the
        last batch before the uncleanable offset as a plain empty batch (its
        offset must not be lost); any other goes."""
        last = self.last_of_producer.get(h.producer_id) if h.producer_id >= 0 else None
        if last is not None:
            last_data_offset, epoch = last
            if (h.base_offset + h.last_offset_delta == last_data_offset if last_data_offset >= 0
                    else h.attributes & _CONTROL and h.producer_epoch == epoch):
                return _empty_like(h)
        if h.base_offset + h.last_offset_delta + 1 == self.upper:
            return build_batch([], base_offset=h.base_offset + h.last_offset_delta)
        return b""

    def _emptied_again(self, h, view):
        """``_emptied`` for a batch that is empty already: None (copy as is)
        while it is still to be kept as it is."""
        out = self._emptied(h)
        return None if out == bytes(view) else out

    def _clean_group(self, group):
        """Write the group's new bytes to ``<base>.log.cleaned`` (fsynced);
        ``(its .txnindex entries, whether anything differs from the old, bytes written)``."""
        old_entries = {}
        for s in group:
            for e in TransactionIndex(self.lg.dir, s.base_offset).entries():
                old_entries[e.last_offset] = e
        path = os.path.join(self.lg.dir, segment_file_name(group[0].base_offset, LOG_SUFFIX)) + CLEANED_SUFFIX
        self.cleaned_paths.append(path)
        entries = []
        changed = False
        last_offset = group[0].base_offset
        empty_batches = []  # of a single segment holding nothing else: the bytes of its empty batch
        with _CleanedFile(path, self.config.io_buffer_size, self.throttle) as out:
            for s in group:
                for h, view in self._batches(s):
                    last_offset = h.base_offset + h.last_offset_delta
                    if len(group) == 1 and h.records_count == 0:
                        empty_batches.append(bytes(view))
                    kept_bytes, keep_entry = self._clean_batch(h, view)
                    if kept_bytes is None:
                        out.write(view)
                    else:
                        changed = True
                        out.write(kept_bytes)
                    if keep_entry and last_offset in old_entries:
                        entries.append(old_entries[last_offset])
            if changed and not out.size:
                # Keep one empty batch at the group's last offset: offsets never go backwards across segments.
                placeholder = build_batch([], base_offset=last_offset)
                out.write(placeholder)
                # A segment that is that batch already (an earlier pass's
                # placeholder) is not rewritten at every pass.
                changed = group[0].size != len(placeholder) or empty_batches != [placeholder]
            out.sync()
        if not changed and len(entries) != len(old_entries):
            changed = True
        return entries, changed, out.size

    def _clean_batch(self, h, view):
        """``(new bytes or None for "copy as is", keep this marker's .txnindex entry)`` for one batch."""
        pid = h.producer_id
        has_horizon = bool(h.attributes & _DELETE_HORIZON)
        horizon = h.base_timestamp if has_horizon else None
        if h.attributes & _CONTROL:
            if h.records_count == 0:
                # A marker an earlier pass emptied (an active producer's last
                # one): Kafka discards it once that is no longer so.
                return self._emptied_again(h, view), False
            try:
                commit = parse_end_txn_marker(view).is_commit
            except CorruptRecordError:
                return None, False
            if commit:
                can_discard = pid not in self.committed_seen
                self.committed_seen.discard(pid)
            else:
                can_discard = not self.aborted_seen.pop(pid, False)
            if h.base_offset > self.latest:
                return None, not can_discard
            if can_discard and has_horizon and horizon <= self.now_ms:
                return self._emptied(h), False
            if can_discard and not has_horizon:
                return _rebuilt(h, decode_records(view), self.horizon_ms, control=True), False
            return None, not can_discard
        discard = False
        if h.attributes & _TRANSACTIONAL:
            if h.base_offset in self.aborted:
                self.aborted_seen[pid] = True
                discard = True
            else:
                self.committed_seen.add(pid)
        if h.base_offset > self.latest:
            return None, False  # past the offset map (not below the uncleanable offset): kept as it is
        if h.records_count == 0:
            # A batch an earlier pass emptied (RETAIN_EMPTY): Kafka's filterTo
            # writes an empty batch only while it is still an active
            # producer's last (or the last below the uncleanable offset here).
            return self._emptied_again(h, view), False
        records = decode_records(view)
        if discard:
            kept = []
        else:
            kept = [r for r in records if self._retain(r, horizon)]
        tombstones = any(r[3] is None for r in kept)
        new_horizon = horizon if has_horizon else (self.horizon_ms if tombstones else None)
        if len(kept) == len(records) and new_horizon == horizon:
            return None, False
        if not kept:
            return self._emptied(h), False
        out = bytearray()
        run: list = []
        for rec in kept + [None]:
            if run and (rec is None or rec[0] != run[-1][0] + 1):
                out += _rebuilt(h, run, new_horizon)
                run = []
            if rec is not None:
                run.append(rec)
        return bytes(out), False

    def _retain(self, record, horizon) -> bool:
        offset, _ts, key, value, _hdrs = record
        if offset > self.latest:
            return True
        if key is None:
            return False
        if offset < self.offset_map.get(_key_hash(key)):
            return False
        return value is not None or horizon is None or self.now_ms < horizon


def group_segments_by_size(segments, max_size: int, max_index_size: int, first_uncleanable_offset: int):
    """Kafka's groupSegmentsBySize: runs of adjacent segments whose log bytes
    total at most ``max_size``, whose offset and time index bytes each total
    at most ``max_index_size``, and whose offsets stay within an int of the
    group's base (relative offsets in the index are 4 bytes)."""
    groups = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].index_entries * 8
        time_index_size = segments[i].time_index_entries * 12
        i += 1
        while i < len(segments):
            s = segments[i]
            last = segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable_offset - 1
            if not (log_size + s.size <= max_size
                    and index_size + s.index_entries * 8 <= max_index_size
                    and time_index_size + s.time_index_entries * 12 <= max_index_size
                    and (s.size == 0 or last - group[0].base_offset <= _INT_MAX)):
                break
            group.append(s)
            log_size += s.size
            index_size += s.index_entries * 8
            time_index_size += s.time_index_entries * 12
            i += 1
        groups.append(group)
    return groups


def _aborted_batches(contents) -> set:
    """Base offsets of the transactional (non-control) batches whose
    producer's next marker in the log is an ABORT. Only those are kept (a
    committed or still open transaction's batches are cleaned as any), so
    memory follows the aborted batches and the open transactions, not the
    log."""
    aborted = set()
    open_batches: dict[int, list] = {}  # producer id -> base offsets of its open transaction's batches
    for batches in contents:
        for h, view in batches:
            if h.attributes & _CONTROL:
                try:
                    commit = parse_end_txn_marker(view).is_commit
                except CorruptRecordError:
                    continue
                bases = open_batches.pop(h.producer_id, ())
                if not commit:
                    aborted.update(bases)
            elif h.attributes & _TRANSACTIONAL:
                open_batches.setdefault(h.producer_id, []).append(h.base_offset)
    return aborted


def _with_delete_horizon(data: bytes) -> bytes:
    """``data`` (one v2 batch built with its base timestamp at the horizon) with the
    delete-horizon attribute set and the CRC recomputed."""
    buf = bytearray(data)
    (attributes,) = struct.unpack_from(">h", buf, _ATTRIBUTES_AT)
    struct.pack_into(">h", buf, _ATTRIBUTES_AT, attributes | _DELETE_HORIZON)
    struct.pack_into(">I", buf, _CRC_AT, crc32c.crc32c(bytes(buf[_ATTRIBUTES_AT:])))
    return bytes(buf)


def _rebuilt(h, run, horizon_ms=None, control: bool = False) -> bytes:
    """Records ``run`` (consecutive offsets) of batch ``h`` as one new
    uncompressed batch, with the batch's producer, sequence, leader epoch,
    timestamp type and flags; ``horizon_ms`` set: Kafka's delete horizon in
    the base timestamp (record timestamps stay, as deltas from it)."""
    first = run[0][0]
    sequence = -1 if h.base_sequence < 0 else (h.base_sequence + first - h.base_offset) % (1 << 31)
    data = build_batch([(k, v, hd, ts) for _o, ts, k, v, hd in run], base_offset=first,
                       partition_leader_epoch=h.partition_leader_epoch, base_timestamp=horizon_ms,
                       producer_id=h.producer_id, producer_epoch=h.producer_epoch, base_sequence=sequence,
                       timestamp_type=1 if h.attributes & _LOG_APPEND_TIME else 0,
                       is_transactional=bool(h.attributes & _TRANSACTIONAL), is_control=control)
    return _with_delete_horizon(data) if horizon_ms is not None else data


def _empty_like(h) -> bytes:
    """Kafka's RETAIN_EMPTY for a dense log: an empty batch at ``h``'s last
    offset with its producer, epoch, last sequence, leader epoch, max
    timestamp and flags (what producer state reads back)."""
    last = h.base_offset + h.last_offset_delta
    sequence = -1 if h.base_sequence < 0 else (h.base_sequence + h.last_offset_delta) % (1 << 31)
    return build_batch([], base_offset=last, partition_leader_epoch=h.partition_leader_epoch,
                       base_timestamp=h.max_timestamp, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                       base_sequence=sequence, timestamp_type=1 if h.attributes & _LOG_APPEND_TIME else 0,
                       is_transactional=bool(h.attributes & _TRANSACTIONAL),
                       is_control=bool(h.attributes & _CONTROL))


# ------------------------------------------------------------------ the swap


def _write_synced(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


class _CleanedFile:
    """A group's ``.cleaned`` log, written through a buffer of ``buffer_bytes``;
    ``throttle(n)``, if given, is told each write's bytes."""

    def __init__(self, path: str, buffer_bytes: int, throttle=None):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.buffer = bytearray()
        self.buffer_bytes = max(buffer_bytes, 4096)
        self.size = 0
        self.throttle = throttle

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)

    def write(self, data) -> None:
        self.buffer += data
        self.size += len(data)
        if len(self.buffer) >= self.buffer_bytes:
            self._flush()

    def _flush(self) -> None:
        view = memoryview(self.buffer)
        while view:
            view = view[os.write(self.fd, view):]
        view.release()
        if self.throttle is not None and self.buffer:
            self.throttle(len(self.buffer))
        del self.buffer[:]

    def sync(self) -> None:
        self._flush()
        os.fsync(self.fd)


def _swap_in(lg, group, entries) -> None:
    """Swap ``<base>.log.cleaned`` (written and fsynced) in for ``group`` (the
    log's own segments, in its LocalLog's list; under its lock)."""
    base = group[0].base_offset
    log_path = os.path.join(lg.dir, segment_file_name(base, LOG_SUFFIX))
    txn_path = os.path.join(lg.dir, segment_file_name(base, TXN_INDEX_SUFFIX))
    _write_synced(txn_path + CLEANED_SUFFIX, b"".join(encode_entry(e) for e in entries))
    os.rename(txn_path + CLEANED_SUFFIX, txn_path + SWAP_SUFFIX)
    try:
        os.rename(log_path + CLEANED_SUFFIX, log_path + SWAP_SUFFIX)  # the commit point
    except OSError:
        unlink_if_exists(txn_path + SWAP_SUFFIX)  # before the commit point: the old segments stand
        raise
    checkpoints.fsync_dir(lg.dir)
    for segment in group:
        segment.close()
    complete_swap(lg.dir, base, [s.base_offset for s in group[1:]])
    local = lg.local
    first = local._segments.index(group[0])
    fresh = local._open_segment(base)
    fresh.recover()
    fresh.on_become_inactive()
    local._segments[first:first + len(group)] = [fresh]
    local._bases[first:first + len(group)] = [base]
