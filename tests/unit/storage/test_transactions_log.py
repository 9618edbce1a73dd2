"""Transactions in the log: control batches, the last stable offset and the .txnindex, on real files."""

import os
import struct

import pytest

from kafkapy._core.records_py import build_batch
from kafkapy.storage.config import LogConfig
from kafkapy.storage.control_records import (
    ABORT, COMMIT, CorruptRecordError, EndTxnMarker, build_end_txn_marker_batch, parse_end_txn_marker)
from kafkapy.storage.errors import CorruptIndexError, RecordError
from kafkapy.storage.shared import LocalPartitionState
from kafkapy.storage.transaction_index import AbortedTxn, TransactionIndex, decode_entries, encode_entry

from support.storage import T0, append, make_batch, open_log, read_bytes, records_of, whole_batches

A, B = 1000, 2000  # producer ids


# ---------------------------------------------------------------- formats


def test_marker_batch_bytes_are_kafkas():
    data = build_end_txn_marker_batch(5, 2, 9, True, T0, base_offset=10)
    assert len(data) == 78  # 61-byte batch header + Kafka's 17-byte end-marker record
    base_offset, length, leader_epoch, magic, _crc, attributes, last_delta, base_ts, max_ts, pid, epoch, seq, count = \
        struct.unpack_from(">qiibIhiqqqhii", data)
    assert (base_offset, length, leader_epoch, magic) == (10, 66, -1, 2)
    assert attributes == 0x30  # transactional | control, no codec, CreateTime
    assert (last_delta, base_ts, max_ts, pid, epoch, seq, count) == (0, T0, T0, 5, 2, -1, 1)
    # length 16 (zigzag 0x20), attributes, timestamp delta, offset delta, key length 4 (0x08),
    # key (version 0, COMMIT 1), value length 6 (0x0c), value (version 0, epoch 9), no headers.
    assert data[61:] == bytes.fromhex("20" "00" "00" "00" "08" "00000001" "0c" "0000" "00000009" "00")
    assert parse_end_txn_marker(data) == EndTxnMarker(COMMIT, 9)
    abort = build_end_txn_marker_batch(5, 2, 9, False, T0)
    assert parse_end_txn_marker(abort) == (ABORT, 9) and not parse_end_txn_marker(abort).is_commit


def test_marker_parse_refuses_what_is_not_a_marker():
    not_marker = build_batch([(struct.pack(">hh", 0, 3), b"\0\0\0\0\0\0", [], T0)], is_control=True)
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(not_marker)  # control type 3 is not COMMIT/ABORT
    short_value = build_batch([(struct.pack(">hh", 0, 1), b"\0\0", [], T0)], is_control=True)
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(short_value)


def test_aborted_txn_entry_is_kafkas_34_bytes(tmp_path):
    entry = AbortedTxn(0x0102030405060708, 3, 9, 10)
    assert encode_entry(entry) == bytes.fromhex(
        "0000" "0102030405060708" "0000000000000003" "0000000000000009" "000000000000000a")
    index = TransactionIndex(str(tmp_path), 0)
    assert index.entries() == []
    index.append(entry)
    index.append(AbortedTxn(7, 5, 12, 13))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(8, 1, 11, 12))  # markers come in offset order
    assert os.path.getsize(index.path) == 68
    assert index.path.endswith("00000000000000000000.txnindex")
    assert index.collect_aborted_txns(10, 20) == ([AbortedTxn(7, 5, 12, 13)], False)
    assert index.collect_aborted_txns(0, 10) == ([entry], True)  # entry's LSO 10 reaches the bound
    # A torn tail (crash mid-append) is ignored and dropped by the next append.
    with open(index.path, "ab") as f:
        f.write(b"\0\0\1")
    assert len(index.entries()) == 2
    index.append(AbortedTxn(9, 13, 14, 15))
    assert [e.producer_id for e in decode_entries(open(index.path, "rb").read())] == [entry.producer_id, 7, 9]
    index.truncate_to(12)
    assert index.entries() == [entry]
    index.truncate_to(0)
    assert not os.path.exists(index.path)
    late = TransactionIndex(str(tmp_path), 100)
    late.append(AbortedTxn(1, 90, 99, 100))
    with pytest.raises(CorruptIndexError):
        late.sanity_check()


