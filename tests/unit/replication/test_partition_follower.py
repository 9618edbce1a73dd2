"""Partition's follower side (what the replica fetcher calls) and the role
transitions LeaderAndIsr / StopReplica drive: appends of the leader's
batches with their offsets and epochs, the high watermark and log start
offset following the leader's, truncation, Kafka's endOffsetFor over the
leader-epoch cache, make_leader/make_follower by leader and partition epoch,
update_isr, clear_role and check_leader with no role. Real logs on a real
shared table; run under both _core twins (KAFKAPY_NO_EXTENSIONS=1 too)."""

import multiprocessing
import os
import time

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import Partition, NotFollower
from kafkapy.storage.errors import OffsetsOutOfOrder

from support.storage import make_batch, open_log, records_of

ME, LEADER, OTHER = 1, 0, 2
T = 1_000_000


@pytest.fixture
def make_pair(tmp_path, table):
    """(leader partition on broker 0, follower partition on broker 1), two
    logs on two slots, as two brokers would have them."""
    opened = []

    def make():
        out = []
        for broker in (LEADER, ME):
            slot = table.allocate()
            lg = open_log(tmp_path / f"b{broker}" / "t-0", state=table.slot(slot))
            opened.append(lg)
            out.append(Partition("t", 0, None, lg, slot, broker, assume_leader=False))
        leader, follower = out
        leader.make_leader(1, (LEADER, ME), (LEADER, ME), 0, now_ms=T)
        follower.make_follower(LEADER, 1, (LEADER, ME), 0)
        return leader, follower

    yield make
    for lg in opened:
        lg.close()


def _produce(leader, n=1):
    code, result, _ = leader.append_records_to_leader(records_of(make_batch(n)), 1)
    assert code == ErrorCode.NONE
    return result


def _copy(leader, follower, leader_epoch=None):
    """One replica fetch: what the leader has past the follower's end, appended as it is."""
    data, high_watermark, log_start_offset = leader.fetch_records_for_follower(
        ME, follower.log_end_offset, 1 << 20, True, T)
    raw = b""
    for region in data.regions:
        with open(region.path, "rb") as f:
            f.seek(region.position)
            raw += f.read(region.length)
    return follower.append_records_to_follower(memoryview(bytearray(raw)), high_watermark, log_start_offset,
                                               leader_epoch)


def test_follower_appends_the_leaders_batches_unchanged(make_pair):
    leader, follower = make_pair()
    _produce(leader, 3)
    _produce(leader, 2)
    result = _copy(leader, follower, 1)
    assert (result.first_offset, result.last_offset) == (0, 4)
    assert follower.log_end_offset == 5
    # The leader's high watermark was 0 when it answered (the follower had
    # fetched nothing yet): the follower's is min(leader's, own end).
    assert follower.high_watermark == 0
    # The next fetch tells the leader the follower has 5: the leader commits,
    # and its answer carries the new high watermark.
    _copy(leader, follower)
    assert (leader.high_watermark, follower.high_watermark) == (5, 5)
    # The epochs came with the batches.
    assert follower.log.leader_epoch_entries() == leader.log.leader_epoch_entries() == [(1, 0)]


def test_follower_append_must_start_at_the_log_end_offset(make_pair):
    leader, follower = make_pair()
    _produce(leader, 2)
    _copy(leader, follower)
    data, hw, start = leader.fetch_records_for_follower(ME, 0, 1 << 20, True, T)
    raw = open(data.regions[0].path, "rb").read()[:data.size]
    with pytest.raises(OffsetsOutOfOrder):
        follower.append_records_to_follower(memoryview(bytearray(raw)), hw, start)
    assert follower.log_end_offset == 2


def test_follower_high_watermark_follows_the_leader_down_and_never_past_its_end(make_pair):
    leader, follower = make_pair()
    _produce(leader, 4)
    _copy(leader, follower)
    empty = memoryview(bytearray())
    follower.append_records_to_follower(empty, 100, 0)
    assert follower.high_watermark == 4  # its own log end offset
    follower.append_records_to_follower(empty, 2, 0)
    assert follower.high_watermark == 2  # as Kafka's maybeUpdateHighWatermark
    # The log start offset follows the leader's, up only, never past the high watermark.
    follower.append_records_to_follower(empty, 4, 3)
    assert (follower.log_start_offset, follower.high_watermark) == (3, 4)
    follower.append_records_to_follower(empty, 4, 1)
    assert follower.log_start_offset == 3


