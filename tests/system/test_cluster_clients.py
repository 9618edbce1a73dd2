"""Real clients against a three-broker cluster on a real ZooKeeper (issue 15).

Every topic is replicated three times over three partitions, so each client
finds the leaders through Metadata, talks to every broker, and reads what
other brokers' followers replicated: confluent-kafka, kafka-python, aiokafka
and Debian's kcat each produce records that another of them consumes and
checks field by field (tests/support/clients.py). A consumer
group whose coordinator is a broker leading none of its topic's partitions
commits and reads back its offsets.

One cluster serves the module (each test its own topics): three broker starts
and stops cost ~10 s, a cluster per case would dominate the run.
"""

from __future__ import annotations

import pytest

from support.cluster import running_cluster, create_topic_assigned, group_coordinated_outside

from support.clients import (
    check_consumed,
    consume_aiokafka,
    consume_confluent,
    consume_kafka_python,
    consume_kcat,
    counts,
    make_records,
    produce_aiokafka,
    produce_confluent,
    produce_kafka_python,
    produce_kcat,
)

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3
N_RECORDS = 300
# Fewer __consumer_offsets partitions than Kafka's 50: the topic is created
# (and elected, RF 3) on the first FindCoordinator, inside a test's time.
OFFSETS_PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    with running_cluster(zookeeper, tmp_path_factory.mktemp("cluster"), "/cluster-clients",
                         {"offsets.topic.num.partitions": OFFSETS_PARTITIONS}) as (c, _):
        yield c


def _kcat_records(seed):
    # kcat sets the same headers on every record of a run and cannot set timestamps.
    return [r.__class__(r.partition, r.key, r.value, (), None)
            for r in make_records(N_RECORDS, PARTITIONS, seed=seed, text=True)]


def _produce(client, bootstrap, topic, records):
    if client == "confluent":
        reports = produce_confluent(bootstrap, topic, records, acks="all", enable_idempotence=True)
        assert all(r is not None and r[0] is None for r in reports), [r for r in reports if r is None or r[0]][:3]
    elif client == "kafka-python":
        metadata = produce_kafka_python(bootstrap, topic, records, acks="all")
        assert len(metadata) == len(records)
    elif client == "aiokafka":
        metadata = produce_aiokafka(bootstrap, topic, records, acks="all")
        assert len(metadata) == len(records)
    else:
        produce_kcat(bootstrap, topic, records, headers=(), codec="none")


CONSUMERS = {"confluent": consume_confluent, "kafka-python": consume_kafka_python,
             "aiokafka": consume_aiokafka, "kcat": consume_kcat}


@pytest.mark.parametrize("producer,consumer", [("confluent", "kafka-python"), ("kafka-python", "aiokafka"),
                                               ("aiokafka", "kcat"), ("kcat", "confluent")])
def test_one_client_produces_another_consumes(cluster, producer, consumer):
    topic = f"clients-{producer}-{consumer}"
    parts = cluster.create_topic(topic, PARTITIONS, 3)
    assert {leader for leader, _, _ in parts.values()} == {1, 2, 3}  # every broker leads one
    text = "kcat" in (producer, consumer)
    records = (_kcat_records(seed=len(topic)) if producer == "kcat" else
               make_records(N_RECORDS, PARTITIONS, seed=len(topic), text=text, null_header_values=False))
    _produce(producer, cluster.bootstrap, topic, records)
    got = CONSUMERS[consumer](cluster.bootstrap, topic, counts(records))
    check_consumed(records, got, check_timestamps=producer != "kcat")
    # Whoever leads, acks=all put every record on every replica: the high
    # watermark of each partition is its record count on all three brokers.
    for b in cluster.brokers.values():
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "hw-probe"})
        try:
            highs = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
        finally:
            c.close()
        assert highs == counts(records)


def test_group_coordinator_on_a_broker_leading_none_of_the_partitions(cluster):
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

    # Every partition of the topic led by broker 1 (first replica of a manual
    # assignment), and a group whose __consumer_offsets partition another broker leads.
    topic = "coordinated"
    parts = create_topic_assigned(cluster, topic, [[1, 2, 3], [1, 3, 2], [1, 2, 3]])
    assert {leader for leader, _, _ in parts.values()} == {1}
    group, coordinator_expected = group_coordinated_outside(cluster, {1}, OFFSETS_PARTITIONS)
    admin = cluster.admin()  # held while its futures are pending
    records = make_records(N_RECORDS, 3, seed=11, null_header_values=False)
    _produce("confluent", cluster.bootstrap, topic, records)

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got = []
    try:
        consumer.subscribe([topic])
        for _ in range(200):  # bounded: 200 polls of at most 0.5 s
            for msg in consumer.consume(500, 0.5):
                assert msg.error() is None, msg.error()
                got.append((msg.partition(), msg.offset()))
            if len(got) >= N_RECORDS:
                break
        assert sorted(got) == sorted((p, o) for p, n in counts(records).items() for o in range(n))
        consumer.commit(asynchronous=False)
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert described.coordinator.id == coordinator_expected != 1
        assert len(described.members) == 1
        assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == {0, 1, 2}
    finally:
        consumer.close()
    # The commit went through the coordinator's broker to the replicated offsets topic.
    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    assert sorted((tp.partition, tp.offset) for tp in committed.topic_partitions if tp.topic == topic) == \
        sorted(counts(records).items())
    again = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        assert sorted((tp.partition, tp.offset) for tp in again.committed(
            [TopicPartition(topic, p) for p in range(3)], timeout=10)) == sorted(counts(records).items())
    finally:
        again.close()