# ---------------------------------------------------------------- the log


def txn_batch(log, pid, seq, n=1, epoch=0):
    """A producer's transactional batch at the log end (through the follower path:
    Produce does not take transactional batches yet)."""
    data = make_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True,
                      base_offset=log.log_end_offset)
    with log.lock():
        return log.append_as_follower(records_of(data))


def marker(log, pid, commit, epoch=0, coordinator_epoch=0, hw=True):
    with log.lock():
        result = log.append_control_batch(pid, epoch, coordinator_epoch, commit, leader_epoch=0)
        if hw:
            log.update_high_watermark(log.log_end_offset)
    return result


def lso(log):
    with log.lock():
        return log.last_stable_offset()


def set_hw(log, offset=None):
    with log.lock():
        log.update_high_watermark(log.log_end_offset if offset is None else offset)


def txn_files(path):
    return sorted(n for n in os.listdir(path) if n.endswith(".txnindex"))


def test_lso_follows_open_and_completed_transactions(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, make_batch(2))               # 0-1 plain data
    set_hw(log)
    assert lso(log) == 2
    txn_batch(log, A, 0, n=2)                # 2-3 A's transaction
    txn_batch(log, B, 0)                     # 4   B's transaction
    set_hw(log)
    assert lso(log) == 2
    result = marker(log, A, commit=True, hw=False)   # 5: A commits, marker not replicated yet
    assert (result.first_offset, result.last_offset) == (5, 5)
    set_hw(log, 5)
    assert lso(log) == 2                     # A's marker is not below the high watermark
    set_hw(log)
    assert lso(log) == 4                     # now only B is open
    marker(log, B, commit=False)             # 6: B aborts
    assert lso(log) == 7
    with log.lock():
        assert log.collect_aborted_transactions(0, 7) == [AbortedTxn(B, 4, 6, 7)]
    # The commit wrote no index entry; the abort one (in the only segment).
    assert txn_files(tmp_path / "t-0") == ["00000000000000000000.txnindex"]
    # The markers are ordinary batches of the log, read back as they were written.
    headers = whole_batches(read_bytes(log, 5))
    assert [(h.base_offset, h.attributes & 0x30, h.producer_id) for h in headers] == [(5, 0x30, A), (6, 0x30, B)]
    log.close()


def test_aborted_entry_records_the_lso_after_the_marker(tmp_path):
    log = open_log(tmp_path / "t-0")
    txn_batch(log, A, 0)                     # 0
    txn_batch(log, B, 0)                     # 1
    txn_batch(log, A, 1)                     # 2
    marker(log, A, commit=False)             # 3: B still open from 1
    marker(log, B, commit=False)             # 4
    with log.lock():
        assert log.collect_aborted_transactions(0, 5) == [AbortedTxn(A, 0, 3, 1), AbortedTxn(B, 1, 4, 5)]
        # Kafka's bounds: entries ending before the fetch offset are skipped...
        assert log.collect_aborted_transactions(4, 5) == [AbortedTxn(B, 1, 4, 5)]
        # ...and the search stops at an entry whose LSO reaches the upper bound.
        assert log.collect_aborted_transactions(0, 1) == [AbortedTxn(A, 0, 3, 1)]
    log.close()


def test_lso_is_never_below_the_log_start(tmp_path):
    log = open_log(tmp_path / "t-0")
    txn_batch(log, A, 0)                     # 0: open
    append(log, make_batch(3))               # 1-3
    set_hw(log)
    assert lso(log) == 0
    with log.lock():
        log.delete_records(2)
    assert lso(log) == 2
    log.close()


def test_marker_without_transaction_data_completes_nothing(tmp_path):
    log = open_log(tmp_path / "t-0")
    marker(log, A, commit=False)             # an abort for a transaction that wrote nothing here
    assert lso(log) == 1
    assert txn_files(tmp_path / "t-0") == []
    log.close()


