"""KIP-848 consumer groups in the group coordinator (the consumer-protocol half
of Kafka 4's new GroupMetadataManager): ConsumerGroupHeartbeat,
ConsumerGroupDescribe, and the member-epoch checks of OffsetCommit/OffsetFetch
v9. kafkapy's ``GroupMetadataManager`` is Kafka's classic one (the group
cache and ``__consumer_offsets``); this half is protocol, so it lives with
``GroupCoordinator``.

A mixin of ``GroupCoordinator``: it shares its clock, timers, store and the
one ``groups`` dict (its ``GroupMetadataManager``'s; a group id is either a
classic ``Group`` or a ``ConsumerGroup``, never both). Runs on the
coordinator's single thread.

Timing: the broker owns it (``group.consumer.session.timeout.ms``,
``group.consumer.heartbeat.interval.ms``). A member that does not heartbeat
within the session timeout is removed; a member that does not acknowledge a
revocation within its rebalance timeout is removed too (Kafka fences it), so
its partitions cannot be withheld from their new owners for longer than that.

The target assignment is computed synchronously in the heartbeat that finds
the group epoch ahead of the assignment epoch (Kafka does the same, on its
coordinator thread); members pick up their part on their next heartbeat.

Persistence (Kafka 3.9's records, ``records.py`` keys 3-8): every change a
request or timer makes is written to the group's ``__consumer_offsets``
partition as one batch, and the answer goes out once that append settled
(parked meanwhile, ``GroupMetadataManager.append_then``; the change itself is
in memory at once), in Kafka's order: the
member's subscription (5), the group's resolved topics (4), the group epoch
(3), the changed target assignments (7) and the assignment epoch (6), the
member's current assignment (8). A member leaving tombstones its 8, 7 and 5;
deleting or converting the group tombstones every member's records, then 6,
4 and 3. ``load_consumer_groups`` replays them, so after a restart every
member keeps its epoch and partitions (and gets a fresh session timeout),
and the group epoch continues.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid

from kafkapy.coordinator import consumer_group as cg
from kafkapy.coordinator.assignors import ASSIGNORS
from kafkapy.coordinator.consumer_group import ConsumerGroup, ConsumerMember
from kafkapy.coordinator import records as rec
from kafkapy.protocol.errors import ErrorCode as E

log = logging.getLogger("kafkapy.coordinator")

# ConsumerMember.state -> Kafka's MemberState value in the current-assignment record.
_STATE_VALUES = {cg.M_STABLE: rec.MEMBER_STATE_STABLE, cg.M_UNREVOKED: rec.MEMBER_STATE_UNREVOKED_PARTITIONS,
                 cg.M_UNRELEASED: rec.MEMBER_STATE_UNRELEASED_PARTITIONS}
_STATES = {v: k for k, v in _STATE_VALUES.items()}

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

    def _bump_group_epoch(self, group: ConsumerGroup, reason: str, records: list) -> None:
        group.group_epoch += 1
        log.info("consumer group %s: epoch %d (%s)", group.group_id, group.group_epoch, reason)
        records.append((rec.encode_consumer_group_metadata_key(group.group_id),
                        rec.encode_consumer_group_metadata_value(group.group_epoch)))

    def _write_consumer_records(self, group: ConsumerGroup, records: list, then=None) -> None:
        """Append what one request or timer changed as one batch and call
        ``then(error code)`` once it settled, at once or from
        ``poll_appends`` (the change stays in memory either way; the client
        retries)."""
        if not records:
            if then is not None:
                then(E.NONE)
            return
        group_id = group.group_id

        def settled(error, _base_offset):
            if error:
                log.warning("consumer group %s: storing %d records failed (error %d)", group_id, len(records),
                            error)
            if then is not None:
                then(error)

        self.manager.append_then(group.partition, records, settled)

    @staticmethod
    def _answer_when_written(response: dict, respond):
        """What a heartbeat answers once its records settled: ``response``,
        or the append's error."""
        return lambda error: respond(_hb_error(error) if error else response)

    @staticmethod
    def _member_fields(member: ConsumerMember) -> tuple:
        """What ConsumerGroupMemberMetadataValue holds of a member."""
        return (member.instance_id, member.rack_id, member.client_id, member.client_host,
                tuple(member.subscribed_topic_names), member.subscribed_topic_regex,
                member.rebalance_timeout_ms, member.server_assignor)

    @staticmethod
    def _current_fields(member: ConsumerMember) -> tuple:
        """What ConsumerGroupCurrentMemberAssignmentValue holds of a member."""
        return (member.member_epoch, member.previous_member_epoch, member.state,
                cg.copy_assignment(member.assigned), cg.copy_assignment(member.pending_revocation))

    def _member_record(self, group: ConsumerGroup, member: ConsumerMember) -> tuple:
        key = rec.encode_consumer_record_key(rec.MEMBER_METADATA_KEY_VERSION, group.group_id, member.member_id)
        return key, rec.encode_member_metadata_value(rec.ConsumerMemberRecord(
            member.instance_id, member.rack_id, member.client_id, member.client_host,
            sorted(member.subscribed_topic_names), member.subscribed_topic_regex,
            member.rebalance_timeout_ms, member.server_assignor))

    def _current_assignment_record(self, group: ConsumerGroup, member: ConsumerMember) -> tuple:
        key = rec.encode_consumer_record_key(rec.CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION, group.group_id,
                                             member.member_id)
        return key, rec.encode_current_assignment_value(rec.CurrentAssignmentRecord(
            member.member_epoch, member.previous_member_epoch, _STATE_VALUES[member.state],
            member.assigned, member.pending_revocation))

    @staticmethod
    def _member_tombstones(group_id: str, member_id: str) -> list:
        """Kafka's order: current assignment, target assignment, subscription."""
        return [(rec.encode_consumer_record_key(version, group_id, member_id), None)
                for version in (rec.CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION, rec.TARGET_ASSIGNMENT_MEMBER_KEY_VERSION,
                                rec.MEMBER_METADATA_KEY_VERSION)]

    def consumer_group_tombstones(self, group: ConsumerGroup) -> list:
        """Every record of ``group`` deleted (Kafka's createGroupTombstoneRecords):
        its members', then the assignment epoch, topics and group epoch."""
        records = []
        for member_id in group.members:
            records += self._member_tombstones(group.group_id, member_id)
        records += [(rec.encode_consumer_record_key(rec.TARGET_ASSIGNMENT_METADATA_KEY_VERSION, group.group_id), None),
                    (rec.encode_consumer_record_key(rec.PARTITION_METADATA_KEY_VERSION, group.group_id), None),
                    (rec.encode_consumer_group_metadata_key(group.group_id), None)]
        return records

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

    def _compute_target_assignment(self, group: ConsumerGroup, topics: dict, records: list) -> None:
        subscriptions = {m_id: self._resolve_subscription(m, topics) for m_id, m in group.members.items()}
        name = self._group_assignor(group)
        assign = ASSIGNORS[name]
        subscribed = {n: topics[n] for subs in subscriptions.values() for n in subs}
        old = group.target_assignment
        group.target_assignment = assign(subscriptions, subscribed, old)
        group.assignment_epoch = group.group_epoch
        # Kafka's TargetAssignmentBuilder: a record per member whose target changed.
        for member_id, target in sorted(group.target_assignment.items()):
            if member_id not in old or not cg.same_assignment(old[member_id], target):
                records.append((rec.encode_consumer_record_key(rec.TARGET_ASSIGNMENT_MEMBER_KEY_VERSION,
                                                               group.group_id, member_id),
                                rec.encode_target_assignment_member_value(target)))
        records.append((rec.encode_consumer_record_key(rec.TARGET_ASSIGNMENT_METADATA_KEY_VERSION, group.group_id),
                        rec.encode_epoch_value(group.assignment_epoch)))
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

    def _remove_consumer_member(self, group: ConsumerGroup, member: ConsumerMember, reason: str, then=None) -> None:
        for timer in (member.session_timer, member.revocation_timer):
            if timer is not None:
                timer.cancel()
        group.release_partitions(member)
        del group.members[member.member_id]
        group.target_assignment.pop(member.member_id, None)
        records = self._member_tombstones(group.group_id, member.member_id)
        self._bump_group_epoch(group, f"member {member.member_id} removed: {reason}", records)
        group.note_state(self._now())
        self._write_consumer_records(group, records, then)

    # ------------------------------------------------------------------ loading
    @staticmethod
    def replay_consumer_record(replayed: dict, key, value) -> None:
        """Fold one record with key version 3-8 into ``replayed`` (group id ->
        what its records say now; the last record per key wins, a tombstone
        deletes). The group epoch's tombstone, written last when a group is
        deleted, drops everything of the group."""
        group_id = key.group
        if isinstance(key, rec.ConsumerGroupKey):
            if value is None:
                replayed.pop(group_id, None)
                return
            state = replayed.setdefault(group_id, {})
            state["epoch"] = rec.decode_consumer_group_metadata_value(value)
            return
        state = replayed.setdefault(group_id, {})
        version = key.version
        if version == rec.PARTITION_METADATA_KEY_VERSION:
            state["topics"] = rec.decode_partition_metadata_value(value) if value is not None else {}
        elif version == rec.TARGET_ASSIGNMENT_METADATA_KEY_VERSION:
            state["assignment_epoch"] = rec.decode_epoch_value(value) if value is not None else None
        else:
            decode, field = {rec.MEMBER_METADATA_KEY_VERSION: (rec.decode_member_metadata_value, "members"),
                             rec.TARGET_ASSIGNMENT_MEMBER_KEY_VERSION: (rec.decode_target_assignment_member_value,
                                                                        "targets"),
                             rec.CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION: (rec.decode_current_assignment_value,
                                                                         "current")}[version]
            per = state.setdefault(field, {})
            if value is None:
                per.pop(key.member_id, None)
            else:
                per[key.member_id] = decode(value)

    def load_consumer_groups(self, replayed: dict, offsets: dict, now: int) -> None:
        """Rebuild the consumer groups ``replay_consumer_record`` gathered (a
        group exists while its epoch record does): members keep their epochs,
        states and partitions, and each gets a full session timeout to
        heartbeat again (Kafka's onLoaded)."""
        for group_id, state in replayed.items():
            epoch = state.get("epoch")
            if epoch is None:
                continue
            group = ConsumerGroup(group_id, now, self._partition(group_id))
            group.group_epoch = epoch
            assignment_epoch = state.get("assignment_epoch")
            # A log of a kafkapy that wrote only the epoch: the group was Empty.
            group.assignment_epoch = epoch if assignment_epoch is None else assignment_epoch
            group.subscription_metadata = dict(state.get("topics") or {})
            group.offsets = dict(offsets.get(group_id, {}))
            targets = state.get("targets", {})
            current = state.get("current", {})
            for member_id, mr in state.get("members", {}).items():
                member = ConsumerMember(member_id)
                member.instance_id, member.rack_id = mr.instance_id, mr.rack_id
                member.client_id, member.client_host = mr.client_id, mr.client_host
                member.subscribed_topic_names = sorted(mr.subscribed_topic_names)
                member.subscribed_topic_regex = mr.subscribed_topic_regex
                member.rebalance_timeout_ms = mr.rebalance_timeout_ms
                member.server_assignor = mr.server_assignor
                c = current.get(member_id)
                if c is not None:
                    member.member_epoch, member.previous_member_epoch = c.member_epoch, c.previous_member_epoch
                    member.state = _STATES.get(c.state, cg.M_STABLE)
                    member.assigned = cg.copy_assignment(c.assigned)
                    member.pending_revocation = cg.copy_assignment(c.pending_revocation)
                group.members[member_id] = member
                group.target_assignment[member_id] = cg.copy_assignment(targets.get(member_id, {}))
                group.claim_partitions(member)
            self.groups[group_id] = group
            for member in group.members.values():
                self._arm_session_timer(group, member)
                if member.state == cg.M_UNREVOKED:
                    revoking_epoch = member.member_epoch
                    member.revocation_timer = self.timers.schedule(
                        now + max(member.rebalance_timeout_ms, 0),
                        lambda group=group, member=member, e=revoking_epoch: self._revocation_timer(group, member, e))
            group.note_state(now)

    # ------------------------------------------------------------------ heartbeat
    def consumer_group_heartbeat(self, version: int, req, client_id: str, client_host: str, respond=None):
        """``req`` has the request's fields (kio entity or any object). The
        response dict goes to ``respond`` once the heartbeat's records
        settled (without ``respond``: returned, None while they wait)."""
        def run(answer):
            outcome = self._consumer_group_heartbeat(version, req, client_id, client_host)
            if callable(outcome):  # records written: answered once they settle
                outcome(answer)
            else:
                answer(outcome)

        if respond is not None:
            return run(respond)
        out = []
        run(out.append)
        return out[0] if out else None

    def _consumer_group_heartbeat(self, version: int, req, client_id: str, client_host: str):
        """The heartbeat's response dict, or (when it wrote records) a
        callable taking ``respond`` that answers once they settled."""
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
        fields_before = self._member_fields(member) if member is not None else None
        current_before = self._current_fields(member) if member is not None else None
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

        records = []
        if self._member_fields(member) != fields_before:
            records.append(self._member_record(group, member))
        topics = self._topics_metadata()
        metadata = self._group_subscription_metadata(group, topics)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            records.append((rec.encode_consumer_record_key(rec.PARTITION_METADATA_KEY_VERSION, group_id),
                            rec.encode_partition_metadata_value(metadata)))
            changed = True
        if changed:
            self._bump_group_epoch(group, f"member {member.member_id} joined or changed its subscription",
                                   records)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target_assignment(group, topics, records)

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
        if self._current_fields(member) != current_before:
            records.append(self._current_assignment_record(group, member))
        response = {"error_code": E.NONE, "error_message": None, "member_id": member.member_id,
                    "member_epoch": member.member_epoch,
                    "heartbeat_interval": self.config.consumer_heartbeat_interval_ms,
                    "assignment": None, "throttle_time": 0}
        if (epoch == 0 or not cg.same_assignment(before, member.assigned)
                or (owned_req is not None and not cg.same_assignment(owned or {}, member.assigned))):
            response["assignment"] = {"topic_partitions": [
                {"topic_id": tid, "partitions": sorted(ps)} for tid, ps in sorted(
                    member.assigned.items(), key=lambda kv: str(kv[0])) if ps]}
        return lambda respond: self._write_consumer_records(group, records,
                                                            self._answer_when_written(response, respond))

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

    def _consumer_leave(self, group: ConsumerGroup, member_id: str, instance_id, epoch: int):
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
        response = {"error_code": E.NONE, "error_message": None, "member_id": member.member_id,
                    "member_epoch": epoch, "heartbeat_interval": 0, "assignment": None, "throttle_time": 0}
        return lambda respond: self._remove_consumer_member(group, member, "left the group",
                                                            self._answer_when_written(response, respond))

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
