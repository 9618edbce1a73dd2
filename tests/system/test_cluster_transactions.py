"""Transactions in a three-broker cluster on a real ZooKeeper (issue 11):
the transaction coordinator (the leader of the id's ``__transaction_state``
partition) writes its markers to partitions led by the other brokers with
WriteTxnMarkers, so a confluent-kafka transactional producer's commit and
abort reach every partition and a read_committed consumer sees exactly the
committed records, with the offsets sent in the transaction committed.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from support.cluster import running_cluster, create_topic_assigned

from support.raw_api import call
from support.transactions import TIMEOUT_S, add_offsets, consume, producer, stable_offset, txn_offset_commit


def wait_for_leader(cluster, topic: str, partition: int, timeout_s: float = 30.0):
    """``(partition, leader id)`` once the cluster's metadata names a live leader."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leader = cluster.partitions(topic).get(partition, (-1,))[0]
        if leader >= 0:
            return partition, leader
        time.sleep(0.2)
    raise AssertionError(f"no leader for {topic}-{partition}")

pytestmark = pytest.mark.timeout(180)

# Few partitions of the internal topics: created and elected (RF 3) inside the test's time.
INTERNAL_PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    with running_cluster(zookeeper, tmp_path_factory.mktemp("cluster"), "/cluster-transactions", {
            "offsets.topic.num.partitions": INTERNAL_PARTITIONS,
            "transaction.state.log.num.partitions": INTERNAL_PARTITIONS,
            "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2}) as (c, _):
        yield c


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


def test_a_txn_offset_commit_is_verified_by_another_brokers_coordinator(cluster):
    """KIP-890 across brokers: the group's coordinator is not the
    transactional id's, so the first TxnOffsetCommit of each transaction is
    verified with AddPartitionsToTxn v4 to the other broker: in the
    transaction, appended; after the commit, refused INVALID_TXN_STATE
    with nothing left pending."""
    from kafkapy.coordinator.records import partition_for as group_partition
    from kafkapy.protocol.errors import ErrorCode as E
    from kafkapy.protocol.transaction_log import partition_for as txn_partition

    txn_id, topic = "cluster-oc-id", "cluster-oc"
    create_topic_assigned(cluster, topic, [[1, 2, 3]])
    bs = cluster.brokers[1].bootstrap
    assert call(bs, 10, 3, {"key": txn_id, "key_type": 1}).error_code == E.NONE  # creates __transaction_state
    _, txn_leader = wait_for_leader(cluster, "__transaction_state", txn_partition(txn_id, INTERNAL_PARTITIONS))
    assert call(bs, 10, 3, {"key": "g", "key_type": 0}).error_code == E.NONE  # creates __consumer_offsets
    leaders = dict(wait_for_leader(cluster, "__consumer_offsets", q) for q in range(INTERNAL_PARTITIONS))
    group = next(g for g in (f"cluster-oc-group-{n}" for n in range(100))
                 if leaders[group_partition(g, INTERNAL_PARTITIONS)] != txn_leader)
    txn_bs = cluster.brokers[txn_leader].bootstrap
    group_bs = cluster.brokers[leaders[group_partition(group, INTERNAL_PARTITIONS)]].bootstrap
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # both coordinators loaded
        r = call(txn_bs, 22, 4, {"transactional_id": txn_id, "transaction_timeout": 60000, "producer_id": -1,
                                 "producer_epoch": -1})
        ready = r.error_code == E.NONE and call(group_bs, 9, 7, {
            "group_id": group, "topics": None, "require_stable": True}).error_code == E.NONE
        if ready or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert ready, r.error_code
    pid, epoch = r.producer_id, r.producer_epoch
    assert add_offsets(txn_bs, txn_id, pid, epoch, group) == E.NONE
    assert txn_offset_commit(group_bs, txn_id, pid, epoch, group, topic, 5) == E.NONE
    assert call(txn_bs, 26, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                "committed": True}).error_code == E.NONE
    deadline = time.monotonic() + TIMEOUT_S
    while stable_offset(group_bs, group, topic) != (5, E.NONE) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert stable_offset(group_bs, group, topic) == (5, E.NONE)
    # Every marker written and CompleteCommit logged: until then a late
    # commit is answered CONCURRENT_TRANSACTIONS, as in Kafka.
    while call(txn_bs, 65, 0, {"transactional_ids": [txn_id]}).transaction_states[0].transaction_state \
            != "CompleteCommit" and time.monotonic() < deadline:
        time.sleep(0.1)
    # Late: the other broker's coordinator says the partition is no longer in a transaction.
    assert txn_offset_commit(group_bs, txn_id, pid, epoch, group, topic, 9) == E.INVALID_TXN_STATE
    assert txn_offset_commit(group_bs, txn_id, pid, epoch + 1, group, topic, 9, version=4) \
        == E.INVALID_PRODUCER_EPOCH  # an epoch the coordinator does not have: fenced
    assert stable_offset(group_bs, group, topic) == (5, E.NONE)


@pytest.fixture
def failover_cluster(make_cluster):
    # (a broker left frozen is continued by its close)
    c, _ = make_cluster(**{
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
        "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2})
    return c


def _batches_from(part_dir: Path, offset: int) -> list:
    """``(base offset, is a COMMIT marker)`` of every batch from ``offset`` on,
    read from the partition's segment files (None: not a control batch)."""
    from kafkapy._core import load
    from kafkapy.storage.control_records import parse_end_txn_marker

    scan = load("batch").scan_batches
    out = []
    for f in sorted(part_dir.glob("*.log")):
        buf = f.read_bytes()
        for h in scan(buf, 0, -1, True)[0]:
            if h.base_offset >= offset:
                batch = buf[h.position:h.position + 12 + h.batch_length]
                commit = parse_end_txn_marker(batch).is_commit if h.attributes & 0x20 else None
                out.append((h.base_offset, commit))
    return out


def _wait_topic_at(cluster, broker_id: int, topic: str, partitions: int) -> None:
    """Until ``topic`` is in broker ``broker_id``'s own metadata with a leader
    for each partition (AddPartitionsToTxn at the coordinator needs it)."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        t = call(cluster.brokers[broker_id].bootstrap, 3, 4, {"topics": [{"name": topic}],
                                                              "allow_auto_topic_creation": False}).topics[0]
        if t.error_code == 0 and len(t.partitions) == partitions and all(q.leader_id >= 0 for q in t.partitions):
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} not in broker {broker_id}'s metadata")


def _freeze(broker, sig) -> None:
    os.killpg(broker.proc.pid, sig)  # the broker's whole process group (processors, workers, coordinator)


@pytest.mark.timeout(240)
def test_a_new_coordinator_finishes_markers_its_dead_predecessor_left(failover_cluster):
    """The coordinator logs PrepareCommit, writes one partition's marker and
    cannot reach the leader of another (frozen); it is SIGKILLed there. The
    broker that leads __transaction_state next loads PrepareCommit and
    writes every marker again (the frozen leader thawed, the dead one
    restarted): the transaction ends committed on all three partitions,
    read_committed sees it whole, and DescribeTransactions says CompleteCommit."""
    from confluent_kafka import Consumer, TopicPartition

    cluster = failover_cluster
    bs = cluster.bootstrap
    p = producer(bs, "failover-txn")
    (_, txn_state_p0) = wait_for_leader(cluster, "__transaction_state", 0)
    coordinator = txn_state_p0
    frozen, other = [i for i in sorted(cluster.brokers) if i != coordinator]
    topic = "failover-data"
    create_topic_assigned(cluster, topic, [[coordinator], [frozen], [other]])
    _wait_topic_at(cluster, coordinator, topic, 3)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=b"f%02d" % i, partition=i % 3)
    p.flush(TIMEOUT_S)

    _freeze(cluster.brokers[frozen], signal.SIGSTOP)
    try:
        # EndTxn is answered once PrepareCommit is in the ISR: the frozen
        # broker drops out of it by the leader's ISR job (replica lag) or by
        # the controller when its ZooKeeper session expires, whichever comes
        # first; the controller's way bumps the leader epoch, and the
        # coordinator, still the leader, keeps its load and the parked EndTxn
        # (TransactionCoordinator.follow); the
        # marker for the frozen leader's partition cannot be written, so the
        # transaction is in PrepareCommit when its coordinator dies.
        p.commit_transaction(TIMEOUT_S * 3)
        cluster.brokers[coordinator].kill()
    finally:
        _freeze(cluster.brokers[frozen], signal.SIGCONT)
    # Restarted once its old ZooKeeper session is gone (its registration with it).
    cluster.wait_brokers({frozen, other}, timeout_s=60)
    cluster.brokers[coordinator].start()

    def complete():
        for b in cluster.running():
            try:
                r = call(b.bootstrap, 65, 0, {"transactional_ids": ["failover-txn"]}, timeout_s=5)
            except Exception:  # a broker still starting or catching up
                continue
            state = r.transaction_states[0]
            if state.error_code == 0 and state.transaction_state == "CompleteCommit":
                return True
        return False

    deadline = time.monotonic() + 120
    while not complete() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert complete()
    got = consume(cluster.bootstrap, topic, 3, "read_committed", want=30)
    assert sorted(got) == [b"f%02d" % i for i in range(30)]
    readers = [Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"failover-{isolation}",
                         "isolation.level": isolation}) for isolation in ("read_committed", "read_uncommitted")]
    try:
        for q in range(3):
            # 10 records and a COMMIT marker from either coordinator (both
            # when the first one had written it): the LSO is the end.
            stable, end = (r.get_watermark_offsets(TopicPartition(topic, q), TIMEOUT_S)[1] for r in readers)
            assert stable == end and end >= 11, (q, stable, end)
            # Every coordinator epoch that loaded the transaction in
            # PrepareCommit writes its markers again (as Kafka's does), so
            # past the 10 records there is one COMMIT marker or more, and
            # nothing else (the partition's one replica, on disk).
            leader = (coordinator, frozen, other)[q]
            after = _batches_from(cluster.brokers[leader].log_dirs[0] / f"{topic}-{q}", 10)
            assert len(after) == end - 10 and all(commit for _offset, commit in after), (q, after)
    finally:
        for r in readers:
            r.close()


@pytest.mark.timeout(240)
def test_a_commit_retried_after_its_coordinator_died_mid_end_txn_succeeds(failover_cluster):
    """EndTxn(commit) reaches the coordinator, which logs PrepareCommit but
    cannot answer yet (a frozen follower holds the acks=-1 write until it
    leaves the ISR); the coordinator is SIGKILLed there. librdkafka retries
    EndTxn at the next leader of __transaction_state, which has
    PrepareCommit (its log had it: CONCURRENT_TRANSACTIONS until every
    marker is written, then NONE) or not (the frozen follower became the
    leader: Ongoing, so the retry commits it): commit_transaction returns,
    never INVALID_TXN_STATE, and the transaction is committed everywhere."""
    import threading

    from confluent_kafka import KafkaException

    cluster = failover_cluster
    p = producer(cluster.bootstrap, "kill-end-txn", **{"socket.timeout.ms": 8000})
    _, coordinator = wait_for_leader(cluster, "__transaction_state", 0)
    frozen, other = [i for i in sorted(cluster.brokers) if i != coordinator]
    topic = "kill-end-txn-data"
    create_topic_assigned(cluster, topic, [[other], [frozen]])
    _wait_topic_at(cluster, coordinator, topic, 2)
    failed = []
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, value=b"k%02d" % i, partition=i % 2,
                  on_delivery=lambda err, _m: err and failed.append(err))
    assert p.flush(TIMEOUT_S) == 0 and failed == [], failed[:3]
    outcome = []

    def commit():
        try:
            p.commit_transaction(TIMEOUT_S * 3)
            outcome.append("committed")
        except KafkaException as exc:
            outcome.append(exc.args[0])

    _freeze(cluster.brokers[frozen], signal.SIGSTOP)
    committer = threading.Thread(target=commit, name="committer", daemon=True)
    try:
        committer.start()
        # Within replica.lag.time.max.ms (3 s) of the freeze: the PrepareCommit
        # write still waits for the frozen follower.
        time.sleep(1.0)
        assert not outcome, outcome
        cluster.brokers[coordinator].kill()
    finally:
        _freeze(cluster.brokers[frozen], signal.SIGCONT)
    committer.join(TIMEOUT_S * 3 + 10)
    assert outcome == ["committed"], outcome
    got = consume(cluster.bootstrap, topic, 2, "read_committed", want=20)
    assert sorted(got) == [b"k%02d" % i for i in range(20)]
    cluster.brokers[coordinator].start()
