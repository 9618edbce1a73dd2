"""A processor: one selector loop owning its connections (Kafka's Processor
and its Selector).

Owned by one processor process; nothing here is shared except the arena
mapping (whose allocator state is still owned here), the pipes and the shared
partition table (read only: high watermarks of delayed fetches).

Per connection the states are: reading the 4-byte size, reading the body,
*muted* while a handler works on the request (the socket is not read, so
requests of one connection are handled strictly in order, Kafka's muting),
sending the response.  ``acks=0`` produce gets no response: the worker sends
NOREPLY and the connection is unmuted.

Security (``kafkapy.server.security``, per listener): a connection on an SSL
or SASL_SSL listener starts in the TLS handshake state, driven by the same
loop (``do_handshake`` steps between socket reads and writes, never
blocking another connection); its bytes then go through its ``TlsSession``
(an SSLObject over memory BIOs, the socket I/O done here in large pieces)
and its file regions are read and encrypted (no sendfile: ``_tls_send``):
those steps are ``ssl_transport.SslTransportLayer``'s. On a SASL listener
every request before authentication completes goes to the connection's
``SaslSession`` here, never to a worker (but ApiVersions); a failed
authentication is answered and closed after
``connection.failed.authentication.delay.ms`` (the closing state): those steps
are ``sasl_authenticator.SaslServerAuthenticator``'s. The authenticated
principal is kept per connection (``Connection.principal_bytes``,
``connection.py``) and travels with each of its requests to the handlers
(``ctx.principal``).

The Processor inherits the TLS and SASL steps from those two classes (they
keep no state of their own: they use the processor's buffers, connections and
counters). The plaintext path reaches neither: ``_read``, ``_send`` and
``_submit`` call into them only for a connection with a TLS or SASL session.
"""

from __future__ import annotations

import errno
import heapq
import logging
import os
import selectors
import socket
import struct
import time
from collections import OrderedDict, deque

from kafkapy._core.types import FileRegion
from kafkapy.metrics import probes
from kafkapy.server import child_signals
from kafkapy.protocol.api import API_TABLE, COORDINATOR_KEYS
from kafkapy.protocol.headers import encode_response
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.purgatory import (PRODUCE, TXN_MARKERS, DelayedProduce, DelayedVerification, Purgatory,
                                          from_wire)
from kafkapy.server.handlers.produce import delayed_produce_response
from kafkapy.server.handlers.write_txn_markers import delayed_txn_markers_response
from kafkapy.server.quotas.connections import ConnectionQuotas
from kafkapy.server.quotas.throttle import THROTTLED
from kafkapy.server.reactor.poller import Poller
from kafkapy.server.reactor.channel import (
    ANONYMOUS,
    CLOSE,
    DELAY,
    INLINE_MAX_BYTES,
    NOREPLY,
    SEND,
)
from kafkapy.server.reactor.connection import (
    _CLOSING,
    _HANDSHAKE,
    _MUTED,
    _READ_BODY,
    _READ_HEADER,
    _WAIT_ARENA,
    Connection,
)
from kafkapy.server.reactor.sasl_authenticator import SaslServerAuthenticator
from kafkapy.server.reactor.ssl_transport import _TLS_CHUNK, _TLS_RAW_BYTES, SslTransportLayer, TlsSession
from kafkapy.server.reactor.worker import HELD, handle_request
from kafkapy.server.security import listener_securities
from kafkapy.server.security import sasl as _sasl

# A parked DelayedProduce's KIND -> (API key, builder of its response from
# the operation and the shared table): what the processor answers it with.
_DELAYED_ANSWERS = {PRODUCE: (0, delayed_produce_response),
                    TXN_MARKERS: (27, delayed_txn_markers_response)}


log = logging.getLogger("kafkapy.network")

_SIZE = struct.Struct(">i")
# A request header's api_key (read unsigned, as before: an unknown key) and api_version.
_KEY_VERSION = struct.Struct(">Hh")
# Open segment files kept per processor for sendfile; a fetch-heavy broker
# touches few active segments, 256 keeps fd use bounded (LimitNOFILE).
_MAX_CACHED_FILES = 256
_SCRATCH_BYTES = 64 * 1024
# A request in flight this long with no deadline to wait for is logged (once).
_STUCK_S = 20.0


