# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``gil_io_py``: socket I/O of the client that manages the GIL.

The producer's sender thread and the threads calling ``send()`` share the GIL.
A thread that releases the GIL for a syscall and wants it back waits until
the holder drops it, which a busy ``send()`` loop does only every
``sys.getswitchinterval()`` (5 ms).  The sender released it three or four
times per batch (epoll, send, recv), so while the application produced,
the sender got about one batch out per 5 ms and idled in 100-200 ms of
gaps per 200k records.  Two remedies, both here because they are C:

* the client's non-blocking socket calls keep the GIL (``send_nowait``,
  ``recv_into_nowait``: a non-blocking send or recv of 16 KiB on loopback
  takes microseconds, far less than a hand-over), so only the sender's
  blocking ``io_wait`` (epoll_wait) releases it;
* when that epoll_wait returns with work, the sender raises a counter, and
  ``producer.FastSend.send`` (the application's hot loop) calls
  ``yield_to_io_threads`` (C only, declared in gil_io.pxd), which steps
  aside — releases the GIL and yields the CPU, for at most 2 ms — until the
  sender holds it.

State: one process-wide counter of I/O threads back from epoll_wait with
work and waiting for the GIL; written only by ``io_wait``, read with atomics
from any thread.  The twin has no counter and no hand-over.
"""

cdef extern from *:
    """
    #include <sched.h>
    #include <sys/epoll.h>
    #include <sys/socket.h>
    #include <errno.h>
    #include <time.h>
    static int kafkapy_io_waiting = 0;
    static int kafkapy_io_waiting_get(void) { return __atomic_load_n(&kafkapy_io_waiting, __ATOMIC_ACQUIRE); }
    static void kafkapy_io_waiting_add(int d) { __atomic_add_fetch(&kafkapy_io_waiting, d, __ATOMIC_ACQ_REL); }
    static long long kafkapy_monotonic_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    }
    """
    int kafkapy_io_waiting_get() nogil
    void kafkapy_io_waiting_add(int d) nogil
    long long kafkapy_monotonic_us() nogil
    int sched_yield() nogil
    struct epoll_event_data "epoll_data":
        int fd
    struct epoll_event:
        unsigned int events
        epoll_event_data data
    int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout) nogil
    ssize_t c_send "send"(int fd, const void* buf, size_t n, int flags) nogil
    ssize_t c_recv "recv"(int fd, void* buf, size_t n, int flags) nogil
    int MSG_DONTWAIT
    int MSG_NOSIGNAL
    int EAGAIN
    int EWOULDBLOCK
    int EINTR
    int errno

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytearray cimport PyByteArray_FromStringAndSize

# Bound of one step aside: a sender round (responses, drain, one Produce
# request) takes 0.1-0.2 ms; 2 ms covers a slow one without ever stalling
# the application behind a sender that does not come.
cdef enum:
    _YIELD_MAX_US = 2000
    _MAX_EVENTS = 64


cdef void yield_to_io_threads() noexcept:
    """Step aside while an I/O thread waits for the GIL with work; at once when none does.

    Called with the GIL held, once per ``FastSend.send``: the common case is
    one atomic load.
    """
    cdef long long deadline
    if kafkapy_io_waiting_get() <= 0:
        return
    with nogil:
        deadline = kafkapy_monotonic_us() + _YIELD_MAX_US
        while kafkapy_io_waiting_get() > 0 and kafkapy_monotonic_us() < deadline:
            sched_yield()


def io_threads_waiting():
    """How many I/O threads are waiting for the GIL with work in hand (for tests)."""
    return kafkapy_io_waiting_get()


def io_wait(epoll, double timeout_s):
    """``epoll.poll(timeout_s)`` as ``[(fd, events)]``, flagging the caller as waiting.

    With a zero timeout the GIL is kept (nothing to wait for).  Otherwise it
    is released for the wait and, when events arrived, the calling thread
    counts as waiting for the GIL until it has it, so ``FastSend`` steps
    aside.  EINTR gives an empty list.
    """
    cdef int epfd = epoll.fileno()
    cdef epoll_event events[_MAX_EVENTS]
    cdef int timeout_ms = 0 if timeout_s <= 0 else max(1, <int>(timeout_s * 1000 + 0.999))
    cdef int n
    cdef int err = 0
    if timeout_ms == 0:
        n = epoll_wait(epfd, events, _MAX_EVENTS, 0)
        if n < 0:
            err = errno
    else:
        with nogil:
            n = epoll_wait(epfd, events, _MAX_EVENTS, timeout_ms)
            if n < 0:
                err = errno
            elif n > 0:
                kafkapy_io_waiting_add(1)
        if n > 0:
            kafkapy_io_waiting_add(-1)
    if n < 0:
        if err == EINTR:
            return []
        raise OSError(err, "epoll_wait failed")
    return [(events[i].data.fd, events[i].events) for i in range(n)]


def frame_buffer(Py_ssize_t size):
    """A bytearray of ``size`` bytes for a response to be received into whole
    (``recv_into`` writes every byte before anything reads it), not zeroed
    first: ``bytearray(size)`` clears it, ~4 % of a follower fetcher's CPU
    for its 1 MB answers."""
    if size < 0:
        raise ValueError(f"negative frame size {size}")
    return PyByteArray_FromStringAndSize(NULL, size)


def send_nowait(sock, data):
    """Non-blocking ``send`` keeping the GIL: bytes sent, or -1 when it would block."""
    cdef int fd = sock.fileno()
    cdef Py_buffer view
    cdef ssize_t n
    cdef int err
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        n = c_send(fd, view.buf, view.len, MSG_DONTWAIT | MSG_NOSIGNAL)
        err = errno
    finally:
        PyBuffer_Release(&view)
    if n < 0:
        if err == EAGAIN or err == EWOULDBLOCK:
            return -1
        if err == EINTR:
            return 0
        raise OSError(err, "send failed")
    return n


def recv_into_nowait(sock, buffer):
    """Non-blocking ``recv_into`` keeping the GIL: bytes read (0: EOF), or -1 when none are waiting."""
    cdef int fd = sock.fileno()
    cdef Py_buffer view
    cdef ssize_t n
    cdef int err
    PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE)
    try:
        n = c_recv(fd, view.buf, view.len, MSG_DONTWAIT)
        err = errno
    finally:
        PyBuffer_Release(&view)
    if n < 0:
        if err == EAGAIN or err == EWOULDBLOCK or err == EINTR:
            return -1
        raise OSError(err, "recv failed")
    return n
