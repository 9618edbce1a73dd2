"""ProducerStateManager: Kafka's sequence/epoch rules, snapshots, catch-up.

Batches are ``BatchHeader`` tuples built by hand; ``FakeLog`` stands in for a
partition's log (a list of headers with absolute base offsets).
"""

import os
import random
import struct

import crc32c
import pytest

from kafkapy._core.types import BatchHeader
from kafkapy.storage.producer_state import (
    NOT_VERIFIED,
    BatchMetadata,
    ProducerStateManager,
    ProducerStateError,
    decode_snapshot,
    decrement_sequence,
    increment_sequence,
    snapshot_file_name,
)

pytestmark = pytest.mark.timeout(30)

INT32_MAX = 2**31 - 1
TRANSACTIONAL = 0x10
CONTROL = 0x20


def header(producer_id, epoch, base_sequence, count=1, base_offset=0, attributes=0, timestamp=1000,
           batch_length=None):
    return BatchHeader(
        position=0, base_offset=base_offset,
        batch_length=batch_length if batch_length is not None else 49 + 12 * count,
        partition_leader_epoch=0, magic=2, crc=0, attributes=attributes,
        last_offset_delta=count - 1, base_timestamp=timestamp, max_timestamp=timestamp + count - 1,
        producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence, records_count=count)


class FakeLog:
    """Batches in offset order; ``read_headers_from`` per the Log contract."""

    def __init__(self):
        self.headers = []
        self.reads = []

    @property
    def log_end_offset(self):
        if not self.headers:
            return 0
        last = self.headers[-1]
        return last.base_offset + last.last_offset_delta + 1

    def append(self, h):
        h = h._replace(base_offset=self.log_end_offset)
        self.headers.append(h)
        return h

    def truncate_to(self, offset):
        self.headers = [h for h in self.headers if h.base_offset < offset]
        assert self.log_end_offset == offset

    def read_headers_from(self, offset, position=-1):
        # ``position`` (a file position hint) has no meaning here: ignored, as the contract allows.
        self.reads.append(offset)
        return [h for h in self.headers if h.base_offset + h.last_offset_delta >= offset]


def produce(manager, log, h):
    """What Log.append_as_leader does for one idempotent batch."""
    manager.catch_up(log.log_end_offset, log.read_headers_from)
    duplicate = manager.check(h)
    if duplicate is not None:
        return duplicate
    stored = log.append(h)
    first = stored.base_offset
    last = first + stored.last_offset_delta
    manager.update(h, first, last, stored.max_timestamp)
    return (first, last, stored.max_timestamp)


@pytest.fixture
def log():
    return FakeLog()


@pytest.fixture
def manager(tmp_path):
    return ProducerStateManager(str(tmp_path))


# --- sequence arithmetic -----------------------------------------------------------


def test_sequence_wraps_after_int32_max():
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    assert decrement_sequence(8, 3) == 5


# --- check / update rules ------------------------------------------------------------


def test_in_order_batches_are_accepted_and_gaps_rejected(manager, log):
    assert produce(manager, log, header(7, 0, 0, count=3)) == (0, 2, 1002)
    assert produce(manager, log, header(7, 0, 3, count=2)) == (3, 4, 1001)
    assert manager.applied_offset == 5
    for bad_seq in (6, 4, 0, 100):
        with pytest.raises(ProducerStateError) as err:
            manager.check(header(7, 0, bad_seq))
        assert err.value.error_code == 45
    entry = manager.last_entry(7)
    assert entry.producer_epoch == 0 and entry.last_seq == 4
    assert list(entry.batches) == [BatchMetadata(0, 2, 0, 2, 1002), BatchMetadata(3, 4, 3, 4, 1001)]


def test_duplicates_of_the_last_five_batches_return_original_offsets(manager, log):
    results = []
    seq = 0
    for i in range(6):
        h = header(42, 2, seq, count=2, timestamp=100 * i)
        results.append((h, produce(manager, log, h)))
        seq += 2
    log_end = log.log_end_offset
    for h, (first, last, ts) in results[1:]:
        assert manager.check(h) == (first, last, ts)
        # Answered from the cache: nothing more is appended.
        assert produce(manager, log, h) == (first, last, ts)
    assert log.log_end_offset == log_end
    # The 6th-oldest batch has fallen out of the cache: it is a sequence error.
    with pytest.raises(ProducerStateError) as err:
        manager.check(results[0][0])
    assert err.value.error_code == 45
    # Same first sequence but a different range is not a duplicate.
    with pytest.raises(ProducerStateError) as err:
        manager.check(header(42, 2, 10, count=1))
    assert err.value.error_code == 45