def test_marker_fencing(tmp_path):
    log = open_log(tmp_path / "t-0")
    txn_batch(log, A, 0, epoch=3)
    marker(log, A, commit=True, epoch=3, coordinator_epoch=5)
    with log.lock(), pytest.raises(RecordError) as err:
        log.append_control_batch(A, 2, 5, True, 0)
    assert err.value.error_code == 47        # INVALID_PRODUCER_EPOCH
    with log.lock(), pytest.raises(RecordError) as err:
        log.append_control_batch(A, 3, 4, True, 0)
    assert err.value.error_code == 52        # TRANSACTION_COORDINATOR_FENCED
    assert log.log_end_offset == 2           # nothing written
    # A bumped epoch (the coordinator fencing the producer) is taken.
    assert marker(log, A, commit=False, epoch=4, coordinator_epoch=5).first_offset == 2
    log.close()


def test_produce_takes_transactional_batches_and_refuses_control_ones(tmp_path):
    log = open_log(tmp_path / "t-0")
    with pytest.raises(RecordError) as err:
        append(log, make_batch(1, producer_id=A, producer_epoch=0, base_sequence=0, is_control=True))
    assert err.value.error_code == 87
    append(log, make_batch(1, producer_id=A, producer_epoch=0, base_sequence=0, is_transactional=True))
    with log.lock():
        log.update_high_watermark(log.log_end_offset)
        assert (log.log_end_offset, log.last_stable_offset()) == (1, 0)  # open: the LSO waits
    log.close()


def test_index_entries_go_to_the_segment_of_the_marker_and_fetches_find_them(tmp_path):
    size = len(make_batch(1, value_size=60))
    config = LogConfig(segment_bytes=3 * size, index_interval_bytes=1)
    log = open_log(tmp_path / "t-0", config)
    txn_batch(log, A, 0)                     # 0
    for i in range(4):                       # 1-4 plain data, rolling segments
        append(log, make_batch(1, value_size=60, tag=b"%d" % i))
    marker(log, A, commit=False)             # 5: aborts A's transaction from 0
    with log.lock():
        bases = [s.base_offset for s in log.segments()]
    assert len(bases) >= 2
    holder = max(b for b in bases if b <= 5)
    assert txn_files(tmp_path / "t-0") == ["%020d.txnindex" % holder]
    with log.lock():
        # A fetch at 0 that stops early still learns of the transaction starting there.
        data = log.read(0, 1, None, True)
        upper = log.fetch_upper_bound_offset(data)
        assert 0 < upper <= 5
        assert log.aborted_transactions(0, data) == [AbortedTxn(A, 0, 5, 6)]
        assert log.aborted_transactions(6, log.read(6, 1000, None, True)) == []
    log.close()


def test_follower_copy_builds_the_same_index(tmp_path):
    leader = open_log(tmp_path / "leader" / "t-0")
    txn_batch(leader, A, 0)
    txn_batch(leader, B, 0)
    marker(leader, A, commit=False)
    append(leader, make_batch(2))
    marker(leader, B, commit=False)
    follower = open_log(tmp_path / "follower" / "t-0")
    data = read_bytes(leader, 0)
    with follower.lock():
        follower.append_as_follower(records_of(data))
    set_hw(follower)
    index = "00000000000000000000.txnindex"
    assert (tmp_path / "follower" / "t-0" / index).read_bytes() == (tmp_path / "leader" / "t-0" / index).read_bytes()
    assert lso(follower) == lso(leader) == 6
    leader.close()
    follower.close()


def test_a_second_worker_catches_up_without_indexing_twice(tmp_path):
    state = LocalPartitionState()
    a = open_log(tmp_path / "t-0", state=state)
    b = open_log(tmp_path / "t-0", state=state)
    txn_batch(a, A, 0)
    assert lso(b) == 0
    marker(a, A, commit=False)
    # b learns of the abort from the log (reading the marker), and appends the next one.
    assert lso(b) == 2
    txn_batch(b, B, 0)
    marker(b, B, commit=False)
    with a.lock():
        assert a.collect_aborted_transactions(0, 10) == [AbortedTxn(A, 0, 1, 2), AbortedTxn(B, 2, 3, 4)]
    a.close()
    b.close()


