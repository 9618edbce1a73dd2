"""Log: append/read, index cadence, rolling, errors, idempotence, recovery, retention, truncation."""

import logging
import os
import struct

import pytest

from kafkapy._core.records_py import build_batch
from kafkapy.storage import checkpoints
from kafkapy.storage.config import LogConfig
from kafkapy.storage.errors import InconsistentTopicId, OffsetOutOfRange, RecordError, StorageError
from kafkapy.storage.shared import LocalPartitionState

from support.storage import (T0, Clock, append, make_batch, open_log, read_all_offsets, read_bytes,
                          records_of, whole_batches)


def seg_files(d):
    return sorted(n for n in os.listdir(d) if n.endswith((".log", ".index", ".timeindex")))


# ---------------------------------------------------------------- append / read


def test_append_assigns_offsets_and_reads_back_the_same_bytes(tmp_path):
    log = open_log(tmp_path / "t-0")
    sent = []
    for i in range(5):
        records = records_of(make_batch(3, timestamp=T0 + i, tag=b"%d" % i))
        with log.lock():
            result = log.append_as_leader(records, 7)
        assert (result.first_offset, result.last_offset) == (3 * i, 3 * i + 2)
        assert result.record_count == 3 and not result.duplicate and result.log_append_time_ms == -1
        sent.append(bytes(records))     # patched in place: what is on disk
    assert log.log_end_offset == 15
    data = read_bytes(log, 0)
    assert data == b"".join(sent)
    for i, h in enumerate(whole_batches(data)):
        assert h.base_offset == 3 * i and h.partition_leader_epoch == 7
    log.close()


def test_fetch_from_the_middle_of_a_batch_returns_that_batch(tmp_path):
    log = open_log(tmp_path / "t-0")
    for i in range(4):
        append(log, make_batch(5, tag=b"%d" % i))
    for offset in range(20):
        headers = whole_batches(read_bytes(log, offset, 1 << 20))
        assert headers[0].base_offset == offset - offset % 5
    assert read_bytes(log, 20) == b""
    with pytest.raises(OffsetOutOfRange):
        read_bytes(log, 21)
    log.close()


@pytest.mark.parametrize("interval", [1, 300, 4096])
def test_every_offset_is_found_whatever_the_batch_and_index_sizes(tmp_path, interval):
    """translate_offset's walk reads one index interval at a time: batches
    larger and smaller than it, mixed, each offset reads from its batch."""
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=interval))
    sizes = [(1, 10), (3, 2000), (1, 9000), (7, 5), (2, 5000), (1, 10), (4, 1200)]
    firsts = []
    for i, (n, value_size) in enumerate(sizes):
        firsts.append(log.log_end_offset)
        append(log, make_batch(n, value_size=value_size, tag=b"%d" % i))
    end = log.log_end_offset
    for offset in range(end):
        first = max(f for f in firsts if f <= offset)
        headers = whole_batches(read_bytes(log, offset, 1 << 20))
        assert headers[0].base_offset == first
        assert headers[-1].base_offset + headers[-1].last_offset_delta == end - 1
    log.close()


def test_read_limits_follow_kafka(tmp_path):
    log = open_log(tmp_path / "t-0")
    one = make_batch(2, value_size=100)
    size = len(one)
    for _ in range(5):
        append(log, make_batch(2, value_size=100))
    # max_offset (the high watermark for consumers): a batch whose last offset >= it is excluded.
    assert [h.base_offset for h in whole_batches(read_bytes(log, 0, 1 << 20, max_offset=5))] == [0, 2]
    assert [h.base_offset for h in whole_batches(read_bytes(log, 0, 1 << 20, max_offset=6))] == [0, 2, 4]
    assert read_bytes(log, 4, 1 << 20, max_offset=4) == b""
    assert read_bytes(log, 4, 1 << 20, max_offset=5) == b""   # batch 4..5 not fully below 5
    # A max_bytes cut inside a batch moves back to the last whole batch (Kafka
    # sends the partial tail and clients drop it); min_one_batch grows it to
    # the first batch.
    assert len(read_bytes(log, 0, size + 10)) == size
    assert len(read_bytes(log, 0, 3 * size - 1)) == 2 * size
    assert len(read_bytes(log, 2, 2 * size + 1)) == 2 * size
    assert len(read_bytes(log, 0, 10, min_one_batch=True)) == size
    assert read_bytes(log, 0, 10, min_one_batch=False) != b"" and len(read_bytes(log, 0, 10, min_one_batch=False)) == 10
    assert read_bytes(log, 0, 0, min_one_batch=False) == b""
    log.close()


