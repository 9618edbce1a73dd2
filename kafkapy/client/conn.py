"""Broker connections: framing, correlation, ApiVersions negotiation.

A ``Connection`` is one TCP socket to one broker with a FIFO of in-flight
requests.  It is sans-IO in spirit: ``send`` encodes and writes a request and
remembers ``(correlation_id, api, version, callback)``; ``on_readable`` reads
what the socket has, cuts size-prefixed frames, decodes each response with the
class of the request's version, checks its correlation id against the head
of the FIFO (Kafka answers a connection's requests strictly in order) and
calls the callback.  Whoever owns the connection drives it: the producer's
sender thread via ``selectors``, the consumer and admin client in the
caller's thread via ``wait``.

Ownership: a connection is used by exactly one thread at a time and holds no
lock; ``KafkaClient`` below owns its connections and the same rule applies.

Version negotiation: right after connecting we send ApiVersions (v3; a
broker that does not know it answers in v0 format with error 35 and its
ranges, and we retry at the highest version it supports).  For each API the
client uses, the version is the highest in both our range (``CLIENT_APIS``)
and the broker's.
"""

from __future__ import annotations

import collections
import logging
import random
import select
import socket
import ssl
import struct
import threading
import time

from kafkapy._core import load
from kafkapy.protocol.api import ApiSpec
from kafkapy.protocol.codec import DecodeError, Parts, decode, encode

from . import errors
from ._schema import build
from .structs import BrokerMetadata, PartitionMetadata

log = logging.getLogger("kafkapy.client")

_gil_io = load("gil_io")
_send_nowait = _gil_io.send_nowait
_recv_into_nowait = _gil_io.recv_into_nowait
_frame_buffer = _gil_io.frame_buffer

_SIZE = struct.Struct(">i")
_RESPONSE_CORRELATION = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">hhih")
_REQUEST_HEADER_SIZE = struct.Struct(">ihhih")  # size prefix + _REQUEST_HEADER

# The APIs and version ranges the client implements.  Lower bounds are the
# oldest versions whose field sets our request descriptions still cover.
CLIENT_APIS: dict[int, ApiSpec] = {
    spec.api_key: spec
    for spec in (
        ApiSpec(0, "Produce", "produce", 3, 9, 3),
        ApiSpec(1, "Fetch", "fetch", 4, 12, 4),
        ApiSpec(2, "ListOffsets", "list_offsets", 1, 7, 1),
        ApiSpec(3, "Metadata", "metadata", 1, 12, 1),
        ApiSpec(8, "OffsetCommit", "offset_commit", 2, 8, 2),
        ApiSpec(9, "OffsetFetch", "offset_fetch", 1, 7, 1),
        ApiSpec(10, "FindCoordinator", "find_coordinator", 0, 4, 0),
        ApiSpec(11, "JoinGroup", "join_group", 0, 7, 0),
        ApiSpec(12, "Heartbeat", "heartbeat", 0, 4, 0),
        ApiSpec(13, "LeaveGroup", "leave_group", 0, 4, 0),
        ApiSpec(14, "SyncGroup", "sync_group", 0, 5, 0),
        ApiSpec(15, "DescribeGroups", "describe_groups", 0, 5, 0),
        ApiSpec(16, "ListGroups", "list_groups", 0, 4, 0),
        ApiSpec(18, "ApiVersions", "api_versions", 0, 3, 0),
        ApiSpec(19, "CreateTopics", "create_topics", 2, 7, 2),
        ApiSpec(20, "DeleteTopics", "delete_topics", 1, 6, 1),
        ApiSpec(21, "DeleteRecords", "delete_records", 0, 2, 0),
        ApiSpec(22, "InitProducerId", "init_producer_id", 0, 4, 0),
        # Transactions (client.transaction_manager; AddPartitionsToTxn v4+ is
        # broker-only) and their admin side (tools.transactions).
        ApiSpec(24, "AddPartitionsToTxn", "add_partitions_to_txn", 0, 3, 0),
        ApiSpec(25, "AddOffsetsToTxn", "add_offsets_to_txn", 0, 3, 0),
        ApiSpec(26, "EndTxn", "end_txn", 0, 3, 0),
        ApiSpec(27, "WriteTxnMarkers", "write_txn_markers", 0, 1, 0, own_below=1),
        ApiSpec(28, "TxnOffsetCommit", "txn_offset_commit", 0, 3, 0),
        ApiSpec(32, "DescribeConfigs", "describe_configs", 1, 4, 1),
        ApiSpec(33, "AlterConfigs", "alter_configs", 0, 2, 0),
        ApiSpec(37, "CreatePartitions", "create_partitions", 0, 3, 0),
        ApiSpec(42, "DeleteGroups", "delete_groups", 0, 2, 0),
        ApiSpec(44, "IncrementalAlterConfigs", "incremental_alter_configs", 0, 1, 0),
        ApiSpec(60, "DescribeCluster", "describe_cluster", 0, 1, 0),
        ApiSpec(61, "DescribeProducers", "describe_producers", 0, 0, 0),
        ApiSpec(65, "DescribeTransactions", "describe_transactions", 0, 0, 0),
        ApiSpec(66, "ListTransactions", "list_transactions", 0, 1, 0),
    )
}
API_VERSIONS = 18
# Each response frame is read into memory whole; 100 MiB is Kafka's
# socket.request.max.bytes, larger than any fetch.max.bytes we would send.
MAX_RESPONSE_BYTES = 100 * 1024 * 1024
# One recv() per readable event: 256 KiB holds a typical produce response or
# a sizeable slice of a fetch response without many syscalls.  It is read
# into a per-connection scratch buffer (recv_into): sock.recv(256 KiB)
# mallocs 256 KiB per call, above glibc's 128 KiB mmap threshold, so every
# 60-byte Produce response cost an mmap/munmap pair and page faults (18% of
# the producer's sender thread in a py-spy profile).
RECV_BYTES = 256 * 1024


