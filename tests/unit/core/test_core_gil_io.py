"""gil_io: io_wait / send_nowait / recv_into_nowait, compiled and twin behave alike."""


def test_io_helpers_on_a_socketpair(gil_io_mod):
    import select
    import socket

    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    epoll = select.epoll()
    try:
        epoll.register(b.fileno(), select.EPOLLIN)
        assert gil_io_mod.io_wait(epoll, 0) == []
        assert gil_io_mod.io_wait(epoll, 0.01) == []
        assert gil_io_mod.send_nowait(a, memoryview(b"hello")) == 5
        assert [fd for fd, _ in gil_io_mod.io_wait(epoll, 1.0)] == [b.fileno()]
        assert gil_io_mod.io_threads_waiting() == 0
        buf = bytearray(16)
        assert gil_io_mod.recv_into_nowait(b, buf) == 5 and bytes(buf[:5]) == b"hello"
        assert gil_io_mod.recv_into_nowait(b, buf) == -1  # nothing waiting
        big = b"x" * (1 << 22)
        sent = 0
        for _ in range(1000):  # fill the socket buffers until send would block
            n = gil_io_mod.send_nowait(a, big)
            if n < 0:
                break
            sent += n
        assert n == -1 and sent > 0
        a.close()
        total = 0
        for _ in range(10000):
            n = gil_io_mod.recv_into_nowait(b, bytearray(1 << 16))
            if n <= 0:
                break
            total += n
        assert n == 0 and total == sent  # EOF after the data
    finally:
        epoll.close()
        b.close()


def test_frame_buffer_is_a_writable_bytearray_of_the_size_asked(gil_io_mod):
    import pytest

    for size in (0, 1, 4096, 1 << 20):
        buf = gil_io_mod.frame_buffer(size)
        assert type(buf) is bytearray and len(buf) == size
        buf[:] = b"\x5a" * size  # every byte writable, and then as written
        assert buf.count(0x5a) == size
    with pytest.raises(ValueError):
        gil_io_mod.frame_buffer(-1)
