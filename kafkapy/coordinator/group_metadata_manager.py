"""The group metadata manager (Kafka's GroupMetadataManager): the group cache and ``__consumer_offsets``.

Its job is what the groups are and what the log says about them: the one
``groups`` dict (Kafka's groupMetadataCache; a group id is either a classic
``Group`` or a KIP-848 ``ConsumerGroup``), which ``__consumer_offsets``
partitions are served here (owned / loading), storing group metadata and
offsets (OffsetCommit, TxnOffsetCommit), answering OffsetFetch from the
committed offsets, the pending ones (Kafka's pendingOffsetCommits and
pendingTransactionalOffsetCommits) and their completion by transaction
markers, offset expiry, and loading and unloading partitions. The
membership protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
rebalances, member timers, KIP-848 heartbeats) is ``GroupCoordinator``'s,
which validates each request and calls this; this module never imports it.
Where a partition load or unload touches members, the coordinator's
callbacks do that part (Kafka's onGroupLoaded / onGroupUnloaded).

Owned by the group-coordinator process and run on its single thread (the
coordinator's, sharing its ``Timers``): no locks. The clock is injected
(``clock_ms``), persistence goes through ``store`` (``append(partition,
[(key, value_or_None)]) -> error_code``, ``partition_exists(topic, p)``,
``num_partitions``; ``begin_append`` / ``poll_append`` where an append may
wait for the followers).

Appends the followers have not replicated yet are parked, not waited for
(Kafka's DelayedProduce for storeOffsets / storeGroup): OffsetCommit,
TxnOffsetCommit, the SyncGroup leader's assignment, a static member's
rejoin and KIP-848 heartbeat and leave records all go through
``append_then``. The request is answered (and committed offsets applied)
when ``poll_appends``, called from the process loop, sees the high
watermark pass the append, leadership move or the append timeout
(``offsets.commit.timeout.ms``) run out; meanwhile the offsets are pending
(OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for
them, a plain one the last committed value). Standalone (the ISR the leader
alone) every append settles at once, inline. Group deletion, offset expiry,
OffsetDelete and the conversion of an empty consumer group to a classic one
still wait inline (rare admin paths).
"""

from __future__ import annotations

import logging

