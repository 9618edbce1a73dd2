"""The request channel: how request bytes and responses move between processes.

Everything here is created by the supervisor *before* forking, so the
children inherit the sockets, semaphores and shared mappings.

* ``RequestQueue`` — the bounded shared request queue (``queued.max.requests``):
  a Unix datagram socket pair, written by every processor, read by every
  handler worker. One request is one datagram: a fixed binary descriptor
  (``REQUEST``), followed by the request body itself when the body is small
  (``INLINE_MAX_BYTES``). Datagrams keep their boundaries, so any number of
  workers read the same socket with no lock (the kernel hands each datagram
  to exactly one reader and wakes one blocked reader per datagram), and
  nothing is pickled. The bound is a semaphore: a processor that cannot take
  a permit keeps the request and stops reading that connection until a worker
  frees one (Kafka's processors likewise block on a full queue).
* ``Arena`` — one per processor: a shared anonymous mapping that large request
  bodies are received into directly (``recv_into``). Workers read them there
  as a writable ``memoryview`` (offsets are assigned in place) and the region
  is reused once the processor has the response. Measured on this machine
  class: a ``multiprocessing`` queue moves ~600 MB/s of 1 MiB messages
  (pickle + pipe = two copies), a shared mapping >10 GB/s. Small bodies
  travel inline instead: one datagram costs less than arena bookkeeping, a
  long-polling fetch or a JoinGroup waiting for its rebalance must not pin
  arena space, and the worker copies the body out at once.
* ``ResponsePipe`` — one per processor: workers send responses (lists of
  ``bytes`` and ``FileRegion``) to the processor that owns the connection, as
  length-prefixed pickles on a stream socket; writers hold a lock per
  message, the processor reads everything waiting in one ``recv``.
* ``WakePipe`` — one per processor: a byte written after an append wakes
  processors holding delayed fetches.

Why not ``multiprocessing.Pipe``: per small request the old channel cost a
pickle, a lock and two reads each way. A one-record Produce on one connection
(1 network, 2 I/O threads) went from 3,650 to 5,100 requests/s and from 186 to
158 us of broker CPU each with datagrams (perf/README.md, "What changed this
session").
"""

from __future__ import annotations

import mmap
import os
import pickle
import queue
import socket
import struct
import time
from collections import OrderedDict

from kafkapy.replication.purgatory import HIGH_WATERMARK

INLINE_MAX_BYTES = 16 * 1024
# Longest principal a request carries (a processor closes a connection whose
# authenticated name is longer: kafkapy.server.reactor.sasl_authenticator).
MAX_PRINCIPAL_BYTES = 1024

# processor_id, conn_id, arena offset (-1: the body follows inline), body
# size, deadline_ms (0, or a parked fetch's deadline when it is re-run), when
# it was put (time.monotonic(), system-wide on Linux: the request-queue time
# of metrics), the connection's listener index, the length of its
# principal (0: User:ANONYMOUS) and of its peer's address (0: not carried;
# processors send it with group-coordinator requests only, which report it as
# a member's client host); then the principal (UTF-8), the peer's address
# (ASCII) and the inline body.
REQUEST = struct.Struct("=HQqIqdBHB")
MAX_PEER_HOST_BYTES = 255
_STOP_PROCESSOR = 0xFFFF
_STOP = REQUEST.pack(_STOP_PROCESSOR, 0, -1, 0, 0, 0.0, 0, 0, 0)
ANONYMOUS = "User:ANONYMOUS"
_EMPTY = object()
# Kernel buffer of the request socket: room for ~10k small datagrams or ~500
# inline 16 KiB bodies before a processor falls back to its backlog (capped by
# net.core.wmem_max; the default 212 KiB holds ~12 inline 16 KiB bodies).
_REQUEST_SOCKET_BYTES = 4 << 20
# Response stream buffer: a bigger kernel buffer keeps workers from blocking
# on a busy processor.
_RESPONSE_SOCKET_BYTES = 1 << 20

# Message kinds sent back to a processor.
SEND = 0  # parts: list[bytes | FileRegion]
NOREPLY = 1  # acks=0 produce: nothing to send, unmute the connection
CLOSE = 2  # protocol violation: close the connection
DELAY = 3  # a DelayedOperation (purgatory) to park until complete or expired

