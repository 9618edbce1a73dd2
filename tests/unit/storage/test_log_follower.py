"""Log.append_as_follower: the leader's batches appended as they are, so the
follower's segments, leader epochs and producer state end up the leader's;
out-of-order or corrupt input writes nothing; the KIP-101 truncate-and-refetch
shape; and a Hypothesis run of leader appends, epoch changes and catch-up
reads of random sizes ending in identical logs."""

import os
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import example, given, settings

from kafkapy.server.replica_fetcher import whole_batches
from kafkapy.storage.config import LogConfig
from kafkapy.storage.errors import OffsetsOutOfOrder, RecordError

from support.storage import T0, make_batch, open_log, records_of


def _read(log, offset, max_bytes=1 << 20):
    """The bytes a follower fetch from ``offset`` gets (up to the log end)."""
    with log.lock():
        data = log.read(offset, max_bytes, None, True)
    out = bytearray()
    for region in data.regions:
        fd = os.open(region.path, os.O_RDONLY)
        try:
            out += os.pread(fd, region.length, region.position)
        finally:
            os.close(fd)
    return out


def _catch_up(leader, follower, max_bytes=1 << 20):
    for _ in range(10_000):  # bounded
        if follower.log_end_offset >= leader.log_end_offset:
            return
        chunk = _read(leader, follower.log_end_offset, max_bytes)
        assert chunk, "the leader returned nothing below its log end offset"
        with follower.lock():
            # As the replica fetcher does: a read cut at max_bytes may end
            # inside its last batch (Kafka's cut), whose part is dropped.
            follower.append_as_follower(whole_batches(memoryview(chunk)))
    raise AssertionError("follower did not catch up")


def _segment_bytes(log):
    with log.lock():
        return [(s.base_offset, Path(s.path).read_bytes()) for s in log.segments()]


def _lead(log, epoch, batch):
    with log.lock():
        log.become_leader(epoch)
        return log.append_as_leader(records_of(batch), epoch)


@pytest.fixture
def pair(tmp_path):
    config = LogConfig(segment_bytes=4096)
    leader = open_log(tmp_path / "leader" / "t-0", config=config)
    follower = open_log(tmp_path / "follower" / "t-0", config=config)
    yield leader, follower
    leader.close()
    follower.close()


def test_follower_ends_with_the_leaders_bytes_epochs_and_producers(pair):
    leader, follower = pair
    _lead(leader, 0, make_batch(3))
    _lead(leader, 0, make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0))
    _lead(leader, 2, make_batch(4, value_size=300))
    for i in range(12):  # past segment.bytes: both roll
        _lead(leader, 3, make_batch(2, value_size=200, timestamp=T0 + i))
    _catch_up(leader, follower, max_bytes=700)
    assert follower.log_end_offset == leader.log_end_offset
    assert _segment_bytes(follower) == _segment_bytes(leader) and len(_segment_bytes(leader)) > 1
    assert follower.leader_epoch_entries() == leader.leader_epoch_entries() == [(0, 0), (2, 5), (3, 9)]
    assert follower.end_offset_for_epoch(2) == leader.end_offset_for_epoch(2) == (2, 9)
    with follower.lock(), leader.lock():
        assert [(p.producer_id, p.last_seq) for p in follower.active_producers()] == \
            [(p.producer_id, p.last_seq) for p in leader.active_producers()] == [(9, 1)]
    assert follower.high_watermark == 0  # replication's to move


def test_batches_that_do_not_continue_the_log_are_refused(pair):
    leader, follower = pair
    _lead(leader, 0, make_batch(3))
    _lead(leader, 0, make_batch(3))
    chunk = _read(leader, 0)
    with follower.lock():
        follower.append_as_follower(memoryview(chunk))
        assert follower.log_end_offset == 6
        size = follower.state.active_size
        with pytest.raises(OffsetsOutOfOrder):
            follower.append_as_follower(memoryview(bytearray(chunk)))  # starts at 0, below 6
        assert (follower.log_end_offset, follower.state.active_size) == (6, size)
        _lead(leader, 0, make_batch(1))
        bad = bytearray(_read(leader, 6))
        bad[-1] ^= 1
        with pytest.raises(RecordError):
            follower.append_as_follower(memoryview(bad))
        assert follower.log_end_offset == 6
    # Batches out of order inside one chunk are refused whole.
    overlapping = records_of(make_batch(2, base_offset=6), make_batch(2, base_offset=7))
    with follower.lock():
        with pytest.raises(OffsetsOutOfOrder):
            follower.append_as_follower(overlapping)
        assert follower.log_end_offset == 6


def test_truncate_and_fetch_again_converges(pair):
    """KIP-101's shape in-process: the follower has records the new leader
    does not; it truncates to the epoch boundary and fetches again."""
    leader, follower = pair
    _lead(leader, 0, make_batch(2))
    _catch_up(leader, follower)
    # The follower got more at epoch 0 than the (new) leader kept.
    with follower.lock():
        follower.append_as_follower(records_of(make_batch(2, base_offset=2, partition_leader_epoch=0)))
    _lead(leader, 1, make_batch(3))
    assert follower.log_end_offset == 4 and leader.log_end_offset == 5
    epoch, end = leader.end_offset_for_epoch(0)  # OffsetForLeaderEpoch's answer
    assert (epoch, end) == (0, 2)
    with follower.lock():
        follower.truncate_to(end)
    _catch_up(leader, follower)
    assert _segment_bytes(follower) == _segment_bytes(leader)
    assert follower.leader_epoch_entries() == leader.leader_epoch_entries()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 2), st.integers(10, 400)), min_size=1,
                max_size=25),
       st.integers(200, 5000))
@example(steps=[(1, 0, 10), (1, 0, 10), (1, 0, 10), (5, 0, 74)], fetch_bytes=641)  # a read cut inside a batch
def test_random_appends_and_catch_ups_end_identical(tmp_path_factory, steps, fetch_bytes):
    root = tmp_path_factory.mktemp("pair")
    config = LogConfig(segment_bytes=4096)  # every generated batch fits (5 x 400 B)
    leader = open_log(root / "leader" / "t-0", config=config)
    follower = open_log(root / "follower" / "t-0", config=config)
    try:
        epoch = 0
        for i, (count, bump, value_size) in enumerate(steps):
            epoch += bump
            _lead(leader, epoch, make_batch(count, value_size=value_size, timestamp=T0 + i))
            if i % 3 == 0:
                _catch_up(leader, follower, fetch_bytes)
        _catch_up(leader, follower, fetch_bytes)
        assert _segment_bytes(follower) == _segment_bytes(leader)
        assert follower.leader_epoch_entries() == leader.leader_epoch_entries()
    finally:
        leader.close()
        follower.close()