class InFlight:
    __slots__ = ("correlation_id", "api_key", "version", "callback", "sent_at", "decoder", "flexible_response")

    def __init__(self, correlation_id, api_key, version, callback, sent_at, decoder=None, flexible_response=False):
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.callback = callback
        self.sent_at = sent_at
        # decoder(frame, offset) -> response, for requests with a dedicated
        # codec (Produce, see _produce.py); None: the generic kio decoder.
        self.decoder = decoder
        self.flexible_response = flexible_response  # response header v1 (used with decoder)


class Connection:
    """One socket to one broker (see the module docstring for the ownership rule)."""

    def __init__(self, node_id: int, host: str, port: int, client_id: str,
                 request_timeout_ms: int = 30000, connect_timeout_ms: int = 10000, security=None):
        self.node_id = node_id
        # A ``security.ClientSecurity`` for TLS and/or SASL (``_open_secure``);
        # None: PLAINTEXT, the path below.
        self.security = security
        self.host = host
        self.port = port
        self.client_id = client_id
        self._client_id_bytes = client_id.encode("utf-8")
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.sock: socket.socket | None = None
        self.in_flight: collections.deque[InFlight] = collections.deque()
        self.versions: dict[int, int] = {}
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._next_correlation_id = 0
        self._rbuf = bytearray()
        self._scratch: memoryview | None = None  # RECV_BYTES, allocated on first read
        self._frame: bytearray | None = None  # a large response being received (on_readable)
        self._frame_filled = 0
        self.closed_error: Exception | None = None

    def __repr__(self):
        return f"Connection(node {self.node_id} {self.host}:{self.port})"

    # ------------------------------------------------------------ lifecycle

    @property
    def connected(self) -> bool:
        return self.sock is not None

    def connect(self) -> None:
        """Connect (blocking, bounded by connect_timeout_ms) and negotiate versions."""
        if self.security is not None:
            sock = self._open_secure()
        else:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_ms / 1000)
            except OSError as exc:
                raise errors.KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
        self.sock = sock
        self.closed_error = None
        try:
            self._negotiate()
        except Exception:
            self.close(errors.KafkaConnectionError("ApiVersions negotiation failed"))
            raise

    def _open_secure(self) -> socket.socket:
        """``connect``'s socket for TLS and SASL: the handshake and the SASL
        exchange on a blocking socket (bounded by connect_timeout_ms per
        operation), then non-blocking as a PLAINTEXT one. A TLS socket takes
        no MSG_DONTWAIT flags, so this connection's ``_send_all`` and
        ``_recv`` become the TLS ones (instance attributes: a PLAINTEXT
        connection keeps the class's, unchanged)."""
        from .blocking import open_socket
        from .security import AuthenticationFailed

        try:
            sock = open_socket((self.host, self.port), self.connect_timeout_ms / 1000, self.security,
                               self._client_id_bytes)
        except AuthenticationFailed as exc:
            # Not retriable, as Java's SaslAuthenticationException: a producer
            # or admin call fails with it at once instead of retrying until its
            # deadline and reporting something else (COORDINATOR_NOT_AVAILABLE).
            raise errors.for_code(exc.error_code, f"{self.host}:{self.port} over {self.security.protocol}: "
                                                  f"{exc}") from exc
        except (OSError, ValueError) as exc:
            raise errors.KafkaConnectionError(f"cannot connect to {self.host}:{self.port} over "
                                              f"{self.security.protocol}: {exc}") from exc
        sock.setblocking(False)
        if self.security.tls:
            self._send_all = self._send_all_tls
            self._recv = self._recv_tls
        return sock

    def _negotiate(self) -> None:
        version = CLIENT_APIS[API_VERSIONS].max_version
        for _attempt in range(3):
            response = self.request(API_VERSIONS, {
                "client_software_name": "kafkapy",
                "client_software_version": "0.1",
            }, version=version)
            broker = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            if response.error_code == 35 and API_VERSIONS in broker:
                version = min(version, broker[API_VERSIONS][1])
                continue
            errors.raise_for_code(response.error_code, "ApiVersions")
            break
        else:
            raise errors.UnsupportedVersionError("ApiVersions")  # noqa: F821
        self.broker_versions = broker
        self.versions = {}
        for key, spec in CLIENT_APIS.items():
            if key in broker:
                lo, hi = broker[key]
                best = min(hi, spec.max_version)
                if best >= max(lo, spec.min_version):
                    self.versions[key] = best

    def close(self, error: Exception | None = None) -> None:
        """Close the socket and fail every in-flight request with ``error``."""
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
        self._rbuf.clear()
        self._frame = None
        error = error or errors.KafkaConnectionError(f"connection to node {self.node_id} closed")
        self.closed_error = error
        pending, self.in_flight = self.in_flight, collections.deque()
        for entry in pending:
            if entry.callback is not None:
                entry.callback(None, error)

    def fileno(self) -> int:
        return self.sock.fileno() if self.sock is not None else -1

    # ------------------------------------------------------------ requests

    def version(self, api_key: int) -> int:
        v = self.versions.get(api_key)
        if v is None:
            if api_key == API_VERSIONS:
                return 0
            spec = CLIENT_APIS[api_key]
            raise errors.UnsupportedVersionError(  # noqa: F821
                f"broker node {self.node_id} supports no version of {spec.name} "
                f"in the client's range v{spec.min_version}-v{spec.max_version}")
        return v

    def supports(self, api_key: int) -> bool:
        return api_key in self.versions

    def send(self, api_key: int, values, callback=None, version: int | None = None,
             expect_response: bool = True) -> int:
        """Encode and write one request; ``callback(response, error)`` runs on its answer.

        ``values`` is a dict (see ``_schema.build``) or a callable
        ``values(version) -> dict`` for requests whose fields depend on it.
        """
        if self.sock is None:
            raise self.closed_error or errors.KafkaConnectionError(f"node {self.node_id} not connected")
        if version is None:
            version = self.version(api_key)
        spec = CLIENT_APIS[api_key]
        cls = spec.request_class(version)
        if callable(values):
            values = values(version)
        entity = build(cls, values)
        self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._next_correlation_id
        out = Parts()
        buf = out.buf
        buf += b"\x00\x00\x00\x00"
        buf += _REQUEST_HEADER.pack(api_key, version, correlation_id, len(self._client_id_bytes))
        buf += self._client_id_bytes
        if cls.__flexible__:
            buf.append(0)  # header v2: empty tag buffer
        encode(entity, out)
        buf[0:4] = _SIZE.pack(len(buf) - 4)
        if expect_response:
            self.in_flight.append(InFlight(correlation_id, api_key, version, callback, time.monotonic()))
        self._send_all(buf)
        return correlation_id

    def send_encoded(self, api_key: int, version: int, body, callback, decoder, flexible: bool,
                     expect_response: bool = True) -> int:
        """Like ``send`` for a body encoded by the caller (the producer's Produce).

        ``decoder(frame, offset) -> response`` decodes the answer's body;
        ``flexible`` selects request header v2 and response header v1.
        """
        if self.sock is None:
            raise self.closed_error or errors.KafkaConnectionError(f"node {self.node_id} not connected")
        self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._next_correlation_id
        header = bytearray(_REQUEST_HEADER_SIZE.pack(
            _REQUEST_HEADER.size + len(self._client_id_bytes) + (1 if flexible else 0) + len(body),
            api_key, version, correlation_id, len(self._client_id_bytes)))
        header += self._client_id_bytes
        if flexible:
            header.append(0)  # header v2: empty tag buffer
        header += body
        if expect_response:
            self.in_flight.append(InFlight(correlation_id, api_key, version, callback, time.monotonic(), decoder,
                                           flexible))
        self._send_all(header)
        return correlation_id

    def _send_all(self, data) -> None:
        view = memoryview(data)
        deadline = None
        while view:
            try:
                # Keeps the GIL (compiled _core): see gil_io.pyx.
                sent = _send_nowait(self.sock, view)
                if sent < 0:
                    raise BlockingIOError
                view = view[sent:]
            except (BlockingIOError, InterruptedError):
                # The kernel send buffer is full (a large produce request);
                # wait for it to drain, bounded by request.timeout.ms.
                if deadline is None:
                    deadline = time.monotonic() + self.request_timeout_ms / 1000
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.close(errors.KafkaTimeoutError(f"send to node {self.node_id} timed out"))
                    raise self.closed_error
                select.select([], [self.sock], [], min(remaining, 0.5))
            except OSError as exc:
                self.close(errors.KafkaConnectionError(f"send to node {self.node_id} failed: {exc}"))
                raise self.closed_error from exc

    def on_readable(self) -> int:
        """Read what is available and dispatch complete responses; return how many.

        Responses are cut out of what one recv read (the scratch buffer, or
        the receive buffer when a partial response waited there): one copy.
        A response larger than RECV_BYTES (a follower's or consumer's fetch
        answer) is received straight into a buffer of its own size once its
        size is known, not zeroed first: one copy from the kernel for most
        of it, one more for what came with its size. Decoded ``records``
        are views of the frame, which is never written again once dispatched.
        """
        sock = self.sock
        if sock is None:
            return 0
        scratch = self._scratch
        if scratch is None:
            scratch = self._scratch = memoryview(bytearray(RECV_BYTES))
        done = 0
        while True:
            frame = self._frame
            if frame is not None:
                n = self._recv(memoryview(frame)[self._frame_filled:])
                if n <= 0:
                    return done
                self._frame_filled += n
                if self._frame_filled < len(frame):
                    continue
                self._frame = None
                self._dispatch(frame)
                done += 1
                if self.sock is None:
                    return done
                continue
            n = self._recv(scratch)
            if n <= 0:
                return done
            rbuf = self._rbuf
            if rbuf:
                rbuf += scratch[:n]
                data, length = rbuf, len(rbuf)
            else:
                data, length = scratch, n  # cut from where it was read; the rest kept below
            position = 0
            while length - position >= 4:
                (size,) = _SIZE.unpack_from(data, position)
                if size < 4 or size > MAX_RESPONSE_BYTES:
                    self.close(errors.CorruptMessageError(f"bad response size {size} from node {self.node_id}"))  # noqa: F821
                    return done
                have = length - position - 4
                if have < size:
                    if size > RECV_BYTES:
                        # The rest goes straight into the frame's own buffer.
                        frame = self._frame = _frame_buffer(size)
                        frame[:have] = data[position + 4:length]
                        self._frame_filled = have
                        position = length
                    break
                frame = data[position + 4: position + 4 + size]
                if data is scratch:
                    frame = bytearray(frame)  # out of the scratch buffer, which the next read overwrites
                position += 4 + size
                self._dispatch(frame)
                done += 1
                if self.sock is None:
                    return done
            if data is rbuf:
                if position:
                    del rbuf[:position]
            elif position < length:
                rbuf += scratch[position:length]  # a partial response: kept for the next read
            if n < len(scratch) and self._frame is None:
                return done

    def _recv(self, buffer) -> int:
        """Bytes read into ``buffer`` (non-blocking); 0 when none are waiting
        or the connection closed (then ``self.sock`` is None)."""
        try:
            n = _recv_into_nowait(self.sock, buffer)  # keeps the GIL, as _send_all
        except InterruptedError:
            return 0
        except OSError as exc:
            self.close(errors.KafkaConnectionError(f"recv from node {self.node_id} failed: {exc}"))
            return 0
        if n < 0:
            return 0
        if not n:
            self.close(errors.KafkaConnectionError(f"node {self.node_id} closed the connection"))
        return n

    def _send_all_tls(self, data) -> None:
        """``_send_all`` on a non-blocking TLS socket: a write that would block
        is retried with the same bytes (OpenSSL's rule) once the socket is
        writable (readable for a renegotiation), bounded by request.timeout.ms."""
        view = memoryview(data)
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        while view:
            try:
                view = view[self.sock.send(view):]
                continue
            except ssl.SSLWantReadError:
                wait = ([self.sock], [])
            except (ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                wait = ([], [self.sock])
            except OSError as exc:
                self.close(errors.KafkaConnectionError(f"send to node {self.node_id} failed: {exc}"))
                raise self.closed_error from exc
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close(errors.KafkaTimeoutError(f"send to node {self.node_id} timed out"))
                raise self.closed_error
            select.select(*wait, [], min(remaining, 0.5))

    def _recv_tls(self, buffer) -> int:
        """``_recv`` on a non-blocking TLS socket. It fills ``buffer`` until
        OpenSSL wants more from the socket: bytes OpenSSL has decrypted but
        not handed out do not make the socket readable, so stopping after one
        TLS record (16 KiB) could leave a response waiting for select forever.
        ``recv_into`` writes straight into ``buffer`` (a large frame's own)."""
        view = memoryview(buffer)
        filled = 0
        while filled < len(view):
            try:
                n = self.sock.recv_into(view[filled:])
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, InterruptedError):
                break
            except OSError as exc:
                self.close(errors.KafkaConnectionError(f"recv from node {self.node_id} failed: {exc}"))
                return 0
            if not n:
                if not filled:
                    self.close(errors.KafkaConnectionError(f"node {self.node_id} closed the connection"))
                break  # the EOF is seen by the next read
            filled += n
        return filled

    def _dispatch(self, frame: bytes) -> None:
        (correlation_id,) = _RESPONSE_CORRELATION.unpack_from(frame, 0)
        if not self.in_flight or self.in_flight[0].correlation_id != correlation_id:
            expected = self.in_flight[0].correlation_id if self.in_flight else None
            self.close(errors.CorruptMessageError(  # noqa: F821
                f"node {self.node_id} answered correlation id {correlation_id}, expected {expected}"))
            return
        entry = self.in_flight.popleft()
        if entry.decoder is not None:
            offset = 4
            if entry.flexible_response:
                offset = 5 if frame[4] == 0 else None
            try:
                if offset is None:
                    from kafkapy.protocol.headers import skip_tagged_fields
                    offset = skip_tagged_fields(memoryview(frame), 4)
                response = entry.decoder(frame, offset)
            except (ValueError, IndexError, DecodeError) as exc:
                self.close(errors.CorruptMessageError(  # noqa: F821
                    f"cannot decode {CLIENT_APIS[entry.api_key].name} v{entry.version}: {exc}"))
                return
            if entry.callback is not None:
                entry.callback(response, None)
            return
        spec = CLIENT_APIS[entry.api_key]
        cls = spec.response_class(entry.version)
        # Response header v1 (a tag buffer) for flexible versions, except
        # ApiVersions which is always answered with header v0.
        offset = 4
        if cls.__flexible__ and entry.api_key != API_VERSIONS:
            offset = 5  # an empty tag buffer is the one byte 0
            if frame[4] != 0:
                from kafkapy.protocol.headers import skip_tagged_fields
                offset = skip_tagged_fields(memoryview(frame), 4)
        try:
            response, _ = decode(cls, frame, offset)
        except DecodeError as exc:
            if entry.api_key == API_VERSIONS and entry.version > 0:
                # An ApiVersions version the broker does not know is answered
                # in v0 format (error 35 plus its ranges).
                try:
                    response, _ = decode(spec.response_class(0), frame, 4)
                except DecodeError:
                    response = None
                if response is not None:
                    if entry.callback is not None:
                        entry.callback(response, None)
                    return
            self.close(errors.CorruptMessageError(f"cannot decode {spec.name} v{entry.version}: {exc}"))  # noqa: F821
            return
        if entry.callback is not None:
            entry.callback(response, None)

    def wait(self, timeout_s: float) -> int:
        """Block up to ``timeout_s`` for data, then dispatch; returns responses handled."""
        if self.sock is None:
            return 0
        try:
            readable, _, _ = select.select([self.sock], [], [], max(0.0, timeout_s))
        except (OSError, ValueError):
            return 0
        if readable:
            return self.on_readable()
        return 0

    def request(self, api_key: int, values, timeout_ms: int | None = None, version: int | None = None):
        """Send and block for the response (dispatching earlier in-flight ones first)."""
        result = []

        def done(response, error):
            result.append((response, error))

        self.send(api_key, values, done, version=version)
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        while not result:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close(errors.KafkaTimeoutError(
                    f"{CLIENT_APIS[api_key].name} to node {self.node_id} got no answer in {timeout_ms} ms"))
                break
            self.wait(remaining)
            if self.sock is None and not result:
                break
        if not result:
            raise self.closed_error or errors.KafkaConnectionError("connection closed")
        response, error = result[0]
        if error is not None:
            raise error
        return response


