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
  the leader epoch stays, the partition epoch goes up;
* controller failover (Kafka's onControllerFailover, after
  initializeControllerContext filled the state from ZooKeeper): partitions
  without a state are elected as new ones, partitions whose leader is not
  live as after a broker failure; then UpdateMetadata with every partition
  to every live broker and LeaderAndIsr to each live broker for all its
  replicas;
* ISR changes a leader wrote itself (Kafka's pre-AlterPartition path,
  ``/isr_change_notification``): the re-read states replace the known ones
  and go out as UpdateMetadata; an ISR a leader gave back a broker in
  controlled shutdown (it still fetched) loses it again, with StopReplica to
  it (Kafka 3.9's controller refuses such an ISR: INELIGIBLE_REPLICA);
* topic deletion (Kafka's TopicDeletionManager): UpdateMetadata with leader
  -2 (LeaderDuringDelete) for its partitions, StopReplica(delete) to each
  live replica; a replica on a dead broker waits for it to return (the
  deletion is held, as Kafka holds it); once every replica's StopReplica
  succeeded the topic leaves the state and its znodes are removed
  (``DeleteTopic``). Partitions of a topic being deleted are never elected.
* controlled shutdown (Kafka's doControlledShutdown): the broker is
  shutting down (no election picks it any more, though it stays live and
  gets its requests until its registration goes); each partition with more
  than one replica that it leads elects the first assigned replica that is
  live, in the ISR and not shutting down, the ISR losing the shutting-down
  brokers (ControlledShutdownPartitionLeaderElectionStrategy), leader epoch
  + 1; each it follows gets StopReplica (no delete) on it and drops it from
  the ISR (not the last member), leader epoch + 1, LeaderAndIsr to the other
  replicas. The answer is the partitions it still leads;
* replica leader election (Kafka's processReplicaLeaderElection and
  onReplicaElection): preferred, the first assigned replica if live and in
  the ISR (ISR kept); unclean, for a partition without a live leader, as
  after a failure with unclean election allowed. Per partition: the new
  leader, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE /
  ELIGIBLE_LEADERS_NOT_AVAILABLE, INVALID_TOPIC_EXCEPTION (being deleted),
  UNKNOWN_TOPIC_OR_PARTITION;
* the auto leader rebalance (checkAndTriggerAutoLeaderRebalance): per
  preferred broker, when more than ``leader.imbalance.per.broker.percentage``
  of the partitions it prefers are led elsewhere, a preferred election of
  those whose preferred replica can lead.

* partition reassignment (Kafka's onPartitionReassignment): the methods of
  ``ReassignmentMixin`` (controller/reassignment.py) over ``reassigning``.

Every change is sent as LeaderAndIsr to the partition's live replicas and
UpdateMetadata to every live broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from kafkapy.metadata.assignment import (
    controlled_shutdown_leader,
    elect_leader_and_isr,
    initial_leader_and_isr,
    preferred_leader,
)
from kafkapy.controller.effects import (
    DeleteTopic,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    WritePartitionState,
)
from kafkapy.controller.reassignment import ReassignmentMixin
from kafkapy.metadata.model import NO_BROKER, PartitionState
from kafkapy.protocol.errors import ErrorCode

# Kafka's LeaderAndIsr.LeaderDuringDelete: the leader UpdateMetadata carries for a
# partition of a topic being deleted (brokers drop it from their metadata).
LEADER_DURING_DELETE = -2


# -- state ---------------------------------------------------------------------------------------


@dataclass
class ControllerState(ReassignmentMixin):
    controller_epoch: int
    live_brokers: set = field(default_factory=set)
    assignments: dict = field(default_factory=dict)  # (topic, partition) -> replicas tuple
    states: dict = field(default_factory=dict)  # (topic, partition) -> PartitionState
    # topic -> its unclean.leader.election.enable (Kafka's default: false)
    unclean_election: Callable[[str], bool] = field(default=lambda topic: False)
    topic_ids: dict = field(default_factory=dict)  # topic -> uuid.UUID (UpdateMetadata, LeaderAndIsr)
    # topic being deleted -> {(partition, broker)} replicas whose StopReplica(delete) has not succeeded
    deleting: dict = field(default_factory=dict)
    # brokers in controlled shutdown (Kafka's shuttingDownBrokerIds): live, never elected
    shutting_down: set = field(default_factory=set)
    # broker -> {(topic, partition)} of its replicas on an offline log dir
    # (Kafka's replicasOnOfflineDirs), from LeaderAndIsr answers
    offline_replicas: dict = field(default_factory=dict)
    # partitions being reassigned -> (adding, removing) replicas (controller/reassignment.py)
    reassigning: dict = field(default_factory=dict)

    # -- events ------------------------------------------------------------------------------
    def on_new_partitions(self, assignments: dict) -> list:
        """Topics or partitions created: ``{(topic, partition): replicas}``."""
        changed = []
        for tp, replicas in sorted(assignments.items()):
            self.assignments[tp] = tuple(replicas)
            first = initial_leader_and_isr(replicas, self._electable())
            if first is None:
                continue  # no live replica: the partition stays offline (NewPartition)
            leader, isr = first
            changed.append((tp, PartitionState(tuple(replicas), leader, 0, tuple(isr), 0), None, True))
        return self._apply(changed)

    def on_brokers_failed(self, broker_ids) -> list:
        """Kafka's onBrokerFailure -> onReplicasBecomeOffline."""
        dead = set(broker_ids)
        self.live_brokers -= dead
        self.shutting_down -= dead
        changed = []
        for tp, state in sorted(self.states.items()):
            if tp[0] in self.deleting:
                continue
            if state.leader in dead:
                elected = elect_leader_and_isr(state.replicas, state.isr, self._electable(),
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
        back_online = self._log_dirs_back(started)  # their states are sent at the end
        existing = tuple(sorted(self.live_brokers - started))
        self.live_brokers |= started
        # Kafka's order: the brokers already live learn the new ones; the new
        # ones learn every partition (their image may be empty or old).
        effects = [SendUpdateMetadata(existing, self.controller_epoch, ()),
                   SendUpdateMetadata(tuple(sorted(started)), self.controller_epoch, self._all_partitions())]
        changed = []
        for tp, state in sorted(self.states.items()):
            if tp[0] in self.deleting:
                continue
            if state.leader == NO_BROKER:
                elected = elect_leader_and_isr(state.replicas, state.isr, self._electable(),
                                               self.unclean_election(tp[0]))
                if elected is not None:
                    leader, isr, _recovering = elected
                    changed.append((tp, replace(state, leader=leader, isr=isr,
                                                leader_epoch=state.leader_epoch + 1), state, False))
        for tp, replicas in sorted(self.assignments.items()):
            if tp not in self.states and started & set(replicas) and tp[0] not in self.deleting:
                first = initial_leader_and_isr(replicas, self._electable())
                if first is not None:
                    leader, isr = first
                    changed.append((tp, PartitionState(tuple(replicas), leader, 0, tuple(isr), 0),
                                    None, True))
        touched = {tp for tp, *_ in changed}
        theirs = {broker_id: [(tp[0], tp[1], state, False) for tp, state in sorted(self.states.items())
                              if broker_id in state.replicas and tp not in touched and tp[0] not in self.deleting]
                  for broker_id in started}
        effects += self._apply(changed, theirs)
        # a held deletion goes on: the returning replicas get their StopReplica
        effects += self._stop_replicas(started)
        return effects + self._states_to_all(back_online)

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

    def on_controller_failover(self, marked_for_deletion=()) -> list:
        """This controller was elected and ``live_brokers``, ``assignments``,
        ``states`` and ``topic_ids`` were read from ZooKeeper (Kafka's
        initializeControllerContext); ``marked_for_deletion``: the topics of
        ``/admin/delete_topics`` (their deletion starts over). Partitions without a state
        (created while no controller acted) are elected as new; partitions
        whose leader is not live, or whose ISR holds brokers that are not,
        as after their failure. Then every live broker gets UpdateMetadata
        with every partition and LeaderAndIsr for all its replicas; deletions
        in progress resume."""
        for topic in marked_for_deletion:
            self._mark_for_deletion(topic)
        changed = []
        for tp in sorted(self.assignments):
            if tp[0] not in self.deleting:
                decided = self._reconcile(tp)
                if decided is not None:
                    changed.append(decided)
        touched = {tp for tp, *_ in changed}
        theirs = {broker_id: [(tp[0], tp[1], state, False) for tp, state in sorted(self.states.items())
                              if broker_id in state.replicas and tp not in touched and tp[0] not in self.deleting]
                  for broker_id in self.live_brokers}
        applied = self._apply(changed, theirs)
        writes = [e for e in applied if isinstance(e, WritePartitionState)]
        requests = [e for e in applied if isinstance(e, SendLeaderAndIsr)]
        return (writes + [self._update_metadata(self._all_partitions())] + requests
                + self._stop_replicas(self.live_brokers) + self._finish_deletions())

    def on_conflicts(self, states: dict) -> list:
        """Writes that lost their znode version to another writer (a leader's ISR
        change): ``{(topic, partition): PartitionState or None}`` as ZooKeeper
        has them now. They replace the known states and each partition is
        decided again from there (Kafka's updateLeaderAndIsr retrying the
        partitions whose write met a BadVersion)."""
        changed = []
        for tp, state in sorted(states.items()):
            if tp not in self.assignments or tp[0] in self.deleting:
                continue
            if state is None:
                self.states.pop(tp, None)
            else:
                self.states[tp] = replace(state, replicas=self.assignments[tp])
            decided = self._reconcile(tp)
            if decided is not None:
                changed.append(decided)
        return self._apply(changed)

    def on_isr_changed(self, states: dict) -> list:
        """ISR change notifications: the partitions' states re-read from
        ZooKeeper, ``{(topic, partition): PartitionState}``, replace the known
        ones; every live broker gets them in UpdateMetadata (Kafka's
        processUpdateNotifications)."""
        updated, readded = [], []
        for tp, state in sorted(states.items()):
            if tp not in self.assignments or tp[0] in self.deleting or state is None:
                continue
            self.states[tp] = replace(state, replicas=self.assignments[tp])
            updated.append((tp[0], tp[1], self.states[tp]))
            if self.shutting_down & set(state.isr) and state.leader not in self.shutting_down:
                readded.append(tp)
        effects = [self._update_metadata(tuple(updated))] if updated else []
        return effects + self._drop_shutting_down_followers(readded)

    def _drop_shutting_down_followers(self, partitions) -> list:
        """A leader put a broker in controlled shutdown back into these ISRs (it
        still fetched): Kafka 3.9's controller refuses such an ISR
        (INELIGIBLE_REPLICA); here the leader wrote it itself, so it is undone as
        Kafka's OfflineReplica does for a follower of a shutting-down broker:
        StopReplica (no delete) to it, out of the ISR, leader epoch + 1,
        LeaderAndIsr to the other replicas."""
        effects, changed = [], []
        for broker_id in sorted(self.shutting_down):
            mine = tuple(tp for tp in partitions if broker_id in self.states[tp].isr)
            if mine:
                effects.append(SendStopReplica(broker_id, self.controller_epoch, mine, False))
        for tp in partitions:
            state = self.states[tp]
            changed.append((tp, replace(state, isr=_without(state.isr, self.shutting_down),
                                        leader_epoch=state.leader_epoch + 1), state, False))
        return effects + self._apply(changed, exclude=self.shutting_down)

    def on_topics_deleted(self, topics) -> list:
        """Topics marked in ``/admin/delete_topics``: UpdateMetadata with leader
        -2 for their partitions to every live broker, then StopReplica(delete)
        to each live replica. A marker of a topic with no partitions known
        (never created, or already gone) is removed at once."""
        effects, deleted = [], []
        for topic in sorted(set(topics) - set(self.deleting)):
            self._mark_for_deletion(topic)
            deleted += [(t, p, replace(self.states.get((t, p)) or PartitionState(assigned, NO_BROKER, 0, ()),
                                       leader=LEADER_DURING_DELETE))
                        for (t, p), assigned in sorted(self.assignments.items()) if t == topic]
        if deleted:
            effects.append(self._update_metadata(tuple(deleted)))
        return effects + self._stop_replicas(self.live_brokers, topics) + self._finish_deletions()

    def on_replicas_deleted(self, broker_id: int, partitions) -> list:
        """StopReplica(delete) succeeded on ``broker_id`` for ``partitions``
        (``(topic, partition)``): a topic whose every replica is deleted is
        finished (``DeleteTopic``)."""
        for topic, partition in partitions:
            pending = self.deleting.get(topic)
            if pending is not None:
                pending.discard((partition, broker_id))
        return self._finish_deletions()

    def on_controlled_shutdown(self, broker_id: int) -> tuple:
        """Kafka's doControlledShutdown: ``(error_code, effects)``; the caller
        carries out the effects, then answers ``partitions_led_by(broker_id)``."""
        if broker_id not in self.live_brokers:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        self.shutting_down.add(broker_id)
        led, followed = [], []
        for tp, state in sorted(self.states.items()):
            replicas = self.assignments.get(tp, state.replicas)
            if broker_id not in replicas or len(replicas) <= 1 or tp[0] in self.deleting:
                continue
            (led if state.leader == broker_id else followed).append(tp)
        electable = self._electable()
        changed = []
        for tp in led:
            state = self.states[tp]
            leader = controlled_shutdown_leader(self.assignments[tp], state.isr, electable, self.shutting_down)
            if leader is not None:
                isr = tuple(r for r in state.isr if r not in self.shutting_down)
                changed.append((tp, replace(state, leader=leader, isr=isr, leader_epoch=state.leader_epoch + 1),
                                state, False))
        effects = self._apply(changed)
        if followed:
            effects.append(SendStopReplica(broker_id, self.controller_epoch, tuple(followed), False))
        # Kafka's OfflineReplica for the followed partitions: out of the ISR (not the
        # last member), LeaderAndIsr to the other replicas only
        changed = []
        for tp in followed:
            state = self.states[tp]
            if broker_id in state.isr and len(state.isr) > 1:
                changed.append((tp, replace(state, isr=_without(state.isr, {broker_id}),
                                            leader_epoch=state.leader_epoch + 1), state, False))
        return ErrorCode.NONE, effects + self._apply(changed, exclude={broker_id})

    def partitions_led_by(self, broker_id: int) -> list:
        """``[(topic, partition)]`` whose leader is ``broker_id`` (Kafka's partitionLeadersOnBroker)."""
        return [tp for tp, state in sorted(self.states.items()) if state.leader == broker_id]

    def on_replica_election(self, partitions, preferred: bool, admin: bool = True) -> tuple:
        """Kafka's processReplicaLeaderElection: ``(results, effects)``, ``results``
        ``{(topic, partition): (error_code, new leader or None)}``. ``partitions``
        None: every known partition. Unclean elections only when ``admin``
        (Kafka: only an admin-triggered one may be unclean)."""
        wanted = sorted(self.states if partitions is None else set(partitions))
        electable = self._electable()
        results, changed = {}, []
        for tp in wanted:
            state = self.states.get(tp)
            if tp not in self.assignments:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            if tp[0] in self.deleting:
                results[tp] = (ErrorCode.INVALID_TOPIC_EXCEPTION, None)
                continue
            replicas = self.assignments[tp]
            if state is None:
                needed, leader, isr = True, None, ()
            elif preferred:
                needed = state.leader != replicas[0]
                leader, isr = preferred_leader(replicas, state.isr, electable), state.isr
            else:
                needed = state.leader == NO_BROKER or state.leader not in self.live_brokers
                elected = (elect_leader_and_isr(replicas, state.isr, electable, admin or self.unclean_election(tp[0]))
                           if needed else None)
                leader, isr = elected[:2] if elected is not None else (None, ())
            if not needed:
                results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
            elif leader is None:
                results[tp] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if preferred
                               else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None)
            else:
                results[tp] = (ErrorCode.NONE, leader)
                changed.append((tp, replace(state, leader=leader, isr=tuple(isr),
                                            leader_epoch=state.leader_epoch + 1), state, False))
        return results, self._apply(changed)

    def on_auto_leader_rebalance(self, imbalance_percentage: int) -> list:
        """Kafka's checkAndTriggerAutoLeaderRebalance: per preferred broker, if
        more than ``imbalance_percentage`` % of the partitions it prefers are
        led by another broker, a preferred election of those whose preferred
        replica can lead now."""
        by_preferred: dict = {}
        for tp, replicas in sorted(self.assignments.items()):
            if replicas and tp[0] not in self.deleting:
                by_preferred.setdefault(replicas[0], []).append(tp)
        electable = self._electable()
        candidates = []
        for broker_id, tps in sorted(by_preferred.items()):
            elsewhere = [tp for tp in tps if tp in self.states and self.states[tp].leader != broker_id]
            if len(elsewhere) / len(tps) > imbalance_percentage / 100:
                candidates += [tp for tp in elsewhere if preferred_leader(
                    self.assignments[tp], self.states[tp].isr, electable) is not None]
        if not candidates:
            return []
        _results, effects = self.on_replica_election(candidates, preferred=True, admin=False)
        return effects

    # -- log-dir failure -----------------------------------------------------------------------
    def on_broker_log_dir_failure(self, broker_ids) -> list:
        """Kafka's onBrokerLogDirFailure: LeaderAndIsr for every replica of
        these live brokers, to learn from the answers which are on an offline
        log dir (``on_leader_and_isr_response``)."""
        effects = []
        for broker_id in sorted(set(broker_ids) & self.live_brokers):
            parts = tuple((tp[0], tp[1], state, False) for tp, state in sorted(self.states.items())
                          if broker_id in state.replicas and tp[0] not in self.deleting)
            if parts:
                effects.append(SendLeaderAndIsr(broker_id, self.controller_epoch, parts))
        return effects

    def _log_dirs_back(self, started) -> set:
        """A (re)started broker's log dirs are online again (Kafka's
        onBrokerStartup forgets its replicasOnOfflineDirs): the partitions it
        had on offline dirs, whose states every live broker must get again
        without it among the offline replicas (``_states_to_all``), so their
        leaders may take it back into the ISR."""
        back = set()
        for broker_id in started:
            back |= self.offline_replicas.pop(broker_id, set())
        return back

    def _states_to_all(self, partitions) -> list:
        parts = tuple((tp[0], tp[1], self.states[tp]) for tp in sorted(partitions) if tp in self.states)
        return [self._update_metadata(parts)] if parts else []

    def on_leader_and_isr_response(self, broker_id: int, offline, online) -> list:
        """Kafka's processLeaderAndIsrResponseReceived: the partitions a
        broker answered KAFKA_STORAGE_ERROR (``offline``) or NONE
        (``online``). An offline replica that still leads or is in the ISR
        (newly offline, or put back since) goes offline (Kafka's
        onReplicasBecomeOffline): a partition it led elects a leader from the
        rest of the ISR among live replicas not on an offline dir (none:
        leader -1, offline), it leaves the ISR (not the last member), leader
        epoch + 1, LeaderAndIsr to the other replicas, StopReplica (no
        delete) to it."""
        if broker_id not in self.live_brokers:
            return []
        current = (self.offline_replicas.get(broker_id, set()) - set(online)) | set(offline)
        if current:
            self.offline_replicas[broker_id] = current
        else:
            self.offline_replicas.pop(broker_id, None)
        changed, stopped = [], []
        for tp in sorted(set(offline)):
            state = self.states.get(tp)
            if state is None or tp[0] in self.deleting:
                continue
            stopped.append(tp)
            if state.leader == broker_id:
                electable = {b for b in self._electable() if tp not in self.offline_replicas.get(b, ())}
                elected = elect_leader_and_isr(state.replicas, state.isr, electable, self.unclean_election(tp[0]))
                leader, isr = elected[:2] if elected is not None else (NO_BROKER, _without(state.isr, {broker_id}))
            elif broker_id in state.isr:
                leader, isr = state.leader, _without(state.isr, {broker_id})
            else:
                continue
            if (leader, isr) != (state.leader, state.isr):
                changed.append((tp, replace(state, leader=leader, isr=isr, leader_epoch=state.leader_epoch + 1),
                                state, False))
        effects = [SendStopReplica(broker_id, self.controller_epoch, tuple(stopped), False)] if changed else []
        return effects + self._apply(changed, exclude={broker_id})

    # -- helpers -----------------------------------------------------------------------------
    def _electable(self) -> set:
        """Brokers an election may pick: live and not shutting down (Kafka's isReplicaOnline)."""
        return self.live_brokers - self.shutting_down

    def _reconcile(self, tp):
        """A partition decided from scratch against the live brokers: no state ->
        elected as new; a leader not live -> elected from the live ISR (or offline,
        leader -1, the last ISR member kept); ISR members not live -> removed (not
        the last). ``(tp, new, old, is_new)`` for ``_apply``, or None if unchanged."""
        replicas = self.assignments[tp]
        state = self.states.get(tp)
        if state is None:
            first = initial_leader_and_isr(replicas, self._electable())
            if first is None:
                return None
            leader, isr = first
            return tp, PartitionState(tuple(replicas), leader, 0, tuple(isr), 0), None, True
        dead = {b for b in state.isr if b not in self.live_brokers}
        if state.leader not in self.live_brokers:
            elected = elect_leader_and_isr(replicas, state.isr, self._electable(), self.unclean_election(tp[0]))
            if elected is not None:
                leader, isr, _recovering = elected
            else:
                leader, isr = NO_BROKER, _without(state.isr, dead)
        else:
            leader, isr = state.leader, _without(state.isr, dead)
        if (leader, isr) == (state.leader, state.isr):
            return None
        return tp, replace(state, leader=leader, isr=isr, leader_epoch=state.leader_epoch + 1), state, False

    def _mark_for_deletion(self, topic: str) -> None:
        self.deleting[topic] = {(p, b) for (t, p), assigned in self.assignments.items() if t == topic
                                for b in assigned}

    def _all_partitions(self) -> tuple:
        """Every known partition for UpdateMetadata; a topic being deleted with leader -2."""
        return tuple((tp[0], tp[1], replace(state, leader=LEADER_DURING_DELETE) if tp[0] in self.deleting
                      else state) for tp, state in sorted(self.states.items()))

    def _stop_replicas(self, brokers, topics=None) -> list:
        """StopReplica(delete) for the pending replicas of deletions (of ``topics``,
        or all) on ``brokers`` (live ones only)."""
        effects = []
        for broker_id in sorted(set(brokers) & self.live_brokers):
            parts = tuple(sorted((t, p) for t, pending in self.deleting.items() if topics is None or t in topics
                                 for p, b in pending if b == broker_id))
            if parts:
                effects.append(SendStopReplica(broker_id, self.controller_epoch, parts, True))
        return effects

    def _finish_deletions(self) -> list:
        """Topics whose every replica is deleted leave the state: ``DeleteTopic`` each."""
        effects = []
        for topic in sorted(t for t, pending in self.deleting.items() if not pending):
            del self.deleting[topic]
            for tp in [tp for tp in self.assignments if tp[0] == topic]:
                del self.assignments[tp]
                self.states.pop(tp, None)
            self.topic_ids.pop(topic, None)
            effects.append(DeleteTopic(topic))
        return effects

    def _apply(self, changed, also=None, exclude=None) -> list:
        """``changed``: ``(tp, new state, old state or None, is_new)``. Records
        them (partition epoch = the znode version each write will have) and
        returns the writes, then one LeaderAndIsr per broker (with ``also``:
        ``{broker: [(topic, partition, state, is_new)]}`` of unchanged
        partitions a broker must learn; never to ``exclude``), then UpdateMetadata."""
        effects = []
        leader_and_isr: dict[int, list] = {b: list(parts) for b, parts in (also or {}).items() if parts}
        for tp, new, old, is_new in changed:
            expected = None if old is None else old.partition_epoch
            if old is not None:
                new = replace(new, partition_epoch=old.partition_epoch + 1)
            self.states[tp] = new
            effects.append(WritePartitionState(tp[0], tp[1], new, self.controller_epoch, expected))
            for replica in new.replicas:
                if replica in self.live_brokers and replica not in (exclude or ()):
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