class Processor(SslTransportLayer, SaslServerAuthenticator):
    def __init__(self, processor_id: int, config, channel, table, fd_socket: socket.socket,
                 broker_factory=None):
        self.id = processor_id
        self.channel = channel
        self.arena = channel.arenas[processor_id]
        self.responses = channel.response_pipes[processor_id]
        self.wake_pipe = channel.wake_pipes[processor_id]
        self.table = table
        self.fd_socket = fd_socket
        self.max_request_bytes = config["socket.request.max.bytes"]
        self.idle_ms = config["connections.max.idle.ms"]
        # With an authorizer every request carries the client's address (ACL host
        # matching); without one only group requests do.
        self.carry_peer_host = bool(config.get("authorizer.class.name"))
        self.send_buffer = config["socket.send.buffer.bytes"]
        self.receive_buffer = config["socket.receive.buffer.bytes"]
        self.selector = Poller()
        # One read per readable connection lands here first: a small request
        # (header and body) arrives in one recv, a large one is moved to the
        # arena after its first 64 KiB.
        self.scratch = bytearray(_SCRATCH_BYTES)
        self.scratch_view = memoryview(self.scratch)
        self.conns: dict[int, Connection] = {}
        self.next_conn_id = 0
        self.files: OrderedDict[tuple, int] = OrderedDict()
        self.backlog: deque[Connection] = deque()  # requests waiting for a queue permit
        self.arena_waiters: deque[Connection] = deque()
        # Delayed operations (replication.purgatory) by connection id: a
        # connection has at most one, its request in flight.
        self.purgatory = Purgatory()
        # Connections closed while a worker held their request: the arena
        # region is freed when that worker's answer arrives.
        self.closed_busy: dict[int, Connection] = {}
        self.stopping = False
        # Per listener index (the acceptor's byte): protocol, TLS context, SASL.
        self.security = listener_securities(config, table)
        # TLS: the chunk buffer responses are encrypted from, and the one
        # ciphertext is received into (both reused by every connection).
        self.tls_chunk = bytearray(_TLS_CHUNK)
        self.tls_raw = bytearray(_TLS_RAW_BYTES)
        self.tls_raw_view = memoryview(self.tls_raw)
        self.delayed_closes: deque[Connection] = deque()  # failed authentications, in deadline order
        self.failed_authentications = 0  # TLS handshakes and SASL exchanges that failed
        # Quotas: (until, conn_id) of throttled connections, a heap; and the
        # shared connection counts this processor counts its closed connections out of.
        self.throttled: list = []
        self.connection_quotas = ConnectionQuotas.for_config(config)
        # Requests handled here rather than by a worker (kafkapy.network.inline.apis:
        # "Requests handled in the processor", docs/architecture.md): their API
        # keys, the Broker view they are handled with (this process's own, made
        # at the first one), and the connections whose request waits for its turn.
        self.inline_keys = inline_api_keys(config) if broker_factory is not None else {}
        self.broker_factory = broker_factory
        self.broker = None
        self.inline_ready: deque[Connection] = deque()
        # KIP-890: this processor's questions to transaction coordinators
        # (server/txn_verification.py), made at the first.
        self.config = config
        self.verifier = None

    # -- main loop -----------------------------------------------------------
    def run(self) -> None:
        child_signals.on_stop(self._on_term)
        sel = self.selector
        sel.register(self.fd_socket, selectors.EVENT_READ, "accept")
        sel.register(self.responses.fileno(), selectors.EVENT_READ, "responses")
        sel.register(self.wake_pipe.read_fd, selectors.EVENT_READ, "wake")
        self.wake_pipe.owned_here = True  # this process's own appends wake it without the pipe
        woken = child_signals.wake_on_signal()  # the stop order ends a select at once
        sel.register(woken, selectors.EVENT_READ, "signal")
        probe = probes.network
        stop_deadline = None
        next_idle_sweep = time.monotonic() + 1.0
        while True:
            if self.stopping:
                if stop_deadline is None:
                    stop_deadline = time.monotonic() + 10.0
                    self._stop_reading()
                busy = any(c.state == _MUTED or c.out for c in self.conns.values())
                if not busy or time.monotonic() > stop_deadline:
                    break
            timeout = self._timeout()
            selected_at = time.monotonic()
            ready = sel.select(timeout)
            now = time.monotonic()
            probe.selected(now - selected_at)
            probe.maybe_publish(now)
            for data, events in ready:
                if data == "responses":
                    self._on_responses()
                elif data == "wake":
                    self.wake_pipe.drain()
                    if self.verifier is not None:
                        self._verification_answers()
                    self._check_delayed(woken=True)
                elif data == "accept":
                    self._on_new_fds()
                elif data == "signal":
                    child_signals.drain(woken)
                else:
                    conn = data
                    if conn.conn_id not in self.conns:
                        continue
                    if conn.state == _HANDSHAKE:
                        self._handshake(conn)
                        continue
                    if events & selectors.EVENT_WRITE:
                        self._send(conn)
                    if events & selectors.EVENT_READ and conn.conn_id in self.conns:
                        self._read(conn)
            self._retry_backlog()
            self._check_delayed(woken=False)
            if self.throttled:
                self._end_throttles(time.monotonic())
            if self.delayed_closes:
                self._run_delayed_closes()
            if self.inline_ready:
                self._handle_inline()
            if self.wake_pipe.pending:
                self.wake_pipe.pending = False
                self._check_delayed(woken=True)
            now = time.monotonic()
            if now >= next_idle_sweep:
                next_idle_sweep = now + 1.0
                self._close_idle(now)
        for conn in list(self.conns.values()):
            self._close(conn)
        if self.verifier is not None:
            self.verifier.close()
        if self.broker is not None:
            self.broker.close()
        probes.publish()

    def _on_term(self, *_):
        self.stopping = True

    def _stop_reading(self):
        for conn in list(self.conns.values()):
            if conn.state in (_READ_HEADER, _HANDSHAKE) and not conn.out:
                self._close(conn)

    def _close_idle(self, now: float) -> None:
        """Kafka's connections.max.idle.ms: close connections with nothing in
        flight; and say which requests have been in flight for more than
        ``_STUCK_S`` without a reason (not parked to a later deadline, not
        throttled): a request nobody answers leaves its client waiting for
        its own timeout, so the log names the connection's state."""
        limit = now - self.idle_ms / 1000.0
        stuck = now - _STUCK_S
        for conn in list(self.conns.values()):
            if conn.last_active < limit and conn.state in (_READ_HEADER, _READ_BODY, _HANDSHAKE) and not conn.out:
                log.debug("closing idle connection %s", conn.peer)
                self._close(conn)
            elif (conn.state == _MUTED and conn.received_at < stuck and conn.received_at != conn.reported_at
                  and not conn.throttle_until):
                op = self.purgatory.get(conn.conn_id)
                if op is not None and op.deadline_ms > time.time() * 1000:
                    continue
                conn.reported_at = conn.received_at
                log.warning("request (api key %d) from %s in flight for %.0f s: at_worker=%s parked=%s "
                            "backlog=%s out=%d events=%d deadline_ms=%d inline=%s arena_off=%d inbuf=%d",
                            conn.api_key, conn.peer, now - conn.received_at, conn.at_worker, op,
                            conn in self.backlog, len(conn.out), conn.events, conn.deadline_ms,
                            conn.inline is not None, conn.arena_off, len(conn.inbuf))

    def _timeout(self):
        if self.inline_ready or self.wake_pipe.pending:
            return 0.0
        if self.backlog or self.arena_waiters:
            return 0.002
        if self.throttled:
            return max(0.0, min(0.5, self.throttled[0][0] - time.monotonic()))
        if self.delayed_closes:
            return max(0.0, min(0.5, self.delayed_closes[0].close_at - time.monotonic()))
        if self.stopping:
            return 0.05
        if self.purgatory:
            now = time.time() * 1000
            return max(0.0, (self.purgatory.next_deadline_ms() - now) / 1000.0)
        return 0.5

    # -- connections -----------------------------------------------------------
    def _on_new_fds(self):
        try:
            data, fds, _, _ = socket.recv_fds(self.fd_socket, 1024, 64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, fds = b"", []
        # The acceptor sends one byte per descriptor: its listener's index.
        for i, fd in enumerate(fds):
            sock = socket.socket(fileno=fd)
            if self.stopping:
                sock.close()
                continue
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.send_buffer > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
                if self.receive_buffer > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
                peer = sock.getpeername()
            except OSError:
                sock.close()
                continue
            self.next_conn_id += 1
            conn = Connection(self.next_conn_id, sock, peer)
            conn.listener = data[i] if i < len(data) else 0
            security = self.security[conn.listener]
            if security.ssl_context is not None:
                conn.tls = TlsSession(security.ssl_context)
                conn.state = _HANDSHAKE
            if security.sasl is not None:
                conn.sasl = _sasl.SaslSession(security.sasl)
            self.conns[conn.conn_id] = conn
            probes.network.connection_opened(conn.listener)
            self._set_events(conn, selectors.EVENT_READ)

    def _set_events(self, conn: Connection, events: int) -> None:
        if events == conn.events:
            return
        if conn.events == 0:
            self.selector.register(conn.sock, events, conn)
        elif events == 0:
            self.selector.unregister(conn.sock)
        else:
            self.selector.modify(conn.sock, events, conn)
        conn.events = events

    def _close(self, conn: Connection) -> None:
        if self.conns.pop(conn.conn_id, None) is None:
            return
        probes.network.connection_closed(conn.listener)
        self.connection_quotas.dec(conn.listener, conn.peer[0] if isinstance(conn.peer, tuple) else "")
        self._set_events(conn, 0)
        op = self.purgatory.cancel(conn.conn_id)
        if op is not None:
            self.wake_pipe.add_parked(-1, op.watch)
        if conn.at_worker:
            # A worker still owns the arena region; it is freed when its
            # response arrives (the response is then dropped).
            self.closed_busy[conn.conn_id] = conn
        elif conn.arena_off >= 0:
            self.arena.free(conn.arena_off)
            conn.arena_off = -1
        try:
            conn.sock.close()
        except OSError:
            pass

    # -- reading ---------------------------------------------------------------
    def _read(self, conn: Connection) -> None:
        """Read until a whole request is in, then hand it to the workers.

        A connection stays registered for reading while its request is being
        handled (Kafka's muting without the two epoll_ctl calls per request):
        a client sending its next request early makes the socket readable,
        and only then is it taken out of the selector until the response is
        sent.
        """
        if conn.state != _READ_HEADER and conn.state != _READ_BODY:
            # Muted: out of the selector for reading. Write interest stays:
            # one select can report the response pipe and this connection
            # together, and the answer handled first may be waiting for the
            # socket already.
            self._set_events(conn, conn.events & selectors.EVENT_WRITE)
            return
        if conn.tls:
            return self._tls_read(conn)
        sock = conn.sock
        conn.last_active = time.monotonic()
        try:
            if conn.state == _READ_BODY:
                n = sock.recv_into(conn.body[conn.got:])
                if n == 0:
                    return self._close(conn)
                conn.got += n
                if conn.got == conn.size:
                    self._body_done(conn)
                return
            n = sock.recv_into(self.scratch)
            if n == 0:
                return self._close(conn)
            conn.more = n == _SCRATCH_BYTES
            self._take(conn, self.scratch_view[:n])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)

    def _take(self, conn: Connection, data) -> None:
        """Start the next request from ``data``, the bytes read after the
        previous request (kept in ``conn.inbuf`` across calls)."""
        if conn.inbuf:
            conn.inbuf += data
            data = conn.inbuf
            conn.inbuf = bytearray()
        if len(data) < 4:
            conn.inbuf = bytearray(data)
            return
        size = _SIZE.unpack_from(data)[0]
        if conn.sasl is not None and size > conn.sasl.config.max_receive_size:
            # Kafka's sasl.server.max.receive.size before authentication.
            log.info("closing %s: %d-byte request before SASL authentication", conn.peer, size)
            return self._close(conn)
        if size < 0 or size > self.max_request_bytes:
            # Kafka's InvalidReceiveException: close, never allocate.
            log.warning("closing %s: request size %d outside [0, %d]",
                        conn.peer, size, self.max_request_bytes)
            return self._close(conn)
        conn.size = size
        end = 4 + size
        have = len(data) - 4
        if size <= INLINE_MAX_BYTES and have >= size:
            if have > size:
                conn.inbuf = bytearray(data[end:])
            self._submit(conn, bytearray(data[4:end]))  # writable: handlers patch batches in place
            return
        if size <= INLINE_MAX_BYTES:
            # A small request split across reads: finish it in a buffer.
            conn.body = memoryview(bytearray(size))
            conn.arena_off = -1
        else:
            off = self.arena.alloc(size)
            if off < 0:
                conn.inbuf = bytearray(data)  # taken again when the arena has room
                conn.state = _WAIT_ARENA
                self._set_events(conn, 0)
                self.arena_waiters.append(conn)
                return
            conn.arena_off = off
            conn.body = self.arena.view[off:off + size]
        got = min(have, size)
        conn.body[:got] = data[4:4 + got]
        if have > size:
            conn.inbuf = bytearray(data[end:])
        conn.got = got
        conn.state = _READ_BODY
        if got == size:
            self._body_done(conn)

    def _body_done(self, conn: Connection) -> None:
        body = conn.body
        conn.body = None
        if conn.arena_off < 0:
            self._submit(conn, body.obj)
        else:
            body.release()
            self._submit(conn, None)

    def _submit(self, conn: Connection, inline) -> None:
        """Hand the complete request to the workers (``inline``: its bytes, or
        None when it is in the arena at ``conn.arena_off``)."""
        conn.inline = inline
        head = inline if inline is not None else self.arena.view[conn.arena_off:conn.arena_off + 4]
        if conn.size >= 4:
            conn.api_key, conn.api_version = _KEY_VERSION.unpack_from(head)
        else:
            conn.api_key = int.from_bytes(head[:2], "big") if conn.size >= 2 else -1
            conn.api_version = -1
        conn.received_at = time.monotonic()
        conn.state = _MUTED
        conn.deadline_ms = 0
        if conn.sasl is not None and self._sasl_request(conn, inline):
            return
        if conn.session_expires and self._sasl_session_check(conn, inline):
            return
        if not self._enqueue(conn):
            self.backlog.append(conn)

    def _enqueue(self, conn: Connection) -> bool:
        """Put the connection's request on its queue; False if full (retried)."""
        if conn.parked_body is not None:
            # A large fetch left the arena while parked: it needs room again.
            off = self.arena.alloc(conn.size)
            if off < 0:
                return False
            self.arena.view[off:off + conn.size] = conn.parked_body
            conn.arena_off = off
            conn.parked_body = None
        if conn.api_key in self.inline_keys and conn.api_version >= self.inline_keys[conn.api_key]:
            # Handled by this loop once the events at hand are done: never
            # from here, where an answer sent at once would take the next
            # pipelined request and recurse once per request in the buffer.
            self.inline_ready.append(conn)
            return True
        coordinator = conn.api_key in COORDINATOR_KEYS
        queue = self.channel.coordinator_requests if coordinator else self.channel.requests
        # Group requests carry the client's address (a member's client host).
        if not queue.try_put(self.id, conn.conn_id, conn.arena_off, conn.size,
                             conn.deadline_ms, conn.inline, conn.listener, conn.principal_bytes,
                             conn.peer[0].encode("ascii") if coordinator or self.carry_peer_host else b""):
            return False
        conn.at_worker = True
        return True

    def _retry_backlog(self) -> None:
        while self.arena_waiters:
            conn = self.arena_waiters.popleft()
            if conn.conn_id not in self.conns:
                continue
            conn.state = _READ_HEADER
            self._take(conn, b"")
            if conn.state == _WAIT_ARENA:
                # Still no room: _take queued it again, at the back; first
                # come, first served.
                self.arena_waiters.rotate(1)
                break
            if conn.state == _READ_BODY and conn.conn_id in self.conns:
                self._set_events(conn, selectors.EVENT_READ)
                if conn.tls and conn.tls.buffered():
                    self._read(conn)  # bytes in the BIO the selector cannot see
        while self.backlog:
            conn = self.backlog[0]
            if conn.conn_id not in self.conns:
                self.backlog.popleft()
                continue
            if not self._enqueue(conn):
                break
            self.backlog.popleft()

    # -- responses ---------------------------------------------------------------
    def _on_responses(self) -> None:
        for conn_id, kind, payload in self.responses.drain():
            self._on_response(conn_id, kind, payload)

    def _handle_inline(self) -> None:
        """Handle the requests ``_enqueue`` kept for this process: the same
        ``handle_request`` a worker runs, with this process's ``Broker``,
        its answer taken as a worker's would be. Requests of one connection
        stay in order: a connection is muted until its answer is out."""
        ready = self.inline_ready
        probe = probes.request
        while ready:
            conn = ready.popleft()
            if self.conns.get(conn.conn_id) is not conn:
                continue  # closed while it waited its turn
            broker = self._broker()
            principal = conn.principal_bytes.decode() if conn.principal_bytes else ANONYMOUS
            started = time.monotonic()
            off = conn.arena_off
            body = memoryview(conn.inline) if off < 0 else self.arena.view[off:off + conn.size]
            verification, conn.verification = conn.verification, None
            kind, payload = handle_request(broker, body, conn.deadline_ms,
                                           conn.listener, principal,
                                           conn.peer[0] if self.carry_peer_host else "", verification)
            done = time.monotonic()
            probe.request_handled(conn.api_key, -1.0 if conn.deadline_ms else started - conn.received_at,
                                  done - started)
            if kind == HELD:
                # No API in inline_api_keys holds its answer (handlers' Hold):
                # a new one must be left to the workers, which keep held answers.
                log.error("api key %d held its answer in a processor; closing %s", conn.api_key, conn.peer)
                kind, payload = CLOSE, None
            self._on_response(conn.conn_id, kind, payload)

    def _broker(self):
        if self.broker is None:
            self.broker = self.broker_factory(-1 - self.id)
        return self.broker

    def _verify(self, conn: Connection, op: DelayedVerification) -> None:
        """Ask ``op``'s transaction coordinator (KIP-890); the answer comes
        back through ``_verification_answers``."""
        if self.verifier is None:
            from kafkapy.server.security.inter_broker import client_security
            from kafkapy.server.txn_verification import AddPartitionsToTxnManager, coordinator_address

            write_fd = self.wake_pipe.write_fd

            def notify():  # from a sender thread: the pipe, never the owned_here shortcut
                try:
                    os.write(write_fd, b"\0")
                except BlockingIOError:
                    pass  # a wake-up is already pending
            broker = self._broker()
            self.verifier = AddPartitionsToTxnManager(
                lambda txn_id: coordinator_address(broker, txn_id), notify,
                f"broker-{broker.broker_id}-txn-verification".encode(), client_security(self.config))
        self.verifier.verify(conn.conn_id, op)

    def _verification_answers(self) -> None:
        for conn_id, op, errors in self.verifier.completions():
            if self.purgatory.get(conn_id) is op:  # else its connection closed meanwhile
                op.result = errors

    def _rerun_verified(self, conn: Connection, op: DelayedVerification) -> None:
        """Run a verified Produce again, here whatever inline.apis says:
        the answers travel with it only in this process."""
        if op.result is None:  # expired or stopping: no answer came
            op.result = {(t, p): int(ErrorCode.NETWORK_EXCEPTION) for t, p, _token in op.partitions}
        conn.verification = op.verified()
        if conn.parked_body is not None:
            conn.inline, conn.parked_body = conn.parked_body, None
        self.inline_ready.append(conn)

    def _on_response(self, conn_id: int, kind, payload) -> None:
        """One answer to a connection's request in flight: from a worker
        (the response pipe) or from this process (``_handle_inline``)."""
        if kind == THROTTLED:
            kind, payload = self._throttle(conn_id, payload)
            if kind is None:
                return
        conn = self.conns.get(conn_id)
        if conn is None:
            conn = self.closed_busy.pop(conn_id, None)
            if conn is not None:
                conn.at_worker = False
                if conn.arena_off >= 0:
                    self.arena.free(conn.arena_off)
            return
        conn.at_worker = False
        if kind == DELAY:
            payload = from_wire(payload)
            if isinstance(payload, DelayedVerification) and self.broker_factory is None:
                log.error("a produce waits for verification in a processor that cannot run it; closing %s",
                          conn.peer)
                kind = CLOSE
        if kind == DELAY:
            self.purgatory.park(conn_id, payload)
            # Appenders wake processors only while an operation watches
            # what they moved; an append that raced with parking is
            # caught by re-checking the watched fields right after.
            self.wake_pipe.add_parked(1, payload.watch)
            if conn.arena_off >= 0:
                # A large request must not pin the arena ring for up to
                # its deadline: a fetch's bytes wait outside it (it runs
                # again), a produce's are not needed any more.
                off = conn.arena_off
                if isinstance(payload, DelayedVerification):  # runs again and patches offsets in place
                    conn.parked_body = bytearray(self.arena.view[off:off + conn.size])
                elif not isinstance(payload, DelayedProduce):
                    conn.parked_body = bytes(self.arena.view[off:off + conn.size])
                self.arena.free(off)
                conn.arena_off = -1
            if isinstance(payload, DelayedProduce):
                conn.inline = None
            elif isinstance(payload, DelayedVerification):
                self._verify(conn, payload)
            self._check_delayed(woken=True)
            return
        if conn.arena_off >= 0:
            self.arena.free(conn.arena_off)
            conn.arena_off = -1
        conn.inline = None
        conn.responded_at = time.monotonic()
        if kind == SEND:
            self._respond(conn, payload)
        elif kind == NOREPLY:
            self._request_done(conn)
            self._unmute(conn)
        elif kind == CLOSE:
            self._request_done(conn)
            conn.state = _READ_HEADER
            self._close(conn)

    def _respond(self, conn: Connection, parts) -> None:
        conn.out.extend(parts)
        conn.out_pos = 0
        self._send(conn)

    def _answer_delayed_produce(self, conn: Connection, op: DelayedProduce) -> None:
        """Answer a parked produce (or WriteTxnMarkers, ``DelayedTxnMarkers``)
        that is complete or expired, here: its results travel with it and its
        partitions' fields are in the shared table, so a worker round trip
        (pickle, queue, wake, response pipe) would add nothing but latency to
        every acks=all produce. Partitions still short of their offset answer
        NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT (``final_results``)."""
        api_key, build = _DELAYED_ANSWERS[op.KIND]
        try:
            response = build(op, self.table.read_field)
            parts = encode_response(op.correlation_id, response, API_TABLE[api_key].is_flexible(op.api_version))
        except Exception:
            log.exception("answering a delayed produce failed; closing %s", conn.peer)
            conn.state = _READ_HEADER
            return self._close(conn)
        probes.request.response_built(api_key, response)
        conn.inline = None
        conn.responded_at = time.monotonic()
        self._respond(conn, parts)


    def _check_delayed(self, woken: bool) -> None:
        """Hand every delayed operation that is complete (checked after a
        wake) or expired back to the workers; all of them when stopping."""
        purgatory = self.purgatory
        if not purgatory:
            return
        now_ms = time.time() * 1000
        if self.stopping:
            ready = purgatory.expire_all()
        else:
            ready = purgatory.poll(self.table.read_field, now_ms, woken)
        for conn_id, op, _expired in ready:
            self.wake_pipe.add_parked(-1, op.watch)
            conn = self.conns[conn_id]  # a closed connection's op was cancelled
            if isinstance(op, DelayedProduce):
                self._answer_delayed_produce(conn, op)
                continue
            if isinstance(op, DelayedVerification):
                self._rerun_verified(conn, op)
                continue
            if self.stopping:
                # Answered now with what there is: a fetch re-run before its
                # deadline would park again, and spin until that deadline.
                conn.deadline_ms = min(op.deadline_ms, int(now_ms))
            else:
                conn.deadline_ms = op.deadline_ms  # the fetch runs again to its deadline
            if not self._enqueue(conn):
                self.backlog.append(conn)

    def _unmute(self, conn: Connection) -> None:
        if conn.throttle_until and self._still_throttled(conn):
            return
        conn.state = _READ_HEADER
        conn.last_active = time.monotonic()
        if self.stopping:
            return self._close(conn)
        # Back to read interest alone before anything else: write interest
        # left from a response sent in pieces would make the next writable
        # socket look like the end of the request taken below (it was
        # answered twice over: its successor read and answered first).
        unmuted = conn.events != selectors.EVENT_READ
        self._set_events(conn, selectors.EVENT_READ)
        if conn.inbuf:
            # The client pipelined: its next request is (partly) here already.
            self._take(conn, b"")
            if conn.conn_id in self.conns and conn.state in (_READ_HEADER, _READ_BODY):
                if conn.tls is not None and conn.tls.buffered():
                    self._tls_read(conn)  # the rest waits in the BIO, where the selector cannot see it
            return
        if unmuted or conn.more:
            # Taken out of the selector because more was sent meanwhile, or
            # the last read filled the scratch buffer: read now.
            self._read(conn)

    def _send(self, conn: Connection) -> None:
        if conn.tls:
            return self._tls_send(conn)
        sock = conn.sock
        out = conn.out
        try:
            while out:
                part = out[0]
                if type(part) is FileRegion:
                    fd = self._file(part)
                    if fd < 0:
                        log.warning("closing %s: segment %s is gone", conn.peer, part.path)
                        return self._close(conn)
                    remaining = part.length - conn.out_pos
                    n = os.sendfile(sock.fileno(), fd, part.position + conn.out_pos, remaining)
                    if n == 0:
                        # The file is shorter than the region (truncated under
                        # us): the response cannot be completed.
                        log.warning("closing %s: short read from %s", conn.peer, part.path)
                        return self._close(conn)
                    if n < remaining:
                        conn.out_pos += n
                        break
                else:
                    remaining = len(part) - conn.out_pos
                    flags = socket.MSG_MORE if len(out) > 1 else 0
                    n = sock.send(memoryview(part)[conn.out_pos:], flags)
                    if n < remaining:
                        conn.out_pos += n
                        break
                out.popleft()
                conn.out_pos = 0
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            if exc.errno not in (errno.EPIPE, errno.ECONNRESET):
                log.debug("send to %s failed: %s", conn.peer, exc)
            return self._close(conn)
        if out:
            self._set_events(conn, selectors.EVENT_WRITE)
        elif conn.state == _CLOSING:
            self._close(conn)
        else:
            self._request_done(conn)
            self._unmute(conn)

    # -- quotas: throttled connections (server/quotas/throttle.py) ----------------------
    def _throttle(self, conn_id: int, payload) -> tuple:
        """A THROTTLED message: start the connection's throttle; returns the inner
        ``(kind, payload)`` to handle as usual, or (None, None) for a response held
        until the throttle ends (a client that does not throttle itself)."""
        kind, inner, throttle_ms, client_throttles = payload
        conn = self.conns.get(conn_id)
        if conn is None:
            return kind, inner
        conn.throttle_until = time.monotonic() + throttle_ms / 1000.0
        if client_throttles or kind != SEND:
            return kind, inner
        conn.at_worker = False
        if conn.arena_off >= 0:
            self.arena.free(conn.arena_off)
            conn.arena_off = -1
        conn.inline = None
        conn.responded_at = time.monotonic()
        conn.held_parts = inner
        heapq.heappush(self.throttled, (conn.throttle_until, conn_id))
        return None, None

    def _still_throttled(self, conn: Connection) -> bool:
        """Keep a connection whose response is out muted until its throttle ends (KIP-219)."""
        if time.monotonic() >= conn.throttle_until:
            conn.throttle_until = 0.0
            return False
        conn.state = _MUTED
        self._set_events(conn, 0)
        heapq.heappush(self.throttled, (conn.throttle_until, conn.conn_id))
        return True

    def _end_throttles(self, now: float) -> None:
        if self.stopping:
            now = float("inf")  # answer and release everything: the processor is stopping
        heap = self.throttled
        while heap and heap[0][0] <= now:
            until, conn_id = heapq.heappop(heap)
            conn = self.conns.get(conn_id)
            if conn is None or conn.throttle_until != until:
                continue
            conn.throttle_until = 0.0
            parts, conn.held_parts = conn.held_parts, None
            if parts is not None:
                self._respond(conn, parts)
            else:
                self._unmute(conn)

    def _request_done(self, conn: Connection) -> None:
        now = time.monotonic()
        probes.network.request_completed(conn.api_key, now - conn.received_at, now - conn.responded_at)

    def _file(self, region: FileRegion) -> int:
        key = (region.path, region.inode)
        fd = self.files.get(key)
        if fd is not None:
            self.files.move_to_end(key)
            return fd
        try:
            fd = os.open(region.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            # Retention may have renamed it to .deleted in the meantime.
            try:
                fd = os.open(region.path + ".deleted", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return -1
        if os.fstat(fd).st_ino != region.inode:
            os.close(fd)
            return -1
        self.files[key] = fd
        if len(self.files) > _MAX_CACHED_FILES:
            _, old = self.files.popitem(last=False)
            os.close(old)
        return fd


# The oldest version of each API a processor handles itself: older Produce
# (message format 0/1, up-converted) and Fetch (down-converted) rewrite
# every record in Python, ~20-50k records/s (perf/README.md): a connection's
# whole processor would wait for that, so those go to the workers.
_INLINE_FROM_VERSION = {"Produce": 3, "Fetch": 4}


def inline_api_keys(config) -> dict:
    """{API key: oldest version handled in the processor} for the APIs
    named by ``kafkapy.network.inline.apis`` (Kafka's API names; the
    config's validator allows only APIs whose handlers never hold an answer
    and that are not the group coordinator's)."""
    by_name = {spec.name: key for key, spec in API_TABLE.items()}
    return {by_name[name]: _INLINE_FROM_VERSION[name] for name in config["kafkapy.network.inline.apis"]}


def processor_main(processor_id, config, channel, table, fd_socket, broker_factory=None) -> None:
    Processor(processor_id, config, channel, table, fd_socket, broker_factory).run()