def test_whole_batch_cut_walks_a_bounded_number_of_batches(tmp_path):
    """Past _WHOLE_BATCH_WALK batches the cut stays where max_bytes puts it
    (the partial tail is then a small part of the slice)."""
    from kafkapy.storage.segment import _WHOLE_BATCH_WALK

    log = open_log(tmp_path / "t-0")
    size = len(make_batch(1, value_size=50))
    for _ in range(3 * _WHOLE_BATCH_WALK):
        append(log, make_batch(1, value_size=50))
    reachable = _WHOLE_BATCH_WALK * size
    assert len(read_bytes(log, 0, reachable - 1)) == (_WHOLE_BATCH_WALK - 1) * size
    assert len(read_bytes(log, 0, reachable + size // 2)) == reachable + size // 2
    # A limit on a batch end is left alone; the high watermark is a batch end.
    assert len(read_bytes(log, 0, 3 * size)) == 3 * size
    assert len(read_bytes(log, 0, 1 << 20, max_offset=5)) == 5 * size
    log.close()


def test_no_whole_batch_walk_when_the_first_batch_is_under_an_eighth_of_the_cut(tmp_path):
    """Small batches, then a big one: a cut inside the big one is moved back
    when the first batch is at least 1/8 of the cut, and left where
    max_bytes puts it (Kafka's cut; the client drops the tail) when the
    walk would be started from a batch under 1/8 of it."""
    from kafkapy.storage.segment import _WHOLE_BATCH_WALK

    log = open_log(tmp_path / "t-0")
    small = len(make_batch(1, value_size=50))
    append(log, make_batch(1, value_size=50))
    append(log, make_batch(1, value_size=50 * _WHOLE_BATCH_WALK))
    inside = small + _WHOLE_BATCH_WALK * 50 // 2  # inside the big batch
    assert inside <= _WHOLE_BATCH_WALK * small
    assert len(read_bytes(log, 0, inside)) == small
    beyond = _WHOLE_BATCH_WALK * small + 1
    append(log, make_batch(1, value_size=50 * _WHOLE_BATCH_WALK * 4))
    assert len(read_bytes(log, 0, beyond)) == beyond
    log.close()


def test_reads_stay_inside_one_segment(tmp_path):
    batch_size = len(make_batch(1, value_size=200))
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=3 * batch_size))
    for _ in range(7):
        append(log, make_batch(1, value_size=200))
    assert [s.base_offset for s in log.segments()] == [0, 3, 6]
    assert [h.base_offset for h in whole_batches(read_bytes(log, 1))] == [1, 2]
    assert [h.base_offset for h in whole_batches(read_bytes(log, 3))] == [3, 4, 5]
    assert read_all_offsets(log) == [(i, i) for i in range(7)]
    log.close()


def test_empty_produce_and_log_append_time(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), clock=clock)
    with log.lock():
        assert log.append_as_leader(memoryview(bytearray()), 0).first_offset == -1
    clock.advance(1234)
    result = append(log, make_batch(3, timestamp=5))
    assert result.log_append_time_ms == T0 + 1234
    h = whole_batches(read_bytes(log, 0))[0]
    assert h.max_timestamp == T0 + 1234 and h.attributes & 0x08
    with log.lock():
        # Every record of a LogAppendTime batch carries the append time, so
        # the first record with the maximum timestamp is the batch's first
        # (KAFKA-16310: ListOffsets MAX_TIMESTAMP names a record, not a batch).
        assert log.max_timestamp_offset() == (0, T0 + 1234)
    log.close()


# ---------------------------------------------------------------- validation