_PICKLE = pickle.HIGHEST_PROTOCOL
_LENGTH = struct.Struct("=I")


def _set_buffer(sock: socket.socket, option: int, size: int) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, option, size)
    except OSError:
        pass  # keep the default: slower under load, still correct


class Request:
    """A request as a reader gets it from the queue."""

    __slots__ = ("processor_id", "conn_id", "arena_off", "size", "deadline_ms", "put_s", "body",
                 "listener", "principal", "peer_host")

    def __init__(self, processor_id, conn_id, arena_off, size, deadline_ms, put_s, body,
                 listener=0, principal=ANONYMOUS, peer_host=""):
        self.processor_id = processor_id
        self.conn_id = conn_id
        self.arena_off = arena_off
        self.size = size
        self.deadline_ms = deadline_ms
        self.put_s = put_s
        self.body = body  # a writable bytearray (inline), or None (in the arena)
        # The connection's listener (index into config.listeners) and the
        # principal its processor authenticated (kafkapy.server.security).
        self.listener = listener
        self.principal = principal
        self.peer_host = peer_host  # the client's address ("" unless carried)

    def view(self, arenas) -> memoryview:
        """The request body, without its size prefix."""
        if self.body is not None:
            return memoryview(self.body)
        return arenas[self.processor_id][self.arena_off:self.arena_off + self.size]


