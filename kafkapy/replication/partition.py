"""One partition as this broker sees it (Kafka's ``Partition``).

Owned by one process's ``ReplicaManager`` and never shared between
processes: what the processes must agree on lives in the ``Log``'s shared
slot (log end offset, high watermark, log start offset, leader epoch) and in
the files. The replica's place in the partition lives there too, so every
worker sees it (storage.shared's docstring): the leader, the leader and
partition epochs, the replicas with the follower state the leader keeps
(log end offset, last caught-up time) and the in-sync replica set (ISR).
``make_leader``/``make_follower`` write it; the properties read it from the
slot every time (no per-process cache to invalidate). With one broker this
broker leads every partition at epoch 0 with ISR = replicas = {this broker}
(a slot with no role yet gets that on first use unless ``assume_leader`` is
False). In cluster mode the LeaderAndIsr handler sets them from the
controller's decisions (``make_leader``/``make_follower``, ``clear_role`` on
StopReplica), the leader's Fetch handler drives ``update_follower_fetch_state``
from follower fetches, the leader's ISR job ``update_isr``, and the replica
fetcher process the follower side (``append_records_to_follower``,
truncation, ``last_offset_for_leader_epoch``).

Every method takes the partition lock itself (the slot's ``lockf`` lock,
re-entrant within a process), so no handler locks a partition or calls its
``Log`` directly: the checks a replicated partition needs (leader, epoch,
ISR size) live here once.

The high watermark is written only here: storage appends and reports log end
offsets, and ``maybe_increment_high_watermark`` moves the high watermark to
the smallest log end offset over the maximal ISR (Kafka's
``maybeIncrementLeaderHW``: the ISR and the replicas being added to it,
``prepare_isr_expansion``). Storage still clamps it into
[log_start_offset, log_end_offset] when the log is truncated or its start
moves; that is an invariant of the log, not a replication decision.
"""

from __future__ import annotations

import time
from operator import attrgetter, itemgetter

from kafkapy.protocol.errors import ErrorCode
from kafkapy.storage.errors import OffsetOutOfRange, RecordError, StorageError
from kafkapy.storage.log import FetchData
from kafkapy.storage.producer_state import ProducerStateError
from kafkapy.storage.shared import MAX_REPLICAS, REPLICA_WORDS, PartitionState

# Kafka's special ListOffsets timestamps.
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP = -1, -2, -3
NOTHING_READ = FetchData((), 0)  # what a caught-up consumer reads
# A caught-up follower whose fetch says what its recorded fetch state says
# (same offset, at the log end) and whose caught-up time is younger than this
# is not recorded again (see ``fetch_records_for_follower``).
FETCH_STATE_REFRESH_MS = 100
LONG_MAX = 2**63 - 1
# idle_follower_fetch's words of a slot snapshot (storage.shared's field order).
_IDLE_FIELDS = itemgetter(*(PartitionState.FIELDS.index(name) for name in (
    "log_end_offset", "high_watermark", "log_start_offset", "leader_epoch", "leader_id",
    "current_leader_epoch", "replica_count")))


def effective_min_isr(config, replica_count: int) -> int:
    """Kafka 3.9's effectiveMinIsr: ``min.insync.replicas`` capped at the
    partition's replica count, so a topic with fewer replicas than its
    min.insync.replicas still takes acks=all writes when its whole replica set
    is in sync (Partition.scala, 3.9.0)."""
    return min(config.min_insync_replicas, max(replica_count, 1))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class NotFollower(StorageError):
    """A follower operation on a partition this broker does not follow (it
    leads it, has no role, or the leader epoch moved on since the caller
    looked): ``error_code`` NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH.
    A StorageError, so the replica fetcher backs off and looks again."""


