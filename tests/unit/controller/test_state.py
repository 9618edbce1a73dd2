"""The controller's partition state decisions (Kafka 3.9 ZooKeeper mode):
new partitions, broker failure and return, AlterPartition, with the znode
version fence and the requests each change sends. Pure state, plus a
Hypothesis run checking the invariants over random failures and returns."""

import hypothesis.strategies as st
from hypothesis import given, settings

from kafkapy.controller.effects import (
    DeleteTopic,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    WritePartitionState,
)
from kafkapy.controller.state import LEADER_DURING_DELETE, ControllerState
from kafkapy.metadata.model import PartitionState
from kafkapy.protocol.errors import ErrorCode

EPOCH = 3


def _writes(effects):
    return {(e.topic, e.partition): (e.state, e.expected_version)
            for e in effects if isinstance(e, WritePartitionState)}


def _cluster(live=(1, 2, 3)):
    c = ControllerState(EPOCH, set(live))
    effects = c.on_new_partitions({("t", 0): (1, 2, 3), ("t", 1): (2, 3, 1), ("u", 0): (3,)})
    return c, effects


def test_new_partitions_lead_on_their_first_live_replica():
    c, effects = _cluster(live=(1, 2))
    writes = _writes(effects)
    assert writes[("t", 0)] == (PartitionState((1, 2, 3), 1, 0, (1, 2), 0), None)
    assert writes[("t", 1)] == (PartitionState((2, 3, 1), 2, 0, (2, 1), 0), None)
    assert ("u", 0) not in writes and ("u", 0) not in c.states  # no live replica: offline
    lai = {e.broker_id: e.partitions for e in effects if isinstance(e, SendLeaderAndIsr)}
    assert sorted(lai) == [1, 2] and all(is_new for parts in lai.values() for *_x, is_new in parts)
    [um] = [e for e in effects if isinstance(e, SendUpdateMetadata)]
    assert um.broker_ids == (1, 2) and um.controller_epoch == EPOCH and len(um.partitions) == 2
    # Writes come before the requests that announce them.
    kinds = [type(e) for e in effects]
    assert kinds.index(SendLeaderAndIsr) > max(i for i, k in enumerate(kinds) if k is WritePartitionState)


def test_leader_failure_elects_from_the_isr_and_fences_on_the_version():
    c, _ = _cluster()
    effects = c.on_brokers_failed([1])
    writes = _writes(effects)
    # t-0 was led by 1: the next live ISR member in assignment order leads, epoch + 1.
    assert writes[("t", 0)] == (PartitionState((1, 2, 3), 2, 1, (2, 3), 1), 0)
    # t-1 was led by 2: 1 just leaves the ISR, epoch + 1.
    assert writes[("t", 1)] == (PartitionState((2, 3, 1), 2, 1, (2, 3), 1), 0)
    assert 1 not in {e.broker_id for e in effects if isinstance(e, SendLeaderAndIsr)}
    # A second change of t-0 is fenced on the version the first one wrote.
    again = _writes(c.on_brokers_failed([2]))
    assert again[("t", 0)] == (PartitionState((1, 2, 3), 3, 2, (3,), 2), 1)


def test_no_live_isr_member_leaves_the_partition_offline_until_it_returns():
    c, _ = _cluster()
    c.on_brokers_failed([2, 3])
    c.on_brokers_failed([1])
    state = c.states[("t", 0)]
    # The last ISR member is kept, so only it can lead again (clean election).
    assert state.leader == -1 and len(state.isr) == 1
    last = state.isr[0]
    other = next(b for b in (1, 2, 3) if b != last)
    assert ("t", 0) not in _writes(c.on_brokers_started([other]))  # not in the ISR: stays offline
    assert c.states[("t", 0)].leader == -1
    back = _writes(c.on_brokers_started([last]))
    assert back[("t", 0)][0].leader == last


def test_unclean_election_when_enabled_takes_any_live_replica():
    c, _ = _cluster()
    c.unclean_election = lambda topic: topic == "t"
    c.on_brokers_failed([2, 3])
    c.on_brokers_failed([1])
    other = next(b for b in (1, 2, 3) if b != c.states[("t", 0)].isr[0])
    elected = _writes(c.on_brokers_started([other]))[("t", 0)][0]
    assert (elected.leader, elected.isr) == (other, (other,))