def test_invalid_batches_are_rejected_with_kafka_codes(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=500, segment_bytes=1400))
    good = make_batch(1)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    cases = [
        (bytes(corrupt), 2),                                        # CRC
        (good[:-3], 2),                                             # truncated
        (make_batch(1, value_size=600), 10),                        # > max.message.bytes
        (make_batch(1, value_size=400) * 4, 18),                    # > segment.bytes
        (build_batch([(b"k", b"v", [], T0)], is_transactional=True), 87),  # transactional without a producer
        (build_batch([(b"k", b"v", [], T0)], producer_id=1, producer_epoch=0, is_control=True), 87),
        (make_batch(1, producer_id=1, producer_epoch=0, base_sequence=0) + make_batch(1), 87),
    ]
    for data, code in cases:
        with log.lock(), pytest.raises(RecordError) as info:
            log.append_as_leader(records_of(data), 0)
        assert info.value.error_code == code
    assert log.log_end_offset == 0 and log.size_in_bytes() == 0
    log.close()


def test_timestamp_difference_limit(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", LogConfig(message_timestamp_difference_max_ms=1000), clock=clock)
    append(log, make_batch(1, timestamp=T0 - 999))
    with pytest.raises(RecordError) as info:
        append(log, make_batch(1, timestamp=T0 + 5000))
    assert info.value.error_code == 32
    log.close()


def test_idempotent_duplicates_and_sequence_errors(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, make_batch(2))
    first = make_batch(3, producer_id=9, producer_epoch=0, base_sequence=0)
    r1 = append(log, first)
    assert (r1.first_offset, r1.last_offset, r1.duplicate) == (2, 4, False)
    r2 = append(log, make_batch(3, producer_id=9, producer_epoch=0, base_sequence=3))
    assert r2.first_offset == 5
    again = append(log, first)                        # a retry of an acknowledged batch
    assert (again.first_offset, again.last_offset, again.duplicate) == (2, 4, True)
    assert log.log_end_offset == 8
    with pytest.raises(RecordError) as info:
        append(log, make_batch(1, producer_id=9, producer_epoch=0, base_sequence=10))
    assert info.value.error_code == 45
    # Another Log object (another worker) sees the same producer history through the log.
    other = open_log(tmp_path / "t-0", state=log.state)
    assert append(other, first).duplicate
    assert append(other, make_batch(1, producer_id=9, producer_epoch=0, base_sequence=6)).first_offset == 8
    other.release()
    log.close()


def test_leader_epoch_checkpoint_records_new_epochs(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, make_batch(2), epoch=0)
    append(log, make_batch(2), epoch=0)
    append(log, make_batch(2), epoch=3)
    path = tmp_path / "t-0" / "leader-epoch-checkpoint"
    assert path.read_bytes() == b"0\n2\n0 0\n3 4\n"
    with log.lock():
        assert log.end_offset_for_epoch(0) == (0, 4)
        assert log.end_offset_for_epoch(2) == (0, 4)
        assert log.end_offset_for_epoch(5) == (3, 6)
        log.truncate_to(4)
    assert path.read_bytes() == b"0\n1\n0 0\n"
    log.close()


# ---------------------------------------------------------------- indexes and rolling


def _expected_index_entries(sizes, interval):
    """Kafka's cadence, computed independently: an entry for a batch when more than
    ``interval`` bytes were appended since the previous entry."""
    entries, since, position, offset = [], 0, 0, 0
    for size, count in sizes:
        last = offset + count - 1
        if since > interval:
            entries.append((last, position))
            since = 0
        position += size
        since += size
        offset = last + 1
    return entries


def test_offset_index_is_sparse_with_kafkas_cadence(tmp_path):
    config = LogConfig(index_interval_bytes=300)
    log = open_log(tmp_path / "t-0", config)
    sizes = []
    for i in range(40):
        b = make_batch(1 + i % 4, value_size=20 + 7 * i)
        sizes.append((len(b), 1 + i % 4))
        append(log, b)
    log.close()
    raw = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
    assert entries == _expected_index_entries(sizes, 300)
    assert len(entries) > 5
    times = (tmp_path / "t-0" / "00000000000000000000.timeindex").read_bytes()
    assert len(times) % 12 == 0 and len(times) >= 12
    # Closed segments carry a final entry for their max timestamp.
    last_ts, last_rel = struct.unpack_from(">qi", times, len(times) - 12)
    # ... at the last offset of the first batch that reached it.
    max_ts = max(T0 + n - 1 for _, n in sizes)
    first_reaching = next(i for i, (_, n) in enumerate(sizes) if T0 + n - 1 == max_ts)
    assert last_ts == max_ts and last_rel == sum(n for _, n in sizes[: first_reaching + 1]) - 1


def test_roll_by_size(tmp_path):
    size = len(make_batch(1, value_size=100))
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=3 * size, index_interval_bytes=1))
    for _ in range(10):
        append(log, make_batch(1, value_size=100))
    assert [s.base_offset for s in log.segments()] == [0, 3, 6, 9]
    assert seg_files(tmp_path / "t-0")[:3] == ["00000000000000000000.index", "00000000000000000000.log",
                                                "00000000000000000000.timeindex"]
    # Rolled segments were trimmed; the active one stays preallocated.
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000000.index") == 2 * 8
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000009.index") == 10485760
    # Producer-state snapshot at each roll, named by the new segment's base offset.
    assert os.path.exists(tmp_path / "t-0" / "00000000000000000006.snapshot")
    log.close()


