"""KIP-848 consumer groups in the group coordinator (Kafka's GroupMetadataManager,
consumer-protocol half): ConsumerGroupHeartbeat, ConsumerGroupDescribe, and the
member-epoch checks of OffsetCommit/OffsetFetch v9.

A mixin of ``GroupCoordinator``: it shares its clock, timers, store and the
one ``groups`` dict (a group id is either a classic ``Group`` or a
``ConsumerGroup``, never both). Runs on the coordinator's single thread.

Timing: the broker owns it (``group.consumer.session.timeout.ms``,
``group.consumer.heartbeat.interval.ms``). A member that does not heartbeat
within the session timeout is removed; a member that does not acknowledge a
revocation within its rebalance timeout is removed too (Kafka fences it), so
its partitions cannot be withheld from their new owners for longer than that.

The target assignment is computed synchronously in the heartbeat that finds
the group epoch ahead of the assignment epoch (Kafka does the same, on its
coordinator thread); members pick up their part on their next heartbeat.

Persistence: ConsumerGroupMetadataKey (v3) / Value (group epoch) is written
when the epoch changes and tombstoned with the group, so the group's type and
epoch survive a restart; member, target-assignment and current-assignment
records (key versions 5-8) are not written. After a restart the group is
Empty at its old epoch; members heartbeating with their old epoch get
UNKNOWN_MEMBER_ID and rejoin with epoch 0, resuming from committed offsets.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid

from kafkapy.coordinator import consumer_group as cg
from kafkapy.coordinator.assignors import ASSIGNORS
from kafkapy.coordinator.consumer_group import ConsumerGroup, ConsumerMember
from kafkapy.coordinator.records import encode_consumer_group_metadata_key, encode_consumer_group_metadata_value
from kafkapy.protocol.errors import ErrorCode as E

log = logging.getLogger("kafkapy.coordinator")

# Kafka skips internal topics when resolving a subscription regex the way the
# classic Java consumer does with exclude.internal.topics=true.
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def new_member_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: URL-safe base64, no padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def _hb_error(error: int, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "member_id": None, "member_epoch": -1,
            "heartbeat_interval": 0, "assignment": None, "throttle_time": 0}


class ConsumerGroupMixin:
    # ------------------------------------------------------------------ helpers
    def _topics_metadata(self) -> dict:
        """{name: (topic_id, num_partitions)} of every existing topic."""
        topics = getattr(self.store, "topics", None)
        return topics() if topics is not None else {}

    def _store_consumer_group_epoch(self, group: ConsumerGroup) -> int:
        return self.store.append(group.partition, [
            (encode_consumer_group_metadata_key(group.group_id),
             encode_consumer_group_metadata_value(group.group_epoch))])

    def _bump_group_epoch(self, group: ConsumerGroup, reason: str) -> None:
        group.group_epoch += 1
        log.info("consumer group %s: epoch %d (%s)", group.group_id, group.group_epoch, reason)
        error = self._store_consumer_group_epoch(group)
        if error:
            log.warning("consumer group %s: storing epoch %d failed (error %d)", group.group_id,
                        group.group_epoch, error)

    def _resolve_subscription(self, member: ConsumerMember, topics: dict) -> set[str]:
        names = {n for n in member.subscribed_topic_names if n in topics}
        if member.subscribed_topic_regex:
            try:
                pattern = re.compile(member.subscribed_topic_regex)
            except re.error:
                return names
            names.update(n for n in topics if n not in _INTERNAL_TOPICS and pattern.fullmatch(n))
        return names

    def _group_subscription_metadata(self, group: ConsumerGroup, topics: dict) -> dict:
        wanted: set[str] = set()
        for m in group.members.values():
            wanted |= self._resolve_subscription(m, topics)
        return {n: topics[n] for n in wanted}

    def _compute_target_assignment(self, group: ConsumerGroup, topics: dict) -> None:
        subscriptions = {m_id: self._resolve_subscription(m, topics) for m_id, m in group.members.items()}
        name = self._group_assignor(group)
        assign = ASSIGNORS[name]
        subscribed = {n: topics[n] for subs in subscriptions.values() for n in subs}
        group.target_assignment = assign(subscriptions, subscribed, group.target_assignment)
        group.assignment_epoch = group.group_epoch
        log.info("consumer group %s: target assignment epoch %d by %s for %d members",
                 group.group_id, group.assignment_epoch, name, len(group.members))

    def _group_assignor(self, group: ConsumerGroup) -> str:
        """Kafka: the assignor most members ask for, else the first configured one."""
        votes: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if votes:
            return max(sorted(votes), key=lambda n: votes[n])
        return self.config.consumer_assignors[0]

    def _arm_session_timer(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.heartbeat_deadline_ms = self._now() + self.config.consumer_session_timeout_ms
        if member.session_timer is None or member.session_timer.cancelled:
            member.session_timer = self.timers.schedule(
                member.heartbeat_deadline_ms, lambda: self._consumer_session_timer(group, member))

    def _consumer_session_timer(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if self.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        now = self._now()
        if now < member.heartbeat_deadline_ms:
            # Heartbeats only move the deadline; one live timer per member.
            member.session_timer = self.timers.schedule(
                member.heartbeat_deadline_ms, lambda: self._consumer_session_timer(group, member))
            return
        log.info("consumer group %s: member %s session expired (%d ms)", group.group_id, member.member_id,
                 self.config.consumer_session_timeout_ms)
        self._remove_consumer_member(group, member, "session timeout")

    def _revocation_timer(self, group: ConsumerGroup, member: ConsumerMember, epoch: int) -> None:
        if self.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        if member.state == cg.M_UNREVOKED and member.member_epoch == epoch:
            log.info("consumer group %s: member %s did not revoke within %d ms", group.group_id,
                     member.member_id, member.rebalance_timeout_ms)
            self._remove_consumer_member(group, member, "revocation timeout")

    def _remove_consumer_member(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> None:
        for timer in (member.session_timer, member.revocation_timer):
            if timer is not None:
                timer.cancel()
        group.release_partitions(member)
        del group.members[member.member_id]
        group.target_assignment.pop(member.member_id, None)
        self._bump_group_epoch(group, f"member {member.member_id} removed: {reason}")
        group.note_state(self._now())

    # ------------------------------------------------------------------ heartbeat
    def consumer_group_heartbeat(self, version: int, req, client_id: str, client_host: str) -> dict:
        """``req`` has the request's fields (kio entity or any object). Returns the response dict."""
        group_id = req.group_id
        member_id = req.member_id
        epoch = req.member_epoch
        owned_req = req.topic_partitions
        regex = getattr(req, "subscribed_topic_regex", None) if version >= 1 else None
        # Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: INVALID_REQUEST.
        if not group_id:
            return _hb_error(E.INVALID_REQUEST, "GroupId can't be empty.")
        if version >= 1 and not member_id:
            return _hb_error(E.INVALID_REQUEST, "MemberId can't be empty.")
        if req.instance_id is not None and req.instance_id == "":
            return _hb_error(E.INVALID_REQUEST, "InstanceId can't be empty.")
        if req.rack_id is not None and req.rack_id == "":
            return _hb_error(E.INVALID_REQUEST, "RackId can't be empty.")
        if epoch == 0:
            if int(req.rebalance_timeout) == -1:
                return _hb_error(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if owned_req is None or len(owned_req) != 0:
                return _hb_error(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and regex is None:
                return _hb_error(E.INVALID_REQUEST,
                                 "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == cg.LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                return _hb_error(E.INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < cg.LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return _hb_error(E.INVALID_REQUEST, f"MemberEpoch {epoch} is invalid.")
        if regex is not None:
            try:
                re.compile(regex)
            except re.error as exc:
                return _hb_error(E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {regex} is invalid: {exc}")
        error = self.ownership_error(req.group_id)
        if error is not None:
            return _hb_error(error)
        if req.server_assignor is not None and req.server_assignor not in self.config.consumer_assignors:
            return _hb_error(E.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                             f"{', '.join(self.config.consumer_assignors)}.")
        now = self._now()
        group = self.groups.get(group_id)
        if group is not None and getattr(group, "type", "classic") != "consumer":
            if epoch == 0 and self._classic_group_is_convertible(group):
                # Kafka 4: an empty classic group becomes a consumer group
                # when a consumer-protocol member joins; its offsets stay.
                offsets = group.offsets
                del self.groups[group_id]
                group = None
                log.info("classic group %s (empty) converted to a consumer group", group_id)
            else:
                return _hb_error(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        else:
            offsets = None
        if group is None:
            if epoch != 0:
                # The member's group is gone (e.g. a restart lost the
                # membership): UNKNOWN_MEMBER_ID makes every client rejoin
                # with epoch 0.
                return _hb_error(E.UNKNOWN_MEMBER_ID, f"Group {group_id} has no member {member_id}.")
            group = ConsumerGroup(group_id, now, self._partition(group_id))
            if offsets:
                group.offsets = offsets
            self.groups[group_id] = group
        if epoch in (cg.LEAVE_GROUP_MEMBER_EPOCH, cg.LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._consumer_leave(group, member_id, req.instance_id, epoch)

        member = group.members.get(member_id) if member_id else None
        if member is None:
            if epoch != 0:
                return _hb_error(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= self.config.consumer_max_size:
                return _hb_error(E.GROUP_MAX_SIZE_REACHED,
                                 f"The consumer group has reached its maximum capacity of "
                                 f"{self.config.consumer_max_size} members.")
            if req.instance_id is not None:
                for other in group.members.values():
                    if other.instance_id == req.instance_id:
                        return _hb_error(E.UNRELEASED_INSTANCE_ID,
                                         f"Static member {other.member_id} with instance id "
                                         f"{req.instance_id} is not released yet.")
            member = ConsumerMember(member_id or new_member_id())
            group.members[member.member_id] = member
            log.info("consumer group %s: member %s joins", group_id, member.member_id)
            changed = True
        elif epoch == 0:
            # A known member rejoining (it was fenced, or lost its state):
            # it has given up everything it held (it must send no partitions).
            group.release_partitions(member)
            member.assigned, member.pending_revocation = {}, {}
            member.member_epoch, member.previous_member_epoch, member.state = 0, -1, cg.M_STABLE
            changed = False
        else:
            owned = self._owned(owned_req)
            if epoch > member.member_epoch:
                return _hb_error(E.FENCED_MEMBER_EPOCH,
                                 f"The member has a greater epoch ({epoch}) than the coordinator's "
                                 f"({member.member_epoch}).")
            if epoch < member.member_epoch and (
                    epoch != member.previous_member_epoch or owned is None
                    or not cg.is_subset(owned, member.assigned)):
                return _hb_error(E.FENCED_MEMBER_EPOCH,
                                 f"The member has a smaller epoch ({epoch}) than the coordinator's "
                                 f"({member.member_epoch}).")
            changed = False

        # Update what the member sent (null: unchanged).
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if int(req.rebalance_timeout) != -1:
            member.rebalance_timeout_ms = int(req.rebalance_timeout)
        member.client_id = client_id or ""
        member.client_host = client_host
        if req.subscribed_topic_names is not None:
            names = sorted(set(req.subscribed_topic_names))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                changed = True
        if regex is not None:
            new_regex = regex or None
            if new_regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex = new_regex
                changed = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True

        topics = self._topics_metadata()
        metadata = self._group_subscription_metadata(group, topics)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            changed = True
        if changed:
            self._bump_group_epoch(group, f"member {member.member_id} joined or changed its subscription")
        if group.group_epoch > group.assignment_epoch:
            self._compute_target_assignment(group, topics)

        before = cg.copy_assignment(member.assigned)
        owned = self._owned(owned_req) if epoch != 0 else {}
        group.release_partitions(member)
        cg.reconcile(member, group.assignment_epoch, group.target_assignment.get(member.member_id, {}),
                     owned, group.partition_epochs)
        group.claim_partitions(member)
        if member.state == cg.M_UNREVOKED:
            if member.revocation_timer is None or member.revocation_timer.cancelled:
                revoking_epoch = member.member_epoch
                member.revocation_timer = self.timers.schedule(
                    now + max(member.rebalance_timeout_ms, 0),
                    lambda: self._revocation_timer(group, member, revoking_epoch))
        elif member.revocation_timer is not None:
            member.revocation_timer.cancel()
            member.revocation_timer = None
        self._arm_session_timer(group, member)
        group.note_state(now)

        response = {"error_code": E.NONE, "error_message": None, "member_id": member.member_id,
                    "member_epoch": member.member_epoch,
                    "heartbeat_interval": self.config.consumer_heartbeat_interval_ms,
                    "assignment": None, "throttle_time": 0}
        if (epoch == 0 or not cg.same_assignment(before, member.assigned)
                or (owned_req is not None and not cg.same_assignment(owned or {}, member.assigned))):
            response["assignment"] = {"topic_partitions": [
                {"topic_id": tid, "partitions": sorted(ps)} for tid, ps in sorted(
                    member.assigned.items(), key=lambda kv: str(kv[0])) if ps]}
        return response

    @staticmethod
    def _owned(topic_partitions) -> dict | None:
        if topic_partitions is None:
            return None
        owned: dict = {}
        for tp in topic_partitions:
            owned.setdefault(tp.topic_id, set()).update(int(p) for p in tp.partitions)
        return owned

    def _classic_group_is_convertible(self, group) -> bool:
        from kafkapy.coordinator import group as g

        return group.is_(g.EMPTY) and not group.members and not group.pending_members

    def _consumer_leave(self, group: ConsumerGroup, member_id: str, instance_id, epoch: int) -> dict:
        member = group.members.get(member_id)
        if member is None and instance_id is not None:
            member = next((m for m in group.members.values() if m.instance_id == instance_id), None)
            if member is not None and member.member_id != member_id:
                return _hb_error(E.FENCED_INSTANCE_ID, f"Instance {instance_id} has another member id.")
        if member is None:
            return _hb_error(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                                  f"{group.group_id}.")
        log.info("consumer group %s: member %s leaves (epoch %d)", group.group_id, member.member_id, epoch)
        # A static member leaving with -2 would keep its assignment for a
        # rejoin within the session timeout in Kafka; here it leaves like a
        # dynamic member (its partitions are reassigned at once).
        self._remove_consumer_member(group, member, "left the group")
        return {"error_code": E.NONE, "error_message": None, "member_id": member.member_id,
                "member_epoch": epoch, "heartbeat_interval": 0, "assignment": None, "throttle_time": 0}

    # ------------------------------------------------------------------ describe
    def consumer_group_describe(self, group_ids) -> list:
        topics = self._topics_metadata()
        by_id = {tid: name for name, (tid, _n) in topics.items()}

        def assignment(a: dict) -> dict:
            return {"topic_partitions": [
                {"topic_id": tid, "topic_name": by_id.get(tid, ""), "partitions": sorted(ps)}
                for tid, ps in sorted(a.items(), key=lambda kv: str(kv[0])) if ps]}

        out = []
        for group_id in group_ids:
            base = {"group_id": group_id, "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
                    "assignor_name": "", "members": [], "error_message": None}
            error = self.ownership_error(group_id)
            if error is not None:
                out.append({**base, "error_code": error})
                continue
            group = self.groups.get(group_id)
            if group is None:
                out.append({**base, "error_code": E.GROUP_ID_NOT_FOUND,
                            "error_message": f"Group {group_id} not found."})
                continue
            if getattr(group, "type", "classic") != "consumer":
                out.append({**base, "error_code": E.GROUP_ID_NOT_FOUND,
                            "error_message": f"Group {group_id} is not a consumer group."})
                continue
            members = []
            for m in group.members.values():
                members.append({
                    "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "subscribed_topic_regex": m.subscribed_topic_regex,
                    "assignment": assignment(m.assigned),
                    "target_assignment": assignment(group.target_assignment.get(m.member_id, {})),
                    "member_type": 1})
            out.append({**base, "error_code": E.NONE, "group_state": group.state,
                        "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                        "assignor_name": self._group_assignor(group) if group.members
                        else self.config.consumer_assignors[0],
                        "members": members})
        return out

    # ------------------------------------------------------------------ offsets (v9)
    def validate_consumer_offset_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int,
                                        api_version: int) -> int | None:
        """Kafka's ConsumerGroup.validateOffsetCommit: None if the commit may proceed."""
        if member_epoch < 0 and not group.members:
            return None  # admin client or a consumer without group management
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if api_version < 9:
            return E.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return None

    def validate_consumer_offset_fetch(self, group: ConsumerGroup, member_id, member_epoch: int) -> int | None:
        if member_id is None and member_epoch < 0:
            return None
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return None
