"""Partition state shared by all handler workers, and its cross-process locks.

The supervisor builds one ``SharedPartitionTable`` before it forks the handler
workers (start method ``fork``).  The table is an anonymous ``MAP_SHARED``
mapping, so every child inherits the same physical pages: a write by one
worker is visible to all the others without any copy or message.

Memory layout (native byte order and native int64: the mapping never leaves
this machine nor outlives the broker, so no portable format is needed)::

    header   2 x int64    next_free_hint, used_slots
             32 x (56-byte NUL-padded name, int64 value)   named counters
    slots    capacity x STRIDE int64, slot 0 first, each 64-byte aligned
             [0] used flag (0 free, 1 allocated)
             [1 + i] PartitionState.FIELDS[i] (i < 25)
             [26, 27] topic id of the partition the slot holds (big-endian
                      bytes 0-7, 8-15 as int64; 0/0: a slot allocated unclaimed)
             [28] partition
             [29 + 5 r + j] replica r's PartitionState.REPLICA_FIELDS[j]
                      (r < MAX_REPLICAS = 8; j < 5), then 3 spare words
    slot map INDEX_SIZE x int32 (power of two >= 2 x capacity): open-addressing
             hash index over the claimed slots, linear probing from
             hash((topic_id_high, topic_id_low, partition)); 0 empty, else
             slot index + 1

The slot map says which slot holds which partition (``claim``, ``slot_for``,
``release``): it is the process tree's runtime fact, rebuilt by the
supervisor at every start (the mapping is anonymous), so it is never
persisted. Its key lives in the slot itself; the index only points at slots.
At most half of the index is ever in use, so a probe ends at an empty entry
after ~1.5 entries on average; deletion shifts the following entries back
(Knuth's algorithm R), so no tombstones pile up under create/delete churn.
Integer-tuple ``hash`` is not salted (PYTHONHASHSEED salts str and bytes
only), so every process computes the same positions.

Locking uses POSIX record locks (``fcntl.lockf``) on one lock file: byte 0 is
the table lock, byte ``1 + index`` is slot ``index``'s lock.  Record locks are
released by the kernel when the holding process exits for any reason, SIGKILL
included, so a worker that dies inside a critical section cannot wedge a
partition (a ``multiprocessing.Lock`` is a POSIX semaphore and would stay taken
forever).  Two pitfalls of record locks shape this module:

* They belong to the *process*, and closing *any* descriptor of the lock file
  in that process silently drops every lock the process holds on it.  So each
  process opens the lock file exactly once (the constructor in the supervisor,
  ``after_fork`` in each child) and keeps that descriptor until ``close``.
  Nothing else may open and close the lock file while the broker runs.
* They do not exclude threads of one process from each other (the second
  thread's ``lockf`` simply succeeds).  So ``lock()`` also takes a per-process
  ``threading.RLock`` for the slot before the record lock.

The partition's role (``replication.Partition`` writes it under the slot
lock: Kafka's makeLeader/makeFollower and the leader's follower bookkeeping;
every worker reads it, since it decides NOT_LEADER_OR_FOLLOWER on every
request) is the last six ``FIELDS`` words and the replica block:

* ``leader_id`` (-1: none), ``current_leader_epoch`` (the partition's leader
  epoch as the controller set it; -1: never set; the log's own
  ``leader_epoch`` word is the latest epoch of its leader-epoch checkpoint,
  which on a follower trails it), ``partition_epoch`` (-1: never set),
  ``replica_count`` (0: no role assigned yet), ``isr_mask`` (bit r set: the
  replica at position r is in the ISR), ``pending_isr_mask`` (the leader's
  ISR additions written or being written to ZooKeeper but not yet applied
  to ``isr_mask``: Kafka's PendingExpandIsr, counted by the high watermark).
* the replica block: for each position r < ``replica_count``, in the
  assignment's order, ``REPLICA_FIELDS`` = (replica_id, log_end_offset,
  last_caught_up_ms, last_fetch_leader_log_end_offset, last_fetch_ms): the
  follower state the leader keeps (Kafka's ``ReplicaState``), read and
  written whole per replica or per block (``replica_block``,
  ``store_replica``), so it is not part of ``snapshot()``, which the append
  reads: 40 more words there cost ~0.14 us an append.

Ownership: the mapping is owned by the supervisor and shared by every process
forked from it; a slot's fields are guarded by that slot's lock, the header
(free-slot search, counter names, counter updates), the used flags, the slot
keys and the slot map index by the table lock.  Reading
a single field without the lock is allowed for monitoring: fields are aligned
8-byte words, each written once and whole (a property's one store, ``store``'s
copy of packed words: never ``struct.pack_into``, which zero-fills the words
before it writes them), so a reader sees the old or the new value, never a
torn one nor a third, but two fields read without the lock need not be
consistent with each other.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import threading
import time
import uuid
import weakref
from contextlib import contextmanager

__all__ = [
    "FIELD",
    "MAX_REPLICAS",
    "PartitionState",
    "LocalPartitionState",
    "SharedPartitionState",
    "SharedPartitionTable",
    "LockTimeout",
]


class LockTimeout(TimeoutError):
    """A ``lock(timeout_s=...)`` could not be acquired in time."""


class PartitionState:
    """The scalar state of one partition plus the lock that guards it.

    Subclasses expose every name in ``FIELDS`` as an ``int`` attribute and
    implement ``lock()``: a re-entrant context manager that excludes every
    other holder (thread or process) of the same partition's lock.
    """

    # Order matters for speed only (every user goes through the names or
    # ``FIELD``): an append writes the first 11 words (log_end_offset ..
    # first_batch_timestamp) with one ``store``, and a change to the segment
    # list writes generation + segment_count with another.
    FIELDS = (
        "log_end_offset",
        "high_watermark",
        "active_base_offset",
        "active_size",
        "index_entries",
        "time_index_entries",
        "active_max_timestamp",
        "active_offset_of_max_timestamp",
        "bytes_since_last_index_entry",
        "unflushed_messages",
        "first_batch_timestamp",
        "log_start_offset",
        "recovery_point",
        "last_flush_ms",
        "generation",
        # How many segments the log has as of ``generation`` (0: unknown, e.g.
        # a slot written before this field existed). Lets a process's first
        # use of a one-segment partition open just the active segment instead
        # of listing the directory.
        "segment_count",
        "leader_epoch",
        # The topic id in partition.metadata as two int64 halves (big-endian
        # bytes 0-7, 8-15), once a process has read or written that file; 0/0
        # until then (the zero UUID is never a topic id). A process opening
        # the partition with the same id need not read the file again.
        "topic_id_high",
        "topic_id_low",
        # The partition's role (module docstring), written by Partition.
        "leader_id",
        "current_leader_epoch",
        "partition_epoch",
        "replica_count",
        "isr_mask",
        "pending_isr_mask",
    )

    # One replica's words in the replica block (module docstring).
    REPLICA_FIELDS = (
        "replica_id",
        "log_end_offset",
        "last_caught_up_ms",
        "last_fetch_leader_log_end_offset",
        "last_fetch_ms",
    )

    # -1 is Kafka's "none" for timestamps (RecordBatch.NO_TIMESTAMP), for the
    # offset of the max timestamp of an empty segment and for an unknown
    # leader epoch, leader id and partition epoch; every other field starts
    # at 0 (the replica block too: no replica until ``replica_count`` says so).
    DEFAULTS = {
        name: (-1 if name.endswith(("_timestamp", "_epoch")) or name == "leader_id" else 0)
        for name in FIELDS
    }

    __slots__ = ()

    def lock(self, timeout_s: float | None = None):
        raise NotImplementedError

    def reset(self) -> None:
        """Set every field to its default (caller holds the lock)."""
        for name, value in self.DEFAULTS.items():
            setattr(self, name, value)

    def replica_block(self) -> tuple:
        """The replica block, ``MAX_REPLICAS x len(REPLICA_FIELDS)`` words
        (caller holds the lock for a consistent read)."""
        raise NotImplementedError

    def store_replica(self, position: int, values) -> None:
        """Set replica ``position``'s ``REPLICA_FIELDS`` (caller holds the lock)."""
        raise NotImplementedError

    def role(self) -> tuple:
        """The five role words (leader_id .. isr_mask) in one read (caller
        holds the lock for a consistent read)."""
        return tuple(getattr(self, name) for name in ROLE_FIELDS)

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.FIELDS}

    def snapshot(self) -> tuple:
        """Every field, in ``FIELDS`` order (caller holds the lock); ``FIELD``
        gives the positions.  One read instead of one per field: the append
        path needs a dozen of them."""
        return tuple(getattr(self, name) for name in self.FIELDS)

    def store(self, first: int, values) -> None:
        """Set ``FIELDS[first:first + len(values)]`` to ``values`` (caller holds the lock)."""
        for name, value in zip(self.FIELDS[first:first + len(values)], values):
            setattr(self, name, value)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in self.as_dict().items())
        return f"{type(self).__name__}({fields})"


