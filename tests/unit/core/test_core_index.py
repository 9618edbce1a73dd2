"""kafkapy._core.index and its twin against bisect."""

import bisect
import mmap
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

# (entry_size, key format, value format, key range)
LAYOUTS = {
    8: (">ii", -(1 << 31), (1 << 31) - 1),
    12: (">qi", -(1 << 63), (1 << 63) - 1),
}


def _index_bytes(keys, entry_size, trailing=b""):
    fmt, _, _ = LAYOUTS[entry_size]
    # The value half is garbage on purpose: only the key may matter.
    return b"".join(struct.pack(fmt, key, (key * 7919) & 0x7FFFFFFF) for key in keys) + trailing


def _expected(keys, target):
    return bisect.bisect_right(keys, target) - 1


def _targets(keys, rng, low, high):
    targets = {low, high, keys[0] - 1, keys[0], keys[-1], keys[-1] + 1}
    targets.update(rng.choice(keys) for _ in range(20))
    targets.update(rng.choice(keys) + rng.choice((-1, 1)) for _ in range(20))
    targets.update(rng.randint(keys[0] - 5, keys[-1] + 5) for _ in range(20))
    return [t for t in targets if low <= t <= high]


@PROPERTY
@given(
    entry_size=st.sampled_from([8, 12]),
    # Up to 3000 entries: past the warm section of 1024 (8-byte) / 682 (12-byte).
    count=st.integers(1, 3000) | st.integers(1, 5),
    step_max=st.sampled_from([0, 1, 3, 1000]),
    duplicate_edges=st.booleans(),
    seed=st.integers(0, 1 << 32),
)
def test_agrees_with_bisect(index_mod, entry_size, count, step_max, duplicate_edges, seed):
    rng = random.Random(seed)
    _, low, high = LAYOUTS[entry_size]
    key = rng.randint(low // 2, high // 2)
    keys = []
    for _ in range(count):
        keys.append(key)
        key += rng.randint(0, step_max)  # step 0 gives duplicate keys
    if duplicate_edges:
        keys = [keys[0]] * 3 + keys + [keys[-1]] * 3
    buf = _index_bytes(keys, entry_size, trailing=b"\xff" * rng.randint(0, entry_size * 2))
    for target in _targets(keys, rng, low, high):
        assert index_mod.index_lookup(buf, len(keys), entry_size, target) == _expected(keys, target), target


@PROPERTY
@given(
    entry_size=st.sampled_from([8, 12]),
    keys=st.lists(st.integers(-50, 50), min_size=1, max_size=40).map(sorted),
    entries_cut=st.integers(0, 40),
    target=st.integers(-60, 60),
)
def test_agrees_with_bisect_on_prefix(index_mod, entry_size, keys, entries_cut, target):
    # Only the first ``entries`` entries count, whatever follows them.
    entries = min(entries_cut, len(keys))
    buf = _index_bytes(keys, entry_size)
    assert index_mod.index_lookup(buf, entries, entry_size, target) == _expected(keys[:entries], target)


@pytest.mark.parametrize("entry_size", [8, 12])
def test_warm_section_boundaries(index_mod, entry_size):
    warm = 8192 // entry_size
    keys = list(range(0, 10 * (warm + 5), 10))  # entries = warm + 5
    buf = _index_bytes(keys, entry_size)
    first_warm = len(keys) - 1 - warm
    for slot in (0, first_warm - 1, first_warm, first_warm + 1, len(keys) - 1):
        for delta in (-1, 0, 1):
            target = keys[slot] + delta
            assert index_mod.index_lookup(buf, len(keys), entry_size, target) == _expected(keys, target)


@pytest.mark.parametrize("entry_size", [8, 12])
def test_duplicates_across_warm_boundary(index_mod, entry_size):
    # Equal keys on both sides of the first warm slot: the answer is the last one.
    warm = 8192 // entry_size
    keys = [1] * 10 + [5] * (warm + 10) + [9]
    buf = _index_bytes(keys, entry_size)
    assert index_mod.index_lookup(buf, len(keys), entry_size, 5) == len(keys) - 2
    assert index_mod.index_lookup(buf, len(keys), entry_size, 4) == 9
    assert index_mod.index_lookup(buf, len(keys), entry_size, 0) == -1


def test_empty_and_invalid(index_mod):
    assert index_mod.index_lookup(b"", 0, 8, 5) == -1
    assert index_mod.index_lookup(b"\x00" * 24, 0, 12, 5) == -1
    with pytest.raises(ValueError):
        index_mod.index_lookup(b"\x00" * 16, 3, 8, 0)
    with pytest.raises(ValueError):
        index_mod.index_lookup(b"\x00" * 16, -1, 8, 0)
    with pytest.raises(ValueError):
        index_mod.index_lookup(b"\x00" * 20, 2, 10, 0)
    with pytest.raises(OverflowError):
        index_mod.index_lookup(b"\x00" * 16, 2, 8, 1 << 63)


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "mmap"])
def test_buffer_kinds(index_mod, kind):
    keys = list(range(0, 3000, 3))
    data = _index_bytes(keys, 12)
    if kind == "bytes":
        buf = data
    elif kind == "bytearray":
        buf = bytearray(data)
    elif kind == "memoryview":
        buf = memoryview(data)
    else:
        buf = mmap.mmap(-1, len(data))
        buf[:] = data
    assert index_mod.index_lookup(buf, len(keys), 12, 1501) == 500
    if kind == "mmap":
        buf.close()  # raises BufferError if an export outlived the call


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    buf=st.binary(max_size=200),
    entries=st.integers(-1, 30),
    entry_size=st.sampled_from([8, 12, 4]),
    target=st.integers(-(1 << 63), (1 << 63) - 1),
)
def test_compiled_and_twin_agree_on_garbage(both_index_mods, buf, entries, entry_size, target):
    # Unsorted garbage has no "right" answer, but both must give the same one.
    results = []
    for module in both_index_mods:
        try:
            results.append(module.index_lookup(buf, entries, entry_size, target))
        except ValueError:
            results.append("ValueError")
    assert results[0] == results[1]
