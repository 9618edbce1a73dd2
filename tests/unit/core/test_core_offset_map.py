"""The log cleaner's offset map (Kafka's SkimpyOffsetMap): both twins give the
same answers, hold ``capacity`` distinct keys at 24 bytes a slot, and refuse
one more."""

import hashlib

import pytest
from support.twins import REQUIRE_EXTENSIONS, import_core  # noqa: F401


@pytest.fixture(params=["compiled", "twin"])
def offset_map_mod(request):
    return import_core("offset_map", request.param)


def _digest(n: int) -> bytes:
    return hashlib.md5(b"key-%d" % n, usedforsecurity=False).digest()


def test_put_get_overwrite(offset_map_mod):
    m = offset_map_mod.OffsetMap(1 << 20, 0.9)
    assert len(m) == 0 and m.get(_digest(1)) == -1
    m.put(_digest(1), 5)
    m.put(_digest(2), 7)
    m.put(_digest(1), 2**40 + 3)  # the last offset seen wins, not a new key
    assert len(m) == 2
    assert m.get(_digest(1)) == 2**40 + 3 and m.get(_digest(2)) == 7 and m.get(_digest(3)) == -1
    with pytest.raises(ValueError):
        m.put(b"short", 1)


def test_capacity_is_the_memory_at_24_bytes_a_slot_times_the_load_factor(offset_map_mod):
    m = offset_map_mod.OffsetMap(40 * 24, 0.5)
    assert m.capacity == 20
    for n in range(20):
        m.put(_digest(n), n)
    m.put(_digest(3), 99)  # a key it holds may still move on
    with pytest.raises(OverflowError):
        m.put(_digest(20), 20)
    assert len(m) == 20 and m.get(_digest(3)) == 99 and m.get(_digest(20)) == -1
    assert offset_map_mod.OffsetMap(128 * 2**20, 0.9).capacity == int(128 * 2**20 // 24 * 0.9)


def test_a_full_table_answers_absent_keys(offset_map_mod):
    """Load factor 1: every slot used; a key not in it is answered -1 (the
    probe ends after one round of the table) and cannot be added."""
    m = offset_map_mod.OffsetMap(8 * 24, 1.0)
    for n in range(8):
        m.put(_digest(n), n)
    assert [m.get(_digest(n)) for n in range(8)] == list(range(8))
    assert m.get(_digest(100)) == -1
    with pytest.raises(OverflowError):
        m.put(_digest(100), 1)


def test_growing_keeps_every_key(offset_map_mod):
    """The compiled table starts small and doubles: 50,000 keys in 16 MiB."""
    m = offset_map_mod.OffsetMap(16 * 2**20, 0.9)
    for n in range(50_000):
        m.put(_digest(n), n * 3)
    for n in range(0, 50_000, 7):
        m.put(_digest(n), n * 3 + 1)
    assert len(m) == 50_000
    assert all(m.get(_digest(n)) == n * 3 + (n % 7 == 0) for n in range(50_000))
    assert m.get(_digest(50_000)) == -1
