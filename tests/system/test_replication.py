"""Replicated partitions on three real brokers and a real ZooKeeper (issue 15).

Kafka's system-test shape: produce in the background with an idempotent
acks=all producer, inject a fault, consume everything, check that every
acknowledged record was consumed exactly once in per-partition order.
"""

from __future__ import annotations


import pytest
from confluent_kafka import KafkaError, Producer

from support.cluster import BackgroundProducer, consume_all, validate
from support.wait import wait_for


@pytest.fixture
def cluster(make_cluster):
    c, _ = make_cluster()
    return c


def test_replicated_topic_round_trip(cluster):
    parts = cluster.create_topic("r3", partitions=3, replication_factor=3)
    assert {leader for leader, _, _ in parts.values()} <= {1, 2, 3}
    assert all(set(replicas) == {1, 2, 3} and set(isr) == {1, 2, 3} for _, replicas, isr in parts.values())
    producer = BackgroundProducer(cluster.bootstrap, "r3", 3, rate_per_s=2000, max_messages=3000).start()
    wait_for(lambda: producer.sent >= 3000, 30, "3000 sent")
    producer.stop()
    assert producer.errors == [] and producer.acked_count() == 3000
    consumed = consume_all(cluster.bootstrap, "r3", 3)
    validate(producer.acked, consumed)
    assert sum(len(v) for v in consumed.values()) == 3000
    # Every replica holds the same records: each broker's log end offsets agree.
    ends = {}
    for broker_id, b in cluster.brokers.items():
        for p in range(3):
            d = b.log_dirs[0] / f"r3-{p}"
            assert d.is_dir(), f"broker {broker_id} has no replica of r3-{p}"
        ends[broker_id] = sorted(str(f.name) for f in b.log_dirs[0].glob("r3-*"))
    assert len({tuple(v) for v in ends.values()}) == 1


def test_leader_sigkill_under_load_loses_nothing(cluster):
    cluster.create_topic("fail", partitions=2, replication_factor=3)
    producer = BackgroundProducer(cluster.bootstrap, "fail", 2, rate_per_s=300).start()
    wait_for(lambda: producer.acked_count() >= 300, 30, "300 acknowledged before the fault")
    victim = cluster.leader_of("fail", 0)
    cluster.brokers[victim].kill()
    # A new leader from the ISR within seconds, with the victim out of the ISR.
    wait_for(lambda: cluster.leader_of("fail", 0) not in (-1, victim), 30, "a new leader for fail-0")
    acked_at_fault = producer.acked_count()
    wait_for(lambda: producer.acked_count() >= acked_at_fault + 300, 30, "progress after the leader's death")
    cluster.brokers[victim].start()
    cluster.wait_topic_ready("fail", 2, 3, timeout_s=60)  # the restarted broker rejoined every ISR
    producer.stop()
    assert producer.errors == []
    consumed = consume_all(cluster.bootstrap, "fail", 2)
    validate(producer.acked, consumed)


def test_min_insync_replicas_with_two_brokers_down(cluster):
    cluster.create_topic("minisr", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    leader = cluster.leader_of("minisr", 0)
    for broker_id in [i for i in cluster.brokers if i != leader]:
        cluster.brokers[broker_id].kill()
    # The ISR shrinks to the leader alone once the followers stop fetching.
    wait_for(lambda: cluster.partitions("minisr")[0][2] == (leader,), 30, "ISR = {leader}")
    results = []

    def record(err, msg):
        results.append(err)

    strict = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 5000,
                       "retries": 0})
    strict.produce("minisr", b"x", on_delivery=record)
    strict.flush(15)
    assert results and results[0] is not None and results[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    results.clear()
    relaxed = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1, "message.timeout.ms": 10000})
    relaxed.produce("minisr", b"y", on_delivery=record)
    relaxed.flush(15)
    assert results == [None]


def test_committed_offsets_survive_the_coordinators_broker(cluster):
    from confluent_kafka import Consumer, TopicPartition

    cluster.create_topic("grp-topic", partitions=2, replication_factor=3)
    group = "survivors"

    def consumer():
        return Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})

    first = consumer()
    first.assign([TopicPartition("grp-topic", 0, 0), TopicPartition("grp-topic", 1, 0)])
    first.commit(offsets=[TopicPartition("grp-topic", 0, 7), TopicPartition("grp-topic", 1, 11)],
                 asynchronous=False)
    first.close()
    admin = cluster.admin()  # kept while its futures are pending
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    coordinator = described.coordinator.id
    offsets_partition = {p for p, (leader, _, _) in cluster.partitions("__consumer_offsets").items()
                         if leader == coordinator}
    assert offsets_partition, "the coordinator leads the group's __consumer_offsets partition"
    cluster.brokers[coordinator].kill()
    # Another broker leads that partition now, loads it, and answers with the committed offsets.
    second = consumer()
    try:
        committed = wait_for(
            lambda: second.committed([TopicPartition("grp-topic", 0), TopicPartition("grp-topic", 1)],
                                     timeout=10),
            60, "committed offsets from the new coordinator")
        assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 7), (1, 11)]
    finally:
        second.close()
    admin = cluster.admin()
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert described.coordinator.id != coordinator
