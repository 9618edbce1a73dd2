"""A leader waiting for its followers to get a transaction's markers holds no
handler worker (issue 11; Kafka's handleWriteTxnMarkersRequest appends with
requiredAcks=-1 and answers from the DelayedProduce completion).

Three brokers on a real ZooKeeper, each with ONE handler worker
(``num.io.threads=1``: a coordinator broker keeps one WriteTxnMarkers in
flight per leader, so one worker is what a single coordinator can tie up).
``__transaction_state`` has one partition, led by broker C; the data
partition is led by L and followed by F, neither of them C. Transactional
producers write to the data partition; F is SIGSTOPped (its ZooKeeper
session and ``replica.lag.time.max.ms`` outlast the freeze, so it stays in
the ISR and the high watermark cannot pass the markers) and every producer
commits: C's WriteTxnMarkers to L waits for F. Meanwhile another client's
produce and fetch on L (another topic, no follower) must each be answered
within ``BOUND_S``: before the markers were parked, L's worker sat in the
marker's replication wait for the whole freeze and that client's first
request waited with it (seconds). After SIGCONT every transaction ends
CompleteCommit and read_committed sees each committed record exactly once.
"""

from __future__ import annotations

import time

import pytest

from support.cluster import Frozen, PinnedClient, controller_id
from support.wait import wait_for

from support.raw_api import leaders_known, transaction_states
from support.transactions import TIMEOUT_S, consume, producer

pytestmark = pytest.mark.timeout(150)

PRODUCERS = 4
RECORDS = 5  # per producer
# F stays frozen this long: inside its ZooKeeper session (10 s, the test
# server's cap) so the controller does not take it out of the ISR.
FREEZE_S = 5.0
# Each of the other client's requests on L while F is frozen (a few ms; the
# old blocking handler held the first for the rest of the freeze).
BOUND_S = 1.5


@pytest.fixture
def cluster(make_cluster):
    c, _ = make_cluster(**{
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
        "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
        "num.io.threads": 1, "replica.lag.time.max.ms": 60000, "zookeeper.session.timeout.ms": 10000})
    return c


def _create_topic(cluster, name: str, assignment: list) -> None:
    """CreateTopics answered at once (operation timeout 0), then Metadata
    polled until the topic has its leaders."""
    from confluent_kafka.admin import NewTopic

    admin = cluster.admin()  # kept until the future resolves
    admin.create_topics([NewTopic(name, len(assignment), -1, replica_assignment=assignment)],
                        operation_timeout=0)[name].result(timeout=30)
    cluster.wait_topic_ready(name, len(assignment), len(assignment[0]), 30)


def test_markers_waiting_for_a_frozen_follower_hold_no_worker(cluster):
    bs = cluster.bootstrap
    txn_ids = [f"wtm-{i}" for i in range(PRODUCERS)]
    producers = [producer(bs, t) for t in txn_ids]  # the first creates __transaction_state
    coordinator = wait_for(lambda: max(cluster.partitions("__transaction_state").get(0, (-1,))[0], 0),
                           30, "a leader of __transaction_state-0")  # broker ids start at 1
    controller = controller_id(cluster)
    frozen = next(i for i in sorted(cluster.brokers) if i not in (coordinator, controller))
    leader = next(i for i in sorted(cluster.brokers) if i not in (coordinator, frozen))
    _create_topic(cluster, "wtm-data", [[leader, frozen]])
    _create_topic(cluster, "wtm-other", [[leader]])
    coordinator_broker = cluster.brokers[coordinator]

    # AddPartitionsToTxn checks the coordinator's own metadata.
    wait_for(lambda: leaders_known(coordinator_broker.bootstrap, ["wtm-data"]), 30,
             "the topic in the coordinator's metadata")
    for n, p in enumerate(producers):
        p.begin_transaction()
        for i in range(RECORDS):
            p.produce("wtm-data", value=b"t%d-%d" % (n, i), partition=0)
    for p in producers:
        p.flush(TIMEOUT_S)  # acks=all: F has every record before it is frozen
    probe = PinnedClient(cluster.brokers[leader], timeout_s=30)
    assert probe.produce("wtm-other", 0, [0])[0] == 0  # connected, the topic led by L

    latencies: list = []
    errors: list = []
    with Frozen(cluster.brokers[frozen]) as f:
        frozen_at = time.monotonic()
        for n, p in enumerate(producers):  # EndTxn is answered once PrepareCommit is logged; the markers follow
            f.timed(f"commit {n}", p.commit_transaction, TIMEOUT_S)
        f.in_background(probe.round_trips, "wtm-other", frozen_at + FREEZE_S, latencies, errors, settle_s=0)
        # Every transaction's marker waits at L for F (the high watermark cannot pass it).
        states = transaction_states(coordinator_broker.bootstrap, txn_ids)
        f.join(FREEZE_S + 1)
        time.sleep(max(0.0, frozen_at + FREEZE_S - time.monotonic()))
    probed = f.join(40)  # the old code's stuck request ends once F is thawed
    probe.close()
    print(f"coordinator {coordinator}, leader {leader}, frozen follower {frozen}: {f.report()}; other client's "
          f"{len(latencies)} requests on the leader while frozen: max {max(latencies, default=-1):.3f} s")
    assert isinstance(probed, tuple) and not errors, (probed, errors)
    assert states == ["PrepareCommit"] * PRODUCERS, states
    assert len(latencies) >= 20, latencies
    assert max(latencies) < BOUND_S, sorted(latencies)[-5:]

    # Thawed, F fetches the markers, L's high watermark passes them and the
    # parked WriteTxnMarkers is answered: every transaction completes.
    wait_for(lambda: transaction_states(coordinator_broker.bootstrap, txn_ids) == ["CompleteCommit"] * PRODUCERS, 60,
             "every CompleteCommit", interval_s=0.3)
    got = consume(cluster.bootstrap, "wtm-data", 1, "read_committed", want=PRODUCERS * RECORDS)
    assert sorted(got) == sorted(b"t%d-%d" % (n, i) for n in range(PRODUCERS) for i in range(RECORDS))
    for p in producers:  # the producers go on: a transaction after the stall commits too
        p.begin_transaction()
        p.produce("wtm-data", value=b"after", partition=0)
        p.commit_transaction(TIMEOUT_S)
    got = consume(cluster.bootstrap, "wtm-data", 1, "read_committed", want=PRODUCERS * (RECORDS + 1))
    assert got.count(b"after") == PRODUCERS and len(got) == PRODUCERS * (RECORDS + 1)
