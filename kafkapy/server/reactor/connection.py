"""One client connection of a processor (Kafka's KafkaChannel): its socket,
its request in flight and response parts, its TLS session (None: plaintext),
its SASL session until authenticated and the principal handlers see; and the
states it goes through (see ``processor``).

Owned by the processor the acceptor handed it to; never shared.
"""

from __future__ import annotations

import socket
import time
from collections import deque

_READ_HEADER, _READ_BODY, _MUTED, _WAIT_ARENA = range(4)
# TLS handshake in progress; failed authentication waiting for its delay (then
# its answer is sent and the connection closed).
_HANDSHAKE, _CLOSING = 4, 5


class Connection:
    __slots__ = (
        "conn_id", "sock", "peer", "state", "inbuf", "more", "size", "body", "inline",
        "parked_body", "arena_off", "got", "out", "out_pos", "deadline_ms", "events",
        "last_active", "listener", "api_key", "api_version", "received_at", "responded_at", "at_worker",
        "tls", "sasl", "principal_bytes", "close_at", "session_expires", "reauth_at", "authenticated",
        "throttle_until", "held_parts", "reported_at", "verification",
    )

    def __init__(self, conn_id: int, sock: socket.socket, peer):
        self.conn_id = conn_id
        self.sock = sock
        self.peer = peer
        self.state = _READ_HEADER
        # Bytes read past the request being handled (a pipelining client),
        # and whether the last read filled the scratch buffer (more may wait).
        self.inbuf = bytearray()
        self.more = False
        self.size = 0
        self.body = None  # memoryview being filled by a large request (_READ_BODY)
        self.inline = None  # bytes of a small request in flight (sent inline)
        self.parked_body = None  # bytes of a large parked fetch, out of the arena
        self.arena_off = -1
        self.got = 0
        self.out: deque = deque()  # parts still to send
        self.out_pos = 0  # bytes of out[0] already sent
        self.deadline_ms = 0  # a parked fetch's deadline when it is re-run
        self.verification = None  # a Produce's KIP-890 answers for its second run (server/txn_verification)
        self.at_worker = False  # queued or being handled: an answer will come
        self.events = 0
        self.last_active = time.monotonic()
        # Metrics: listener index, and the request in flight (api key and version, when it
        # was read completely, when its response reached this processor).
        self.listener = 0
        self.api_key = -1
        self.api_version = -1  # -1: a body too short to say
        self.received_at = 0.0
        self.responded_at = 0.0
        # Security: the TLS session (None: plaintext), the SASL session until
        # authenticated, the principal handlers see.
        self.tls = None
        self.sasl = None
        # What handlers see as ctx.principal: UTF-8, empty for User:ANONYMOUS
        # (the request queue carries it with each request).
        self.principal_bytes = b""
        self.close_at = 0.0
        # Quotas (server/quotas/throttle.py): muted until this time.monotonic()
        # after its response; a response held for an old client until then.
        self.throttle_until = 0.0
        self.held_parts = None
        self.reported_at = 0.0  # received_at of the request last logged as stuck
        # KIP-368: when the SASL session expires (time.monotonic(); 0.0:
        # never), when the last re-authentication began, and the
        # (mechanism, principal) a re-authentication must keep.
        self.session_expires = 0.0
        self.reauth_at = 0.0
        self.authenticated = None
