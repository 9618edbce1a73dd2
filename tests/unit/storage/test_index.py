"""OffsetIndex / TimeIndex: Kafka's byte format, preallocation, lookup, trim, sanity checks."""

import os
import struct

import pytest

from kafkapy.storage.errors import CorruptIndexError
from kafkapy.storage.index import OffsetIndex, TimeIndex


def test_offset_index_bytes_are_kafkas(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    index = OffsetIndex(path, 100, 100)
    # Preallocated to segment.index.bytes rounded down to 8-byte entries.
    assert os.path.getsize(path) == 96
    assert index.entries == 0 and index.max_entries == 12
    index.append(105, 0)
    index.append(130, 4200)
    index.append(2**31 - 1 + 100, 9000)
    index.trim_to_valid_size()
    expected = struct.pack(">ii", 5, 0) + struct.pack(">ii", 30, 4200) + struct.pack(">ii", 2**31 - 1, 9000)
    with open(path, "rb") as f:
        assert f.read() == expected
    index.close()
    # Reopened trimmed: every whole entry is valid.
    index = OffsetIndex(path, 100, 100)
    assert index.entries == 3
    assert index.lookup(99) == (100, 0)
    assert index.lookup(104) == (100, 0)
    assert index.lookup(105) == (105, 0)
    assert index.lookup(129) == (105, 0)
    assert index.lookup(131) == (130, 4200)
    assert index.lookup(10**12) == (2**31 - 1 + 100, 9000)
    index.close()


def test_offset_index_rejects_non_increasing_and_full(tmp_path):
    index = OffsetIndex(str(tmp_path / "0.index"), 0, 16)
    index.append(1, 0)
    with pytest.raises(ValueError):
        index.append(1, 10)
    index.append(2, 10)
    assert index.is_full
    with pytest.raises(ValueError):
        index.append(3, 20)
    index.close()


def test_offset_index_truncate_and_resize_keep_entries(tmp_path):
    path = str(tmp_path / "0.index")
    index = OffsetIndex(path, 0, 80)
    for i in range(5):
        index.append(10 * (i + 1), 100 * i)
    index.truncate_to(30)
    assert index.entries == 2 and index.last_offset == 20
    index.trim_to_valid_size()
    assert os.path.getsize(path) == 16
    index.resize(80)
    assert os.path.getsize(path) == 80 and index.entries == 2
    assert index.lookup(25) == (20, 100)
    index.close()


def test_time_index_bytes_and_semantics(tmp_path):
    path = str(tmp_path / "00000000000000000050.timeindex")
    index = TimeIndex(path, 50, 100)
    assert os.path.getsize(path) == 96  # 8 entries of 12 bytes
    assert index.maybe_append(1000, 52)
    assert not index.maybe_append(1000, 53)      # not above the last timestamp
    assert index.maybe_append(1500, 60)
    with pytest.raises(ValueError):
        index.maybe_append(1400, 70)             # timestamps never go back
    with pytest.raises(ValueError):
        index.maybe_append(1600, 55)             # nor offsets
    assert index.lookup(999) == (-1, 50)
    assert index.lookup(1000) == (1000, 52)
    assert index.lookup(1499) == (1000, 52)
    assert index.lookup(10**15) == (1500, 60)
    index.trim_to_valid_size()
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">qi", 1000, 2) + struct.pack(">qi", 1500, 10)
    index.close()


def test_time_index_keeps_one_slot_for_the_roll_entry(tmp_path):
    index = TimeIndex(str(tmp_path / "0.timeindex"), 0, 36)  # 3 entries
    index.maybe_append(1, 1)
    index.maybe_append(2, 2)
    assert index.is_full                          # 2 of 3: the last slot is reserved
    with pytest.raises(ValueError):
        index.maybe_append(3, 3)
    assert index.maybe_append(3, 3, skip_full_check=True)
    assert index.entries == 3
    index.close()


def test_time_index_truncate(tmp_path):
    index = TimeIndex(str(tmp_path / "0.timeindex"), 0, 120)
    for i in range(5):
        index.maybe_append(100 + i, 10 * i)
    index.truncate_to(20)
    assert index.entries == 2 and index.last_entry == (101, 10)
    index.close()


def test_sanity_checks(tmp_path):
    path = str(tmp_path / "00000000000000000010.index")
    with open(path, "wb") as f:
        f.write(struct.pack(">ii", 5, 0) + b"\x00\x00\x00")   # 11 bytes: not whole entries
    index = OffsetIndex(path, 10, 1000)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()
    with open(path, "wb") as f:
        f.write(struct.pack(">ii", -3, 0))                     # offset below the base offset
    index = OffsetIndex(path, 10, 1000)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()
    with open(path, "wb") as f:
        f.write(struct.pack(">ii", 3, 5000))                   # position past the log
    index = OffsetIndex(path, 10, 1000)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(segment_size=4000)
    index.sanity_check(segment_size=6000)
    index.close()
    tpath = str(tmp_path / "00000000000000000010.timeindex")
    with open(tpath, "wb") as f:
        f.write(struct.pack(">qi", 500, 1) + struct.pack(">qi", 400, 2))
    tindex = TimeIndex(tpath, 10, 1000)
    with pytest.raises(CorruptIndexError):
        tindex.sanity_check()
    tindex.close()


def test_index_mapping_is_shared_between_openers(tmp_path):
    path = str(tmp_path / "0.index")
    writer = OffsetIndex(path, 0, 800)
    reader = OffsetIndex(path, 0, 800, entries=0)
    writer.append(7, 70)
    reader.entries = writer.entries                 # the count travels through PartitionState
    assert reader.lookup(8) == (7, 70)
    writer.close()
    reader.close()


@pytest.mark.parametrize("kind", ["offset", "time"])
def test_entries_across_pages_from_two_openers_stay_intact(tmp_path, kind):
    """Entries are stored through the mapping after the page they start (or
    cross into) was given real blocks by a pwrite of zeros past the last valid
    entry. Two openers of one file (two workers) alternate across several
    pages: nothing either wrote may be zeroed by the other, and the bytes are
    Kafka's."""
    import mmap

    cls, size = (OffsetIndex, 8) if kind == "offset" else (TimeIndex, 12)
    path = str(tmp_path / f"0.{kind}")
    max_bytes = 4 * mmap.PAGESIZE
    a = cls(path, 100, max_bytes)
    b = cls(path, 100, max_bytes, entries=0)
    n = (3 * mmap.PAGESIZE) // size + 5  # into the fourth page, crossing three boundaries
    owners = [a, b]
    for i in range(n):
        writer = owners[(i // 37) % 2]  # runs of 37, so writers change inside pages
        writer.entries = i  # the count travels through PartitionState
        if kind == "offset":
            writer.append(100 + i, i * 10)
        else:
            assert writer.maybe_append(1_000 + i, 100 + i)
    for index in owners:
        index.close()
    raw = open(path, "rb").read()
    entries = [struct.unpack_from(">ii" if kind == "offset" else ">qi", raw, i * size) for i in range(n)]
    if kind == "offset":
        assert entries == [(i, i * 10) for i in range(n)]
    else:
        assert entries == [(1_000 + i, i) for i in range(n)]
