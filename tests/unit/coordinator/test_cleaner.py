"""Compaction of a log (kafkapy.storage.cleaner): last record per key, tombstones, crash safety."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "storage"))

from storage_util import T0, Clock, open_log  # noqa: E402

from kafkapy._core import load  # noqa: E402
from kafkapy._core.records_py import build_batch, decode_records  # noqa: E402
from kafkapy.storage.cleaner import clean_log  # noqa: E402
from kafkapy.storage.config import LogConfig  # noqa: E402
from kafkapy.storage.shared import LocalPartitionState  # noqa: E402

batch = load("batch")
DAY = 86_400_000


def _append(lg, records, ts):
    data = build_batch([(k, v, [], ts) for k, v in records])
    with lg.lock():
        lg.append_as_leader(memoryview(bytearray(data)), 0)
        lg.update_high_watermark(lg.log_end_offset)


def _all_records(lg):
    out = []
    with lg.lock():
        for seg in lg.segments():
            fd = os.open(seg.path, os.O_RDONLY)
            buf = os.pread(fd, seg.size, 0)
            os.close(fd)
            headers, _, err = batch.scan_batches(buf, 0, -1, True)
            assert err == 0
            for h in headers:
                out += [(o, k, v) for o, _t, k, v, _h in decode_records(buf[h.position:])]
    return out


def _log(tmp_path, clock):
    config = LogConfig(cleanup_policy="compact", segment_bytes=400, delete_retention_ms=DAY)
    return open_log(tmp_path / "t-0", config, LocalPartitionState(), clock)


def test_keeps_last_record_per_key_and_offsets(tmp_path):
    clock = Clock()
    lg = _log(tmp_path, clock)
    for i in range(30):
        _append(lg, [(b"k%d" % (i % 3), b"v%d" % i)], T0 + i)
    with lg.lock():
        lg.roll()
    before = len(lg.segments())
    assert before > 2
    assert clean_log(lg, clock()) > 0
    recs = _all_records(lg)
    latest = {k: (o, v) for o, k, v in recs}
    assert latest == {b"k0": (27, b"v27"), b"k1": (28, b"v28"), b"k2": (29, b"v29")}
    offsets = [o for o, _, _ in recs]
    assert offsets == sorted(offsets) and len(offsets) == 3
    with lg.lock():
        assert lg.log_end_offset == 30
    # Reopening (recovery rebuilds the removed indexes) gives the same records.
    lg.close()
    lg2 = _log(tmp_path, clock)
    assert _all_records(lg2) == recs
    assert clean_log(lg2, clock()) == 0  # nothing left to do


def test_tombstones_dropped_after_delete_retention(tmp_path):
    clock = Clock()
    lg = _log(tmp_path, clock)
    for i in range(10):
        _append(lg, [(b"a", b"x" * 40)], T0)
    _append(lg, [(b"a", None)], T0)
    for i in range(10):
        _append(lg, [(b"b%d" % i, b"y" * 40)], T0)
    clean_log(lg, T0 + 1)
    assert (10, b"a", None) in _all_records(lg)
    clean_log(lg, T0 + DAY + 1)
    assert all(k != b"a" for _, k, _ in _all_records(lg))


def test_crash_leftovers_are_harmless(tmp_path):
    clock = Clock()
    lg = _log(tmp_path, clock)
    for i in range(20):
        _append(lg, [(b"k", b"v%d" % i)], T0)
    before = _all_records(lg)
    first = lg.segments()[0]
    # A crash after writing .cleaned / .swap but before the swap rename.
    Path(first.path + ".cleaned").write_bytes(b"junk")
    Path(first.path + ".swap").write_bytes(b"junk")
    lg.close()
    lg2 = _log(tmp_path, clock)
    assert _all_records(lg2) == before
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith((".swap", ".cleaned"))]


def test_delete_policy_is_left_alone(tmp_path):
    lg = open_log(tmp_path / "d-0", LogConfig(segment_bytes=300), LocalPartitionState(), Clock())
    for i in range(10):
        _append(lg, [(b"k", b"v" * 30)], T0)
    assert clean_log(lg, T0) == 0


def _append_txn(lg, pid, records, ts, seq=0):
    data = build_batch([(k, v, [], ts) for k, v in records], producer_id=pid, producer_epoch=0,
                       base_sequence=seq, is_transactional=True)
    with lg.lock():
        lg.append_as_leader(memoryview(bytearray(data)), 0)
        lg.update_high_watermark(lg.log_end_offset)


def _marker(lg, pid, commit):
    with lg.lock():
        lg.append_control_batch(pid, 0, 0, commit, 0)
        lg.update_high_watermark(lg.log_end_offset)


def test_transactions_aborted_dropped_open_kept_committed_compacted(tmp_path):
    """An aborted transaction's record neither survives nor supersedes the
    committed value of its key; an open transaction's batch stays as it is;
    a committed transactional batch compacted in part keeps its producer
    and transactional flag; markers stay."""
    clock = Clock()
    lg = _log(tmp_path, clock)
    _append(lg, [(b"k1", b"plain")], T0)                                  # 0
    _append_txn(lg, 10, [(b"k1", b"aborted")], T0)                        # 1
    _marker(lg, 10, commit=False)                                         # 2
    _append_txn(lg, 11, [(b"k2", b"committed"), (b"k3", b"old")], T0)     # 3, 4
    _marker(lg, 11, commit=True)                                          # 5
    _append(lg, [(b"k3", b"new")], T0)                                    # 6
    _append_txn(lg, 12, [(b"k1", b"open")], T0)                           # 7
    with lg.lock():
        lg.roll()
    _append(lg, [(b"k9", b"active")], T0)
    assert clean_log(lg, clock()) > 0
    values = [(o, k, v) for o, k, v in _all_records(lg) if k in (b"k1", b"k2", b"k3")]
    assert values == [(0, b"k1", b"plain"), (3, b"k2", b"committed"), (6, b"k3", b"new"), (7, b"k1", b"open")]
    with lg.lock():
        seg = lg.segments()[0]
        fd = os.open(seg.path, os.O_RDONLY)
        buf = os.pread(fd, seg.size, 0)
        os.close(fd)
    headers = {h.base_offset: h for h in batch.scan_batches(buf, 0, -1, True)[0]}
    assert (headers[3].attributes & 0x10, headers[3].producer_id, headers[3].base_sequence) == (0x10, 11, 0)
    assert headers[2].attributes & 0x20 and headers[5].attributes & 0x20  # markers kept
    assert 1 not in headers or headers[1].records_count == 0
    # The log still answers read_committed as before: nothing open but pid 12.
    with lg.lock():
        assert lg.last_stable_offset() == 7
