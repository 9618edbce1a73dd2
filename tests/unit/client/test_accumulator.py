"""RecordAccumulator: batching, readiness, draining, back-pressure, retries, splitting."""

import threading
import time

import pytest

from kafkapy._core import load
from kafkapy.client import errors
from kafkapy.client.accumulator import RecordAccumulator
from kafkapy.client.conn import ClusterMetadata
from kafkapy.client.structs import PartitionMetadata, TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def _metadata(leaders):
    metadata = ClusterMetadata()
    metadata.partitions = {"t": {p: PartitionMetadata("t", p, leader, 0, (leader,), (leader,), (), 0)
                                 for p, leader in leaders.items()}}
    return metadata


def _acc(batch_size=1000, linger_ms=0, buffer_memory=1 << 20, retry_backoff_ms=10, delivery_timeout_ms=120000):
    return RecordAccumulator(batch_size, linger_ms, buffer_memory, 0, retry_backoff_ms, delivery_timeout_ms)


def test_appends_fill_one_batch_then_open_another():
    acc = _acc(batch_size=1000)
    results = [acc.append(TP0, 1, None, b"x" * 100, None, 1000) for _ in range(12)]
    new_batches = [new for _f, _full, new in results]
    assert new_batches[0] is True
    assert new_batches.count(True) == 2
    assert len(acc.batches[TP0]) == 2
    # The record that opened the second batch reports the first as full.
    index = new_batches.index(True, 1)
    assert results[index][1] is True
    assert [f._relative_offset for f, _, _ in results[:index]] == list(range(index))


def test_abort_on_new_batch_leaves_no_batch():
    acc = _acc()
    future, full, new = acc.append(TP0, 1, None, b"v", None, 1000, abort_on_new_batch=True)
    assert (future, full, new) == (None, False, False)
    assert not acc.batches[TP0]


def test_ready_honours_linger_and_flush():
    acc = _acc(linger_ms=50)
    metadata = _metadata({0: 5, 1: -1})
    acc.append(TP0, 1, None, b"v", None, 1000)
    acc.append(TP1, 1, None, b"v", None, 1000)
    now = time.monotonic() * 1000
    nodes, next_check, unknown = acc.ready(metadata, now)
    assert nodes == set() and 0 < next_check <= 50 and unknown == {"t"}
    nodes, _, _ = acc.ready(metadata, now + 60)
    assert nodes == {5}
    acc.begin_flush()
    nodes, _, _ = acc.ready(metadata, now)
    assert nodes == {5}
    acc.end_flush()


def test_drain_takes_one_batch_per_partition_within_request_size():
    acc = _acc(batch_size=300)
    metadata = _metadata({0: 1, 1: 1})
    for _ in range(6):
        acc.append(TP0, 1, None, b"x" * 100, None, 1000)
        acc.append(TP1, 1, None, b"x" * 100, None, 1000)
    drained = acc.drain(metadata, {1}, 1 << 20, time.monotonic() * 1000)
    assert sorted(b.tp for b in drained[1]) == [TP0, TP1]
    assert len(acc.batches[TP0]) == 2
    # A tight max.request.size admits only the first batch.
    drained = acc.drain(metadata, {1}, 100, time.monotonic() * 1000)
    assert len(drained[1]) == 1


def test_buffer_memory_blocks_then_times_out_and_frees_on_completion():
    acc = _acc(batch_size=1000, buffer_memory=2000)
    metadata = _metadata({0: 1, 1: 1})
    acc.append(TP0, 1, None, b"v", None, 1000)
    acc.append(TP1, 1, None, b"v", None, 1000)
    start = time.monotonic()
    with pytest.raises(errors.KafkaTimeoutError):
        acc.append(TopicPartition("t", 2), 1, None, b"v", None, 50)
    assert time.monotonic() - start >= 0.04

    # Completing a batch releases its memory and wakes a blocked appender.
    done = []

    def blocked():
        done.append(acc.append(TopicPartition("t", 2), 1, None, b"v", None, 5000))

    thread = threading.Thread(target=blocked)
    thread.start()
    time.sleep(0.05)
    assert not done
    batch = acc.drain(metadata, {1}, 1 << 20, time.monotonic() * 1000)[1][0]
    acc.complete(batch, 42, -1, None)
    thread.join(5)
    assert done and done[0][2] is True


