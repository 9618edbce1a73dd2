"""Partitioning identical to the Java client: murmur2 for keys, sticky for null keys."""

from kafkapy.client.partitioner import CallablePartitioner, DefaultPartitioner, murmur2


def test_keyed_records_use_murmur2_over_all_partitions():
    partitioner = DefaultPartitioner()
    # Java: toPositive(murmur2("foobar")) % 7, even if only partition 0 is available.
    expected = (-790332482 & 0x7FFFFFFF) % 7
    assert partitioner.partition("t", b"foobar", 7, [0]) == expected
    assert murmur2(b"foobar") == -790332482


def test_null_keys_stick_until_a_new_batch():
    partitioner = DefaultPartitioner()
    first = partitioner.partition("t", None, 8, list(range(8)))
    assert all(partitioner.partition("t", None, 8, list(range(8))) == first for _ in range(50))
    partitioner.on_new_batch("t", first, 8, list(range(8)))
    second = partitioner.partition("t", None, 8, list(range(8)))
    assert second != first
    # A stale on_new_batch (another thread already moved on) does not move it again.
    partitioner.on_new_batch("t", first, 8, list(range(8)))
    assert partitioner.partition("t", None, 8, list(range(8))) == second


def test_sticky_prefers_available_partitions():
    partitioner = DefaultPartitioner()
    for _ in range(20):
        part = partitioner.partition("t", None, 5, [3])
        assert part == 3
        partitioner.on_new_batch("t", part, 5, [3])


def test_sticky_is_per_topic_and_spreads():
    partitioner = DefaultPartitioner()
    seen = set()
    for _ in range(200):
        part = partitioner.partition("a", None, 4, [0, 1, 2, 3])
        seen.add(part)
        partitioner.on_new_batch("a", part, 4, [0, 1, 2, 3])
    assert seen == {0, 1, 2, 3}


def test_callable_partitioner_kafka_python_signature():
    calls = []

    def pick(key, all_partitions, available):
        calls.append((key, all_partitions, available))
        return all_partitions[-1]

    assert CallablePartitioner(pick).partition("t", b"k", 3, [0, 1]) == 2
    assert calls == [(b"k", [0, 1, 2], [0, 1])]
