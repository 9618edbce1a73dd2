"""Kafka's replica placement and leader election (kafkapy.metadata.assignment)."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.metadata.assignment import (
    RACK_AWARE_DISABLED, RACK_AWARE_ENFORCED, RACK_AWARE_SAFE, AdminOperationError, BrokerMetadata,
    assign_replicas_to_brokers, broker_metadatas, controlled_shutdown_leader, elect_leader, elect_leader_and_isr,
    initial_leader_and_isr, new_partitions_assignment, preferred_leader, rack_alternated_broker_list)
from kafkapy.metadata.model import BrokerInfo
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError


def brokers(*ids, racks=None):
    return [BrokerMetadata(b, None if racks is None else racks[i]) for i, b in enumerate(ids)]


# ------------------------------------------------------------------ exact assignments

def test_rack_unaware_fixed_start_index_exact():
    # Kafka's algorithm by hand, 5 brokers, 10 partitions, RF 3, start index 0:
    # p0..p4 (shift 0): leader b_p, followers at +1, +2;
    # p5..p9 (the shift grows to 1 at the wrap): leader b_(p%5), followers at +2, +3.
    # It is also the table in AdminUtils.assignReplicasToBrokers' javadoc.
    got = assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0)
    assert got == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }


def test_rack_unaware_start_index_and_start_partition():
    # start index 2, shift 2: p0's leader is index 2 (30), its follower
    # 1 + (2 + 0) % 3 = 3 places on: index (2 + 3) % 4 = 1 (20); p1 from index 3 (40)
    got = assign_replicas_to_brokers(brokers(10, 20, 30, 40), 2, 2, fixed_start_index=2)
    assert got == {0: [30, 20], 1: [40, 30]}
    got = assign_replicas_to_brokers(brokers(10, 20, 30, 40), 2, 2, fixed_start_index=2, start_partition_id=4)
    # p4: 4 % 4 == 0 -> shift 3; first = (4 + 2) % 4 = 2 -> 30; follower 1 + 3 % 3 = 1 on -> 40
    assert got == {4: [30, 40], 5: [40, 10]}


def test_rack_aware_exact_javadoc_example():
    # AdminUtils' javadoc: 0->rack1, 1->rack3, 2->rack3, 3->rack2, 4->rack2, 5->rack1
    # alternates as 0, 3, 1, 5, 4, 2; RF 3 from index 0 gives 0,3,1 / 3,1,5 / ...,
    # and partition 6 (after the wrap) 0,4,2
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    got = assign_replicas_to_brokers([BrokerMetadata(b, r) for b, r in racks.items()], 7, 3, fixed_start_index=0)
    assert got == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
                   6: [0, 4, 2]}


def test_rack_alternated_list_uneven_racks():
    assert rack_alternated_broker_list({0: "a", 1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}) == [0, 3, 4, 1, 5, 2]


def test_random_choices_are_injected():
    calls = []

    def rand(n):
        calls.append(n)
        return 1
    assert assign_replicas_to_brokers(brokers(0, 1, 2), 3, 1, rand=rand) == {0: [1], 1: [2], 2: [0]}
    assert calls == [3, 3]  # start index, then the replica shift


# ------------------------------------------------------------------ errors

def test_errors_as_kafka_raises_them():
    with pytest.raises(TopicError) as e:
        assign_replicas_to_brokers(brokers(0, 1), 3, 3)
    assert e.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert str(e.value) == "Replication factor: 3 larger than available brokers: 2."
    with pytest.raises(TopicError) as e:
        assign_replicas_to_brokers(brokers(0, 1), 3, 0)
    assert (e.value.error_code, str(e.value)) == (ErrorCode.INVALID_REPLICATION_FACTOR,
                                                  "Replication factor must be larger than 0.")
    with pytest.raises(TopicError) as e:
        assign_replicas_to_brokers(brokers(0, 1), 0, 1)
    assert (e.value.error_code, str(e.value)) == (ErrorCode.INVALID_PARTITIONS,
                                                  "Number of partitions must be larger than 0.")
    with pytest.raises(AdminOperationError) as e:
        assign_replicas_to_brokers(brokers(0, 1, 2, racks=["a", None, "b"]), 3, 2)
    assert str(e.value) == "Not all brokers have rack information for replica rack aware assignment."
    assert e.value.error_code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_broker_metadatas_rack_aware_modes():
    infos = [BrokerInfo(2, "h", 1, "a"), BrokerInfo(0, "h", 1, None), BrokerInfo(1, "h", 1, "b")]
    with pytest.raises(AdminOperationError) as e:
        broker_metadatas(infos, RACK_AWARE_ENFORCED)
    assert str(e.value) == ("Not all brokers have rack information. Add --disable-rack-aware in command line "
                            "to make replica assignment without rack information.")
    assert broker_metadatas(infos, RACK_AWARE_SAFE) == [BrokerMetadata(0), BrokerMetadata(1), BrokerMetadata(2)]
    assert broker_metadatas(infos, RACK_AWARE_DISABLED) == [BrokerMetadata(0), BrokerMetadata(1), BrokerMetadata(2)]
    all_racks = [BrokerInfo(1, "h", 1, "b"), BrokerInfo(0, "h", 1, "a")]
    assert broker_metadatas(all_racks) == [BrokerMetadata(0, "a"), BrokerMetadata(1, "b")]


# ------------------------------------------------------------------ new partitions

def test_new_partitions_continue_from_partition_zero_leader():
    existing = {0: [2, 0], 1: [0, 1], 2: [1, 2]}
    # first broker with id >= 2 is at index 2: fixed start index 2, partitions from 3
    got = new_partitions_assignment("t", existing, brokers(0, 1, 2), 5)
    assert got == assign_replicas_to_brokers(brokers(0, 1, 2), 2, 2, fixed_start_index=2, start_partition_id=3)
    # p3: 3 % 3 == 0 -> shift 3; first (3 + 2) % 3 = 2 -> broker 2, follower 1 + 3 % 2 = 2 on -> broker 1
    assert got == {3: [2, 1], 4: [0, 2]}


def test_new_partitions_errors():
    with pytest.raises(TopicError) as e:
        new_partitions_assignment("t", {0: [0], 1: [0]}, brokers(0), 2)
    assert e.value.error_code == ErrorCode.INVALID_PARTITIONS
    assert str(e.value) == ("The number of partitions for a topic can only be increased. "
                            "Topic t currently has 2 partitions, 2 would not be an increase.")
    with pytest.raises(AdminOperationError):
        new_partitions_assignment("t", {1: [0]}, brokers(0), 3)


# ------------------------------------------------------------------ properties

@st.composite
def clusters(draw):
    ids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True))
    rf = draw(st.integers(1, len(ids)))
    n = draw(st.integers(1, 60))
    return sorted(ids), rf, n


@given(clusters(), st.integers(0, 10 ** 6))
@settings(max_examples=300)
def test_rack_unaware_properties(cluster, seed):
    ids, rf, n = cluster
    start = seed % len(ids)
    got = assign_replicas_to_brokers(brokers(*ids), n, rf, fixed_start_index=start)
    assert sorted(got) == list(range(n))
    for replicas in got.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(ids)
    # leaders round-robin: any two brokers lead within one partition of each other
    leaders = Counter(r[0] for r in got.values())
    counts = [leaders.get(b, 0) for b in ids]
    assert max(counts) - min(counts) <= 1
    # replicas too, once the partitions are a multiple of the brokers
    if n % len(ids) == 0:
        assert len({c for c in Counter(b for r in got.values() for b in r).values()}) == 1


@st.composite
def rack_clusters(draw):
    n_racks = draw(st.integers(1, 4))
    ids = draw(st.lists(st.integers(0, 1000), min_size=n_racks, max_size=12, unique=True))
    racks = [f"r{i % n_racks}" for i in range(len(ids))]
    racks = draw(st.permutations(racks))
    rf = draw(st.integers(1, len(ids)))
    return [BrokerMetadata(b, r) for b, r in zip(ids, racks)], rf, draw(st.integers(1, 40))


@given(rack_clusters(), st.integers(0, 10 ** 6))
@settings(max_examples=300)
def test_rack_aware_properties(cluster, seed):
    metas, rf, n = cluster
    rack_of = {b.broker_id: b.rack for b in metas}
    n_racks = len(set(rack_of.values()))
    got = assign_replicas_to_brokers(metas, n, rf, fixed_start_index=seed % len(metas))
    for replicas in got.values():
        assert len(replicas) == rf and len(set(replicas)) == rf
        racks = [rack_of[b] for b in replicas]
        if n_racks >= rf:
            assert len(set(racks)) == rf  # every replica on its own rack
        else:
            assert set(racks) == set(rack_of.values())  # every rack holds one


def test_random_start_is_used_when_not_fixed():
    seen = {tuple(assign_replicas_to_brokers(brokers(0, 1, 2, 3), 1, 1)[0]) for _ in range(200)}
    assert len(seen) > 1


# ------------------------------------------------------------------ leader election

def test_elect_leader_prefers_assignment_order_in_isr():
    assert elect_leader([1, 2, 3], isr=[3, 2], live_brokers={1, 2, 3}) == 2
    assert elect_leader([1, 2, 3], isr=[1, 2, 3], live_brokers={2, 3}) == 2
    assert elect_leader([1, 2, 3], isr=[1], live_brokers={2, 3}) is None
    assert elect_leader([1, 2, 3], isr=[1], live_brokers={3, 2}, unclean=True) == 2
    assert elect_leader([1, 2, 3], isr=[1], live_brokers=set(), unclean=True) is None
    assert elect_leader([], isr=[], live_brokers={1}) is None


def test_elect_leader_and_isr():
    assert elect_leader_and_isr([1, 2, 3], [1, 2, 3], {2, 3}) == (2, (2, 3), False)
    assert elect_leader_and_isr([1, 2, 3], [1], {3}, unclean=True) == (3, (3,), True)
    assert elect_leader_and_isr([1, 2, 3], [1], {3}) is None


def test_preferred_and_controlled_shutdown_leaders():
    assert preferred_leader([1, 2], [1, 2], {1, 2}) == 1
    assert preferred_leader([1, 2], [2], {1, 2}) is None
    assert preferred_leader([1, 2], [1, 2], {2}) is None
    assert controlled_shutdown_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, shutting_down={1}) == 2
    assert controlled_shutdown_leader([1, 2], [1], {1, 2}, shutting_down={1}) is None


def test_new_partition_isr_is_its_live_replicas():
    assert initial_leader_and_isr([3, 1, 2], live_brokers={1, 2}) == (1, (1, 2))
    assert initial_leader_and_isr([3, 1, 2], live_brokers={1, 2, 3}) == (3, (3, 1, 2))
    assert initial_leader_and_isr([3], live_brokers={1}) is None
