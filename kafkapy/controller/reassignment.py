"""Partition reassignment decisions of the controller (Kafka 3.9's
KafkaController.onPartitionReassignment and the calls around it, ZooKeeper
mode), as pure methods mixed into ``ControllerState``.

Names are Kafka's: RS the replicas assigned now, ORS the replicas before the
reassignment (RS less the adding ones), TRS the target (RS less the removing
ones), AR = TRS - ORS being added, RR = ORS - TRS being removed. While a
reassignment runs, ``assignments[tp]`` holds RS = TRS followed by the
ORS members not in it, and ``reassigning[tp]`` holds ``(AR, RR)``; both are
written to ``/brokers/topics/<t>`` (``adding_replicas`` /
``removing_replicas``, Kafka's topic znode v2+), the only place ORS is kept,
so a new controller resumes from there.

The steps (Kafka's, with one difference noted):

* U (``update_current_reassignment``): the topic znode gets RS/AR/RR, then
  memory; replicas of a previous reassignment the new one no longer needs
  get StopReplica(delete) (they leave the ISR with the next state write).
* A (``reassignment_step``, TRS not yet all in the ISR): the leader epoch
  goes up (state znode), LeaderAndIsr to every live member of RS (the added
  ones as new replicas), UpdateMetadata to every broker. The added
  replicas then fetch, and the leader's ISR job adds them as they catch up;
  each ISR change notification comes back here.
* B (``reassignment_step``, TRS all in the ISR): one state write whose
  leader is the current one if it is live and in TRS, else the first TRS
  replica that is live and in the ISR (Kafka's
  ReassignPartitionLeaderElectionStrategy), whose ISR loses RR, with replicas
  TRS and the leader epoch + 1; LeaderAndIsr to TRS, StopReplica(delete) to
  the live RR; then the topic znode gets RS = TRS with no AR/RR, the
  partition leaves ``/admin/reassign_partitions`` if it was there with
  these replicas, and UpdateMetadata goes to every broker. Kafka writes the
  leader move (B3) and the ISR shrink (B4) as two state writes in a row;
  here they are one, because a kafkapy leader's slot keeps per-replica words
  only for its assigned replicas and must never hold an ISR member outside
  them.
* Cancel (null target): the target is ORS, so AR is stopped and deleted and
  the partition goes back to its original replicas (their order kept unless
  TRS reordered them, as in Kafka).

``reassignment_step`` returns the effects in chunks that the caller carries
out in order: a chunk's partition-state write may lose its znode version to
a leader's ISR write, and then the caller re-reads the state and asks again
rather than going on to the next chunk.

Ownership: as ``ControllerState``'s, the elected controller's event thread.
"""

from __future__ import annotations

from dataclasses import replace

from kafkapy.controller.effects import (
    RemoveZkReassignment,
    SendLeaderAndIsr,
    SendStopReplica,
    WritePartitionState,
    WriteTopicAssignment,
)
from kafkapy.metadata.model import NO_BROKER
from kafkapy.protocol.errors import ErrorCode


def reassign_to(replicas, adding, target) -> tuple:
    """Kafka's ReplicaAssignment.reassignTo: ``(RS, AR, RR)`` for moving from
    the assignment ``replicas`` (of which ``adding`` are being added) to
    ``target``."""
    origin = [r for r in replicas if r not in adding]
    full = list(dict.fromkeys(list(target) + origin))
    return (tuple(full), tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target))


