"""A processor's TLS transport (Kafka's SslTransportLayer): the handshake
driven by the selector loop, the principal from a client certificate, reads
decrypted from large ``recv``s, and responses (file regions too) encrypted in
256 KiB chunks.

``TlsSession`` is one connection's TLS state; ``SslTransportLayer`` holds the
processor's steps that use it, inherited by ``Processor`` and called only for
a connection with a TLS session. Owned by the connection's processor.
"""

from __future__ import annotations

import logging
import os
import selectors
import ssl
import time

from kafkapy._core import load
from kafkapy._core.types import FileRegion
from kafkapy.server.reactor.connection import _CLOSING, _MUTED, _READ_BODY, _READ_HEADER, Connection
from kafkapy.server.security.principal import NoMatchingRule, distinguished_name

log = logging.getLogger("kafkapy.network")

# TLS: response bytes and file regions are copied (os.preadv for regions)
# into a buffer of this size, encrypted with one SSL_write (16 records).
_TLS_CHUNK = 256 * 1024
# Ciphertext is received in reads of up to this size (one syscall for many
# records: with SSLSocket, OpenSSL made two per record, 45 % of a
# processor's time on produce), at most _TLS_READS per readiness event so
# one busy connection cannot starve the others.
_TLS_RAW_BYTES = 256 * 1024
_TLS_READS = 16
# Plaintext decrypted at most per call while reading a request's size: the
# bytes beyond that request are copied to ``conn.inbuf`` (and again per
# request taken from it), so no more than one full record's worth.
_TLS_HEADER_READ = 16 * 1024
# Decrypts every whole record waiting, in one call (tls.pyx: one
# SSLObject.read per record cost more than the record's decryption).
_tls_reader = load("tls").Reader


class TlsSession:
    """One connection's TLS state: an ``ssl.SSLObject`` over two memory
    BIOs, so the processor does the socket I/O itself in large pieces.
    ``raw_out``/``raw_pos``: ciphertext taken from the outgoing BIO and not
    yet accepted by the kernel. Owned by the connection's processor."""

    __slots__ = ("obj", "incoming", "outgoing", "raw_out", "raw_pos", "reader")

    def __init__(self, context: ssl.SSLContext):
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.reader = _tls_reader(self.obj, self.incoming)
        self.raw_out = b""
        self.raw_pos = 0

    def buffered(self) -> bool:
        """Bytes received but not yet handed out (invisible to the selector)."""
        return self.incoming.pending > 0 or self.obj.pending() > 0

    def flush(self, sock) -> bool:
        """Send waiting ciphertext; True when all of it is out (raises
        BlockingIOError when the kernel takes nothing)."""
        while True:
            if self.raw_pos >= len(self.raw_out):
                if not self.outgoing.pending:
                    return True
                self.raw_out = self.outgoing.read()
                self.raw_pos = 0
            n = sock.send(memoryview(self.raw_out)[self.raw_pos:])
            self.raw_pos += n
            if self.raw_pos < len(self.raw_out):
                return False