def test_epoch_rules(manager, log):
    produce(manager, log, header(1, 0, 0))
    produce(manager, log, header(1, 0, 1))
    # A new epoch must start at sequence 0.
    with pytest.raises(ProducerStateError) as err:
        manager.check(header(1, 1, 2))
    assert err.value.error_code == 45
    assert manager.check(header(1, 1, 0)) is None
    produce(manager, log, header(1, 1, 0, count=2))
    entry = manager.last_entry(1)
    assert entry.producer_epoch == 1 and list(entry.batches) == [BatchMetadata(0, 1, 2, 3, 1001)]
    # A stale epoch is fenced, even for what was a duplicate in that epoch.
    for stale in (header(1, 0, 2), header(1, 0, 1)):
        with pytest.raises(ProducerStateError) as err:
            manager.check(stale)
        assert err.value.error_code == 47
    assert manager.check(header(1, 1, 2)) is None


def test_sequence_wraps_around(manager, log):
    produce(manager, log, header(3, 0, INT32_MAX - 1, count=2))  # ends at INT32_MAX
    assert manager.last_entry(3).last_seq == INT32_MAX
    with pytest.raises(ProducerStateError):
        manager.check(header(3, 0, 1))  # 0 must come next
    produce(manager, log, header(3, 0, 0, count=1))
    produce(manager, log, header(3, 0, 1, count=1))
    # A batch spanning the wrap: INT32_MAX - 1 .. 1.
    manager2 = ProducerStateManager(manager.log_dir)
    log2 = FakeLog()
    produce(manager2, log2, header(4, 0, INT32_MAX - 3, count=2))
    h = header(4, 0, INT32_MAX - 1, count=4)
    first_last_ts = produce(manager2, log2, h)
    assert manager2.last_entry(4).last_seq == 1
    assert manager2.check(h) == first_last_ts
    assert manager2.check(header(4, 0, 2)) is None


def test_unknown_producer_accepts_any_sequence_and_epoch(manager, log):
    assert manager.check(header(99, 5, 12345)) is None
    produce(manager, log, header(99, 5, 12345, count=5))
    assert manager.last_entry(99).last_seq == 12349
    assert manager.check(header(100, 0, 77)) is None


def test_transactional_batches(manager, log):
    produce(manager, log, header(5, 0, 0, attributes=TRANSACTIONAL))
    assert manager.last_entry(5).current_txn_first_offset == 0
    produce(manager, log, header(5, 0, 1, attributes=TRANSACTIONAL))
    assert manager.last_entry(5).current_txn_first_offset == 0
    with pytest.raises(ProducerStateError) as err:
        manager.check(header(5, 0, 2))
    assert err.value.error_code == 48
    # The COMMIT marker ends the transaction (control batches carry no sequence).
    marker = log.append(header(5, 0, -1, attributes=TRANSACTIONAL | CONTROL))
    manager.catch_up(log.log_end_offset, log.read_headers_from)
    assert manager.last_entry(5).current_txn_first_offset == -1
    assert manager.last_entry(5).last_seq == 1
    assert marker.base_offset == 2
    assert manager.check(header(5, 0, 2)) is None


def test_verification_token_and_check(tmp_path, manager, log):
    """KIP-890: a transactional batch of a producer with no transaction open
    needs the token its verification started with; a marker in between
    (the transaction the answer was about ended) makes the token stale, in
    this map and in another process's that read the same log."""
    txn = TRANSACTIONAL
    start = manager.verification_token(5)
    assert start == (-1, -1, -1)  # never seen here
    with pytest.raises(ProducerStateError) as err:
        manager.check_verified(header(5, 0, 0, attributes=txn), NOT_VERIFIED)
    assert err.value.error_code == 48
    manager.check_verified(header(5, 0, 0), NOT_VERIFIED)  # idempotent, not transactional: no check
    manager.check_verified(header(5, 0, 0, attributes=txn), start)
    produce(manager, log, header(5, 0, 0, attributes=txn))
    assert manager.verification_token(5) is None  # open: nothing to verify, no token needed
    manager.check_verified(header(5, 0, 1, attributes=txn), NOT_VERIFIED)
    log.append(header(5, 0, -1, attributes=txn | CONTROL, timestamp=2000))
    manager.catch_up(log.log_end_offset, log.read_headers_from)
    after_commit = manager.verification_token(5)
    assert after_commit == (0, 2000, -1)
    with pytest.raises(ProducerStateError):
        manager.check_verified(header(5, 0, 1, attributes=txn), start)  # stale: the marker came since
    other = ProducerStateManager(str(tmp_path / "other"))
    os.makedirs(other.log_dir)
    other.catch_up(log.log_end_offset, log.read_headers_from)
    assert other.verification_token(5) == after_commit  # the same token in every process
    # A second marker (an empty transaction's abort, same epoch) moves the token again.
    log.append(header(5, 0, -1, attributes=txn | CONTROL, timestamp=2001))
    manager.catch_up(log.log_end_offset, log.read_headers_from)
    with pytest.raises(ProducerStateError):
        manager.check_verified(header(5, 0, 1, attributes=txn), after_commit)


