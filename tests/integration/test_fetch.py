"""Fetch and ListOffsets semantics through real clients (and a raw Fetch v4
where only the wire shows the behaviour) against a real kafkapy broker:
watermarks, offsets by timestamp, max timestamp, fetching from the middle of
a batch, long polling, KIP-74 oversized records, LogAppendTime topics.
"""

from __future__ import annotations

import struct
import threading
import time

import pytest

from support.clients import (
    LOG_APPEND_TIME,
    Rec,
    admin,
    assert_delivered,
    check_consumed,
    confluent_consumer,
    consume_aiokafka,
    consume_confluent,
    consume_kafka_python,
    create_topic,
    module_broker,
    now_ms,
    produce_confluent,
    produce_kafka_python,
)
from support.rawclient import RawClient

pytestmark = pytest.mark.timeout(120)

TIMEOUT_S = 30
FETCH = 1


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    with module_broker(tmp_path_factory) as broker:
        yield broker


def _batches(bootstrap, topic, batches, codec="none", partition=0):
    """Produce each list of (value, timestamp_ms) as its own batch (flush
    between them, linger long enough that one list is one batch)."""
    for batch in batches:
        recs = [Rec(partition, f"k{i}".encode(), value, (), ts) for i, (value, ts) in enumerate(batch)]
        assert_delivered(produce_confluent(bootstrap, topic, recs, compression_type=codec, linger_ms=50))


# -- 4. ListOffsets ------------------------------------------------------------------------

def test_watermarks_earliest_latest(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "lo-watermarks", 2)
    _batches(bs, "lo-watermarks", [[(b"v", now_ms())] * 7, [(b"w", now_ms())] * 5])
    consumer = confluent_consumer(bs)
    try:
        from confluent_kafka import TopicPartition

        assert consumer.get_watermark_offsets(TopicPartition("lo-watermarks", 0), timeout=TIMEOUT_S) == (0, 12)
        assert consumer.get_watermark_offsets(TopicPartition("lo-watermarks", 1), timeout=TIMEOUT_S) == (0, 0)
    finally:
        consumer.close()
    from kafka import KafkaConsumer, TopicPartition as KTP

    kc = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    try:
        tps = [KTP("lo-watermarks", 0), KTP("lo-watermarks", 1)]
        assert kc.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert kc.end_offsets(tps) == {tps[0]: 12, tps[1]: 0}
    finally:
        kc.close()


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_offsets_for_times_record_level(kbroker, codec):
    """Kafka answers the first *record* whose timestamp is >= the target, with
    that record's timestamp, looking inside (compressed) batches."""
    bs = kbroker.bootstrap
    topic = f"lo-times-{codec}"
    create_topic(bs, topic, 1)
    base = now_ms() - 600_000
    # Batch 1: offsets 0-9 at base+0..90; batch 2: offsets 10-19 at base+1000..1090.
    _batches(bs, topic, [[(b"a" * 100, base + 10 * i) for i in range(10)],
                         [(b"b" * 100, base + 1000 + 10 * i) for i in range(10)]], codec=codec)
    cases = {  # target -> (offset, timestamp); -1: no such record
        base - 5: (0, base),
        base: (0, base),
        base + 45: (5, base + 50),
        base + 90: (9, base + 90),
        base + 95: (10, base + 1000),
        base + 1055: (16, base + 1060),
        base + 1090: (19, base + 1090),
        base + 1091: (-1, -1),
    }
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    client = admin(bs)
    for target, (offset, timestamp) in cases.items():
        result = client.list_offsets({TopicPartition(topic, 0): OffsetSpec.for_timestamp(target)},
                                     request_timeout=TIMEOUT_S)
        info = result[TopicPartition(topic, 0)].result(TIMEOUT_S)
        assert (info.offset, info.timestamp) == (offset, timestamp), f"target base+{target - base}"

    consumer = confluent_consumer(bs)
    try:
        got = consumer.offsets_for_times([TopicPartition(topic, 0, base + 45)], timeout=TIMEOUT_S)
        assert got[0].offset == 5 and got[0].error is None
    finally:
        consumer.close()

    from kafka import KafkaConsumer, TopicPartition as KTP

    kc = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    try:
        tp = KTP(topic, 0)
        found = kc.offsets_for_times({tp: base + 1055})[tp]
        assert (found.offset, found.timestamp) == (16, base + 1060)
        assert kc.offsets_for_times({tp: base + 1091})[tp] is None
    finally:
        kc.close()


