"""The fetch session cache (KIP-227; Kafka's FetchSession.scala), shared by every handler worker.

Any worker may handle any fetch of a session, so the cache is a table in a
``memfd`` mapped ``MAP_SHARED`` before the supervisor forks
(``FetchSessionCache.for_config``: the supervisor's ``Broker`` creates it,
each child's ``Broker`` finds the inherited one). docs/architecture.md
("Fetch sessions") says why; this module says how.

Memory layout (native int64 words; the mapping never leaves the machine)::

    word 0                     next shard (round robin of session creations)
    byte 64 + 64 s             slot s's header, 8 words:
        [0] session id (0: free)   [1] epoch          [2] flags (PRIVILEGED,
        USES_TOPIC_IDS, EVICTABLE_BY_PRIVILEGED, EVICTABLE_BY_ALL)
        [3] creation ms            [4] last used ms   [5] partition count
        [6] data length            [7] write version (bumped per data write)
    data_offset + s x SLOT_DATA_BYTES   slot s's partitions: one ``marshal``ed
        list of ``Entry`` tuples, in session order

Slots are Kafka's 8 shards of ``max_entries // 8`` each (Kafka divides
``max.incremental.fetch.session.cache.slots`` the same way, so fewer than 8
slots means no sessions). A session id says its shard and slot: shard
``s`` hands out ids in ``[max(1, s x RANGE), (s + 1) x RANGE)`` as Kafka's
shards do, and ``(id - s x RANGE) % per_shard`` is the slot in the shard.

Ownership and locking: the mapping is the supervisor's, shared by every
child; byte 0 of the memfd is one ``lockf`` lock (released by the kernel if
its holder dies) guarding every header and data region, taken for a lookup,
a creation (with eviction) or a commit, never while reading partitions.
A per-process ``threading.Lock`` orders this process's threads first
(record locks do not exclude threads of one process). The decoded-entries
cache (``_decoded``, at most ``DECODED_SESSIONS`` sessions) is per process.
"""

from __future__ import annotations

import fcntl
import marshal
import mmap
import os
import random
import threading
import weakref
from typing import NamedTuple

from kafkapy.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full fetch that asks for a new session
FINAL_EPOCH = -1  # a full fetch without a session (and closing one)
NUM_SHARDS = 8  # Kafka's NumFetchSessionCacheShards
SESSION_ID_RANGE = (2**31 - 1) // NUM_SHARDS
# One session's partition list: ~50 bytes marshalled per partition, so ~40,000
# partitions; a larger session is not created (the client stays sessionless).
SLOT_DATA_BYTES = 2 << 20

# Sessions whose decoded partition list a process keeps (its last used ones):
# 1,000 partitions decode in ~0.5 ms and take ~150 KB as tuples, so 64 bound a
# worker's copies to ~10 MB however many large sessions the broker holds.
DECODED_SESSIONS = 64

PRIVILEGED = 1  # created by a follower (replica_id >= 0)
USES_TOPIC_IDS = 2  # created by Fetch v13+
EVICTABLE_BY_PRIVILEGED = 4
EVICTABLE_BY_ALL = 8

_HEADER_BYTES = 64
_SLOT_WORDS = 8
_ID, _EPOCH, _FLAGS, _CREATED, _LAST_USED, _SIZE, _LENGTH, _VERSION = range(_SLOT_WORDS)
_PAGE = mmap.PAGESIZE


class Entry(NamedTuple):
    """One partition of a session (Kafka's CachedPartition): what the
    fetcher asked for last (named as the request's FetchPartition fields, so
    the fetch handler reads either alike), and the high watermark and log
    start offset last sent to it. ``key`` is the topic name, or the topic
    id's 16 bytes in a session of Fetch v13+."""

    key: object
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int  # the follower's own; -1 for a consumer
    high_watermark: int  # last sent; -1 after an error so the next answer includes it
    local_log_start_offset: int  # last sent


class Session(NamedTuple):
    slot: int
    session_id: int
    epoch: int
    flags: int
    version: int
    entries: list  # of Entry; shared with the decoded cache: never mutate

    @property
    def uses_topic_ids(self) -> bool:
        return bool(self.flags & USES_TOPIC_IDS)


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: FINAL stays FINAL; after INT32_MAX comes 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


