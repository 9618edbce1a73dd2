"""kafkapy._core.batch.check_append (compiled and twin): a leader append's checks in one call."""

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy._core.records_py import build_batch
from kafkapy._core.types import AppendCheckError

CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_TIMESTAMP = 32
INVALID_RECORD = 87
NOW_MS = 1_700_000_000_000


def _batch(timestamps=(NOW_MS,), **kwargs):
    return build_batch([(None, b"v", [], ts) for ts in timestamps], **kwargs)


def _error(batch_mod, buf, *args):
    with pytest.raises(AppendCheckError) as info:
        batch_mod.check_append(buf, *args)
    return info.value.error_code, str(info.value)


def test_sums_over_batches(batch_mod):
    buf = _batch((NOW_MS, NOW_MS + 5)) + _batch((NOW_MS - 3,)) + _batch((NOW_MS + 9, NOW_MS, NOW_MS))
    headers, record_count, offset_count, max_timestamp = batch_mod.check_append(
        bytearray(buf), -1, NOW_MS, 1000)
    assert [h.records_count for h in headers] == [2, 1, 3]
    assert (record_count, offset_count, max_timestamp) == (6, 6, NOW_MS + 9)
    assert headers == batch_mod.scan_batches(buf)[0]


def test_empty_buffer(batch_mod):
    assert batch_mod.check_append(b"") == ([], 0, 0, -1)


def test_scan_errors_come_first(batch_mod):
    good = _batch()
    bad_crc = bytearray(_batch(is_transactional=True))
    bad_crc[-1] ^= 1
    # The transactional batch comes first, but the scan's CRC error wins (as
    # in the twin's order: scan everything, then the per-batch checks).
    assert _error(batch_mod, bytes(bad_crc) + good)[0] == CORRUPT_MESSAGE
    assert _error(batch_mod, good + good[:30])[0] == CORRUPT_MESSAGE
    assert _error(batch_mod, good, len(good) - 1)[0] == MESSAGE_TOO_LARGE


def test_transactional_and_control_batches(batch_mod):
    # A transactional producer's batches are accepted (issue 11); control
    # batches are the broker's own (transaction markers), never a client's.
    txn = _batch(is_transactional=True, producer_id=5, producer_epoch=0, base_sequence=0)
    assert batch_mod.check_append(txn + _batch(is_transactional=True, producer_id=5, producer_epoch=0,
                                               base_sequence=1))[1] == 2
    code, message = _error(batch_mod, _batch(is_control=True, producer_id=5, producer_epoch=0))
    assert code == INVALID_RECORD and "control" in message
    # Transactional without a producer id, or mixed with non-transactional
    # batches of the same producer in one request: refused.
    assert _error(batch_mod, _batch(is_transactional=True))[0] == INVALID_RECORD
    assert _error(batch_mod, txn + _batch(producer_id=5, producer_epoch=0))[0] == INVALID_RECORD


def test_one_producer_per_request(batch_mod):
    a = _batch(producer_id=7, producer_epoch=1, base_sequence=0)
    assert _error(batch_mod, a + _batch(producer_id=8, producer_epoch=1))[0] == INVALID_RECORD
    assert _error(batch_mod, a + _batch(producer_id=7, producer_epoch=2))[0] == INVALID_RECORD
    # Non-idempotent batches (producer id -1) need not agree on the epoch.
    assert batch_mod.check_append(_batch(producer_epoch=1) + _batch(producer_epoch=2))[1] == 2


