"""Compaction of a log (kafkapy.storage.cleaner): last record per key, tombstones, crash safety."""

import os
from pathlib import Path

from support.storage import T0, Clock, open_log

from kafkapy._core import load
from kafkapy._core.records_py import build_batch, decode_records
from kafkapy.storage.cleaner import CleanerConfig, clean_log
from kafkapy.storage.config import LogConfig
from kafkapy.storage.shared import LocalPartitionState

batch = load("batch")
DAY = 86_400_000


def _append(lg, records, ts):
    data = build_batch([(k, v, [], ts) for k, v in records])
    with lg.lock():
        lg.append_as_leader(memoryview(bytearray(data)), 0)
        lg.update_high_watermark(lg.log_end_offset)


def _batches(lg):
    """``(header, segment bytes)`` of every batch on disk, CRCs checked."""
    out = []
    with lg.lock():
        for seg in lg.segments():
            fd = os.open(seg.path, os.O_RDONLY)
            buf = os.pread(fd, seg.size, 0)
            os.close(fd)
            headers, _, err = batch.scan_batches(buf, 0, -1, True)
            assert err == 0
            out += [(h, buf) for h in headers]
    return out


def _all_records(lg):
    return [(o, k, v) for h, buf in _batches(lg) for o, _t, k, v, _h in decode_records(buf[h.position:])]


def _headers(lg):
    return [h for h, _buf in _batches(lg)]


def _log(tmp_path, clock, **kw):
    config = LogConfig(**{"cleanup_policy": "compact", "segment_bytes": 400, "delete_retention_ms": DAY, **kw})
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
    """Kafka 3.x (KIP-534): the first pass that keeps a tombstone stamps its
    batch with a delete horizon (now + delete.retention.ms, attribute 0x40);
    a pass past the horizon drops it."""
    clock = Clock()
    lg = _log(tmp_path, clock)
    for i in range(10):
        _append(lg, [(b"a", b"x" * 40)], T0)
    _append(lg, [(b"a", None)], T0)
    for i in range(10):
        _append(lg, [(b"b%d" % i, b"y" * 40)], T0)
    clean_log(lg, T0 + 1)
    assert (10, b"a", None) in _all_records(lg)
    (h,) = [h for h in _headers(lg) if h.base_offset == 10]
    assert h.attributes & 0x40 and h.base_timestamp == T0 + 1 + DAY
    assert h.max_timestamp == T0  # the records' own timestamps stay
    clean_log(lg, T0 + DAY, force=True)  # before the horizon: kept
    assert (10, b"a", None) in _all_records(lg)
    clean_log(lg, T0 + DAY + 1, force=True)
    assert all(k != b"a" for _, k, _ in _all_records(lg))


def test_crash_leftovers_are_harmless(tmp_path):
    """Before the commit point (no ``.log.swap``) the strays go and the old segments stand."""
    clock = Clock()
    lg = _log(tmp_path, clock)
    for i in range(20):
        _append(lg, [(b"k", b"v%d" % i)], T0)
    before = _all_records(lg)
    first = lg.segments()[0]
    # A crash after writing .cleaned files and the .txnindex.swap, before the .log.swap rename.
    Path(first.path + ".cleaned").write_bytes(b"junk")
    Path(first.path[:-4] + ".txnindex.swap").write_bytes(b"")
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
    with lg.lock():
        lg.roll()  # the open transaction in a later segment: the LSO (7) bounds the cleaning
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


# --- scheduling: cleaner-offset-checkpoint, dirty ratio, compaction lags --------------------------

HOUR = 3_600_000


def _roll(lg):
    with lg.lock():
        lg.roll()


def test_dirty_ratio_and_cleaner_checkpoint(tmp_path):
    """A log is cleaned when its dirty ratio is above min.cleanable.dirty.ratio;
    the pass records where its offset map ended in the log dir's
    cleaner-offset-checkpoint (Kafka's format) and the next ratio counts from there."""
    from kafkapy.storage.cleaner import dirty_ratio

    clock = Clock()
    lg = _log(tmp_path, clock)
    for i in range(30):
        _append(lg, [(b"k%d" % (i % 3), b"v%d" % i)], T0 + i)
    _roll(lg)
    assert dirty_ratio(lg, clock()) == 1.0  # no checkpoint: all dirty
    assert clean_log(lg, clock()) > 0
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == "0\n1\nt 0 30\n"
    assert dirty_ratio(lg, clock()) == 0.0
    _append(lg, [(b"k0", b"one more")], T0)
    _roll(lg)
    assert 0 < dirty_ratio(lg, clock()) < 0.5
    files = sorted(os.listdir(tmp_path / "t-0"))
    assert clean_log(lg, clock()) == 0  # not dirty enough: nothing touched
    assert sorted(os.listdir(tmp_path / "t-0")) == files
    for i in range(10):
        _append(lg, [(b"k%d" % (i % 3), b"w%d" % i)], T0)
    _roll(lg)
    assert dirty_ratio(lg, clock()) > 0.5
    assert clean_log(lg, clock()) > 0
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == "0\n1\nt 0 41\n"
    latest = {k: v for _o, k, v in _all_records(lg)}
    assert latest == {b"k0": b"w9", b"k1": b"w7", b"k2": b"w8"}