# Position of each field in ``PartitionState.snapshot()`` / ``store``.
FIELD = {name: i for i, name in enumerate(PartitionState.FIELDS)}
MAX_REPLICAS = 8  # replicas a partition may have (isr_mask has a bit each)
ROLE_FIELDS = ("leader_id", "current_leader_epoch", "partition_epoch", "replica_count", "isr_mask")
assert FIELD["isr_mask"] - FIELD["leader_id"] == len(ROLE_FIELDS) - 1  # adjacent, for role()
REPLICA_WORDS = len(PartitionState.REPLICA_FIELDS)
REPLICA_BLOCK_WORDS = MAX_REPLICAS * REPLICA_WORDS


class LocalPartitionState(PartitionState):
    """Plain attributes and a ``threading.RLock``: tests and single-process use.

    Owned by the process that made it; the lock only excludes its threads.
    """

    __slots__ = PartitionState.FIELDS + ("_lock", "_replicas")

    def __init__(self, **fields):
        self._lock = threading.RLock()
        self._replicas = [0] * REPLICA_BLOCK_WORDS
        for name, value in self.DEFAULTS.items():
            setattr(self, name, value)
        for name, value in fields.items():
            if name not in self.DEFAULTS:
                raise AttributeError(f"unknown partition state field {name!r}")
            setattr(self, name, value)

    def lock(self, timeout_s: float | None = None):
        if timeout_s is None:
            return self._lock
        return _timed_rlock(self._lock, timeout_s)

    def replica_block(self) -> tuple:
        return tuple(self._replicas)

    def store_replica(self, position: int, values) -> None:
        first = position * REPLICA_WORDS
        self._replicas[first:first + REPLICA_WORDS] = values


