"""Real clients (confluent-kafka, kcat, kafka-python 3, aiokafka) against a real
kafkapy broker: produce keyed records with headers in every codec, consume them
back by assignment and compare everything; interop between clients; record
size limits; idempotent producers.

One broker serves the module (each test uses its own topics): a broker start
costs about a second, 20+ fresh brokers would dominate the run time.
"""

from __future__ import annotations

import pytest

from support.clients import (
    CODEC_IDS,
    CODECS,
    assert_delivered,
    batch_codecs,
    check_consumed,
    consume_aiokafka,
    consume_confluent,
    consume_kafka_python,
    consume_kcat,
    counts,
    create_topic,
    make_records,
    module_broker,
    now_ms,
    produce_aiokafka,
    produce_confluent,
    produce_kafka_python,
    produce_kcat,
)

pytestmark = pytest.mark.timeout(120)

# 300 records over 3 partitions: enough for several batches per partition with
# linger.ms=20, small enough that 20 client x codec cases stay within seconds.
N_RECORDS = 300
PARTITIONS = 3


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    with module_broker(tmp_path_factory) as broker:
        yield broker


def _assert_codec_on_disk(broker, topic, codec):
    """Every partition holds batches in ``codec``, and nothing else but plain
    batches: librdkafka and kafka-python both send a batch uncompressed when
    compressing it did not make it smaller (a short batch of random bytes), so
    a plain batch beside compressed ones is the client's choice, while a
    partition with no batch in ``codec`` means the codec was dropped."""
    want = CODEC_IDS[codec]
    for p in range(PARTITIONS):
        codecs = batch_codecs(broker, topic, p)
        assert codecs, f"{topic}-{p} has no batches on disk"
        assert want in codecs and set(codecs) <= {want, 0}, \
            f"{topic}-{p}: batch codecs {codecs}, want {codec}"