def test_a_returning_broker_gets_its_replicas_and_offline_new_partitions_come_online():
    c, _ = _cluster(live=(1, 2))
    effects = c.on_brokers_started([3])
    assert _writes(effects)[("u", 0)] == (PartitionState((3,), 3, 0, (3,), 0), None)
    lai = {e.broker_id: {(t, p) for t, p, *_ in e.partitions} for e in effects
           if isinstance(e, SendLeaderAndIsr)}
    assert lai[3] == {("t", 0), ("t", 1), ("u", 0)}
    ums = [e for e in effects if isinstance(e, SendUpdateMetadata)]
    # Kafka's onBrokerStartup: the others learn the live brokers, the new one every
    # partition, then every live broker the partitions that changed.
    assert [(um.broker_ids, len(um.partitions)) for um in ums] == [((1, 2), 0), ((3,), 2), ((1, 2, 3), 1)]
    assert effects.index(ums[1]) < min(i for i, e in enumerate(effects) if isinstance(e, SendLeaderAndIsr))


def test_alter_partition_is_fenced_by_leader_and_partition_epochs():
    c, _ = _cluster()
    state = c.states[("t", 0)]
    assert c.on_alter_partition(2, "t", 0, 0, (1, 2), 0)[0] == ErrorCode.INVALID_REQUEST  # not the leader
    assert c.on_alter_partition(1, "t", 0, 5, (1, 2), 0)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert c.on_alter_partition(1, "t", 0, 0, (1, 2), 7)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert c.on_alter_partition(1, "t", 0, 0, (2, 3), 0)[0] == ErrorCode.INVALID_REQUEST  # leader missing
    assert c.on_alter_partition(1, "x", 0, 0, (1,), 0)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    code, effects = c.on_alter_partition(1, "t", 0, 0, (1, 2), 0)
    assert code == ErrorCode.NONE
    assert _writes(effects)[("t", 0)] == (PartitionState((1, 2, 3), 1, 0, (1, 2), 1), 0)
    c.on_brokers_failed([3])
    assert c.on_alter_partition(1, "t", 0, c.states[("t", 0)].leader_epoch, (1, 2, 3),
                                c.states[("t", 0)].partition_epoch)[0] == ErrorCode.INELIGIBLE_REPLICA
    assert state.isr == (1, 2, 3)  # states are values: the old one is untouched


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([1, 2, 3])), max_size=30))
def test_invariants_over_failures_and_returns(events):
    c, _ = _cluster()
    versions = {tp: s.partition_epoch for tp, s in c.states.items()}
    for fail, broker in events:
        effects = c.on_brokers_failed([broker]) if fail else c.on_brokers_started([broker])
        for tp, (state, expected) in _writes(effects).items():
            # Each write is fenced on the version the previous one left.
            assert expected == versions.get(tp) and state.partition_epoch == (
                0 if expected is None else expected + 1)
            versions[tp] = state.partition_epoch
        for tp, state in c.states.items():
            assert state.isr and set(state.isr) <= set(state.replicas)
            if state.leader != -1:
                # A leader is live and in the ISR; the ISR's members are live.
                assert state.leader in c.live_brokers and state.leader in state.isr
                assert set(state.isr) <= c.live_brokers


def _failed_over(live, states, assignments):
    """A new controller's state as read from ZooKeeper."""
    c = ControllerState(EPOCH + 1, set(live))
    c.assignments = dict(assignments)
    c.states = dict(states)
    return c


def test_failover_elects_what_needs_it_and_tells_every_broker_everything():
    assignments = {("t", 0): (1, 2, 3), ("t", 1): (2, 3, 1), ("n", 0): (3, 1)}
    states = {("t", 0): PartitionState((1, 2, 3), 1, 4, (1, 2, 3), 7),  # leader 1 died meanwhile
              ("t", 1): PartitionState((2, 3, 1), 2, 2, (2, 3), 3)}  # fine as it is
    c = _failed_over({2, 3}, states, assignments)  # ("n", 0): created, never elected
    effects = c.on_controller_failover()
    writes = _writes(effects)
    assert writes == {("t", 0): (PartitionState((1, 2, 3), 2, 5, (2, 3), 8), 7),
                      ("n", 0): (PartitionState((3, 1), 3, 0, (3,), 0), None)}
    kinds = [type(e).__name__ for e in effects]
    assert kinds == ["WritePartitionState"] * 2 + ["SendUpdateMetadata"] + ["SendLeaderAndIsr"] * 2
    [um] = [e for e in effects if isinstance(e, SendUpdateMetadata)]
    assert um.broker_ids == (2, 3) and um.controller_epoch == EPOCH + 1
    assert {(t, p) for t, p, _ in um.partitions} == {("t", 0), ("t", 1), ("n", 0)}
    lai = {e.broker_id: {(t, p): (s.leader, is_new) for t, p, s, is_new in e.partitions}
           for e in effects if isinstance(e, SendLeaderAndIsr)}
    assert lai == {2: {("t", 0): (2, False), ("t", 1): (2, False)},
                   3: {("t", 0): (2, False), ("t", 1): (2, False), ("n", 0): (3, True)}}


