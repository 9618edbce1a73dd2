"""A TLS connection in memory: a server and a client ``ssl.SSLObject``, each
over two ``ssl.MemoryBIO``, handshaken by moving bytes between the BIOs (as
the broker's processor drives its sessions, without sockets)."""

import ssl
from typing import NamedTuple


class MemoryTls(NamedTuple):
    server: ssl.SSLObject
    client: ssl.SSLObject
    server_in: ssl.MemoryBIO  # what the client sent, for the server to read
    server_out: ssl.MemoryBIO
    client_in: ssl.MemoryBIO
    client_out: ssl.MemoryBIO  # what the client wrote, ciphertext

    def to_server(self) -> None:
        self.server_in.write(self.client_out.read())


def memory_tls(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, server_bios=None) -> MemoryTls:
    """A handshaken pair; ``server_bios``: the server's ``(SSLObject, incoming,
    outgoing)`` to use (a processor's ``TlsSession``) instead of new ones."""
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    if server_bios is None:
        s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO()
        server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    else:
        server, s_in, s_out = server_bios
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    for _ in range(10):  # the handshake's flights
        for obj in (client, server):
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
        c_in.write(s_out.read())
        s_in.write(c_out.read())
    assert server.version() and client.version(), "handshake did not complete"
    return MemoryTls(server, client, s_in, s_out, c_in, c_out)


def tls_contexts(certs) -> tuple:
    """``(server context, client context)`` for ``support.certs.make_certs``'s certificates."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(certs.server_keystore)
    return server, ssl.create_default_context(cafile=str(certs.ca_cert))