def test_timestamps(batch_mod):
    assert batch_mod.check_append(_batch((NOW_MS - 1000,)), -1, NOW_MS, 1000, 1000)[1] == 1
    code, message = _error(batch_mod, _batch((NOW_MS - 1001,)), -1, NOW_MS, 1000, 1000)
    assert code == INVALID_TIMESTAMP and str(NOW_MS - 1001) in message and "before" in message
    code, message = _error(batch_mod, _batch((NOW_MS, NOW_MS + 1001)), -1, NOW_MS, 1000, 1000)
    assert code == INVALID_TIMESTAMP and "after" in message
    # -1: no check at all (LogAppendTime, or the default Long.MAX_VALUE).
    assert batch_mod.check_append(_batch((0,)), -1, NOW_MS, -1, -1)[1] == 1
    # A record without a timestamp (-1: NO_TIMESTAMP, e.g. an up-converted v0
    # message) is not checked, as Kafka's LogValidator skips it.
    no_ts = _with_timestamps(bytearray(_batch((NOW_MS,))), -1, -1)
    assert batch_mod.check_append(no_ts, -1, NOW_MS, 1000, 1000)[1] == 1
    # Far-apart int64 extremes do not overflow the distance.
    far = bytearray(_batch((NOW_MS,)))
    assert _error(batch_mod, _with_timestamps(far, -2**63, 2**63 - 1), -1, 2**62, 2**62, 2**62)[0] \
        == INVALID_TIMESTAMP


def test_timestamp_before_and_after_bounds_apart(batch_mod):
    # KIP-937: message.timestamp.before.max.ms and .after.max.ms bound each side alone.
    old, future = _batch((NOW_MS - 3_600_000,)), _batch((NOW_MS + 3_600_000,))
    assert batch_mod.check_append(old, -1, NOW_MS, -1, 1000)[1] == 1
    assert _error(batch_mod, future, -1, NOW_MS, -1, 1000)[0] == INVALID_TIMESTAMP
    assert batch_mod.check_append(future, -1, NOW_MS, 1000, -1)[1] == 1
    assert _error(batch_mod, old, -1, NOW_MS, 1000, -1)[0] == INVALID_TIMESTAMP
    assert _error(batch_mod, _batch((NOW_MS + 1,)), -1, NOW_MS, 10_000, 0)[0] == INVALID_TIMESTAMP
    assert batch_mod.check_append(_batch((NOW_MS,)), -1, NOW_MS, 0, 0)[1] == 1


def _with_timestamps(buf, base_timestamp, max_timestamp):
    import crc32c
    struct.pack_into(">qq", buf, 27, base_timestamp, max_timestamp)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_empty_batch_skips_timestamp_check(batch_mod):
    # An empty batch (all records compacted away) has no record timestamps to check.
    empty = _with_timestamps(bytearray(build_batch([])), 0, 0)
    assert batch_mod.check_append(empty, -1, NOW_MS, 10, 10)[1:] == (0, 1, 0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    specs=st.lists(st.fixed_dictionaries({
        "timestamps": st.lists(st.integers(NOW_MS - 5000, NOW_MS + 5000), min_size=1, max_size=3),
        "producer_id": st.sampled_from([-1, 3]),
        "producer_epoch": st.sampled_from([0, 1]),
        "is_transactional": st.booleans(),
    }), min_size=1, max_size=3),
    edit=st.none() | st.tuples(st.integers(0, 10_000), st.integers(0, 255)),
    limit=st.sampled_from([-1, 0, 1000, 4000]),
    after_limit=st.sampled_from([-1, 0, 1000, 4000]),
    max_batch_size=st.sampled_from([-1, 80, 1000]),
)
def test_twins_agree(both_batch_mods, specs, edit, limit, after_limit, max_batch_size):
    buf = bytearray(b"".join(
        _batch(s["timestamps"], producer_id=s["producer_id"], producer_epoch=s["producer_epoch"],
               is_transactional=s["is_transactional"] and s["producer_id"] >= 0)
        for s in specs))
    if edit is not None:
        buf[edit[0] % len(buf)] = edit[1]
    results = []
    for mod in both_batch_mods:
        try:
            results.append(mod.check_append(bytes(buf), max_batch_size, NOW_MS, limit, after_limit))
        except AppendCheckError as e:
            results.append((e.error_code, str(e)))
    assert results[0] == results[1]