class ReassignmentMixin:
    """Reassignment methods of ``ControllerState`` (its ``assignments``,
    ``states``, ``live_brokers``, ``deleting``, ``topic_ids`` and
    ``reassigning``)."""

    # -- reading ---------------------------------------------------------------------------
    def full_assignment(self, tp) -> tuple:
        """``(RS, AR, RR)`` of a known partition."""
        adding, removing = self.reassigning.get(tp, ((), ()))
        return tuple(self.assignments[tp]), tuple(adding), tuple(removing)

    def target_replicas(self, tp) -> tuple:
        replicas, _adding, removing = self.full_assignment(tp)
        return tuple(r for r in replicas if r not in removing)

    def list_reassignments(self, partitions=None) -> dict:
        """Kafka's processListPartitionReassignments: ``{tp: (RS, AR, RR)}`` of the
        partitions asked (None: all) that are being reassigned."""
        wanted = sorted(self.reassigning) if partitions is None else sorted(set(partitions))
        return {tp: self.full_assignment(tp) for tp in wanted if tp in self.reassigning and tp in self.assignments}

    # -- validation ------------------------------------------------------------------------
    def validate_reassignment(self, tp, replicas):
        """Kafka's validateReplicas: an error code, or None."""
        if not replicas:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
        if len(set(replicas)) != len(replicas):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}")
        if any(r < 0 for r in replicas):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(replicas)}"
        current, adding = (self.full_assignment(tp)[:2] if tp in self.assignments else ((), ()))
        _full, new_adding, _removing = reassign_to(current, adding, replicas)
        if not set(new_adding) <= self.live_brokers:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Replica assignment has brokers that are not alive. Replica list: {list(new_adding)}, "
                    f"live broker list: {sorted(self.live_brokers)}")
        return None

    def build_reassignment(self, tp, target):
        """Kafka's maybeBuildReassignment: the new ``(RS, AR, RR)``; a null target
        cancels (back to ORS) and is None when nothing is being reassigned."""
        if tp not in self.assignments:
            return None if target is None else reassign_to((), (), target)
        replicas, adding, removing = self.full_assignment(tp)
        if adding or removing:
            origin = tuple(r for r in replicas if r not in adding)
            return reassign_to(replicas, adding, origin if target is None else target)
        return None if target is None else reassign_to(replicas, adding, target)

    def reassignment_refused(self, tp):
        """Kafka's maybeTriggerPartitionReassignment checks: an error code, or None."""
        if tp[0] in self.deleting or tp not in self.assignments:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return None

    # -- steps -----------------------------------------------------------------------------
    def update_current_reassignment(self, tp, new) -> list:
        """Step U: ``new`` = ``(RS, AR, RR)``. The topic znode write, then
        StopReplica(delete) for the replicas the previous reassignment added that
        ``new`` does not keep."""
        current = self.full_assignment(tp)
        if tuple(map(tuple, new)) == current:
            return []
        replicas, adding, removing = new
        self.assignments[tp] = tuple(replicas)
        if adding or removing:
            self.reassigning[tp] = (tuple(adding), tuple(removing))
        else:
            self.reassigning.pop(tp, None)
        effects = [self.topic_assignment(tp[0])]
        unneeded = [r for r in current[0] if r not in replicas]
        effects += self._stop_deleted(tp, unneeded)
        return effects

    def reassignment_step(self, tp) -> list:
        """Step A or B for one partition (``[chunk, ...]``, see the module
        docstring); ``[]`` when nothing can be done now (no state, or no TRS
        replica live and in the ISR to lead)."""
        state = self.states.get(tp)
        if tp not in self.assignments or state is None:
            return []
        replicas, adding, removing = self.full_assignment(tp)
        target = tuple(r for r in replicas if r not in removing)
        if not self.reassignment_complete(tp):
            leader = state.leader
            if leader not in replicas:
                leader = next((r for r in replicas if r in self._electable() and r in state.isr), NO_BROKER)
            isr = tuple(r for r in state.isr if r in replicas) or ((leader,) if leader != NO_BROKER else state.isr)
            new = replace(state, replicas=replicas, leader=leader, isr=isr, leader_epoch=state.leader_epoch + 1)
            return [self._reassignment_write(tp, new, state, replicas, set(adding))]
        leader = state.leader
        if leader not in target or leader not in self._electable():
            leader = next((r for r in target if r in self._electable() and r in state.isr), None)
            if leader is None:
                return []
        isr = tuple(r for r in state.isr if r in target)
        new = replace(state, replicas=target, leader=leader, isr=isr, leader_epoch=state.leader_epoch + 1)
        first = self._reassignment_write(tp, new, state, target, set(), update_metadata=False)
        first += self._stop_deleted(tp, removing)
        # B2 in memory; B6 the topic znode; B7 /admin/reassign_partitions; B8 UpdateMetadata
        self.assignments[tp] = target
        self.reassigning.pop(tp, None)
        second = [self.topic_assignment(tp[0]), RemoveZkReassignment(((tp[0], tp[1], target),)),
                  self._update_metadata(((tp[0], tp[1], self.states[tp]),))]
        return [first, second]

    def reassignment_complete(self, tp) -> bool:
        """Kafka's isReassignmentComplete: not being reassigned, or TRS within the ISR."""
        if tp not in self.reassigning:
            return True
        state = self.states.get(tp)
        return state is not None and set(self.target_replicas(tp)) <= set(state.isr)

    def reassignments_to_resume(self, started=None) -> list:
        """Partitions being reassigned (Kafka's maybeResumeReassignments): all of
        them at failover, or those whose TRS has one of the ``started`` brokers."""
        return [tp for tp in sorted(self.reassigning) if tp in self.assignments and tp[0] not in self.deleting
                and (started is None or set(self.target_replicas(tp)) & set(started))]

    def topic_assignment(self, topic: str) -> WriteTopicAssignment:
        parts = sorted((p, tuple(r)) for (t, p), r in self.assignments.items() if t == topic)
        adding = tuple((tp[1], a) for tp, (a, _r) in sorted(self.reassigning.items()) if tp[0] == topic and a)
        removing = tuple((tp[1], r) for tp, (_a, r) in sorted(self.reassigning.items()) if tp[0] == topic and r)
        return WriteTopicAssignment(topic, self.topic_ids.get(topic), tuple(parts), adding, removing)

    # -- helpers ---------------------------------------------------------------------------
    def _reassignment_write(self, tp, new, old, recipients, added, update_metadata: bool = True) -> list:
        """The state write of a step, LeaderAndIsr to the live ``recipients`` (the
        ``added`` ones as new replicas), and UpdateMetadata."""
        new = replace(new, partition_epoch=old.partition_epoch + 1)
        self.states[tp] = new
        effects = [WritePartitionState(tp[0], tp[1], new, self.controller_epoch, old.partition_epoch)]
        for broker_id in sorted(set(recipients) & self.live_brokers):
            effects.append(SendLeaderAndIsr(broker_id, self.controller_epoch,
                                            ((tp[0], tp[1], new, broker_id in added),)))
        if update_metadata:
            effects.append(self._update_metadata(((tp[0], tp[1], new),)))
        return effects

    def _stop_deleted(self, tp, brokers) -> list:
        """StopReplica(delete) to the live ``brokers`` for ``tp`` (Kafka's
        OfflineReplica -> ReplicaDeletionStarted -> NonExistentReplica)."""
        return [SendStopReplica(b, self.controller_epoch, (tp,), True)
                for b in sorted(set(brokers) & self.live_brokers)]


__all__ = ["ReassignmentMixin", "reassign_to"]
