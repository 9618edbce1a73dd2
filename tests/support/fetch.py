"""Raw Fetch/ListOffsets/Metadata frames for the fetch tests: one connection,
any version (flexible ones with request header v2), requests built with kio
schemas from plain dicts and answers decoded by kafkapy's codec.

Ownership: a ``Conn`` owns its socket; one test thread.
"""

from __future__ import annotations

import struct
import time

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct
from .rawclient import RawClient, encode_request_header_v1

FETCH, LIST_OFFSETS, METADATA = 1, 2, 3
TIMEOUT_S = 30.0


class Conn:
    def __init__(self, bootstrap: str):
        self.client = RawClient.connect(bootstrap, timeout_s=TIMEOUT_S)
        self.correlation_id = 0
        self.last_request_bytes = 0
        self.last_response_bytes = 0
        self.last_round_trip_s = 0.0

    def close(self) -> None:
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, api_key: int, version: int, data: dict, timeout_s: float = TIMEOUT_S):
        spec = API_TABLE[api_key]
        flexible = spec.is_flexible(version)
        self.correlation_id += 1
        payload = (encode_request_header_v1(api_key, version, self.correlation_id)
                   + (b"\x00" if flexible else b"")
                   + encode_to_bytes(construct(spec.request_class(version), data)))
        self.last_request_bytes = 4 + len(payload)
        started = time.perf_counter()
        self.client.send(struct.pack(">i", len(payload)) + payload)
        body = self.client.recv_response(self.correlation_id, timeout_s)
        self.last_round_trip_s = time.perf_counter() - started
        self.last_response_bytes = 8 + len(body)
        if flexible:
            body = body[1:]  # response header v1: an empty tag buffer
        response, _ = decode(spec.response_class(version), memoryview(body), 0)
        return response


def fetch_request(version: int, topics: list, *, session_id: int = 0, epoch: int = -1,
                  forgotten: list = (), max_wait_ms: int = 0, min_bytes: int = 1,
                  max_bytes: int = 50 << 20, replica_id: int = -1) -> dict:
    """``topics``: ``[(name or topic id, [(partition, fetch_offset[,
    current_leader_epoch]), ...]), ...]``; ``forgotten``: ``[(name or topic
    id, [partition, ...]), ...]``."""
    key = "topic_id" if version >= 13 else "topic"
    data = {
        "replica_id": replica_id, "max_wait": max_wait_ms, "min_bytes": min_bytes,
        "max_bytes": max_bytes, "isolation_level": 0, "session_id": session_id,
        "session_epoch": epoch, "rack_id": "",
        "topics": [{key: t, "partitions": [
            {"partition": part[0], "fetch_offset": part[1], "partition_max_bytes": 1 << 20,
             "current_leader_epoch": part[2] if len(part) > 2 else -1,
             "last_fetched_epoch": -1, "log_start_offset": -1}
            for part in parts]} for t, parts in topics],
        "forgotten_topics_data": [{key: t, "partitions": list(ps)} for t, ps in forgotten],
    }
    if version >= 15:
        data["replica_state"] = {"replica_id": replica_id, "replica_epoch": -1}
    return data


def partitions_of(response) -> dict:
    """``{(topic name or id, partition): PartitionData}`` of a FetchResponse."""
    out = {}
    for t in response.responses:
        key = getattr(t, "topic_id", None) or getattr(t, "topic", None)
        for p in t.partitions:
            out[(key, p.partition_index)] = p
    return out


