"""The controller's partition reassignment decisions (controller/reassignment.py),
without I/O: Kafka 3.9's onPartitionReassignment steps as effects."""

from dataclasses import replace

from kafkapy.controller.effects import (
    RemoveZkReassignment,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    WritePartitionState,
    WriteTopicAssignment,
)
from kafkapy.controller.reassignment import reassign_to
from kafkapy.controller.state import ControllerState
from kafkapy.metadata.model import PartitionState
from kafkapy.protocol.errors import ErrorCode

TP = ("t", 0)


def _state(replicas=(1, 2), leader=1, isr=(1, 2), live=(1, 2, 3)) -> ControllerState:
    s = ControllerState(5, set(live))
    s.assignments[TP] = tuple(replicas)
    s.states[TP] = PartitionState(tuple(replicas), leader, 3, tuple(isr), 7)
    s.topic_ids["t"] = None
    return s


def _of(effects, kind):
    return [e for e in effects if isinstance(e, kind)]


def test_reassign_to_is_kafkas():
    # Kafka's own example: ORS {1,2,3}, TRS {4,5,6}
    assert reassign_to((1, 2, 3), (), (4, 5, 6)) == ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    # cancelling [3,4,2] over [1,2,3]: RS [3,4,2,1], ORS [3,2,1] (the order is not restored)
    assert reassign_to((3, 4, 2, 1), (4,), (3, 2, 1)) == ((3, 2, 1), (), ())
    assert reassign_to((1, 2), (), (1, 2, 3)) == ((1, 2, 3), (3,), ())


def test_a_move_writes_rs_then_starts_the_new_replicas_then_completes_on_the_isr():
    s = _state()
    new = s.build_reassignment(TP, (2, 3))
    assert new == ((2, 3, 1), (3,), (1,))
    effects = s.update_current_reassignment(TP, new)
    assert effects == [WriteTopicAssignment("t", None, ((0, (2, 3, 1)),), ((0, (3,)),), ((0, (1,)),))]
    assert s.list_reassignments() == {TP: ((2, 3, 1), (3,), (1,))}
    (chunk,) = s.reassignment_step(TP)  # phase A
    (write,) = _of(chunk, WritePartitionState)
    assert (write.state.replicas, write.state.leader, write.state.leader_epoch, write.state.isr,
            write.expected_version) == ((2, 3, 1), 1, 4, (1, 2), 7)
    assert {(e.broker_id, e.partitions[0][3]) for e in _of(chunk, SendLeaderAndIsr)} == {(1, False), (2, False),
                                                                                          (3, True)}
    assert not s.reassignment_complete(TP) and s.reassignment_step(TP)[0]  # still A while 3 is out of the ISR
    s.states[TP] = replace(s.states[TP], isr=(1, 2, 3))  # the leader's ISR job added 3
    first, second = s.reassignment_step(TP)  # phase B
    (write,) = _of(first, WritePartitionState)
    assert (write.state.replicas, write.state.leader, write.state.isr) == ((2, 3), 2, (2, 3))  # leader off 1
    assert [(e.broker_id, e.delete) for e in _of(first, SendStopReplica)] == [(1, True)]
    assert sorted(e.broker_id for e in _of(first, SendLeaderAndIsr)) == [2, 3]
    assert second[0] == WriteTopicAssignment("t", None, ((0, (2, 3)),), (), ())
    assert second[1] == RemoveZkReassignment((("t", 0, (2, 3)),))
    assert isinstance(second[2], SendUpdateMetadata)
    assert s.assignments[TP] == (2, 3) and s.list_reassignments() == {}


def test_cancel_stops_the_added_replica_and_keeps_the_leader():
    s = _state()
    s.update_current_reassignment(TP, s.build_reassignment(TP, (2, 3)))
    s.reassignment_step(TP)
    s.states[TP] = replace(s.states[TP], isr=(1, 2, 3))  # 3 caught up; the cancel came first
    cancel = s.build_reassignment(TP, None)
    assert cancel == ((2, 1), (), ())
    effects = s.update_current_reassignment(TP, cancel)
    assert effects[0] == WriteTopicAssignment("t", None, ((0, (2, 1)),), (), ())
    assert [(e.broker_id, e.delete) for e in _of(effects, SendStopReplica)] == [(3, True)]
    first, _second = s.reassignment_step(TP)
    (write,) = _of(first, WritePartitionState)
    assert (write.state.replicas, write.state.leader, write.state.isr) == ((2, 1), 1, (1, 2))
    assert s.build_reassignment(TP, None) is None  # nothing left to cancel


def test_validation_and_refusals_as_kafka():
    s = _state()
    invalid = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert s.validate_reassignment(TP, ())[0] == invalid
    assert s.validate_reassignment(TP, (2, 2))[0] == invalid
    assert s.validate_reassignment(TP, (-1, 2))[0] == invalid
    assert s.validate_reassignment(TP, (2, 9))[0] == invalid  # 9 is not live
    assert s.validate_reassignment(TP, (1, 2, 3)) is None
    assert s.build_reassignment(("t", 4), None) is None  # NO_REASSIGNMENT_IN_PROGRESS
    assert s.reassignment_refused(("t", 4)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    s.deleting["t"] = set()
    assert s.reassignment_refused(TP) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_phase_b_waits_when_no_target_can_lead():
    s = _state(replicas=(1,), isr=(1,), live=(1, 2))
    s.update_current_reassignment(TP, s.build_reassignment(TP, (2,)))
    s.states[TP] = replace(s.states[TP], isr=(1, 2))
    s.live_brokers.discard(2)  # the only target died after it joined the ISR
    assert s.reassignment_step(TP) == []
    assert s.list_reassignments() == {TP: ((2, 1), (2,), (1,))}


def test_resume_after_failover_and_broker_start():
    s = _state(replicas=(2, 3, 1))
    s.reassigning[TP] = ((3,), (1,))
    assert s.reassignments_to_resume() == [TP]
    assert s.reassignments_to_resume(started=[3]) == [TP]
    assert s.reassignments_to_resume(started=[1]) == []  # 1 is leaving: nothing to resume for it
