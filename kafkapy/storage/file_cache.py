"""A per-process LRU of open segment files and index mappings.

Why: the supervisor keeps a Log object for every partition (it runs their
maintenance), and each worker one for every partition it has served.  Kept
open, a segment costs 5 descriptors (.log, .index and .timeindex, plus the
descriptor CPython's mmap dup()s for each mapping), so 10,000 partitions
needed 50,000 in the supervisor alone against a hard limit of 20,000 on this
machine class.  Holders (a LogSegment's .log descriptor, an index mapping)
therefore open lazily on first use and register here; when more than
``max_open`` are registered the least recently used one is closed.  An open
costs about 5 us (open + fstat), so a holder evicted and reopened on its
next use costs little beside a produce request.

Ownership: one cache per process (``FILE_CACHE``), used only by objects that
are themselves used under their partition lock.  It is not thread-safe on
its own: the partition locks serialise the threads of a process per
partition, and the cache's own operations are single dict operations under
the GIL, except eviction, which is guarded by ``_lock``.  A holder must not
keep a descriptor number across calls that may open another file (eviction
could close it and the number be reused): re-read ``segment.fd`` instead.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict


# Descriptors left outside the cache: pipes, the request and response
# sockets, the metrics files, log files, a checkpoint being written.  The
# processes that use this cache (handler workers, the supervisor, the group
# coordinator) hold no client connections; processors keep their own small
# cache of files for sendfile.
_RESERVED_FDS = 1024


def _default_max_open() -> int:
    # All of the process's soft descriptor limit but a reserve: a worker
    # producing round-robin to 10,000 partitions touches 10,000 segment files
    # a second, and with a cache smaller than that (it was a quarter of the
    # limit, 5,000 of 20,000 here) every append reopened and closed its file:
    # 20 us per partition instead of 15 in a 100-partition request.  Capped
    # at 65,536 (LimitNOFILE=100000 in systemd/kafkapy.service) and at least
    # 64, so tests with a small limit still cache a few active segments; with
    # a limit below 4 x the reserve, a quarter of it.
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            soft = 1 << 20
    except (ImportError, ValueError, OSError):
        soft = 1024
    usable = soft - _RESERVED_FDS if soft >= 4 * _RESERVED_FDS else soft // 4
    return max(64, min(65_536, usable))


class OpenFileCache:
    """Holders implement ``_evict()`` (close what they opened); identity-hashed."""

    def __init__(self, max_open: int | None = None):
        self.max_open = max_open if max_open is not None else _default_max_open()
        self._lru: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._lru)

    def opened(self, holder) -> None:
        """``holder`` just opened its file: register it, evicting the oldest beyond ``max_open``."""
        lru = self._lru
        lru[holder] = None
        lru.move_to_end(holder)
        if len(lru) > self.max_open:
            self._shrink(holder)

    def touch(self, holder) -> None:
        try:
            self._lru.move_to_end(holder)
        except KeyError:
            pass

    def forget(self, holder) -> None:
        self._lru.pop(holder, None)

    def _shrink(self, keep) -> None:
        with self._lock:
            lru = self._lru
            while len(lru) > self.max_open:
                oldest = next(iter(lru))
                if oldest is keep:
                    lru.move_to_end(oldest)
                    oldest = next(iter(lru))
                    if oldest is keep:
                        return
                del lru[oldest]
                self.evictions += 1
                oldest._evict()

    def close_all(self) -> None:
        with self._lock:
            while self._lru:
                holder, _ = self._lru.popitem(last=False)
                holder._evict()

    def resize(self, max_open: int) -> None:
        self.max_open = max(1, max_open)
        if len(self._lru) > self.max_open:
            self._shrink(None)


FILE_CACHE = OpenFileCache()


def configure(max_open: int | None = None) -> OpenFileCache:
    """Re-derive (or set) the cap, e.g. after the supervisor raised RLIMIT_NOFILE."""
    FILE_CACHE.resize(max_open if max_open is not None else _default_max_open())
    return FILE_CACHE


def open_fd(path: str, flags: int = os.O_RDWR) -> int:
    return os.open(path, flags | os.O_CLOEXEC)
