"""Fetch at the high watermark (a caught-up consumer), on the wire.

The handler answers a partition fetched at its high watermark without taking
the partition lock or reading the log; these tests pin what that answer must
still be: error 0, the current watermarks, no records, a long poll that wakes
on the next append, OFFSET_OUT_OF_RANGE one past the end, and correct
answers when caught-up and behind partitions share one request. Fetch v4
(the oldest served) and v11 (the newest non-flexible, with log_start_offset
and preferred_read_replica) are encoded and parsed by hand so the codec
under test cannot hide a layout mistake.
"""

from __future__ import annotations

import struct
import threading
import time

import pytest

from support.clients import (
    Rec,
    assert_delivered,
    create_topic,
    module_broker,
    produce_confluent,
)
from support.rawclient import RawClient

pytestmark = pytest.mark.timeout(120)

FETCH = 1
OFFSET_OUT_OF_RANGE = 1


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    with module_broker(tmp_path_factory) as broker:
        yield broker


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _fetch_request(version, topic, partitions, max_wait_ms=0, min_bytes=1):
    """Fetch v4 or v11 body; ``partitions``: [(partition, fetch_offset)]."""
    body = struct.pack(">iiiib", -1, max_wait_ms, min_bytes, 50 << 20, 0)
    if version >= 7:
        body += struct.pack(">ii", 0, -1)  # no fetch session
    body += struct.pack(">i", 1) + _string(topic) + struct.pack(">i", len(partitions))
    for partition, offset in partitions:
        if version >= 9:
            body += struct.pack(">iiqqi", partition, -1, offset, -1, 1 << 20)
        else:
            body += struct.pack(">iqi", partition, offset, 1 << 20)
    if version >= 7:
        body += struct.pack(">i", 0)  # forgotten topics
    if version >= 11:
        body += _string("")  # rack id
    return body


