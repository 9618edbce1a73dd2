"""cleanup.policy=compact on a user topic: the supervisor's cleaner keeps the
last record per key in rolled segments and drops expired tombstones."""

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


@pytest.mark.broker_config({"log.cleaner.backoff.ms": "300"})
def test_compacted_topic_keeps_last_value_per_key(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": "2048",
               "delete.retention.ms": "0"}
    admin.create_topics([NewTopic("compacted", 1, 1, config=configs)])["compacted"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    expected = {}
    for round_ in range(6):
        for k in range(10):
            key = f"k{k}".encode()
            value = None if (k == 3 and round_ == 5) else f"v{round_}-{k}".encode() * 4
            producer.produce("compacted", key=key, value=value)
            expected[key] = value
            producer.flush(10)
    producer.flush(10)
    written = 60

    def read_all():
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                      "enable.auto.commit": False, "enable.partition.eof": True})
        c.assign([TopicPartition("compacted", 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                break  # partition EOF
            got.append((m.offset(), m.key(), m.value()))
        c.close()
        return got

    deadline = time.monotonic() + 30
    records = read_all()
    while len(records) >= written and time.monotonic() < deadline:
        time.sleep(0.5)
        records = read_all()
    assert len(records) < written, "nothing was compacted"
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    last = {}
    for _, key, value in records:
        last[key] = value
    # Every key's latest value survives (the active segment is never cleaned,
    # so the tail may still hold superseded records: compare last values).
    for key, value in expected.items():
        if value is None:
            assert last.get(key) is None
        else:
            assert last[key] == value