from kafkapy.coordinator import group as g
from kafkapy.coordinator.group import Group, Member
from kafkapy.coordinator.records import (
    ConsumerGroupKey,
    ConsumerRecordKey,
    GroupKey,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetKey,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from kafkapy.coordinator.transaction.pending_offsets import CommitRecord, PendingTxnOffsets
from kafkapy.coordinator.transaction.transaction_coordinator import MARKER_POLL_MAX_MS, MARKER_POLL_MIN_MS
from kafkapy.protocol.errors import ErrorCode as E

log = logging.getLogger("kafkapy.coordinator")


def maybe_convert_offset_commit_error(error_code: int) -> int:
    """Kafka 3.9's GroupMetadataManager.maybeConvertOffsetCommitError, for a
    TxnOffsetCommit whose verification failed: NETWORK_EXCEPTION (the
    transaction coordinator did not answer; older clients may not retry
    it) as COORDINATOR_LOAD_IN_PROGRESS, which they retry without a
    coordinator lookup; the append's errors as a commit answers them;
    the rest (INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, the coordinator
    errors) as they are."""
    if error_code == E.NETWORK_EXCEPTION:
        return E.COORDINATOR_LOAD_IN_PROGRESS
    if error_code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return E.COORDINATOR_NOT_AVAILABLE
    if error_code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error_code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE
    return error_code


def is_consumer(group) -> bool:
    """A KIP-848 ``ConsumerGroup`` (else a classic ``Group``)."""
    return getattr(group, "type", "classic") == "consumer"


class GroupMetadataManager:
    def __init__(self, config, store, clock_ms, timers, consumer_group_tombstones):
        """``config``: the coordinator's ``CoordinatorConfig`` (the
        ``offsets_*`` and ``offset_metadata_max_bytes`` settings are read
        here); ``timers``: the coordinator's; ``consumer_group_tombstones``:
        a consumer group's records deleted (the coordinator's KIP-848 half
        builds them)."""
        self.config = config
        self.store = store
        self.clock_ms = clock_ms
        self.timers = timers
        self.consumer_group_tombstones = consumer_group_tombstones
        self.groups: dict[str, Group] = {}  # and ConsumerGroups (KIP-848)
        self.loading = False
        # Which __consumer_offsets partitions this coordinator serves (Kafka's
        # GroupMetadataManager ownedPartitions / loadingPartitions): None is
        # every partition (a standalone broker); in a cluster, those whose
        # leader this broker is (the coordinator process follows leadership).
        self.owned_partitions: set | None = None
        self.loading_partitions: set = set()
        self._retention_timer = None
        # Offsets committed inside transactions (TxnOffsetCommit), waiting for
        # their producer's marker on the group's partition: group id ->
        # PendingTxnOffsets (Kafka's pendingTransactionalOffsetCommits).
        self.pending_txn_offsets: dict[str, PendingTxnOffsets] = {}
        # __consumer_offsets partition -> the offset to look for markers from
        # (``poll_txn_markers``), while groups of it have pending offsets.
        self.txn_marker_scan: dict[int, int] = {}
        # Appends waiting for the followers, in append order: (the store's
        # pending handle, the __consumer_offsets partition, what to call with
        # (error, base offset) once it settles); see ``poll_appends``.
        self._parked: list[tuple[object, int, object]] = []
        self._parked_activity = False  # something parked or settled since the last poll
        self._poll_ms = MARKER_POLL_MIN_MS
        # Offset commits written but not replicated yet (Kafka's
        # pendingOffsetCommits): group id -> {(topic, partition): the
        # OffsetAndMetadata last written}.
        self.pending_offset_commits: dict[str, dict] = {}
        begin = getattr(store, "begin_append", None)
        self._begin_append = begin if begin is not None else self._append_inline

    # ------------------------------------------------------------------ the group cache
    def _now(self) -> int:
        return self.clock_ms()

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.store.num_partitions)

    def ownership_error(self, group_id: str):
        """Kafka's isGroupLocal / isGroupLoading: NOT_COORDINATOR for a group
        of a partition this broker does not lead, COORDINATOR_LOAD_IN_PROGRESS
        while its partition loads; None when it is served here."""
        partition = self.partition_for(group_id)
        if self.loading or partition in self.loading_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if self.owned_partitions is not None and partition not in self.owned_partitions:
            return E.NOT_COORDINATOR
        return None

    def get_or_create(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = Group(group_id, self._now(), self.partition_for(group_id))
            self.groups[group_id] = group
        return group

    def drop_if_unused(self, group: Group) -> None:
        """Forget a group that exists only because a failed request created it."""
        if is_consumer(group):
            return
        if (group.is_(g.EMPTY) and not group.members and not group.pending_members
                and not group.offsets and group.generation_id == 0
                and group.group_id not in self.pending_offset_commits):
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]

    # ------------------------------------------------------------------ persistence
    def _group_record(self, group: Group, assignment: dict | None = None) -> bytes:
        members = []
        protocol = group.protocol_name
        for m in group.members.values():
            members.append(MemberRecord(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, m.metadata(protocol) if protocol else b"",
                (assignment or {}).get(m.member_id, m.assignment)))
        rec = GroupRecord(group.protocol_type or "", group.generation_id, protocol,
                          group.leader_id if members else None, group.state_timestamp_ms, members)
        return encode_group_value(rec)

    def store_group(self, group: Group, assignment: dict | None = None, then=None) -> None:
        """Write the group's metadata record; ``then(error, base offset)``
        once the append settled (see ``append_then``)."""
        self.append_then(group.partition, [(encode_group_key(group.group_id), self._group_record(group, assignment))],
                         then or self._log_failed_store(group.group_id))

    @staticmethod
    def _log_failed_store(group_id: str):
        def then(error, _base_offset):
            if error:
                log.warning("group %s: storing its metadata failed (error %d)", group_id, error)
        return then

    def _append_inline(self, partition: int, records, producer=None, verification=None):
        """``begin_append`` of a store that has only ``append`` /
        ``append_transactional`` (test doubles): settled at once."""
        if producer is not None:
            return (*self.store.append_transactional(partition, records, *producer), None)
        return self.store.append(partition, records), -1, None

    def append_then(self, partition: int, records, then, producer=None, verification=None) -> bool:
        """Append ``records`` (acks=-1; ``producer``: its ``(id, epoch)``
        for a transactional batch, ``verification`` what the append checks
        it against, KIP-890) and call ``then(error, base offset)``
        once the append settled: at once when it did already (always with
        the ISR the leader alone), else from ``poll_appends`` (or
        NOT_COORDINATOR from ``unload_partition``). True when it was parked."""
        code, base_offset, pending = self._begin_append(partition, records, producer, verification)
        if pending is None:
            if self._parked:
                # Earlier appends settle first (the high watermark passed
                # them too): a partition's commits apply in append order.
                self.poll_appends(0)
            then(code, base_offset)
            return False
        self._parked.append((pending, partition, then))
        self._parked_activity = True
        return True

    def _settle(self, then, error: int, base_offset: int) -> None:
        """Run a parked append's continuation: a failure (its reply's pipe,
        say) costs that request's answer only, never the other parked ones."""
        try:
            then(error, base_offset)
        except Exception:
            log.exception("completing a parked __consumer_offsets append failed")

    def poll_appends(self, now_ms: int) -> int | None:
        """Complete the parked appends that settled (replicated, failed or
        timed out), in append order; the others stay parked. Returns when
        to look again (``now_ms`` plus 1-16 ms, backing off while nothing
        settles, as the transaction coordinator's ``tick``), None when
        nothing is parked."""
        if not self._parked:
            return None
        parked, self._parked = self._parked, []
        waiting = []
        poll = self.store.poll_append
        for item in parked:
            settled = poll(item[0])
            if settled is None:
                waiting.append(item)
                continue
            self._parked_activity = True
            self._settle(item[2], *settled)
        self._parked[:0] = waiting
        if not self._parked:
            return None
        if self._parked_activity:
            self._parked_activity = False
            self._poll_ms = MARKER_POLL_MIN_MS
        else:
            self._poll_ms = min(self._poll_ms * 2, MARKER_POLL_MAX_MS)
        return now_ms + self._poll_ms

    # ------------------------------------------------------------------ offsets
    def store_offsets(self, group: Group, offsets, retention_ms, respond, producer=None,
                      verification=None) -> None:
        """Write ``offsets`` and answer ``respond`` once the append settled:
        applied then (pending meanwhile, Kafka's pendingOffsetCommits); with
        ``producer`` (id, epoch) in that producer's transactional batch,
        kept pending for its marker instead (``verification``: KIP-890's,
        what the append checks the batch against)."""
        now = self._now()
        results = {}
        records = []
        accepted = {}
        for topic, partition, offset, leader_epoch, metadata, *commit_ts in offsets:
            key = (topic, partition)
            if metadata is not None and len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[key] = E.OFFSET_METADATA_TOO_LARGE
                continue
            if not self.store.partition_exists(topic, partition):
                results[key] = E.UNKNOWN_TOPIC_OR_PARTITION
                continue
            commit_ms = commit_ts[0] if commit_ts and commit_ts[0] != -1 else now
            om = OffsetAndMetadata(offset, leader_epoch, metadata or "", commit_ms,
                                   now + retention_ms if retention_ms is not None and retention_ms >= 0 else -1)
            accepted[key] = om
            records.append((encode_offset_key(group.group_id, topic, partition), encode_offset_value(om)))
        if not records:
            self.drop_if_unused(group)
            return respond(results)
        group_id = group.group_id
        if producer is not None:
            self.pending_txn_offsets.setdefault(group_id, PendingTxnOffsets()).prepare(producer[0], accepted)

        def stored(error, base_offset):
            try:
                if producer is not None:
                    self._txn_offsets_stored(group_id, producer[0], accepted, error, base_offset)
                else:
                    self._offsets_stored(group, accepted, error)
                if self.groups.get(group_id) is group:
                    self.drop_if_unused(group)
            except Exception:  # the request is still answered (its connection waits for it)
                log.exception("group %s: completing an offset commit failed", group_id)
                error = E.UNKNOWN_SERVER_ERROR
            results.update(dict.fromkeys(accepted, error))
            respond(results)

        if self.append_then(group.partition, records, stored, producer, verification) and producer is None:
            self.pending_offset_commits.setdefault(group_id, {}).update(accepted)
        self.drop_if_unused(group)

    def _offsets_stored(self, group: Group, accepted: dict, error: int) -> None:
        """An offset commit's append settled (Kafka's onOffsetCommitAppend /
        failPendingOffsetWrite): no longer pending, and the group's committed
        offsets unless it failed or the group left memory meanwhile."""
        pending = self.pending_offset_commits.get(group.group_id)
        if pending is not None:
            for key, om in accepted.items():
                if pending.get(key) is om:  # not a later commit of the partition
                    del pending[key]
            if not pending:
                del self.pending_offset_commits[group.group_id]
        if not error and self.groups.get(group.group_id) is group:
            group.offsets.update(accepted)

    def _txn_offsets_stored(self, group_id: str, producer_id: int, accepted: dict, error: int,
                            base_offset: int) -> None:
        """A TxnOffsetCommit's append settled: its offsets wait for the
        producer's marker (from ``base_offset``), or are forgotten."""
        pending = self.pending_txn_offsets.get(group_id)
        if pending is None:  # unloaded meanwhile
            return
        for key, om in accepted.items():
            if error:
                pending.fail(producer_id, key)
            else:
                pending.on_append(producer_id, key, om, base_offset)
        if not error:
            partition = self.partition_for(group_id)
            self.txn_marker_scan[partition] = min(self.txn_marker_scan.get(partition, base_offset), base_offset)
        if not pending.pending:
            del self.pending_txn_offsets[group_id]

    def on_txn_marker(self, tp, markers) -> None:
        """A COMMIT / ABORT marker was written to ``tp`` by this process's
        transaction coordinator (its marker channel's ``on_written``)."""
        if tp[0] == self.store.topic:
            self._complete_txn_offsets(tp[1], markers.producer_id, markers.commit)

    def poll_txn_markers(self) -> None:
        """Markers another process appended to partitions whose groups have
        pending transactional offsets (WriteTxnMarkers from the transaction
        coordinator of another broker, answered by a handler worker here):
        read from the log, as Kafka's WriteTxnMarkers handler tells its group
        coordinator (onTransactionCompleted)."""
        for partition, start in list(self.txn_marker_scan.items()):
            markers, end = self.store.markers_since(partition, start)
            for offset, producer_id, commit in markers:
                self._complete_txn_offsets(partition, producer_id, commit, offset)
            if any(self.partition_for(group_id) == partition for group_id in self.pending_txn_offsets):
                self.txn_marker_scan[partition] = end
            else:
                del self.txn_marker_scan[partition]

    def _complete_txn_offsets(self, partition: int, producer_id: int, commit: bool, marker_offset=None) -> None:
        """The producer's marker on ``partition`` (at ``marker_offset`` when
        read from the log: only offsets appended before it are its): its
        pending offsets there become the groups' committed offsets, or are
        dropped (Kafka's handleTxnCompletion)."""
        for group_id, pending in list(self.pending_txn_offsets.items()):
            if self.partition_for(group_id) != partition or not pending.has_pending_from(producer_id):
                continue
            records = pending.pending[producer_id]
            if marker_offset is not None and any(
                    r.appended_batch_offset is None or r.appended_batch_offset > marker_offset
                    for r in records.values()):
                continue
            del pending.pending[producer_id]
            # An offsets-only group whose only commits were pending was not
            # kept (``drop_if_unused``): it exists again once they apply.
            group = self.get_or_create(group_id)
            for key, record in records.items():
                if commit and record.appended_batch_offset is not None:
                    group.offsets[key] = record.value
            self.drop_if_unused(group)
            if not pending.pending:
                del self.pending_txn_offsets[group_id]

    def get_offsets(self, group_id, topics, require_stable=False) -> tuple[int, list]:
        """OffsetFetch of a group the coordinator validated (Kafka's
        getOffsets): ``topics`` as for ``GroupCoordinator.fetch_offsets``."""
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        out = []
        if topics is None:
            by_topic: dict[str, list] = {}
            for (t, p), om in sorted(offsets.items()):
                by_topic.setdefault(t, []).append((p, om, E.NONE))
            return E.NONE, list(by_topic.items())
        pending = self.pending_txn_offsets.get(group_id) if require_stable else None
        unreplicated = self.pending_offset_commits.get(group_id) if require_stable else None
        for topic, partitions in topics:
            out.append((topic, [(p, None, E.UNSTABLE_OFFSET_COMMIT)
                                if (pending is not None and pending.has_pending_for((topic, p)))
                                or (unreplicated is not None and (topic, p) in unreplicated)
                                else (p, offsets.get((topic, p)), E.NONE)
                                for p in partitions]))
        return E.NONE, out

    def delete_offsets(self, group: Group, partitions) -> int:
        """OffsetDelete's tombstones for those of ``partitions`` (topic,
        partition) the group has offsets for, waited for inline; on success
        they leave the group. Returns the append's error code."""
        tombstones = [(encode_offset_key(group.group_id, topic, partition), None)
                      for topic, partition in partitions if (topic, partition) in group.offsets]
        if tombstones:
            error = self.store.append(group.partition, tombstones)
            if error:
                return error
            for key in partitions:
                group.offsets.pop(key, None)
        return E.NONE

    def delete_group(self, group: Group) -> int:
        """DeleteGroups of an Empty group (Kafka's cleanupGroupMetadata): its
        offsets and metadata tombstoned, waited for inline; on success the
        group is Dead and leaves the cache. Returns the append's error code."""
        group_id = group.group_id
        records = [(encode_offset_key(group_id, t, p), None) for t, p in group.offsets]
        records += (self.consumer_group_tombstones(group) if is_consumer(group)
                    else [(encode_group_key(group_id), None)])
        error = self.store.append(group.partition, records)
        if error:
            return error
        if is_consumer(group):
            group.dead = True
        else:
            group.transition(g.DEAD, self._now())
        del self.groups[group_id]
        log.info("deleted group %s", group_id)
        return E.NONE

    # ------------------------------------------------------------------ retention
    def schedule_offset_expiry(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms
        self._retention_timer = self.timers.schedule(self._now() + interval, self._expiry_tick)

    def _expiry_tick(self) -> None:
        try:
            self.expire_offsets()
        finally:
            self.schedule_offset_expiry()

    def expire_offsets(self) -> int:
        """offsets.retention.minutes for Empty groups (Kafka 2.1+, KIP-211): a
        consumer group's offsets expire that long after it became Empty; an
        offsets-only group's offsets that long after each commit; an explicit
        v1 expire timestamp wins. An Empty group left without offsets is
        removed (tombstoned). Returns how many offsets expired."""
        now = self._now()
        retention = self.config.offsets_retention_ms
        expired_total = 0
        for group in list(self.groups.values()):
            if not group.is_(g.EMPTY):
                continue
            expired = []
            for key, om in group.offsets.items():
                if om.expire_timestamp_ms >= 0:
                    due = now >= om.expire_timestamp_ms
                else:
                    base = group.state_timestamp_ms if group.protocol_type else om.commit_timestamp_ms
                    due = now >= base + retention
                if due:
                    expired.append(key)
            records = [(encode_offset_key(group.group_id, t, p), None) for t, p in expired]
            drop_group = not group.members and len(expired) == len(group.offsets)
            if drop_group:
                records += (self.consumer_group_tombstones(group) if is_consumer(group)
                            else [(encode_group_key(group.group_id), None)])
            if not records:
                continue
            if self.store.append(group.partition, records):
                continue
            for key in expired:
                del group.offsets[key]
            expired_total += len(expired)
            if drop_group:
                if is_consumer(group):
                    group.dead = True
                else:
                    group.transition(g.DEAD, now)
                del self.groups[group.group_id]
                log.info("group %s removed: empty with no offsets left", group.group_id)
        return expired_total

    # ------------------------------------------------------------------ loading
    def load_open_transactions(self, open_transactions: dict) -> None:
        """After ``load``: the offsets of transactions still open in the log
        (the store's ``open_transactions``: partition -> producer id ->
        [(key, value, batch offset)]) wait for their markers again."""
        for by_producer in open_transactions.values():
            for producer_id, held in by_producer.items():
                for key_bytes, value, batch_offset in held:
                    try:
                        key = decode_key(key_bytes)
                        if not isinstance(key, OffsetKey):
                            continue
                        commit = decode_offset_value(value) if value is not None else None
                    except RecordFormatError as exc:
                        log.warning("skipping undecodable transactional __consumer_offsets record: %s", exc)
                        continue
                    pending = self.pending_txn_offsets.setdefault(key.group, PendingTxnOffsets())
                    records = pending.pending.setdefault(producer_id, {})
                    if commit is None:
                        records.pop((key.topic, key.partition), None)
                    else:
                        records[(key.topic, key.partition)] = CommitRecord(batch_offset, commit)
                    partition = self.partition_for(key.group)
                    self.txn_marker_scan[partition] = min(self.txn_marker_scan.get(partition, batch_offset),
                                                          batch_offset)

    def load(self, records, on_group_loaded, replay_consumer_record, load_consumer_groups) -> None:
        """Replay ``(partition, key_bytes, value_bytes_or_None)`` in log order
        (Kafka's GroupMetadataManager.loadGroupsAndOffsets): the last record
        per key wins, tombstones delete. The coordinator's KIP-848 half
        folds and rebuilds the consumer groups (``replay_consumer_record``,
        ``load_consumer_groups``); ``on_group_loaded(group, member, now)``
        is called for each member of a classic group loaded (Kafka's
        onGroupLoaded: its session timer)."""
        offsets: dict[str, dict] = {}
        groups: dict[str, GroupRecord | None] = {}
        consumer_groups: dict[str, dict] = {}  # see replay_consumer_record
        skipped = 0
        for _partition, key_bytes, value in records:
            try:
                key = decode_key(key_bytes)
                if isinstance(key, OffsetKey):
                    per = offsets.setdefault(key.group, {})
                    if value is None:
                        per.pop((key.topic, key.partition), None)
                    else:
                        per[(key.topic, key.partition)] = decode_offset_value(value)
                elif isinstance(key, GroupKey):
                    groups[key.group] = decode_group_value(value) if value is not None else None
                elif isinstance(key, (ConsumerGroupKey, ConsumerRecordKey)):
                    replay_consumer_record(consumer_groups, key, value)
            except RecordFormatError as exc:
                skipped += 1
                log.warning("skipping undecodable __consumer_offsets record: %s", exc)
        now = self._now()
        load_consumer_groups(consumer_groups, offsets, now)
        for group_id in set(offsets) | set(groups):
            if group_id in self.groups:
                continue
            rec = groups.get(group_id)
            group_offsets = offsets.get(group_id, {})
            if rec is None and not group_offsets:
                continue
            group = Group(group_id, now, self.partition_for(group_id))
            group.offsets = dict(group_offsets)
            if rec is not None:
                group.protocol_type = rec.protocol_type or None
                group.generation_id = rec.generation
                group.protocol_name = rec.protocol
                group.leader_id = rec.leader
                if rec.current_state_timestamp_ms >= 0:
                    group.state_timestamp_ms = rec.current_state_timestamp_ms
                for mr in rec.members:
                    m = Member(mr.member_id, mr.group_instance_id, mr.client_id, mr.client_host,
                               mr.rebalance_timeout_ms, mr.session_timeout_ms, group.protocol_type,
                               [(rec.protocol, mr.subscription)] if rec.protocol else [])
                    m.assignment = mr.assignment
                    group.members[m.member_id] = m
                    if m.group_instance_id is not None:
                        group.static_members[m.group_instance_id] = m.member_id
                if group.members:
                    # Kafka loads a group with members as Stable; members that
                    # do not heartbeat within their session timeout are removed.
                    group.state = g.STABLE
                    for m in group.members.values():
                        on_group_loaded(group, m, now)
            self.groups[group_id] = group
        log.info("loaded %d groups from __consumer_offsets (%d records skipped)", len(self.groups), skipped)

    def unload_partition(self, partition: int, on_group_unloaded) -> int:
        """Leadership of ``partition`` moved away (Kafka's
        removeGroupsForPartition): its groups leave memory, after
        ``on_group_unloaded(group)`` (the coordinator answers and stops
        their members); its pending offsets are forgotten, and requests
        parked on its appends answered NOT_COORDINATOR. Returns how many
        groups went."""
        gone = [group for group in self.groups.values() if group.partition == partition]
        for group in gone:
            on_group_unloaded(group)
            del self.groups[group.group_id]
        for group_id in [gid for gid in self.pending_txn_offsets if self.partition_for(gid) == partition]:
            del self.pending_txn_offsets[group_id]
        for group_id in [gid for gid in self.pending_offset_commits if self.partition_for(gid) == partition]:
            del self.pending_offset_commits[group_id]
        # Requests parked on this partition's appends are answered
        # NOT_COORDINATOR (their groups are gone: nothing is applied).
        taken = [item for item in self._parked if item[1] == partition]
        if taken:
            self._parked = [item for item in self._parked if item[1] != partition]
            for _pending, _partition, then in taken:
                self._settle(then, E.NOT_COORDINATOR, -1)
        self.txn_marker_scan.pop(partition, None)
        if self.owned_partitions is not None:
            self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        return len(gone)
