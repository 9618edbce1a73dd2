"""The client connection's response framing (``Connection.on_readable``): every
response dispatched whole, in order and unchanged, however the bytes arrive:
many small ones in one read, one split across reads, frames larger than the
scratch buffer received into their own buffer, and the sizes at the edges."""

from __future__ import annotations

import random
import socket
import struct

import pytest

from kafkapy.client.conn import RECV_BYTES, Connection, InFlight


def _connection_on(sock) -> tuple[Connection, list]:
    c = Connection(1, "127.0.0.1", 0, "frames")
    c.sock = sock
    return c, []


def _expect(c: Connection, got: list, bodies: list[bytes]) -> None:
    for i, _ in enumerate(bodies):
        c.in_flight.append(InFlight(i, 0, 0, None, 0.0,
                                    decoder=lambda frame, offset: got.append(frame) or True))  # kept as handed over


def _frame(correlation_id: int, body: bytes) -> bytes:
    payload = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def _pump(c: Connection, writer, data: bytes, chunks: list[int]) -> None:
    """Write ``data`` in pieces of the given sizes, reading after each one."""
    pos = 0
    for n in chunks:
        writer.sendall(data[pos:pos + n])
        pos += n
        for _ in range(100):  # bounded: each read takes what the socket holds
            if not c.on_readable():
                break
    assert pos == len(data)


SIZES = [0, 1, 100, RECV_BYTES - 8, RECV_BYTES - 4, RECV_BYTES, RECV_BYTES + 1, 3 * RECV_BYTES + 17, 50]


@pytest.mark.parametrize("split", ["whole", "byte-edges", "random"])
def test_responses_are_dispatched_whole_and_in_order(split):
    rng = random.Random(7)
    bodies = [bytes(rng.getrandbits(8) for _ in range(min(n, 64))) * (n // 64 + 1) for n in SIZES]
    bodies = [b[:n] for b, n in zip(bodies, SIZES)] + [b"small-%d" % i for i in range(300)]
    data = b"".join(_frame(i, b) for i, b in enumerate(bodies))
    if split == "whole":
        chunks = []
        left = len(data)
        while left:  # the socket pair's buffer bounds one write: read between writes
            chunks.append(min(left, 64 * 1024))
            left -= chunks[-1]
    elif split == "byte-edges":
        chunks = [1, 2, 3, 4, 5] + [7] * 20 + [len(data) - 15 - 140]
        chunks = chunks[:-1] + [n for n in _pieces(chunks[-1], 60000)]
    else:
        chunks = []
        left = len(data)
        while left:
            chunks.append(min(left, rng.randint(1, 90000)))
            left -= chunks[-1]
    a, b = socket.socketpair()
    a.setblocking(False)
    try:
        c, got = _connection_on(a)
        _expect(c, got, bodies)
        _pump(c, b, data, chunks)
        assert [bytes(f) for f in got] == [struct.pack(">i", i) + body for i, body in enumerate(bodies)]
        assert not c.in_flight and not c._rbuf and c._frame is None
    finally:
        a.close()
        b.close()


def _pieces(total: int, size: int):
    while total:
        yield min(total, size)
        total -= min(total, size)


def test_a_large_response_buffer_is_sized_to_its_frame():
    """Frames past the scratch buffer are received into a buffer of their
    own size (``frame_buffer``), the whole frame and nothing more."""
    body = bytes(range(256)) * (2 * RECV_BYTES // 256)
    a, b = socket.socketpair()
    a.setblocking(False)
    try:
        c, got = _connection_on(a)
        _expect(c, got, [body])
        _pump(c, b, _frame(0, body), list(_pieces(len(body) + 8, 60000)))
        assert [bytes(f) for f in got] == [struct.pack(">i", 0) + body]
    finally:
        a.close()
        b.close()