class FetchSessionCache:
    _inherited: "FetchSessionCache | None" = None

    @classmethod
    def for_config(cls, config) -> "FetchSessionCache":
        """The process tree's cache: the first call (the supervisor's Broker,
        before it forks) creates it; later calls, in that process or a forked
        child, return the same one."""
        if cls._inherited is None:
            cls._inherited = cls(config["max.incremental.fetch.session.cache.slots"],
                                 config["min.incremental.fetch.session.eviction.ms"])
        return cls._inherited

    def __init__(self, max_entries: int, eviction_ms: int, slot_data_bytes: int = SLOT_DATA_BYTES):
        self.per_shard = max(0, max_entries) // NUM_SHARDS
        self.capacity = self.per_shard * NUM_SHARDS
        self.eviction_ms = eviction_ms
        self.slot_data_bytes = slot_data_bytes
        header_bytes = _HEADER_BYTES + self.capacity * _SLOT_WORDS * 8
        self.data_offset = -(-header_bytes // _PAGE) * _PAGE
        size = self.data_offset + self.capacity * slot_data_bytes
        # Sparse: pages are backed only once written (MADV_REMOVE gives them back).
        self._fd = os.memfd_create("kafkapy-fetch-sessions", os.MFD_CLOEXEC)
        os.ftruncate(self._fd, size)
        self._mmap = mmap.mmap(self._fd, size, flags=mmap.MAP_SHARED)
        self._words = memoryview(self._mmap)[:header_bytes].cast("q")
        self._thread_lock = threading.Lock()
        self._decoded: dict[int, tuple] = {}  # slot -> (session id, version, entries)
        # Weak, so that a discarded cache is not kept alive by the fork hook.
        ref = weakref.ref(self)

        def _after_fork():
            cache = ref()
            if cache is not None:  # a parent thread may have held it; no record lock is inherited
                cache._thread_lock = threading.Lock()

        os.register_at_fork(after_in_child=_after_fork)

    # -- locking -------------------------------------------------------------------
    def _lock(self):
        return _Locked(self)

    def _header(self, slot: int) -> int:
        return (_HEADER_BYTES // 8) + slot * _SLOT_WORDS

    # -- lookups -------------------------------------------------------------------
    def _slot_of(self, session_id: int) -> int:
        """The slot a session id names, or -1."""
        if self.per_shard == 0 or session_id <= 0:
            return -1
        shard = session_id // SESSION_ID_RANGE
        if shard >= NUM_SHARDS:
            return -1
        return shard * self.per_shard + (session_id - shard * SESSION_ID_RANGE) % self.per_shard

    def get(self, session_id: int) -> Session | None:
        slot = self._slot_of(session_id)
        if slot < 0:
            return None
        w = self._words
        h = self._header(slot)
        with self._lock():
            if w[h + _ID] != session_id:
                return None
            epoch, flags, version = w[h + _EPOCH], w[h + _FLAGS], w[h + _VERSION]
            cached = self._decoded.get(slot)
            if cached is not None and cached[0] == session_id and cached[1] == version:
                self._remember(slot, *cached)
                return Session(slot, session_id, epoch, flags, version, cached[2])
            start = self.data_offset + slot * self.slot_data_bytes
            data = self._mmap[start:start + w[h + _LENGTH]]
        entries = [Entry(*e) for e in marshal.loads(data)]
        self._remember(slot, session_id, version, entries)
        return Session(slot, session_id, epoch, flags, version, entries)

    def __len__(self) -> int:
        w = self._words
        base = _HEADER_BYTES // 8
        return sum(1 for s in range(self.capacity) if w[base + s * _SLOT_WORDS])

    # -- changes -------------------------------------------------------------------
    def remove(self, session_id: int) -> bool:
        slot = self._slot_of(session_id)
        if slot < 0:
            return False
        with self._lock():
            if self._words[self._header(slot) + _ID] != session_id:
                return False
            self._free(slot)
        return True

    def create(self, now_ms: int, privileged: bool, uses_topic_ids: bool, entries: list) -> int:
        """Kafka's maybeCreateSession: the new session's id, or
        INVALID_SESSION_ID when its shard is full and nothing may be evicted
        (or the session would not fit its slot)."""
        if self.per_shard == 0:
            return INVALID_SESSION_ID
        data = marshal.dumps([tuple(e) for e in entries])
        if len(data) > self.slot_data_bytes:
            return INVALID_SESSION_ID
        w = self._words
        with self._lock():
            shard = w[0] % NUM_SHARDS
            w[0] = (w[0] + 1) % NUM_SHARDS
            first = shard * self.per_shard
            slot = next((s for s in range(first, first + self.per_shard)
                         if w[self._header(s) + _ID] == 0), -1)
            if slot < 0:
                slot = self._try_evict(first, privileged, len(entries), now_ms)
                if slot < 0:
                    return INVALID_SESSION_ID
                self._free(slot)
            session_id = self._new_session_id(shard, slot - first)
            h = self._header(slot)
            self._write(slot, data)
            w[h + _EPOCH] = next_epoch(INITIAL_EPOCH)
            w[h + _FLAGS] = (PRIVILEGED if privileged else 0) | (USES_TOPIC_IDS if uses_topic_ids else 0)
            w[h + _CREATED] = now_ms
            w[h + _ID] = session_id
            self._touch(h, now_ms, len(entries))
            self._remember(slot, session_id, w[h + _VERSION], entries)
        return session_id

    def commit(self, session: Session, entries: list | None, now_ms: int) -> int:
        """Finish one fetch of ``session`` (Kafka's epoch bump and touch, and
        the partition updates of its response): NONE; INVALID_FETCH_SESSION_EPOCH
        when another fetch of the session committed since ``get``;
        FETCH_SESSION_ID_NOT_FOUND when it was evicted or would outgrow its
        slot (then it is removed). ``entries`` None: the partitions did not change."""
        data = None if entries is None else marshal.dumps([tuple(e) for e in entries])
        w = self._words
        h = self._header(session.slot)
        with self._lock():
            if w[h + _ID] != session.session_id:
                return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            if w[h + _EPOCH] != session.epoch:
                return ErrorCode.INVALID_FETCH_SESSION_EPOCH
            if data is not None:
                if len(data) > self.slot_data_bytes:
                    self._free(session.slot)
                    return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
                self._write(session.slot, data)
                self._remember(session.slot, session.session_id, w[h + _VERSION], entries)
            w[h + _EPOCH] = next_epoch(session.epoch)
            self._touch(h, now_ms, len(session.entries if entries is None else entries))
        return ErrorCode.NONE

    def _remember(self, slot: int, session_id: int, version: int, entries: list) -> None:
        decoded = self._decoded
        decoded.pop(slot, None)  # re-inserted last: the dict's order is the order of use
        decoded[slot] = (session_id, version, entries)
        if len(decoded) > DECODED_SESSIONS:
            del decoded[next(iter(decoded))]

    # -- under the lock ------------------------------------------------------------
    def _new_session_id(self, shard: int, local: int) -> int:
        # A random multiple of per_shard plus the slot: an evicted session's id
        # comes back only by chance (1 in RANGE / per_shard).
        high = (SESSION_ID_RANGE - 1 - local) // self.per_shard
        return shard * SESSION_ID_RANGE + random.randint(0 if shard or local else 1, high) * self.per_shard + local

    def _write(self, slot: int, data: bytes) -> None:
        w = self._words
        h = self._header(slot)
        start = self.data_offset + slot * self.slot_data_bytes
        old = w[h + _LENGTH]
        self._mmap[start:start + len(data)] = data
        if old > len(data):
            self._give_back(start + len(data), old - len(data))
        w[h + _LENGTH] = len(data)
        w[h + _VERSION] += 1

    def _give_back(self, start: int, length: int) -> None:
        """Return whole pages past ``start`` to the kernel (they read as zeros)."""
        first = -(-start // _PAGE) * _PAGE
        end = -(-(start + length) // _PAGE) * _PAGE
        if end > first:
            self._mmap.madvise(mmap.MADV_REMOVE, first, end - first)

    def _free(self, slot: int) -> None:
        w = self._words
        h = self._header(slot)
        self._give_back(self.data_offset + slot * self.slot_data_bytes, w[h + _LENGTH])
        w[h + _LENGTH] = 0
        w[h + _ID] = 0  # the version stays: it keeps counting across sessions of the slot
        self._decoded.pop(slot, None)

    def _touch(self, h: int, now_ms: int, size: int) -> None:
        """Kafka's touch: last used, size, and whether the session may be evicted
        by a privileged (a consumer's, or one older than the eviction time) or
        by any new session (older than the eviction time)."""
        w = self._words
        w[h + _LAST_USED] = now_ms
        w[h + _SIZE] = size
        flags = w[h + _FLAGS] & (PRIVILEGED | USES_TOPIC_IDS)
        old = now_ms - w[h + _CREATED] > self.eviction_ms
        if not flags & PRIVILEGED or old:
            flags |= EVICTABLE_BY_PRIVILEGED
        if old:
            flags |= EVICTABLE_BY_ALL
        w[h + _FLAGS] = flags

    def _try_evict(self, first: int, privileged: bool, size: int, now_ms: int) -> int:
        """Kafka's tryEvict within one (full) shard: the slot to free, or -1.
        The least recently used session if unused for longer than the
        eviction time; else the smallest evictable one by (privileged, size,
        id) if the new session's (privileged, size, 0) is not smaller."""
        w = self._words
        headers = [self._header(s) for s in range(first, first + self.per_shard)]
        last_used, _, h = min((w[h + _LAST_USED], w[h + _ID], h) for h in headers)
        if now_ms - last_used > self.eviction_ms:
            return (h - self._header(0)) // _SLOT_WORDS
        need = EVICTABLE_BY_PRIVILEGED if privileged else EVICTABLE_BY_ALL
        keys = [(bool(w[h + _FLAGS] & PRIVILEGED), w[h + _SIZE], w[h + _ID], h)
                for h in headers if w[h + _FLAGS] & need]
        if not keys:
            return -1
        victim = min(keys)
        if (privileged, size, 0) < victim[:3]:
            return -1
        return (victim[3] - self._header(0)) // _SLOT_WORDS


class _Locked:
    __slots__ = ("_cache",)

    def __init__(self, cache: FetchSessionCache):
        self._cache = cache

    def __enter__(self):
        cache = self._cache
        cache._thread_lock.acquire()
        try:
            fcntl.lockf(cache._fd, fcntl.LOCK_EX, 1, 0, os.SEEK_SET)
        except BaseException:
            cache._thread_lock.release()
            raise
        return self

    def __exit__(self, *exc):
        cache = self._cache
        fcntl.lockf(cache._fd, fcntl.LOCK_UN, 1, 0, os.SEEK_SET)
        cache._thread_lock.release()
        return False
