"""murmur2: Kafka's UtilsTest vectors, the partition formula, twin agreement."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.twins import REQUIRE_EXTENSIONS, import_core  # noqa: F401


# org.apache.kafka.common.utils.UtilsTest#testMurmur2
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.fixture(params=["compiled", "twin"])
def murmur2_mod(request):
    return import_core("murmur2", request.param)


@pytest.mark.parametrize("data,expected", KAFKA_VECTORS)
def test_kafka_vectors(murmur2_mod, data, expected):
    assert murmur2_mod.murmur2(data) == expected
    assert murmur2_mod.murmur2(bytearray(data)) == expected
    assert murmur2_mod.murmur2(memoryview(data)) == expected


def test_empty_and_tails(murmur2_mod):
    # Lengths 0..7 exercise every tail branch (0-3 bytes after whole words).
    twin = import_core("murmur2", "twin")
    for n in range(8):
        data = bytes(range(1, n + 1))
        assert murmur2_mod.murmur2(data) == twin.murmur2(data)
    assert -(1 << 31) <= murmur2_mod.murmur2(b"") < (1 << 31)


def test_partition_formula(murmur2_mod):
    # toPositive is a sign-bit mask, not abs(): -790332482 & 0x7fffffff.
    assert murmur2_mod.to_positive(-790332482) == -790332482 & 0x7FFFFFFF
    for data, expected in KAFKA_VECTORS:
        for n in (1, 3, 7, 12):
            assert murmur2_mod.partition_for_key(data, n) == (expected & 0x7FFFFFFF) % n
    with pytest.raises(ValueError):
        murmur2_mod.partition_for_key(b"k", 0)


def test_matches_kafka_python(murmur2_mod):
    kp = pytest.importorskip("kafka.partitioner.default")
    for i in range(200):
        key = b"key-%d" % i * (i % 5 + 1)
        assert murmur2_mod.murmur2(key) & 0x7FFFFFFF == kp.murmur2(key) & 0x7FFFFFFF


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), partitions=st.integers(1, 1000))
def test_twins_agree(data, partitions):
    compiled, twin = import_core("murmur2", "compiled"), import_core("murmur2", "twin")
    assert compiled.murmur2(data) == twin.murmur2(data)
    assert compiled.partition_for_key(data, partitions) == twin.partition_for_key(data, partitions)


@pytest.mark.parametrize("name", ["murmur2", "records"])
def test_compiled_module_loaded_when_required(name):
    import kafkapy._core

    module = kafkapy._core.load(name)
    if os.environ.get("KAFKAPY_REQUIRE_EXTENSIONS", "") != "1":
        pytest.skip("KAFKAPY_REQUIRE_EXTENSIONS is not 1")
    assert module.__name__ == f"kafkapy._core.{name}"
