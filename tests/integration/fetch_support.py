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
from support.rawclient import RawClient, encode_request_header_v1

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