def test_follower_operations_refuse_a_leader_or_a_moved_epoch(make_pair):
    leader, follower = make_pair()
    _produce(leader, 2)
    data, hw, start = leader.fetch_records_for_follower(ME, 0, 1 << 20, True, T)
    raw = memoryview(bytearray(open(data.regions[0].path, "rb").read()[:data.size]))
    with pytest.raises(NotFollower) as info:
        follower.append_records_to_follower(raw, hw, start, leader_epoch=0)
    assert info.value.error_code == ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(NotFollower) as info:
        leader.append_records_to_follower(raw, hw, start)
    assert info.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(NotFollower):
        leader.truncate_to(0)
    with pytest.raises(NotFollower):
        leader.truncate_fully_and_start_at(7)
    assert leader.log_end_offset == 2 and follower.log_end_offset == 0
    follower.clear_role()
    with pytest.raises(NotFollower):
        follower.append_records_to_follower(raw, hw, start)


def test_truncation(make_pair):
    leader, follower = make_pair()
    for _ in range(3):
        _produce(leader, 2)  # batches 0-1, 2-3, 4-5
    _copy(leader, follower)
    _copy(leader, follower)
    assert follower.high_watermark == 6
    assert follower.truncate_to(3) is True  # mid-batch: that whole batch goes
    assert (follower.log_end_offset, follower.high_watermark) == (2, 2)
    assert follower.truncate_to(10) is False
    follower.truncate_fully_and_start_at(40)
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (40, 40, 40)
    assert follower.log.leader_epoch_entries() == []


def test_last_offset_for_leader_epoch_is_kafkas_end_offset_for(make_pair):
    leader, _follower = make_pair()
    assert leader.last_offset_for_leader_epoch(-1) == (-1, -1)
    _produce(leader, 2)            # epoch 1: 0-1
    leader.make_leader(3, (LEADER, ME), (LEADER, ME), 1, now_ms=T)
    _produce(leader, 3)            # epoch 3: 2-4
    leader.make_leader(5, (LEADER, ME), (LEADER, ME), 2, now_ms=T)
    _produce(leader, 1)            # epoch 5: 5
    assert leader.log.leader_epoch_entries() == [(1, 0), (3, 2), (5, 5)]
    assert leader.last_offset_for_leader_epoch(5) == (5, 6)  # the latest: the log end offset
    assert leader.last_offset_for_leader_epoch(3) == (3, 5)
    assert leader.last_offset_for_leader_epoch(4) == (3, 5)  # the largest epoch not above it
    assert leader.last_offset_for_leader_epoch(1) == (1, 2)
    assert leader.last_offset_for_leader_epoch(0) == (0, 0)  # below every epoch: the first's start
    assert leader.last_offset_for_leader_epoch(6) == (-1, -1)  # above the latest: undefined


APPENDS_N = 3_000


def _append_as_leader(path, table, slot):
    # The leader's other process (a handler worker, the coordinator): its own Log on the slot.
    lg = open_log(path, state=table.slot(slot))
    leader = Partition("t", 0, None, lg, slot, LEADER, assume_leader=False)
    for _ in range(APPENDS_N):
        code, _result, _message = leader.append_records_to_leader(records_of(make_batch(1)), 1)
        if code != ErrorCode.NONE:
            os._exit(2)
    lg.release()
    os._exit(0)


def test_leader_answers_the_latest_epoch_with_its_log_end_offset_while_another_process_appends(
        make_pair, tmp_path, table):
    """A hard-bounce run: a follower caught up in the latest epoch was told
    by its leader that the epoch ends at 0 and truncated below its high
    watermark; an append in another process of the leader was storing the
    log end offset then. Whatever another process does, the answer is the
    log end offset of one moment: it never goes back."""
    leader, _follower = make_pair()
    _produce(leader, 5)
    child = multiprocessing.get_context("fork").Process(
        target=_append_as_leader, args=(str(tmp_path / f"b{LEADER}" / "t-0"), table, leader.slot))
    child.start()
    try:
        previous = 5
        deadline = time.monotonic() + 60
        while child.is_alive() and time.monotonic() < deadline:
            for _ in range(200):
                epoch, end_offset = leader.last_offset_for_leader_epoch(1)
                assert (epoch, end_offset >= previous) == (1, True), \
                    f"epoch 1 ends at {end_offset} after {previous}"
                previous = end_offset
    finally:
        child.join(60)
        if child.is_alive():
            child.kill()
            child.join(5)
    assert child.exitcode == 0
    assert leader.last_offset_for_leader_epoch(1) == (1, 5 + APPENDS_N)


