"""The group coordinator (Kafka's GroupCoordinator): the membership protocol.

Its job is JoinGroup, SyncGroup, Heartbeat and LeaveGroup (rebalances, the
initial rebalance delay, session, join and sync timeouts, pending and
static members) and, through ``ConsumerGroupMixin``, KIP-848's
ConsumerGroupHeartbeat; the request checks of OffsetCommit,
TxnOffsetCommit, OffsetFetch, OffsetDelete and DeleteGroups; DescribeGroups
and ListGroups. What the groups are and what ``__consumer_offsets`` says
about them is ``GroupMetadataManager``'s (``self.manager``): the group
cache, storing group metadata and offsets (parked until the followers have
the append), OffsetFetch's offsets, transactional offsets and their
markers, offset expiry, loading and unloading partitions. The coordinator
calls it, as Kafka's does; the names the process and tests use on the
coordinator for the manager's state (``groups``, ``owned_partitions``,
``poll_appends``, ...) are delegations.

Owned by the group-coordinator process and run on its single thread: every
method here and every timer callback runs there, so group state needs no
locks. Sans-IO in the sense that matters for tests: the clock is injected
(``clock_ms``), persistence goes through the manager's ``store`` (see
``group_metadata_manager``), and answers go to ``respond`` callbacks, which
may be called at once or later (a parked JoinGroup / SyncGroup, or a
request whose append waits for the followers).

Results are plain dicts with Kafka's (kio's) field names, so each API
handler builds its response for every version with ``construct``.

Where Kafka's behaviour depends on time, the numbers are Kafka's:
``group.initial.rebalance.delay.ms`` applies only to the first rebalance of
an Empty group and is extended (by at most the same delay, within the
rebalance timeout) while new members keep arriving; a new member's parked
JoinGroup is dropped after 5 minutes (Kafka's newMemberJoinTimeoutMs) since
its session timeout cannot run before it has a member id.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from kafkapy.coordinator import group as g
from kafkapy.coordinator.consumer_coordinator import ConsumerGroupMixin
from kafkapy.coordinator.group import Group, Member
from kafkapy.coordinator.group_metadata_manager import (
    GroupMetadataManager,
    is_consumer,
    maybe_convert_offset_commit_error,
)
from kafkapy.coordinator.offsets_topic import OFFSETS_TOPIC
from kafkapy.coordinator.records import EMPTY_CONSUMER_ASSIGNMENT
from kafkapy.coordinator.timers import Timers
from kafkapy.protocol.errors import ErrorCode as E

log = logging.getLogger("kafkapy.coordinator")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
UNKNOWN_MEMBER_ID = ""


@dataclass
class CoordinatorConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    # KIP-848 consumer groups (group.consumer.*), Kafka's defaults.
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_assignors: tuple = ("uniform", "range")
    consumer_max_size: int = 2**31 - 1


def _join_result(error, member_id="", generation_id=-1, protocol_type=None, protocol_name=None,
                 leader="", members=(), skip_assignment=False):
    return {"error_code": error, "generation_id": generation_id, "protocol_type": protocol_type,
            "protocol_name": protocol_name, "leader": leader, "member_id": member_id,
            "members": list(members), "skip_assignment": skip_assignment, "throttle_time": 0}


def _sync_result(error, assignment=b"", protocol_type=None, protocol_name=None):
    return {"error_code": error, "assignment": assignment, "protocol_type": protocol_type,
            "protocol_name": protocol_name, "throttle_time": 0}


def _answer(respond, run):
    """``run(answer)`` answers once, at once or later: to ``respond`` when
    given (None returned), else returned (None when it is still pending)."""
    if respond is not None:
        run(respond)
        return None
    out = []
    run(out.append)
    return out[0] if out else None


def _managed(name: str, settable: bool = False) -> property:
    """The manager's attribute ``name``, under the same name here."""
    def get(self):
        return getattr(self.manager, name)

    def set_(self, value):
        setattr(self.manager, name, value)

    return property(get, set_ if settable else None, doc=f"``GroupMetadataManager.{name}``")