# --- snapshots ----------------------------------------------------------------------


def test_snapshot_bytes_match_kafka_format(manager, log):
    produce(manager, log, header(0x0102030405060708, 7, 10, count=3, timestamp=0x1122))
    manager.last_entry(0x0102030405060708).coordinator_epoch = 9
    manager.take_snapshot(3)
    with open(os.path.join(manager.log_dir, "00000000000000000003.snapshot"), "rb") as f:
        data = f.read()
    body = bytes.fromhex(
        "00000001"              # producer_entries count
        "0102030405060708"      # producer_id
        "0007"                  # epoch
        "0000000c"              # last_sequence 12
        "0000000000000002"      # last_offset 2
        "00000002"              # offset_delta 2
        "0000000000001124"      # timestamp (max timestamp 0x1122 + 2)
        "00000009"              # coordinator_epoch
        "ffffffffffffffff"      # current_txn_first_offset -1
    )
    expected = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert data == expected
    assert len(data) == 2 + 4 + 4 + 46
    # Decoding gives back the last batch with its first sequence/offset derived.
    (entry,) = decode_snapshot(data)
    assert entry.producer_id == 0x0102030405060708 and entry.producer_epoch == 7
    assert list(entry.batches) == [BatchMetadata(10, 12, 0, 2, 0x1124)]


def test_snapshot_of_empty_map(manager):
    manager.take_snapshot(0)
    with open(os.path.join(manager.log_dir, snapshot_file_name(0)), "rb") as f:
        data = f.read()
    body = b"\x00\x00\x00\x00"
    assert data == struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def test_snapshot_round_trip_keeps_last_batch(tmp_path, manager, log):
    produce(manager, log, header(1, 0, 0, count=2))
    produce(manager, log, header(2, 3, 50, count=1, attributes=TRANSACTIONAL))
    produce(manager, log, header(1, 0, 2, count=4))
    manager.take_snapshot(log.log_end_offset)
    fresh = ProducerStateManager(str(tmp_path))
    log.reads.clear()
    fresh.load(log.log_end_offset, log.read_headers_from)
    assert log.reads == []  # the snapshot covers the whole log: nothing to read
    assert fresh.applied_offset == 7
    assert list(fresh.last_entry(1).batches) == [BatchMetadata(2, 5, 3, 6, 1003)]
    assert fresh.last_entry(2).current_txn_first_offset == 2
    # The last batch is still recognised as a duplicate after the reload.
    assert fresh.check(header(1, 0, 2, count=4)) == (3, 6, 1003)
    assert fresh.check(header(1, 0, 6)) is None


def test_take_snapshot_requires_applied_offset(manager, log):
    produce(manager, log, header(1, 0, 0))
    with pytest.raises(ValueError):
        manager.take_snapshot(5)


def _random_log(rng, batches_n=60):
    """A log mixing idempotent producers (some epoch bumps) and plain batches."""
    log = FakeLog()
    manager = ProducerStateManager("/nonexistent")
    state = {pid: [0, 0] for pid in (11, 12, 13)}  # epoch, next sequence
    for i in range(batches_n):
        count = rng.randint(1, 4)
        if rng.random() < 0.2:
            log.append(header(-1, -1, -1, count=count, timestamp=i))
            continue
        pid = rng.choice(list(state))
        if rng.random() < 0.05:
            state[pid] = [state[pid][0] + 1, 0]
        epoch, seq = state[pid]
        produce(manager, log, header(pid, epoch, seq, count=count, timestamp=i))
        state[pid][1] = increment_sequence(seq, count)
    manager.catch_up(log.log_end_offset, log.read_headers_from)
    return log, manager


def test_catch_up_builds_the_same_map_as_update():
    rng = random.Random(1234)
    for _ in range(5):
        log, by_update = _random_log(rng)
        by_catch_up = ProducerStateManager("/nonexistent")
        by_catch_up.catch_up(log.log_end_offset, log.read_headers_from)
        assert by_catch_up.producers == by_update.producers
        assert by_catch_up.applied_offset == by_update.applied_offset == log.log_end_offset
        # Catching up in several steps gives the same map too.
        stepped = ProducerStateManager("/nonexistent")
        partial = FakeLog()
        for h in log.headers:
            partial.headers.append(h)
            if rng.random() < 0.3:
                stepped.catch_up(partial.log_end_offset, partial.read_headers_from)
        stepped.catch_up(log.log_end_offset, log.read_headers_from)
        assert stepped.producers == by_update.producers