def test_roll_by_time_uses_batch_timestamps(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000))
    append(log, make_batch(1, timestamp=T0))
    append(log, make_batch(1, timestamp=T0 + 1000))          # exactly segment.ms: no roll
    assert len(log.segments()) == 1
    append(log, make_batch(1, timestamp=T0 + 1001))
    assert [s.base_offset for s in log.segments()] == [0, 2]
    log.close()


def test_roll_by_time_without_timestamps_uses_the_clock(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000), clock=clock)
    append(log, make_batch(1, timestamp=-1))
    clock.advance(1001)
    append(log, make_batch(1, timestamp=-1))
    assert [s.base_offset for s in log.segments()] == [0, 1]
    log.close()


def test_roll_when_index_is_full(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(segment_index_bytes=8 * 3, index_interval_bytes=1))
    for _ in range(12):
        append(log, make_batch(1))
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) > 2
    assert read_all_offsets(log) == [(i, i) for i in range(12)]
    log.close()


# ---------------------------------------------------------------- reopen and recovery


def _fill(log, n=20, value_size=50):
    for i in range(n):
        append(log, make_batch(2, timestamp=T0 + i, value_size=value_size, tag=b"%d" % i))


def test_clean_reopen_trusts_files_without_rescanning(tmp_path):
    config = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    log = open_log(tmp_path / "t-0", config)
    _fill(log)
    log.close()
    # Damage a byte inside the last batch's records: only a rescan would notice.
    active = sorted(n for n in os.listdir(tmp_path / "t-0") if n.endswith(".log"))[-1]
    path = tmp_path / "t-0" / active
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x55
    path.write_bytes(bytes(data))
    reopened = open_log(tmp_path / "t-0", config, had_clean_shutdown=True)
    assert reopened.log_end_offset == 40
    assert [h.base_offset for h in whole_batches(read_bytes(reopened, 36), verify_crc=False)] == [36, 38]
    reopened.close()
    # Without the clean-shutdown marker the same file is recovered: the batch goes.
    recovered = open_log(tmp_path / "t-0", config, had_clean_shutdown=False)
    assert recovered.log_end_offset == 38
    recovered.close()


