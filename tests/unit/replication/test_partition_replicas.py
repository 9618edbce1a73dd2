"""Partition's leader side of replication: the role in the shared slot
(seen by every process), follower fetch state, the high watermark over the
ISR, out-of-sync and ISR-candidate decisions, min.insync.replicas, the
leader/epoch checks, and DelayedProduce over a follower. Real logs in
temporary dirs on a real shared table."""

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import Partition
from kafkapy.replication.purgatory import DelayedProduce, Purgatory
from kafkapy.storage.config import LogConfig

from support.storage import make_batch, open_log, records_of

LEADER, F1, F2 = 0, 1, 2
T = 1_000_000


@pytest.fixture
def make_partition(tmp_path, table):
    opened = []

    def make(config=None, broker=LEADER):
        slot = table.allocate()
        log = open_log(tmp_path / f"t-{slot}", config=config, state=table.slot(slot))
        opened.append(log)
        return Partition("t", 0, None, log, slot, broker)

    yield make
    for log in opened:
        log.close()


def _append(partition, n=1, acks=1):
    return partition.append_records_to_leader(records_of(make_batch(n)), acks)


def test_standalone_partition_leads_at_epoch_zero(make_partition):
    p = make_partition()
    assert (p.is_leader, p.leader_id, p.leader_epoch) == (True, LEADER, 0)
    assert p.isr == frozenset({LEADER}) and p.replicas == (LEADER,)
    assert p.check_leader(-1) == p.check_leader(0) == ErrorCode.NONE