def test_load_ignores_corrupt_snapshot_and_rebuilds(tmp_path):
    log, by_update = _random_log(random.Random(7), batches_n=40)
    directory = str(tmp_path)
    # A valid snapshot part-way, a corrupt newer one, and one above the log end.
    mid = log.headers[len(log.headers) // 2].base_offset
    early = ProducerStateManager(directory)
    early.catch_up(mid, log.read_headers_from)
    early.take_snapshot(mid)
    late = ProducerStateManager(directory)
    late.catch_up(log.log_end_offset - 1, log.read_headers_from)
    late.take_snapshot(late.applied_offset)
    corrupt_path = os.path.join(directory, snapshot_file_name(late.applied_offset))
    with open(corrupt_path, "r+b") as f:
        f.seek(20)
        byte = f.read(1)
        f.seek(20)
        f.write(bytes([byte[0] ^ 0xFF]))
    future = ProducerStateManager(directory)
    future.applied_offset = log.log_end_offset + 10
    future.take_snapshot(log.log_end_offset + 10)

    loaded = ProducerStateManager(directory)
    log.reads.clear()
    loaded.load(log.log_end_offset, log.read_headers_from)
    assert loaded.snapshot_offsets() == [mid]  # corrupt and future ones deleted
    assert log.reads == [mid]
    assert loaded.applied_offset == log.log_end_offset
    for pid, entry in by_update.producers.items():
        got = loaded.last_entry(pid)
        assert (got.producer_epoch, got.last_seq, got.last_data_offset) == \
            (entry.producer_epoch, entry.last_seq, entry.last_data_offset)
        # Batches after the snapshot are all there.
        assert [b for b in entry.batches if b.first_offset >= mid] == \
            [b for b in got.batches if b.first_offset >= mid]


def test_load_without_snapshot_equals_full_rebuild(tmp_path):
    log, by_update = _random_log(random.Random(99))
    loaded = ProducerStateManager(str(tmp_path))
    loaded.load(log.log_end_offset, log.read_headers_from)
    assert loaded.producers == by_update.producers


def test_truncate_removes_out_of_range_snapshots_and_rebuilds(tmp_path, manager, log):
    for seq in range(0, 10):
        produce(manager, log, header(1, 0, seq))
        if seq in (2, 5, 8):
            manager.take_snapshot(manager.applied_offset)
    assert manager.snapshot_offsets() == [3, 6, 9]
    log.truncate_to(7)
    manager.truncate(4, 7)
    assert manager.snapshot_offsets() == [6]
    assert manager.applied_offset == 6
    manager.catch_up(log.log_end_offset, log.read_headers_from)
    assert manager.last_entry(1).last_seq == 6
    assert manager.check(header(1, 0, 7)) is None
    # Nothing usable left: start empty at the log start offset.
    manager.truncate(7, 7)
    assert manager.snapshot_offsets() == [] and manager.applied_offset == 7
    assert manager.last_entry(1) is None


def test_catch_up_notices_another_worker_rewrote_the_log(tmp_path, log):
    worker_a = ProducerStateManager(str(tmp_path))
    worker_b = ProducerStateManager(str(tmp_path))
    for seq in range(5):
        produce(worker_a, log, header(1, 0, seq))
    worker_b.catch_up(log.log_end_offset, log.read_headers_from)
    assert worker_b.last_entry(1).last_seq == 4
    # Worker A truncates (e.g. a diverged follower) and appends other batches
    # past B's applied offset.
    log.truncate_to(3)
    worker_a.truncate(0, 3)
    produce(worker_a, log, header(2, 0, 0, count=3))
    assert log.log_end_offset == 6
    worker_b.catch_up(log.log_end_offset, log.read_headers_from)
    assert worker_b.last_entry(1).last_seq == 2
    assert worker_b.last_entry(2).last_seq == 2
    assert worker_b.producers == worker_a.producers
    # And when the log only shrank.
    log.truncate_to(3)
    worker_b.catch_up(log.log_end_offset, log.read_headers_from)
    assert worker_b.last_entry(2) is None and worker_b.last_entry(1).last_seq == 2


def test_delete_snapshots_before_and_expiry(manager, log):
    for seq in range(4):
        produce(manager, log, header(1, 0, seq, timestamp=1000))
        manager.take_snapshot(manager.applied_offset)
    manager.delete_snapshots_before(3)
    assert manager.snapshot_offsets() == [3, 4]
    assert manager.latest_snapshot_offset() == 4
    produce(manager, log, header(2, 0, 0, timestamp=5000))
    manager.remove_expired_producers(now_ms=6000, producer_id_expiration_ms=3000)
    assert manager.last_entry(1) is None and manager.last_entry(2) is not None
