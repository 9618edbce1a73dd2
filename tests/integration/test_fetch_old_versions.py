"""Fetch v0-v3 and ListOffsets v0 against a real standalone broker: the v2
batches it stores are down-converted to message format v0 (Fetch v0-v1) or
v1 (v2-v3) for clients pinned to old protocol versions, as Kafka 3.9 does.

Records are written by a current client (v2 batches, with headers, each
codec), then read by kafka-python with ``api_version`` (0, 9) (Fetch v1,
ListOffsets v0), (0, 10, 0) (Fetch v2, ListOffsets v0) and (0, 10, 1)
(Fetch v3), by librdkafka with ``api.version.request=false`` and
``broker.version.fallback`` 0.9.0 / 0.10.0, and by raw frames (offsets,
timestamps, headers dropped, control batches left out, zstd's
UNSUPPORTED_COMPRESSION_TYPE, a topic with message.downconversion.enable
false answering UNSUPPORTED_VERSION). Commits of clients pinned to the
oldest versions: kafka-python (0, 8, 1) commits and fetches with v0 (kept
apart, as Kafka 3.9 keeps them in ZooKeeper), (0, 8, 2) and librdkafka with
broker.version.fallback 0.8.2 with v1 (the coordinator's). One broker
serves the module.
"""

from __future__ import annotations

import pytest

from support.clients import (
    Rec,
    consume_confluent,
    consume_kafka_python,
    create_topic,
    module_broker,
    produce_confluent,
    produce_kafka_python,
)
from support.raw_api import call
from support.wait import wait_for

from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.storage.legacy_records import to_v2_batch
from kafkapy._core.records_py import decode_records

pytestmark = pytest.mark.timeout(180)

N = 20
BASE_TS = 1_700_000_000_000
# kafka-python's versions (kafka/protocol/broker_version_data.py): (0, 9)
# fetches with v1 (magic 0), (0, 10, 0) with v2 and (0, 10, 1) with v3 (magic 1).
KAFKA_PYTHON_VERSIONS = [(0, 9), (0, 10, 0), (0, 10, 1)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with module_broker(tmp_path_factory, {"num.io.threads": 2, "group.initial.rebalance.delay.ms": 0}) as b:
        yield b


def _records(n=N, headers=True):
    return [Rec(0, b"k%d" % i, b"v%d" % i, (("h", b"x"),) if headers else (), BASE_TS + i) for i in range(n)]


def _topic(broker, name, codec, config=None, n=N):
    create_topic(broker.bootstrap, name, config=config)
    reports = produce_confluent(broker.bootstrap, name, _records(n), compression_type=codec)
    assert all(err is None for err, *_ in reports), reports
    return name


def _fetch(broker, version, topic, offset=0, max_bytes=1 << 20):
    r = call(broker.bootstrap, 1, version, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                             "partition_max_bytes": max_bytes}]}]})
    assert hasattr(r, "throttle_time") == (version >= 1)
    (p,) = r.responses[0].partitions
    return p


def _magic_records(records: bytes):
    """A v0/v1 MessageSet's magic and ``(timestamp, key, value)`` of every
    record, read message by message: the producer may have sent the records
    in more than one batch (its linger decides), and each compressed batch
    comes back as a wrapper message of its own."""
    magic = records[16]
    out, pos = [], 0
    while pos + 12 <= len(records):  # bounded by the bytes
        end = pos + 12 + int.from_bytes(records[pos + 8:pos + 12], "big")
        if end > len(records):
            break  # a partial message at the end of a bounded fetch
        out += [(ts, k, v) for _o, ts, k, v, _h in decode_records(to_v2_batch(records[pos:end]))]
        pos = end
    return magic, out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_raw_fetch_down_converts(broker, codec, version):
    topic = f"old-fetch-raw-{codec}-{version}"
    _topic(broker, topic, codec)
    p = _fetch(broker, version, topic)
    assert (p.error_code, p.high_watermark) == (E.NONE, N)
    magic, got = _magic_records(bytes(p.records))
    assert magic == (0 if version <= 1 else 1)
    expected_ts = [-1] * N if magic == 0 else [BASE_TS + i for i in range(N)]
    assert got == [(expected_ts[i], b"k%d" % i, b"v%d" % i) for i in range(N)]


def test_raw_fetch_from_the_middle_of_an_uncompressed_batch(broker):
    topic = _topic(broker, "old-fetch-mid", "none")
    p = _fetch(broker, 3, topic, offset=5)
    records = bytes(p.records)
    # Kafka drops an uncompressed batch's records below the fetch offset.
    assert int.from_bytes(records[:8], "big") == 5
    assert len(_magic_records(records)[1]) == N - 5


