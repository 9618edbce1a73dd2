"""Fixtures shared by the unit tests."""

import multiprocessing
import socket
from types import SimpleNamespace

import pytest

from kafkapy.server.reactor.channel import DELAY, Arena, RequestQueue, ResponsePipe, WakePipe
from kafkapy.server.reactor.processor import Connection, Processor
from kafkapy.storage.shared import SharedPartitionTable

PROCESSOR_CONFIG = {"socket.request.max.bytes": 1 << 20, "connections.max.idle.ms": 600_000,
                    "socket.send.buffer.bytes": -1, "socket.receive.buffer.bytes": -1}


@pytest.fixture
def table(tmp_path):
    """A real shared partition table (anonymous shared mapping and lock file) in a temp dir."""
    t = SharedPartitionTable(capacity=1024, lock_path=str(tmp_path / "partitions.lock"))
    yield t
    t.close()


@pytest.fixture
def processor(table):
    """A real Processor in this process (real channel pieces and shared table,
    socket pairs for connections, no selector loop: tests call its steps).
    ``p.connect(body)`` makes a connection whose request is at a worker,
    ``p.answer(conn, op)`` parks ``op`` for it, ``p.peer(conn)`` is the
    client's end, ``p.received(conn)`` the next response frame there."""
    ctx = multiprocessing.get_context("fork")
    channel = SimpleNamespace(arenas=[Arena(1 << 20)], response_pipes=[ResponsePipe(ctx)],
                              wake_pipes=[WakePipe(ctx)], requests=RequestQueue(ctx, 8),
                              coordinator_requests=RequestQueue(ctx, 8))
    a, b = socket.socketpair()
    p = Processor(0, PROCESSOR_CONFIG, channel, table, a)
    socks = [a, b]
    peers = {}  # conn_id -> the client's end of the connection

    def connect(body: bytes, in_arena=False):
        """A connection whose request ``body`` is at a worker."""
        s1, s2 = socket.socketpair()
        s1.setblocking(False)  # as the processor's sockets are
        socks.extend((s1, s2))
        p.next_conn_id += 1
        conn = Connection(p.next_conn_id, s1, "peer")
        p.conns[conn.conn_id] = conn
        peers[conn.conn_id] = s2
        conn.size = len(body)
        if in_arena:
            conn.arena_off = p.arena.alloc(len(body))
            p.arena.view[conn.arena_off:conn.arena_off + len(body)] = body
            p._submit(conn, None)
        else:
            p._submit(conn, body)
        req = channel.requests.get(timeout_s=1)
        assert (req.conn_id, bytes(req.view([p.arena.view])), req.deadline_ms) == (conn.conn_id, body, 0)
        return conn

    def answer(conn, op):
        """The worker's answer: the operation to park."""
        channel.response_pipes[0].send((conn.conn_id, DELAY, op.to_wire()))
        p._on_responses()

    def peer(conn):
        """The client's end of the connection."""
        return peers[conn.conn_id]

    def received(conn, timeout_s=1.0):
        """The response frame the client end got (size prefix included)."""
        s = peers[conn.conn_id]
        s.settimeout(timeout_s)
        head = s.recv(4, socket.MSG_WAITALL)
        return head + s.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL)

    p.connect, p.answer, p.peer, p.received = connect, answer, peer, received
    yield p
    for s in socks:
        s.close()