def test_make_leader_and_follower_by_leader_and_partition_epoch(make_pair, table):
    leader, follower = make_pair()
    _produce(leader, 3)
    leader.update_follower_fetch_state(ME, 3, T + 5)
    assert leader.high_watermark == 3
    # The same leader epoch, a newer partition epoch: ISR and replicas only,
    # the follower's state kept (Kafka's makeLeader without isNewLeaderEpoch).
    assert leader.make_leader(1, (LEADER,), (LEADER, ME, OTHER), 1, now_ms=T + 10) is False
    assert (leader.leader_epoch, leader.partition_epoch) == (1, 1)
    assert leader.isr == frozenset({LEADER}) and leader.replicas == (LEADER, ME, OTHER)
    assert leader.replica_states()[ME][0] == 3
    # An older partition epoch changes nothing.
    assert leader.make_leader(9, (LEADER, ME), (LEADER, ME), 0, now_ms=T) is False
    assert (leader.leader_epoch, leader.partition_epoch) == (1, 1)
    # A new epoch re-elects this leader: followers keep their log end offset,
    # the fetch bookkeeping restarts at the leader's end (resetReplicaState).
    leader.make_leader(2, (LEADER, ME), (LEADER, ME), 2, now_ms=T + 20)
    leo, caught_up, last_fetch_leo, last_fetch_ms = leader.replica_states()[ME]
    assert (leo, caught_up, last_fetch_leo, last_fetch_ms) == (3, T + 20, 3, T + 20)
    assert leader.log.leader_epoch_entries()[-1] == (2, 3)
    # A leader turned follower and back is a new leader: nothing known of the others.
    assert leader.make_follower(ME, 3, (LEADER, ME), 3) is True
    assert leader.make_follower(ME, 3, (LEADER, ME), 4) is False  # same epoch: no new fetch
    assert leader.make_leader(4, (LEADER, ME), (LEADER, ME), 5, now_ms=T + 30) is True
    assert leader.replica_states()[ME][0] == -1


def test_update_isr_moves_the_high_watermark(make_pair):
    leader, follower = make_pair()
    _produce(leader, 4)
    leader.update_follower_fetch_state(ME, 1, T + 1)
    assert leader.high_watermark == 1
    assert follower.update_isr((LEADER,), 5) is False  # not the leader
    assert leader.update_isr((LEADER,), 1) is True  # the shrink commits the rest
    assert (leader.high_watermark, leader.isr, leader.partition_epoch) == (4, frozenset({LEADER}), 1)
    assert leader.update_isr((LEADER, ME), 0) is False  # older partition epoch
    assert leader.isr == frozenset({LEADER})
    leader.update_isr((LEADER, ME), 2)
    assert leader.isr == frozenset({LEADER, ME}) and leader.replica_states()[ME][0] == 1


def test_check_leader_with_no_role_or_a_cleared_one(make_pair, tmp_path, table):
    slot = table.allocate()
    lg = open_log(tmp_path / "fresh" / "t-0", state=table.slot(slot))
    try:
        fresh = Partition("t", 0, None, lg, slot, ME, assume_leader=False)
        assert fresh.replicas == () and not fresh.is_leader
        for epoch in (-1, 0, 5):
            assert fresh.check_leader(epoch) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        code, result, _ = fresh.append_records_to_leader(records_of(make_batch(1)), 1)
        assert (code, result) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
    finally:
        lg.close()
    leader, follower = make_pair()
    # Kafka's order: the epoch first, then leadership.
    assert follower.check_leader(0) == ErrorCode.FENCED_LEADER_EPOCH
    assert follower.check_leader(2) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert follower.check_leader(1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    leader.clear_role()
    assert leader.check_leader(1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (leader.leader_epoch, leader.replicas) == (1, ())