@contextmanager
def _timed_rlock(rlock, timeout_s):
    if not rlock.acquire(timeout=timeout_s):
        raise LockTimeout(f"partition lock not acquired in {timeout_s} s")
    try:
        yield
    finally:
        rlock.release()


# --- shared table layout ------------------------------------------------------

_WORD = 8
_HEADER_FIXED_WORDS = 2  # next_free_hint, used_slots
_HINT_WORD = 0
_USED_WORD = 1
_COUNTER_NAME_BYTES = 56
_COUNTER_ENTRY_BYTES = _COUNTER_NAME_BYTES + _WORD  # 64: one cache line each
MAX_COUNTERS = 32
_COUNTERS_OFFSET = _HEADER_FIXED_WORDS * _WORD
_SLOTS_OFFSET = 2048 + 64  # 16 + 32 * 64 = 2064 bytes of header, rounded up to 64
assert _SLOTS_OFFSET >= _COUNTERS_OFFSET + MAX_COUNTERS * _COUNTER_ENTRY_BYTES
assert _SLOTS_OFFSET % 64 == 0

# A slot is the used flag, 25 fields, the 3-word key and the 40-word replica
# block = 69 words, padded to 72 words (576 bytes = 9 cache lines) so that
# slots start on a 64-byte boundary and no two partitions share a cache
# line: workers appending to different partitions then never bounce one
# line between cores (false sharing).  The append's words (1-11) share the
# slot's first line; the 3 spare words leave room for new fields without
# changing the stride.
_USED = 0
STRIDE_WORDS = 72
SLOT_BYTES = STRIDE_WORDS * _WORD
assert 1 + len(PartitionState.FIELDS) <= STRIDE_WORDS
# The slot map key (module docstring): the last spare words of the slot.
_KEY_HIGH = 1 + len(PartitionState.FIELDS)
_KEY_LOW = _KEY_HIGH + 1
_KEY_PARTITION = _KEY_HIGH + 2
_REPLICAS = _KEY_PARTITION + 1
assert _REPLICAS + REPLICA_BLOCK_WORDS <= STRIDE_WORDS
_INDEX_ENTRY_BYTES = 4  # int32: slot index + 1 (capacity < 2**31)