def test_crash_with_torn_batch_recovers_to_last_valid_batch(tmp_path, caplog):
    config = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    log = open_log(tmp_path / "t-0", config)
    _fill(log)
    active_base = log.segments()[-1].base_offset
    valid_size = log.segments()[-1].size
    log.release()                                    # a crash: nothing trimmed, no snapshot
    path = tmp_path / "t-0" / f"{active_base:020d}.log"
    torn = make_batch(3, value_size=80)
    with open(path, "r+b") as f:
        f.seek(valid_size)
        f.write(torn[: len(torn) // 2])
    with caplog.at_level(logging.WARNING, logger="kafkapy.storage"):
        recovered = open_log(tmp_path / "t-0", config, recovery_point=0)
    assert any("truncated %d invalid bytes" % (len(torn) // 2) in r.getMessage() for r in caplog.records)
    assert recovered.log_end_offset == 40
    assert os.path.getsize(path) == valid_size
    assert read_all_offsets(recovered)[-1] == (38, 39)
    append(recovered, make_batch(1))
    assert recovered.log_end_offset == 41
    recovered.close()


def test_flipped_byte_in_last_batch_truncates_exactly_there(tmp_path):
    config = LogConfig(segment_bytes=100000, index_interval_bytes=100)
    log = open_log(tmp_path / "t-0", config)
    _fill(log, 10)
    last_position = log.segments()[-1].size - len(make_batch(2, value_size=50, tag=b"9"))
    log.release()
    path = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[last_position + 70] ^= 1
    path.write_bytes(bytes(data))
    recovered = open_log(tmp_path / "t-0", config)
    assert recovered.log_end_offset == 18
    assert os.path.getsize(path) == last_position
    recovered.close()


def test_corruption_in_an_old_segment_drops_the_later_segments(tmp_path, caplog):
    config = LogConfig(segment_bytes=600, index_interval_bytes=100)
    log = open_log(tmp_path / "t-0", config)
    _fill(log, 20)
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) >= 3
    log.release()
    path = tmp_path / "t-0" / f"{bases[1]:020d}.log"
    data = bytearray(path.read_bytes())
    data[-5] ^= 1
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="kafkapy.storage"):
        recovered = open_log(tmp_path / "t-0", config, recovery_point=0)
    assert [s.base_offset for s in recovered.segments()] == bases[:2]
    assert recovered.log_end_offset < bases[2]
    assert any("deleting" in r.getMessage() for r in caplog.records)
    recovered.close()


@pytest.mark.parametrize("damage", ["missing", "garbage", "odd_length"])
def test_broken_index_files_are_rebuilt_on_clean_load(tmp_path, damage):
    config = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    log = open_log(tmp_path / "t-0", config)
    _fill(log)
    expected = read_all_offsets(log)
    log.close()
    index = tmp_path / "t-0" / "00000000000000000000.index"
    original = index.read_bytes()
    if damage == "missing":
        index.unlink()
        (tmp_path / "t-0" / "00000000000000000000.timeindex").unlink()
    elif damage == "garbage":
        index.write_bytes(struct.pack(">ii", 3, 10**6) * 4)
    else:
        index.write_bytes(original + b"\x01\x02\x03")
    reopened = open_log(tmp_path / "t-0", config, had_clean_shutdown=True)
    assert read_all_offsets(reopened) == expected
    for offset in range(0, 40, 3):
        assert whole_batches(read_bytes(reopened, offset))[0].base_offset == offset - offset % 2
    reopened.close()
    assert index.read_bytes() == original


# ---------------------------------------------------------------- retention


def test_retention_by_time(tmp_path):
    clock = Clock()
    config = LogConfig(segment_bytes=700, retention_ms=10_000, file_delete_delay_ms=0)
    log = open_log(tmp_path / "t-0", config, clock=clock)
    for i in range(20):
        append(log, make_batch(1, timestamp=T0 + 1000 * i, value_size=100))
    segments = log.segments()
    with log.lock():
        log.update_high_watermark(log.log_end_offset)
        # now - largest timestamp > 10 s deletes, oldest first, stopping at the first keeper.
        now = T0 + 1000 * 12 + 10_001
        expected = [s for s in segments[:-1] if now - s.largest_timestamp() > 10_000]
        deleted = log.delete_retention_segments(now)
    assert deleted == len(expected) > 0
    assert log.log_start_offset == log.segments()[0].base_offset
    names = os.listdir(tmp_path / "t-0")
    assert f"{expected[0].base_offset:020d}.log.deleted" in names
    assert read_all_offsets(log)[0][0] == log.log_start_offset
    log.close()


def test_retention_deletes_everything_by_rolling_first(tmp_path):
    config = LogConfig(segment_bytes=10_000, retention_ms=1000)
    log = open_log(tmp_path / "t-0", config)
    for i in range(3):
        append(log, make_batch(1, timestamp=T0))
    with log.lock():
        assert log.delete_retention_segments(T0 + 5000) == 0     # high watermark still 0
        log.update_high_watermark(3)
        assert log.delete_retention_segments(T0 + 5000) == 1
        assert log.log_start_offset == 3 and log.log_end_offset == 3 and log.high_watermark == 3
        assert [s.base_offset for s in log.segments()] == [3]
        assert log.delete_retention_segments(T0 + 10**9) == 0     # empty active segment stays
    append(log, make_batch(1))
    assert read_all_offsets(log) == [(3, 3)]
    log.close()


def test_retention_by_size(tmp_path):
    size = len(make_batch(1, value_size=100))
    config = LogConfig(segment_bytes=2 * size, retention_bytes=5 * size, retention_ms=-1)
    log = open_log(tmp_path / "t-0", config)
    for _ in range(10):
        append(log, make_batch(1, value_size=100))
    with log.lock():
        log.update_high_watermark(10)
        # 10 batches in 5 segments of 2, 5 batches over the limit: Kafka deletes
        # oldest segments while the excess still covers a whole segment, so 2 go.
        assert log.delete_retention_segments(T0) == 2
        assert log.log_start_offset == 4
        assert log.size_in_bytes() == 6 * size
    log.close()


def test_delete_records_then_retention(tmp_path):
    size = len(make_batch(1, value_size=100))
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=2 * size, retention_ms=-1))
    for _ in range(6):
        append(log, make_batch(1, value_size=100))
    with log.lock():
        with pytest.raises(OffsetOutOfRange):
            log.delete_records(3)                      # above the high watermark
        log.update_high_watermark(6)
        assert log.delete_records(3) == 3
        with pytest.raises(OffsetOutOfRange):
            log.read(2, 100, None, True)
        assert log.delete_retention_segments(T0) == 1  # [0, 1] is wholly below 3
        assert log.log_start_offset == 3
    assert read_all_offsets(log) == [(3, 3), (4, 4), (5, 5)]
    log.close()


