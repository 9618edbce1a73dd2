"""A frozen partition leader holds only its own transactions' markers (issue 11,
Kafka's TransactionMarkerChannelManager: a queue and a sender per destination
broker, the coordinator never waiting on one).

Three brokers on a real ZooKeeper, ``__transaction_state`` with one partition
(every transactional id has the same coordinator). Transactional producer A
writes to a partition led by broker F and to partitions led by live brokers;
F is SIGSTOPped (its whole process group: frozen, its kernel still accepting
connections) and A commits, so the coordinator's WriteTxnMarkers to F gets no
answer. Meanwhile producer B, another transactional id on the same
coordinator, initialises and commits transactions on the live brokers'
partitions: each must take well under a second (before the marker channel
was asynchronous the coordinator's one thread waited up to 15 s on F's
socket, and every other transaction with it), while A stays PrepareCommit.
After SIGCONT, A ends CompleteCommit and read_committed consumers see all of
A's and B's committed records exactly once.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from support.cluster import Frozen, controller_id, create_topic_assigned
from support.wait import wait_for

from support.raw_api import leaders_known, transaction_states
from support.transactions import TIMEOUT_S, consume, producer

pytestmark = pytest.mark.timeout(120)

# Each of B's InitProducerId and commits must finish within this while F is
# frozen (they take a few ms; the old blocking channel held them ~15 s).
BOUND_S = 2.0
B_COMMITS = 5


@pytest.fixture
def cluster(make_cluster):
    # (a broker left frozen is continued by its close)
    c, _ = make_cluster(**{
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
        "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1})
    return c


def test_a_frozen_leader_stalls_only_its_own_transaction(cluster):
    bs = cluster.bootstrap
    a = producer(bs, "stall-a")  # creates __transaction_state (one partition, on one broker)
    coordinator = wait_for(lambda: max(cluster.partitions("__transaction_state").get(0, (-1,))[0], 0),
                           30, "a leader of __transaction_state-0")  # broker ids start at 1
    controller = controller_id(cluster)
    # F leads A's partition and nothing else that matters: not the
    # coordinator (nor a replica of __transaction_state, which has one),
    # not the controller.
    frozen = next(i for i in sorted(cluster.brokers) if i not in (coordinator, controller))
    live = next(i for i in sorted(cluster.brokers) if i not in (coordinator, frozen))
    create_topic_assigned(cluster, "stall-frozen", [[frozen]])
    # Replicated: the coordinator's own marker waits for a follower, the other goes to a live leader.
    create_topic_assigned(cluster, "stall-live", [[coordinator, live], [live, coordinator]])
    coordinator_broker = cluster.brokers[coordinator]

    # AddPartitionsToTxn checks the coordinator's own metadata.
    wait_for(lambda: leaders_known(coordinator_broker.bootstrap, ["stall-frozen", "stall-live"]), 30,
             "the topics in the coordinator's metadata")

    a.begin_transaction()
    for i in range(10):
        a.produce("stall-frozen", value=b"a-f%d" % i, partition=0)
        a.produce("stall-live", value=b"a-l%d" % i, partition=i % 2)
    a.flush(TIMEOUT_S)
    # B never talks to F: bootstrap from the live brokers (librdkafka
    # connects only to the brokers it needs).
    b = Producer({"bootstrap.servers": f"{coordinator_broker.bootstrap},{cluster.brokers[live].bootstrap}",
                  "transactional.id": "stall-b", "linger.ms": 5})
    with Frozen(cluster.brokers[frozen]) as f:
        # Answered once PrepareCommit is logged; the markers follow.
        f.timed("A's EndTxn", a.commit_transaction, TIMEOUT_S)
        f.timed("B's InitProducerId", b.init_transactions, BOUND_S * 5)
        for n in range(B_COMMITS):
            b.begin_transaction()
            for i in range(4):
                b.produce("stall-live", value=b"b%d-%d" % (n, i), partition=i % 2)
            f.timed(f"B's commit {n}", b.commit_transaction, BOUND_S * 5)
        # A's markers are still waiting for F: its transaction is not complete.
        a_state = transaction_states(coordinator_broker.bootstrap, ["stall-a"])
    print(f"frozen leader {frozen}: {f.report()}")
    assert max(f.latencies.values()) < BOUND_S, f.latencies
    assert a_state == ["PrepareCommit"], a_state

    # Thawed, F answers the request it holds (or, had its ZooKeeper session
    # expired meanwhile, the retried one once it leads again): A completes.
    wait_for(lambda: transaction_states(coordinator_broker.bootstrap, ["stall-a"]) == ["CompleteCommit"], 60,
             "A's CompleteCommit", interval_s=0.3)
    assert transaction_states(coordinator_broker.bootstrap, ["stall-b"]) == ["CompleteCommit"]
    assert consume(cluster.bootstrap, "stall-frozen", 1, "read_committed", want=10) == [b"a-f%d" % i for i in range(10)]
    got = consume(cluster.bootstrap, "stall-live", 2, "read_committed", want=10 + 4 * B_COMMITS)
    expected = [b"a-l%d" % i for i in range(10)] + [b"b%d-%d" % (n, i) for n in range(B_COMMITS) for i in range(4)]
    assert sorted(got) == sorted(expected)  # every committed record, exactly once
