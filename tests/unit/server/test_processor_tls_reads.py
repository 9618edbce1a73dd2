"""The processor's TLS reads, step by step (a real Processor in-process, a
socket pair for the connection, the client an ``ssl.SSLObject`` over memory
BIOs; the ``processor`` fixture of tests/unit/conftest.py).

Ciphertext leaves the socket for the connection's incoming BIO before it is
decrypted, and the selector sees only the socket. A read that stopped at its
budget of recvs right after the recv that brought a request's last record
left that record in the BIO, invisible: the request was never taken and the
client waited for its own request timeout (Apache's Java producer over SSL:
one 30 s stall in ~4,000 produce requests, "Disconnected from node 0 due to
timeout").
"""

import selectors

import pytest

from kafkapy.server.reactor import ssl_transport
from kafkapy.server.reactor.connection import _READ_HEADER
from kafkapy.server.reactor.ssl_transport import TlsSession
from support.certs import make_certs
from support.tls_memory import memory_tls, tls_contexts


@pytest.fixture(scope="module")
def contexts(tmp_path_factory):
    return tls_contexts(make_certs(tmp_path_factory.mktemp("certs")))


def _tls_connection(p, contexts):
    """A connection of ``p`` past its TLS handshake (done through the BIOs) and
    the client's ``(SSLObject, its outgoing BIO)``."""
    conn = p.connect(b"\x00\x12\x00\x00")  # a first request, at a worker
    conn.tls = TlsSession(contexts[0])
    tls = memory_tls(*contexts, server_bios=(conn.tls.obj, conn.tls.incoming, conn.tls.outgoing))
    conn.at_worker = False
    conn.state = _READ_HEADER
    p._set_events(conn, selectors.EVENT_READ)
    return conn, tls.client, tls.client_out


@pytest.mark.parametrize("body_bytes", [20, 300_000], ids=["inline", "arena"])
def test_the_record_brought_by_the_last_recv_of_a_read_is_decrypted(processor, contexts, monkeypatch, body_bytes):
    p = processor
    monkeypatch.setattr(ssl_transport, "_TLS_READS", 1)  # the budget ends at the first recv
    conn, client, c_out = _tls_connection(p, contexts)
    body = b"\x00\x00\x00\x09\x00\x00\x00\x05" + bytes(range(256)) * (body_bytes // 256) + b"\x01" * (body_bytes % 256)
    client.write(len(body).to_bytes(4, "big") + body)
    wire = c_out.read()
    peer = p.peer(conn)
    if body_bytes < 100_000:
        peer.sendall(wire)  # all of it waits in the socket: one recv takes it
        p._read(conn)
    else:
        # more than a socket pair holds: the processor reads as it arrives
        peer.setblocking(False)
        sent = 0
        for _ in range(10_000):  # bounded
            if sent == len(wire):
                break
            try:
                sent += peer.send(wire[sent:])
            except BlockingIOError:
                pass
            p._read(conn)
        assert sent == len(wire)  # and a read followed the last send
    req = p.channel.requests.get(timeout_s=1)
    assert req is not None, "the request's last record stayed in the BIO"
    assert req.conn_id == conn.conn_id and bytes(req.view([p.arena.view])) == body