def _parse_response(version, frame):
    """{partition: {error, hw, lso, log_start, records}} of a one-topic response."""
    pos = 4  # throttle time (RawClient strips the correlation id)
    if version >= 7:
        (error, _session) = struct.unpack_from(">hi", frame, pos)
        assert error == 0
        pos += 6
    (ntopics,) = struct.unpack_from(">i", frame, pos)
    assert ntopics == 1
    (nlen,) = struct.unpack_from(">h", frame, pos + 4)
    pos += 6 + nlen
    (nparts,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    out = {}
    for _ in range(nparts):
        partition, error, hw, lso = struct.unpack_from(">ihqq", frame, pos)
        pos += 22
        log_start = None
        if version >= 5:
            (log_start,) = struct.unpack_from(">q", frame, pos)
            pos += 8
        (naborted,) = struct.unpack_from(">i", frame, pos)
        pos += 4 + max(0, naborted) * 16
        if version >= 11:
            (replica,) = struct.unpack_from(">i", frame, pos)
            assert replica == -1
            pos += 4
        (rlen,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        records = bytes(frame[pos:pos + max(0, rlen)])
        pos += max(0, rlen)
        out[partition] = {"error": error, "hw": hw, "lso": lso, "log_start": log_start,
                          "records": records}
    assert pos == len(frame), "trailing bytes after the last partition"
    return out


def _fetch(bootstrap, version, topic, partitions, max_wait_ms=0, timeout_s=15):
    with RawClient.connect(bootstrap, timeout_s=timeout_s) as raw:
        frame = raw.request(FETCH, version, _fetch_request(version, topic, partitions, max_wait_ms),
                            timeout_s=timeout_s)
    return _parse_response(version, frame)


def _produce(bootstrap, topic, partition, n):
    recs = [Rec(partition, b"k", b"value-%d" % i) for i in range(n)]
    assert_delivered(produce_confluent(bootstrap, topic, recs, linger_ms=50))


@pytest.mark.parametrize("version", [4, 11])
def test_caught_up_fetch_answers_watermarks_and_no_records(kbroker, version):
    bs = kbroker.bootstrap
    topic = f"caught-up-{version}"
    create_topic(bs, topic, 1)
    _produce(bs, topic, 0, 5)
    got = _fetch(bs, version, topic, [(0, 5)])[0]
    assert got["error"] == 0 and got["hw"] == 5 and got["lso"] == 5
    assert got["records"] == b""
    if version >= 5:
        assert got["log_start"] == 0
    # An empty partition is caught up at offset 0.
    empty = f"caught-up-empty-{version}"
    create_topic(bs, empty, 1)
    got = _fetch(bs, version, empty, [(0, 0)])[0]
    assert (got["error"], got["hw"], got["records"]) == (0, 0, b"")


@pytest.mark.parametrize("version", [4, 11])
def test_one_past_the_high_watermark_is_out_of_range(kbroker, version):
    bs = kbroker.bootstrap
    topic = f"past-hw-{version}"
    create_topic(bs, topic, 1)
    _produce(bs, topic, 0, 3)
    got = _fetch(bs, version, topic, [(0, 4)])[0]
    assert got["error"] == OFFSET_OUT_OF_RANGE and got["hw"] == 3 and got["records"] == b""


def test_caught_up_and_behind_partitions_in_one_request(kbroker):
    bs = kbroker.bootstrap
    topic = "caught-up-mixed"
    create_topic(bs, topic, 3)
    _produce(bs, topic, 0, 4)
    _produce(bs, topic, 1, 6)
    got = _fetch(bs, 11, topic, [(0, 4), (1, 2), (2, 0)])
    assert (got[0]["error"], got[0]["hw"], got[0]["records"]) == (0, 4, b"")
    assert got[1]["error"] == 0 and got[1]["hw"] == 6
    # The answer starts with the whole batch holding offset 2. The producer
    # usually sends the six records as one batch (base offset 0), but on a
    # loaded machine its 50 ms linger can end between two produce() calls
    # (CI saw a batch at base offset 1), so the batch is judged by the
    # offsets it holds, as Kafka's read starts at the batch holding the
    # fetch offset.
    (base_offset, batch_length) = struct.unpack_from(">qi", got[1]["records"], 0)
    (last_offset_delta,) = struct.unpack_from(">i", got[1]["records"], 23)
    assert base_offset <= 2 <= base_offset + last_offset_delta, (base_offset, last_offset_delta)
    assert len(got[1]["records"]) >= batch_length + 12
    assert (got[2]["error"], got[2]["hw"], got[2]["records"]) == (0, 0, b"")


def test_caught_up_long_poll_wakes_on_append(kbroker):
    bs = kbroker.bootstrap
    topic = "caught-up-longpoll"
    create_topic(bs, topic, 1)
    _produce(bs, topic, 0, 2)
    produced_at = []

    def produce_later():
        time.sleep(0.5)
        produced_at.append(time.monotonic())
        _produce(bs, topic, 0, 1)

    thread = threading.Thread(target=produce_later, daemon=True)
    thread.start()
    got = _fetch(bs, 11, topic, [(0, 2)], max_wait_ms=10_000)[0]
    answered_at = time.monotonic()
    thread.join(10)
    assert got["error"] == 0 and got["hw"] == 3
    (base_offset,) = struct.unpack_from(">q", got["records"], 0)
    assert base_offset == 2
    # Waiting out max_wait would take ~9.5 s; a woken fetch answers in ms.
    assert answered_at - produced_at[0] < 2.0


def test_caught_up_fetch_waits_out_max_wait_when_nothing_arrives(kbroker):
    bs = kbroker.bootstrap
    topic = "caught-up-idle"
    create_topic(bs, topic, 1)
    _produce(bs, topic, 0, 1)
    started = time.monotonic()
    got = _fetch(bs, 4, topic, [(0, 1)], max_wait_ms=300)[0]
    waited = time.monotonic() - started
    assert (got["error"], got["hw"], got["records"]) == (0, 1, b"")
    assert 0.25 <= waited < 5.0