def test_futures_resolve_with_offsets_and_callbacks():
    acc = _acc()
    metadata = _metadata({0: 1})
    futures = [acc.append(TP0, 1000 + i, b"k", b"value", None, 1000)[0] for i in range(3)]
    seen = []
    futures[1].add_callback(seen.append)
    batch = acc.drain(metadata, {1}, 1 << 20, time.monotonic() * 1000)[1][0]
    acc.complete(batch, 100, -1, None)
    assert [f.get(1).offset for f in futures] == [100, 101, 102]
    meta = futures[2].get()
    assert (meta.timestamp, meta.serialized_key_size, meta.serialized_value_size) == (1002, 1, 5)
    assert seen == [futures[1].get()]
    late = []
    futures[0].add_callback(late.append)  # already done: runs immediately
    assert late[0].offset == 100


def test_failed_batch_raises_and_calls_errbacks():
    acc = _acc()
    metadata = _metadata({0: 1})
    future = acc.append(TP0, 1, None, b"v", None, 1000)[0]
    failures = []
    future.add_errback(failures.append)
    batch = acc.drain(metadata, {1}, 1 << 20, 0)[1][0]
    acc.complete(batch, -1, -1, errors.for_code(87))
    with pytest.raises(errors.InvalidRecordError):  # noqa
        future.get(1)
    assert failures[0].errno == 87


def test_reenqueue_keeps_sequence_order_and_backoff():
    acc = _acc(retry_backoff_ms=1000)
    metadata = _metadata({0: 1})
    for _ in range(3):
        acc.append(TP0, 1, None, b"x" * 400, None, 1000)
    now = time.monotonic() * 1000
    batches = []
    for seq in range(2):
        batch = acc.drain(metadata, {1}, 1 << 20, now)[1][0]
        batch.seal(1, 0, seq * 10)
        batches.append(batch)
    acc.reenqueue(batches[1], now)
    acc.reenqueue(batches[0], now)
    assert [b.base_sequence for b in list(acc.batches[TP0])[:2]] == [0, 10]
    assert acc.drain(metadata, {1}, 1 << 20, now) == {1: []} or not acc.drain(metadata, {1}, 1 << 20, now).get(1)
    assert acc.drain(metadata, {1}, 1 << 20, now + 1001)[1][0] is batches[0]


def test_split_repoints_futures():
    acc = _acc(batch_size=10000)
    metadata = _metadata({0: 1})
    futures = [acc.append(TP0, 1, None, b"v%d" % i, None, 1000)[0] for i in range(5)]
    batch = acc.drain(metadata, {1}, 1 << 20, 0)[1][0]
    batch.seal()
    acc.split(batch, 0)
    first, second = list(acc.batches[TP0])[:2]
    assert (first.record_count, second.record_count) == (3, 2)
    records = load("records").decode_records(second.seal())
    assert [r[3] for r in records] == [b"v3", b"v4"]
    acc.complete(first, 10, -1, None)
    acc.complete(second, 20, -1, None)
    assert [f.get(1).offset for f in futures] == [10, 11, 12, 20, 21]


def test_expired_batches():
    acc = _acc(delivery_timeout_ms=100)
    acc.append(TP0, 1, None, b"v", None, 1000)
    now = time.monotonic() * 1000
    assert acc.expired(now) == []
    assert len(acc.expired(now + 200)) == 1


def test_open_batches_track_the_appendable_batch_for_fast_send():
    acc = _acc(batch_size=1000)
    metadata = _metadata({0: 1, 1: 1})
    acc.append(TP1, 1, None, b"v", None, 1000)
    first = acc.batches[TP1][0]
    assert acc.open_batches["t"] == [None, first]
    drained = acc.drain(metadata, {1}, 1 << 20, 0)[1][0]
    assert drained is first and first.closed and acc.open_batches["t"] == [None, None]
    acc.append(TP0, 1, None, b"v", None, 1000)
    second = acc.batches[TP0][0]
    assert acc.open_batches["t"][0] is second
    assert acc.expired(1e12) == [second] and second.closed and acc.open_batches["t"][0] is None
    acc.append(TP0, 1, None, b"v", None, 1000)
    third = acc.batches[TP0][0]
    acc.close()
    assert third.closed


def test_callbacks_fire_once_and_are_dropped():
    acc = _acc()
    future = acc.append(TP0, 1, None, b"v", None, 1000)[0]
    seen = []
    future.add_callback(seen.append)
    future.add_errback(seen.append)
    batch = acc.batches[TP0][0]
    assert batch.result.callback_futures == [future]
    acc.complete(batch, 5, -1, None)
    assert [m.offset for m in seen] == [5]
    assert batch.result.callback_futures is None and future._callbacks is None and future._errbacks is None
    future.add_callback(seen.append)  # already done: runs at once
    assert [m.offset for m in seen] == [5, 5]
