"""The request channel: how request bytes and responses move between processes.

Everything here is created by the supervisor *before* forking, so the
children inherit the pipes, locks and shared mappings.

* ``RequestQueue`` — the bounded shared request queue (``queued.max.requests``).
  A pipe read by every handler worker, written by every processor, carrying
  small pickled descriptors.  The bound is a semaphore: a processor that cannot
  take a permit keeps the request and stops reading that connection until a
  worker frees one (Kafka's processors likewise block on a full queue).
* ``Arena`` — one per processor: a shared anonymous mapping that large request
  bodies are received into directly (``recv_into``).  Workers read them there
  as a writable ``memoryview`` (offsets are assigned in place) and tell the
  processor when the region may be reused.  Measured on this machine class:
  a ``multiprocessing`` queue moves ~600 MB/s of 1 MiB messages (pickle +
  pipe = two copies), a shared mapping >10 GB/s.  Small requests (fetches,
  metadata, heartbeats: under ``INLINE_MAX_BYTES``) travel inline in the
  descriptor instead: one pickle of a few hundred bytes is cheaper than arena
  bookkeeping, and a delayed fetch must not pin arena space for ``max_wait_ms``.
* ``ResponsePipe`` — one per processor: workers send responses (lists of
  ``bytes`` and ``FileRegion``) to the processor that owns the connection.
* ``WakePipe`` — one per processor: a byte written after an append wakes
  processors holding delayed fetches.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import pickle
import queue
import select
import time
from collections import OrderedDict

INLINE_MAX_BYTES = 16 * 1024

# Pipes carry descriptors and responses; a bigger kernel buffer keeps workers
# from blocking on a busy processor. 1 MiB is the unprivileged default limit
# (/proc/sys/fs/pipe-max-size).
_PIPE_BYTES = 1 << 20

# Message kinds sent back to a processor.
SEND = 0  # parts: list[bytes | FileRegion]
NOREPLY = 1  # acks=0 produce: nothing to send, unmute the connection
CLOSE = 2  # protocol violation: close the connection
DELAY = 3  # long-poll fetch: hold the request until woken or deadline

_PICKLE = pickle.HIGHEST_PROTOCOL


def _grow_pipe(fd: int) -> None:
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except OSError:
        pass  # keep the default 64 KiB: slower, still correct


class RequestQueue:
    """Bounded many-writer many-reader queue of pickled descriptors."""

    def __init__(self, ctx, maxsize: int):
        self._reader, self._writer = ctx.Pipe(duplex=False)
        _grow_pipe(self._writer.fileno())
        self._rlock = ctx.Lock()
        self._wlock = ctx.Lock()
        self._permits = ctx.BoundedSemaphore(maxsize)
        self._poller = None  # per process, made on first timed get()
        self._poller_pid = -1
        self._maxsize = maxsize
        # When the item ``get`` last returned was put (time.monotonic(), which
        # is system-wide on Linux, so comparable across processes): the
        # request-queue time of metrics. Owned by the reading process.
        self.last_put_s = 0.0

    def try_put(self, item) -> bool:
        if not self._permits.acquire(False):
            return False
        data = pickle.dumps((item, time.monotonic()), _PICKLE)
        with self._wlock:
            self._writer.send_bytes(data)
        return True

    def put_stop(self) -> None:
        """Wake one worker with ``None`` (no permit: used only at shutdown)."""
        with self._wlock:
            self._writer.send_bytes(pickle.dumps(None, _PICKLE))

    def get(self, timeout_s: float | None = None):
        """Next descriptor (None = stop). With ``timeout_s``, raises
        ``queue.Empty`` if nothing arrived in time."""
        # Readers wait for the lock with the same bound: an idle reader must
        # wake within timeout_s even while another one polls.
        if not self._rlock.acquire(True, timeout_s):
            raise queue.Empty
        try:
            if timeout_s is not None and not self._readable(timeout_s):
                raise queue.Empty
            data = self._reader.recv_bytes()
        finally:
            self._rlock.release()
        item = pickle.loads(data)
        if item is not None:
            item, self.last_put_s = item
            self._permits.release()
        return item

    def _readable(self, timeout_s: float) -> bool:
        # Connection.poll(timeout) builds and registers a new selector on
        # every call (~100 us of CPU per request measured with metrics on);
        # one select.poll object per process costs a single syscall.
        pid = os.getpid()
        if self._poller_pid != pid:
            self._poller = select.poll()
            self._poller.register(self._reader.fileno(), select.POLLIN)
            self._poller_pid = pid
        return bool(self._poller.poll(timeout_s * 1000))

    def size(self) -> int:
        return self._maxsize - self._permits.get_value()


class ResponsePipe:
    def __init__(self, ctx):
        self._reader, self._writer = ctx.Pipe(duplex=False)
        self._poller = None
        _grow_pipe(self._writer.fileno())
        self._wlock = ctx.Lock()

    def send(self, message) -> None:
        data = pickle.dumps(message, _PICKLE)
        with self._wlock:
            self._writer.send_bytes(data)

    def fileno(self) -> int:
        return self._reader.fileno()

    def drain(self):
        """Yield every message already in the pipe (processor side)."""
        reader = self._reader
        if self._poller is None:  # only the owning processor drains
            self._poller = select.poll()
            self._poller.register(reader.fileno(), select.POLLIN)
        # Not reader.poll(0): it builds a new selector per call.
        poll = self._poller.poll
        while poll(0):
            yield pickle.loads(reader.recv_bytes())


class WakePipe:
    def __init__(self):
        self.read_fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def wake(self) -> None:
        try:
            os.write(self.write_fd, b"\0")
        except BlockingIOError:
            pass  # a wake-up is already pending

    def drain(self) -> None:
        try:
            while os.read(self.read_fd, 4096):
                pass
        except BlockingIOError:
            pass


class Arena:
    """A shared mapping of request bodies, allocated as a ring.

    The mapping is shared by all processes; the allocator state
    (``_live``, ``_head``) is owned by the processor and never shared: workers
    only read and patch regions they were handed and send the offset back when
    done.  Requests are mostly finished in arrival order, so a ring with
    out-of-order frees (a region is reclaimed once everything before it is
    free) wastes little and costs O(1) per request.
    """

    def __init__(self, size: int):
        self.size = size
        self._map = mmap.mmap(-1, size)
        self.view = memoryview(self._map)
        self._live: OrderedDict[int, list] = OrderedDict()  # offset -> [end, freed]
        self._head = 0

    def alloc(self, n: int) -> int:
        """Offset of ``n`` free bytes, or -1 if the ring has no room now."""
        if n > self.size:
            return -1
        if not self._live:
            self._head = 0
        tail = next(iter(self._live)) if self._live else 0
        head = self._head
        if head >= tail:
            if head + n <= self.size:
                off = head
            elif n < tail:
                off = 0
            elif not self._live:
                off = 0
            else:
                return -1
        else:
            if head + n < tail:
                off = head
            else:
                return -1
        self._live[off] = [off + n, False]
        self._head = off + n
        return off

    def free(self, off: int) -> None:
        entry = self._live.get(off)
        if entry is None:
            return
        entry[1] = True
        while self._live:
            first = next(iter(self._live))
            if not self._live[first][1]:
                break
            del self._live[first]
