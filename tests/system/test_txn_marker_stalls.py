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

The second test (long) leaves F frozen: A's partition has a live follower,
F's ZooKeeper session expires, the controller moves the partition's
leadership, and A completes while F is still frozen (the request in flight
to F times out, ``marker_channel.REMOTE_TIMEOUT_S``, and the retry goes to
the new leader; Kafka waits its request.timeout.ms, 30 s, there).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from support.cluster import Frozen, controller_id, create_topic_assigned
from support.wait import wait_for

from support.raw_api import leaders_known, transaction_states
from support.transactions import TIMEOUT_S, consume, producer

from kafkapy.coordinator.transaction.marker_channel import REMOTE_TIMEOUT_S

pytestmark = pytest.mark.timeout(120)

# Each of B's InitProducerId and commits must finish within this while F is
# frozen (they take a few ms; the old blocking channel held them ~15 s).
BOUND_S = 2.0
B_COMMITS = 5
# The leadership-move test's F: its ZooKeeper session (the controller moves
# its partitions once it expires).
SESSION_TIMEOUT_MS = 4000


@pytest.fixture
def cluster(make_cluster):
    # (a broker left frozen is continued by its close)
    c, _ = make_cluster(**{
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
        "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1})
    return c


def _transactions_around_a_frozen_leader(cluster, frozen_follows: bool, wait_frozen):
    """A writes to a partition F leads (followed by a live broker when
    ``frozen_follows``) and to live ones, F is frozen, A commits, B runs its
    transactions on the live brokers; ``wait_frozen(f, coordinator_broker)``
    runs last with F still frozen. Returns what the callers check after."""
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
    create_topic_assigned(cluster, "stall-frozen", [[frozen, live] if frozen_follows else [frozen]])
    # Replicated: the coordinator's own marker waits for a follower, the other goes to a live leader.
    create_topic_assigned(cluster, "stall-live", [[coordinator, live], [live, coordinator]])
    coordinator_broker = cluster.brokers[coordinator]

    # AddPartitionsToTxn checks the coordinator's own metadata.
    wait_for(lambda: leaders_known(coordinator_broker.bootstrap, ["stall-frozen", "stall-live"]), 30,
             "the topics in the coordinator's metadata")
    if frozen_follows:
        wait_for(lambda: len(cluster.partitions("stall-frozen")[0][2]) == 2, 30, "stall-frozen's full ISR")

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
        frozen_result = wait_frozen(f, coordinator_broker)
    print(f"frozen leader {frozen}: {f.report()}")
    assert max(f.latencies.values()) < BOUND_S, f.latencies
    assert a_state == ["PrepareCommit"], a_state
    return coordinator_broker, frozen_result


def _all_committed_once(cluster, coordinator_broker):
    wait_for(lambda: transaction_states(coordinator_broker.bootstrap, ["stall-a"]) == ["CompleteCommit"], 60,
             "A's CompleteCommit", interval_s=0.3)
    assert transaction_states(coordinator_broker.bootstrap, ["stall-b"]) == ["CompleteCommit"]
    assert consume(cluster.bootstrap, "stall-frozen", 1, "read_committed", want=10) == [b"a-f%d" % i for i in range(10)]
    got = consume(cluster.bootstrap, "stall-live", 2, "read_committed", want=10 + 4 * B_COMMITS)
    expected = [b"a-l%d" % i for i in range(10)] + [b"b%d-%d" % (n, i) for n in range(B_COMMITS) for i in range(4)]
    assert sorted(got) == sorted(expected)  # every committed record, exactly once


def test_a_frozen_leader_stalls_only_its_own_transaction(cluster):
    coordinator_broker, _ = _transactions_around_a_frozen_leader(cluster, False, lambda f, c: None)
    # Thawed, F answers the request it holds (or, had its ZooKeeper session
    # expired meanwhile, the retried one once it leads again): A completes.
    _all_committed_once(cluster, coordinator_broker)


@pytest.mark.long
def test_a_frozen_leaders_transaction_completes_once_its_leadership_moves(make_cluster):
    c, _ = make_cluster(**{
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
        "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
        "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS})

    def while_frozen(f, coordinator_broker):
        # F's session expires, the controller elects the live follower, the
        # marker in flight to F times out and is sent to the new leader.
        started = time.monotonic()
        wait_for(lambda: transaction_states(coordinator_broker.bootstrap, ["stall-a"]) == ["CompleteCommit"],
                 SESSION_TIMEOUT_MS / 1000 + REMOTE_TIMEOUT_S + 30, "A's CompleteCommit with F still frozen",
                 interval_s=0.3)
        return time.monotonic() - started

    coordinator_broker, completed_after_s = _transactions_around_a_frozen_leader(c, True, while_frozen)
    print(f"A completed {completed_after_s:.1f} s into the freeze's last phase, F still frozen")
    _all_committed_once(c, coordinator_broker)
