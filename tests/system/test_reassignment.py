"""Partition reassignment and replication throttles on three real brokers and a
real ZooKeeper (issue 14).

* A partition's replicas move from {1,2} to {2,3} under an idempotent acks=all
  producer (kafka-python's AlterPartitionReassignments): broker 1's replica
  is deleted, ZooKeeper's topic znode ends with no adding/removing replicas,
  and everything acknowledged is consumed once, in order.
* The replication factor goes up ({1} -> {1,2,3}) and down (-> {3}, the
  leader moving off broker 1).
* A reassignment held back by a throttle is listed in progress
  (ListPartitionReassignments, with adding/removing replicas) and cancelled:
  the partition goes back to {1,2}, the added replica is deleted.
* ``kafkapy-reassign-partitions`` --generate / --execute --throttle /
  --verify (which removes the throttles, as Kafka's tool does).
* A throttled reassignment is measurably slower than the same unthrottled.
* The controller is SIGKILLed mid-reassignment; the next controller resumes
  it from the topic znode and it completes, under load.
* ``/admin/reassign_partitions`` (Kafka's ZooKeeper-written reassignment)
  is acted on and deleted when done.

One three-broker cluster serves the module (auto leader rebalance off).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kafkapy.coordination import zk_data
from kafkapy.coordination.zk_controller import REASSIGN_PARTITIONS_PATH
from support.cluster import (
    BackgroundProducer,
    Cluster,
    consume_all,
    controller_id,
    create_topic_assigned,
    validate,
    wait_for,
)
from support.zookeeper import zookeeper  # noqa: F401

pytestmark = pytest.mark.timeout(240)

OVERRIDES = {"offsets.topic.num.partitions": 3, "auto.leader.rebalance.enable": False}


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):  # noqa: F811
    c = Cluster(zookeeper, tmp_path_factory.mktemp("reassign"), "/reassignment", overrides=OVERRIDES)
    zk = zookeeper.client(c.chroot)
    try:
        c.start()
        yield c, zk
    finally:
        c.close()
        zk.stop()
        zk.close()


def _admin(c: Cluster):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=30000)


def _topic_znode(zk, topic: str):
    return zk_data.decode_topic(topic, zk.get(zk_data.topic_path(topic))[0])


def _reassign(c: Cluster, moves: dict) -> dict:
    """AlterPartitionReassignments through kafka-python: ``{(topic, p): replicas or None}``."""
    from kafka.structs import TopicPartition

    admin = _admin(c)
    try:
        return admin.alter_partition_reassignments({TopicPartition(t, p): r for (t, p), r in moves.items()})
    finally:
        admin.close()


def _ongoing(c: Cluster) -> dict:
    admin = _admin(c)
    try:
        return admin.list_partition_reassignments()
    finally:
        admin.close()


def _wait_done(c: Cluster, zk, topic: str, partition: int, replicas, timeout_s: float = 60.0) -> None:
    """Until the topic znode holds ``replicas`` with nothing being added or removed, the
    ISR is those replicas in ZooKeeper and Metadata, and no replica is left on
    a broker outside them."""
    def done():
        t = _topic_znode(zk, topic)
        if t.partitions[partition] != tuple(replicas) or t.adding_replicas or t.removing_replicas:
            return False
        leader, assigned, isr = c.partitions(topic)[partition]
        return list(assigned) == list(replicas) and sorted(isr) == sorted(replicas) and leader in replicas

    wait_for(done, timeout_s, f"{topic}-{partition} reassigned to {list(replicas)}")
    wait_for(lambda: all((b.log_dirs[0] / f"{topic}-{partition}").exists() == (i in replicas)
                         for i, b in c.brokers.items()), 30, f"only brokers {list(replicas)} hold {topic}-{partition}")


def _fill(c: Cluster, topic: str, partition: int, count: int, size: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 20})
    value = os.urandom(size)
    for _ in range(count):
        p.produce(topic, value, partition=partition)
        p.poll(0)
    assert p.flush(60) == 0


def test_move_replicas_under_acks_all_load(cluster):
    c, zk = cluster
    topic = "move"
    create_topic_assigned(c, topic, [[1, 2], [2, 1]], config={"min.insync.replicas": 1})
    producer = BackgroundProducer(c.bootstrap, topic, 2, rate_per_s=300).start()
    try:
        wait_for(lambda: producer.acked_count() >= 300, 30, "300 acknowledged before the move")
        assert _reassign(c, {(topic, 0): [2, 3], (topic, 1): [3, 2]}) is not None
        _wait_done(c, zk, topic, 0, [2, 3])
        _wait_done(c, zk, topic, 1, [3, 2])
        assert _ongoing(c) == {}
        before = producer.acked_count()
        wait_for(lambda: producer.acked_count() >= before + 300, 30, "progress after the move")
    finally:
        producer.halt()
    producer.stop()
    assert producer.errors == [], producer.errors[:5]
    consumed = consume_all(c.bootstrap, topic, 2)
    validate(producer.acked, consumed)
    assert producer.acked_count() >= 600
