"""Apache's own Java client (kafka-clients 3.9, unmodified) against kafkapy.

The reference client negotiates the newest versions kafkapy advertises, so
these tests are the closest thing to "a Kafka user's application, unchanged".
Its producer runs with its defaults (enable.idempotence=true, acks=all); its
consumer in a group. Each call is one JVM (tests/support/java_client.py).
"""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from support.java_client import expected_value, kafka_clients_version

PARTITIONS = 3
BROKER_ID = 0  # tests/support/broker.py's server.properties


def _create(java, bootstrap, topic, partitions=PARTITIONS):
    result = java.admin(bootstrap, "create-topic", topic, str(partitions))
    assert result.returncode == 0, result.describe()


def _assert_in_order_exactly_once(acks, records):
    """Every acknowledged (partition, offset) consumed once, in per-partition order."""
    consumed = [(r.partition, r.offset) for r in records]
    assert len(consumed) == len(set(consumed)), "a record was consumed twice"
    assert {(a.partition, a.offset) for a in acks} <= set(consumed)
    for p in {r.partition for r in records}:
        offsets = [r.offset for r in records if r.partition == p]
        assert offsets == sorted(offsets), f"partition {p} out of order"


def test_the_jar_is_kafka_clients_3_9():
    assert kafka_clients_version().startswith("3.9.")


def test_java_producer_defaults_and_group_consumer(broker, java_client):
    bootstrap = broker.bootstrap
    _create(java_client, bootstrap, "java-defaults")
    produced = java_client.produce(bootstrap, "java-defaults", 500, value_size=64)
    assert produced.returncode == 0 and not produced.errors, produced.describe()
    assert len(produced.acks) == 500
    assert {a.partition for a in produced.acks} == set(range(PARTITIONS))
    consumed = java_client.consume(bootstrap, "java-defaults", "java-group", 500, timeout_ms=30000)
    assert consumed.returncode == 0, consumed.describe()
    assert len(consumed.records) == 500, consumed.describe()
    _assert_in_order_exactly_once(produced.acks, consumed.records)
    by_key = {r.key: r.value for r in consumed.records}
    assert by_key[b"key-7"] == expected_value(7, 64)
    # The group committed: a second consumer of the group has nothing left.
    again = java_client.consume(bootstrap, "java-defaults", "java-group", 1, timeout_ms=3000)
    assert again.records == [], again.describe()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_java_compression_codecs(broker, java_client, codec):
    topic = f"java-{codec}"
    _create(java_client, broker.bootstrap, topic, 1)
    produced = java_client.produce(broker.bootstrap, topic, 200, compression=codec, value_size=200)
    assert produced.returncode == 0 and len(produced.acks) == 200, produced.describe()
    consumed = java_client.consume(broker.bootstrap, topic, f"g-{codec}", 200, timeout_ms=20000)
    assert len(consumed.records) == 200, consumed.describe()
    assert [r.offset for r in consumed.records] == list(range(200))


def test_interop_with_confluent_kafka_both_ways(broker, java_client):
    bootstrap = broker.bootstrap
    _create(java_client, bootstrap, "java-interop", 1)
    # Java -> confluent-kafka
    produced = java_client.produce(bootstrap, "java-interop", 100, key_prefix="j")
    assert len(produced.acks) == 100, produced.describe()
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-reader",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["java-interop"])
    got = []
    try:
        for _ in range(300):  # bounded: at most 300 polls of 0.1 s
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.key()))
            if len(got) == 100:
                break
    finally:
        consumer.close()
    assert got == [(i, b"j-%d" % i) for i in range(100)]
    # confluent-kafka -> Java
    producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(50):
        producer.produce("java-interop", key=b"c-%d" % i, value=b"from-librdkafka-%d" % i)
    assert producer.flush(30) == 0
    consumed = java_client.consume(bootstrap, "java-interop", "java-reader", 150, timeout_ms=20000)
    assert len(consumed.records) == 150, consumed.describe()
    assert [r.value for r in consumed.records[100:]] == [b"from-librdkafka-%d" % i for i in range(50)]


def test_java_admin_describes_topics(broker, java_client):
    """Kafka 3.9's AdminClient.describeTopics uses DescribeTopicPartitions (KIP-966)
    when the broker advertises it (a KRaft broker), else Metadata: kafkapy, as a
    ZooKeeper-mode Kafka 3.9 broker, leaves it out of ApiVersions (the raw
    sweep sends it anyway)."""
    _create(java_client, broker.bootstrap, "java-described", 5)
    result = java_client.admin(broker.bootstrap, "describe-topic", "java-described")
    assert result.returncode == 0, result.describe()
    rows = [line for line in result.lines if line[0] == "PARTITION"]
    assert [(r[1], int(r[2]), int(r[3]), r[4], r[5]) for r in rows] == \
        [("java-described", p, BROKER_ID, str(BROKER_ID), str(BROKER_ID)) for p in range(5)]
