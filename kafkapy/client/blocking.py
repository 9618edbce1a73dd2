"""The one blocking request-response connection: a socket, one request at a time.

Where a thread sends a Kafka request and waits for its answer, it uses this:
the controller's channel to each broker and a stopping broker's
ControlledShutdown (``server/controller_channel.py``), the transaction
coordinator's marker senders (``coordinator/transaction/marker_channel.py``),
the tools that send raw requests (``tools/_secure_conn.py``,
kafkapy-leader-election), and the SASL exchange that ``open_socket`` runs on
every secured connection, the client library's included. The client
library's pipelined ``conn.Connection`` (many requests in flight, driven by a
selector) is the other kind of connection, and takes its socket from
``open_socket`` too.

Framing: request header v1, or v2 (with its empty tagged fields) for a
flexible version; response header v0, or v1 for a flexible version except
ApiVersions, whose response header is always v0. Every socket operation is
bounded by the socket's timeout; an answer over Kafka's
``socket.request.max.bytes`` default (100 MiB), with another correlation id
or cut short is ValueError or ConnectionError, and the caller closes the
socket.

Ownership: a socket, and a ``BlockingConnection``, belong to one thread at a
time; nothing here holds a lock.
"""

from __future__ import annotations

import socket
import struct

from kafkapy.client.security import ClientSecurity, authenticate
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.protocol.headers import skip_tagged_fields

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_MAX_RESPONSE_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
_API_VERSIONS = 18


def open_socket(address, timeout_s: float, security: ClientSecurity | None = None,
                client_id: bytes = b"kafkapy") -> socket.socket:
    """A blocking socket to ``address`` (timeout ``timeout_s`` per operation),
    TCP_NODELAY, with TLS and SASL done as ``security`` says (None:
    PLAINTEXT); OSError (ssl.SSLError, AuthenticationFailed) or ValueError (a
    garbled answer) when not."""
    sock = socket.create_connection(address, timeout=timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if security is None:
        return sock
    try:
        if security.ssl_context is not None:
            sock = security.ssl_context.wrap_socket(sock, server_hostname=address[0])
        if security.mechanism is not None:
            correlation = iter(range(1, 100))

            def call(api_key, version, data):
                return request(sock, api_key, version, data, next(correlation), client_id)

            authenticate(call, security.mechanism, security.username, security.password)
    except BaseException:
        sock.close()
        raise
    return sock


def request(sock, api_key: int, version: int, data: dict, correlation_id: int, client_id: bytes):
    """One request built from ``data`` on a blocking ``sock`` and its decoded answer."""
    spec = API_TABLE[api_key]
    flexible = spec.is_flexible(version)
    body = encode_to_bytes(construct(spec.request_class(version), data))
    frame = _HEADER.pack(api_key, version, correlation_id, len(client_id)) + client_id + \
        (b"\x00" if flexible else b"") + body
    sock.sendall(_SIZE.pack(len(frame)) + frame)
    (size,) = _SIZE.unpack(recv_exactly(sock, 4))
    if not 4 <= size <= _MAX_RESPONSE_BYTES:
        raise ValueError(f"bad response size {size}")
    raw = memoryview(recv_exactly(sock, size))
    if _SIZE.unpack_from(raw)[0] != correlation_id:
        raise ValueError("an answer with another correlation id")
    offset = skip_tagged_fields(raw, 4) if flexible and api_key != _API_VERSIONS else 4
    return decode(spec.response_class(version), raw, offset)[0]


def recv_exactly(sock, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:  # bounded by the socket's timeout per recv
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return bytes(out)


def request_once(address, api_key: int, version: int, data: dict, timeout_s: float,
                 client_id: str = "kafkapy", security: ClientSecurity | None = None):
    """One request on a fresh connection to ``address`` and its answer; raises
    OSError/ValueError. The tools that speak to one broker use it
    (kafkapy-leader-election, kafkapy-reassign-partitions)."""
    with BlockingConnection(address, timeout_s, security, client_id.encode()) as conn:
        return conn.request(api_key, version, data)


class BlockingConnection:
    """``open_socket`` and its correlation ids: ``request(api_key, version,
    data)`` -> the decoded answer. One thread at a time; ``close`` from
    another thread wakes a request blocked in ``recv`` (it fails with OSError)."""

    def __init__(self, address, timeout_s: float, security: ClientSecurity | None = None,
                 client_id: bytes = b"kafkapy"):
        self.address = address
        self.client_id = client_id
        self.correlation_id = 0
        self.sock = open_socket(address, timeout_s, security, client_id)

    def settimeout(self, timeout_s: float) -> None:
        self.sock.settimeout(timeout_s)

    def request(self, api_key: int, version: int, data: dict):
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        return request(self.sock, api_key, version, data, self.correlation_id, self.client_id)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes a recv in progress on another thread
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "BlockingConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