class SslTransportLayer:
    """The processor's TLS steps (a base of ``Processor``: they use its
    ``tls_chunk`` and ``tls_raw`` buffers, ``scratch``, ``security`` and
    ``failed_authentications``, and its ``_take``, ``_close``, ``_unmute``
    and other steps)."""

    def _handshake(self, conn: Connection) -> None:
        """Drive a TLS handshake (any readiness event) until OpenSSL is done
        and its last flight is out; then the principal from the client
        certificate (SSL listeners)."""
        tls = conn.tls
        sock = conn.sock
        try:
            while True:
                try:
                    tls.obj.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    if not tls.flush(sock):
                        return self._set_events(conn, selectors.EVENT_WRITE)
                    n = sock.recv_into(self.tls_raw)
                    if n == 0:
                        return self._close(conn)
                    tls.incoming.write(self.tls_raw_view[:n])
            if not tls.flush(sock):
                return self._set_events(conn, selectors.EVENT_WRITE)
        except (BlockingIOError, InterruptedError):
            return self._set_events(conn, selectors.EVENT_READ)
        except (OSError, ValueError) as exc:
            # Garbage instead of a ClientHello, an untrusted certificate, a
            # reset: Kafka's "Failed authentication ... (SSL handshake failed)".
            self.failed_authentications += 1
            log.info("Failed authentication with %s (SSL handshake failed: %s)", conn.peer, exc)
            return self._close(conn)
        conn.last_active = time.monotonic()
        if conn.sasl is None:
            security = self.security[conn.listener]
            cert = tls.obj.getpeercert()
            if cert:
                try:
                    name = security.principal_mapper.principal_name(distinguished_name(cert))
                except NoMatchingRule as exc:
                    self.failed_authentications += 1
                    log.info("Failed authentication with %s (%s)", conn.peer, exc)
                    return self._close(conn)
                if not self._set_principal(conn, "User:" + name):
                    return
        conn.state = _READ_HEADER
        self._set_events(conn, selectors.EVENT_READ)
        if tls.buffered():
            self._tls_read(conn)

    def _tls_read(self, conn: Connection) -> None:
        """``_read`` through TLS: ciphertext comes in with one large ``recv``
        (up to ``_TLS_RAW_BYTES``, many records) into the connection's BIO,
        and is decrypted from there, all whole records at once, straight
        into the scratch buffer or the request's body; no syscall and no
        Python call per record."""
        tls = conn.tls
        read_into = tls.reader.read_into
        conn.last_active = time.monotonic()
        try:
            # At most _TLS_READS recvs, and the BIO is drained after the last
            # one too: a whole record left in it would be seen by nobody (the
            # socket it came from is no longer readable) and the client would
            # wait for its own request timeout.
            for reads_left in range(_TLS_READS, -1, -1):
                # Everything the BIO holds is decrypted before reading more.
                while True:
                    if conn.state == _READ_BODY:
                        n = read_into(conn.body, conn.got, conn.size - conn.got)
                    else:
                        n = read_into(self.scratch, 0, _TLS_HEADER_READ)
                    if n < 0:
                        break
                    if n == 0:
                        return self._close(conn)
                    if conn.state == _READ_BODY:
                        conn.got += n
                        if conn.got == conn.size:
                            self._body_done(conn)
                    else:
                        self._take(conn, self.scratch_view[:n])
                        if conn.conn_id not in self.conns:
                            return
                    if conn.state != _READ_HEADER and conn.state != _READ_BODY:
                        # The rest waits in the BIO until the connection is
                        # unmuted (conn.more: the selector cannot see it).
                        conn.more = tls.buffered()
                        return
                if not reads_left:
                    break
                n = conn.sock.recv_into(self.tls_raw)
                if n == 0:
                    return self._close(conn)
                tls.incoming.write(self.tls_raw_view[:n])
        except (BlockingIOError, InterruptedError):
            pass
        except (OSError, ValueError):
            return self._close(conn)
        conn.more = tls.buffered()

    def _tls_send(self, conn: Connection) -> None:
        """Write ``conn.out`` through TLS: ``_TLS_CHUNK`` bytes at a time are
        gathered into the processor's chunk buffer, encrypted into the
        connection's outgoing BIO and sent; the next chunk only once the
        ciphertext is out (so a slow reader holds at most one chunk)."""
        tls = conn.tls
        sock = conn.sock
        try:
            while True:
                if not tls.flush(sock):
                    return self._set_events(conn, selectors.EVENT_WRITE)
                if not conn.out:
                    break
                filled = self._tls_fill(conn)
                if filled < 0:
                    return
                with memoryview(self.tls_chunk) as view:
                    tls.obj.write(view[:filled])
        except (BlockingIOError, InterruptedError):
            return self._set_events(conn, selectors.EVENT_WRITE)
        except (OSError, ValueError) as exc:
            log.debug("send to %s failed: %s", conn.peer, exc)
            return self._close(conn)
        if conn.state == _CLOSING:
            return self._close(conn)
        if conn.state != _MUTED:
            # Only ciphertext of OpenSSL's own was waiting (post-handshake
            # messages): nothing was in flight.
            return self._set_events(conn, selectors.EVENT_READ)
        self._request_done(conn)
        self._unmute(conn)

    def _tls_fill(self, conn: Connection) -> int:
        """Copy the next ``_TLS_CHUNK`` bytes of ``conn.out`` into the chunk
        buffer: bytes parts by slice assignment, file regions with one
        ``preadv`` straight into it. Returns the byte count, -1 when the
        connection was closed."""
        filled = 0
        out = conn.out
        with memoryview(self.tls_chunk) as view:
            while out and filled < _TLS_CHUNK:
                part = out[0]
                pos = conn.out_pos
                if type(part) is FileRegion:
                    fd = self._file(part)
                    if fd < 0:
                        log.warning("closing %s: segment %s is gone", conn.peer, part.path)
                        self._close(conn)
                        return -1
                    want = min(part.length - pos, _TLS_CHUNK - filled)
                    n = os.preadv(fd, [view[filled:filled + want]], part.position + pos)
                    if n == 0:
                        log.warning("closing %s: short read from %s", conn.peer, part.path)
                        self._close(conn)
                        return -1
                    end = part.length
                else:
                    n = min(len(part) - pos, _TLS_CHUNK - filled)
                    view[filled:filled + n] = memoryview(part)[pos:pos + n]
                    end = len(part)
                filled += n
                if pos + n < end:
                    conn.out_pos = pos + n
                else:
                    out.popleft()
                    conn.out_pos = 0
        return filled
