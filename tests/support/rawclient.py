"""A tiny raw Kafka-protocol client for hostile-input and readiness checks.

It speaks only framing: a request is ``int32 size`` + bytes, a response is one
size-prefixed frame.  It encodes request header v1 by hand (no kafkapy
imports), so a broken kafkapy codec cannot hide a broker bug from the tests
that use it.  Every wait is bounded by a deadline.

Ownership: a ``RawClient`` owns its socket; one test, one thread.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Optional

API_VERSIONS = 18

# Refuse to buffer a frame larger than this from a (possibly broken) broker:
# Kafka's own socket.request.max.bytes default, 100 MiB.
DEFAULT_MAX_FRAME_BYTES = 104857600


class ConnectionClosed(ConnectionError):
    """The peer closed the connection (``partial`` bytes of a frame had arrived)."""

    def __init__(self, message: str, partial: bytes = b""):
        super().__init__(message)
        self.partial = partial


class FrameTimeout(TimeoutError):
    """No complete frame arrived in time."""


def encode_request_header_v1(api_key: int, api_version: int, correlation_id: int,
                             client_id: Optional[str] = "kafkapy-raw") -> bytes:
    """Request header v1: api_key i16, api_version i16, correlation_id i32, client_id nullable string."""
    header = struct.pack(">hhi", api_key, api_version, correlation_id)
    if client_id is None:
        return header + struct.pack(">h", -1)
    raw = client_id.encode("utf-8")
    return header + struct.pack(">h", len(raw)) + raw


def encode_request(api_key: int, api_version: int, correlation_id: int, body: bytes = b"",
                   client_id: Optional[str] = "kafkapy-raw") -> bytes:
    """A whole size-prefixed request with a v1 header (non-flexible versions only)."""
    payload = encode_request_header_v1(api_key, api_version, correlation_id, client_id) + body
    return struct.pack(">i", len(payload)) + payload


def api_versions_v0_request(correlation_id: int, client_id: Optional[str] = "kafkapy-raw") -> bytes:
    """ApiVersions v0: header v1 and an empty body."""
    return encode_request(API_VERSIONS, 0, correlation_id, b"", client_id)


def parse_api_versions_v0_response(body: bytes) -> tuple[int, list[tuple[int, int, int]]]:
    """Body of an ApiVersions v0..v2 response after the correlation id:
    ``(error_code, [(api_key, min_version, max_version), ...])``."""
    error_code, count = struct.unpack_from(">hi", body, 0)
    if count < 0 or 6 + 6 * count > len(body):
        raise ValueError(f"bad ApiVersions array length {count} for {len(body)} bytes")
    apis = [struct.unpack_from(">hhh", body, 6 + 6 * i) for i in range(count)]
    return error_code, apis


class RawClient:
    """One TCP connection to a broker; send bytes, read size-prefixed frames."""

    def __init__(self, host: str, port: int, timeout_s: float = 5.0,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, source_address=None,
                 receive_buffer: int = 0):
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._next_correlation_id = 1
        # source_address: e.g. ("127.0.0.2", 0), a loopback address of its own
        # (tests of what the broker reports as the client's host).
        # receive_buffer: SO_RCVBUF set before connecting (a slow reader whose
        # small window makes the broker write its answer in pieces).
        if receive_buffer:
            self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            self.sock.settimeout(timeout_s)
            if source_address is not None:
                self.sock.bind(source_address)
            self.sock.connect((host, port))
        else:
            self.sock = socket.create_connection((host, port), timeout=timeout_s, source_address=source_address)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @classmethod
    def connect(cls, bootstrap: str, timeout_s: float = 5.0) -> "RawClient":
        """Connect to ``"host:port"`` (``"[v6]:port"`` also accepted)."""
        host, _, port = bootstrap.rpartition(":")
        return cls(host.strip("[]"), int(port), timeout_s)

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # -- sending ---------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Send raw bytes (a partial frame, garbage, anything)."""
        self.sock.sendall(data)

    def send_request(self, api_key: int, api_version: int, body: bytes = b"",
                     correlation_id: Optional[int] = None,
                     client_id: Optional[str] = "kafkapy-raw") -> int:
        """Send one request with a v1 header; returns the correlation id used."""
        if correlation_id is None:
            correlation_id = self._next_correlation_id
            self._next_correlation_id += 1
        self.send(encode_request(api_key, api_version, correlation_id, body, client_id))
        return correlation_id

    # -- receiving -------------------------------------------------------------

    def _fill(self, n: int, deadline: float) -> None:
        while len(self._buffer) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FrameTimeout(f"waited for {n} bytes, have {len(self._buffer)}")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(max(65536, n - len(self._buffer)))
            except socket.timeout:
                raise FrameTimeout(f"waited for {n} bytes, have {len(self._buffer)}") from None
            except (ConnectionResetError, BrokenPipeError) as exc:
                raise ConnectionClosed(f"connection reset: {exc}", bytes(self._buffer)) from None
            if not chunk:
                raise ConnectionClosed("connection closed by peer", bytes(self._buffer))
            self._buffer += chunk

    def recv_frame(self, timeout_s: Optional[float] = None) -> bytes:
        """Read one size-prefixed frame and return its payload (without the size)."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        self._fill(4, deadline)
        (size,) = struct.unpack_from(">i", self._buffer, 0)
        if size < 0 or size > self.max_frame_bytes:
            raise ValueError(f"frame size {size} outside [0, {self.max_frame_bytes}]")
        self._fill(4 + size, deadline)
        frame = bytes(self._buffer[4:4 + size])
        del self._buffer[:4 + size]
        return frame

    def recv_response(self, correlation_id: int, timeout_s: Optional[float] = None) -> bytes:
        """Read one frame, check its correlation id, return the rest (header v0 only)."""
        frame = self.recv_frame(timeout_s)
        if len(frame) < 4:
            raise ValueError(f"response frame of {len(frame)} bytes has no correlation id")
        (got,) = struct.unpack_from(">i", frame, 0)
        if got != correlation_id:
            raise ValueError(f"correlation id {got}, expected {correlation_id}")
        return frame[4:]

    def request(self, api_key: int, api_version: int, body: bytes = b"",
                timeout_s: Optional[float] = None) -> bytes:
        """Send a request and return its response body (after a v0 response header)."""
        correlation_id = self.send_request(api_key, api_version, body)
        return self.recv_response(correlation_id, timeout_s)

    def api_versions(self, timeout_s: Optional[float] = None) -> tuple[int, list[tuple[int, int, int]]]:
        """ApiVersions v0 round trip: ``(error_code, [(api_key, min, max), ...])``."""
        return parse_api_versions_v0_response(self.request(API_VERSIONS, 0, b"", timeout_s))

    def wait_closed(self, timeout_s: float = 5.0) -> bool:
        """True once the peer has closed the connection (EOF or reset) within
        ``timeout_s``; False if it is still open then.  Bytes that arrive
        meanwhile are kept for ``recv_frame``."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not chunk:
                return True
            self._buffer += chunk


def probe_api_versions(host: str, port: int, correlation_id: int = 0x6b61, timeout_s: float = 2.0) -> bool:
    """One readiness probe: connect, send ApiVersions v0, and check a response
    frame with the same correlation id comes back.  False on any failure."""
    try:
        with RawClient(host, port, timeout_s) as client:
            client.send(api_versions_v0_request(correlation_id))
            client.recv_response(correlation_id, timeout_s)
            return True
    except (OSError, ValueError):
        return False
