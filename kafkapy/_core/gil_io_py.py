"""Socket I/O of the client, in plain Python (twin of ``gil_io``).

Same results as the compiled module, but every call here releases the GIL as
the socket module does, and there is no hand-over to the I/O thread: nothing
counts waiting I/O threads, so ``io_threads_waiting`` is always 0 (see
gil_io.pyx for why the compiled one exists).  Stateless.
"""

import socket


def io_threads_waiting():
    """How many I/O threads are waiting for the GIL with work in hand (always 0 here)."""
    return 0


def io_wait(epoll, timeout_s):
    """``epoll.poll(timeout_s)`` as ``[(fd, events)]``; EINTR gives an empty list."""
    try:
        return epoll.poll(max(0.0, timeout_s))
    except InterruptedError:
        return []


def frame_buffer(size):
    """A bytearray of ``size`` bytes for a response to be received into whole
    (zeroed here; the compiled module leaves it as allocated)."""
    if size < 0:
        raise ValueError(f"negative frame size {size}")
    return bytearray(size)


def send_nowait(sock, data):
    """Non-blocking ``send``: bytes sent, or -1 when it would block."""
    try:
        return sock.send(data, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
    except (BlockingIOError, InterruptedError) as exc:
        return 0 if isinstance(exc, InterruptedError) else -1


def recv_into_nowait(sock, buffer):
    """Non-blocking ``recv_into``: bytes read (0: EOF), or -1 when none are waiting."""
    try:
        return sock.recv_into(buffer, 0, socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return -1
