"""Requests pipelined on one connection while a large answer is still being
written (librdkafka sends its Heartbeat or FindCoordinator behind a Fetch on
the same connection): every answer comes back once, in request order.

The client's receive buffer is small and it reads nothing at first, so the
broker's first answer (a Fetch of ~4 MB) is written in pieces, waiting for
the socket to be writable; the second request arrived in the same read as
the first. Once the first answer is out, the second request (a Fetch that
waits for data, ``max_wait`` 1 s) is handled; the third (ApiVersions) is
sent while it waits. A processor that kept write interest after the first
answer took the second request for answered when the socket was next
writable: it read the third while the second was still out, answered it
first, and re-ran the parked Fetch without its request bytes.
"""

from __future__ import annotations

import struct
import time

import pytest

from support.clients import Rec, assert_delivered, create_topic, module_broker, produce_confluent
from support.rawclient import RawClient, api_versions_v0_request, encode_request

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.protocol.errors import ErrorCode as E

pytestmark = pytest.mark.timeout(120)

FETCH, FETCH_VERSION = 1, 11  # the newest non-flexible version (request header v1)
RECORDS, VALUE_BYTES = 2000, 2048
ROUNDS = 3  # each on a fresh connection


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with module_broker(tmp_path_factory, {"num.io.threads": 2, "num.network.threads": 1}) as b:
        yield b


def fetch_frame(correlation_id: int, topic: str, offset: int, *, max_wait_ms: int, min_bytes: int) -> bytes:
    request = {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 64 << 20,
               "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
               "topics": [{"topic": topic, "partitions": [
                   {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 64 << 20,
                    "current_leader_epoch": -1, "log_start_offset": -1}]}],
               "forgotten_topics_data": []}
    body = encode_to_bytes(construct(API_TABLE[FETCH].request_class(FETCH_VERSION), request))
    return encode_request(FETCH, FETCH_VERSION, correlation_id, body)


def fetch_answer(frame: bytes):
    response, _ = decode(API_TABLE[FETCH].response_class(FETCH_VERSION), memoryview(frame)[4:], 0)
    (topic,) = response.responses
    (partition,) = topic.partitions
    return partition


def correlation_id(frame: bytes) -> int:
    return struct.unpack_from(">i", frame)[0]


def test_requests_behind_a_partly_written_answer_are_answered_in_order(broker):
    topic = "pipelined"
    create_topic(broker.bootstrap, topic)
    assert_delivered(produce_confluent(broker.bootstrap, topic,
                                       [Rec(partition=0, key=None, value=bytes([i % 251]) * VALUE_BYTES) for i in range(RECORDS)]))
    host, _, port = broker.bootstrap.rpartition(":")
    for round_ in range(ROUNDS):  # bounded: a few rounds, each on a fresh connection
        client = RawClient(host, int(port), timeout_s=20, receive_buffer=16384)
        try:
            # One write: the ~4 MB Fetch, then a Fetch at the log end that waits.
            client.send(fetch_frame(1, topic, 0, max_wait_ms=0, min_bytes=1)
                        + fetch_frame(2, topic, RECORDS, max_wait_ms=1000, min_bytes=1))
            time.sleep(0.3)  # the broker fills the socket and waits for it to drain
            first = client.recv_frame()
            assert correlation_id(first) == 1, round_
            p = fetch_answer(first)
            assert (p.error_code, p.high_watermark) == (E.NONE, RECORDS)
            assert len(p.records or b"") > RECORDS * VALUE_BYTES // 2
            sent_at = time.monotonic()
            client.send(api_versions_v0_request(3))  # behind the waiting Fetch
            second = client.recv_frame()
            waited = time.monotonic() - sent_at
            assert correlation_id(second) == 2, f"round {round_}: answer {correlation_id(second)} before 2"
            p = fetch_answer(second)
            assert (p.error_code, p.high_watermark, p.records or b"") == (E.NONE, RECORDS, b"")
            assert waited >= 0.5  # it waited for data (max_wait 1 s) before its answer
            third = client.recv_frame()
            assert correlation_id(third) == 3
            assert struct.unpack_from(">h", third, 4)[0] == E.NONE  # ApiVersions' error code
            # The connection goes on as usual.
            assert client.api_versions()[0] == E.NONE
        finally:
            client.close()