def test_raw_fetch_is_bounded_by_max_bytes_but_returns_one_message(broker):
    topic = _topic(broker, "old-fetch-small", "none")
    p = _fetch(broker, 3, topic, max_bytes=1)
    magic, got = _magic_records(bytes(p.records))
    assert (magic, len(got)) == (1, 1)
    p = _fetch(broker, 3, topic, max_bytes=200)
    assert 0 < len(p.records) <= 200


def test_zstd_is_unsupported_compression_type(broker):
    topic = _topic(broker, "old-fetch-zstd", "zstd")
    for version in range(4):
        assert _fetch(broker, version, topic).error_code == E.UNSUPPORTED_COMPRESSION_TYPE
    assert _fetch(broker, 4, topic).error_code == E.NONE


def test_downconversion_disabled_is_unsupported_version(broker):
    topic = _topic(broker, "old-fetch-off", "none", {"message.downconversion.enable": "false"})
    for version in range(4):
        p = _fetch(broker, version, topic)
        assert (p.error_code, len(p.records or b"")) == (E.UNSUPPORTED_VERSION, 0)
    assert _fetch(broker, 4, topic).error_code == E.NONE


def test_transaction_markers_are_left_out(broker):
    topic = "old-fetch-txn"
    create_topic(broker.bootstrap, topic)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "old-fetch-txn"})
    producer.init_transactions(30)
    for commit in (False, True):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, key=b"k", value=b"%s-%d" % (b"c" if commit else b"a", i), partition=0)
        producer.flush(30)  # sent, so the abort has records in the log
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    # The coordinator writes the commit marker after EndTxn is answered, as Kafka's does.
    wait_for(lambda: _fetch(broker, 4, topic).high_watermark == 8, 30, "both transactions' markers")
    p = _fetch(broker, 2, topic)
    records = bytes(p.records)
    offsets = []
    position = 0
    while position < len(records):
        offsets.append(int.from_bytes(records[position:position + 8], "big"))
        position += 12 + int.from_bytes(records[position + 8:position + 12], "big")
    # read_uncommitted: the aborted records too; offsets 3 and 7 (the markers) are not sent
    assert offsets == [0, 1, 2, 4, 5, 6]
    assert [v for _ts, _k, v in _magic_records(records)[1]] == [b"a-0", b"a-1", b"a-2", b"c-0", b"c-1", b"c-2"]


def test_list_offsets_v0(broker):
    topic = _topic(broker, "old-list-offsets", "none")

    def offsets(timestamp, max_num_offsets):
        r = call(broker.bootstrap, 2, 0, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "timestamp": timestamp, "max_num_offsets": max_num_offsets}]}]})
        (p,) = r.topics[0].partitions
        assert p.error_code == E.NONE
        return list(p.old_style_offsets)

    # One segment: its base offset, and the log end offset (modified now).
    assert offsets(-1, 10) == [N, 0]
    assert offsets(-1, 1) == [N]
    assert offsets(-2, 10) == [0]
    assert offsets(0, 10) == []  # nothing modified before the epoch
    r = call(broker.bootstrap, 2, 0, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "timestamp": -3, "max_num_offsets": 1}]}]})
    assert r.topics[0].partitions[0].error_code == E.UNSUPPORTED_VERSION


@pytest.mark.parametrize("api_version", KAFKA_PYTHON_VERSIONS)
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_kafka_python_pinned_reads_each_codec(broker, api_version, codec):
    topic = _topic(broker, f"old-kp-{codec}-{'_'.join(map(str, api_version))}", codec)
    got = consume_kafka_python(broker.bootstrap, topic, {0: N}, api_version=api_version)
    assert [(g.offset, g.key, g.value, g.headers) for g in got] == [
        (i, b"k%d" % i, b"v%d" % i, ()) for i in range(N)]
    if api_version >= (0, 10, 0):
        assert [g.timestamp_ms for g in got] == [BASE_TS + i for i in range(N)]


@pytest.mark.parametrize("api_version", KAFKA_PYTHON_VERSIONS)
def test_kafka_python_pinned_produces_and_commits_in_a_group(broker, api_version):
    from kafka import KafkaConsumer

    tag = "_".join(map(str, api_version))
    topic, group = f"old-kp-group-{tag}", f"old-kp-group-{tag}"
    create_topic(broker.bootstrap, topic)
    produce_kafka_python(broker.bootstrap, topic, _records(headers=False), api_version=api_version,
                         compression_type="gzip")

    def consume(n):
        consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                 api_version=api_version, auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=15000)
        try:
            got = []
            for m in consumer:
                got.append(m.value)
                if len(got) == n:
                    break
            consumer.commit()
            return got
        finally:
            consumer.close()

    assert consume(5) == [b"v%d" % i for i in range(5)]
    # the committed offset (5) is where the group's next consumer starts
    assert consume(N - 5) == [b"v%d" % i for i in range(5, N)]