def test_checkpoint_past_the_log_end_is_reset(tmp_path):
    from kafkapy.storage.checkpoints import write_offset_checkpoint
    from kafkapy.storage.cleaner import CLEANER_CHECKPOINT

    clock = Clock()
    lg = _log(tmp_path, clock)
    for i in range(20):
        _append(lg, [(b"k", b"v%d" % i)], T0)
    _roll(lg)
    # A stale entry of a deleted partition goes; one past the log end is reset to the log start.
    write_offset_checkpoint(str(tmp_path / CLEANER_CHECKPOINT), {("t", 0): 999, ("gone", 3): 5})
    assert clean_log(lg, clock()) > 0
    assert [o for o, _k, _v in _all_records(lg)] == [19]
    assert (tmp_path / CLEANER_CHECKPOINT).read_text() == "0\n1\nt 0 20\n"


def test_min_compaction_lag_keeps_young_records(tmp_path):
    """Segments whose largest timestamp is within min.compaction.lag.ms of now
    are uncleanable: their records neither go nor supersede older ones."""
    clock = Clock()
    lg = _log(tmp_path, clock, min_compaction_lag_ms=HOUR)
    for i in range(10):
        _append(lg, [(b"k%d" % (i % 2), b"old%d" % i)], T0)
    _roll(lg)
    for i in range(10):
        _append(lg, [(b"k%d" % (i % 2), b"new%d" % i)], T0 + 2 * HOUR)
    _roll(lg)
    _append(lg, [(b"z", b"active")], T0 + 2 * HOUR)
    clean_log(lg, T0 + 2 * HOUR + 1)
    recs = _all_records(lg)
    assert [v for _o, _k, v in recs if v.startswith(b"new")] == [b"new%d" % i for i in range(10)]  # untouched
    assert [v for _o, _k, v in recs if v.startswith(b"old")] == [b"old8", b"old9"]  # last per key among the old
    clean_log(lg, T0 + 3 * HOUR + 1)  # now the young ones are old enough
    recs = _all_records(lg)
    assert [v for _o, _k, v in recs] == [b"new8", b"new9", b"active"]