def test_a_lost_version_is_decided_again_from_what_zookeeper_holds():
    c, _ = _cluster()
    c.on_brokers_failed([3])  # t-0 ISR (1, 2) at version 1 in the controller's view
    # Meanwhile leader 1 shrank t-0's ISR itself to (1,) (version 2); broker 1 then dies.
    c.live_brokers.discard(1)
    effects = c.on_conflicts({("t", 0): PartitionState((), 1, 1, (1,), 2)})
    # No live ISR member: offline, the last ISR member kept, fenced on version 2.
    assert _writes(effects)[("t", 0)] == (PartitionState((1, 2, 3), -1, 2, (1,), 3), 2)


def test_isr_change_notifications_replace_states_and_go_to_every_broker():
    c, _ = _cluster()
    effects = c.on_isr_changed({("t", 0): PartitionState((), 1, 0, (1, 2), 1), ("gone", 0): None,
                                ("x", 9): PartitionState((), 1, 0, (1,), 1)})
    assert c.states[("t", 0)] == PartitionState((1, 2, 3), 1, 0, (1, 2), 1)  # replicas from the assignment
    [um] = effects
    assert isinstance(um, SendUpdateMetadata) and um.broker_ids == (1, 2, 3)
    assert um.partitions == (("t", 0, c.states[("t", 0)]),)
    assert c.on_isr_changed({}) == []


def test_topic_deletion_waits_for_every_replica_then_removes_the_topic():
    c, _ = _cluster()
    c.on_brokers_failed([3])
    effects = c.on_topics_deleted(["t"])
    [um] = [e for e in effects if isinstance(e, SendUpdateMetadata)]
    assert {(t, p) for t, p, _ in um.partitions} == {("t", 0), ("t", 1)}
    assert all(s.leader == LEADER_DURING_DELETE for _, _, s in um.partitions)
    stops = {e.broker_id: e.partitions for e in effects if isinstance(e, SendStopReplica)}
    assert stops == {1: (("t", 0), ("t", 1)), 2: (("t", 0), ("t", 1))}
    assert all(e.delete for e in effects if isinstance(e, SendStopReplica))
    # No election for a topic being deleted.
    assert ("t", 0) not in _writes(c.on_brokers_failed([1]))
    assert c.on_replicas_deleted(2, [("t", 0), ("t", 1)]) == []
    # Broker 3 (a replica) was down: it gets its StopReplica when it returns.
    back = c.on_brokers_started([3])
    assert [e.partitions for e in back if isinstance(e, SendStopReplica)] == [(("t", 0), ("t", 1))]
    assert not any(isinstance(e, SendLeaderAndIsr) and any(t == "t" for t, *_ in e.partitions) for e in back)
    c.on_brokers_started([1])
    assert c.on_replicas_deleted(3, [("t", 0), ("t", 1)]) == []
    assert c.on_replicas_deleted(1, [("t", 0), ("t", 1)]) == [DeleteTopic("t")]
    assert not any(t == "t" for t, _ in c.assignments) and not any(t == "t" for t, _ in c.states)
    assert "t" not in c.deleting
    # A marker for a topic never known is removed at once.
    assert c.on_topics_deleted(["never"]) == [DeleteTopic("never")]


def test_failover_resumes_a_deletion_and_drops_markers_of_unknown_topics():
    assignments = {("d", 0): (1, 2), ("k", 0): (1, 2)}
    states = {("d", 0): PartitionState((1, 2), 1, 0, (1, 2), 0), ("k", 0): PartitionState((1, 2), 1, 0, (1, 2), 0)}
    c = _failed_over({1, 2}, states, assignments)
    effects = c.on_controller_failover(["d", "ghost"])
    [um] = [e for e in effects if isinstance(e, SendUpdateMetadata)]
    assert {(t, p): s.leader for t, p, s in um.partitions} == {("d", 0): LEADER_DURING_DELETE, ("k", 0): 1}
    assert all(t == "k" for e in effects if isinstance(e, SendLeaderAndIsr) for t, *_ in e.partitions)
    assert {e.broker_id: e.partitions for e in effects if isinstance(e, SendStopReplica)} == {
        1: (("d", 0),), 2: (("d", 0),)}
    assert effects[-1] == DeleteTopic("ghost") and "d" in c.deleting


# -- controlled shutdown, replica elections, auto rebalance (issue 14) ------------------------------