def test_coordinator_epoch_is_read_back_from_the_marker(tmp_path):
    log = open_log(tmp_path / "t-0")
    txn_batch(log, A, 0)
    marker(log, A, commit=True, coordinator_epoch=8)
    log.close()
    reopened = open_log(tmp_path / "t-0", had_clean_shutdown=True)
    with reopened.lock(), pytest.raises(RecordError) as err:
        reopened.append_control_batch(A, 0, 7, True, 0)
    assert err.value.error_code == 52
    reopened.close()


def test_truncation_drops_index_entries_above_the_offset(tmp_path):
    log = open_log(tmp_path / "t-0")
    txn_batch(log, A, 0)                     # 0
    marker(log, A, commit=False)             # 1
    txn_batch(log, B, 0)                     # 2
    marker(log, B, commit=False)             # 3
    with log.lock():
        log.truncate_to(3)
        assert log.collect_aborted_transactions(0, 10) == [AbortedTxn(A, 0, 1, 2)]
        assert log.last_stable_offset() == 2  # B's transaction is open again
    log.close()


def test_recovery_rebuilds_the_index(tmp_path):
    size = len(make_batch(1, value_size=60))
    config = LogConfig(segment_bytes=3 * size, index_interval_bytes=1)
    path = tmp_path / "t-0"
    log = open_log(path, config)
    txn_batch(log, A, 0)
    txn_batch(log, B, 0)
    marker(log, A, commit=False)
    for i in range(3):
        append(log, make_batch(1, value_size=60, tag=b"%d" % i))
    marker(log, B, commit=False)
    txn_batch(log, A, 1)                     # left open by the "crash"
    with log.lock():
        expected = log.collect_aborted_transactions(0, 100)
        end = log.log_end_offset
    assert len(expected) == 2
    before = {n: (path / n).read_bytes() for n in txn_files(path)}
    log.release()                            # a crash: no clean close, no snapshot at the end
    for name in before:
        os.unlink(path / name)
    recovered = open_log(path, config, recovery_point=0)
    assert {n: (path / n).read_bytes() for n in txn_files(path)} == before
    with recovered.lock():
        assert recovered.collect_aborted_transactions(0, 100) == expected
        recovered.update_high_watermark(end)
        assert recovered.last_stable_offset() == end - 1   # A's open transaction
    recovered.close()


def test_non_transactional_data_has_no_index_and_lso_is_the_high_watermark(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=500))
    for i in range(10):
        append(log, make_batch(2, value_size=50, tag=b"%d" % i))
    append(log, make_batch(1, producer_id=A, producer_epoch=0, base_sequence=0))
    set_hw(log, 7)
    assert lso(log) == 7
    with log.lock():
        assert log.collect_aborted_transactions(0, 100) == []
    log.close()
    assert txn_files(tmp_path / "t-0") == []
    recovered = open_log(tmp_path / "t-0", LogConfig(segment_bytes=500), recovery_point=0)
    assert txn_files(tmp_path / "t-0") == []
    recovered.close()


def _psm_view(log):
    """What a worker's producer-state map holds once caught up to the log end."""
    with log.lock():
        log.last_stable_offset()  # catches up
        psm = log._producer_state()
        return ({pid: (e.producer_epoch, e.coordinator_epoch, e.current_txn_first_offset, e.last_timestamp)
                 for pid, e in psm.producers.items()},
                dict(psm.ongoing_txns), list(psm.unreplicated_txns), psm.applied_offset, psm._last_applied)