# -- 1. each client round trip, every codec ---------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_confluent_round_trip(kbroker, codec):
    topic = f"confluent-{codec}"
    create_topic(kbroker.bootstrap, topic, PARTITIONS)
    records = make_records(N_RECORDS, PARTITIONS, seed=1)
    reports = produce_confluent(kbroker.bootstrap, topic, records, compression_type=codec)
    assert_delivered(reports)
    got = consume_confluent(kbroker.bootstrap, topic, counts(records))
    check_consumed(records, got)
    _assert_codec_on_disk(kbroker, topic, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_round_trip(kbroker, codec):
    topic = f"kafka-python-{codec}"
    create_topic(kbroker.bootstrap, topic, PARTITIONS)
    # kafka-python's producer refuses null header values (client-side check).
    records = make_records(N_RECORDS, PARTITIONS, seed=2, null_header_values=False)
    metadata = produce_kafka_python(kbroker.bootstrap, topic, records,
                                    compression_type=None if codec == "none" else codec)
    # Defaults are acks=all with idempotence: the round trip runs the
    # InitProducerId + sequence path.
    per_partition: dict[int, list[int]] = {}
    for md in metadata:
        per_partition.setdefault(md.partition, []).append(md.offset)
    assert all(offs == list(range(len(offs))) for offs in per_partition.values()), per_partition
    got = consume_kafka_python(kbroker.bootstrap, topic, counts(records))
    check_consumed(records, got)
    _assert_codec_on_disk(kbroker, topic, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_round_trip(kbroker, codec):
    topic = f"aiokafka-{codec}"
    create_topic(kbroker.bootstrap, topic, PARTITIONS)
    records = make_records(N_RECORDS, PARTITIONS, seed=3)
    metadata = produce_aiokafka(kbroker.bootstrap, topic, records,
                                compression_type=None if codec == "none" else codec)
    assert sorted((m.partition, m.offset) for m in metadata) == \
        sorted((p, o) for p, n in counts(records).items() for o in range(n))
    got = consume_aiokafka(kbroker.bootstrap, topic, counts(records))
    check_consumed(records, got)
    _assert_codec_on_disk(kbroker, topic, codec)


KCAT_HEADERS = (("source", "kcat"), ("dup", "a"), ("dup", "b"), ("empty", ""))


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_round_trip(kbroker, codec):
    topic = f"kcat-{codec}"
    create_topic(kbroker.bootstrap, topic, PARTITIONS)
    header_tuple = tuple((k, v.encode()) for k, v in KCAT_HEADERS)
    records = [r.__class__(r.partition, r.key, r.value, header_tuple, None)
               for r in make_records(N_RECORDS, PARTITIONS, seed=4, text=True)]
    before = now_ms()
    produce_kcat(kbroker.bootstrap, topic, records, codec=codec, headers=KCAT_HEADERS)
    after = now_ms()
    got = consume_kcat(kbroker.bootstrap, topic, counts(records))
    # kcat cannot set a timestamp: CreateTime is the producer's clock at send.
    check_consumed(records, got, timestamp_range_ms=(before, after))
    _assert_codec_on_disk(kbroker, topic, codec)


# -- 2. interop --------------------------------------------------------------------------

def test_interop_confluent_to_others(kbroker):
    topic = "interop-from-confluent"
    create_topic(kbroker.bootstrap, topic, PARTITIONS)
    records = make_records(200, PARTITIONS, seed=5)
    assert_delivered(produce_confluent(kbroker.bootstrap, topic, records, compression_type="lz4"))
    check_consumed(records, consume_kafka_python(kbroker.bootstrap, topic, counts(records)))
    check_consumed(records, consume_aiokafka(kbroker.bootstrap, topic, counts(records)))

    text_topic = "interop-from-confluent-text"
    create_topic(kbroker.bootstrap, text_topic, PARTITIONS)
    text = make_records(200, PARTITIONS, seed=6, text=True)
    assert_delivered(produce_confluent(kbroker.bootstrap, text_topic, text, compression_type="zstd"))
    check_consumed(text, consume_kcat(kbroker.bootstrap, text_topic, counts(text)))


def test_interop_others_to_confluent(kbroker):
    bs = kbroker.bootstrap
    records = make_records(200, PARTITIONS, seed=7, null_header_values=False)

    create_topic(bs, "interop-from-kafka-python", PARTITIONS)
    produce_kafka_python(bs, "interop-from-kafka-python", records, compression_type="gzip")
    check_consumed(records, consume_confluent(bs, "interop-from-kafka-python", counts(records)))
    check_consumed(records, consume_aiokafka(bs, "interop-from-kafka-python", counts(records)))

    create_topic(bs, "interop-from-aiokafka", PARTITIONS)
    produce_aiokafka(bs, "interop-from-aiokafka", records, compression_type="snappy")
    check_consumed(records, consume_confluent(bs, "interop-from-aiokafka", counts(records)))
    check_consumed(records, consume_kafka_python(bs, "interop-from-aiokafka", counts(records)))

    create_topic(bs, "interop-from-kcat", PARTITIONS)
    header_tuple = tuple((k, v.encode()) for k, v in KCAT_HEADERS)
    text = [r.__class__(r.partition, r.key, r.value, header_tuple, None)
            for r in make_records(200, PARTITIONS, seed=8, text=True)]
    produce_kcat(bs, "interop-from-kcat", text, codec="snappy", headers=KCAT_HEADERS)
    check_consumed(text, consume_confluent(bs, "interop-from-kcat", counts(text)))
    check_consumed(text, consume_kafka_python(bs, "interop-from-kcat", counts(text)))


# -- 6. max.message.bytes ---------------------------------------------------------------------

def test_topic_max_message_bytes_rejects_large_batch(kbroker):
    from confluent_kafka import KafkaError

    topic = "max-message-bytes"
    create_topic(kbroker.bootstrap, topic, 1, {"max.message.bytes": "10000"})
    from support.clients import Rec

    # message.max.bytes on the producer far above the topic's limit, so the
    # client sends the batch and the broker must be the one to refuse it.
    reports = produce_confluent(kbroker.bootstrap, topic, [Rec(0, b"big", b"x" * 50_000)],
                                message_max_bytes=2_000_000, retries=0)
    err = reports[0][0]
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, f"delivery report: {err}"
    small = [Rec(0, b"small", b"y" * 5_000)]
    assert_delivered(produce_confluent(kbroker.bootstrap, topic, small))
    # The rejected batch left no trace: the accepted record is at offset 0.
    check_consumed(small, consume_confluent(kbroker.bootstrap, topic, {0: 1}))


def test_broker_message_max_bytes_default_applies(kbroker):
    from confluent_kafka import KafkaError

    from support.clients import Rec

    topic = "broker-message-max-bytes"
    create_topic(kbroker.bootstrap, topic, 1)
    # Broker default message.max.bytes is 1048588: a 1.5 MB uncompressed batch is over it.
    reports = produce_confluent(kbroker.bootstrap, topic, [Rec(0, None, b"z" * 1_500_000)],
                                message_max_bytes=4_000_000, retries=0)
    err = reports[0][0]
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, f"delivery report: {err}"


def test_kafka_python_message_too_large_from_broker(kbroker):
    from kafka.errors import MessageSizeTooLargeError

    topic = "max-message-bytes-kp"
    create_topic(kbroker.bootstrap, topic, 1, {"max.message.bytes": "10000"})
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kbroker.bootstrap, retries=0)
    try:
        future = producer.send(topic, value=b"x" * 50_000, partition=0)
        producer.flush(30)
        with pytest.raises(MessageSizeTooLargeError):
            future.get(30)
    finally:
        producer.close(timeout=30)


# -- 7. idempotence ---------------------------------------------------------------------------

def _unique_contiguous(got, n):
    offsets = sorted(g.offset for g in got)
    values = [g.value for g in got]
    assert offsets == list(range(n)), f"offsets not 0..{n - 1}: first {offsets[:5]}, count {len(offsets)}"
    assert len(set(values)) == n, f"{n - len(set(values))} duplicate values"


def test_idempotent_kafka_python_1000(kbroker):
    from support.clients import Rec

    topic = "idempotent-kafka-python"
    create_topic(kbroker.bootstrap, topic, 1)
    records = [Rec(0, None, f"value-{i}".encode()) for i in range(1000)]
    metadata = produce_kafka_python(kbroker.bootstrap, topic, records, enable_idempotence=True,
                                    acks="all", batch_size=2048)
    assert [m.offset for m in metadata] == list(range(1000))
    got = consume_confluent(kbroker.bootstrap, topic, {0: 1000})
    _unique_contiguous(got, 1000)
    assert [g.value for g in got] == [r.value for r in records]


def test_idempotent_confluent_1000(kbroker):
    from support.clients import Rec

    topic = "idempotent-confluent"
    create_topic(kbroker.bootstrap, topic, 1)
    records = [Rec(0, None, f"value-{i}".encode()) for i in range(1000)]
    reports = produce_confluent(kbroker.bootstrap, topic, records, enable_idempotence=True,
                                batch_num_messages=50, linger_ms=1)
    assert_delivered(reports)
    assert [r[2] for r in reports] == list(range(1000))
    got = consume_kafka_python(kbroker.bootstrap, topic, {0: 1000})
    _unique_contiguous(got, 1000)
    assert [g.value for g in got] == [r.value for r in records]
