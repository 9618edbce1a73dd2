"""A broker's inter-broker listener in miniature, for unit tests of a
sender: one loopback connection, each request of one API version decoded
with kafkapy's schemas, handed to ``record`` and answered with ``answer``'s
dict. Frozen (``frozen=True``, until ``thaw``) it reads requests but
answers none, as a SIGSTOPped broker whose kernel still accepts and
buffers. The marker writer's and the KIP-890 verification manager's unit
tests use it."""

from __future__ import annotations

import socket
import struct
import threading

from kafkapy.client.blocking import recv_exactly
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct

_SIZE = struct.Struct(">i")


class LoopbackPeer:
    def __init__(self, api_key: int, version: int, record, answer, frozen: bool = False):
        self.api_key, self.version = api_key, version
        self.record = record  # request -> None, when it arrives (frozen or not)
        self.answer = answer  # request -> the response as a dict
        self.running = threading.Event()
        if not frozen:
            self.running.set()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = self.server.getsockname()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.server.accept()
        conn.settimeout(10)
        spec = API_TABLE[self.api_key]
        flexible = spec.is_flexible(self.version)
        with conn:
            for _ in range(20):  # bounded: a test sends a few requests
                try:
                    frame = recv_exactly(conn, _SIZE.unpack(recv_exactly(conn, 4))[0])
                except (ConnectionError, OSError):
                    return
                api_key, version, correlation_id, client_id_len = struct.unpack_from(">hhih", frame)
                assert (api_key, version) == (self.api_key, self.version)
                # request header v1, or v2 with its empty tag buffer
                body_at = 10 + client_id_len + (1 if flexible else 0)
                request, _ = decode(spec.request_class(self.version), memoryview(frame)[body_at:], 0)
                self.record(request)
                if not self.running.wait(10):
                    return
                body = encode_to_bytes(construct(spec.response_class(self.version), self.answer(request)))
                # response header v0, or v1 with its empty tag buffer
                answer = struct.pack(">i", correlation_id) + (b"\x00" if flexible else b"") + body
                conn.sendall(_SIZE.pack(len(answer)) + answer)

    def thaw(self):
        self.running.set()

    def close(self):
        self.running.set()
        self.server.close()