def test_marker_appender_records_its_marker_as_a_reader_of_the_log_does(tmp_path):
    # The appender applies its own marker from memory (no read back); another
    # worker learns it from the log: both maps must agree, and the appender's
    # next catch-up must continue from it (no reload from a snapshot).
    state = LocalPartitionState()
    a = open_log(tmp_path / "t-0", state=state)
    txn_batch(a, A, 0, n=3)
    txn_batch(a, B, 0, n=2)
    marker(a, A, commit=True, coordinator_epoch=4, hw=False)
    marker(a, B, commit=False, coordinator_epoch=5, hw=False)
    marker(a, A, commit=True, coordinator_epoch=6, hw=False)  # no open transaction: completes nothing
    with a.lock():
        psm = a._producer_state()
        reloads = []
        original = psm._reload
        psm._reload = lambda *args: (reloads.append(args), original(*args))
    txn_batch(a, A, 3, n=1)
    marker(a, A, commit=False, coordinator_epoch=6, hw=False)
    assert reloads == []
    b = open_log(tmp_path / "t-0", state=state)
    assert _psm_view(a) == _psm_view(b)
    assert _psm_view(a)[0][A][1] == 6 and _psm_view(a)[0][B][1] == 5
    with a.lock():
        assert a.collect_aborted_transactions(0, 20) == [AbortedTxn(B, 3, 6, 7), AbortedTxn(A, 8, 9, 10)]
    with b.lock(), pytest.raises(RecordError) as err:
        b.append_control_batch(B, 0, 4, True, 0)  # the coordinator epoch recorded in memory fences it
    assert err.value.error_code == 52
    a.close()
    b.close()


def _count_index_walks(log):
    """Calls of translate_offset (the offset-index lookup and header walk) on ``log``'s segments."""
    calls = []
    for segment in log.local._segments:
        original = segment.translate_offset
        segment.translate_offset = lambda *args, _o=original: (calls.append(args), _o(*args))[1]
    return calls


def test_catch_up_resumes_at_the_file_position_of_the_batch_applied_last(tmp_path):
    # The transaction steady state across two workers: b (a processor)
    # appends the data, a (the coordinator) the marker. Each map remembers
    # where its last batch is in the file and reads on from there, without
    # the offset index; the maps are the ones a fresh reader builds.
    state = LocalPartitionState()
    a = open_log(tmp_path / "t-0", state=state)
    b = open_log(tmp_path / "t-0", state=state)
    for seq in range(3):
        append(b, make_batch(1, producer_id=A, producer_epoch=0, base_sequence=seq, is_transactional=True))
        marker(a, A, commit=seq != 1)
    walks = _count_index_walks(a) + _count_index_walks(b)
    append(b, make_batch(1, producer_id=A, producer_epoch=0, base_sequence=3, is_transactional=True))
    marker(a, A, commit=False)
    append(b, make_batch(1, producer_id=A, producer_epoch=0, base_sequence=4, is_transactional=True))
    assert walks == []
    with b.lock():
        positions = {h.base_offset: h.position for h in b.local.read_batch_headers(0)}
    for log in (a, b):
        with log.lock():
            psm = log._producer_state()
            assert psm._last_applied_position == positions[psm._last_applied[0]]
    fresh = open_log(tmp_path / "t-0", state=state)
    assert _psm_view(a) == _psm_view(b) == _psm_view(fresh)
    with a.lock():
        assert a.collect_aborted_transactions(0, 20) == [AbortedTxn(A, 2, 3, 4), AbortedTxn(A, 6, 7, 8)]
    for log in (a, b, fresh):
        log.close()


def test_a_stale_file_position_is_caught_by_the_batch_identity(tmp_path):
    # a applied its own batch at offset 2 (position remembered); b truncates
    # to 1 and appends other batches, so a's position now holds the middle
    # of a bigger batch, then another one: a must rebuild its map, as it
    # did before it remembered positions.
    state = LocalPartitionState()
    a = open_log(tmp_path / "t-0", state=state)
    b = open_log(tmp_path / "t-0", state=state)
    append(a, make_batch(1), make_batch(1))
    append(a, make_batch(1, producer_id=A, producer_epoch=0, base_sequence=0, is_transactional=True))
    with a.lock():
        assert a._producer_state()._last_applied_position > 0
    with b.lock():
        b.truncate_to(1)
    append(b, make_batch(5, producer_id=B, producer_epoch=0, base_sequence=0, is_transactional=True))
    append(b, make_batch(1, producer_id=A, producer_epoch=1, base_sequence=0))
    fresh = open_log(tmp_path / "t-0", state=state)
    assert _psm_view(a) == _psm_view(fresh)
    assert _psm_view(a)[1] == {B: 1}  # B's transaction open from offset 1; A's (epoch 0) gone with the truncation
    for log in (a, b, fresh):
        log.close()