# 100_000 slots x 576 bytes = 57.6 MB of address space.  An anonymous mapping
# is backed lazily, page by page (4 KiB = 7 slots), so resident memory grows
# with the slots actually used: 1_000 partitions touch about 580 KB.  The slot
# map index adds 262_144 x 4 bytes = 1 MiB, touched at random: up to 1 MiB
# resident from ~1_000 claimed partitions on.
DEFAULT_CAPACITY = 100_000

_TABLE_LOCK_BYTE = 0


def _field_property(word: int, name: str):
    # Measured on this machine class (CPython 3.11): a property over a
    # memoryview cast to 'q' reads in ~85 ns and writes in ~100 ns, against
    # ~150 ns for struct.Struct("q").unpack_from / pack_into on the mmap, so
    # fields are indexed words of one int64 view.
    def get(self):
        return self._words[self._base + word]

    def set(self, value):
        self._words[self._base + word] = value

    return property(get, set, doc=f"{name} (int64, shared)")


class SharedPartitionState(PartitionState):
    """A view of one slot of a ``SharedPartitionTable``.

    Cheap to create; holds no state of its own besides the slot index.  The
    fields are guarded by ``lock()``, which excludes other threads of this
    process and every other process that uses the same table.
    """

    __slots__ = ("_table", "_words", "_base", "index", "_lock", "_lock_of")

    def __init__(self, table: "SharedPartitionTable", index: int):
        self._table = table
        self._words = table._words
        self._base = (_SLOTS_OFFSET // _WORD) + index * STRIDE_WORDS
        self.index = index
        # This process's record lock of the slot, and the table's lock dict
        # it came from: ``after_fork`` makes a new dict, so a view created
        # before a fork never hands the parent's thread lock to a child.
        self._lock = None
        self._lock_of = None

    def snapshot(self) -> tuple:
        # One unpack of the slot's 25 words costs ~0.2 us, against ~85 ns
        # per field through the properties (~1.6 us for all of them).
        return _SLOT_FIELDS.unpack_from(self._table._mmap, (self._base + 1) * _WORD)

    def store(self, first: int, values) -> None:
        # Never ``pack_into`` the mapping: CPython's struct zero-fills the
        # destination before it converts and writes the values, so a reader
        # without the lock saw each stored word at 0 in between (another
        # process reading a log end offset stored in a loop read 0 within
        # ~6,000 reads; in a hard-bounce run a leader answered a follower's
        # Fetch with a diverging epoch ending at 0). Packed into bytes and
        # copied in (one memcpy of whole aligned words), each word goes from
        # its old value to its new one and to nothing else, and an append's
        # 11 words cost ~240 ns here against ~340 ns through pack_into.
        start = (self._base + 1 + first) * _WORD
        self._table._mmap[start:start + len(values) * _WORD] = _SLOT_STRUCTS[len(values)].pack(*values)

    def role(self) -> tuple:
        return _ROLE.unpack_from(self._table._mmap, (self._base + 1 + _ROLE_FIRST) * _WORD)

    def replica_block(self) -> tuple:
        return _REPLICA_BLOCK.unpack_from(self._table._mmap, (self._base + _REPLICAS) * _WORD)

    def store_replica(self, position: int, values) -> None:
        start = (self._base + _REPLICAS + position * REPLICA_WORDS) * _WORD  # copied in, as ``store``
        self._table._mmap[start:start + REPLICA_WORDS * _WORD] = _REPLICA_RECORD.pack(*values)

    def lock(self, timeout_s: float | None = None):
        # Uncontended enter + exit costs about 1.5 us here (two fcntl calls
        # plus the RLock): small beside a produce request's disk write.
        if timeout_s is None:
            table = self._table
            if self._lock_of is table._locks:
                return self._lock
            self._lock = table._record_lock(1 + self.index)
            self._lock_of = table._locks
            return self._lock
        return self._table._slot_lock(1 + self.index, timeout_s)


# Native int64 words, like the 'q' view (the mapping never leaves this machine).
_SLOT_FIELDS = struct.Struct(f"={len(PartitionState.FIELDS)}q")
_SLOT_STRUCTS = [struct.Struct(f"={n}q") for n in range(len(PartitionState.FIELDS) + 1)]
_REPLICA_BLOCK = struct.Struct(f"={REPLICA_BLOCK_WORDS}q")
_REPLICA_RECORD = struct.Struct(f"={REPLICA_WORDS}q")
_ROLE = struct.Struct(f"={len(ROLE_FIELDS)}q")
_ROLE_FIRST = FIELD["leader_id"]


for _i, _name in enumerate(PartitionState.FIELDS):
    setattr(SharedPartitionState, _name, _field_property(1 + _i, _name))
del _i, _name


class _RecordLock:
    """One byte of the lock file, re-entrant within a process.

    The ``threading.RLock`` orders the threads of this process; ``depth``
    (guarded by that RLock) makes sure only the outermost acquisition takes
    and releases the kernel record lock, because record locks do not count:
    one LOCK_UN drops the byte however many times it was locked.
    """

    __slots__ = ("_table", "_byte", "_rlock", "_depth")

    def __init__(self, table: "SharedPartitionTable", byte: int):
        self._table = table
        self._byte = byte
        self._rlock = threading.RLock()
        self._depth = 0

    def acquire(self, timeout_s: float | None = None) -> None:
        if timeout_s is None:
            self.__enter__()
            return
        if not self._rlock.acquire(timeout=timeout_s):
            raise LockTimeout(f"lock byte {self._byte}: held by another thread for {timeout_s} s")
        if self._depth == 0:
            try:
                self._table._lockf_acquire(self._byte, timeout_s)
            except BaseException:
                self._rlock.release()
                raise
        self._depth += 1

    def release(self) -> None:
        self.__exit__()

    # The untimed acquire and the release live in __enter__/__exit__: every
    # append enters one of these, and calling through acquire/release cost
    # two extra Python calls, ~0.2 us of its ~1.6.
    def __enter__(self):
        self._rlock.acquire()
        if self._depth == 0:
            try:
                fcntl.lockf(self._table._fd, fcntl.LOCK_EX, 1, self._byte, os.SEEK_SET)
            except BaseException:
                self._rlock.release()
                raise
        self._depth += 1
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        if self._depth == 0:
            fcntl.lockf(self._table._fd, fcntl.LOCK_UN, 1, self._byte, os.SEEK_SET)
        self._rlock.release()
        return False


class _TimedAcquire:
    __slots__ = ("_lock", "_timeout_s")

    def __init__(self, lock: _RecordLock, timeout_s: float):
        self._lock = lock
        self._timeout_s = timeout_s

    def __enter__(self):
        self._lock.acquire(self._timeout_s)
        return self._lock

    def __exit__(self, *exc):
        self._lock.release()
        return False


class SharedPartitionTable:
    """Fixed-capacity table of partition slots in an anonymous shared mapping.

    Create it in the supervisor *before* forking.  Children get their own
    lock-file descriptor and fresh per-process thread locks through
    ``after_fork``, which is registered with ``os.register_at_fork`` and so
    runs automatically after every ``os.fork`` (calling it again is harmless).
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, lock_path: str = ""):
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        if not lock_path:
            raise ValueError("lock_path is required")
        self.capacity = capacity
        self.lock_path = lock_path
        index_offset = _SLOTS_OFFSET + capacity * SLOT_BYTES
        self.index_size = 1 << (2 * capacity - 1).bit_length()  # >= 2 x capacity
        self._index_mask = self.index_size - 1
        self.size_bytes = index_offset + self.index_size * _INDEX_ENTRY_BYTES
        self._mmap = mmap.mmap(-1, self.size_bytes, flags=mmap.MAP_SHARED)
        self._words = memoryview(self._mmap).cast("q")
        self._index = memoryview(self._mmap)[index_offset:].cast("i")
        self._counter_index: dict[str, int] = {}
        self._fd = -1
        self._pid = -1
        self._open_lock_file()
        # Weak so that a discarded table is not kept alive by the fork hook.
        ref = weakref.ref(self)

        def _child_hook():
            table = ref()
            if table is not None:
                table.after_fork()

        os.register_at_fork(after_in_child=_child_hook)

    # --- process-local lock plumbing -------------------------------------------

    def _open_lock_file(self) -> None:
        # O_RDWR: lockf(LOCK_EX) needs a descriptor open for writing.
        self._fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._pid = os.getpid()
        self._locks_guard = threading.Lock()
        self._locks: dict[int, _RecordLock] = {}

    def after_fork(self) -> None:
        """Give this (child) process its own lock-file descriptor and thread locks.

        Record locks are not inherited across fork, so the child holds none;
        closing the inherited descriptor therefore cannot drop a lock of this
        process, and the parent's locks belong to the parent's pid.  Thread
        locks are rebuilt because one may have been held by a parent thread
        that does not exist in the child.
        """
        if self._pid == os.getpid() or self._fd < 0:
            return
        inherited = self._fd
        self._open_lock_file()
        os.close(inherited)

    def _lockf_acquire(self, byte: int, timeout_s: float | None) -> None:
        if timeout_s is None:
            fcntl.lockf(self._fd, fcntl.LOCK_EX, 1, byte, os.SEEK_SET)
            return
        # No timed F_SETLKW exists; poll with LOCK_NB, backing off from 1 ms
        # to 20 ms so a short wait is cheap and a long one costs < 50 tries/s.
        deadline = time.monotonic() + timeout_s
        pause_s = 0.001
        while True:
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, byte, os.SEEK_SET)
                return
            except (BlockingIOError, PermissionError):
                now = time.monotonic()
                if now >= deadline:
                    raise LockTimeout(f"lock byte {byte} of {self.lock_path} not acquired in {timeout_s} s")
                time.sleep(min(pause_s, deadline - now))
                pause_s = min(pause_s * 2, 0.02)

    def _record_lock(self, byte: int) -> _RecordLock:
        lock = self._locks.get(byte)
        if lock is None:
            with self._locks_guard:
                lock = self._locks.get(byte)
                if lock is None:
                    lock = self._locks[byte] = _RecordLock(self, byte)
        return lock

    def _slot_lock(self, byte: int, timeout_s: float | None):
        lock = self._record_lock(byte)
        return lock if timeout_s is None else _TimedAcquire(lock, timeout_s)

    def lock_all(self, timeout_s: float | None = None):
        """The table lock (byte 0): allocate/free, counters, metadata changes.

        It does not exclude slot lock holders; it is re-entrant, so
        ``allocate`` may be called while holding it.
        """
        return self._slot_lock(_TABLE_LOCK_BYTE, timeout_s)

    # --- slots ---------------------------------------------------------------

    def _check_index(self, index: int) -> int:
        if not 0 <= index < self.capacity:
            raise IndexError(f"slot {index} outside 0..{self.capacity - 1}")
        return (_SLOTS_OFFSET // _WORD) + index * STRIDE_WORDS

    def allocate(self) -> int:
        """Claim a free slot, set its fields to their defaults, return its index.

        The search starts at a shared hint (one past the last slot handed out)
        so allocating n partitions costs O(n) in total, not O(n^2).
        """
        words = self._words
        slots_word = _SLOTS_OFFSET // _WORD
        with self.lock_all():
            start = words[_HINT_WORD] % self.capacity
            for step in range(self.capacity):
                index = (start + step) % self.capacity
                base = slots_word + index * STRIDE_WORDS
                if words[base + _USED] == 0:
                    for i, name in enumerate(PartitionState.FIELDS):
                        words[base + 1 + i] = PartitionState.DEFAULTS[name]
                    for w in range(1 + len(PartitionState.FIELDS), STRIDE_WORDS):
                        words[base + w] = 0
                    words[base + _USED] = 1
                    words[_HINT_WORD] = index + 1
                    words[_USED_WORD] += 1
                    return index
        raise MemoryError(f"shared partition table full: all {self.capacity} slots in use")

    def free(self, index: int) -> None:
        """Give the slot back (and its partition's entry in the slot map, if claimed)."""
        base = self._check_index(index)
        words = self._words
        with self.lock_all():
            if words[base + _USED] != 1:
                raise ValueError(f"slot {index} is not allocated")
            high, low = words[base + _KEY_HIGH], words[base + _KEY_LOW]
            if high or low:
                position, found = self._probe(high, low, words[base + _KEY_PARTITION])
                assert found == index, f"slot map lost slot {index}"
                self._unindex(position)
                words[base + _KEY_HIGH] = words[base + _KEY_LOW] = words[base + _KEY_PARTITION] = 0
            words[base + _USED] = 0
            words[_USED_WORD] -= 1

    def is_allocated(self, index: int) -> bool:
        return self._words[self._check_index(index) + _USED] == 1

    @property
    def used_slots(self) -> int:
        return self._words[_USED_WORD]

    def slot(self, index: int) -> SharedPartitionState:
        self._check_index(index)
        return SharedPartitionState(self, index)

    def read_field(self, index: int, field: str) -> int:
        """Slot ``index``'s ``field`` (a ``PartitionState.FIELDS`` name), as
        ``getattr(self.slot(index), field)`` reads it without making the
        view: a processor checks its parked operations' watched fields this
        way after every wake (~18 reads a replication round)."""
        return self._words[self._check_index(index) + 1 + FIELD[field]]  # fields start after word 0 (_USED)

    # --- slot map: which slot holds which partition ------------------------------

    def claim(self, topic_id, partition: int, index: int | None = None) -> int:
        """Give partition ``partition`` of topic ``topic_id`` (uuid.UUID or its
        16 bytes) a slot: a fresh one (``allocate``) or ``index``, allocated
        earlier and not claimed yet (the supervisor's loaded logs).  Returns
        the slot index; ValueError if the partition already has one.
        Callers creating many partitions may hold ``lock_all()`` around the
        claims to take the record lock once."""
        high, low = _topic_id_words(topic_id)
        words = self._words
        with self.lock_all():
            position, found = self._probe(high, low, partition)
            if found >= 0:
                raise ValueError(f"partition {partition} of topic {_uuid(high, low)} already "
                                 f"holds slot {found}")
            if index is None:
                index = self.allocate()
            else:
                base = self._check_index(index)
                if words[base + _USED] != 1 or words[base + _KEY_HIGH] or words[base + _KEY_LOW]:
                    raise ValueError(f"slot {index} is not an allocated, unclaimed slot")
            base = (_SLOTS_OFFSET // _WORD) + index * STRIDE_WORDS
            words[base + _KEY_HIGH] = high
            words[base + _KEY_LOW] = low
            words[base + _KEY_PARTITION] = partition
            self._index[position] = index + 1
            return index

    def slot_for(self, topic_id, partition: int) -> int | None:
        """The slot claimed for the partition, or None.  Takes the table lock
        (~1.5 us uncontended): callers cache the answer, e.g. per metadata
        generation, as the replica manager caches its open partitions."""
        high, low = _topic_id_words(topic_id)
        with self.lock_all():
            found = self._probe(high, low, partition)[1]
        return found if found >= 0 else None

    def release(self, topic_id, partition: int) -> int | None:
        """Free the partition's slot; returns its index, or None if it had none."""
        high, low = _topic_id_words(topic_id)
        with self.lock_all():
            found = self._probe(high, low, partition)[1]
            if found < 0:
                return None
            self.free(found)
            return found

    def claimed(self, index: int) -> tuple[uuid.UUID, int] | None:
        """``(topic_id, partition)`` the slot was claimed for, or None."""
        base = self._check_index(index)
        words = self._words
        with self.lock_all():
            if words[base + _USED] != 1 or not (words[base + _KEY_HIGH] or words[base + _KEY_LOW]):
                return None
            return _uuid(words[base + _KEY_HIGH], words[base + _KEY_LOW]), words[base + _KEY_PARTITION]

    def _probe(self, high: int, low: int, partition: int) -> tuple[int, int]:
        """``(position, slot)`` of the key in the index, or ``(first empty
        position on its probe path, -1)`` (caller holds the table lock).
        Ends: at most capacity of the >= 2 x capacity entries are used."""
        words = self._words
        index = self._index
        mask = self._index_mask
        slots_word = _SLOTS_OFFSET // _WORD
        position = hash((high, low, partition)) & mask
        while True:
            entry = index[position]
            if entry == 0:
                return position, -1
            base = slots_word + (entry - 1) * STRIDE_WORDS
            if (words[base + _KEY_PARTITION] == partition and words[base + _KEY_LOW] == low
                    and words[base + _KEY_HIGH] == high):
                return position, entry - 1
            position = (position + 1) & mask

    def _unindex(self, hole: int) -> None:
        """Empty index entry ``hole``, moving back each later entry of the
        same run that may not sit past the hole (caller holds the table lock)."""
        words = self._words
        index = self._index
        mask = self._index_mask
        slots_word = _SLOTS_OFFSET // _WORD
        position = hole
        while True:
            position = (position + 1) & mask
            entry = index[position]
            if entry == 0:
                break
            base = slots_word + (entry - 1) * STRIDE_WORDS
            home = hash((words[base + _KEY_HIGH], words[base + _KEY_LOW], words[base + _KEY_PARTITION])) & mask
            # The entry may fill the hole unless its home lies cyclically in
            # (hole, position]: then probes for it start after the hole.
            if (home - hole - 1) & mask >= (position - hole) & mask:
                index[hole] = entry
                hole = position
        index[hole] = 0

    # --- named counters ------------------------------------------------------

    def _counter_word(self, name: str, create: bool) -> int:
        word = self._counter_index.get(name)
        if word is not None:
            return word
        encoded = name.encode()
        if not encoded or len(encoded) > _COUNTER_NAME_BYTES or b"\0" in encoded:
            raise ValueError(f"counter name must be 1..{_COUNTER_NAME_BYTES} bytes without NUL: {name!r}")
        padded = encoded.ljust(_COUNTER_NAME_BYTES, b"\0")
        with self.lock_all():
            for i in range(MAX_COUNTERS):
                entry = _COUNTERS_OFFSET + i * _COUNTER_ENTRY_BYTES
                stored = self._mmap[entry:entry + _COUNTER_NAME_BYTES]
                if stored == padded:
                    break
                if stored[0] == 0:
                    if not create:
                        return -1
                    self._mmap[entry:entry + _COUNTER_NAME_BYTES] = padded
                    self._words[(entry + _COUNTER_NAME_BYTES) // _WORD] = 0
                    break
            else:
                if not create:
                    return -1
                raise MemoryError(f"all {MAX_COUNTERS} counters in use")
        # Names are never removed, so the position can be cached for good
        # (and stays valid in children forked later).
        word = (entry + _COUNTER_NAME_BYTES) // _WORD
        self._counter_index[name] = word
        return word

    def counter(self, name: str) -> int:
        """Current value of a named counter; 0 if it was never set."""
        # A known name is one dict lookup: every produce to a partition
        # reads metadata_generation.
        word = self._counter_index.get(name)
        if word is None:
            word = self._counter_word(name, create=False)
            if word < 0:
                return 0
        return self._words[word]

    def set_counter(self, name: str, value: int) -> None:
        word = self._counter_word(name, create=True)
        with self.lock_all():
            self._words[word] = value

    def increment(self, name: str, delta: int = 1) -> int:
        """Atomically add ``delta``; returns the new value."""
        word = self._counter_word(name, create=True)
        with self.lock_all():
            value = self._words[word] + delta
            self._words[word] = value
            return value

    def counters(self) -> dict:
        result = {}
        for i in range(MAX_COUNTERS):
            entry = _COUNTERS_OFFSET + i * _COUNTER_ENTRY_BYTES
            name = bytes(self._mmap[entry:entry + _COUNTER_NAME_BYTES]).rstrip(b"\0")
            if not name:
                break
            result[name.decode()] = self._words[(entry + _COUNTER_NAME_BYTES) // _WORD]
        return result

    # --- shutdown ------------------------------------------------------------

    def close(self) -> None:
        """Drop this process's locks and mapping (shutdown only)."""
        if self._fd >= 0:
            os.close(self._fd)  # releases every record lock this process holds
            self._fd = -1
        if self._words is not None:
            self._words.release()  # a live export would make mmap.close raise BufferError
            self._index.release()
            self._words = None
            self._mmap.close()


def _topic_id_words(topic_id) -> tuple[int, int]:
    """A topic id (uuid.UUID or 16 bytes) as the two int64 words of a slot key."""
    raw = topic_id.bytes if isinstance(topic_id, uuid.UUID) else bytes(topic_id)
    if len(raw) != 16:
        raise ValueError(f"a topic id is 16 bytes, got {len(raw)}")
    high = int.from_bytes(raw[:8], "big", signed=True)
    low = int.from_bytes(raw[8:], "big", signed=True)
    if high == 0 and low == 0:
        raise ValueError("the zero UUID is not a topic id")
    return high, low


def _uuid(high: int, low: int) -> uuid.UUID:
    return uuid.UUID(bytes=high.to_bytes(8, "big", signed=True) + low.to_bytes(8, "big", signed=True))