def parse_bootstrap(bootstrap_servers) -> list[tuple[str, int]]:
    if isinstance(bootstrap_servers, str):
        bootstrap_servers = bootstrap_servers.split(",")
    out = []
    for entry in bootstrap_servers:
        entry = entry.strip()
        if not entry:
            continue
        if "://" in entry:
            entry = entry.split("://", 1)[1]
        host, _, port = entry.rpartition(":")
        if not host:
            host, port = port, "9092"
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("bootstrap_servers is empty")
    return out


class ClusterMetadata:
    """The client's view of brokers, topics and partition leaders.

    Written by whichever thread performs a Metadata request (the producer's
    sender thread, or the consumer/admin caller) under ``self._lock``;
    readers take the dicts as snapshots (they are replaced, never mutated in
    place).  ``version`` increments on every update and ``updated`` is
    notified, which is how ``KafkaProducer.send`` waits for a topic.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self.updated = threading.Condition(self._lock)
        self.version = 0
        self.brokers: dict[int, BrokerMetadata] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None
        self.partitions: dict[str, dict[int, PartitionMetadata]] = {}
        self.topic_errors: dict[str, int] = {}
        self.topic_ids: dict = {}
        self.internal_topics: set[str] = set()
        # topic -> partitions with a leader, computed once per update because
        # the sticky partitioner asks on every keyless send.
        self.available: dict[str, list[int]] = {}
        self.last_refresh_ms = 0.0
        self.need_update = False

    def update(self, response, requested_topics) -> None:
        brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, getattr(b, "rack", None))
                   for b in response.brokers}
        partitions = dict(self.partitions) if requested_topics is not None else {}
        topic_errors = dict(self.topic_errors) if requested_topics is not None else {}
        topic_ids = dict(self.topic_ids)
        internal = set(self.internal_topics)
        for topic in response.topics:
            name = topic.name
            if topic.error_code:
                topic_errors[name] = topic.error_code
                partitions.pop(name, None)
                continue
            topic_errors.pop(name, None)
            if getattr(topic, "topic_id", None) is not None:
                topic_ids[name] = topic.topic_id
            if getattr(topic, "is_internal", False):
                internal.add(name)
            partitions[name] = {
                p.partition_index: PartitionMetadata(
                    name, p.partition_index, p.leader_id, getattr(p, "leader_epoch", -1),
                    tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(getattr(p, "offline_replicas", ())),
                    p.error_code)
                for p in topic.partitions
            }
        available = {t: [p for p, meta in parts.items() if meta.leader >= 0] for t, parts in partitions.items()}
        with self._lock:
            self.available = available
            self.brokers = brokers
            self.controller_id = getattr(response, "controller_id", -1)
            self.cluster_id = getattr(response, "cluster_id", None)
            self.partitions = partitions
            self.topic_errors = topic_errors
            self.topic_ids = topic_ids
            self.internal_topics = internal
            self.version += 1
            self.last_refresh_ms = time.monotonic() * 1000
            self.need_update = False
            self.updated.notify_all()

    def partition_count(self, topic: str):
        parts = self.partitions.get(topic)
        return len(parts) if parts else None

    def leader_for(self, topic: str, partition: int) -> int:
        parts = self.partitions.get(topic)
        if not parts:
            return -1
        meta = parts.get(partition)
        return meta.leader if meta is not None else -1

    def available_partitions(self, topic: str) -> list[int]:
        return self.available.get(topic, [])

    def request_update(self) -> int:
        with self._lock:
            self.need_update = True
            return self.version

    def wait_for_update(self, version: int, timeout_s: float) -> bool:
        with self._lock:
            return self.updated.wait_for(lambda: self.version > version, timeout_s)


def metadata_request(topics, allow_auto_topic_creation: bool = True):
    """Metadata request values: ``topics`` None means all topics."""
    def values(version):
        if topics is None:
            topic_list = None if version >= 1 else ()
        elif version >= 10:
            topic_list = [{"name": t, "topic_id": None} for t in topics]
        else:
            topic_list = [{"name": t} for t in topics]
        return {
            "topics": topic_list,
            "allow_auto_topic_creation": allow_auto_topic_creation,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
    return values


class KafkaClient:
    """Connections to the cluster's brokers plus its metadata.

    Owned by one thread (the producer's sender thread, or the thread calling
    the consumer/admin client); ``metadata`` alone is shared (it has its own
    lock).  Node ids come from Metadata responses; before the first one the
    bootstrap servers are nodes ``-1, -2, ...`` as in Java.
    """

    def __init__(self, bootstrap_servers, client_id: str, request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, metadata_max_age_ms: int = 300000,
                 allow_auto_topic_creation: bool = True, security=None):
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        # A security.ClientSecurity for every connection (None: PLAINTEXT).
        self.security = security
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.metadata = ClusterMetadata()
        self.connections: dict[int, Connection] = {}
        # Topics whose metadata we keep fresh; None = all topics.
        self.topics: set[str] = set()

    def _address(self, node_id: int):
        broker = self.metadata.brokers.get(node_id)
        if broker is not None:
            return broker.host, broker.port
        if node_id < 0 and -node_id <= len(self.bootstrap):
            return self.bootstrap[-node_id - 1]
        return None

    def connection(self, node_id: int) -> Connection:
        """A connected connection to ``node_id`` (connects if needed)."""
        conn = self.connections.get(node_id)
        if conn is not None and conn.connected:
            return conn
        address = self._address(node_id)
        if address is None:
            raise errors.LeaderNotAvailableError(f"unknown broker node {node_id}")  # noqa: F821
        if conn is None or (conn.host, conn.port) != address:
            conn = Connection(node_id, address[0], address[1], self.client_id, self.request_timeout_ms,
                              security=self.security)
            self.connections[node_id] = conn
        conn.connect()
        return conn

    def least_loaded_connection(self) -> Connection:
        """A connected broker with the fewest in-flight requests (connecting if none is)."""
        live = [c for c in self.connections.values() if c.connected]
        if live:
            return min(live, key=lambda c: len(c.in_flight))
        candidates = list(self.metadata.brokers) or [-(i + 1) for i in range(len(self.bootstrap))]
        if self.metadata.brokers:
            candidates += [-(i + 1) for i in range(len(self.bootstrap))]
        random.shuffle(candidates)
        last_error = None
        for node_id in candidates:
            try:
                return self.connection(node_id)
            except errors.KafkaError as exc:
                last_error = exc
        if last_error is not None and not last_error.retriable:
            raise last_error  # refused credentials: no other broker will take them either
        raise errors.NoBrokersAvailable(f"no broker reachable ({last_error})")

    def refresh_metadata(self, topics=None, timeout_ms: int | None = None):
        """Metadata request for ``topics`` (default: the tracked set; None tracked = all)."""
        if topics is None:
            topics = self.topics
        topics = None if topics is None else sorted(topics)
        conn = self.least_loaded_connection()
        response = conn.request(3, metadata_request(topics, self.allow_auto_topic_creation), timeout_ms)
        self.metadata.update(response, topics)
        # Drop connections to brokers that left the cluster (bootstrap ones too,
        # once real node ids are known, unless it is the one we just used).
        for node_id in [n for n in self.connections if n not in self.metadata.brokers and n >= 0]:
            self.connections.pop(node_id).close()
        return response

    def request(self, node_id: int, api_key: int, values, timeout_ms: int | None = None):
        return self.connection(node_id).request(api_key, values, timeout_ms)

    def any_request(self, api_key: int, values, timeout_ms: int | None = None):
        return self.least_loaded_connection().request(api_key, values, timeout_ms)

    def close(self) -> None:
        for conn in self.connections.values():
            conn.close()
        self.connections.clear()
