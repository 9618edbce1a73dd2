"""Kafka's sparse segment indexes, memory-mapped MAP_SHARED.

File formats (big-endian, byte-for-byte Kafka's, so kafka-dump-log.sh reads them):

* ``.index`` (OffsetIndex): 8-byte entries ``relative_offset i32, position i32``.
  An entry maps the *last* offset of a batch to the file position where that
  batch starts (Kafka >= 3.x per-batch indexing); keys strictly increase.
* ``.timeindex`` (TimeIndex): 12-byte entries ``timestamp i64, relative_offset i32``;
  an entry is added only when the segment's max timestamp so far grows, so
  both fields are non-decreasing.

The active segment's files are preallocated to ``segment.index.bytes`` rounded
down to a whole number of entries (zero-filled), so the valid entry count is
*not* derivable from the file: for the active segment it lives in
PartitionState; for an inactive segment the file is trimmed to exactly its
entries on roll/close, and ``entries = file_size // entry_size``.

Ownership: one index object belongs to one LogSegment in one process.  Other
processes map the same file; because the mapping is MAP_SHARED an entry
written by one process is visible to the others as soon as the writer has
stored it, and the shared entry count says how many are valid.  All access
happens under the partition lock.  We never hand out a memoryview of the
mapping: CPython refuses to close or resize an mmap with live exports
(BufferError), and Kafka resizes index files on every roll.
"""

import mmap
import os
import struct

from kafkapy._core import load
from kafkapy.storage.checkpoints import fsync_if_exists
from kafkapy.storage.errors import CorruptIndexError
from kafkapy.storage.file_cache import FILE_CACHE

_index_lookup = load("index").index_lookup

_PAGE = mmap.PAGESIZE
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32_MAX = 2**31 - 1


