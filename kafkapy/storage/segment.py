"""LogSegment: one ``<base_offset>.log`` file plus its ``.index`` and ``.timeindex``.

File names are the base offset as 20 zero-padded digits (Kafka's
``%020d``).  The ``.log`` file is v2 record batches back to back, exactly as
received from producers except for the baseOffset/partitionLeaderEpoch (and,
with LogAppendTime, the maxTimestamp/CRC) that ``_core.assign_offsets``
patched in.  Only ``_core`` looks inside a batch; here we read headers.

All I/O uses ``os.pread``/``os.pwrite`` at explicit positions, never a
buffered file object, so bytes written by one process are visible to the
others through the page cache at once.

Ownership: a LogSegment object belongs to one Log in one process and is used
only under the partition lock.  For the active segment the counters below
(``size``, index entry counts, ``bytes_since_last_index_entry``, max
timestamp) are copies of PartitionState that Log refreshes on every call
(``Log._sync``) and publishes back after a change; for inactive segments
they are derived from the (immutable, trimmed) files.
"""

import logging
import os
import struct

from kafkapy._core import load
from kafkapy.storage.checkpoints import fsync_if_exists
from kafkapy.storage.file_cache import FILE_CACHE
from kafkapy.storage.index import OffsetIndex, TimeIndex

batch = load("batch")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
# The cleaner's files (storage.cleaner writes them, storage.log_loader completes or removes them).
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

HEADER_SIZE = batch.BATCH_HEADER_SIZE   # 61
LOG_OVERHEAD = batch.LOG_OVERHEAD       # 12
_INT32_MAX = 2**31 - 1

# Header walks read this much at a time.  64 KiB holds ~16 index intervals
# of 4 KiB, i.e. every batch between two offset-index entries in one pread.
_READ_CHUNK = 64 * 1024

# A fetch cut inside a batch is moved back to the end of the last whole batch
# if the first this many batches reach the cut: with big batches (librdkafka's
# batch.size is 1 MB) the partial tail was up to a third of the bytes sent,
# with small ones it is at most 1/8 of the slice and not worth the preads.
# The walk is not started when the first batch is under 1/8 of the cut (it
# would not reach it unless later batches are bigger): a consumer's 64 KiB
# Fetch of 100-byte batches made 8 preads for nothing (~10 us of its ~70).
_WHOLE_BATCH_WALK = 8
_OFFSET_AND_LENGTH = struct.Struct(">qi")
# Recovery reads 1 MiB at a time (one default max.message.bytes batch fits).
_RECOVER_CHUNK = 1024 * 1024

logger = logging.getLogger("kafkapy.storage")


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def segment_bases(dir_path: str) -> list[int]:
    """The base offsets of the ``.log`` files in ``dir_path``, ascending."""
    bases = []
    for name in os.listdir(dir_path):
        if name.endswith(LOG_SUFFIX) and len(name) == 20 + len(LOG_SUFFIX) and name[:20].isdigit():
            bases.append(int(name[:20]))
    bases.sort()
    return bases


