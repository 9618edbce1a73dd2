"""A shared-memory word array with one cross-process lock, for the quota tables.

A ``memfd`` mapped ``MAP_SHARED``, made before the supervisor forks (children
inherit the mapping); byte 0's ``lockf`` lock is released by the kernel if
its holder dies, and a thread lock beside it keeps a process's own threads
apart (re-made in a forked child, which inherits no record lock).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import threading
import weakref


class SharedWords:
    """``q`` and ``d``: int64 and float64 views of the same words."""

    def __init__(self, name: str, words: int):
        size = -(-(words * 8) // mmap.PAGESIZE) * mmap.PAGESIZE
        self._fd = os.memfd_create(name, os.MFD_CLOEXEC)
        os.ftruncate(self._fd, size)
        self._mmap = mmap.mmap(self._fd, size, flags=mmap.MAP_SHARED)
        view = memoryview(self._mmap)
        self.q = view.cast("q")
        self.d = view.cast("d")
        self._thread_lock = threading.Lock()
        ref = weakref.ref(self)

        def _after_fork():
            shared = ref()
            if shared is not None:
                shared._thread_lock = threading.Lock()

        os.register_at_fork(after_in_child=_after_fork)

    def acquire(self) -> None:
        self._thread_lock.acquire()
        fcntl.lockf(self._fd, fcntl.LOCK_EX, 1, 0, os.SEEK_SET)

    def release(self) -> None:
        fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0, os.SEEK_SET)
        self._thread_lock.release()
