"""An offset commit waiting for a frozen follower holds only its own request,
not the group coordinator process (Kafka parks GroupMetadataManager's
append in its DelayedProduce purgatory and answers from the callback).

Three brokers on a real ZooKeeper; ``__consumer_offsets`` has 6 partitions
of 2 replicas, so each broker leads two partitions whose followers differ.
Coordinator C leads partition P1 (follower F, not the controller) and P2
(follower G, not F); group A lives on P1, group B on P2. F is SIGSTOPped
while in P1's ISR and A commits: the append cannot pass the high watermark
until F leaves the ISR (``replica.lag.time.max.ms``, 5 s here). Meanwhile A's
offsets are pending (OffsetFetch with require_stable: UNSTABLE_OFFSET_COMMIT;
a plain one: the previous commit) and C must answer B's OffsetCommit and
OffsetFetch within ``BOUND_S``: before commits were parked the coordinator's
one thread slept in A's replication wait and B waited until F left the ISR.
Then A's commit is answered and OffsetFetch returns it.
"""

from __future__ import annotations

import pytest

from kafkapy.coordinator.records import partition_for
from support.cluster import Frozen, create_topic_assigned, leader_of_two_followers, zk_partition_state
from support.wait import wait_for

from support.raw_api import call

pytestmark = pytest.mark.timeout(150)

OFFSETS_PARTITIONS = 6
LAG_MS = 5000  # replica.lag.time.max.ms: F leaves P1's ISR within the test
BOUND_S = 1.5  # each of B's requests while A's commit waits (ms; the old code: until F left the ISR)
TOPIC = "gpark"


@pytest.fixture
def cluster_zk(make_cluster):
    return make_cluster(**{
        "offsets.topic.num.partitions": OFFSETS_PARTITIONS, "offsets.topic.replication.factor": 2,
        "transaction.state.log.num.partitions": 1, "replica.lag.time.max.ms": LAG_MS,
        "zookeeper.session.timeout.ms": 10000, "offsets.commit.timeout.ms": 30000,
        "request.timeout.ms": 30000})


def _group_on(partition: int, prefix: str) -> str:
    return next(f"{prefix}-{i}" for i in range(10_000)
                if partition_for(f"{prefix}-{i}", OFFSETS_PARTITIONS) == partition)


def _commit(broker, group: str, offset: int, timeout_s: float = 20):
    r = call(broker.bootstrap, 8, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
        timeout_s=timeout_s)
    return r.topics[0].partitions[0].error_code


def _fetch(broker, group: str, require_stable: bool = False):
    """(committed offset, partition error) of TOPIC-0; the group's error when it has one."""
    r = call(broker.bootstrap, 9, 7, {"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                                      "require_stable": require_stable}, timeout_s=20)
    if r.error_code:
        return None, r.error_code
    p = r.topics[0].partitions[0]
    return p.committed_offset, p.error_code


def test_a_commit_waiting_for_a_frozen_follower_holds_only_its_group(cluster_zk):
    cluster, zk = cluster_zk
    any_broker = cluster.brokers[min(cluster.brokers)]
    # The first FindCoordinator creates __consumer_offsets.
    wait_for(lambda: call(any_broker.bootstrap, 10, 3, {"key": "any", "key_type": 0}, timeout_s=5).error_code == 0,
             30, "__consumer_offsets created")
    c, p1, frozen, p2, g = leader_of_two_followers(cluster, "__consumer_offsets", OFFSETS_PARTITIONS)
    group_a, group_b = _group_on(p1, "park-a"), _group_on(p2, "park-b")
    create_topic_assigned(cluster, TOPIC, [[c]])
    coordinator = cluster.brokers[c]
    # C serves both groups (loaded its partitions, knows the topic).
    wait_for(lambda: _commit(coordinator, group_a, 1) == 0 and _commit(coordinator, group_b, 1) == 0,
             30, "both groups' first commits on C")
    assert frozen in cluster.partitions("__consumer_offsets")[p1][2], "F in P1's ISR before the freeze"

    with Frozen(cluster.brokers[frozen]) as f:
        f.in_background(_commit, coordinator, group_a, 42, timeout_s=40)  # A's append waits for F
        a_stable = f.timed("A's stable OffsetFetch", _fetch, coordinator, group_a, require_stable=True)
        a_plain = f.timed("A's OffsetFetch", _fetch, coordinator, group_a)
        b_commits = [f.timed(f"B's OffsetCommit {n}", _commit, coordinator, group_b, 10 + n) for n in range(3)]
        b_fetch = f.timed("B's stable OffsetFetch", _fetch, coordinator, group_b, require_stable=True)
        still_waiting = f.still_waiting()
        # F leaves P1's ISR (its lag passes replica.lag.time.max.ms): the
        # append settles and A's commit is answered.
        outcome = f.join(LAG_MS / 1000 + 25)
        # Before F is thawed and catches up. ZooKeeper, not Metadata: the leader
        # applies a shrink once ZooKeeper holds it and the high watermark moves
        # then; brokers' Metadata follows later (notification, controller,
        # UpdateMetadata), so at the answer it may still name F.
        isr_answered = tuple(zk_partition_state(zk, "__consumer_offsets", p1)["isr"])
    print(f"coordinator {c}: A on {p1} (frozen follower {frozen}), B on {p2} (follower {g}); "
          f"{f.report()}; A's commit {outcome}")
    assert max(f.latencies.values()) < BOUND_S, f.latencies
    assert still_waiting, f"A's commit did not wait for F: {outcome}"
    assert a_stable == (-1, 88), a_stable  # UNSTABLE_OFFSET_COMMIT while pending
    assert a_plain == (1, 0), a_plain  # the last committed offset
    assert b_commits == [0, 0, 0] and b_fetch == (12, 0), (b_commits, b_fetch)
    assert isinstance(outcome, tuple), outcome
    error, waited = outcome
    assert error == 0 and waited >= BOUND_S, outcome  # answered once F left the ISR
    assert _fetch(coordinator, group_a, require_stable=True) == (42, 0)
    assert frozen not in isr_answered, isr_answered
