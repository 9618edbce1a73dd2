"""The controller's part of a log-dir failure (Kafka 3.9 ZooKeeper mode:
onBrokerLogDirFailure, processLeaderAndIsrResponseReceived,
onReplicasBecomeOffline): pure state decisions."""

from kafkapy.controller.effects import SendLeaderAndIsr, SendStopReplica, SendUpdateMetadata, WritePartitionState
from kafkapy.controller.state import ControllerState
from kafkapy.metadata.model import PartitionState

EPOCH = 3


def _cluster():
    c = ControllerState(EPOCH, {1, 2, 3})
    c.on_new_partitions({("t", 0): (1, 2, 3), ("t", 1): (2, 1, 3), ("u", 0): (1, 3, 2)})
    return c


def _writes(effects):
    return {(e.topic, e.partition): e.state for e in effects if isinstance(e, WritePartitionState)}


def test_a_log_dir_event_asks_the_broker_about_every_replica_it_holds():
    c = _cluster()
    [request] = c.on_broker_log_dir_failure({1, 9})  # 9: not live, nothing to ask
    assert isinstance(request, SendLeaderAndIsr) and request.broker_id == 1
    assert [(t, p) for t, p, *_ in request.partitions] == [("t", 0), ("t", 1), ("u", 0)]
    assert not any(is_new for *_x, is_new in request.partitions)
    assert _writes(c.on_broker_log_dir_failure({1})) == {}  # asking changes nothing


def test_replicas_answered_storage_error_lose_leadership_and_isr_membership():
    c = _cluster()
    effects = c.on_leader_and_isr_response(1, offline=[("t", 0), ("t", 1)], online=[("u", 0)])
    writes = _writes(effects)
    # t-0 was led by 1: the next ISR member leads, 1 leaves the ISR, epoch + 1.
    assert writes[("t", 0)] == PartitionState((1, 2, 3), 2, 1, (2, 3), 1)
    # t-1 followed by 1: it only leaves the ISR.
    assert writes[("t", 1)] == PartitionState((2, 1, 3), 2, 1, (2, 3), 1)
    assert ("u", 0) not in writes  # on a healthy dir of broker 1: it keeps leading
    [stop] = [e for e in effects if isinstance(e, SendStopReplica)]
    assert (stop.broker_id, stop.partitions, stop.delete) == (1, (("t", 0), ("t", 1)), False)
    assert 1 not in {e.broker_id for e in effects if isinstance(e, SendLeaderAndIsr)}
    assert any(isinstance(e, SendUpdateMetadata) for e in effects)
    assert c.offline_replicas == {1: {("t", 0), ("t", 1)}}
    # Answered again (e.g. at a controller failover): nothing left to move.
    assert _writes(c.on_leader_and_isr_response(1, offline=[("t", 0), ("t", 1)], online=[])) == {}


def test_an_election_never_picks_another_replica_on_an_offline_dir():
    c = _cluster()
    c.on_leader_and_isr_response(2, offline=[("t", 0)], online=[])  # 2 follows t-0 from a failed dir
    writes = _writes(c.on_leader_and_isr_response(1, offline=[("t", 0)], online=[]))
    assert writes[("t", 0)].leader == 3 and writes[("t", 0)].isr == (3,)


def test_no_eligible_replica_leaves_the_partition_offline():
    c = ControllerState(EPOCH, {1, 2})
    c.on_new_partitions({("v", 0): (1,)})
    writes = _writes(c.on_leader_and_isr_response(1, offline=[("v", 0)], online=[]))
    assert writes[("v", 0)] == PartitionState((1,), -1, 1, (1,), 1)  # the last ISR member is kept


def test_a_restart_forgets_the_offline_replicas_and_tells_every_broker():
    c = _cluster()
    c.on_leader_and_isr_response(1, offline=[("t", 0)], online=[])
    c.on_brokers_failed([1])  # a bounce: failed, then started
    effects = c.on_brokers_started([1])
    assert c.offline_replicas == {}
    # The partition's state goes to every live broker again, without 1 offline
    # (their leaders may then take it back into the ISR), after any election.
    last = [e for e in effects if isinstance(e, SendUpdateMetadata)][-1]
    assert last.broker_ids == (1, 2, 3) and [(t, p) for t, p, _s in last.partitions] == [("t", 0)]
    assert last.partitions[0][2] == c.states[("t", 0)]
    # Online answers clear what a broker reported before.
    c.on_leader_and_isr_response(2, offline=[("t", 1)], online=[])
    c.on_leader_and_isr_response(2, offline=[], online=[("t", 1)])
    assert c.offline_replicas == {}
