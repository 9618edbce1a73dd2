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


def memory_tls(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> MemoryTls:
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
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