@pytest.mark.parametrize("fallback", ["0.9.0", "0.10.0"])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_librdkafka_without_api_versions_reads_each_codec(broker, fallback, codec):
    topic = _topic(broker, f"old-rdk-{codec}-{fallback}", codec)
    got = consume_confluent(broker.bootstrap, topic, {0: N}, api_version_request=False,
                            broker_version_fallback=fallback)
    assert [(g.offset, g.key, g.value) for g in got] == [(i, b"k%d" % i, b"v%d" % i) for i in range(N)]
    if fallback == "0.10.0":
        assert [g.timestamp_ms for g in got] == [BASE_TS + i for i in range(N)]



# -- commits of clients pinned to the oldest versions (Kafka 3.9 in ZooKeeper
# mode stores OffsetCommit v0 in ZooKeeper, v1+ in __consumer_offsets) ---------------------

def _kafka_python_assigned(broker, topic, group, api_version):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, api_version=api_version,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    return consumer, TopicPartition(topic, 0)


def _kafka_python_read_and_commit(broker, topic, group, api_version, n):
    """Assign partition 0 (no group membership below 0.9), read ``n`` records from
    the group's committed offset (or the start), commit, return the values."""
    consumer, tp = _kafka_python_assigned(broker, topic, group, api_version)
    try:
        got = []
        for _ in range(100):  # bounded: 100 polls of at most 0.2 s
            for records in consumer.poll(200, max_records=n - len(got)).values():
                got += [r.value for r in records]
            if len(got) >= n:
                break
        consumer.commit()
        return got
    finally:
        consumer.close()


def _kafka_python_committed(broker, topic, group, api_version):
    consumer, tp = _kafka_python_assigned(broker, topic, group, api_version)
    try:
        return consumer.committed(tp)
    finally:
        consumer.close()


def _confluent_committed(broker, topic, group, **conf):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **conf})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=15)
        return tp.offset
    finally:
        consumer.close()


def _confluent_commit(broker, topic, group, offset, **conf):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **conf})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: no committed offset


def test_kafka_python_0_8_1_commits_v0_apart_from_the_coordinators_offsets(broker):
    """kafka-python pinned to (0, 8, 1) commits and fetches with v0 on any broker
    (no FindCoordinator): its offsets are ZooKeeper's in Kafka 3.9, so the next
    (0, 8, 1) consumer resumes from them while a v1+ client sees none, and a
    v1+ commit is invisible to it."""
    topic, group = "old-commit-v0", "old-commit-v0"
    _topic(broker, topic, "none")
    assert _kafka_python_read_and_commit(broker, topic, group, (0, 8, 1), 5) == [b"v%d" % i for i in range(5)]
    assert _kafka_python_read_and_commit(broker, topic, group, (0, 8, 1), 3) == [b"v%d" % i for i in range(5, 8)]
    assert _kafka_python_committed(broker, topic, group, (0, 8, 1)) == 8
    assert _confluent_committed(broker, topic, group) == NO_OFFSET
    assert _kafka_python_committed(broker, topic, group, (0, 10, 1)) is None
    # and the other way: a v1+ commit leaves v0's offset as it was
    _confluent_commit(broker, topic, group, 15)
    assert _confluent_committed(broker, topic, group) == 15
    assert _kafka_python_committed(broker, topic, group, (0, 8, 1)) == 8
    assert _kafka_python_read_and_commit(broker, topic, group, (0, 8, 1), 2) == [b"v8", b"v9"]


def test_kafka_python_0_8_2_commits_v1_to_the_coordinator(broker):
    """(0, 8, 2) finds the coordinator and commits with v1: Kafka-stored offsets,
    which every v1+ client reads and a v0 fetch does not."""
    topic, group = "old-commit-v1", "old-commit-v1"
    _topic(broker, topic, "none")
    assert _kafka_python_read_and_commit(broker, topic, group, (0, 8, 2), 4) == [b"v%d" % i for i in range(4)]
    assert _kafka_python_committed(broker, topic, group, (0, 8, 2)) == 4
    assert _confluent_committed(broker, topic, group) == 4
    assert _kafka_python_committed(broker, topic, group, (0, 8, 1)) is None


def test_librdkafka_without_api_versions_commits_to_the_coordinator(broker):
    """librdkafka with api.version.request=false and broker.version.fallback
    0.8.2 finds the coordinator and commits with v1 (its feature table): a
    Kafka-stored offset, not v0's. (With 0.8.1, which has no coordinator,
    librdkafka never commits: it waits for one, _WAIT_COORD; it has no v0 path.)"""
    topic, group = "old-rdk-commit", "old-rdk-commit"
    _topic(broker, topic, "none")
    old = {"api.version.request": False, "broker.version.fallback": "0.8.2"}
    _confluent_commit(broker, topic, group, 6, **old)
    assert _confluent_committed(broker, topic, group, **old) == 6
    assert _confluent_committed(broker, topic, group) == 6
    assert _kafka_python_committed(broker, topic, group, (0, 8, 1)) is None