def test_create_topics_answers_once_the_receiving_broker_knows_every_leader(cluster):
    """Kafka's DelayedCreatePartitions: with a timeout, CreateTopics answers
    once the broker that got it knows a leader for every partition, so its
    Metadata right after shows them all."""
    from kafkapy.client.conn import Connection

    for broker_id, b in cluster.brokers.items():
        name = f"created-on-{broker_id}"
        host, port = b.bootstrap.rsplit(":", 1)
        conn = Connection(broker_id, host, int(port), "create-topics-test", request_timeout_ms=30_000)
        conn.connect()
        try:
            created = conn.request(19, {"topics": [{"name": name, "num_partitions": 6, "replication_factor": 3,
                                                    "assignments": [], "configs": []}],
                                        "timeout": 20_000, "validate_only": False})
            assert [(t.name, t.error_code) for t in created.topics] == [(name, 0)]
            md = conn.request(3, {"topics": [{"name": name, "topic_id": None}], "allow_auto_topic_creation": False,
                                  "include_cluster_authorized_operations": False,
                                  "include_topic_authorized_operations": False})
        finally:
            conn.close()
        [topic] = md.topics
        leaders = sorted(p.leader_id for p in topic.partitions)
        assert len(leaders) == 6 and all(leader in cluster.brokers for leader in leaders), leaders


def test_offset_commit_v0_goes_to_zookeeper_through_any_broker(cluster):
    """Kafka 3.9 in ZooKeeper mode: OffsetCommit v0 writes
    /consumers/<group>/offsets/<topic>/<partition> (decimal text) through
    whichever broker it reaches, no coordinator involved; OffsetFetch v0 reads
    it there from any broker, and v1+ (the coordinator's __consumer_offsets)
    never sees it, nor v0 what v1+ committed."""
    from support.raw_api import call
    from kafkapy.protocol.errors import ErrorCode as E

    topic = "old-commits"
    cluster.create_topic(topic, 2, 3)
    group, group_coordinator = group_coordinated_outside(cluster, set(), OFFSETS_PARTITIONS, prefix="old-v0")
    group_v2, v2_coordinator = group_coordinated_outside(cluster, set(), OFFSETS_PARTITIONS, prefix="old-v2")
    zk = cluster.zookeeper.client(cluster.chroot)
    try:
        for i, (broker_id, b) in enumerate(sorted(cluster.brokers.items())):
            r = call(b.bootstrap, 8, 0, {"group_id": group, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 10 + i, "committed_metadata": "dropped"}]}]})
            assert r.topics[0].partitions[0].error_code == E.NONE, broker_id
            data, _ = zk.get(f"/consumers/{group}/offsets/{topic}/0")
            assert data == str(10 + i).encode()
        # An offset an old ZooKeeper consumer wrote itself is read back too.
        zk.create(f"/consumers/{group}/offsets/{topic}/1", b"77", makepath=True)
        for b in cluster.brokers.values():
            r = call(b.bootstrap, 9, 0, {"group_id": group, "topics": [
                {"name": topic, "partition_indexes": [0, 1]}]})
            assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                    for p in r.topics[0].partitions] == [(0, 12, "", E.NONE), (1, 77, "", E.NONE)]
        # v2 commits to the coordinator only; v0 and v2 see their own.
        coordinator = cluster.brokers[v2_coordinator]
        r = call(coordinator.bootstrap, 8, 2, {"group_id": group_v2, "generation_id_or_member_epoch": -1,
                                               "member_id": "", "retention_time": -1, "topics": [
                                                   {"name": topic, "partitions": [
                                                       {"partition_index": 0, "committed_offset": 5,
                                                        "committed_metadata": "m"}]}]})
        assert r.topics[0].partitions[0].error_code == E.NONE
        assert not zk.exists(f"/consumers/{group_v2}")
        r = call(coordinator.bootstrap, 9, 0, {"group_id": group_v2, "topics": [
            {"name": topic, "partition_indexes": [0]}]})
        assert (r.topics[0].partitions[0].committed_offset, r.topics[0].partitions[0].error_code) \
            == (-1, E.UNKNOWN_TOPIC_OR_PARTITION)
        r = call(cluster.brokers[group_coordinator].bootstrap, 9, 1, {"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [0]}]})
        assert (r.topics[0].partitions[0].committed_offset, r.topics[0].partitions[0].error_code) == (-1, E.NONE)
    finally:
        zk.stop()
        zk.close()