class GroupCoordinator(ConsumerGroupMixin):
    def __init__(self, config: CoordinatorConfig, store, clock_ms):
        self.config = config
        self.store = store
        self.clock_ms = clock_ms
        self.timers = Timers()
        self.manager = GroupMetadataManager(config, store, clock_ms, self.timers,
                                            consumer_group_tombstones=self.consumer_group_tombstones)

    # The manager's state and calls, as the process and tests name them on the coordinator.
    groups = _managed("groups")
    loading = _managed("loading", settable=True)
    owned_partitions = _managed("owned_partitions", settable=True)
    loading_partitions = _managed("loading_partitions", settable=True)
    pending_offset_commits = _managed("pending_offset_commits")
    pending_txn_offsets = _managed("pending_txn_offsets")
    txn_marker_scan = _managed("txn_marker_scan")

    def poll_appends(self, now_ms: int) -> int | None:
        return self.manager.poll_appends(now_ms)

    def poll_txn_markers(self) -> None:
        self.manager.poll_txn_markers()

    def on_txn_marker(self, tp, markers) -> None:
        """Kafka's handleTxnCompletion: see ``GroupMetadataManager.on_txn_marker``."""
        self.manager.on_txn_marker(tp, markers)

    def schedule_offset_expiry(self) -> None:
        self.manager.schedule_offset_expiry()

    def expire_offsets(self) -> int:
        return self.manager.expire_offsets()

    def load_open_transactions(self, open_transactions: dict) -> None:
        self.manager.load_open_transactions(open_transactions)

    # ------------------------------------------------------------------ helpers
    def _now(self) -> int:
        return self.clock_ms()

    def _partition(self, group_id: str) -> int:
        """Kafka's GroupCoordinator.partitionFor."""
        return self.manager.partition_for(group_id)

    def _validate(self, group_id, need_non_empty: bool):
        """Kafka's validateGroupStatus: None if the request may proceed."""
        if group_id is None or (need_non_empty and group_id == ""):
            return E.INVALID_GROUP_ID
        return self.ownership_error(group_id)

    def ownership_error(self, group_id: str):
        """See ``GroupMetadataManager.ownership_error``."""
        return self.manager.ownership_error(group_id)

    # ------------------------------------------------------------------ loading
    def load(self, records) -> None:
        """Replay ``__consumer_offsets`` records (Kafka's onElection ->
        loadGroupsAndOffsets, ``GroupMetadataManager.load``); each loaded
        member must heartbeat within its session timeout."""
        self.manager.load(records, self._on_group_loaded, self.replay_consumer_record,
                          self.load_consumer_groups)

    def _on_group_loaded(self, group: Group, member: Member, now: int) -> None:
        self._arm_member_timer(group, member, now + member.session_timeout_ms)

    def unload_partition(self, partition: int) -> int:
        """Leadership of ``partition`` moved away (Kafka's onResignation ->
        removeGroupsForPartition): its groups leave memory, members waiting in
        JoinGroup or SyncGroup are answered NOT_COORDINATOR, their timers are
        cancelled. Returns how many groups went."""
        return self.manager.unload_partition(partition, self._on_group_unloaded)

    @staticmethod
    def _on_group_unloaded(group) -> None:
        for timer in (getattr(group, "join_timer", None), getattr(group, "sync_timer", None)):
            if timer is not None:
                timer.cancel()
        for member in list(group.members.values()):
            for name in ("timer", "session_timer", "revocation_timer"):
                timer = getattr(member, name, None)
                if timer is not None:
                    timer.cancel()
            callback = getattr(member, "join_callback", None)
            if callback is not None:
                member.join_callback = None
                callback(_join_result(E.NOT_COORDINATOR, member.member_id))
            callback = getattr(member, "sync_callback", None)
            if callback is not None:
                member.sync_callback = None
                callback(_sync_result(E.NOT_COORDINATOR))

    # ------------------------------------------------------------------ timers
    def _arm_member_timer(self, group: Group, member: Member, deadline_ms: int) -> None:
        member.heartbeat_deadline_ms = deadline_ms
        if member.timer is not None:
            member.timer.cancel()
        member.timer = self.timers.schedule(deadline_ms, lambda: self._member_timer(group, member))

    def _heartbeat(self, group: Group, member: Member) -> None:
        # Only the deadline moves; the armed timer re-arms itself when it
        # fires early, so each member has one live timer, not one per heartbeat.
        member.heartbeat_deadline_ms = self._now() + member.session_timeout_ms

    def _member_timer(self, group: Group, member: Member) -> None:
        if self.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        now = self._now()
        if member.awaiting_join:
            if member.is_new and now >= member.heartbeat_deadline_ms:
                log.info("group %s: new member %s did not complete its join in time", group.group_id,
                         member.member_id)
                self._remove_member_and_update_group(group, member, E.UNKNOWN_MEMBER_ID)
                return
            deadline = member.heartbeat_deadline_ms if member.is_new else now + member.session_timeout_ms
        elif member.sync_callback is not None:
            deadline = now + member.session_timeout_ms
        elif now < member.heartbeat_deadline_ms:
            deadline = member.heartbeat_deadline_ms
        else:
            log.info("group %s: member %s session expired (%d ms)", group.group_id, member.member_id,
                     member.session_timeout_ms)
            self._remove_member_and_update_group(group, member, E.UNKNOWN_MEMBER_ID)
            return
        member.heartbeat_deadline_ms = max(member.heartbeat_deadline_ms, deadline)
        member.timer = self.timers.schedule(deadline, lambda: self._member_timer(group, member))

    def _pending_member_timer(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            if group.is_(g.PREPARING_REBALANCE):
                self._try_complete_join(group)

    # ------------------------------------------------------------------ rebalance
    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state in (g.STABLE, g.COMPLETING_REBALANCE, g.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(g.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync.clear()
        now = self._now()
        rebalance_timeout = group.rebalance_timeout_ms()
        if group.join_timer is not None:
            group.join_timer.cancel()
        if group.is_(g.EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(rebalance_timeout - delay, 0)
            group.new_member_added = False
            group.join_timer = self.timers.schedule(
                now + delay, lambda: self._initial_join_timer(group, delay, remaining))
            group.join_timer.initial = True
        else:
            group.join_timer = self.timers.schedule(now + rebalance_timeout,
                                                    lambda: self._complete_join(group))
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id,
                 group.generation_id, reason)
        group.transition(g.PREPARING_REBALANCE, now)
        # Kafka's tryCompleteElseWatch: a rebalance nobody has to wait for
        # (e.g. the last member left) completes at once.
        self._try_complete_join(group)

    def _initial_join_timer(self, group: Group, delay: int, remaining: int) -> None:
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            left = max(remaining - delay, 0)
            group.join_timer = self.timers.schedule(
                self._now() + next_delay, lambda: self._initial_join_timer(group, next_delay, left))
            group.join_timer.initial = True
            return
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        timer = group.join_timer
        if (group.is_(g.PREPARING_REBALANCE) and timer is not None
                and not timer.initial and group.has_all_members_joined()):
            timer.cancel()
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if not group.is_(g.PREPARING_REBALANCE):
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        for member in list(group.members.values()):
            if not member.awaiting_join:
                log.info("group %s: removing member %s which did not rejoin", group.group_id,
                         member.member_id)
                group.remove(member.member_id)
        now = self._now()
        group.generation_id += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.transition(g.COMPLETING_REBALANCE, now)
        else:
            group.protocol_name = None
            group.transition(g.EMPTY, now)
            # The generation bump of an emptied group must survive a restart
            # (stale members must not commit with the old generation).
            self.manager.store_group(group)
            log.info("group %s is empty (generation %d)", group.group_id, group.generation_id)
            return
        log.info("group %s: generation %d with %d members, protocol %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name)
        member_list = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata(group.protocol_name)} for m in group.members.values()]
        group.pending_sync = set(group.members)
        for member in list(group.members.values()):
            is_leader = member.member_id == group.leader_id
            result = _join_result(E.NONE, member.member_id, group.generation_id, group.protocol_type,
                                  group.protocol_name, group.leader_id, member_list if is_leader else ())
            callback, member.join_callback = member.join_callback, None
            member.is_new = False
            self._arm_member_timer(group, member, now + member.session_timeout_ms)
            callback(result)
        generation = group.generation_id
        group.sync_timer = self.timers.schedule(now + group.rebalance_timeout_ms(),
                                                lambda: self._sync_timeout(group, generation))

    def _sync_timeout(self, group: Group, generation: int) -> None:
        """Kafka's DelayedSync: members that joined but never sent SyncGroup
        within the rebalance timeout are removed and the group rebalances."""
        group.sync_timer = None
        if group.generation_id != generation or not group.pending_sync:
            return
        if group.state not in (g.COMPLETING_REBALANCE, g.STABLE):
            return
        missing = list(group.pending_sync)
        log.info("group %s: members %s did not sync in time", group.group_id, missing)
        for member_id in missing:
            group.remove(member_id)
        group.pending_sync.clear()
        self._prepare_rebalance(group, f"members {missing} failed to sync")

    def _reset_and_propagate_assignment_error(self, group: Group, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_callback is not None:
                callback, member.sync_callback = member.sync_callback, None
                callback(_sync_result(error))

    def _remove_member_and_update_group(self, group: Group, member: Member, error: int) -> None:
        if member.join_callback is not None:
            callback, member.join_callback = member.join_callback, None
            callback(_join_result(error, member.member_id))
        if member.sync_callback is not None:
            callback, member.sync_callback = member.sync_callback, None
            callback(_sync_result(error))
        group.remove(member.member_id)
        if group.state in (g.STABLE, g.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id}")
        elif group.is_(g.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # ------------------------------------------------------------------ JoinGroup
    def join_group(self, group_id, member_id, group_instance_id, require_known_member_id, client_id,
                   client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                   respond, support_skipping_assignment=False) -> None:
        """``support_skipping_assignment``: JoinGroup v9+ (KIP-814), see
        ``_update_static_member``."""
        error = self._validate(group_id, True)
        if error is not None:
            return respond(_join_result(error, member_id))
        if not (self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms):
            return respond(_join_result(E.INVALID_SESSION_TIMEOUT, member_id))
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(group_id)
        if group is not None and is_consumer(group):
            if group.members:
                # Members of a consumer group use ConsumerGroupHeartbeat;
                # classic members cannot join it here (Kafka 4 can, with
                # group.consumer.migration.policy, which we do not implement).
                return respond(_join_result(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
            # Kafka 4: an empty consumer group becomes a classic group on a
            # classic JoinGroup; offsets stay, the consumer records go.
            if self.store.append(group.partition, self.consumer_group_tombstones(group)):
                return respond(_join_result(E.COORDINATOR_NOT_AVAILABLE, member_id))
            del self.groups[group_id]
            classic = self.manager.get_or_create(group_id)
            classic.offsets = group.offsets
            log.info("consumer group %s (empty) converted to a classic group", group_id)
            group = classic
        if group is None:
            if not is_unknown:
                return respond(_join_result(E.UNKNOWN_MEMBER_ID, member_id))
            group = self.manager.get_or_create(group_id)
        try:
            if not self._accept_joining_member(group, member_id):
                return respond(_join_result(E.GROUP_MAX_SIZE_REACHED, member_id))
            if group.is_(g.DEAD):
                return respond(_join_result(E.COORDINATOR_NOT_AVAILABLE, member_id))
            names = [name for name, _ in protocols]
            if not group.supports_protocols(protocol_type, names):
                return respond(_join_result(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
            args = (group_instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                    protocol_type, protocols, respond)
            if is_unknown:
                self._new_member_join(group, require_known_member_id, *args,
                                      support_skipping_assignment=support_skipping_assignment)
            else:
                self._current_member_join(group, member_id, *args)
            if group.is_(g.PREPARING_REBALANCE):
                self._try_complete_join(group)
        finally:
            self.manager.drop_if_unused(group)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        """Kafka's acceptJoiningMember: may this member join under group.max.size?"""
        max_size = self.config.max_size
        if group.state in (g.EMPTY, g.DEAD):
            return True
        if group.is_(g.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join() < max_size
        return group.has(member_id) or member_id in group.pending_members or group.size() < max_size

    def _new_member_join(self, group, require_known_member_id, group_instance_id, client_id, client_host,
                         rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond,
                         support_skipping_assignment=False):
        new_id = f"{client_id or ''}-{uuid.uuid4()}"
        if group_instance_id is not None:
            old_id = group.static_members.get(group_instance_id)
            if old_id is not None and old_id in group.members:
                return self._update_static_member(group, old_id, new_id, client_id, client_host,
                                                  rebalance_timeout_ms, session_timeout_ms, protocols, respond,
                                                  support_skipping_assignment)
            return self._add_member_and_rebalance(group, new_id, group_instance_id, client_id, client_host,
                                                  rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                                  protocols, respond)
        if require_known_member_id:
            # JoinGroup v4+: hand out the id first, so a client that retries
            # after a lost response re-uses it instead of leaving a ghost member.
            group.pending_members.add(new_id)
            self.timers.schedule(self._now() + session_timeout_ms,
                                 lambda: self._pending_member_timer(group, new_id))
            return respond(_join_result(E.MEMBER_ID_REQUIRED, new_id))
        self._add_member_and_rebalance(group, new_id, None, client_id, client_host, rebalance_timeout_ms,
                                       session_timeout_ms, protocol_type, protocols, respond)

    def _current_member_join(self, group, member_id, group_instance_id, client_id, client_host,
                             rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond):
        if member_id in group.pending_members:
            return self._add_member_and_rebalance(group, member_id, group_instance_id, client_id, client_host,
                                                  rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                                  protocols, respond)
        if group.is_static_member_fenced(group_instance_id, member_id):
            return respond(_join_result(E.FENCED_INSTANCE_ID, member_id))
        member = group.members.get(member_id)
        if member is None:
            return respond(_join_result(E.UNKNOWN_MEMBER_ID, member_id))
        state = group.state
        if state == g.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                              session_timeout_ms, respond)
        elif state == g.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # A repeat of a JoinGroup whose answer was lost: the same answer.
                is_leader = member_id == group.leader_id
                members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                            "metadata": m.metadata(group.protocol_name)} for m in group.members.values()] \
                    if is_leader else ()
                respond(_join_result(E.NONE, member_id, group.generation_id, group.protocol_type,
                                     group.protocol_name, group.leader_id, members))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, respond)
        elif state == g.STABLE:
            if member_id == group.leader_id or not member.matches(protocols):
                # The leader rejoining asks for a rebalance (e.g. its metadata changed).
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, respond)
            else:
                respond(_join_result(E.NONE, member_id, group.generation_id, group.protocol_type,
                                     group.protocol_name, group.leader_id))
        else:
            respond(_join_result(E.UNKNOWN_MEMBER_ID, member_id))

    def _add_member_and_rebalance(self, group, member_id, group_instance_id, client_id, client_host,
                                  rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond):
        member = Member(member_id, group_instance_id, client_id or "", client_host, rebalance_timeout_ms,
                        session_timeout_ms, protocol_type, protocols)
        member.is_new = True
        member.join_callback = respond
        if group.is_(g.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        # Before it has its first generation a new member cannot heartbeat:
        # its parked JoinGroup is bounded by Kafka's 5-minute new-member timeout.
        self._arm_member_timer(group, member, self._now() + NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(self, group, member, protocols, rebalance_timeout_ms,
                                     session_timeout_ms, respond):
        member.protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if member.join_callback is not None:
            # The client gave up on its earlier JoinGroup (a new connection);
            # release that one so its connection is not muted forever.
            old, member.join_callback = member.join_callback, None
            old(_join_result(E.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_callback = respond
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _update_static_member(self, group, old_id, new_id, client_id, client_host, rebalance_timeout_ms,
                              session_timeout_ms, protocols, respond, support_skipping_assignment=False):
        """A static member came back with a new member id: the old id is fenced,
        and a Stable group whose protocol would not change keeps its
        assignment without a rebalance (KIP-345). From JoinGroup v9 (KIP-814)
        a returning leader is told it leads, with the members, and to skip
        the assignment, so it keeps watching metadata without re-assigning."""
        member = group.members[old_id]
        if member.join_callback is not None:
            old, member.join_callback = member.join_callback, None
            old(_join_result(E.FENCED_INSTANCE_ID, old_id))
        if member.sync_callback is not None:
            old, member.sync_callback = member.sync_callback, None
            old(_sync_result(E.FENCED_INSTANCE_ID))
        current_leader = group.leader_id
        old_protocols = member.protocols
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        del group.members[old_id]
        group.pending_sync.discard(old_id)
        member.member_id = new_id
        member.client_id = client_id or ""
        member.client_host = client_host
        group.members[new_id] = member
        group.static_members[member.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        member.protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self._arm_member_timer(group, member, self._now() + session_timeout_ms)
        if group.is_(g.STABLE):
            if group.select_protocol() == group.protocol_name:
                def stored(error, _base_offset):
                    if error:
                        if self.groups.get(group.group_id) is group and group.members.get(new_id) is member:
                            # Undo: the old id stays the member, the new one is refused.
                            del group.members[new_id]
                            member.member_id = old_id
                            member.protocols = old_protocols
                            member.rebalance_timeout_ms, member.session_timeout_ms = old_timeouts
                            group.members[old_id] = member
                            group.static_members[member.group_instance_id] = old_id
                            if group.leader_id == new_id:
                                group.leader_id = old_id
                        return respond(_join_result(error, ""))
                    if support_skipping_assignment:
                        is_leader = group.leader_id == new_id
                        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                                    "metadata": m.metadata(group.protocol_name)}
                                   for m in group.members.values()] if is_leader else ()
                        return respond(_join_result(E.NONE, new_id, group.generation_id, group.protocol_type,
                                                    group.protocol_name, group.leader_id, members,
                                                    skip_assignment=is_leader))
                    # Before v9 Kafka answers with the leader as it was: a restarted
                    # leader then acts as a follower and fetches its stored assignment.
                    return respond(_join_result(E.NONE, new_id, group.generation_id, group.protocol_type,
                                                group.protocol_name, current_leader))

                return self.manager.store_group(group, then=stored)
            member.join_callback = respond
            return self._maybe_prepare_rebalance(group, f"static member {member.group_instance_id} "
                                                 "changed the selected protocol")
        member.join_callback = respond
        if group.is_(g.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"static member {member.group_instance_id} rejoined")

    # ------------------------------------------------------------------ SyncGroup
    def sync_group(self, group_id, generation_id, member_id, protocol_type, protocol_name,
                   group_instance_id, assignments, respond) -> None:
        error = self._validate(group_id, True)
        if error is not None:
            return respond(_sync_result(error))
        group = self.groups.get(group_id)
        if group is None or is_consumer(group):
            return respond(_sync_result(E.UNKNOWN_MEMBER_ID))
        if group.is_(g.DEAD):
            return respond(_sync_result(E.COORDINATOR_NOT_AVAILABLE))
        if group.is_static_member_fenced(group_instance_id, member_id):
            return respond(_sync_result(E.FENCED_INSTANCE_ID))
        member = group.members.get(member_id)
        if member is None:
            return respond(_sync_result(E.UNKNOWN_MEMBER_ID))
        if generation_id != group.generation_id:
            return respond(_sync_result(E.ILLEGAL_GENERATION))
        if protocol_type is not None and protocol_type != group.protocol_type:
            return respond(_sync_result(E.INCONSISTENT_GROUP_PROTOCOL))
        if protocol_name is not None and protocol_name != group.protocol_name:
            return respond(_sync_result(E.INCONSISTENT_GROUP_PROTOCOL))
        if group.is_(g.EMPTY):
            return respond(_sync_result(E.UNKNOWN_MEMBER_ID))
        if group.is_(g.PREPARING_REBALANCE):
            return respond(_sync_result(E.REBALANCE_IN_PROGRESS))
        group.pending_sync.discard(member_id)
        if group.is_(g.STABLE):
            self._heartbeat(group, member)
            return respond(_sync_result(E.NONE, member.assignment, group.protocol_type, group.protocol_name))
        # CompletingRebalance: park until the leader's assignment is stored.
        member.sync_callback = respond
        self._heartbeat(group, member)
        if member_id != group.leader_id:
            return
        assignment = {}
        for m_id in group.members:
            assignment[m_id] = None
        for m_id, data in assignments:
            if m_id in assignment:
                assignment[m_id] = data
        for m_id, data in assignment.items():
            if data is None:
                # Kafka fills members the leader left out with zero bytes.
                # The consumer-protocol clients decode an assignment without
                # a length check (kafka-python and aiokafka raise on b""), so
                # a "consumer" group gets a valid empty assignment instead.
                assignment[m_id] = EMPTY_CONSUMER_ASSIGNMENT if group.protocol_type == "consumer" else b""
        self.manager.store_group(
            group, assignment, lambda error, _offset: self._assignment_stored(group, generation_id, assignment, error))

    def _assignment_stored(self, group: Group, generation_id: int, assignment: dict, error: int) -> None:
        """The leader's assignment settled in the log (Kafka's storeGroup
        callback): the members parked in SyncGroup get their parts, unless
        the group moved on meanwhile (a new rebalance answered them)."""
        if (self.groups.get(group.group_id) is not group or not group.is_(g.COMPLETING_REBALANCE)
                or group.generation_id != generation_id):
            return
        try:
            self._assignment_settled(group, assignment, error)
        except Exception:  # the members parked in SyncGroup are still answered
            log.exception("group %s: completing the assignment failed", group.group_id)
            self._reset_and_propagate_assignment_error(group, E.UNKNOWN_SERVER_ERROR)

    def _assignment_settled(self, group: Group, assignment: dict, error: int) -> None:
        if error:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"storing the assignment failed (error {error})")
            return
        for m in group.members.values():
            m.assignment = assignment[m.member_id]
            if m.sync_callback is not None:
                callback, m.sync_callback = m.sync_callback, None
                callback(_sync_result(E.NONE, m.assignment, group.protocol_type, group.protocol_name))
        group.transition(g.STABLE, self._now())
        log.info("group %s stable at generation %d", group.group_id, group.generation_id)

    # ------------------------------------------------------------------ Heartbeat
    def heartbeat(self, group_id, member_id, group_instance_id, generation_id) -> int:
        error = self._validate(group_id, True)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            # Kafka: the group is still loading, so answer blindly; the real
            # check comes with the next heartbeat.
            return E.NONE
        if error is not None:
            return error
        group = self.groups.get(group_id)
        if group is None or is_consumer(group):
            return E.UNKNOWN_MEMBER_ID
        if group.is_(g.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_(g.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if group.is_static_member_fenced(group_instance_id, member_id):
            return E.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        self._heartbeat(group, member)
        if group.is_(g.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # ------------------------------------------------------------------ LeaveGroup
    def leave_group(self, group_id, leaving) -> tuple[int, list]:
        """``leaving``: list of ``(member_id, group_instance_id)``. Returns the
        top-level error and one error per leaving member."""
        error = self._validate(group_id, True)
        if error is not None:
            return error, [error] * len(leaving)
        group = self.groups.get(group_id)
        if group is None or is_consumer(group):
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(g.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, [E.COORDINATOR_NOT_AVAILABLE] * len(leaving)
        errors = []
        for member_id, instance_id in leaving:
            if member_id == UNKNOWN_MEMBER_ID and instance_id is not None:
                found = group.static_members.get(instance_id)
                if found is None or found not in group.members:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                member_id = found
            elif group.is_static_member_fenced(instance_id, member_id):
                errors.append(E.FENCED_INSTANCE_ID)
                continue
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                if group.is_(g.PREPARING_REBALANCE):
                    self._try_complete_join(group)
                errors.append(E.NONE)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(E.UNKNOWN_MEMBER_ID)
                continue
            log.info("group %s: member %s left", group_id, member_id)
            self._remove_member_and_update_group(group, member, E.UNKNOWN_MEMBER_ID)
            errors.append(E.NONE)
        return E.NONE, errors

    # ------------------------------------------------------------------ offsets
    def commit_offsets(self, group_id, member_id, group_instance_id, generation_id, offsets,
                       retention_ms=-1, api_version=8, respond=None):
        """``offsets``: list of ``(topic, partition, offset, leader_epoch, metadata[,
        commit_timestamp_ms])``; the commit timestamp (OffsetCommit v1) -1 or absent means now.
        Answers ``{(topic, partition): error_code}`` to ``respond``, at once
        or once the append settled (``poll_appends``); without ``respond``
        returns it (None while the append waits). ``generation_id`` is the
        member epoch for a consumer (KIP-848) group."""
        return _answer(respond, lambda answer: self._commit_offsets(
            group_id, member_id, group_instance_id, generation_id, offsets, retention_ms, api_version, answer))

    def _commit_offsets(self, group_id, member_id, group_instance_id, generation_id, offsets, retention_ms,
                        api_version, respond) -> None:
        keys = [(t, p) for t, p, *_ in offsets]

        def all_(error):
            return respond({k: error for k in keys})

        error = self._validate(group_id, False)
        if error is not None:
            return all_(error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A commit from an old generation of a group that is gone;
                # from v9 Kafka says so (GROUP_ID_NOT_FOUND), before it keeps
                # the old answer.
                return all_(E.GROUP_ID_NOT_FOUND if api_version >= 9 else E.ILLEGAL_GENERATION)
            group = self.manager.get_or_create(group_id)  # offsets-only ("simple") group
        if is_consumer(group):
            error = self.validate_consumer_offset_commit(group, member_id, generation_id, api_version)
            if error is not None:
                return all_(error)
            # No heartbeat credit: in KIP-848 only ConsumerGroupHeartbeat
            # keeps a member's session alive.
            return self.manager.store_offsets(group, offsets, retention_ms, respond)
        if group.is_(g.DEAD):
            error = E.COORDINATOR_NOT_AVAILABLE
        elif group.is_static_member_fenced(group_instance_id, member_id):
            error = E.FENCED_INSTANCE_ID
        elif generation_id < 0 and group.is_(g.EMPTY):
            error = None
        elif group.is_(g.COMPLETING_REBALANCE):
            error = E.REBALANCE_IN_PROGRESS
        elif member_id not in group.members:
            error = E.UNKNOWN_MEMBER_ID
        elif generation_id != group.generation_id:
            error = E.ILLEGAL_GENERATION
        else:
            error = None
            self._heartbeat(group, group.members[member_id])
        if error is not None:
            self.manager.drop_if_unused(group)
            return all_(error)
        return self.manager.store_offsets(group, offsets, retention_ms, respond)

    def txn_commit_offsets(self, group_id, producer_id, producer_epoch, member_id, group_instance_id,
                           generation_id, offsets, respond=None, verify=None):
        """TxnOffsetCommit (Kafka's handleTxnCommitOffsets, doTxnCommitOffsets):
        ``offsets`` as for ``commit_offsets``; they are written in a
        transactional batch of the producer and stay pending until its
        marker reaches the group's partition (``on_txn_marker``).
        ``verify(topic, partition, then)`` (KIP-890, the process's
        ``OffsetCommitVerification``; None: nothing to ask) is asked between
        the group's status and its member checks, as Kafka does, and calls
        ``then(error, verification)`` now or later; a refusal answers every
        partition with it (``maybe_convert_offset_commit_error``).
        ``{(topic, partition): error_code}`` to ``respond`` once the append
        settled (returned without it, when nothing was asked)."""
        def run(answer):
            def verified(error, verification):
                self._txn_commit_offsets(group_id, producer_id, producer_epoch, member_id, group_instance_id,
                                         generation_id, offsets, answer, error, verification)
            if verify is None or self._validate(group_id, False) is not None:
                return verified(E.NONE, None)
            verify(OFFSETS_TOPIC, self.manager.partition_for(group_id), verified)
        return _answer(respond, run)

    def _txn_commit_offsets(self, group_id, producer_id, producer_epoch, member_id, group_instance_id,
                            generation_id, offsets, respond, verification_error, verification) -> None:
        keys = [(t, p) for t, p, *_ in offsets]
        if verification_error:
            return respond(dict.fromkeys(keys, maybe_convert_offset_commit_error(verification_error)))
        # Looked at again after a verification: the partition may have been unloaded meanwhile.
        error = self._validate(group_id, False)
        if error is None:
            group = self.manager.get_or_create(group_id)
            members = group.members
            if not is_consumer(group) and group.is_(g.DEAD):
                error = E.COORDINATOR_NOT_AVAILABLE
            elif member_id and member_id not in members:
                error = E.UNKNOWN_MEMBER_ID
            elif not is_consumer(group) and group.is_static_member_fenced(group_instance_id, member_id):
                error = E.FENCED_INSTANCE_ID
            elif generation_id >= 0 and generation_id != (
                    group.group_epoch if is_consumer(group) else group.generation_id):
                error = E.ILLEGAL_GENERATION
            if error is not None:
                self.manager.drop_if_unused(group)
        if error is not None:
            return respond(dict.fromkeys(keys, error))
        return self.manager.store_offsets(group, offsets, -1, respond, producer=(producer_id, producer_epoch),
                                          verification=verification)

    def fetch_offsets(self, group_id, topics, require_stable=False, member_id=None, member_epoch=-1):
        """``topics``: list of ``(topic, [partitions])`` or None for all.
        Returns ``(group_error, [(topic, [(partition, OffsetAndMetadata|None, error)])])``.
        With ``require_stable`` a partition whose transactional commit waits for
        its marker, or whose commit waits for the followers, answers
        UNSTABLE_OFFSET_COMMIT (Kafka's); without, the last committed value."""
        error = self._validate(group_id, False)
        if error is not None:
            return error, []
        group = self.groups.get(group_id)
        if group is not None and is_consumer(group):
            # OffsetFetch v9: a member must give its current epoch.
            error = self.validate_consumer_offset_fetch(group, member_id, member_epoch)
            if error is not None:
                return error, []
        return self.manager.get_offsets(group_id, topics, require_stable)

    def delete_offsets(self, group_id, partitions) -> tuple[int, dict]:
        """OffsetDelete: ``partitions`` list of (topic, partition)."""
        error = self._validate(group_id, False)
        if error is not None:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(g.DEAD):
            return E.GROUP_ID_NOT_FOUND, {}
        results = {}
        if group.is_(g.EMPTY):
            subscribed: set[str] = set()
        elif is_consumer(group):
            topics = self._topics_metadata()
            subscribed = set()
            for m in group.members.values():
                subscribed |= self._resolve_subscription(m, topics)
        else:
            subscribed = group.subscribed_topics()
            if subscribed is None:
                return E.NON_EMPTY_GROUP, {}
        deletable = []
        for topic, partition in partitions:
            if topic in subscribed:
                results[(topic, partition)] = E.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[(topic, partition)] = E.NONE
            deletable.append((topic, partition))
        error = self.manager.delete_offsets(group, deletable)
        if error:
            return error, {}
        return E.NONE, results

    # ------------------------------------------------------------------ admin
    def describe_group(self, group_id) -> dict:
        error = self._validate(group_id, False)
        if error is not None:
            return {"error_code": error, "group_id": group_id, "group_state": "", "protocol_type": "",
                    "protocol_data": "", "members": []}
        group = self.groups.get(group_id)
        if group is None or is_consumer(group):
            # DescribeGroups v0-v5 on a group that is not classic: Kafka
            # answers "Dead" without an error (v6+ would say GROUP_ID_NOT_FOUND).
            return {"error_code": E.NONE, "group_id": group_id, "group_state": g.DEAD, "protocol_type": "",
                    "protocol_data": "", "members": []}
        stable = group.is_(g.STABLE)
        members = []
        for m in group.members.values():
            members.append({
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                "member_assignment": m.assignment if stable else b""})
        return {"error_code": E.NONE, "group_id": group_id, "group_state": group.state,
                "protocol_type": group.protocol_type or "",
                "protocol_data": (group.protocol_name or "") if stable else "", "members": members}

    def list_groups(self, states_filter=(), types_filter=()) -> tuple[int, list]:
        """Every group, kept by state and by type ("classic" or "consumer",
        KIP-848) when the filters name any; both compared without case, so an
        unknown name matches nothing, as in Kafka."""
        if self.loading or self.loading_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS, []
        wanted = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        out = []
        for group in self.groups.values():
            if wanted and group.state.lower() not in wanted:
                continue
            group_type = "consumer" if is_consumer(group) else "classic"
            if types and group_type not in types:
                continue
            out.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                        "group_state": group.state, "group_type": group_type})
        return E.NONE, out

    def delete_groups(self, group_ids) -> dict:
        results = {}
        for group_id in group_ids:
            error = self._validate(group_id, False)
            if error is not None:
                results[group_id] = error
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(g.DEAD):
                results[group_id] = E.GROUP_ID_NOT_FOUND
                continue
            if not group.is_(g.EMPTY):
                results[group_id] = E.NON_EMPTY_GROUP
                continue
            results[group_id] = self.manager.delete_group(group)
        return results