# ---------------------------------------------------------------- truncation


def test_truncate_to(tmp_path):
    size = len(make_batch(2, value_size=100))
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=3 * size))
    for i in range(8):
        append(log, make_batch(2, value_size=100, timestamp=T0 + i))
    with log.lock():
        log.update_high_watermark(16)
        assert log.truncate_to(9)                       # mid-batch: the whole batch 8..9 goes
        assert log.log_end_offset == 8 and log.high_watermark == 8
        assert not log.truncate_to(8)
    assert read_all_offsets(log) == [(i, i + 1) for i in range(0, 8, 2)]
    append(log, make_batch(1))
    assert read_all_offsets(log)[-1] == (8, 8)
    with log.lock():
        log.truncate_to(0)
        assert log.log_end_offset == 0
        log.truncate_fully_and_start_at(100)
        assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert append(log, make_batch(1)).first_offset == 100
    log.close()


# ---------------------------------------------------------------- several processes


def test_two_log_objects_share_one_partition(tmp_path):
    size = len(make_batch(1, value_size=60))
    config = LogConfig(segment_bytes=4 * size, index_interval_bytes=50)
    state = LocalPartitionState()
    a = open_log(tmp_path / "t-0", config, state=state)
    b = open_log(tmp_path / "t-0", config, state=state)
    offsets = []
    for i in range(30):
        writer, reader = (a, b) if i % 2 == 0 else (b, a)
        result = append(writer, make_batch(1, value_size=60, tag=b"%d" % i))
        offsets.append(result.first_offset)
        data = read_bytes(reader, result.first_offset)
        assert whole_batches(data)[0].base_offset == result.first_offset
    assert offsets == list(range(30))
    assert read_all_offsets(a) == read_all_offsets(b) == [(i, i) for i in range(30)]
    assert [s.base_offset for s in a.segments()] == [s.base_offset for s in b.segments()]
    with a.lock():
        a.update_high_watermark(30)
        a.truncate_to(25)
    assert b.log_end_offset == 25 and read_all_offsets(b)[-1] == (24, 24)
    assert append(b, make_batch(1)).first_offset == 25
    b.close()                                # trims the indexes; a must re-extend them
    assert append(a, make_batch(1)).first_offset == 26
    assert read_all_offsets(a)[-2:] == [(25, 25), (26, 26)]
    a.close()


def _segments_seen(log):
    with log.lock():
        return [(s.base_offset, s.size, s.offset_index.entries, s.time_index.entries) for s in log.segments()]


