"""A processor's SASL authentication (Kafka's SaslServerAuthenticator): the
requests of a connection before its ``SaslSession`` completes are answered
here (ApiVersions goes on to the workers), a failed authentication closes the
connection after ``connection.failed.authentication.delay.ms``, a session
with a lifetime is re-authenticated or closed (KIP-368), and the principal
handlers see is set (also from a client certificate, by ``ssl_transport``).

The exchanges themselves are sans-IO in ``server/security/sasl.py``;
``SaslServerAuthenticator`` holds the processor's steps that drive them,
inherited by ``Processor``. Owned by the connection's processor.
"""

from __future__ import annotations

import logging
import time

from kafkapy.server.reactor.channel import MAX_PRINCIPAL_BYTES
from kafkapy.server.reactor.connection import _CLOSING, Connection
from kafkapy.server.security import ANONYMOUS
from kafkapy.server.security import sasl as _sasl

log = logging.getLogger("kafkapy.network")


class SaslServerAuthenticator:
    """The processor's SASL steps (a base of ``Processor``: they use its
    ``arena``, ``security``, ``delayed_closes`` and ``failed_authentications``,
    and its ``_respond``, ``_send`` and ``_close``)."""

    def _sasl_request(self, conn: Connection, inline) -> bool:
        """A request before SASL authentication completed: answered here
        (True), or ApiVersions, passed on to the workers (False)."""
        if inline is None:
            off = conn.arena_off
            body = bytes(self.arena.view[off:off + conn.size])
        else:
            body = inline
        session = conn.sasl
        action, parts = session.on_request(body)
        if action == _sasl.PASS:
            return False
        if conn.arena_off >= 0:
            self.arena.free(conn.arena_off)
            conn.arena_off = -1
        conn.inline = None
        if action == _sasl.REPLY:
            if session.complete:
                conn.sasl = None
                if not self._set_principal(conn, session.principal):
                    return True
                conn.session_expires = session.expires_at
                conn.authenticated = (session.mechanism, session.principal)
            conn.api_key = _sasl.SASL_AUTHENTICATE_KEY if session.raw_tokens else conn.api_key
            conn.responded_at = time.monotonic()
            self._respond(conn, parts)
        elif action == _sasl.FAIL:
            self.failed_authentications += 1
            log.info("Failed %s with %s (SASL %s)", session.what, conn.peer, session.mechanism)
            conn.state = _CLOSING
            self._set_events(conn, 0)
            conn.out.extend(parts)
            conn.out_pos = 0
            conn.close_at = time.monotonic() + session.config.failed_delay_ms / 1000.0
            self.delayed_closes.append(conn)
        else:
            log.info("closing %s: unexpected request during SASL authentication", conn.peer)
            self._close(conn)
        return True

    def _sasl_session_check(self, conn: Connection, inline) -> bool:
        """A request on a connection whose SASL session has a lifetime
        (KIP-368, Kafka's SocketServer): a SaslHandshake starts a
        re-authentication (at most one a second; a sooner one goes to the
        workers, which answer ILLEGAL_SASL_STATE); any other request after
        the session expired closes the connection. True when handled here."""
        now = time.monotonic()
        if conn.api_key == _sasl.SASL_HANDSHAKE_KEY and now - conn.reauth_at >= 1.0:
            conn.reauth_at = now
            conn.sasl = _sasl.SaslSession(self.security[conn.listener].sasl, previous=conn.authenticated)
            return self._sasl_request(conn, inline)
        if now > conn.session_expires:
            log.info("closing %s: SASL session expired without re-authentication", conn.peer)
            self._close(conn)
            return True
        return False

    def _set_principal(self, conn: Connection, principal: str) -> bool:
        data = principal.encode("utf-8")
        if len(data) > MAX_PRINCIPAL_BYTES:
            log.info("closing %s: principal longer than %d bytes", conn.peer, MAX_PRINCIPAL_BYTES)
            self._close(conn)
            return False
        conn.principal_bytes = b"" if principal == ANONYMOUS else data
        return True

    def _run_delayed_closes(self) -> None:
        """Failed authentications whose delay passed: answer (when there is
        an answer) and close (Kafka's delayed close, rate-limiting guessers)."""
        now = time.monotonic()
        closes = self.delayed_closes
        while closes and (closes[0].close_at <= now or self.stopping):
            conn = closes.popleft()
            if conn.conn_id not in self.conns:
                continue
            if conn.out:
                self._send(conn)  # closes once everything is out
            else:
                self._close(conn)