def test_controlled_shutdown_moves_leaderships_and_shrinks_isrs():
    c, _ = _cluster()
    error, effects = c.on_controlled_shutdown(1)
    assert error == ErrorCode.NONE and c.shutting_down == {1}
    writes = _writes(effects)
    # t-0 was led by 1: the next ISR member not shutting down leads, 1 leaves the ISR, epoch + 1
    assert writes[("t", 0)] == (PartitionState((1, 2, 3), 2, 1, (2, 3), 1), 0)
    # t-1 is followed by 1: StopReplica(no delete) to 1, 1 leaves the ISR, and its
    # LeaderAndIsr goes to the others only
    assert writes[("t", 1)] == (PartitionState((2, 3, 1), 2, 1, (2, 3), 1), 0)
    [stop] = [e for e in effects if isinstance(e, SendStopReplica)]
    assert (stop.broker_id, stop.partitions, stop.delete) == (1, (("t", 1),), False)
    to_1 = [p[:2] for e in effects if isinstance(e, SendLeaderAndIsr) and e.broker_id == 1 for p in e.partitions]
    assert to_1 == [("t", 0)]  # it becomes t-0's follower, and hears nothing of t-1
    assert c.partitions_led_by(1) == []
    # u-0 (one replica, on 3): 3's shutdown cannot move it: it remains
    assert c.on_controlled_shutdown(3)[0] == ErrorCode.NONE and c.partitions_led_by(3) == [("u", 0)]
    # a broker in controlled shutdown is never elected: 2 failing leaves t-0 without a leader
    assert c.states[("t", 0)].leader == 2
    c.on_brokers_failed([2])
    assert c.states[("t", 0)].leader == -1
    assert c.on_controlled_shutdown(9) == (ErrorCode.BROKER_NOT_AVAILABLE, [])


def test_preferred_and_unclean_elections():
    c, _ = _cluster()
    c.on_brokers_failed([1])
    c.on_brokers_started([1])
    assert c.states[("t", 0)].leader == 2  # skewed: 1 is back but leads nothing
    # 1 is not in t-0's ISR yet: the preferred replica cannot lead
    results, effects = c.on_replica_election([("t", 0), ("t", 1), ("x", 0)], preferred=True)
    assert results == {("t", 0): (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None),
                       ("t", 1): (ErrorCode.ELECTION_NOT_NEEDED, None),
                       ("x", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)}
    assert effects == []
    c.states[("t", 0)] = PartitionState((1, 2, 3), 2, 1, (2, 3, 1), 2)  # the leader added 1 back
    results, effects = c.on_replica_election(None, preferred=True)
    assert results[("t", 0)] == (ErrorCode.NONE, 1)
    assert _writes(effects)[("t", 0)] == (PartitionState((1, 2, 3), 1, 2, (2, 3, 1), 3), 2)
    # unclean: only for a partition without a live leader; any live replica then
    c.on_brokers_failed([3])
    assert c.states[("u", 0)].leader == -1
    results, _ = c.on_replica_election([("u", 0), ("t", 1)], preferred=False)
    assert results == {("u", 0): (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None),
                       ("t", 1): (ErrorCode.ELECTION_NOT_NEEDED, None)}
    c.states[("t", 1)] = PartitionState((2, 3, 1), -1, 5, (3,), 6)  # ISR only the dead broker
    results, effects = c.on_replica_election([("t", 1)], preferred=False)
    assert results == {("t", 1): (ErrorCode.NONE, 2)}
    assert _writes(effects)[("t", 1)][0].isr == (2,)


def test_auto_leader_rebalance_follows_the_imbalance_ratio():
    c = ControllerState(EPOCH, {1, 2})
    c.on_new_partitions({("t", p): (1, 2) for p in range(4)})
    for p in range(2):  # 2 of 4 led by 2, ISR full: 50 % imbalance for broker 1
        c.states[("t", p)] = PartitionState((1, 2), 2, 1, (1, 2), 1)
    assert c.on_auto_leader_rebalance(50) == []  # not more than 50 %
    effects = c.on_auto_leader_rebalance(10)
    assert sorted(_writes(effects)) == [("t", 0), ("t", 1)]
    assert all(c.states[("t", p)].leader == 1 for p in range(4))


def test_a_shutting_down_broker_put_back_in_an_isr_is_taken_out_again():
    c, _ = _cluster()
    c.on_controlled_shutdown(1)
    assert c.states[("t", 0)].isr == (2, 3)
    # t-0's new leader (2) added 1 back (it still fetched) and notified the change
    readded = PartitionState((1, 2, 3), 2, 1, (2, 3, 1), 2)
    effects = c.on_isr_changed({("t", 0): readded})
    assert _writes(effects)[("t", 0)] == (PartitionState((1, 2, 3), 2, 2, (2, 3), 3), 2)
    [stop] = [e for e in effects if isinstance(e, SendStopReplica)]
    assert (stop.broker_id, stop.partitions, stop.delete) == (1, (("t", 0),), False)
    assert 1 not in {e.broker_id for e in effects if isinstance(e, SendLeaderAndIsr)}
    # an ISR change without the shutting-down broker is only announced
    effects = c.on_isr_changed({("t", 1): c.states[("t", 1)]})
    assert [type(e) for e in effects] == [SendUpdateMetadata]