class Partition:
    __slots__ = ("topic", "partition_id", "topic_id", "log", "slot", "state", "local_broker_id",
                 "remote_log_end_offsets")

    def __init__(self, topic: str, partition_id: int, topic_id, log, slot: int, local_broker_id: int,
                 assume_leader: bool = True):
        self.topic = topic
        self.partition_id = partition_id
        self.topic_id = topic_id
        self.log = log
        self.slot = slot  # index of the log's shared-table slot (what delayed operations watch)
        self.state = log.state
        self.local_broker_id = local_broker_id
        # Log end offsets to seed followers with at the next make_leader (or
        # push with _update_high_watermark_limit): an in-process hook; the
        # followers' state itself lives in the slot's replica block.
        self.remote_log_end_offsets: dict[int, int] = {}
        if assume_leader and self.state.replica_count == 0:
            # No role in the slot yet: the one broker leads at epoch 0 with
            # ISR = replicas = {this broker} (cluster mode passes False and
            # waits for LeaderAndIsr).
            with self.state.lock():
                if self.state.replica_count == 0:
                    self._write_role(local_broker_id, 0, 0, (local_broker_id,), (local_broker_id,), 0)

    # -- state ---------------------------------------------------------------------
    # The shared slot's fields (what every process sees), read through attrgetter (C).
    high_watermark = property(attrgetter("state.high_watermark"))
    log_start_offset = property(attrgetter("state.log_start_offset"))
    log_end_offset = property(attrgetter("state.log_end_offset"))
    # The role (shared.py's module docstring), read from the slot every time.
    leader_id = property(attrgetter("state.leader_id"))
    leader_epoch = property(attrgetter("state.current_leader_epoch"))
    partition_epoch = property(attrgetter("state.partition_epoch"))

    @property
    def is_leader(self) -> bool:
        return self.state.leader_id == self.local_broker_id

    @property
    def replicas(self) -> tuple:
        """The assigned replicas' broker ids, in the assignment's order.

        Read without the lock, like the role words ``check_leader`` reads:
        every follower fetch asks, per partition, and the lock's two fcntl
        calls were a fifth of that (in-process, 30 caught-up partitions).
        Only a LeaderAndIsr or StopReplica rewrites the block; a read racing
        it sees the assignment before or after it, or at worst a mix for
        that one request, and the fetch state itself is recorded under the
        lock (``update_follower_fetch_state`` finds no position for a
        replica the slot does not hold)."""
        state = self.state
        return state.replica_block()[0:state.replica_count * REPLICA_WORDS:REPLICA_WORDS]

    @property
    def isr(self) -> frozenset:
        state = self.state
        with state.lock():
            count, mask = state.replica_count, state.isr_mask
            block = state.replica_block()
        return frozenset(block[r * REPLICA_WORDS] for r in range(count) if mask >> r & 1)

    def replica_states(self) -> dict:
        """``{broker id: (log_end_offset, last_caught_up_ms,
        last_fetch_leader_log_end_offset, last_fetch_ms)}`` of every replica
        (the leader's own entry is unused: its log end offset is the log's)."""
        with self.state.lock():
            block = self.state.replica_block()
            count = self.state.replica_count
        return {block[r * REPLICA_WORDS]: block[r * REPLICA_WORDS + 1:(r + 1) * REPLICA_WORDS]
                for r in range(count)}

    def lock(self):
        """Hold the partition still (its slot lock, re-entrant in this
        process): for a caller reading the file regions a read returned."""
        return self.log.lock()

    def _write_role(self, leader_id, leader_epoch, partition_epoch, replicas, isr, now_ms,
                    keep=None) -> None:
        """Write the role words and the replica block (caller holds the lock).
        ``keep``: ``{broker id: replica words}`` carried over; a replica new
        here starts unknown (log end offset -1), caught up at ``now_ms`` if in
        the ISR (Kafka's ``resetReplicaState`` on becoming leader)."""
        if len(replicas) > MAX_REPLICAS:
            raise ValueError(f"at most {MAX_REPLICAS} replicas, got {len(replicas)}")
        isr = frozenset(isr)
        state = self.state
        mask = 0
        seeds = self.remote_log_end_offsets
        for r, broker in enumerate(replicas):
            if broker in isr:
                mask |= 1 << r
            if keep is not None and broker in keep:
                words = keep[broker]
            else:
                words = (broker, seeds.get(broker, -1), now_ms if broker in isr else 0, -1, 0)
            state.store_replica(r, words)
        state.leader_id = leader_id
        state.current_leader_epoch = leader_epoch
        state.partition_epoch = partition_epoch
        state.isr_mask = mask
        # A written role is committed: an expansion in flight is in ``isr``
        # now (update_isr), or the controller decided instead (LeaderAndIsr).
        state.pending_isr_mask = 0
        state.replica_count = len(replicas)

    def make_leader(self, leader_epoch: int, isr, replicas=None, partition_epoch: int = 0,
                    now_ms: int | None = None) -> bool:
        """Kafka's ``makeLeader``: lead with ``isr`` over ``replicas`` (default:
        the ISR). A partition epoch older than the slot's changes nothing
        (False). A newer ``leader_epoch`` starts in the leader-epoch
        checkpoint at the log end offset and resets the followers' state
        (Kafka's ``resetReplicaState``: a new leader knows nothing of them, a
        re-elected one keeps their log end offsets; ISR members count as
        caught up now); the same epoch only updates the replicas and the ISR.
        With the ISR this broker alone its whole log is committed at once.
        Returns True if this broker did not lead before (Kafka's isNewLeader)."""
        if replicas is None:
            replicas = tuple(isr)
        now_ms = _now_ms() if now_ms is None else now_ms
        state = self.state
        with state.lock():
            leader_id, current_epoch, current_partition_epoch, _count, _mask = state.role()
            if partition_epoch < current_partition_epoch:
                return False
            is_new_leader = leader_id != self.local_broker_id
            old = self._replica_words()
            isr = frozenset(isr)
            if leader_epoch > current_epoch:
                leader_log_end_offset = state.log_end_offset
                keep = {}
                for broker in replicas:
                    words = old.get(broker)
                    if words is None or is_new_leader:
                        continue  # fresh in _write_role: log end offset unknown
                    in_sync = broker in isr
                    keep[broker] = (broker, words[1], now_ms if in_sync else 0, leader_log_end_offset,
                                    now_ms if in_sync else 0)
                self._write_role(self.local_broker_id, leader_epoch, partition_epoch, tuple(replicas), isr,
                                 now_ms, keep)
                self._log_become_leader(leader_epoch)
            else:
                self._write_role(self.local_broker_id, current_epoch, partition_epoch, tuple(replicas), isr,
                                 now_ms, old)
                # A no-op once the cache has the epoch; a standalone slot got
                # its role (epoch 0) before its log's first make_leader.
                self._log_become_leader(current_epoch)
            self.maybe_increment_high_watermark()
        return is_new_leader

    def _log_become_leader(self, leader_epoch: int) -> None:
        try:
            self.log.become_leader(leader_epoch)
        except OSError as exc:  # the leader-epoch checkpoint write
            raise self.log.io_error(exc, "becoming leader of") from exc

    def make_follower(self, leader_id: int, leader_epoch: int, replicas, partition_epoch: int) -> bool:
        """Kafka's ``makeFollower``: ``leader_id`` leads at ``leader_epoch``;
        a follower keeps no ISR or follower state (the ISR mask is cleared).
        A partition epoch older than the slot's changes nothing. Returns True
        if the leader epoch is new (the follower must fetch from the new
        leader). The log is not truncated here: the replica fetcher does it
        by the leader's epochs."""
        state = self.state
        with state.lock():
            _leader, current_epoch, current_partition_epoch, _count, _mask = state.role()
            if partition_epoch < current_partition_epoch:
                return False
            self._write_role(leader_id, leader_epoch, partition_epoch, tuple(replicas), (), 0)
        return leader_epoch > current_epoch

    def clear_role(self) -> None:
        """StopReplica: this broker neither leads nor follows the partition
        any more (no leader, no replicas: produce, fetch and ListOffsets get
        NOT_LEADER_OR_FOLLOWER and the replica fetcher leaves it). The leader
        and partition epochs stay, so an older LeaderAndIsr is still refused."""
        state = self.state
        with state.lock():
            state.leader_id = -1
            state.isr_mask = 0
            state.pending_isr_mask = 0
            state.replica_count = 0

    def update_isr(self, isr, partition_epoch: int) -> bool:
        """The leader's ISR after its ISR change was written (Kafka's
        AlterPartition answer / ZooKeeper write): ``isr`` at
        ``partition_epoch``; the follower state is kept. The high watermark
        may move (a shrink leaves a smaller minimum); True if it did, so the
        caller wakes parked operations. Ignored (False) off the leader or for
        an older partition epoch."""
        state = self.state
        with state.lock():
            leader_id, leader_epoch, current_partition_epoch, _count, _mask = state.role()
            if leader_id != self.local_broker_id or partition_epoch < current_partition_epoch:
                return False
            self._write_role(leader_id, leader_epoch, partition_epoch, self.replicas, isr, _now_ms(),
                             self._replica_words())
            return self.maybe_increment_high_watermark()

    def _replica_words(self) -> dict:
        """``{broker id: replica words}`` of the replica block (caller holds the lock)."""
        state = self.state
        block = state.replica_block()
        return {block[r * REPLICA_WORDS]: block[r * REPLICA_WORDS:(r + 1) * REPLICA_WORDS]
                for r in range(state.replica_count)}

    def _update_high_watermark_limit(self) -> None:
        """Push ``remote_log_end_offsets`` into the replica block (a test and
        migration hook; followers' fetches use update_follower_fetch_state)."""
        state = self.state
        with state.lock():
            block = state.replica_block()
            for r in range(state.replica_count):
                first = r * REPLICA_WORDS
                leo = self.remote_log_end_offsets.get(block[first])
                if leo is not None:
                    state.store_replica(r, (block[first], leo) + block[first + 2:first + REPLICA_WORDS])

    @property
    def high_watermark_limit(self) -> int:
        """The smallest log end offset over the other members of the
        maximal ISR (the ISR and its pending additions, Kafka's
        ``maximalIsr``; LONG_MAX: this broker alone); the append passes it to
        ``Log.append_as_leader`` so the high watermark moves in its store."""
        state = self.state
        if state.replica_count <= 1:
            return LONG_MAX
        mask = state.isr_mask | state.pending_isr_mask
        block = state.replica_block()
        local = self.local_broker_id
        limit = LONG_MAX
        for r in range(state.replica_count):
            if mask >> r & 1:
                broker, leo = block[r * REPLICA_WORDS], block[r * REPLICA_WORDS + 1]
                if broker != local and leo < limit:
                    limit = leo
        return limit

    def maybe_increment_high_watermark(self) -> bool:
        """Kafka's ``maybeIncrementLeaderHW``: move the high watermark up to
        the smallest log end offset over the maximal ISR (the leader's own
        included), never down; the caller holds the partition lock. True if
        it moved."""
        state = self.state
        new_high_watermark = min(state.log_end_offset, self.high_watermark_limit)
        if new_high_watermark > state.high_watermark:
            state.high_watermark = new_high_watermark
            return True
        return False

    # -- the leader's follower bookkeeping ------------------------------------------
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """Kafka's ``updateFollowerFetchState``: a follower fetched at
        ``fetch_offset``, so its log end offset is that; it is caught up
        (``last_caught_up_ms`` = the time of the previous fetch, or now when
        it reached the current log end offset) when ``fetch_offset`` reached
        the leader's log end offset at its previous fetch
        (``lastFetchLeaderLogEndOffset``). Then the high watermark may move
        (returned: True if it did). False for a replica not assigned here."""
        with self.state.lock():
            return self._record_follower_fetch(replica_id, fetch_offset, now_ms)

    def _record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """``update_follower_fetch_state`` with the partition lock held: one
        read of the replica block serves the replica's position, its fetch
        state and the ISR's smallest log end offset (``_position``,
        ``high_watermark_limit`` and ``maybe_increment_high_watermark`` would
        read it three more times; every fetch of a follower comes here)."""
        state = self.state
        count = state.replica_count
        block = state.replica_block()
        position = -1
        for r in range(count):
            if block[r * REPLICA_WORDS] == replica_id:
                position = r
                break
        if position < 0:
            return False
        first = position * REPLICA_WORDS
        _, _, caught_up, last_fetch_leo, last_fetch_ms = block[first:first + REPLICA_WORDS]
        leader_leo = state.log_end_offset
        if fetch_offset >= leader_leo:
            caught_up = max(caught_up, now_ms)
        elif fetch_offset >= last_fetch_leo:
            caught_up = max(caught_up, last_fetch_ms)
        state.store_replica(position, (replica_id, fetch_offset, caught_up,
                                       max(leader_leo, last_fetch_leo), now_ms))
        # maybe_increment_high_watermark over the block as just stored.
        limit = LONG_MAX
        if count > 1:
            mask = state.isr_mask | state.pending_isr_mask  # the maximal ISR (high_watermark_limit)
            local = self.local_broker_id
            for r in range(count):
                if mask >> r & 1:
                    leo = fetch_offset if r == position else block[r * REPLICA_WORDS + 1]
                    if leo < limit and block[r * REPLICA_WORDS] != local:
                        limit = leo
        new_high_watermark = min(leader_leo, limit)
        if new_high_watermark > state.high_watermark:
            state.high_watermark = new_high_watermark
            return True
        return False

    def _position(self, replica_id: int) -> int:
        state = self.state
        block = state.replica_block()
        for r in range(state.replica_count):
            if block[r * REPLICA_WORDS] == replica_id:
                return r
        return -1

    def get_out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> frozenset:
        """Kafka's ``getOutOfSyncReplicas``: the ISR's followers behind the
        log end offset and not caught up for more than ``max_lag_ms`` (``replica.lag.time.max.ms``); what an
        AlterPartition shrinking the ISR would remove."""
        state = self.state
        with state.lock():
            mask, count = state.isr_mask, state.replica_count
            block = state.replica_block()
            leader_leo = state.log_end_offset
        local = self.local_broker_id
        out = set()
        for r in range(count):
            broker, leo, caught_up = block[r * REPLICA_WORDS:r * REPLICA_WORDS + 3]
            # Kafka's isCaughtUp: at the leader's log end offset, or caught up
            # within max_lag_ms.
            if (mask >> r & 1 and broker != local and leo != leader_leo
                    and now_ms - caught_up > max_lag_ms):
                out.add(broker)
        return frozenset(out)

    def maybe_expand_isr_candidates(self) -> frozenset:
        """Kafka's ``maybeExpandIsr`` decision: replicas outside the ISR whose
        log end offset reached the high watermark (and the leader's epoch
        start, i.e. they fetched in this epoch); what an AlterPartition
        expanding the ISR would add."""
        state = self.state
        with state.lock():
            mask, count = state.isr_mask, state.replica_count
            block = state.replica_block()
            high_watermark = state.high_watermark
            epoch_start = self._leader_epoch_start_offset()
        out = set()
        for r in range(count):
            broker, leo = block[r * REPLICA_WORDS:r * REPLICA_WORDS + 2]
            if not mask >> r & 1 and leo >= 0 and leo >= high_watermark and leo >= epoch_start:
                out.add(broker)
        return frozenset(out)

    def prepare_isr_expansion(self, candidates) -> tuple:
        """Kafka's ``PendingExpandIsr``, before the ISR job writes an
        expansion to ZooKeeper: those of ``candidates`` still caught up
        (``maybe_expand_isr_candidates`` again, under the lock) are counted
        by the high watermark from now on, though neither in ``isr`` nor in
        the min.insync.replicas checks until the write is applied
        (``update_isr``) or a LeaderAndIsr rewrites the role. Once the znode
        names a replica the controller may elect it, and a high watermark
        past its log end offset would be truncated there: records the old
        leader acknowledged as replicated, lost (a hard-bounce system test's
        replica joined the ISR 10 records behind the high watermark, in 3 of
        10 runs). The pending set is replaced, so a replica the job no
        longer proposes (its broker stopped fetching) stops holding the high
        watermark back. Returns ``(the pending replicas, whether the high
        watermark moved)``: dropping one may let it move (the caller wakes
        parked operations)."""
        state = self.state
        with state.lock():
            caught_up = self.maybe_expand_isr_candidates() & frozenset(candidates)
            block = state.replica_block()
            mask = 0
            for r in range(state.replica_count):
                if block[r * REPLICA_WORDS] in caught_up:
                    mask |= 1 << r
            state.pending_isr_mask = mask
            return caught_up, self.maybe_increment_high_watermark()

    def _leader_epoch_start_offset(self) -> int:
        entries = self.log.leader_epoch_entries()
        epoch = self.state.current_leader_epoch
        for e, start in reversed(entries):
            if e == epoch:
                return start
        return 0

    def check_enough_replicas_reach_offset(self, required_offset: int):
        """Kafka's ``checkEnoughReplicasReachOffset`` for DelayedProduce:
        ``(done, error_code)``: done with NONE once the high watermark passed
        ``required_offset`` and the ISR is at least the effective
        ``min.insync.replicas``, NOT_ENOUGH_REPLICAS_AFTER_APPEND when it is
        smaller; not done (NONE) while waiting; NOT_LEADER_OR_FOLLOWER when
        no longer leader."""
        state = self.state
        if not self.is_leader:
            return False, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if state.high_watermark >= required_offset:
            if bin(state.isr_mask).count("1") >= effective_min_isr(self.log.config, state.replica_count):
                return True, ErrorCode.NONE
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NONE

    def check_leader(self, current_leader_epoch: int = -1) -> int:
        """The error a request to the leader answers for this partition, in
        Kafka's order (getLocalLog): FENCED_LEADER_EPOCH when the request's
        epoch is older, UNKNOWN_LEADER_EPOCH when newer (-1: no epoch check),
        then NOT_LEADER_OR_FOLLOWER when this broker does not lead it; a
        partition with no role (cluster mode before its LeaderAndIsr, after
        StopReplica) is NOT_LEADER_OR_FOLLOWER whatever the epoch, as Kafka
        answers for a partition it does not host. NONE otherwise."""
        state = self.state
        if current_leader_epoch != -1 and state.replica_count:
            epoch = state.current_leader_epoch
            if current_leader_epoch < epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if current_leader_epoch > epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        if state.leader_id != self.local_broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    # -- the follower ----------------------------------------------------------------
    # Only the replica fetcher calls these. Its process decides from a
    # role it read earlier, and a worker may meanwhile have handled a
    # LeaderAndIsr: each re-checks the role under the lock (``_check_follower``),
    # so nothing is appended to or truncated from a log this broker leads.
    def _check_follower(self, leader_epoch) -> None:
        state = self.state
        leader_id = state.leader_id
        if leader_id == self.local_broker_id or leader_id < 0 or not state.replica_count:
            raise NotFollower(f"{self.topic}-{self.partition_id}: broker {self.local_broker_id} does not "
                              f"follow it (leader {leader_id})", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if leader_epoch is not None and leader_epoch != state.current_leader_epoch:
            raise NotFollower(f"{self.topic}-{self.partition_id}: leader epoch is "
                              f"{state.current_leader_epoch}, not {leader_epoch}", ErrorCode.FENCED_LEADER_EPOCH)

    def append_records_to_follower(self, records, leader_high_watermark: int, leader_log_start_offset: int,
                                   leader_epoch: int | None = None):
        """Kafka's ``appendRecordsToFollowerOrFutureReplica`` and the fetcher's
        follow-up: append the leader's batches as they are
        (``Log.append_as_follower``: OffsetsOutOfOrder unless they start at the
        log end offset, RecordError for a corrupt batch), then the high
        watermark becomes min(``leader_high_watermark``, log end offset) (it
        follows the leader's, down too, as Kafka's ``maybeUpdateHighWatermark``)
        and the log start offset moves up to the leader's (never past the high
        watermark). ``leader_epoch``: the epoch the fetch was made in
        (NotFollower with FENCED_LEADER_EPOCH if the role moved on since);
        NotFollower also if this broker leads or has no role. Returns the
        AppendResult."""
        log = self.log
        state = self.state
        try:
            with state.lock():
                self._check_follower(leader_epoch)
                result = log.append_as_follower(records, leader_high_watermark)
                new_start = min(leader_log_start_offset, state.high_watermark)
                if new_start > state.log_start_offset:
                    log.delete_records(new_start)
        except OSError as exc:
            raise log.io_error(exc, "appending as follower to") from exc
        return result

    def truncate_to(self, offset: int, leader_epoch: int | None = None) -> bool:
        """Kafka's ``truncateTo``: drop every batch at or after ``offset``
        (Log.truncate_to: the leader-epoch cache and producer state follow, the
        high watermark is clamped); True if anything was removed. A follower
        only (``_check_follower``)."""
        try:
            with self.state.lock():
                self._check_follower(leader_epoch)
                return self.log.truncate_to(offset)
        except OSError as exc:
            raise self.log.io_error(exc, "truncating") from exc

    def truncate_fully_and_start_at(self, offset: int, leader_epoch: int | None = None) -> None:
        """Kafka's ``truncateFullyAndStartAt``: the log becomes empty and starts
        (log start, log end, high watermark) at ``offset``. A follower only."""
        try:
            with self.state.lock():
                self._check_follower(leader_epoch)
                self.log.truncate_fully_and_start_at(offset)
        except OSError as exc:
            raise self.log.io_error(exc, "truncating") from exc

    def last_offset_for_leader_epoch(self, leader_epoch: int) -> tuple:
        """``(epoch, end_offset)`` for ``leader_epoch`` from the leader-epoch
        cache, Kafka's ``LeaderEpochFileCache.endOffsetFor``: the latest epoch
        itself ends at the log end offset; an older one ends where the next
        cached epoch starts and answers the largest cached epoch not above it
        (or itself when it is below every cached one: the start of the first);
        (-1, -1) (UNDEFINED) for -1, for an epoch above the latest, or with no
        cache. No role check: OffsetForLeaderEpoch and the Fetch handler check first."""
        if leader_epoch < 0:
            return -1, -1
        state = self.state
        # Under the lock, as Kafka answers under the partition's
        # leaderIsrUpdateLock: no append, truncation or new epoch is half
        # done meanwhile, so the answer is one state of the log. A follower
        # caught up in the current epoch (the common question) is answered by
        # ``idle_follower_fetch`` before it gets here; the rest pay ~1.5 us.
        with state.lock():
            # The slot mirrors the cache's latest epoch: no read of the file.
            if state.leader_epoch == leader_epoch:
                return leader_epoch, state.log_end_offset
            entries = self.log.leader_epoch_entries()
            log_end_offset = state.log_end_offset
        if not entries:
            return -1, -1
        if entries[-1][0] == leader_epoch:
            return leader_epoch, log_end_offset
        floor = None
        for i, (epoch, _start) in enumerate(entries):
            if epoch > leader_epoch:
                # entries[i] is the first epoch above the requested one.
                return (leader_epoch if floor is None else floor), entries[i][1]
            floor = epoch
        return -1, -1  # above every cached epoch

    # -- produce -------------------------------------------------------------------
    def append_records_to_leader(self, records, acks: int, verification=None):
        """Append one partition's records of a produce request; returns
        ``(error_code, AppendResult or None, error message or None)``.

        acks=-1 is refused before anything is written when the ISR is smaller
        than ``min.insync.replicas`` (Kafka's ``appendRecordsToLeader``).
        ``verification``: ``Log.append_as_leader``'s (KIP-890).
        """
        log = self.log
        if records is None or len(records) == 0:
            return ErrorCode.CORRUPT_MESSAGE, None, "Produce request has no records"
        state = self.state
        try:
            with state.lock():
                # One read of the role words, under the lock: the leader
                # and epoch cannot change between the checks and the append.
                leader_id, leader_epoch, _, replica_count, isr_mask = state.role()
                if leader_id != self.local_broker_id:
                    return (ErrorCode.NOT_LEADER_OR_FOLLOWER, None,
                            f"Leader not local for partition {self.topic}-{self.partition_id} "
                            f"on broker {self.local_broker_id}")
                if acks == -1 and bin(isr_mask).count("1") < effective_min_isr(log.config, replica_count):
                    isr = ",".join(map(str, sorted(self.isr)))
                    return (ErrorCode.NOT_ENOUGH_REPLICAS, None,
                            f"The size of the current ISR Set({isr}) is insufficient to satisfy "
                            f"the min.isr requirement of {effective_min_isr(log.config, replica_count)} for "
                            f"partition {self.topic}-{self.partition_id}")
                # The high watermark moves in the append's own slot store.
                limit = LONG_MAX if replica_count <= 1 else self.high_watermark_limit
                result = log.append_as_leader(records, leader_epoch, limit, verification)
        except RecordError as exc:
            return exc.error_code, None, str(exc)
        except ProducerStateError as exc:
            return exc.error_code, None, str(exc)
        except OSError as exc:  # the log dir goes offline (storage.log_dirs)
            error = log.io_error(exc, "appending to")
            return error.error_code, None, str(error)
        return ErrorCode.NONE, result, None

    def maybe_start_transaction_verification(self, producer_id: int):
        """Kafka's ``Partition.maybeStartTransactionVerification``: None when
        nothing needs verifying (``producer_id`` has a transaction open
        here, or this broker cannot append here: the append answers that),
        else the token the append will need (``Log.append_as_leader``).
        A transaction known open in this process is answered without the
        lock: every produce of a transaction but its first per partition."""
        log = self.log
        if log.open_transaction_known(producer_id):
            return None
        try:
            with self.state.lock():
                if self.state.role()[0] != self.local_broker_id:
                    return None
                return log.transaction_verification_token(producer_id)
        except (RecordError, ProducerStateError, OSError):
            return None

    def append_control_batch_to_leader(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                                       commit: bool):
        """Append a transaction marker (WriteTxnMarkers, origin coordinator:
        acks=-1 as Kafka's coordinator writes it) with a produce's leader and
        min.insync.replicas checks; ``(error_code, AppendResult or None)``.
        Kafka's ``appendRecordsToLeader`` for a control batch."""
        log = self.log
        state = self.state
        try:
            with state.lock():
                leader_id, leader_epoch, _, replica_count, isr_mask = state.role()
                if leader_id != self.local_broker_id:
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
                if bin(isr_mask).count("1") < effective_min_isr(log.config, replica_count):
                    return ErrorCode.NOT_ENOUGH_REPLICAS, None
                limit = LONG_MAX if replica_count <= 1 else self.high_watermark_limit
                result = log.append_control_batch(producer_id, producer_epoch, coordinator_epoch, commit,
                                                  leader_epoch, limit)
        except RecordError as exc:
            return exc.error_code, None
        except OSError as exc:
            return log.io_error(exc, "appending a transaction marker to").error_code, None
        return ErrorCode.NONE, result

    # -- reads ---------------------------------------------------------------------
    def fetch_records(self, fetch_offset: int, max_bytes: int, min_one_batch: bool):
        """A consumer fetch (up to the high watermark): ``(FetchData or None
        when ``fetch_offset`` is out of range, high_watermark, log_start_offset)``.

        A consumer that has caught up fetches at the high watermark: nothing
        to read, so no lock and no ``Log.read`` (two lockf calls, a generation
        check and an empty read; the idle path of every long poll, and most
        partitions of a 16-partition consumer between appends). The slot's
        fields are aligned 8-byte words, read whole; log_start_offset never
        passes the high watermark, so fetch_offset == high_watermark is in
        range.
        """
        state = self.state
        high_watermark = state.high_watermark
        if fetch_offset == high_watermark:
            log_start_offset = state.log_start_offset
            if log_start_offset <= fetch_offset:
                return NOTHING_READ, high_watermark, log_start_offset
        log = self.log
        with log.lock():
            high_watermark = state.high_watermark
            log_start_offset = state.log_start_offset
            try:
                data = log.read(fetch_offset, max_bytes, high_watermark, min_one_batch)
            except OffsetOutOfRange:
                data = None
            except OSError as exc:
                raise log.io_error(exc, "reading") from exc
        return data, high_watermark, log_start_offset

    def last_stable_offset(self) -> int:
        """The log's last stable offset (what read_committed reads up to)."""
        log = self.log
        with log.lock():
            return log.last_stable_offset()

    def fetch_records_committed(self, fetch_offset: int, max_bytes: int, min_one_batch: bool):
        """A read_committed consumer fetch (Kafka's FetchTxnCommitted): read
        up to the last stable offset; ``(FetchData or None when
        ``fetch_offset`` is out of range, high_watermark, log_start_offset,
        last_stable_offset, aborted transactions)``, the aborted ones those
        whose data the read may hold (``AbortedTxn``: the client drops their
        records)."""
        log = self.log
        state = self.state
        with log.lock():
            last_stable_offset = log.last_stable_offset()
            high_watermark = state.high_watermark
            log_start_offset = state.log_start_offset
            try:
                data = log.read(fetch_offset, max_bytes, last_stable_offset, min_one_batch)
            except OffsetOutOfRange:
                return None, high_watermark, log_start_offset, last_stable_offset, []
            except OSError as exc:
                raise log.io_error(exc, "reading") from exc
            aborted = log.aborted_transactions(fetch_offset, data)
        return data, high_watermark, log_start_offset, last_stable_offset, aborted

    def fetch_records_for_follower(self, replica_id: int, fetch_offset: int, max_bytes: int,
                                   min_one_batch: bool, now_ms: int, record: bool = True):
        """A follower's fetch (Kafka's fetch with replica_id >= 0): record its
        fetch state (``update_follower_fetch_state``), then read up to the log
        end offset; the same ``(FetchData or None, high_watermark,
        log_start_offset)`` as ``fetch_records``.

        An idle partition's follower asks the same on every fetch (all of a
        follower's partitions of a leader go in each fetch: with RF=3
        ``__consumer_offsets`` that is ~17 per fetch): when it is caught up
        at the offset its fetch state already holds, recording the fetch
        again would change only its two times, so within
        ``FETCH_STATE_REFRESH_MS`` of the last record nothing is written and
        no lock is taken. Its caught-up time is then at most that old, far
        inside ``replica.lag.time.max.ms`` (Kafka's default 30 s); the high
        watermark cannot move, since no log end offset did.

        ``record`` False: only read (a parked fetch run again when woken or
        expired; Kafka's DelayedFetch completes with ``readFromPurgatory``,
        which leaves the follower's fetch state as its first run recorded it)."""
        log = self.log
        state = self.state
        if fetch_offset == state.log_end_offset and (
                not record or self._fetch_state_holds(replica_id, fetch_offset, now_ms)):
            return NOTHING_READ, state.high_watermark, state.log_start_offset
        with log.lock():
            if record:
                self._record_follower_fetch(replica_id, fetch_offset, now_ms)
            high_watermark = state.high_watermark
            log_start_offset = state.log_start_offset
            if fetch_offset == state.log_end_offset:
                return NOTHING_READ, high_watermark, log_start_offset
            try:
                data = log.read(fetch_offset, max_bytes, None, min_one_batch)
            except OffsetOutOfRange:
                data = None
            except OSError as exc:
                raise log.io_error(exc, "reading") from exc
        return data, high_watermark, log_start_offset

    def idle_follower_fetch(self, replica_id: int, fetch_offset: int, current_leader_epoch: int,
                            last_fetched_epoch: int, now_ms: int):
        """``(high_watermark, log_start_offset)`` when a follower's fetch of
        this partition finds nothing to do, else None (take the full path).

        Nothing to do: this broker leads it at ``current_leader_epoch`` (-1:
        unchecked), the follower fetches at the log end in the latest epoch,
        and its recorded fetch state already says so (``_fetch_state_holds``).
        That is what ``check_leader``, the last-fetched-epoch check and
        ``fetch_records_for_follower`` would each conclude (no error, no
        divergence, nothing read or recorded), from one read of the slot's
        words and its replica block instead of a dozen: in a fetch session
        the leader reads every partition of it on every fetch, and most of a
        follower's partitions are idle."""
        state = self.state
        log_end_offset, high_watermark, log_start_offset, latest_epoch, leader_id, epoch, count = \
            _IDLE_FIELDS(state.snapshot())
        if (leader_id != self.local_broker_id or fetch_offset != log_end_offset
                or last_fetched_epoch != latest_epoch or latest_epoch < 0
                or (current_leader_epoch != -1 and current_leader_epoch != epoch)):
            return None
        block = state.replica_block()
        for first in range(0, count * REPLICA_WORDS, REPLICA_WORDS):
            if block[first] == replica_id:
                if (block[first + 1] == fetch_offset == block[first + 3]
                        and 0 <= now_ms - block[first + 2] < FETCH_STATE_REFRESH_MS):
                    return high_watermark, log_start_offset
                return None
        return None

    def _fetch_state_holds(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """The replica's recorded fetch state (read without the lock) is at
        ``fetch_offset``, as was the leader's log end offset at that fetch,
        and it was caught up less than FETCH_STATE_REFRESH_MS ago."""
        state = self.state
        block = state.replica_block()
        for first in range(0, state.replica_count * REPLICA_WORDS, REPLICA_WORDS):
            if block[first] == replica_id:
                return (block[first + 1] == fetch_offset == block[first + 3]
                        and 0 <= now_ms - block[first + 2] < FETCH_STATE_REFRESH_MS)
        return False

    def read_records(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None):
        """Up to ``max_offset`` (None: the log end offset) from ``fetch_offset``,
        at least one whole batch; what a coordinator loading its partition reads."""
        try:
            with self.log.lock():
                return self.log.read(fetch_offset, max_bytes, max_offset, True)
        except OSError as exc:
            raise self.log.io_error(exc, "reading") from exc

    def fetch_offset_for_timestamp(self, timestamp: int):
        """ListOffsets: ``(offset, timestamp)`` for Kafka's special timestamps
        (LATEST = the high watermark, EARLIEST = the log start offset,
        MAX_TIMESTAMP) or the first offset at or after ``timestamp``;
        ``(-1, -1)`` when none is below the high watermark."""
        log = self.log
        with log.lock():
            high_watermark = self.state.high_watermark
            if timestamp == LATEST_TIMESTAMP:
                return high_watermark, -1
            if timestamp == EARLIEST_TIMESTAMP:
                return self.state.log_start_offset, -1
            try:
                if timestamp == MAX_TIMESTAMP:
                    found = log.max_timestamp_offset()
                elif timestamp >= 0:
                    found = log.offset_for_timestamp(timestamp)
                else:
                    found = None
            except OSError as exc:
                raise log.io_error(exc, "searching the time index of") from exc
        if found is None or found[0] >= high_watermark:
            return -1, -1
        return found

    def legacy_fetch_offsets_for_timestamp(self, timestamp: int, max_num_offsets: int,
                                           from_consumer: bool) -> list[int]:
        """ListOffsets v0 (Kafka's Partition.legacyFetchOffsetsForTimestamp):
        ``Log.legacy_offsets_before``; for a consumer, offsets past the high
        watermark give way to the high watermark, first."""
        log = self.log
        with log.lock():
            try:
                offsets = log.legacy_offsets_before(timestamp, max_num_offsets)
            except OSError as exc:
                raise log.io_error(exc, "listing the segments of") from exc
            high_watermark = self.state.high_watermark
        if from_consumer and any(o > high_watermark for o in offsets):
            return [high_watermark] + [o for o in offsets if o <= high_watermark]
        return offsets

    def delete_records_on_leader(self, offset: int):
        """DeleteRecords: ``(error_code, low watermark)``; -1 means the high
        watermark, anything beyond it is OFFSET_OUT_OF_RANGE."""
        log = self.log
        with log.lock():
            if offset == -1:
                offset = self.state.high_watermark
            try:
                return ErrorCode.NONE, log.delete_records(offset)
            except OffsetOutOfRange:
                return ErrorCode.OFFSET_OUT_OF_RANGE, -1
            except OSError as exc:
                return log.io_error(exc, "deleting records of").error_code, -1

    def active_producers(self) -> list:
        """DescribeProducers: the producer state's entries."""
        with self.log.lock():
            return self.log.active_producers()

    def size_in_bytes(self) -> int:
        with self.log.lock():
            return self.log.size_in_bytes()

    def release(self) -> None:
        """This process lets go of the partition's files (they stay on disk)."""
        self.log.release()

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition_id}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={sorted(self.isr)}, "
                f"hw={self.high_watermark}, leo={self.log_end_offset})")