def test_segment_count_in_the_slot_follows_roll_retention_and_truncation(tmp_path):
    size = len(make_batch(1, value_size=60))
    config = LogConfig(segment_bytes=3 * size, index_interval_bytes=50, retention_ms=1000,
                       file_delete_delay_ms=0)
    state = LocalPartitionState()
    a = open_log(tmp_path / "t-0", config, state=state)
    b = open_log(tmp_path / "t-0", config, state=state)
    assert state.segment_count == 1
    for i in range(7):                                   # 3 + 3 + 1 batches
        append(a, make_batch(1, value_size=60, timestamp=T0 + 1000 * i))
    assert state.segment_count == 3 == len(_segments_seen(b))
    with b.lock():
        b.roll()
    assert state.segment_count == 4 == len(_segments_seen(a))
    with a.lock():
        a.update_high_watermark(a.log_end_offset)
        assert a.delete_retention_segments(T0 + 6500) == 2      # the two full segments
    assert state.segment_count == 2 == len(_segments_seen(b))
    with b.lock():
        b.truncate_to(6)                                     # into the first remaining segment
    assert state.segment_count == 1 and _segments_seen(a) == _segments_seen(b)
    assert len(_segments_seen(a)) == 1
    with a.lock():
        a.truncate_fully_and_start_at(50)
    assert state.segment_count == 1 and _segments_seen(b) == [(50, 0, 0, 0)]
    a.close()
    b.close()


def test_first_use_through_the_slot_is_the_log_a_full_load_gives(tmp_path, monkeypatch):
    import kafkapy.storage.local_log as local_log_module

    size = len(make_batch(1, value_size=60))
    config = LogConfig(segment_bytes=4 * size, index_interval_bytes=50)
    state = LocalPartitionState()
    a = open_log(tmp_path / "t-0", config, state=state)
    for i in range(3):
        append(a, make_batch(1, value_size=60, tag=b"%d" % i))
    listed = []
    real_bases = local_log_module._segment_bases
    monkeypatch.setattr(local_log_module, "_segment_bases", lambda d: listed.append(d) or real_bases(d))
    # One segment: the attaching Log opens just the active one, without listing the directory.
    b = open_log(tmp_path / "t-0", config, state=state)
    assert listed == []
    assert _segments_seen(b) == _segments_seen(a)
    assert read_all_offsets(b) == read_all_offsets(a) == [(i, i) for i in range(3)]
    for i in range(3, 9):
        append(b, make_batch(1, value_size=60, tag=b"%d" % i))
    # Several segments: listed, as before.
    c = open_log(tmp_path / "t-0", config, state=state)
    assert len(listed) == 1
    assert _segments_seen(c) == _segments_seen(a) == _segments_seen(b)
    assert read_all_offsets(c) == [(i, i) for i in range(9)]
    # The active segment vanished behind the slot's back: reported as before.
    for log in (a, b, c):
        log.release()
    d = open_log(tmp_path / "t-1", config, state=LocalPartitionState())
    d.release()
    os.unlink(os.path.join(d.dir, "00000000000000000000.log"))
    with pytest.raises(StorageError, match="active segment 0 missing"):
        open_log(tmp_path / "t-1", config, state=d.state)


