"""A KIP-848 ("consumer" protocol) group and its members, and the reconciliation rule.

Owned by the group-coordinator process and only touched from its single
thread (``GroupCoordinator``); never shared.

Epochs (KIP-848):
* ``group_epoch`` is bumped whenever what the assignor sees changes: a
  member joins, leaves or changes its subscription, or a subscribed topic's
  partition count changes.
* ``assignment_epoch`` is the group epoch the current target assignment was
  computed for; the group is Assigning while it lags the group epoch.
* each member's ``member_epoch`` reaches the assignment epoch once it has been
  reconciled towards its target; until then the group is Reconciling.

Assignments are ``{topic_id (uuid.UUID): set(partition)}``. A partition moves
to its new owner only after the previous owner stopped reporting it (revoke
before assign): ``partition_epochs`` records, for every partition a member
holds or is still revoking, that member's epoch; a partition found there is
"unreleased" and is withheld from the next owner (``reconcile``).
"""

from __future__ import annotations

# Group states (Kafka's ConsumerGroup.ConsumerGroupState, as toString gives them).
EMPTY = "Empty"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
STABLE = "Stable"
DEAD = "Dead"

# Member states (Kafka's MemberState).
M_STABLE = "stable"
M_UNREVOKED = "unrevoked_partitions"
M_UNRELEASED = "unreleased_partitions"

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


def copy_assignment(a: dict) -> dict:
    return {tid: set(ps) for tid, ps in a.items() if ps}


def same_assignment(a: dict, b: dict) -> bool:
    return copy_assignment(a) == copy_assignment(b)


def is_subset(owned: dict, assigned: dict) -> bool:
    return all(ps <= assigned.get(tid, set()) for tid, ps in owned.items())


class ConsumerMember:
    __slots__ = ("member_id", "instance_id", "rack_id", "client_id", "client_host",
                 "subscribed_topic_names", "subscribed_topic_regex", "server_assignor",
                 "rebalance_timeout_ms", "member_epoch", "previous_member_epoch", "state",
                 "assigned", "pending_revocation", "heartbeat_deadline_ms", "session_timer",
                 "revocation_timer")

    def __init__(self, member_id: str):
        self.member_id = member_id
        self.instance_id = None
        self.rack_id = None
        self.client_id = ""
        self.client_host = ""
        self.subscribed_topic_names: list[str] = []
        self.subscribed_topic_regex: str | None = None
        self.server_assignor: str | None = None
        self.rebalance_timeout_ms = -1
        self.member_epoch = 0
        self.previous_member_epoch = -1
        self.state = M_STABLE
        self.assigned: dict = {}
        self.pending_revocation: dict = {}
        self.heartbeat_deadline_ms = 0
        self.session_timer = None  # the one live session timer (GroupCoordinator's)
        self.revocation_timer = None  # armed while in M_UNREVOKED (rebalance timeout)


class ConsumerGroup:
    """Duck-types the parts of the classic ``Group`` that the offset paths use
    (``group_id``, ``partition``, ``offsets``, ``members``, ``state``,
    ``state_timestamp_ms``, ``protocol_type``)."""

    type = "consumer"
    protocol_type = "consumer"

    __slots__ = ("group_id", "partition", "offsets", "members", "group_epoch", "assignment_epoch",
                 "target_assignment", "partition_epochs", "subscription_metadata",
                 "state_timestamp_ms", "_last_state", "dead")

    def __init__(self, group_id: str, now_ms: int, partition: int):
        self.group_id = group_id
        self.partition = partition  # its __consumer_offsets partition
        self.offsets: dict = {}  # (topic, partition) -> OffsetAndMetadata
        self.members: dict[str, ConsumerMember] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.target_assignment: dict[str, dict] = {}  # member id -> assignment
        self.partition_epochs: dict[tuple, int] = {}  # (topic_id, p) -> owner's epoch
        # {topic name: (topic_id, num_partitions)} the last target was computed
        # from; a difference (topic created, partitions added) bumps the epoch.
        self.subscription_metadata: dict = {}
        self.state_timestamp_ms = now_ms
        self._last_state = EMPTY
        self.dead = False

    # -- state ------------------------------------------------------------------
    @property
    def state(self) -> str:
        if self.dead:
            return DEAD
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != M_STABLE:
                return RECONCILING
        return STABLE

    def is_(self, state: str) -> bool:
        return self.state == state

    def note_state(self, now_ms: int) -> None:
        """Keep ``state_timestamp_ms`` as the time of the last state change
        (offset retention counts from when the group became Empty)."""
        state = self.state
        if state != self._last_state:
            self._last_state = state
            self.state_timestamp_ms = now_ms

    # -- partition ownership -----------------------------------------------------
    def release_partitions(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for tid, parts in assignment.items():
                for p in parts:
                    if self.partition_epochs.get((tid, p)) is not None:
                        del self.partition_epochs[(tid, p)]

    def claim_partitions(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for tid, parts in assignment.items():
                for p in parts:
                    self.partition_epochs[(tid, p)] = member.member_epoch

    def subscribed_topic_names(self) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
        return names


def reconcile(member: ConsumerMember, target_epoch: int, target: dict, owned: dict | None,
              partition_epochs: dict) -> None:
    """Move ``member`` one step towards its target assignment (Kafka's
    CurrentAssignmentBuilder), in place. ``owned``: the partitions the
    member reported in this heartbeat, or None if it did not report them.
    The caller releases the member's old partitions from ``partition_epochs``
    before and claims the new ones after."""

    def still_owns(revoking: dict) -> bool:
        if owned is None:
            return True  # not reported: assume it still holds them
        return any(owned.get(tid, set()) & ps for tid, ps in revoking.items())

    if member.state == M_STABLE:
        if member.member_epoch == target_epoch:
            return
        _next_assignment(member, member.member_epoch, target_epoch, target, still_owns, partition_epochs)
    elif member.state == M_UNREVOKED:
        if still_owns(member.pending_revocation):
            return
        # Revocation acknowledged: the member moves on (to the target epoch,
        # or waits for unreleased partitions).
        _next_assignment(member, member.member_epoch + 1, target_epoch, target, still_owns,
                         partition_epochs)
    else:  # M_UNRELEASED
        _next_assignment(member, member.member_epoch, target_epoch, target, still_owns, partition_epochs)


def _next_assignment(member, member_epoch, target_epoch, target, still_owns, partition_epochs):
    keep: dict = {}
    revoke: dict = {}
    assign: dict = {}
    has_unreleased = False
    for tid in set(member.assigned) | set(target):
        current = member.assigned.get(tid, set())
        wanted = target.get(tid, set())
        if current & wanted:
            keep[tid] = current & wanted
        if current - wanted:
            revoke[tid] = current - wanted
        new = set()
        for p in wanted - current:
            epoch = partition_epochs.get((tid, p))
            # Held (or still being revoked) by another member: wait.
            if epoch is not None:
                has_unreleased = True
            else:
                new.add(p)
        if new:
            assign[tid] = new
    if revoke and still_owns(revoke):
        # Revoke first: the member stays at its epoch until it stops
        # reporting the revoked partitions.
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = member_epoch
        member.state = M_UNREVOKED
        member.assigned = keep
        member.pending_revocation = revoke
        return
    for tid, ps in assign.items():
        keep.setdefault(tid, set()).update(ps)
    if member.member_epoch != target_epoch:
        member.previous_member_epoch = member.member_epoch
    member.member_epoch = target_epoch
    member.state = M_UNRELEASED if has_unreleased else M_STABLE
    member.assigned = keep
    member.pending_revocation = {}
