"""A ``__transaction_state`` write waiting for a frozen follower holds only its
own transactional id, not the coordinator process (issue 11; Kafka parks the
append in its DelayedProduce purgatory and completes the transition from its
callback, the id answering CONCURRENT_TRANSACTIONS meanwhile).

Three brokers on a real ZooKeeper; ``__transaction_state`` has 6 partitions
of 2 replicas, so (Kafka's replica assignment) each broker leads two
partitions whose followers differ. Coordinator C leads partition P1
(follower F) and P2 (follower G, not F); transactional id T1 lives on P1, T2
on P2; both write to topics only C hosts. F (not the controller) is
SIGSTOPped while in P1's ISR and T1 commits: its PrepareCommit write cannot
pass the high watermark until F leaves the ISR (``replica.lag.time.max.ms``,
5 s here; ZooKeeper's session outlasts it). Meanwhile C must answer another
client's ListGroups and DescribeGroups, and T2's whole transaction (its
AddPartitionsToTxn, EndTxn, markers and CompleteCommit on P2), each within
``BOUND_S``: before the writes were parked the coordinator's one thread
slept in T1's replication wait and all of them waited until F left the ISR.
Then T1's commit completes, and read_committed consumers see T1's and T2's
records exactly once.
"""

from __future__ import annotations

import pytest

from kafkapy.protocol.transaction_log import partition_for
from support.cluster import Frozen, create_topic_assigned, leader_of_two_followers
from support.wait import wait_for

from support.raw_api import call, leaders_known, transaction_states
from support.transactions import TIMEOUT_S, consume, producer

pytestmark = pytest.mark.timeout(150)

STATE_PARTITIONS = 6
LAG_MS = 5000  # replica.lag.time.max.ms: F leaves P1's ISR within the test
# Each of the other requests on C while T1's write waits (a few ms; the old
# blocking write held them until F left the ISR, 5 s and more).
BOUND_S = 1.5
T2_COMMITS = 3


@pytest.fixture
def cluster(make_cluster):
    c, _ = make_cluster(**{
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": STATE_PARTITIONS,
        "transaction.state.log.replication.factor": 2, "transaction.state.log.min.isr": 1,
        "replica.lag.time.max.ms": LAG_MS, "zookeeper.session.timeout.ms": 10000,
        "request.timeout.ms": 30000})
    return c


def _id_on(partition: int, prefix: str) -> str:
    return next(f"{prefix}-{i}" for i in range(10_000) if partition_for(f"{prefix}-{i}", STATE_PARTITIONS) == partition)


def test_a_write_waiting_for_a_frozen_follower_holds_only_its_transaction(cluster):
    # The first FindCoordinator (key type 1) creates __transaction_state.
    any_broker = cluster.brokers[min(cluster.brokers)].bootstrap
    wait_for(lambda: call(any_broker, 10, 3, {"key": "any", "key_type": 1}, timeout_s=5).error_code == 0,
             30, "__transaction_state created")
    c, p1, frozen, p2, g = leader_of_two_followers(cluster, "__transaction_state", STATE_PARTITIONS)
    t1, t2 = _id_on(p1, "park-t1"), _id_on(p2, "park-t2")
    create_topic_assigned(cluster, "park-a", [[c]])
    create_topic_assigned(cluster, "park-b", [[c]])
    coordinator = cluster.brokers[c]

    # AddPartitionsToTxn checks the coordinator's own metadata.
    wait_for(lambda: leaders_known(coordinator.bootstrap, ["park-a", "park-b"]), 30,
             "the topics in the coordinator's metadata")
    # Neither producer needs F (librdkafka connects only to the brokers it uses).
    live = f"{coordinator.bootstrap},{cluster.brokers[g].bootstrap}"
    a, b = producer(live, t1), producer(live, t2)
    # T2's producer learns park-b (metadata, its leader's connection) before
    # F is frozen: a lookup after it could go to F and wait for its socket
    # timeout. The warm-up is aborted: read_committed never sees it.
    b.begin_transaction()
    b.produce("park-b", value=b"warm-up", partition=0)
    b.flush(TIMEOUT_S)
    b.abort_transaction(TIMEOUT_S)
    a.begin_transaction()
    for i in range(10):
        a.produce("park-a", value=b"a%d" % i, partition=0)
    a.flush(TIMEOUT_S)
    assert frozen in cluster.partitions("__transaction_state")[p1][2], "F in P1's ISR before the freeze"

    with Frozen(cluster.brokers[frozen]) as f:
        f.in_background(a.commit_transaction, TIMEOUT_S)  # T1's EndTxn reaches C, its PrepareCommit waits for F
        f.timed("ListGroups", call, coordinator.bootstrap, 16, 4, {"states_filter": []}, 20)
        f.timed("DescribeGroups", call, coordinator.bootstrap, 15, 5,
                {"groups": ["park-group"], "include_authorized_operations": False}, 20)
        for n in range(T2_COMMITS):
            b.begin_transaction()
            for i in range(4):
                b.produce("park-b", value=b"b%d-%d" % (n, i), partition=0)
            f.timed(f"T2's transaction {n}", lambda: (b.flush(TIMEOUT_S), b.commit_transaction(TIMEOUT_S)))
        still_waiting = f.still_waiting()
        # F leaves P1's ISR (its lag passes replica.lag.time.max.ms): the
        # write settles and T1's EndTxn is answered.
        outcome = f.join(LAG_MS / 1000 + 25)
    print(f"coordinator {c}: T1 on {p1} (frozen follower {frozen}), T2 on {p2} (follower {g}); "
          f"{f.report()}; T1's commit {outcome}")
    assert still_waiting, f"T1's commit did not wait for F: {outcome}"
    assert max(f.latencies.values()) < BOUND_S, f.latencies
    assert isinstance(outcome, tuple), outcome
    assert outcome[1] >= BOUND_S, outcome  # it did wait for F to leave the ISR

    wait_for(lambda: transaction_states(coordinator.bootstrap, [t1]) == ["CompleteCommit"], 30,
             "T1's CompleteCommit", interval_s=0.3)
    assert transaction_states(coordinator.bootstrap, [t2]) == ["CompleteCommit"]
    assert consume(cluster.bootstrap, "park-a", 1, "read_committed", want=10) == [b"a%d" % i for i in range(10)]
    got = consume(cluster.bootstrap, "park-b", 1, "read_committed", want=4 * T2_COMMITS)
    assert got == [b"b%d-%d" % (n, i) for n in range(T2_COMMITS) for i in range(4)]
    # T1's producer goes on: its next transaction commits (F is back).
    a.begin_transaction()
    a.produce("park-a", value=b"after", partition=0)
    a.commit_transaction(TIMEOUT_S)
    got = consume(cluster.bootstrap, "park-a", 1, "read_committed", want=11)
    assert got == [b"a%d" % i for i in range(10)] + [b"after"]