def topic_id(conn: Conn, topic: str):
    response = conn.call(METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                        "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
    (t,) = response.topics
    assert t.error_code == 0, t
    return t.topic_id


def record_count(records) -> int:
    """Records in v2 batches (the records count at byte 57 of each batch)."""
    data = bytes(records or b"")
    count, pos = 0, 0
    while pos + 61 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        count += struct.unpack_from(">i", data, pos + 57)[0]
        pos += 12 + length
    return count


class RecordingProxy:
    """A TCP proxy between clients and one broker that records every Fetch
    and ListOffsets exchange: ``exchanges`` is a list of ``Exchange``
    (request version, sizes, session id and epoch asked, partitions sent;
    the answer's error, session id and partitions). Start the broker with
    ``advertised.listeners`` at ``proxy.port`` so clients come back through it.

    Ownership: its threads own their sockets; ``exchanges`` is appended under
    ``lock``. Every socket has a timeout and ``close`` ends them all.
    """

    def __init__(self, target_port: int, port: int = 0):
        import socket
        import threading

        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.exchanges: list = []
        self.errors: list = []
        self._pending: dict = {}  # (connection, correlation id) -> Exchange
        self._sockets: list = []
        self._closed = False
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._closed = True
        for s in [self.listener, *self._sockets]:
            try:
                s.close()
            except OSError:
                pass
        for t in self._threads:
            t.join(5)

    def _accept(self) -> None:
        import socket
        import threading

        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except (socket.timeout, OSError):
                continue
            server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            for s in (client, server):
                s.settimeout(0.5)
                self._sockets.append(s)
            key = object()
            for src, dst, parse in ((client, server, self._request), (server, client, self._response)):
                t = threading.Thread(target=self._pump, args=(src, dst, parse, key), daemon=True)
                self._threads.append(t)
                t.start()

    def _pump(self, src, dst, parse, key) -> None:
        import socket

        buf = bytearray()
        while not self._closed:
            try:
                chunk = src.recv(1 << 16)
            except socket.timeout:
                continue
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 4:
                (size,) = struct.unpack_from(">i", buf, 0)
                if len(buf) < 4 + size:
                    break
                try:
                    parse(key, bytes(buf[4:4 + size]))
                except Exception as exc:  # a test asserts there were none
                    self.errors.append(repr(exc))
                del buf[:4 + size]
            try:
                dst.sendall(chunk)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _request(self, key, frame: bytes) -> None:
        from kafkapy.protocol.headers import read_request_header, skip_tagged_fields

        header = read_request_header(frame)
        if header.api_key not in (FETCH, LIST_OFFSETS):
            return
        spec = API_TABLE[header.api_key]
        offset = header.offset
        if spec.is_flexible(header.api_version):
            offset = skip_tagged_fields(memoryview(frame), offset)
        request, _ = decode(spec.request_class(header.api_version), memoryview(frame), offset)
        exchange = Exchange(header.api_key, header.api_version, 4 + len(frame))
        if header.api_key == FETCH:
            exchange.session_id = getattr(request, "session_id", 0)
            exchange.epoch = getattr(request, "session_epoch", -1)
            exchange.partitions = sum(len(t.partitions) for t in request.topics)
        with self.lock:
            self._pending[(key, header.correlation_id)] = exchange

    def _response(self, key, frame: bytes) -> None:
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        with self.lock:
            exchange = self._pending.pop((key, correlation_id), None)
        if exchange is None:
            return
        spec = API_TABLE[exchange.api_key]
        body = frame[5:] if spec.is_flexible(exchange.version) else frame[4:]
        response, _ = decode(spec.response_class(exchange.version), memoryview(body), 0)
        exchange.response_bytes = 4 + len(frame)
        if exchange.api_key == FETCH:
            exchange.error_code = response.error_code
            exchange.response_session_id = response.session_id
            exchange.response_partitions = sum(len(t.partitions) for t in response.responses)
        with self.lock:
            self.exchanges.append(exchange)


class Exchange:
    def __init__(self, api_key: int, version: int, request_bytes: int):
        self.api_key = api_key
        self.version = version
        self.request_bytes = request_bytes
        self.session_id = 0
        self.epoch = -1
        self.partitions = 0
        self.response_bytes = 0
        self.error_code = 0
        self.response_session_id = 0
        self.response_partitions = 0

    def __repr__(self) -> str:
        return (f"Exchange(key={self.api_key}, v{self.version}, session={self.session_id}/{self.epoch}, "
                f"partitions={self.partitions}, {self.request_bytes} B -> error {self.error_code}, "
                f"session {self.response_session_id}, {self.response_partitions} partitions, "
                f"{self.response_bytes} B)")
