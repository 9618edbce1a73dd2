"""Produce v0-v2 (message format v0/v1) against a real standalone broker, read
back with confluent-kafka as Kafka 3.9 would serve them: the records were
up-converted to v2 batches on append (``storage.legacy_records``).

Raw frames: v0 with magic 0 messages (uncompressed, then each codec in a
wrapper), v1 and v2 with magic 1 (own timestamps), acks=0, a bad CRC
(CORRUPT_MESSAGE, nothing appended) and a LogAppendTime topic (the v2
response's log_append_time, the records' timestamps). Real old clients:
kafka-python with ``api_version=(0, 10, 0)`` (Produce v2, magic 1) and
``(0, 9)`` (Produce v1, magic 0), both with gzip. One broker serves the module.
"""

from __future__ import annotations

import time

import pytest

from support.clients import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    Rec,
    consume_confluent,
    create_topic,
    module_broker,
    produce_kafka_python,
)
from support.raw_api import call
from support.wait import wait_for
from support.legacy_messages import GZIP, LZ4, NONE, SNAPPY, message, message_set, wrapper
from support.rawclient import RawClient

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.protocol.errors import ErrorCode as E

pytestmark = pytest.mark.timeout(180)

PAIRS = [(b"k0", b"v0"), (None, b"v1"), (b"k2", None)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with module_broker(tmp_path_factory, {"num.io.threads": 2}) as b:
        yield b


def produce(broker, version, topic, records, acks=1):
    """One partition's Produce v0-v2 as raw frames -> the partition's answer
    (None for acks=0)."""
    request = {"acks": acks, "timeout": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    if acks == 0:
        body = encode_to_bytes(construct(API_TABLE[0].request_class(version), request))
        with RawClient.connect(broker.bootstrap) as client:
            client.send_request(0, version, body)
        return None
    response = call(broker.bootstrap, 0, version, request)
    ((topic_response,),) = (response.responses,)
    assert topic_response.name == topic
    (partition,) = topic_response.partition_responses
    assert hasattr(response, "throttle_time") == (version >= 1)
    return partition


def log_end_offset(broker, topic) -> int:
    answer = call(broker.bootstrap, 2, 1, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return answer.topics[0].partitions[0].offset


def read(broker, topic, n):
    got = consume_confluent(broker.bootstrap, topic, {0: n})
    assert len(got) == n, f"read {len(got)} of {n}"
    return got


def test_raw_produce_v0_v1_v2_each_codec_read_by_confluent(broker):
    topic = "old-raw"
    create_topic(broker.bootstrap, topic)
    ts = int(time.time() * 1000) - 1000
    sent = []  # (key, value, timestamp Kafka gives back)
    offset = 0
    for version in (0, 1, 2):
        magic = 0 if version < 2 else 1
        timestamps = [ts + i for i in range(len(PAIRS))] if magic else None
        expected_ts = timestamps or [-1] * len(PAIRS)
        for codec in (NONE, GZIP, SNAPPY, LZ4):
            inner = message_set(magic, PAIRS, timestamps)
            records = inner if codec == NONE else wrapper(codec, magic, inner, timestamp=ts + 2)
            p = produce(broker, version, topic, records)
            assert (p.index, p.error_code, p.base_offset) == (0, E.NONE, offset), (version, codec)
            if version >= 2:
                assert p.log_append_time == -1  # CreateTime topic
            offset += len(PAIRS)
            sent += [(k, v, t) for (k, v), t in zip(PAIRS, expected_ts)]
    got = read(broker, topic, len(sent))
    assert [(g.offset, g.key, g.value) for g in got] == [(i, k, v) for i, (k, v, _) in enumerate(sent)]
    # v0 messages have no timestamp: Kafka stores -1 (NO_TIMESTAMP), CreateTime.
    assert [(g.timestamp_type, g.timestamp_ms) for g in got] == [(CREATE_TIME, t) for _, _, t in sent]


def test_bad_crc_and_acks_zero(broker):
    topic = "old-crc"
    create_topic(broker.bootstrap, topic)
    good = message(1, b"k", b"v", int(time.time() * 1000))
    bad = good[:-1] + bytes([good[-1] ^ 0xFF])
    for version in (0, 1, 2):
        p = produce(broker, version, topic, bad)
        assert (p.error_code, p.base_offset) == (E.CORRUPT_MESSAGE, -1)
    # Nothing was appended; acks=0 v0 then appends with no answer. Its
    # connection closes at once, so its request may still be at a handler when
    # the next connection's is: wait for the append before the next produce.
    assert log_end_offset(broker, topic) == 0
    assert produce(broker, 0, topic, message(0, b"a0", b"b0"), acks=0) is None
    wait_for(lambda: log_end_offset(broker, topic) == 1, 10, "the acks=0 append")
    p = produce(broker, 1, topic, message(0, b"a1", b"b1"))
    assert (p.error_code, p.base_offset) == (E.NONE, 1)
    assert [(g.offset, g.key) for g in read(broker, topic, 2)] == [(0, b"a0"), (1, b"a1")]


def test_log_append_time_topic(broker):
    topic = "old-lat"
    create_topic(broker.bootstrap, topic, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    p0 = produce(broker, 0, topic, message_set(0, PAIRS))
    p2 = produce(broker, 2, topic, wrapper(GZIP, 1, message_set(1, PAIRS, [1, 2, 3]), timestamp=3))
    after = int(time.time() * 1000)
    assert (p0.error_code, p0.base_offset, p2.error_code, p2.base_offset) == (E.NONE, 0, E.NONE, 3)
    append_time = p2.log_append_time
    assert before <= append_time <= after
    got = read(broker, topic, 6)
    assert all(g.timestamp_type == LOG_APPEND_TIME and before <= g.timestamp_ms <= after for g in got)
    assert got[3].timestamp_ms == append_time


@pytest.mark.parametrize("api_version, magic_timestamps", [((0, 10, 0), True), ((0, 9), False)])
def test_kafka_python_old_api_versions_read_by_confluent(broker, api_version, magic_timestamps):
    topic = "old-kp-" + "-".join(map(str, api_version))
    create_topic(broker.bootstrap, topic)
    ts = int(time.time() * 1000) - 5000
    records = [Rec(0, b"key-%d" % i, b"value-%d" % i, timestamp_ms=ts + i) for i in range(20)]
    records.append(Rec(0, None, b"no-key", timestamp_ms=ts + 20))
    metadata = produce_kafka_python(broker.bootstrap, topic, records, api_version=api_version,
                                    compression_type="gzip")
    assert [m.offset for m in metadata] == list(range(len(records)))
    got = read(broker, topic, len(records))
    assert [(g.key, g.value) for g in got] == [(r.key, r.value) for r in records]
    expected_ts = [r.timestamp_ms for r in records] if magic_timestamps else [-1] * len(records)
    assert [(g.timestamp_type, g.timestamp_ms) for g in got] == [(CREATE_TIME, t) for t in expected_ts]