class _MappedIndex:
    ENTRY_SIZE = 0
    # Entries kept free at the end: TimeIndex keeps one for the final entry.
    RESERVED_ENTRIES = 0

    def __init__(self, path: str, base_offset: int, max_index_size: int, entries: int | None = None):
        """Open (creating if needed) the index at ``path``; the mapping itself is made lazily.

        ``entries`` None means "a trimmed file": every whole entry in it is
        valid (Kafka's rule for a file it did not just create).  A newly
        created file is preallocated to ``max_index_size`` rounded down to the
        entry size and holds 0 entries.

        No descriptor is kept: the file is mapped on first access and the
        mapping (which holds one descriptor, CPython's dup) is registered with
        the process's ``FILE_CACHE``, which may unmap it again when too many
        are open (Kafka maps indexes lazily too, KAFKA-7283).
        """
        self.path = path
        self.base_offset = base_offset
        self._mm = None
        try:
            file_size = os.stat(path).st_size
            newly_created = False
        except FileNotFoundError:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            try:
                file_size = self._round(max_index_size)
                os.ftruncate(fd, file_size)
            finally:
                os.close(fd)
            newly_created = True
        self._set_file_size(file_size)
        if entries is None:
            entries = 0 if newly_created else file_size // self.ENTRY_SIZE
        if entries < 0 or entries > self.max_entries:
            raise CorruptIndexError(f"{path}: {entries} entries do not fit {file_size} bytes")
        self.entries = entries

    def _set_file_size(self, file_size: int) -> None:
        # ``full_at`` is kept beside the size rather than derived by the
        # is_full/max_entries properties: every append checks it twice (the
        # roll test), and two properties per index cost ~0.5 us of it.
        self.file_size = file_size
        self.full_at = file_size // self.ENTRY_SIZE - self.RESERVED_ENTRIES

    def _round(self, size: int) -> int:
        return max(0, size - size % self.ENTRY_SIZE)

    def _mapping(self):
        """The file's mapping (made now if needed; None for an empty file)."""
        mm = self._mm
        if mm is not None:
            FILE_CACHE.touch(self)
            return mm
        if self.file_size <= 0:
            # mmap of length 0 is an error; an empty (trimmed, entry-less) index is simply unmapped.
            return None
        fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        try:
            # The mapping dup()s the descriptor; ours can go at once.
            mm = mmap.mmap(fd, self.file_size)
        finally:
            os.close(fd)
        self._mm = mm
        FILE_CACHE.opened(self)
        return mm

    def _evict(self) -> None:
        # Called by FILE_CACHE (or close/resize): unmapping loses nothing, the
        # entries live in the page cache and are written back like any file's.
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def _store(self, entry: struct.Struct, *values) -> None:
        """Write the next entry (at ``entries``) through the mapping.

        The file is preallocated sparse (as Kafka's setLength): storing
        through a mapping into a hole makes the filesystem allocate the block
        inside a page fault, measured at ~1.9 ms per page on this machine
        class (ext4 in a VM), against ~7 us for a ``pwrite`` of the page
        followed by the store. So an entry that starts a page, or crosses
        into one, first gets its pages written with zeros by ``pwrite`` —
        only bytes from the entry's own position on, past the last valid
        entry, which no reader looks at (all under the partition lock). With
        1,000 partitions each getting its first entries, 60 % of worker time
        was these page faults; produce to 1,000 partitions went from 11k to
        114k records/s.
        """
        position = self.entries * self.ENTRY_SIZE
        end = position + self.ENTRY_SIZE
        if position % _PAGE == 0 or (end - 1) // _PAGE != position // _PAGE:
            stop = min(self.file_size, ((end - 1) // _PAGE + 1) * _PAGE)
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            try:
                os.pwrite(fd, bytes(stop - position), position)
            finally:
                os.close(fd)
        entry.pack_into(self._mapping(), position, *values)

    @property
    def max_entries(self) -> int:
        return self.file_size // self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        return self.entries >= self.full_at

    def _open_unmapped(self) -> int:
        """Drop the mapping (the file is about to change length or be written
        around it) and open the file for writing; the caller closes the fd."""
        if self._mm is not None:
            FILE_CACHE.forget(self)
            self._evict()
        return os.open(self.path, os.O_RDWR | os.O_CLOEXEC)

    def resize(self, new_size: int) -> bool:
        """Set the file length (rounded down to whole entries); keep the valid entries.  Kafka's AbstractIndex.resize."""
        new_size = max(self._round(new_size), self.entries * self.ENTRY_SIZE)
        if new_size == self.file_size:
            return False
        fd = self._open_unmapped()
        try:
            os.ftruncate(fd, new_size)
        finally:
            os.close(fd)
        self._set_file_size(new_size)
        return True

    def trim_to_valid_size(self) -> None:
        self.resize(self.entries * self.ENTRY_SIZE)

    def reset(self) -> None:
        """Forget every entry (before a rebuild)."""
        self.entries = 0

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()

    def fsync(self, fsync=os.fsync) -> None:
        """Make the file durable.  fsync covers pages dirtied through any
        process's mapping (on Linux msync(MS_SYNC) is an fsync of the range),
        so this works whether or not this process has it mapped now."""
        self.flush()
        fsync_if_exists(self.path, fsync)

    def close(self) -> None:
        if self._mm is not None:
            FILE_CACHE.forget(self)
            self._evict()

    def check_length(self) -> None:
        if self.file_size % self.ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: length {self.file_size} is not a multiple of {self.ENTRY_SIZE}")

    def _rel(self, offset: int) -> int:
        return offset - self.base_offset


class OffsetIndex(_MappedIndex):
    ENTRY_SIZE = 8

    def entry(self, slot: int) -> tuple[int, int]:
        """(absolute offset, position) of entry ``slot``."""
        rel, position = _OFFSET_ENTRY.unpack_from(self._mapping(), slot * 8)
        return self.base_offset + rel, position

    @property
    def last_offset(self) -> int:
        """Kafka's lastOffset: the last entry's offset, or the base offset if empty."""
        return self.entry(self.entries - 1)[0] if self.entries else self.base_offset

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target, or (base_offset, 0)."""
        if not self.entries:
            return self.base_offset, 0
        rel = min(max(target_offset - self.base_offset, -1), _INT32_MAX)
        if rel < 0:
            return self.base_offset, 0
        slot = _index_lookup(self._mapping(), self.entries, 8, rel)
        if slot < 0:
            return self.base_offset, 0
        return self.entry(slot)

    def append(self, offset: int, position: int) -> None:
        if self.entries and offset <= self.last_offset:
            raise ValueError(f"{self.path}: offset {offset} not above last entry {self.last_offset}")
        if self.is_full:
            raise ValueError(f"{self.path}: index is full ({self.entries} entries)")
        self._store(_OFFSET_ENTRY, offset - self.base_offset, position)
        self.entries += 1

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset >= ``offset`` (Kafka's OffsetIndex.truncateTo)."""
        n = self.entries
        while n and self.entry(n - 1)[0] >= offset:
            n -= 1
        self.entries = n

    def sanity_check(self, segment_size: int | None = None) -> None:
        self.check_length()
        if not self.entries:
            return
        last, position = self.entry(self.entries - 1)
        if last < self.base_offset:
            raise CorruptIndexError(f"{self.path}: last offset {last} below base offset {self.base_offset}")
        first_rel, first_position = _OFFSET_ENTRY.unpack_from(self._mapping(), 0)
        # Beyond Kafka's checks: entries pointing past the log or out of order
        # (a zero-filled or stale preallocated tail) would send lookups astray.
        if first_rel < 0 or first_position < 0 or position < first_position:
            raise CorruptIndexError(f"{self.path}: entries out of order")
        if segment_size is not None and position >= segment_size:
            raise CorruptIndexError(f"{self.path}: position {position} beyond log size {segment_size}")


class TimeIndex(_MappedIndex):
    ENTRY_SIZE = 12
    # One slot is kept for the final "max timestamp of the segment" entry
    # appended when the segment becomes inactive (Kafka's TimeIndex.isFull).
    RESERVED_ENTRIES = 1

    def entry(self, slot: int) -> tuple[int, int]:
        """(timestamp, absolute offset) of entry ``slot``."""
        timestamp, rel = _TIME_ENTRY.unpack_from(self._mapping(), slot * 12)
        return timestamp, self.base_offset + rel

    @property
    def last_entry(self) -> tuple[int, int]:
        """The last entry, or (-1, base_offset) when empty (Kafka's TimestampOffset(NO_TIMESTAMP, baseOffset))."""
        return self.entry(self.entries - 1) if self.entries else (-1, self.base_offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, or (-1, base_offset)."""
        if not self.entries:
            return -1, self.base_offset
        slot = _index_lookup(self._mapping(), self.entries, 12, target_timestamp)
        if slot < 0:
            return -1, self.base_offset
        return self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Append (timestamp, offset) if timestamp is above the last entry's.  Returns whether it did."""
        if not skip_full_check and self.is_full:
            raise ValueError(f"{self.path}: time index is full ({self.entries} entries)")
        last_timestamp, last_offset = self.last_entry
        if self.entries and offset < last_offset:
            raise ValueError(f"{self.path}: offset {offset} below last entry offset {last_offset}")
        if self.entries and timestamp < last_timestamp:
            raise ValueError(f"{self.path}: timestamp {timestamp} below last entry {last_timestamp}")
        if timestamp <= last_timestamp or self.entries >= self.max_entries:
            return False
        self._store(_TIME_ENTRY, timestamp, offset - self.base_offset)
        self.entries += 1
        return True

    def append_final_entry(self, timestamp: int, offset: int) -> bool:
        """Kafka's closing entry (maybeAppend with skipFullCheck) for a segment
        going inactive: trim the file to its entries, then ``pwrite`` the entry
        at the end.  Why not through the mapping: the first store into a page
        of the sparse preallocated file cost 1.3 ms per partition here (a page
        fault that allocates a block under the journal); extending the
        trimmed file with a write costs ~20 us.  Returns whether it appended."""
        last_timestamp, last_offset = self.last_entry
        if self.entries and (offset < last_offset or timestamp < last_timestamp):
            raise ValueError(f"{self.path}: entry ({timestamp}, {offset}) below the last one")
        self.trim_to_valid_size()
        if timestamp <= last_timestamp:
            return False
        fd = self._open_unmapped()
        try:
            os.pwrite(fd, _TIME_ENTRY.pack(timestamp, offset - self.base_offset), self.entries * 12)
        finally:
            os.close(fd)
        self.entries += 1
        self._set_file_size(self.entries * 12)
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset >= ``offset``."""
        n = self.entries
        while n and self.entry(n - 1)[1] >= offset:
            n -= 1
        self.entries = n

    def sanity_check(self) -> None:
        self.check_length()
        if not self.entries:
            return
        last_timestamp, last_offset = self.entry(self.entries - 1)
        first_timestamp, _ = self.entry(0)
        if last_timestamp < first_timestamp:
            raise CorruptIndexError(f"{self.path}: last timestamp {last_timestamp} below first {first_timestamp}")
        if last_offset < self.base_offset:
            raise CorruptIndexError(f"{self.path}: last offset {last_offset} below base offset {self.base_offset}")