def test_attaching_with_the_topic_id_the_slot_records_skips_partition_metadata(tmp_path, monkeypatch):
    import kafkapy.storage.log as log_module

    real_read = checkpoints.read_partition_metadata
    reads = []
    monkeypatch.setattr(log_module.checkpoints, "read_partition_metadata",
                        lambda d: reads.append(d) or real_read(d))
    x, y = bytes(range(1, 17)), bytes(range(2, 18))
    path = tmp_path / "t-0"
    state = LocalPartitionState()
    a = open_log(path, state=state, topic_id=x)                 # fresh slot: reads, then writes the file
    assert len(reads) == 1 and real_read(str(path)) == x
    b = open_log(path, state=state, topic_id=x)
    c = open_log(path, state=state)                              # no id given: the recorded one
    assert len(reads) == 1 and b.topic_id == c.topic_id == x
    with pytest.raises(InconsistentTopicId):
        open_log(path, state=state, topic_id=y)                  # a different id is checked on disk
    assert len(reads) == 2
    for log in (a, b, c):
        log.close()
    # A restart loads without a topic id: the slot records the file's, so a
    # worker attaching with the metadata's id still finds a mismatch.
    state = LocalPartitionState()
    loaded = open_log(path, state=state, had_clean_shutdown=True)
    assert loaded.topic_id == x
    reads.clear()
    assert open_log(path, state=state, topic_id=x).topic_id == x and reads == []
    with pytest.raises(InconsistentTopicId):
        open_log(path, state=state, topic_id=y)
    loaded.close()
    # No partition.metadata at load: the first attach with an id writes it.
    os.unlink(os.path.join(str(path), checkpoints.PARTITION_METADATA))
    state = LocalPartitionState()
    loaded = open_log(path, state=state, had_clean_shutdown=True)
    assert loaded.topic_id is None
    assert open_log(path, state=state, topic_id=y).topic_id == y
    assert real_read(str(path)) == y
    assert open_log(path, state=state).topic_id == y
    loaded.close()


def test_a_new_config_reaches_the_append_path(tmp_path):
    import dataclasses

    clock = Clock()
    log = open_log(tmp_path / "t-0", clock=clock)
    with pytest.raises(dataclasses.FrozenInstanceError):
        log.config.segment_bytes = 1                            # a change is a new LogConfig
    assert append(log, make_batch(1)).log_append_time_ms == -1
    log.config = log.config.replace(message_timestamp_type="LogAppendTime")
    assert append(log, make_batch(1)).log_append_time_ms == clock.now_ms
    log.config = log.config.replace(max_message_bytes=50)
    with pytest.raises(RecordError) as info:
        append(log, make_batch(1, value_size=100))
    assert info.value.error_code == 10                          # MESSAGE_TOO_LARGE
    log.config = log.config.replace(max_message_bytes=1 << 20, segment_ms=1000, segment_jitter_ms=0)
    clock.advance(1001)
    append(log, make_batch(1))                                 # waited past segment.ms: rolls
    assert len(log.segments()) == 2
    log.close()


def test_offset_for_timestamp(tmp_path):
    size = len(make_batch(2, value_size=50))
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=4 * size, index_interval_bytes=50))
    for i in range(12):
        append(log, make_batch(2, timestamp=T0 + 100 * i, value_size=50))   # ts T0+100i, T0+100i+1
    with log.lock():
        # Record-level answers (Kafka's searchForTimestamp): the first record
        # whose timestamp is >= the target, with its own timestamp.
        assert log.offset_for_timestamp(T0) == (0, T0)
        assert log.offset_for_timestamp(T0 + 1) == (1, T0 + 1)
        assert log.offset_for_timestamp(T0 + 2) == (2, T0 + 100)
        assert log.offset_for_timestamp(T0 + 500) == (10, T0 + 500)
        assert log.offset_for_timestamp(T0 + 1101) == (23, T0 + 1101)
        assert log.offset_for_timestamp(T0 + 1102) is None
        assert log.offset_for_timestamp(-2) == (0, -1)
        assert log.offset_for_timestamp(-1) == (24, -1)
        assert log.max_timestamp_offset() == (23, T0 + 1101)
    log.close()


def test_append_leaves_the_high_watermark_to_replication(tmp_path):
    log = open_log(tmp_path / "t-0")
    with log.lock():
        log.append_as_leader(records_of(make_batch(3)), 0)
        assert (log.log_end_offset, log.high_watermark) == (3, 0)
        log.update_high_watermark(log.log_end_offset)
        log.append_as_leader(records_of(make_batch(2)), 0)
        assert (log.log_end_offset, log.high_watermark) == (5, 3)
        # A rejected append writes nothing.
        bad = bytearray(make_batch(1))
        bad[-1] ^= 1
        with pytest.raises(RecordError):
            log.append_as_leader(memoryview(bad), 0)
        assert (log.log_end_offset, log.high_watermark, log.state.active_size) == \
            (5, 3, log.active_segment.size)
        # The setter clamps into [log_start_offset, log_end_offset].
        assert log.update_high_watermark(99) == 5
    log.close()
