"""Requests a processor handles itself (``kafkapy.network.inline.apis``:
Produce and Fetch) are answered byte for byte as the handler workers answer
them.

Two brokers, one with the default (the processors handle Produce and Fetch)
and one with the setting empty (every request goes through the shared queue
to a worker), get the same sequence of raw requests: produces of every
version, small and over 16 KiB (read into the processor's arena), good and
bad (unknown topic and partition, a corrupt batch, acks 0
followed by a request on the same connection), then fetches of every
version, at offsets in range, at the end (a fetch that waits its
``max_wait`` in the processor's purgatory and expires) and out of range. The
answers must be the same bytes, once the topic ids (random per broker, in
Fetch v13 and later) are swapped.
"""

from __future__ import annotations

import struct

import pytest

from support.clients import create_topic, module_broker
from support.raw_api import call, call_raw
from support.rawclient import RawClient, encode_request_header_v1

from kafkapy._core.records_py import build_batch
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import encode_to_bytes
from kafkapy.protocol.entities import construct

pytestmark = pytest.mark.timeout(180)

PRODUCE, FETCH, METADATA = 0, 1, 3
TOPIC = "inline"
T0 = 1_700_000_000_000  # record timestamps: fixed, so both logs hold the same bytes


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    with module_broker(tmp_path_factory, name="inline") as inline, \
            module_broker(tmp_path_factory, {"kafkapy.network.inline.apis": ""}, name="queued") as queued:
        for b in (inline, queued):
            create_topic(b.bootstrap, TOPIC, 2)
        yield inline, queued


def body(api_key: int, version: int, data: dict) -> bytes:
    spec = API_TABLE[api_key]
    encoded = encode_to_bytes(construct(spec.request_class(version), data))
    return (b"\x00" if spec.is_flexible(version) else b"") + encoded


def topic_id(bootstrap: str) -> bytes:
    r = call(bootstrap, METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                         "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})
    return r.topics[0].topic_id.bytes


def batch(n: int, first: int, *, corrupt: bool = False) -> bytes:
    records = [(b"k%d" % (first + i), b"v" * (10 + i), [("h", b"x")] if i % 2 else [], T0 + first + i)
               for i in range(n)]
    raw = bytearray(build_batch(records))
    if corrupt:
        raw[-1] ^= 0xFF  # the CRC no longer matches: CORRUPT_MESSAGE
    return bytes(raw)


def produce_requests():
    """(version, body) pairs; each broker gets the same ones in the same order."""
    out = []
    seq = 0
    for version in range(3, API_TABLE[PRODUCE].max_version + 1):
        for acks in (1, -1):
            for partition in (0, 1):
                out.append((version, {"transactional_id": None, "acks": acks, "timeout": 5000, "topic_data": [
                    {"name": TOPIC, "partition_data": [{"index": partition, "records": batch(3, seq)}]}]}))
                seq += 3
    # A body over 16 KiB: read into the processor's arena, not sent inline.
    big = [(b"big", b"x" * 30_000, [], T0)]
    out.append((8, {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 1, "records": build_batch(big)}]}]}))
    bad = [{"name": TOPIC, "partition_data": [{"index": 7, "records": batch(1, 0)}]},
           {"name": "no-such-topic", "partition_data": [{"index": 0, "records": batch(1, 0)}]},
           {"name": TOPIC, "partition_data": [{"index": 0, "records": batch(2, 0, corrupt=True)}]}]
    for version in (3, 8, API_TABLE[PRODUCE].max_version):
        out.append((version, {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": bad}))
    return out


def fetch_request(version: int, tid: bytes, offset: int, *, max_wait: int = 0, min_bytes: int = 1) -> dict:
    partition = {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}
    topic = {"topic": TOPIC, "topic_id": tid, "partitions": [partition,
                                                             dict(partition, partition=1, fetch_offset=0)]}
    return {"replica_id": -1, "max_wait": max_wait, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [topic],
            "forgotten_topics_data": [], "rack_id": ""}


def answers(bootstrap: str, end_offset: int) -> list[bytes]:
    got = [call_raw(bootstrap, PRODUCE, v, body(PRODUCE, v, data)) for v, data in produce_requests()]
    # acks=0 has no answer: the next request on the connection is answered, in order.
    with RawClient.connect(bootstrap, timeout_s=15) as client:
        acks0 = {"transactional_id": None, "acks": 0, "timeout": 5000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 1, "records": batch(2, 9000)}]}]}
        for cid, (api_key, version, data) in enumerate(((PRODUCE, 8, acks0), (PRODUCE, 8, acks0),
                                                        (METADATA, 1, {"topics": [{"name": TOPIC}]}))):
            payload = encode_request_header_v1(api_key, version, cid) + body(api_key, version, data)
            client.send(struct.pack(">i", len(payload)) + payload)
        got.append(client.recv_response(2))
    from uuid import UUID

    tid = UUID(bytes=topic_id(bootstrap))
    for version in range(API_TABLE[FETCH].served_from, API_TABLE[FETCH].max_version + 1):
        for offset, max_wait, min_bytes in ((0, 0, 1), (5, 0, 1), (end_offset, 200, 1 << 20),
                                            (end_offset + 100, 0, 1)):
            request = fetch_request(version, tid, offset, max_wait=max_wait, min_bytes=min_bytes)
            got.append(call_raw(bootstrap, FETCH, version, body(FETCH, version, request)))
    return got


def test_inline_answers_are_the_workers_answers_byte_for_byte(brokers):
    inline, queued = brokers
    per_partition = sum(3 for _ in range(3, API_TABLE[PRODUCE].max_version + 1) for _ in (1, -1))
    a = answers(inline.bootstrap, per_partition)
    b = answers(queued.bootstrap, per_partition)
    a_id, b_id = topic_id(inline.bootstrap), topic_id(queued.bootstrap)
    assert a_id != b_id
    assert len(a) == len(b) > 100
    # The Metadata answer after the acks=0 produces names each broker's port.
    a_port, b_port = (struct.pack(">i", int(x.bootstrap.rsplit(":", 1)[1])) for x in brokers)
    for i, (x, y) in enumerate(zip(a, b)):
        assert x == y.replace(b_id, a_id).replace(b_port, a_port), f"answer {i} differs:\n{x.hex()}\n{y.hex()}"
    # The sequence reached what it means to: records were appended and fetched.
    assert any(len(x) > 200 for x in a[-40:]), "no fetch returned records"