class RequestQueue:
    """Bounded many-writer many-reader queue of request datagrams.

    Readers are numbered (``readers`` of them: the handler workers). An idle
    reader does not block on the socket: it puts itself on a stack of idle
    readers and sleeps on its own semaphore, and a writer wakes the reader on
    top, the one that went idle last. The kernel would wake blocked readers
    first-come first-served, rotating requests over every worker; on this
    machine class a small Produce then cost ~150 us of worker CPU with 8
    workers against ~86 us with one, the difference being the caches a
    worker finds cold after the seven others ran (perf/README.md). Waking the
    most recently idle worker keeps a lightly loaded broker on few, warm
    workers, and every worker still takes requests when they pile up.
    """

    def __init__(self, ctx, maxsize: int, readers: int = 1):
        self._writer, self._reader = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        _set_buffer(self._writer, socket.SO_SNDBUF, _REQUEST_SOCKET_BYTES)
        self._writer.setblocking(False)
        self._permits = ctx.BoundedSemaphore(maxsize)
        self._maxsize = maxsize
        # The idle stack: [0] is its depth, [1..depth] reader ids, the most
        # recently idle on top. Guarded by _idle_lock (held for a few loads
        # and stores; its atomic operations also order the enqueue before
        # the look at the stack, so a reader going idle either is seen by
        # the writer or sees the request itself).
        self._idle_lock = ctx.Lock()
        self._idle = ctx.RawArray("i", readers + 1)
        self._wakers = [ctx.Semaphore(0) for _ in range(readers)]
        # Made before the readers fork: each gets its own copy-on-write copy.
        self._recv_buf = bytearray(REQUEST.size + MAX_PRINCIPAL_BYTES + MAX_PEER_HOST_BYTES + INLINE_MAX_BYTES)

    def try_put(self, processor_id: int, conn_id: int, arena_off: int, size: int,
                deadline_ms: int, inline, listener: int = 0, principal: bytes = b"",
                peer_host: bytes = b"") -> bool:
        """Queue one request; False (nothing queued) when the queue is full.

        ``inline`` is the body (bytes-like) when ``arena_off`` is -1;
        ``principal`` the connection's, UTF-8, empty for User:ANONYMOUS;
        ``peer_host`` the client's address (ASCII) or empty."""
        if not self._permits.acquire(False):
            return False
        head = REQUEST.pack(processor_id, conn_id, arena_off, size, deadline_ms, time.monotonic(),
                            listener, len(principal), len(peer_host))
        if peer_host:
            principal += peer_host  # both ride between the head and the body
        try:
            if inline is None:
                self._writer.sendmsg((head, principal)) if principal else self._writer.send(head)
            elif principal:
                self._writer.sendmsg((head, principal, inline))
            else:
                self._writer.sendmsg((head, inline))
        except (BlockingIOError, InterruptedError):
            # The kernel buffer is full (only with a small net.core.wmem_max):
            # the same as no permit, the processor retries from its backlog.
            self._permits.release()
            return False
        self._wake_one()
        return True

    def put_stop(self) -> None:
        """Stop one reader (no permit: used only at shutdown)."""
        self._writer.setblocking(True)
        try:
            self._writer.send(_STOP)
        finally:
            self._writer.setblocking(False)
        self._wake_one()

    def _wake_one(self) -> None:
        idle = self._idle
        with self._idle_lock:
            depth = idle[0]
            if not depth:
                return
            reader = idle[depth]
            idle[0] = depth - 1
        self._wakers[reader].release()

    def idle_readers(self) -> list[int]:
        """Reader ids now idle, the next to be woken last."""
        with self._idle_lock:
            return list(self._idle[1:self._idle[0] + 1])

    def _set_idle(self, reader: int, idle_now: bool) -> None:
        idle = self._idle
        with self._idle_lock:
            depth = idle[0]
            for i in range(1, depth + 1):
                if idle[i] == reader:
                    if idle_now:
                        return
                    idle[i:depth] = idle[i + 1:depth + 1]
                    idle[0] = depth - 1
                    return
            if idle_now:
                idle[depth + 1] = reader
                idle[0] = depth + 1

    def get(self, reader: int = 0, timeout_s: float | None = None) -> Request | None:
        """Next request (None = stop) for reader number ``reader``. With
        ``timeout_s``, raises ``queue.Empty`` if nothing arrived in time."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            req = self._take()
            if req is not _EMPTY:
                return req
            self._set_idle(reader, True)
            req = self._take()  # a request put before we were on the stack
            if req is not _EMPTY:
                self._set_idle(reader, False)
                return req
            remaining = None if deadline is None else deadline - time.monotonic()
            woken = remaining is None or remaining > 0
            if woken:
                woken = self._wakers[reader].acquire(True, remaining)
            # Popped by the writer that woke us, or still on the stack after
            # a timeout (or a stale wake-up from a race we won ourselves).
            self._set_idle(reader, False)
            if not woken:
                raise queue.Empty

    def _take(self):
        """A request if one is waiting, else ``_EMPTY``; never blocks."""
        buf = self._recv_buf
        while True:
            try:
                n = self._reader.recv_into(buf, 0, socket.MSG_DONTWAIT)
                break
            except InterruptedError:
                continue
            except BlockingIOError:
                return _EMPTY
        processor_id, conn_id, arena_off, size, deadline_ms, put_s, listener, plen, hlen = REQUEST.unpack_from(buf)
        if processor_id == _STOP_PROCESSOR:
            return None
        self._permits.release()
        start = REQUEST.size + plen
        principal = str(buf[REQUEST.size:start], "utf-8") if plen else ANONYMOUS
        peer_host = ""
        if hlen:
            peer_host = str(buf[start:start + hlen], "ascii")
            start += hlen
        # Inline bodies are copied out of the receive buffer: handlers keep
        # records as views of the body, and the buffer is reused.
        body = buf[start:n] if arena_off < 0 else None
        return Request(processor_id, conn_id, arena_off, size, deadline_ms, put_s, body, listener, principal,
                       peer_host)

    def size(self) -> int:
        return self._maxsize - self._permits.get_value()


class ResponsePipe:
    """Workers -> one processor: ``(conn_id, kind, payload)`` messages."""

    def __init__(self, ctx):
        self._reader, self._writer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        _set_buffer(self._writer, socket.SO_SNDBUF, _RESPONSE_SOCKET_BYTES)
        _set_buffer(self._reader, socket.SO_RCVBUF, _RESPONSE_SOCKET_BYTES)
        self._wlock = ctx.Lock()
        # Reader side (the owning processor only): what arrived, and a partial
        # message left from the last drain.
        self._scratch = None
        self._pending = bytearray()

    def send(self, message) -> None:
        data = pickle.dumps(message, _PICKLE)
        with self._wlock:
            # One sendmsg for prefix and body: one wake-up of the processor.
            sent = self._writer.sendmsg((_LENGTH.pack(len(data)), data))
            if sent < 4 + len(data):  # interrupted part-way
                self._writer.sendall((_LENGTH.pack(len(data)) + data)[sent:])

    def fileno(self) -> int:
        return self._reader.fileno()

    def drain(self):
        """Yield every message already received (processor side; never blocks)."""
        if self._scratch is None:
            self._scratch = bytearray(_RESPONSE_SOCKET_BYTES)
        scratch = self._scratch
        pending = self._pending
        while True:
            try:
                n = self._reader.recv_into(scratch, 0, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            if not n:
                break
            pending += memoryview(scratch)[:n]
            if n < len(scratch):
                break
        pos = 0
        end = len(pending)
        while end - pos >= 4:
            (n,) = _LENGTH.unpack_from(pending, pos)
            if end - pos - 4 < n:
                break
            yield pickle.loads(pending[pos + 4:pos + 4 + n])
            pos += 4 + n
        del pending[:pos]


class WakePipe:
    """Appenders -> one processor: "a high watermark moved".

    The processor keeps the number of delayed operations it has parked (its
    purgatory's size) in ``_parked``, and per shared-table slot how many of
    them watch it in ``_watchers`` (shared memory, written only by that
    processor; the lock's atomic operations order those writes before its
    re-check of the watched fields). An appender that names the slots it
    moved wakes only processors with an operation watching one of them: a
    follower's append, or a produce to a partition nobody waits on, wakes
    nobody, where every processor with anything parked used to be woken.
    Of those, ``_hw_watchers`` counts the ones waiting on the slot's high
    watermark (an acks=all produce, a consumer's fetch, markers): a follower
    Fetch that moved only high watermarks wakes those, not the processors
    whose parked follower Fetches wait on the log end offset. With three
    brokers each follower's Fetch moved the high watermark and woke the
    processor holding the other follower's parked Fetch, which checked it
    and parked it again: two wake-ups of ~5 per replication round for nothing.
    """

    def __init__(self, ctx, slots: int = 0):
        self.read_fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._parked = ctx.RawValue("i", 0)
        self._parked_lock = ctx.Lock()
        # slot -> parked operations watching it (None: not kept, every
        # wake goes to a processor with anything parked)
        self._watchers = ctx.RawArray("I", slots) if slots else None
        self._hw_watchers = ctx.RawArray("I", slots) if slots else None
        # In the processor that reads this pipe (``owned_here``), an append
        # it made itself (a Produce or Fetch it handled) only notes the wake
        # (``pending``) for its loop: no write, no select woken by it, no read.
        self.owned_here = False
        self.pending = False

    def add_parked(self, delta: int, watch=None) -> None:
        """One operation was parked (+1) or finished (-1); ``watch``: what it
        waits for, ``{slot: (field, value)}`` (``DelayedOperation.watch``)."""
        watchers = self._watchers
        if watchers is not None and watch:
            hw_watchers = self._hw_watchers
            for slot, (field, _value) in watch.items():
                watchers[slot] += delta
                if field == HIGH_WATERMARK:
                    hw_watchers[slot] += delta
        with self._parked_lock:
            self._parked.value += delta

    def wake_if_watched(self, slots=None, high_watermark_only: bool = False) -> None:
        """Wake the processor if an operation it parked watches one of
        ``slots`` (None: if it parked any); ``high_watermark_only``: only
        their high watermarks moved, so only operations watching those count."""
        # The appender's partition unlock (a lockf system call) came first:
        # the fields it published are visible before these reads.
        if self._parked.value <= 0:
            return
        watchers = self._hw_watchers if high_watermark_only else self._watchers
        if slots is None or watchers is None:
            return self.wake()
        for slot in slots:
            if watchers[slot]:
                return self.wake()

    def wake(self) -> None:
        if self.owned_here:
            self.pending = True
            return
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

    def __init__(self, size: int, ring_bytes: int | None = None):
        # ``size`` is at least the largest request (socket.request.max.bytes);
        # the ring wraps at ``ring_bytes`` so that pages past it are touched
        # only by a request bigger than the ring, which waits for the ring to
        # be empty and takes the mapping from offset 0.
        self.size = size
        self.ring_bytes = min(size, ring_bytes or size)
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
        if n > self.ring_bytes:
            if self._live:
                return -1
            self._live[0] = [n, False]
            self._head = n
            return 0
        ring = self.ring_bytes
        tail = next(iter(self._live)) if self._live else 0
        head = self._head
        if head >= tail:
            if head + n <= ring:
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