def unlink_if_exists(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class BatchReadStopped(Exception):
    """``file_batches`` was told to stop (its ``should_stop``)."""


def file_batches(path: str, size: int, read_bytes: int, should_stop=None, throttle=None):
    """``(header, view)`` per batch of the first ``size`` bytes of the .log
    at ``path``, read ``read_bytes`` at a time (more for a larger batch), so
    memory stays at one read whatever the segment's size. Stops at a torn
    or short batch (a file truncated under the reader). ``should_stop()`` is
    asked before each read: True raises ``BatchReadStopped``; ``throttle(n)``
    is told each read's bytes. (The cleaner's reads, and the loader's of a
    swap file.)"""
    fd = os.open(path, os.O_RDONLY)
    try:
        position = 0
        want = max(read_bytes, LOG_OVERHEAD)
        while position < size:
            if should_stop is not None and should_stop():
                raise BatchReadStopped()
            asked = min(want, size - position)
            chunk = os.pread(fd, asked, position)
            if throttle is not None:
                throttle(len(chunk))
            headers, end, _error = batch.scan_batches(chunk, 0, -1, False)
            if not headers:
                if len(chunk) < asked or len(chunk) < LOG_OVERHEAD:
                    return  # the file is shorter than it was (truncated under the reader)
                need = struct.unpack_from(">i", chunk, 8)[0] + LOG_OVERHEAD
                if need <= len(chunk) or position + need > size:
                    return  # not a batch, or one cut short: nothing more to read
                want = need
                continue
            view = memoryview(chunk)
            for h in headers:
                yield h, view[h.position:h.position + h.batch_length + LOG_OVERHEAD]
            position += end
            want = max(read_bytes, LOG_OVERHEAD)
    finally:
        os.close(fd)


def iter_headers(segment, start: int, end: int, chunk_bytes: int = _READ_CHUNK):
    """Yield the BatchHeader of every batch in ``[start, end)`` of ``segment``'s .log, ``position`` set to its file position.

    ``chunk_bytes``: how much each pread brings (``translate_offset``, which
    stops within one index interval, asks for that much).

    ``segment.fd`` is re-read for every pread: between two steps of this
    generator the caller may open other files, and the file cache may close
    this one (a kept descriptor number could then name another file).

    No CRC check: this walks data already validated on append/recovery.  A
    batch whose header would run past ``end`` stops the walk.
    """
    position = start
    chunk = b""
    chunk_start = start
    while position + HEADER_SIZE <= end:
        rel = position - chunk_start
        if rel < 0 or rel + HEADER_SIZE > len(chunk):
            chunk_start = position
            chunk = os.pread(segment.fd, min(chunk_bytes, end - position), position)
            rel = 0
            if len(chunk) < HEADER_SIZE:
                return
        header = batch.read_header(chunk, rel)
        size = header.batch_length + LOG_OVERHEAD
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            return
        yield header._replace(position=position)
        position += size


class LogSegment:
    def __init__(self, dir_path: str, base_offset: int, fd: int, size: int,
                 offset_index: OffsetIndex, time_index: TimeIndex, index_interval_bytes: int,
                 max_index_size: int, inode: int = 0, path: str | None = None):
        """``fd`` -1: not open yet (opened on first use through FILE_CACHE).
        ``path``: the .log file's (derived from the others if None)."""
        self.dir = dir_path
        self.base_offset = base_offset
        self.path = path or os.path.join(dir_path, segment_file_name(base_offset, LOG_SUFFIX))
        self._fd = fd
        if fd >= 0:
            FILE_CACHE.opened(self)
            inode = os.fstat(fd).st_ino
        self._inode = inode
        self.size = size
        self.offset_index = offset_index
        self.time_index = time_index
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.bytes_since_last_index_entry = 0
        # Max batch timestamp in the segment and the last offset of that batch
        # (Kafka's maxTimestampAndOffsetSoFar); -1/-1 until known.
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._max_timestamp_loaded = False

    # ---- the descriptor (lazy, bounded by FILE_CACHE) ----

    @property
    def fd(self) -> int:
        fd = self._fd
        if fd >= 0:
            FILE_CACHE.touch(self)
            return fd
        fd = self._fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        FILE_CACHE.opened(self)
        return fd

    def _evict(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    @property
    def inode(self) -> int:
        """The .log file's inode (FileRegion names it so a sendfile never reads a replaced file)."""
        if not self._inode:
            self._inode = os.fstat(self.fd).st_ino
        return self._inode

    # ---- opening ----

    @classmethod
    def open(cls, dir_path: str, base_offset: int, max_index_size: int, index_interval_bytes: int, *,
             size: int | None = None, index_entries: int | None = None, time_index_entries: int | None = None,
             create: bool = False) -> "LogSegment":
        """Open (or with ``create`` make fresh, replacing stale files) the segment at ``base_offset``.

        ``size``/``*_entries`` None: take them from the files (a trimmed, inactive segment).
        """
        # One join for the three names (joins were ~10 % of a worker's first use of a partition).
        stem = os.path.join(dir_path, f"{base_offset:020d}")
        log_path, index_path, time_path = stem + LOG_SUFFIX, stem + INDEX_SUFFIX, stem + TIME_INDEX_SUFFIX
        if create:
            for p in (log_path, index_path, time_path):
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
        fd = -1
        inode = 0
        if create:
            # Created now and appended to next: keep it open.
            fd = os.open(log_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        else:
            # Not opened: a clean start of 10,000 partitions would otherwise
            # hold 10,000 descriptors before serving anything.
            st = os.stat(log_path)
            inode = st.st_ino
            if size is None:
                size = st.st_size
        offset_index = time_index = None
        try:
            if size is None:
                size = os.fstat(fd).st_size
            offset_index = OffsetIndex(index_path, base_offset, max_index_size, index_entries)
            time_index = TimeIndex(time_path, base_offset, max_index_size, time_index_entries)
            return cls(dir_path, base_offset, fd, size, offset_index, time_index, index_interval_bytes,
                       max_index_size, inode, log_path)
        except BaseException:
            for index in (offset_index, time_index):
                if index is not None:
                    index.close()
            if fd >= 0:
                os.close(fd)
            raise

    @staticmethod
    def index_files_exist(dir_path: str, base_offset: int) -> bool:
        return all(os.path.exists(os.path.join(dir_path, segment_file_name(base_offset, s)))
                   for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX))

    # ---- writing ----

    def append(self, records, first_offset: int, headers, log_append_time_ms: int = -1) -> None:
        """Write ``records`` (offsets already assigned) at the end and index its batches.

        ``headers`` are the scan results for ``records`` (positions relative to
        it); their base offsets predate assignment, so offsets are recomputed
        from ``first_offset``.  Indexing follows Kafka's LogSegment.append: per
        batch, track the max timestamp; when more than index.interval.bytes
        were appended since the last entry, index this batch (its last offset
        -> its start position) and add a time-index entry for the max so far.
        """
        physical_position = self.size
        written = os.pwrite(self.fd, records, physical_position)
        if written < len(records):
            view = memoryview(records)
            while written < len(view):
                written += os.pwrite(self.fd, view[written:], physical_position + written)
        offset = first_offset
        interval = self.index_interval_bytes
        for h in headers:
            last_offset = offset + h.last_offset_delta
            max_timestamp = log_append_time_ms if log_append_time_ms >= 0 else h.max_timestamp
            if max_timestamp > self.max_timestamp:
                self.max_timestamp = max_timestamp
                self.offset_of_max_timestamp = last_offset
            size = h.batch_length + LOG_OVERHEAD
            # _maybe_index's first test inline: most batches add no entry.
            if self.bytes_since_last_index_entry > interval:
                self._maybe_index(last_offset, physical_position)
            physical_position += size
            self.bytes_since_last_index_entry += size
            offset = last_offset + 1
        self.size = physical_position

    def _maybe_index(self, last_offset: int, position: int) -> None:
        # A full index (possible only inside one huge append, since Log rolls
        # before appending to a full one) just gets no more entries: lookups
        # then scan further, which is slower but still correct.
        if (self.bytes_since_last_index_entry > self.index_interval_bytes
                and not self.offset_index.is_full and not self.time_index.is_full):
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0

    # ---- reading ----

    def translate_offset(self, offset: int, start_position: int = 0):
        """(position, header) of the first batch whose last offset >= ``offset``, or None.

        Offset-index lookup, then a forward walk over batch headers (at most
        about index.interval.bytes of them). Each pread of the walk brings one
        index interval and a header, not ``_READ_CHUNK``: a fetch at the log
        end (a follower's, a caught-up consumer's) read 64 KiB of the new
        records to find the first header among them, once per fetch and
        again for a high-watermark bound.
        """
        _, position = self.offset_index.lookup(offset)
        for h in iter_headers(self, max(position, start_position), self.size,
                              min(_READ_CHUNK, self.index_interval_bytes + HEADER_SIZE)):
            if h.base_offset + h.last_offset_delta >= offset:
                return h.position, h
        return None

    def read(self, start_offset: int, max_size: int, max_position: int, min_one_batch: bool):
        """Kafka's LogSegment.read: (position, length) of the slice to send, or None if
        ``start_offset`` is past the last batch of this segment.

        The slice starts at the batch containing ``start_offset`` and is cut at
        ``min(max_position - start, max(max_size, first batch size) if
        min_one_batch else max_size)`` bytes.  Kafka sends that cut as it falls
        and clients drop the partial trailing batch; here a cut inside a batch
        is moved back to the end of the last whole batch when that is found
        within ``_WHOLE_BATCH_WALK`` headers (the records a client gets are the
        same; the bytes it would have dropped are not sent).
        """
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, header = found
        first_batch_size = header.batch_length + LOG_OVERHEAD
        adjusted_max_size = max(max_size, first_batch_size) if min_one_batch else max_size
        if adjusted_max_size <= 0:
            return position, 0
        available = min(max_position, self.size) - position
        if first_batch_size < adjusted_max_size < available and \
                adjusted_max_size <= _WHOLE_BATCH_WALK * first_batch_size:
            return position, self._whole_batches(position, adjusted_max_size)
        return position, max(0, min(available, adjusted_max_size))

    def _whole_batches(self, position: int, length: int) -> int:
        """``length``, or less: the bytes from ``position`` (a batch start) up to
        the end of the last batch that ends within ``length``, if the walk over
        at most ``_WHOLE_BATCH_WALK`` batch headers reaches ``length``."""
        end = position + length
        at = position
        for _ in range(_WHOLE_BATCH_WALK):
            head = os.pread(self.fd, LOG_OVERHEAD, at)
            if len(head) < LOG_OVERHEAD:
                return length
            _, batch_length = _OFFSET_AND_LENGTH.unpack(head)
            if batch_length <= 0:
                return length
            if at + LOG_OVERHEAD + batch_length > end:
                return at - position if at > position else length
            at += LOG_OVERHEAD + batch_length
        return length

    def read_next_offset(self) -> int:
        """Offset after the last batch (the base offset if empty): scan from the last index entry."""
        next_offset = self.base_offset
        _, position = self.offset_index.lookup(self.offset_index.last_offset)
        for h in iter_headers(self, position, self.size):
            next_offset = h.base_offset + h.last_offset_delta + 1
        return next_offset

    def headers(self, start_position: int = 0):
        return iter_headers(self, start_position, self.size)

    # ---- timestamps ----

    def load_max_timestamp(self) -> None:
        """For an inactive segment: max timestamp from the time index's last entry, then a scan
        of the batches after it (Kafka's loadLargestTimestamp)."""
        if self._max_timestamp_loaded:
            return
        timestamp, offset = self.time_index.last_entry
        if timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = timestamp, offset
        _, position = self.offset_index.lookup(offset)
        for h in iter_headers(self, position, self.size):
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.base_offset + h.last_offset_delta
        self._max_timestamp_loaded = True

    def largest_timestamp(self) -> int:
        """Max batch timestamp, or the file's mtime when no batch has one (Kafka's largestTimestamp)."""
        self.load_max_timestamp()
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int):
        """(offset, batch max timestamp) of the first batch with max timestamp >= ``timestamp``.

        Kafka searches records inside that batch; records are opaque here, so
        the answer is the batch's base offset (raised to ``starting_offset``):
        never later than Kafka's, so a consumer seeking by time misses nothing.
        """
        _, index_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(index_offset, starting_offset))
        for h in iter_headers(self, position, self.size):
            last_offset = h.base_offset + h.last_offset_delta
            if h.max_timestamp >= timestamp and last_offset >= starting_offset:
                return max(h.base_offset, starting_offset), h.max_timestamp
        return None

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    # ---- recovery / truncation ----

    def recover(self, max_batch_size: int = -1) -> int:
        """Rebuild both indexes from the log, truncating at the first invalid batch.

        Returns the number of bytes truncated.  Besides scan_batches' checks
        (length, CRC, magic, codec, offset delta), a batch must have offsets
        above the previous one's and fit in the segment's relative-offset
        range: a stale batch left behind by a torn overwrite can carry a valid
        CRC, and it would otherwise resurrect old offsets.
        """
        file_size = os.fstat(self.fd).st_size
        # Kafka's index reset: no entries, full preallocated size for the rebuild.
        for index in (self.offset_index, self.time_index):
            index.reset()
            index.resize(self.max_index_size)
        self.bytes_since_last_index_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        position = 0
        next_offset = self.base_offset
        bad = False
        while position < file_size and not bad:
            want = min(_RECOVER_CHUNK, file_size - position)
            chunk = os.pread(self.fd, want, position)
            headers, end, error = batch.scan_batches(chunk, 0, -1, True, max_batch_size)
            if error and not headers and len(chunk) >= LOG_OVERHEAD:
                # The first batch may simply be bigger than the chunk: re-read it whole.
                size = int.from_bytes(chunk[8:12], "big", signed=True) + LOG_OVERHEAD
                if len(chunk) < size <= file_size - position:
                    chunk = os.pread(self.fd, size, position)
                    headers, end, error = batch.scan_batches(chunk, 0, -1, True, max_batch_size)
            if not headers:
                bad = error != 0 or end == 0
                break
            # A batch cut by the chunk end (not by a fault) is re-read next round.
            cut_by_chunk = error != 0 and position + len(chunk) < file_size
            chunk_start = position
            for h in headers:
                last_offset = h.base_offset + h.last_offset_delta
                if h.base_offset < next_offset or not self.can_convert_to_relative_offset(last_offset):
                    bad = True
                    break
                file_position = chunk_start + h.position
                if h.max_timestamp > self.max_timestamp:
                    self.max_timestamp = h.max_timestamp
                    self.offset_of_max_timestamp = last_offset
                size = h.batch_length + LOG_OVERHEAD
                self._maybe_index(last_offset, file_position)
                self.bytes_since_last_index_entry += size
                next_offset = last_offset + 1
                position = file_position + size
            if not bad and error and not cut_by_chunk:
                bad = True
        truncated = file_size - position
        if truncated:
            os.ftruncate(self.fd, position)
        self.size = position
        # As Kafka's recover does: a final time entry for the max timestamp,
        # then trimmed indexes (Log re-extends the active segment's).
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._max_timestamp_loaded = True
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset >= ``offset`` (the batch containing ``offset`` goes too).

        Returns the bytes removed.  Kafka's LogSegment.truncateTo.
        """
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        os.ftruncate(self.fd, position)
        self.size = position
        # Recompute the max timestamp and index cadence from what is left.
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._max_timestamp_loaded = False
        self.load_max_timestamp()
        _, last_position = self.offset_index.lookup(self.offset_index.last_offset)
        self.bytes_since_last_index_entry = self.size - last_position if self.offset_index.entries else self.size
        return removed

    def first_batch_max_timestamp(self) -> int:
        for h in iter_headers(self, 0, self.size):
            return h.max_timestamp
        return -1

    # ---- life cycle ----

    def on_become_inactive(self) -> None:
        """Kafka's onBecomeInactiveSegment: final time-index entry for the max timestamp, trim files."""
        self.time_index.append_final_entry(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        # Bytes past ``size`` can only be a torn write of a crashed process.
        if os.fstat(self.fd).st_size != self.size:
            os.ftruncate(self.fd, self.size)

    def resize_indexes(self, max_index_size: int) -> bool:
        a = self.offset_index.resize(max_index_size)
        b = self.time_index.resize(max_index_size)
        return a or b

    def flush(self, fsync=os.fsync) -> None:
        fsync(self.fd)
        self.offset_index.fsync(fsync)
        self.time_index.fsync(fsync)
        # The aborted-transaction index (storage.transaction_index), if the
        # segment has one: recovery rebuilds it only above the recovery point.
        fsync_if_exists(os.path.join(self.dir, segment_file_name(self.base_offset, TXN_INDEX_SUFFIX)), fsync)

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        if self._fd >= 0:
            FILE_CACHE.forget(self)
            self._evict()

    def file_paths(self) -> list[str]:
        return [os.path.join(self.dir, segment_file_name(self.base_offset, s))
                for s in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)]

    def rename_deleted(self) -> list[str]:
        """Close, then rename every file of the segment to ``<name>.deleted``; returns the new paths."""
        self.close()
        renamed = []
        for p in self.file_paths():
            try:
                os.rename(p, p + DELETED_SUFFIX)
                renamed.append(p + DELETED_SUFFIX)
            except FileNotFoundError:
                pass
        return renamed

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"
