"""Transactions in a three-broker cluster on a real ZooKeeper (issue 11):
the transaction coordinator (the leader of the id's ``__transaction_state``
partition) writes its markers to partitions led by the other brokers with
WriteTxnMarkers, so a confluent-kafka transactional producer's commit and
abort reach every partition and a read_committed consumer sees exactly the
committed records, with the offsets sent in the transaction committed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from support.cluster import Cluster, create_topic_assigned
from support.zookeeper import zookeeper  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from test_transactions import TIMEOUT_S, consume, producer  # noqa: E402

pytestmark = pytest.mark.timeout(180)

# Few partitions of the internal topics: created and elected (RF 3) inside the test's time.
INTERNAL_PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):  # noqa: F811
    c = Cluster(zookeeper, tmp_path_factory.mktemp("cluster"), "/cluster-transactions", overrides={
        "offsets.topic.num.partitions": INTERNAL_PARTITIONS,
        "transaction.state.log.num.partitions": INTERNAL_PARTITIONS,
        "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2})
    try:
        yield c.start()
    finally:
        c.close()


def test_markers_reach_partitions_led_by_every_broker(cluster):
    from confluent_kafka import Consumer, TopicPartition

    topic = "cluster-txn"
    create_topic_assigned(cluster, topic, [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    bs = cluster.bootstrap
    p = producer(bs, "cluster-txn-id")
    group = Consumer({"bootstrap.servers": bs, "group.id": "cluster-txn-group"})
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=b"c%02d" % i, partition=i % 3)
    p.send_offsets_to_transaction([TopicPartition(topic, q, 7) for q in range(3)], group.consumer_group_metadata(),
                                  TIMEOUT_S)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=b"a%02d" % i, partition=i % 3)
    p.flush(TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    # A second transaction commits after the abort: markers keep flowing.
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"z%d" % i, partition=i)
    p.commit_transaction(TIMEOUT_S)

    got = consume(bs, topic, 3, "read_committed", want=33)
    assert sorted(got) == sorted([b"c%02d" % i for i in range(30)] + [b"z%d" % i for i in range(3)])
    assert len(consume(bs, topic, 3, "read_uncommitted", want=63)) == 63
    committed = group.committed([TopicPartition(topic, q) for q in range(3)], TIMEOUT_S)
    assert [tp.offset for tp in committed] == [7, 7, 7]
    group.close()
    # Every partition's last stable offset caught up with its high watermark.
    reader = Consumer({"bootstrap.servers": bs, "group.id": "cluster-txn-lso", "isolation.level": "read_committed"})
    deadline = time.monotonic() + TIMEOUT_S
    for q in range(3):
        _low, high = reader.get_watermark_offsets(TopicPartition(topic, q), TIMEOUT_S)
        assert high == 10 + 1 + 10 + 1 + 1 + 1 and time.monotonic() < deadline
    reader.close()
