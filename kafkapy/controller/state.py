"""What the controller knows, and the partition state changes it decides.

Kafka's ControllerContext plus the decisions of its PartitionStateMachine and
ReplicaStateMachine (ZooKeeper mode, 3.9), as plain data and pure methods:
each event method returns the effects to carry out, in order, and has already
applied them to this state. The I/O side writes each ``WritePartitionState``
with its ``expected_version`` as the fence (a newer controller's write makes
it fail; the controller then resigns, as Kafka's does) and sends the
requests.

Kafka's rules kept here:
* a new partition's leader is its first live replica in assignment order and
  its ISR its live replicas, at leader epoch 0; with no live replica it stays
  offline (no state written);
* a broker failing: partitions it led elect the first live replica of the
  assignment that is in the ISR (or, with unclean election on, any live
  replica, which then is the whole ISR); the ISR keeps its live members, the
  leader epoch goes up by one. A partition where no leader can be elected is
  offline: leader -1, and the failed broker leaves the ISR unless it is its
  last member (Kafka keeps the last one, so a clean election stays possible
  when it returns). Partitions it followed drop it from the ISR (again not
  the last member), leader epoch + 1;
* a broker starting: its offline partitions are elected again with it live;
* AlterPartition (a leader changing the ISR): accepted only from the current
  leader at the current leader epoch and partition epoch (the znode
  version), with an ISR of live assigned replicas that contains the leader;
  the leader epoch stays, the partition epoch goes up.

Every change is sent as LeaderAndIsr to the partition's live replicas and
UpdateMetadata to every live broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from kafkapy.coordination.assignment import elect_leader_and_isr, initial_leader_and_isr
from kafkapy.coordination.metadata import NO_BROKER, PartitionState
from kafkapy.protocol.errors import ErrorCode

# -- effects -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WritePartitionState:
    """Write ``/brokers/topics/<topic>/partitions/<partition>/state``: create it
    when ``expected_version`` is None, else a set conditional on that version."""

    topic: str
    partition: int
    state: PartitionState
    controller_epoch: int
    expected_version: int | None


@dataclass(frozen=True)
class SendLeaderAndIsr:
    broker_id: int
    controller_epoch: int
    partitions: tuple  # ((topic, partition, PartitionState, is_new), ...)


@dataclass(frozen=True)
class SendUpdateMetadata:
    broker_ids: tuple
    controller_epoch: int
    partitions: tuple  # ((topic, partition, PartitionState), ...)


# -- state ---------------------------------------------------------------------------------------


@dataclass
class ControllerState:
    controller_epoch: int
    live_brokers: set = field(default_factory=set)
    assignments: dict = field(default_factory=dict)  # (topic, partition) -> replicas tuple
    states: dict = field(default_factory=dict)  # (topic, partition) -> PartitionState
    # topic -> its unclean.leader.election.enable (Kafka's default: false)
    unclean_election: Callable[[str], bool] = field(default=lambda topic: False)

    # -- events ------------------------------------------------------------------------------
    def on_new_partitions(self, assignments: dict) -> list:
        """Topics or partitions created: ``{(topic, partition): replicas}``."""
        changed = []
        for tp, replicas in sorted(assignments.items()):
            self.assignments[tp] = tuple(replicas)
            first = initial_leader_and_isr(replicas, self.live_brokers)
            if first is None:
                continue  # no live replica: the partition stays offline (NewPartition)
            leader, isr = first
            changed.append((tp, PartitionState(tuple(replicas), leader, 0, tuple(isr), 0), None, True))
        return self._apply(changed)

    def on_brokers_failed(self, broker_ids) -> list:
        """Kafka's onBrokerFailure -> onReplicasBecomeOffline."""
        dead = set(broker_ids)
        self.live_brokers -= dead
        changed = []
        for tp, state in sorted(self.states.items()):
            if state.leader in dead:
                elected = elect_leader_and_isr(state.replicas, state.isr, self.live_brokers,
                                               self.unclean_election(tp[0]))
                if elected is not None:
                    leader, isr, _recovering = elected
                else:
                    leader, isr = NO_BROKER, _without(state.isr, dead)
            elif dead & set(state.isr):
                leader, isr = state.leader, _without(state.isr, dead)
            else:
                continue
            if (leader, isr) != (state.leader, state.isr):
                changed.append((tp, replace(state, leader=leader, isr=isr,
                                            leader_epoch=state.leader_epoch + 1), state, False))
        effects = self._apply(changed)
        if not changed:
            effects.append(self._update_metadata(()))
        return effects

    def on_brokers_started(self, broker_ids) -> list:
        """Kafka's onBrokerStartup: every broker learns the new ones, the new
        ones get their replicas (LeaderAndIsr), offline partitions they can
        lead are elected again."""
        started = set(broker_ids)
        self.live_brokers |= started
        changed = []
        for tp, state in sorted(self.states.items()):
            if state.leader == NO_BROKER:
                elected = elect_leader_and_isr(state.replicas, state.isr, self.live_brokers,
                                               self.unclean_election(tp[0]))
                if elected is not None:
                    leader, isr, _recovering = elected
                    changed.append((tp, replace(state, leader=leader, isr=isr,
                                                leader_epoch=state.leader_epoch + 1), state, False))
        for tp, replicas in sorted(self.assignments.items()):
            if tp not in self.states and started & set(replicas):
                first = initial_leader_and_isr(replicas, self.live_brokers)
                if first is not None:
                    leader, isr = first
                    changed.append((tp, PartitionState(tuple(replicas), leader, 0, tuple(isr), 0),
                                    None, True))
        touched = {tp for tp, *_ in changed}
        theirs = {broker_id: [(tp[0], tp[1], state, False) for tp, state in sorted(self.states.items())
                              if broker_id in state.replicas and tp not in touched]
                  for broker_id in started}
        effects = self._apply(changed, theirs)
        if not changed:
            effects.append(self._update_metadata(()))
        return effects

    def on_alter_partition(self, broker_id: int, topic: str, partition: int, leader_epoch: int,
                           new_isr, partition_epoch: int):
        """AlterPartition from a leader: ``(error_code, effects)``."""
        tp = (topic, partition)
        state = self.states.get(tp)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []
        if broker_id != state.leader:
            return ErrorCode.INVALID_REQUEST, []
        if leader_epoch != state.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, []
        if partition_epoch != state.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION, []
        new_isr = tuple(new_isr)
        if state.leader not in new_isr or not set(new_isr) <= set(state.replicas):
            return ErrorCode.INVALID_REQUEST, []
        if not set(new_isr) <= self.live_brokers:
            return ErrorCode.INELIGIBLE_REPLICA, []
        if new_isr == state.isr:
            return ErrorCode.NONE, []
        return ErrorCode.NONE, self._apply([(tp, replace(state, isr=new_isr), state, False)])

    # -- helpers -----------------------------------------------------------------------------
    def _apply(self, changed, also=None) -> list:
        """``changed``: ``(tp, new state, old state or None, is_new)``. Records
        them (partition epoch = the znode version each write will have) and
        returns the writes, then one LeaderAndIsr per broker (with ``also``:
        ``{broker: [(topic, partition, state, is_new)]}`` of unchanged
        partitions a broker must learn), then UpdateMetadata."""
        effects = []
        leader_and_isr: dict[int, list] = {b: list(parts) for b, parts in (also or {}).items() if parts}
        for tp, new, old, is_new in changed:
            expected = None if old is None else old.partition_epoch
            if old is not None:
                new = replace(new, partition_epoch=old.partition_epoch + 1)
            self.states[tp] = new
            effects.append(WritePartitionState(tp[0], tp[1], new, self.controller_epoch, expected))
            for replica in new.replicas:
                if replica in self.live_brokers:
                    leader_and_isr.setdefault(replica, []).append((tp[0], tp[1], new, is_new))
        for broker_id in sorted(leader_and_isr):
            effects.append(SendLeaderAndIsr(broker_id, self.controller_epoch,
                                            tuple(leader_and_isr[broker_id])))
        if changed:
            effects.append(self._update_metadata(tuple((tp[0], tp[1], self.states[tp])
                                                       for tp, *_ in changed)))
        return effects

    def _update_metadata(self, partitions) -> SendUpdateMetadata:
        return SendUpdateMetadata(tuple(sorted(self.live_brokers)), self.controller_epoch, partitions)


def _without(isr, dead) -> tuple:
    """The ISR less the ``dead`` brokers, but never empty (Kafka keeps the last member)."""
    kept = tuple(r for r in isr if r not in dead)
    return kept if kept else tuple(isr[-1:])