def test_role_is_visible_from_another_partition_object_on_the_slot(make_partition, table):
    p = make_partition()
    p.make_leader(4, (LEADER, F1), (LEADER, F1, F2), 7, now_ms=T)
    other = Partition("t", 0, None, p.log, p.slot, LEADER, assume_leader=False)
    assert (other.is_leader, other.leader_id, other.leader_epoch, other.partition_epoch) == (True, LEADER, 4, 7)
    assert other.isr == frozenset({LEADER, F1}) and other.replicas == (LEADER, F1, F2)
    # A follower's view of the same slot (another broker id) is not leader.
    remote = Partition("t", 0, None, p.log, p.slot, F1, assume_leader=False)
    assert not remote.is_leader
    assert remote.check_leader(-1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    p.make_follower(F2, 5, (LEADER, F1, F2), 8)
    assert (other.is_leader, other.leader_id, other.leader_epoch, other.partition_epoch) == (False, F2, 5, 8)
    assert other.isr == frozenset() and table.slot(p.slot).leader_id == F2


def test_high_watermark_moves_only_when_every_isr_member_reached_it(make_partition):
    p = make_partition()
    p.make_leader(1, (LEADER, F1, F2), (LEADER, F1, F2), 0, now_ms=T)
    _append(p, 5)
    assert (p.log_end_offset, p.high_watermark) == (5, 0)
    assert not p.update_follower_fetch_state(F1, 5, T + 1)
    assert p.high_watermark == 0
    assert p.update_follower_fetch_state(F2, 3, T + 2)
    assert p.high_watermark == 3
    assert p.update_follower_fetch_state(F2, 5, T + 3)
    assert p.high_watermark == 5
    # Never backwards, and an unknown replica changes nothing.
    assert not p.update_follower_fetch_state(F1, 2, T + 4)
    assert p.high_watermark == 5
    assert not p.update_follower_fetch_state(9, 5, T + 5)
    # The next append commits only up to what the followers have.
    _append(p, 2)
    assert (p.log_end_offset, p.high_watermark) == (7, 5)


def test_lagging_follower_out_of_sync_after_max_lag_and_not_before(make_partition):
    p = make_partition()
    p.make_leader(1, (LEADER, F1, F2), (LEADER, F1, F2), 0, now_ms=T)
    _append(p, 5)
    lag = 10_000
    # F1 keeps fetching at the log end offset; F2 fetches but stays behind.
    for t in (T + 4000, T + 8000, T + 12000):
        p.update_follower_fetch_state(F1, 5, t)
        p.update_follower_fetch_state(F2, 1, t)
    assert p.get_out_of_sync_replicas(T + lag, lag) == frozenset()
    assert p.get_out_of_sync_replicas(T + lag + 1, lag) == frozenset({F2})
    # F2 reaches the leader's log end offset: caught up now.
    p.update_follower_fetch_state(F2, 5, T + 13000)
    assert p.get_out_of_sync_replicas(T + 12000 + lag, lag) == frozenset()
    assert p.replica_states()[F2][:2] == (5, T + 13000)
    # Kafka's lastFetchLeaderLogEndOffset rule: behind the log end offset, a
    # fetch at (or past) the leader's log end offset as of the previous
    # fetch counts as caught up at the previous fetch's time.
    _append(p, 2)
    p.update_follower_fetch_state(F2, 6, T + 14000)  # LEO was 7 at this fetch
    assert p.replica_states()[F2][:2] == (6, T + 13000)
    _append(p, 1)
    p.update_follower_fetch_state(F2, 7, T + 15000)
    assert p.replica_states()[F2][:2] == (7, T + 14000)
    p.update_follower_fetch_state(F2, 7, T + 16000)  # 7 < 8 at the previous fetch
    assert p.replica_states()[F2][:2] == (7, T + 14000)
    # A follower at the log end offset is in sync however long ago it fetched.
    assert p.get_out_of_sync_replicas(T + 100_000, lag) == frozenset({F1, F2})
    p.update_follower_fetch_state(F2, 8, T + 17000)
    assert p.get_out_of_sync_replicas(T + 100_000, lag) == frozenset({F1})
    p.update_follower_fetch_state(F1, 8, T + 17000)
    assert p.get_out_of_sync_replicas(T + 100_000, lag) == frozenset()


def test_caught_up_follower_becomes_an_isr_candidate(make_partition):
    p = make_partition()
    p.make_leader(1, (LEADER,), (LEADER, F1), 0, now_ms=T)
    _append(p, 4)
    assert p.high_watermark == 4
    assert p.maybe_expand_isr_candidates() == frozenset()
    p.update_follower_fetch_state(F1, 3, T + 1)
    assert p.maybe_expand_isr_candidates() == frozenset()
    p.update_follower_fetch_state(F1, 4, T + 2)
    assert p.maybe_expand_isr_candidates() == frozenset({F1})


def test_acks_all_with_isr_below_min_insync_refuses_before_the_append(make_partition):
    p = make_partition(LogConfig(min_insync_replicas=2))
    p.make_leader(1, (LEADER,), (LEADER, F1), 0, now_ms=T)
    code, result, _message = _append(p, 1, acks=-1)
    assert (code, result, p.log_end_offset) == (ErrorCode.NOT_ENOUGH_REPLICAS, None, 0)
    p.make_leader(1, (LEADER, F1), (LEADER, F1), 1, now_ms=T)
    assert _append(p, 1, acks=-1)[0] == ErrorCode.NONE
    assert p.check_enough_replicas_reach_offset(1) == (False, ErrorCode.NONE)
    p.update_follower_fetch_state(F1, 1, T + 1)
    assert p.check_enough_replicas_reach_offset(1) == (True, ErrorCode.NONE)
    # The ISR shrank below min.insync.replicas after the append.
    p.make_leader(1, (LEADER,), (LEADER, F1), 2, now_ms=T)
    assert p.check_enough_replicas_reach_offset(1) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def _delayed_produce(make_partition, table):
    """A leader with follower F1 in the ISR, 3 records appended with acks=-1
    and parked as a DelayedProduce (deadline T + 100); ``read`` reads the
    shared table as a processor does."""
    p = make_partition()
    p.make_leader(1, (LEADER, F1), (LEADER, F1), 0, now_ms=T)
    code, result, _ = _append(p, 3, acks=-1)
    assert code == ErrorCode.NONE
    op = DelayedProduce({p.slot: ("high_watermark", result.last_offset + 1)}, T + 100, 1, 9,
                        [("t", [(0, 0, result.first_offset, -1, 0, None, p.slot)])])
    purgatory = Purgatory()
    purgatory.park("c", op)
    return p, op, purgatory, lambda slot, field: getattr(table.slot(slot), field)


def test_delayed_produce_completes_when_the_follower_catches_up(make_partition, table):
    p, op, purgatory, read = _delayed_produce(make_partition, table)
    assert purgatory.poll(read, T, True) == []
    p.update_follower_fetch_state(F1, 2, T + 1)
    assert purgatory.poll(read, T + 1, True) == []
    p.update_follower_fetch_state(F1, 3, T + 2)
    [(key, done, expired)] = purgatory.poll(read, T + 2, True)
    assert (key, done, expired) == ("c", op, False)
    assert done.final_results(read) == [("t", [(0, 0, 0, -1, 0, None, p.slot)])]


def test_delayed_produce_expires_when_the_follower_does_not(make_partition, table):
    p, _op, purgatory, read = _delayed_produce(make_partition, table)
    p.update_follower_fetch_state(F1, 1, T + 1)
    assert purgatory.poll(read, T + 99, True) == []
    [(_key, done, expired)] = purgatory.poll(read, T + 100, True)
    assert expired
    [(_topic, [answer])] = done.final_results(read)
    assert answer[1] == ErrorCode.REQUEST_TIMED_OUT


def test_check_leader_error_codes(make_partition):
    p = make_partition()
    p.make_leader(5, (LEADER,), (LEADER,), 0, now_ms=T)
    assert p.check_leader(-1) == ErrorCode.NONE
    assert p.check_leader(5) == ErrorCode.NONE
    assert p.check_leader(4) == ErrorCode.FENCED_LEADER_EPOCH
    assert p.check_leader(6) == ErrorCode.UNKNOWN_LEADER_EPOCH
    p.make_follower(F1, 6, (LEADER, F1), 1)
    assert p.check_leader(-1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.check_leader(6) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.check_enough_replicas_reach_offset(0) == (False, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert _append(p, 1)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER and p.log_end_offset == 0


def test_an_idle_caught_up_followers_fetch_is_recorded_at_most_every_refresh_interval(make_partition):
    from kafkapy.replication.partition import FETCH_STATE_REFRESH_MS

    p = make_partition()
    p.make_leader(1, (LEADER, F1, F2), (LEADER, F1, F2), 1, now_ms=T)
    _append(p, 3)
    end = p.log_end_offset
    data, hw, _ = p.fetch_records_for_follower(F1, end, 1 << 20, True, T + 10)
    assert data.size == 0 and p.replica_states()[F1] == (end, T + 10, end, T + 10)
    # The same caught-up fetch again soon after: nothing is written.
    p.fetch_records_for_follower(F1, end, 1 << 20, True, T + 10 + FETCH_STATE_REFRESH_MS - 1)
    assert p.replica_states()[F1] == (end, T + 10, end, T + 10)
    # Past the interval the times move, as Kafka's would on every fetch.
    later = T + 10 + FETCH_STATE_REFRESH_MS
    p.fetch_records_for_follower(F1, end, 1 << 20, True, later)
    assert p.replica_states()[F1] == (end, later, end, later)
    # New records: the next fetch at the new end is recorded at once and moves
    # the high watermark once both followers are there.
    _append(p, 2)
    new_end = p.log_end_offset
    p.fetch_records_for_follower(F1, new_end, 1 << 20, True, later + 1)
    assert p.replica_states()[F1] == (new_end, later + 1, new_end, later + 1)
    assert p.high_watermark == hw  # F2 is still at the old end
    p.fetch_records_for_follower(F2, new_end, 1 << 20, True, later + 2)
    assert p.high_watermark == new_end


def test_an_idle_followers_fetch_is_answered_from_one_read_only_when_nothing_is_to_be_done(make_partition):
    from kafkapy.replication.partition import FETCH_STATE_REFRESH_MS

    p = make_partition()
    p.make_leader(2, (LEADER, F1, F2), (LEADER, F1, F2), 1, now_ms=T)
    _append(p, 3)
    end = p.log_end_offset
    assert p.idle_follower_fetch(F1, end, 2, 2, T + 1) is None, "no fetch state recorded yet"
    p.fetch_records_for_follower(F1, end, 1 << 20, True, T + 1)
    assert p.idle_follower_fetch(F1, end, 2, 2, T + 2) == (p.high_watermark, p.log_start_offset)
    assert p.idle_follower_fetch(F1, end, -1, 2, T + 2) is not None  # no epoch to check
    # Anything else takes the full path (which answers or records it).
    assert p.idle_follower_fetch(F1, end, 1, 2, T + 2) is None  # fenced epoch
    assert p.idle_follower_fetch(F1, end, 3, 2, T + 2) is None  # unknown epoch
    assert p.idle_follower_fetch(F1, end, 2, 1, T + 2) is None  # an older last fetched epoch
    assert p.idle_follower_fetch(F1, end - 1, 2, 2, T + 2) is None  # behind
    assert p.idle_follower_fetch(F2, end, 2, 2, T + 2) is None  # its state says otherwise
    assert p.idle_follower_fetch(7, end, 2, 2, T + 2) is None  # not a replica
    assert p.idle_follower_fetch(F1, end, 2, 2, T + 1 + FETCH_STATE_REFRESH_MS) is None  # stale
    _append(p, 1)
    assert p.idle_follower_fetch(F1, end, 2, 2, T + 3) is None  # new records
    p.make_follower(F2, 3, (LEADER, F1, F2), 2)
    assert p.idle_follower_fetch(F1, p.log_end_offset, 3, 3, T + 4) is None  # not the leader


def test_a_parked_followers_fetch_run_again_reads_without_recording(make_partition):
    # Kafka's DelayedFetch completes with readFromPurgatory: the fetch state
    # (and so the high watermark) is what the fetch's first run recorded.
    p = make_partition()
    p.make_leader(1, (LEADER, F1, F2), (LEADER, F1, F2), 1, now_ms=T)
    _append(p, 3)
    end = p.log_end_offset
    p.fetch_records_for_follower(F1, end, 1 << 20, True, T + 1)
    p.fetch_records_for_follower(F2, end, 1 << 20, True, T + 1)
    assert p.high_watermark == end
    states = p.replica_states()
    _append(p, 2)
    data, hw, _ = p.fetch_records_for_follower(F1, end, 1 << 20, True, T + 50, record=False)
    assert data.size > 0 and hw == end  # the new records are read
    assert p.replica_states() == states and p.high_watermark == end  # nothing recorded
    data, _, _ = p.fetch_records_for_follower(F2, p.log_end_offset, 1 << 20, True, T + 60, record=False)
    assert data.size == 0 and p.replica_states() == states
    # A first run records as before.
    p.fetch_records_for_follower(F1, p.log_end_offset, 1 << 20, True, T + 70)
    assert p.replica_states()[F1][0] == p.log_end_offset and p.replica_states() != states
