"""Muting in the processor, step by step (a real Processor in-process, socket
pairs for connections; the ``processor`` fixture of tests/unit/conftest.py).

One select() can return both the response pipe and a muted connection as
ready: the worker's answer is handled first and starts writing (the socket
takes part of it: write interest), then the connection's read event from the
same select is handled. That read event must not drop the write interest, or
the rest of the answer is never sent and the client waits for its own
timeout (librdkafka: a Fetch unanswered for 60 s, the FindCoordinator it
pipelined behind it timed out).
"""

import selectors
import socket
import time

from kafkapy.server.reactor.channel import SEND

ANSWER_BYTES = 128 << 10  # far more than the connection's small buffers hold, within the response pipe's
NEXT_REQUEST = b"\x00\x12\x00\x00\x00\x00\x00\x07\x00\x00"  # ApiVersions v0 header, correlation id 7


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def test_a_read_event_handled_after_the_answer_started_keeps_write_interest(processor):
    p = processor
    conn = p.connect(b"\x00\x01" + b"\x00" * 30)  # a request at a worker
    p._set_events(conn, selectors.EVENT_READ)  # muted, still in the selector (no epoll_ctl per request)
    peer = p.peer(conn)
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    peer.sendall(_frame(NEXT_REQUEST))  # the client pipelines its next request: readable
    answer = _frame(b"\x00\x00\x00\x01" + bytes(range(256)) * (ANSWER_BYTES // 256))
    p.channel.response_pipes[0].send((conn.conn_id, SEND, [answer]))
    p._on_responses()  # the pipe first: part of the answer goes out
    assert conn.out and conn.events == selectors.EVENT_WRITE
    p._read(conn)  # then the read event from the same select
    assert conn.events & selectors.EVENT_WRITE, "the rest of the answer would never be sent"
    assert p.channel.requests.size() == 0, "the next request must wait for the answer"

    # The client reads; the processor writes whenever the socket is writable.
    got = bytearray()
    peer.setblocking(False)
    deadline = time.monotonic() + 10
    for _ in range(100_000):  # bounded in count and time
        if len(got) >= len(answer) or time.monotonic() > deadline:
            break
        try:
            got += peer.recv(1 << 20)
        except BlockingIOError:
            pass
        if conn.events & selectors.EVENT_WRITE:
            p._send(conn)
    assert bytes(got) == answer
    # Answered and unmuted: the pipelined request is read and handed on.
    req = p.channel.requests.get(timeout_s=1)
    assert req.conn_id == conn.conn_id and bytes(req.view([p.arena.view])) == NEXT_REQUEST


def test_a_read_event_on_a_muted_connection_with_nothing_to_send_leaves_the_selector(processor):
    p = processor
    conn = p.connect(b"\x00\x01" + b"\x00" * 30)
    p._set_events(conn, selectors.EVENT_READ)
    p.peer(conn).sendall(_frame(NEXT_REQUEST))
    p._read(conn)
    # Out of the selector until the answer is sent (no busy loop on a readable socket).
    assert conn.events == 0 and p.channel.requests.size() == 0
    p.channel.response_pipes[0].send((conn.conn_id, SEND, [_frame(b"\x00\x00\x00\x01")]))
    p._on_responses()
    p.peer(conn).settimeout(1)
    assert p.peer(conn).recv(8, socket.MSG_WAITALL) == _frame(b"\x00\x00\x00\x01")
    req = p.channel.requests.get(timeout_s=1)
    assert req.conn_id == conn.conn_id and bytes(req.view([p.arena.view])) == NEXT_REQUEST
    assert conn.events == selectors.EVENT_READ