def test_list_offsets_max_timestamp_out_of_order(kbroker):
    """KIP-734 MAX_TIMESTAMP: the offset of the record with the largest
    timestamp (Kafka >= 3.7.1 / KAFKA-16310), not the batch's last offset."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    bs = kbroker.bootstrap
    topic = "lo-maxts"
    create_topic(bs, topic, 2)
    base = now_ms() - 600_000
    _batches(bs, topic, [[(b"x", base + 1000), (b"x", base + 5000), (b"x", base + 2000), (b"x", base + 3000)],
                         [(b"y", base + 4000), (b"y", base + 4500)]])
    client = admin(bs)
    result = client.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp(),
                                  TopicPartition(topic, 1): OffsetSpec.max_timestamp()},
                                 request_timeout=TIMEOUT_S)
    p0 = result[TopicPartition(topic, 0)].result(TIMEOUT_S)
    assert (p0.offset, p0.timestamp) == (1, base + 5000)
    # Empty partition: no record, offset -1.
    p1 = result[TopicPartition(topic, 1)].result(TIMEOUT_S)
    assert p1.offset == -1
    # Earliest / latest through the same API.
    result = client.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()}, request_timeout=TIMEOUT_S)
    assert result[TopicPartition(topic, 0)].result(TIMEOUT_S).offset == 0
    result = client.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()}, request_timeout=TIMEOUT_S)
    assert result[TopicPartition(topic, 0)].result(TIMEOUT_S).offset == 6


# -- 5. Fetch semantics ------------------------------------------------------------------------

@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_consume_from_middle_of_batch(kbroker, codec):
    bs = kbroker.bootstrap
    topic = f"fetch-mid-{codec}"
    create_topic(bs, topic, 1)
    values = [f"value-{i}".encode() for i in range(20)]
    ts = now_ms()
    _batches(bs, topic, [[(v, ts) for v in values[:10]], [(v, ts) for v in values[10:]]], codec=codec)
    for start in (5, 13):  # inside the first batch, inside the second
        want = {0: 20 - start}
        for consume in (consume_confluent, consume_kafka_python, consume_aiokafka):
            got = consume(bs, topic, want, start_offset=start)
            assert [g.offset for g in got] == list(range(start, 20)), f"{consume.__name__} from {start}"
            assert [g.value for g in got] == values[start:], f"{consume.__name__} from {start}"


def test_long_poll_wakes_on_produce(kbroker):
    """A consumer parked in a fetch (fetch.wait.max.ms=5000) on an empty
    partition gets a record produced 1 s later within 1.5 s of the produce."""
    from confluent_kafka import TopicPartition

    bs = kbroker.bootstrap
    topic = "fetch-longpoll"
    create_topic(bs, topic, 1)
    consumer = confluent_consumer(bs, fetch_wait_max_ms=5000)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        assert consumer.poll(0.5) is None  # connected, first fetch parked
        produced_at = []

        def produce_later():
            time.sleep(1.0)
            produced_at.append(time.monotonic())
            assert_delivered(produce_confluent(bs, topic, [Rec(0, b"k", b"wake up")], linger_ms=0))

        thread = threading.Thread(target=produce_later, daemon=True)
        thread.start()
        msg = None
        deadline = time.monotonic() + 10
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.05)
        delivered_at = time.monotonic()
        thread.join(10)
        assert msg is not None and msg.error() is None and msg.value() == b"wake up"
        latency = delivered_at - produced_at[0]
        # Waiting out the 5 s max wait would give ~4 s; a woken fetch ~ms.
        assert latency < 1.5, f"record delivered {latency:.2f} s after produce"
    finally:
        consumer.close()


def _fetch_v4(topic, partition, fetch_offset, max_wait_ms, min_bytes, partition_max_bytes=1 << 20,
              max_bytes=50 << 20) -> bytes:
    t = topic.encode()
    return (struct.pack(">iiiib", -1, max_wait_ms, min_bytes, max_bytes, 0)
            + struct.pack(">i", 1) + struct.pack(">h", len(t)) + t
            + struct.pack(">i", 1) + struct.pack(">iqi", partition, fetch_offset, partition_max_bytes))


def _parse_fetch_v4(body: bytes):
    """-> [(partition, error_code, high_watermark, records bytes)] of the single topic."""
    pos = 4  # throttle_time_ms
    (n_topics,) = struct.unpack_from(">i", body, pos)
    pos += 4
    out = []
    for _ in range(n_topics):
        (name_len,) = struct.unpack_from(">h", body, pos)
        pos += 2 + name_len
        (n_parts,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(n_parts):
            partition, error_code, high_watermark, _lso = struct.unpack_from(">ihqq", body, pos)
            pos += 22
            (n_aborted,) = struct.unpack_from(">i", body, pos)
            pos += 4 + max(0, n_aborted) * 16
            (size,) = struct.unpack_from(">i", body, pos)
            pos += 4
            records = body[pos:pos + max(0, size)]
            pos += max(0, size)
            out.append((partition, error_code, high_watermark, records))
    return out


def _batch_offsets(records: bytes):
    """(base_offset, last_offset) of each complete batch in a records blob."""
    out = []
    pos = 0
    while pos + 61 <= len(records):
        base_offset, batch_length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + batch_length > len(records):
            break
        (last_offset_delta,) = struct.unpack_from(">i", records, pos + 23)
        out.append((base_offset, base_offset + last_offset_delta))
        pos += 12 + batch_length
    return out


def _timed_fetch(bootstrap, body, timeout_s=10.0):
    with RawClient.connect(bootstrap, timeout_s=timeout_s) as raw:
        start = time.monotonic()
        response = raw.request(FETCH, 4, body, timeout_s=timeout_s)
        return time.monotonic() - start, _parse_fetch_v4(response)


def test_idle_fetch_waits_max_wait(kbroker):
    """fetch.min.bytes not reachable: the broker answers after max_wait_ms —
    not at once, and not never — with what it has."""
    bs = kbroker.bootstrap
    create_topic(bs, "fetch-idle", 1)
    elapsed, parts = _timed_fetch(bs, _fetch_v4("fetch-idle", 0, 0, max_wait_ms=1500, min_bytes=1 << 20))
    assert 1.3 <= elapsed <= 3.0, f"empty fetch answered after {elapsed:.2f} s, max wait 1.5 s"
    assert parts == [(0, 0, 0, b"")]

    # Data present but below min_bytes: still waits, then returns the data.
    assert_delivered(produce_confluent(bs, "fetch-idle", [Rec(0, b"k", b"small")]))
    elapsed, parts = _timed_fetch(bs, _fetch_v4("fetch-idle", 0, 0, max_wait_ms=1000, min_bytes=1 << 20))
    assert 0.8 <= elapsed <= 2.5, f"fetch below min_bytes answered after {elapsed:.2f} s, max wait 1 s"
    assert parts[0][:3] == (0, 0, 1) and _batch_offsets(parts[0][3]) == [(0, 0)]

    # min_bytes satisfied: at once.
    elapsed, parts = _timed_fetch(bs, _fetch_v4("fetch-idle", 0, 0, max_wait_ms=5000, min_bytes=1))
    assert elapsed < 1.0, f"satisfiable fetch took {elapsed:.2f} s"
    assert _batch_offsets(parts[0][3]) == [(0, 0)]


def test_fetch_unknown_partition_answers_at_once(kbroker):
    elapsed, parts = _timed_fetch(kbroker.bootstrap,
                                  _fetch_v4("fetch-no-such-topic", 0, 0, max_wait_ms=5000, min_bytes=1 << 20))
    assert elapsed < 2.0
    assert parts[0][1] == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_oversized_record_still_delivered_kip74(kbroker):
    """A batch larger than max.partition.fetch.bytes (and fetch.max.bytes) is
    returned whole as the first batch, so consumers make progress (KIP-74)."""
    bs = kbroker.bootstrap
    topic = "fetch-kip74"
    create_topic(bs, topic, 1)
    big = bytes(range(256)) * 800  # 204800 bytes, 20x the consumers' limits
    recs = [Rec(0, b"big", big, (("h", b"1"),), now_ms()), Rec(0, b"small", b"s", (), now_ms())]
    assert_delivered(produce_confluent(bs, topic, recs, linger_ms=0))
    # (librdkafka wants fetch.max.bytes >= message.max.bytes, so lower both.)
    check_consumed(recs, consume_confluent(bs, topic, {0: 2}, max_partition_fetch_bytes=10_000,
                                           fetch_max_bytes=10_000, message_max_bytes=10_000))
    check_consumed(recs, consume_kafka_python(bs, topic, {0: 2}, max_partition_fetch_bytes=10_000,
                                              fetch_max_bytes=10_000))
    check_consumed(recs, consume_aiokafka(bs, topic, {0: 2}, max_partition_fetch_bytes=10_000))
    # On the wire: a 100-byte partition limit still returns the first whole batch.
    _elapsed, parts = _timed_fetch(bs, _fetch_v4(topic, 0, 0, max_wait_ms=0, min_bytes=1,
                                                 partition_max_bytes=100, max_bytes=100))
    batches = _batch_offsets(parts[0][3])
    assert batches and batches[0][0] == 0, f"first batch not returned whole: {batches}"


def test_log_append_time_topic(kbroker):
    bs = kbroker.bootstrap
    topic = "fetch-logappend"
    create_topic(bs, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    old = now_ms() - 3_600_000
    recs = [Rec(0, f"k{i}".encode(), f"v{i}".encode(), (), old + i) for i in range(10)]
    before = now_ms()
    # One batch for certain: librdkafka sends it when the tenth record fills it
    # (or at flush), never at a 50 ms linger a loaded machine can outlast.
    assert_delivered(produce_confluent(bs, topic, recs, linger_ms=10_000, batch_num_messages=len(recs)))
    metadata = produce_kafka_python(bs, topic, [Rec(0, b"kp", b"v", (), old)])
    after = now_ms()
    # The produce response carries log_append_time; kafka-python reports it.
    assert before <= metadata[0].timestamp <= after, metadata[0]
    want = recs + [Rec(0, b"kp", b"v", (), None)]
    for consume in (consume_confluent, consume_kafka_python, consume_aiokafka):
        got = consume(bs, topic, {0: 11})
        check_consumed(want, got, check_timestamps=False, timestamp_range_ms=(before, after),
                       timestamp_type=LOG_APPEND_TIME)
        # One batch, one append time: every record of the first batch shares it.
        assert len({g.timestamp_ms for g in got[:10]}) == 1, consume.__name__