def test_max_compaction_lag_forces_cleaning(tmp_path):
    """A ratio that never triggers (1.0), but the first dirty batch is older than
    max.compaction.lag.ms: the log is cleaned anyway."""
    clock = Clock()
    lg = _log(tmp_path, clock, min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=HOUR)
    for i in range(20):
        _append(lg, [(b"k", b"v%d" % i)], T0)
    _roll(lg)
    assert clean_log(lg, T0 + HOUR // 2) == 0
    assert len(_all_records(lg)) == 20
    assert clean_log(lg, T0 + 2 * HOUR) > 0
    assert [o for o, _k, _v in _all_records(lg)] == [19]


def test_small_segments_are_merged(tmp_path):
    """Segments are grouped by their size before the pass (Kafka's
    groupSegmentsBySize: total log bytes within segment.bytes), so the
    segments a pass shrinks merge on the next pass; offsets, reads by offset
    and a reopen all agree, and other processes see a new generation."""
    from support.storage import read_bytes

    clock = Clock()
    lg = _log(tmp_path, clock)
    for i in range(60):
        _append(lg, [(b"k%d" % (i % 4), b"v%d" % i)], T0 + i)
    _roll(lg)
    before = len(lg.segments())
    generation = lg.state.generation
    assert before >= 10
    assert clean_log(lg, clock()) >= before - 1
    assert len(lg.segments()) == before  # full-size segments: one per group
    assert clean_log(lg, clock(), force=True) > 0
    segments = lg.segments()
    assert len(segments) <= 4 < before, [(s.base_offset, s.size) for s in segments]  # 3 inactive + active
    assert all(s.size <= 400 for s in segments)
    assert lg.state.generation > generation
    on_disk = sorted(n for n in os.listdir(tmp_path / "t-0") if n.endswith(".log"))
    assert on_disk == sorted("%020d.log" % s.base_offset for s in segments)
    recs = _all_records(lg)
    assert [(o, v) for o, _k, v in recs] == [(56, b"v56"), (57, b"v57"), (58, b"v58"), (59, b"v59")]
    data = read_bytes(lg, 57)
    assert decode_records(data)[0][0] == 57 or decode_records(data)[-1][0] >= 57
    with lg.lock():
        assert lg.log_end_offset == 60
    lg.close()
    lg2 = _log(tmp_path, clock)
    assert _all_records(lg2) == recs
    assert len(lg2.segments()) == len(segments)


def _concat_segments(lg, segs) -> bytes:
    out = b""
    for s in segs:
        fd = os.open(s.path, os.O_RDONLY)
        out += os.pread(fd, s.size, 0)
        os.close(fd)
    return out


def test_crash_after_the_commit_point_finishes_the_swap(tmp_path):
    """A ``.log.swap`` is a cleaned group past its commit point: load finishes
    the swap (the covered segments go, whether or not the crash removed some
    already), so no offset is lost or duplicated."""
    from kafkapy.storage.log_loader import complete_swaps  # noqa: F401 (load calls it)

    for deleted_some in (False, True):
        d = tmp_path / str(deleted_some)
        d.mkdir()
        clock = Clock()
        lg = _log(d, clock)
        for i in range(30):
            _append(lg, [(b"k%d" % i, b"v%d" % i)], T0)
        _roll(lg)
        before = _all_records(lg)
        segs = lg.segments()
        group = segs[:3]
        merged = _concat_segments(lg, group)
        lg.close()
        part = d / "t-0"
        (part / ("%020d.log.swap" % group[0].base_offset)).write_bytes(merged)
        (part / ("%020d.txnindex.swap" % group[0].base_offset)).write_bytes(b"")
        if deleted_some:
            os.unlink(part / ("%020d.log" % group[1].base_offset))
            os.unlink(part / ("%020d.index" % group[0].base_offset))
        lg2 = _log(d, clock)
        assert _all_records(lg2) == before
        assert [s.base_offset for s in lg2.segments()] == [group[0].base_offset] + \
            [s.base_offset for s in segs[3:]]
        assert not [n for n in os.listdir(part) if n.endswith((".swap", ".cleaned"))]


def _committed_then_aborted(tmp_path, clock, aborted_pid, plain):
    """A log of producer 11's committed ``a`` (0, COMMIT at 1), producer
    ``aborted_pid``'s aborted ``b`` (2, ABORT at 3), then ``plain`` records from 4."""
    lg = _log(tmp_path, clock, segment_bytes=4096)
    _append_txn(lg, 11, [(b"a", b"c1")], T0)
    _marker(lg, 11, commit=True)
    _append_txn(lg, aborted_pid, [(b"b", b"aborted")], T0)
    _marker(lg, aborted_pid, commit=False)
    _append(lg, plain, T0)
    return lg


def test_markers_go_after_delete_retention_once_their_data_is_gone(tmp_path):
    """Kafka's CleanedTransactionMetadata: a pass that still meets a
    transaction's data keeps its marker (an ABORT marker with its .txnindex
    entry, while the pass drops the aborted records); the next pass stamps the
    marker with a delete horizon (and drops the index entry); a pass past the
    horizon drops the marker. An active producer's last transaction keeps its
    data batch and so its marker."""
    clock = Clock()
    lg = _committed_then_aborted(tmp_path, clock, 10, [(b"a", b"plain")])  # 4 supersedes offset 0
    _append_txn(lg, 11, [(b"z", b"c2")], T0, seq=1)       # 5
    _marker(lg, 11, commit=True)                          # 6
    _append_txn(lg, 10, [(b"y", b"c3")], T0, seq=1)       # 7
    _marker(lg, 10, commit=True)                          # 8
    _roll(lg)
    _append(lg, [(b"q", b"active")], T0)                  # 9

    def state():
        heads = {h.base_offset: h for h in _headers(lg)}
        with lg.lock():
            aborted = [(t.producer_id, t.first_offset, t.last_offset) for t in lg.collect_aborted_transactions(0, 10)]
            lso = lg.last_stable_offset()
        return heads, aborted, lso

    now = T0 + 1
    clean_log(lg, now, force=True)
    heads, aborted, lso = state()
    assert 0 not in heads and 2 not in heads              # superseded, aborted
    assert {1, 3, 4, 5, 6, 7, 8} <= set(heads)
    assert not heads[1].attributes & 0x40 and not heads[3].attributes & 0x40
    assert aborted == [(10, 2, 3)] and lso == 10

    clean_log(lg, now + 1, force=True)
    heads, aborted, lso = state()
    for m in (1, 3):
        assert heads[m].attributes & 0x60 == 0x60 and heads[m].base_timestamp == now + 1 + DAY
    assert not heads[6].attributes & 0x40 and not heads[8].attributes & 0x40
    assert aborted == [] and lso == 10

    clean_log(lg, now + DAY, force=True)  # before the horizon
    assert {1, 3} <= set(state()[0])
    clean_log(lg, now + 1 + DAY, force=True)
    heads, aborted, lso = state()
    assert 1 not in heads and 3 not in heads
    assert {4, 5, 6, 7, 8, 9} <= set(heads) and lso == 10
    values = [(o, k, v) for o, k, v in _all_records(lg) if o not in (6, 8)]  # not the markers' records
    assert values == [(4, b"a", b"plain"), (5, b"z", b"c2"), (7, b"y", b"c3"), (9, b"q", b"active")]
    lg.close()
    lg2 = _log(tmp_path, clock, segment_bytes=4096)
    with lg2.lock():
        lg2.update_high_watermark(lg2.log_end_offset)  # the unit log has no high-watermark checkpoint
        assert lg2.last_stable_offset() == 10 and lg2.log_end_offset == 10
        assert lg2.collect_aborted_transactions(0, 10) == []


def test_an_idle_producers_last_transaction_goes_after_producer_id_expiration(tmp_path):
    """Kafka keeps an active producer's last data batch (RETAIN_EMPTY) and so
    its transaction's marker; a producer idle for producer.id.expiration.ms
    with no open transaction is expired from Kafka's producer state, after
    which both go as any other: the superseded data first, then the marker
    with a delete horizon, then the marker. The horizon is written in the
    marker (attribute 0x40, base timestamp), its CRC valid."""
    clock = Clock()
    lg = _committed_then_aborted(tmp_path, clock, 12, [(b"a", b"plain"), (b"b", None)])  # 4, 5: supersede 0, delete b
    _roll(lg)
    _append(lg, [(b"q", b"active")], T0)                  # 6
    hour = 3_600_000
    config = CleanerConfig(producer_id_expiration_ms=hour)
    with lg.lock():
        last_timestamps = {e.producer_id: e.last_timestamp for e in lg.active_producers()}
    idle_from = max(last_timestamps[11], last_timestamps[12], T0)

    def heads():
        return {h.base_offset: h for h in _headers(lg)}

    first = now = idle_from + hour - 2
    clean_log(lg, now, force=True, config=config)       # both producers active: their last batches stay empty
    h = heads()
    assert h[0].records_count == 0 and h[0].producer_id == 11 and h[2].records_count == 0
    assert {1, 3} <= set(h) and not h[1].attributes & 0x40 and not h[3].attributes & 0x40
    clean_log(lg, now + 1, force=True, config=config)   # still active: nothing changes for them
    h = heads()
    assert {0, 1, 2, 3} <= set(h) and not h[1].attributes & 0x40

    now = idle_from + hour                                # expired: the empty batches go
    clean_log(lg, now, force=True, config=config)
    h = heads()
    assert 0 not in h and 2 not in h and {1, 3} <= set(h)
    clean_log(lg, now + 1, force=True, config=config)   # no data left: each marker gets its horizon
    h = heads()
    for m in (1, 3):
        assert h[m].attributes & 0x60 == 0x60 and h[m].base_timestamp == now + 1 + DAY
    assert h[4].attributes & 0x40 and h[4].base_timestamp == first + DAY  # the tombstone's, from the first pass
    with lg.lock():
        assert lg.collect_aborted_transactions(0, 7) == []
    clean_log(lg, now + DAY, force=True, config=config)  # the tombstone's horizon: b goes, markers stay
    assert [(o, k) for o, k, _v in _all_records(lg) if o < 6] == [(1, b"\x00\x00\x00\x01"), (3, b"\x00\x00\x00\x00"),
                                                                  (4, b"a")]
    clean_log(lg, now + 1 + DAY, force=True, config=config)
    assert [(o, k, v) for o, k, v in _all_records(lg)] == [(4, b"a", b"plain"), (6, b"q", b"active")]
    assert not any(h.attributes & 0x20 for h in _headers(lg))
    with lg.lock():
        assert lg.last_stable_offset() == 7 and lg.log_end_offset == 7


def test_an_emptied_segment_keeps_one_empty_batch_and_is_not_rewritten_again(tmp_path):
    """Segments whose records are all superseded merge into one segment
    holding one empty batch at their last offset (not one empty batch per
    segment, which grew without bound as they merged); a pass with nothing
    new to clean leaves it as it is."""
    clock = Clock()
    lg = _log(tmp_path, clock, segment_bytes=300)  # the three ~90-byte segments make one group, not the fourth
    for rnd in range(3):
        _append(lg, [(b"k%d" % i, b"%d" % rnd) for i in range(2)], T0)
        _roll(lg)
    # 6-7 supersede 0-5; ~243 bytes: no room for a 61-byte empty batch beside them.
    _append(lg, [(b"k%d" % i, b"v" * 80) for i in range(2)], T0)
    _roll(lg)
    _append(lg, [(b"z", b"active")], T0)
    assert clean_log(lg, clock(), force=True) == 3  # one group of three; the fourth is unchanged
    heads = _headers(lg)
    assert [(h.base_offset, h.records_count) for h in heads] == [(5, 0), (6, 2), (8, 1)]
    with lg.lock():
        first = lg.segments()[0]
        identity = (first.base_offset, os.stat(first.path).st_ino)
    assert clean_log(lg, clock(), force=True) == 0
    with lg.lock():
        first = lg.segments()[0]
        assert (first.base_offset, os.stat(first.path).st_ino) == identity


def test_max_compaction_lag_rolls_the_active_segment(tmp_path):
    """Kafka's maxSegmentMs: a compacted log's active segment rolls by
    max.compaction.lag.ms when that is below segment.ms (a delete-policy log does not)."""
    for policy, rolled in (("compact", True), ("delete", False)):
        clock = Clock()
        config = LogConfig(cleanup_policy=policy, max_compaction_lag_ms=1000, segment_ms=7 * DAY)
        lg = open_log(tmp_path / policy / "t-0", config, LocalPartitionState(), clock)
        _append(lg, [(b"k", b"v0")], clock())
        clock.advance(1001)
        _append(lg, [(b"k", b"v1")], clock())
        assert (len(lg.segments()) == 2) is rolled, policy


def test_clean_logs_takes_the_due_logs_and_reports_cleaner_metrics(tmp_path):
    """clean_logs cleans the logs above their dirty ratio (dirtiest first),
    leaves the others, and hands the log probe Kafka's max-dirty-percent,
    max-clean-time-secs and cleaner-recopy-percent."""
    from support.storage import no_fsync

    from kafkapy.metrics import probes
    from kafkapy.storage.cleaner import clean_logs, dirty_ratio, read_cleaner_checkpoint
    from kafkapy.storage.log import Log

    class Recorder(probes.NullLogProbe):
        __slots__ = ("calls",)

        def __init__(self):
            self.calls = []

        def cleaned(self, *args):
            self.calls.append(args)

    clock = Clock()
    config = LogConfig(cleanup_policy="compact", segment_bytes=400)
    logs = {name: Log.open(str(tmp_path / f"{name}-0"), name, 0, config, LocalPartitionState(), None, clock,
                           fsync=no_fsync) for name in ("a", "b")}

    def write(lg, n):
        for i in range(n):
            _append(lg, [(b"k%d" % (i % 2), b"v%d" % i)], T0)
        _roll(lg)

    write(logs["a"], 20)
    write(logs["b"], 20)
    recorder = Recorder()
    probes.install(log_probe=recorder)
    try:
        assert clean_logs(logs.values(), clock()) > 0
        first = read_cleaner_checkpoint(str(tmp_path))
        assert first == {("a", 0): 20, ("b", 0): 20}
        write(logs["a"], 1)   # a little dirt: below 0.5
        write(logs["b"], 30)  # a lot: above
        ratio_b = dirty_ratio(logs["b"], clock())
        assert dirty_ratio(logs["a"], clock()) < 0.5 < ratio_b
        assert clean_logs(logs.values(), clock()) > 0
    finally:
        probes.install()
    assert read_cleaner_checkpoint(str(tmp_path)) == {("a", 0): 20, ("b", 0): 50}
    (dirty1, secs1, recopy1), (dirty2, secs2, recopy2) = recorder.calls
    assert dirty1 == 100 and secs1 > 0 and 0 < recopy1 < 100
    assert dirty2 == int(100 * ratio_b) and secs2 > 0 and 0 < recopy2 < 100


def test_truncation_lowers_the_cleaner_checkpoint(tmp_path):
    """Kafka's maybeTruncateCheckpoint: a truncation below the checkpoint brings
    it down to the active segment's base, so what is written again is dirty."""
    clock = Clock()
    lg = _log(tmp_path, clock)
    for i in range(30):
        _append(lg, [(b"k%d" % (i % 3), b"v%d" % i)], T0)
    _roll(lg)
    assert clean_log(lg, clock()) > 0
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == "0\n1\nt 0 30\n"
    with lg.lock():
        lg.truncate_to(29)
        active_base = lg.segments()[-1].base_offset
    assert active_base < 30
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == "0\n1\nt 0 %d\n" % active_base


# ------------------------------------------------------------------ bounded memory, the lock held only to swap


def _keyed_log(tmp_path, clock, name, keys, rounds, value=b"v" * 50, segment_bytes=4096, **kw):
    """A compacted log ``t-0`` in its own log dir ``tmp_path / name``: ``rounds``
    batches of one record per key, then rolled."""
    config = LogConfig(cleanup_policy="compact", segment_bytes=segment_bytes, delete_retention_ms=DAY, **kw)
    (tmp_path / name).mkdir()
    lg = open_log(tmp_path / name / "t-0", config, LocalPartitionState(), clock)
    for r in range(rounds):
        _append(lg, [(b"key-%d" % k, value + b"%d" % r) for k in range(keys)], T0 + r)
    with lg.lock():
        lg.roll()
    return lg


def test_a_full_offset_map_cleans_up_to_where_it_filled_and_the_next_pass_goes_on(tmp_path):
    """log.cleaner.dedupe.buffer.size bounds the offset map (Kafka's "offset
    map is full"): a pass maps what fits, cleans up to the last offset mapped
    and checkpoints it; later passes go on from there and end where one
    unbounded pass ends."""
    from kafkapy._core.offset_map_py import ENTRY_BYTES as MAP_ENTRY_BYTES
    from kafkapy.storage.cleaner import CleanerConfig, read_cleaner_checkpoint

    clock = Clock()
    small = CleanerConfig(dedupe_buffer_size=40 * MAP_ENTRY_BYTES, load_factor=1.0)
    assert small.max_map_entries == 40
    bounded = _keyed_log(tmp_path, clock, "b", keys=30, rounds=6, min_cleanable_dirty_ratio=0.01)
    unbounded = _keyed_log(tmp_path, clock, "u", keys=30, rounds=6)
    assert clean_log(unbounded, clock(), force=True) > 0
    clean_log(bounded, clock(), config=small)
    # One batch of 30 keys fits in the map, a second one would not.
    assert read_cleaner_checkpoint(str(tmp_path / "b"))[("t", 0)] == 30
    ends = []
    for _ in range(10):  # bounded; each pass moves the checkpoint on by one batch
        clean_log(bounded, clock(), force=False, config=small)
        ends.append(read_cleaner_checkpoint(str(tmp_path / "b"))[("t", 0)])
        if ends[-1] == 180:
            break
    assert ends == [60, 90, 120, 150, 180]
    assert _all_records(bounded) == _all_records(unbounded)
    assert {k for _o, k, _v in _all_records(bounded)} == {b"key-%d" % k for k in range(30)}


def test_a_pass_reads_a_batch_at_a_time(tmp_path):
    """Memory of a pass is one read buffer, one batch's records and the
    offset map, not the log: ~6 MB of log with 50 keys is cleaned with a
    peak under 2 MB of Python allocations (the whole log read and decoded
    at once was several times the log)."""
    import tracemalloc

    from kafkapy.storage.cleaner import CleanerConfig

    clock = Clock()
    lg = _keyed_log(tmp_path, clock, "m", keys=50, rounds=120, value=b"v" * 1000, segment_bytes=256 * 1024)
    with lg.lock():
        size = sum(s.size for s in lg.segments())
    assert size > 5_000_000
    tracemalloc.start()
    try:
        assert clean_log(lg, clock(), force=True, config=CleanerConfig(io_buffer_size=64 * 1024)) > 0
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, peak
    assert len(_all_records(lg)) == 50


def test_appends_and_rolls_between_reading_and_swapping_are_kept(tmp_path):
    """The pass reads and writes without the log's lock: what producers
    append meanwhile (and a roll) is there after the swap, and the cleaned
    part is cleaned."""
    from kafkapy.storage.cleaner import _Pass, to_clean

    clock = Clock()
    lg = _keyed_log(tmp_path, clock, "a", keys=10, rounds=8)
    with lg.lock():
        cleaning = _Pass(lg, clock(), to_clean(lg, clock(), None))
    end_offset, _read, _written = cleaning.build()
    assert end_offset == 80
    _append(lg, [(b"late", b"1")], T0 + 100)
    with lg.lock():
        lg.roll()
    _append(lg, [(b"late", b"2")], T0 + 101)
    with lg.lock():
        assert cleaning.swap() > 0
    cleaning.discard_leftovers()
    records = _all_records(lg)
    assert [(o, k, v) for o, k, v in records if k == b"late"] == [(80, b"late", b"1"), (81, b"late", b"2")]
    assert len([1 for _o, k, _v in records if k != b"late"]) == 10
    assert not [n for n in os.listdir(tmp_path / "a" / "t-0") if n.endswith((".swap", ".cleaned"))]


def test_a_segment_changed_under_the_pass_makes_it_give_up(tmp_path):
    """A group's segment truncated between reading and swapping (a follower's
    truncation, retention): nothing is swapped, the .cleaned files go, the
    log is as the truncation left it."""
    from kafkapy.storage.cleaner import _Pass, to_clean

    clock = Clock()
    lg = _keyed_log(tmp_path, clock, "c", keys=10, rounds=8)
    with lg.lock():
        cleaning = _Pass(lg, clock(), to_clean(lg, clock(), None))
    assert cleaning.build()[0] == 80
    with lg.lock():
        lg.truncate_to(30)
    after_truncation = _all_records(lg)
    with lg.lock():
        assert cleaning.swap() == -1
    cleaning.discard_leftovers()
    assert _all_records(lg) == after_truncation
    assert [o for o, _k, _v in after_truncation] == list(range(30))
    assert not [n for n in os.listdir(tmp_path / "c" / "t-0") if n.endswith((".swap", ".cleaned"))]


def test_a_segment_shorter_than_noted_ends_the_read(tmp_path):
    """A file cut under the reader (a follower truncating the active
    segment) ends ``_segment_batches`` at the whole batches it still holds
    (it re-read the same short chunk for ever)."""
    from kafkapy.storage.segment import file_batches as _segment_batches

    first = build_batch([(b"k", b"v", [], T0)], base_offset=0)
    second = build_batch([(b"k2", b"v" * 80, [], T0)], base_offset=1)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(first + second[:20])
    got = [h.base_offset for h, _view in _segment_batches(str(path), len(first) + len(second), 4096)]
    assert got == [0]


def test_a_stop_gives_the_pass_up_and_leaves_the_log_as_it_was(tmp_path):
    """``should_stop`` is asked before every read: a pass told to stop in
    the middle returns nothing swapped and no .cleaned file behind."""
    clock = Clock()
    lg = _keyed_log(tmp_path, clock, "s", keys=10, rounds=8)
    before = _all_records(lg)
    asked = []

    def should_stop():
        asked.append(1)
        return len(asked) > 5

    assert clean_log(lg, clock(), force=True, should_stop=should_stop) == 0
    assert len(asked) == 6
    assert _all_records(lg) == before
    assert not [n for n in os.listdir(tmp_path / "s" / "t-0") if n.endswith((".swap", ".cleaned"))]
    assert clean_log(lg, clock(), force=True) > 0  # not told to stop: it cleans


def test_a_swap_failing_part_way_still_tells_other_processes(tmp_path, monkeypatch):
    """Groups swapped before one that fails stay swapped; the generation is
    bumped all the same (other processes reload), the failed group's old
    segments stand, and every offset still reads back."""
    from kafkapy.storage import cleaner

    clock = Clock()
    lg = _keyed_log(tmp_path, clock, "f", keys=10, rounds=8, segment_bytes=1024)
    latest = {k: (o, v) for o, k, v in _all_records(lg)}
    original = cleaner._swap_in
    calls = []

    def failing(lg_, group, entries):
        calls.append(group[0].base_offset)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return original(lg_, group, entries)

    monkeypatch.setattr(cleaner, "_swap_in", failing)
    generation = lg.state.generation
    try:
        clean_log(lg, clock(), force=True)
    except OSError:
        pass
    assert len(calls) == 2
    assert lg.state.generation > generation
    monkeypatch.setattr(cleaner, "_swap_in", original)
    records = _all_records(lg)
    assert {k: (o, v) for o, k, v in records} == latest
    assert [o for o, _k, _v in records] == sorted({o for o, _k, _v in records})
    assert not [n for n in os.listdir(tmp_path / "f" / "t-0") if n.endswith(".swap")]


class _FakeTime:
    """A clock that only moves when told: by ``advance`` (I/O taking time)
    or by the throttler's own ``sleep``."""

    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.sleeps.append(s)
        self.now += s


def test_the_throttler_holds_io_to_its_rate_and_follows_a_new_one():
    """Kafka's Throttler: bytes counted per check interval (300 ms); over the
    rate, it sleeps until they fit, in slices that read the rate again."""
    from kafkapy.storage.cleaner import Throttler

    t = _FakeTime()
    rate = [1000.0]
    th = Throttler(lambda: rate[0], clock=t, sleep=t.sleep)
    th.maybe_throttle(10_000)  # within the first interval: no check yet
    assert t.sleeps == []
    t.now += 0.31
    th.maybe_throttle(0)  # 10,000 bytes in 0.31 s at 1,000 B/s: until 10 s after the interval began
    assert abs(sum(t.sleeps) - 9.69) < 1e-6 and max(t.sleeps) <= Throttler.SLICE_S + 1e-9
    # Under the rate: no sleep, a new interval.
    t.sleeps.clear()
    th.maybe_throttle(100)
    t.now += 0.5
    th.maybe_throttle(100)
    assert t.sleeps == []
    # A rate raised while it sleeps ends the sleep at the next slice.
    t.now += 0.31
    calls = []

    def rising():
        calls.append(1)
        return 1000.0 if len(calls) < 5 else 1e12

    th.rate = rising
    th.maybe_throttle(100_000)
    assert 0 < sum(t.sleeps) <= 4 * Throttler.SLICE_S + 1e-9
    # A stop ends the sleep too.
    t.sleeps.clear()
    th.rate = lambda: 1.0
    t.now += 0.31
    th.maybe_throttle(1_000_000, should_stop=lambda: len(t.sleeps) >= 3)
    assert len(t.sleeps) == 3


def _counting(rate, t: _FakeTime):
    """A throttler on ``t`` that keeps the bytes it is told; each read or
    write takes 20 ms of ``t``."""
    from kafkapy.storage.cleaner import Throttler

    th = Throttler(rate, clock=t, sleep=t.sleep)
    th.told = []
    original = th.maybe_throttle

    def counting(n, should_stop=None):
        th.told.append(n)
        t.now += 0.02
        original(n, should_stop)

    th.maybe_throttle = counting
    return th


def test_a_throttled_pass_sleeps_for_what_it_reads_and_writes(tmp_path):
    """log.cleaner.io.max.bytes.per.second: the throttler is told every read
    and every write of a pass; at a rate of a tenth of those bytes per
    second, the pass takes about ten seconds (of a fake clock: Kafka's
    throttler checks every 300 ms, so the last I/O goes unchecked), and
    cleans the same as an unthrottled pass."""
    from kafkapy.storage.cleaner import CleanerConfig

    clock = Clock()
    kw = {"keys": 20, "rounds": 40, "value": b"v" * 200, "segment_bytes": 16 * 1024}
    throttled, free = _keyed_log(tmp_path, clock, "th", **kw), _keyed_log(tmp_path, clock, "fr", **kw)
    with free.lock():
        size = sum(s.size for s in free.segments())
    small_reads = CleanerConfig(io_buffer_size=4096)
    unthrottled = _counting(lambda: 1.7976931348623157e308, _FakeTime())
    assert clean_log(free, clock(), force=True, config=small_reads, throttler=unthrottled) > 0
    total = sum(unthrottled.told)
    assert total > 2 * size  # the map's reads, the cleaning's reads and the writes
    t = _FakeTime()
    th = _counting(lambda: total / 10, t)
    assert clean_log(throttled, clock(), force=True, config=small_reads, throttler=th) > 0
    assert sum(th.told) == total
    assert len(th.told) > 80 and 8.0 < t.now - 100.0 <= 10.5, (len(th.told), t.now - 100.0)
    assert _all_records(throttled) == _all_records(free)
