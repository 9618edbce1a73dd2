"""One consumer group's state (Kafka's GroupMetadata and MemberMetadata).

Owned by the group-coordinator process and only touched from its single
thread (``GroupCoordinator``); never shared with other processes. The
transitions are driven by ``GroupCoordinator``; this module only holds the
data and the rules that depend on it alone (protocol selection, who may
join, which members have rejoined).
"""

from __future__ import annotations

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

# Kafka's GroupMetadata.validPreviousStates: a transition from any other
# state is a coordinator bug, caught here rather than left to corrupt a group.
VALID_PREVIOUS = {
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    EMPTY: {PREPARING_REBALANCE},
}

ALL_STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)


class Member:
    """A member of a classic group. ``protocols`` is the ordered list of
    ``(name, metadata)`` the member sent in its last JoinGroup."""

    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host",
                 "rebalance_timeout_ms", "session_timeout_ms", "protocol_type", "protocols",
                 "assignment", "join_callback", "sync_callback", "is_new",
                 "heartbeat_deadline_ms", "timer")

    def __init__(self, member_id, group_instance_id, client_id, client_host,
                 rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = list(protocols)
        self.assignment = b""
        self.join_callback = None  # set while a JoinGroup is parked
        self.sync_callback = None  # set while a SyncGroup is parked
        self.is_new = False
        self.heartbeat_deadline_ms = 0
        self.timer = None  # the one live session/join timer (GroupCoordinator's)

    @property
    def awaiting_join(self) -> bool:
        return self.join_callback is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols) -> bool:
        return list(protocols) == self.protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


class Group:
    __slots__ = ("group_id", "state", "state_timestamp_ms", "protocol_type", "protocol_name",
                 "generation_id", "leader_id", "members", "pending_members", "static_members",
                 "pending_sync", "offsets", "new_member_added", "join_timer", "sync_timer",
                 "partition")

    def __init__(self, group_id: str, now_ms: int, partition: int):
        self.group_id = group_id
        self.state = EMPTY
        self.state_timestamp_ms = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        # Member ids handed out with MEMBER_ID_REQUIRED (JoinGroup v4+) whose
        # second JoinGroup has not come yet: they count for group.max.size and
        # keep a rebalance from completing (Kafka's pendingMembers).
        self.pending_members: set[str] = set()
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_sync: set[str] = set()  # members yet to SyncGroup this generation
        # (topic, partition) -> OffsetAndMetadata
        self.offsets: dict = {}
        self.new_member_added = False
        self.join_timer = None
        self.sync_timer = None
        self.partition = partition  # its __consumer_offsets partition

    # -- state ------------------------------------------------------------------
    def is_(self, state: str) -> bool:
        return self.state == state

    def transition(self, state: str, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state} -> {state}")
        self.state = state
        self.state_timestamp_ms = now_ms

    # -- members ----------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if member is None:
            return None
        if member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            # Kafka prefers a member that is already waiting in JoinGroup, so
            # the new leader's response carries the member list at once.
            waiting = [m for m in self.members.values() if m.awaiting_join]
            pick = waiting[0] if waiting else next(iter(self.members.values()), None)
            self.leader_id = pick.member_id if pick is not None else None
        return member

    def is_static_member_fenced(self, group_instance_id, member_id) -> bool:
        if group_instance_id is None:
            return False
        known = self.static_members.get(group_instance_id)
        return known is not None and known != member_id

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join() and not self.pending_members

    def size(self) -> int:
        return len(self.members)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols --------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Kafka's supportsProtocols: an empty group takes any non-empty
        protocol list; otherwise the type must match and one of the offered
        protocols must be supported by every current member."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        common = self.candidate_protocols()
        return any(n in common for n in names)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member
        supports; the most votes wins (ties: the leader's preference)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        leader = self.members.get(self.leader_id) if self.leader_id else None
        order = leader.protocol_names() if leader else sorted(votes)
        for name in order:
            if votes.get(name) == best:
                return name
        return max(votes, key=votes.get)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), or None if unknown."""
        from kafkapy.coordinator.records import consumer_subscription_topics

        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = consumer_subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics
