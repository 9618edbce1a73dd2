"""Plain-Python twin of ``kafkapy._core.index``: search in an index buffer.

An index is ``entries`` fixed-size entries with ascending keys:

* offset index, 8 bytes: relative offset i32, position i32 (key: offset);
* time index, 12 bytes: timestamp i64, relative offset i32 (key: timestamp).

``index_lookup`` returns the largest slot whose key is ``<= target``, or -1.
The buffer is usually an ``mmap`` of the index file owned by the storage
layer; this module keeps no reference to it after returning.
"""

import struct

# Kafka's AbstractIndex "warm section".  Lookups come overwhelmingly from the
# tail of the index: appends, followers and consumers that are caught up.  A
# plain binary search over an N-entry index touches about log2(N) pages spread
# across the whole file, so after the OS drops cold pages a tailing lookup can
# fault on pages at 1/2, 1/4, 1/8 ... of the file.  Searching the last 8192
# bytes first keeps those lookups on at most 3 pages of 4 KiB (2 if aligned),
# pages that every append touches anyway.  8192 bytes is 1024 offset entries
# or 682 time entries; with the default index.interval.bytes of 4096 that
# covers about 4 MiB (offset) / 2.7 MiB (time) of log, which is more than a
# caught-up follower or consumer lags by.
WARM_SECTION_BYTES = 8192

_KEY = {8: struct.Struct(">i"), 12: struct.Struct(">q")}

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def index_lookup(buf, entries, entry_size, target):
    """Largest slot in ``[0, entries)`` whose key is ``<= target``, else -1."""
    key_struct = _KEY.get(entry_size)
    if key_struct is None:
        raise ValueError(f"entry_size must be 8 or 12, not {entry_size}")
    if entries < 0 or entries * entry_size > len(buf):
        raise ValueError(f"{entries} entries of {entry_size} bytes do not fit {len(buf)} bytes")
    if not _INT64_MIN <= target <= _INT64_MAX:
        # The compiled twin takes target as an int64.
        raise OverflowError(f"target {target} is not an int64")
    if entries == 0:
        return -1
    unpack_key = key_struct.unpack_from

    def key(slot):
        return unpack_key(buf, slot * entry_size)[0]

    first_warm = max(0, entries - 1 - WARM_SECTION_BYTES // entry_size)
    # Kafka compares with "<" and returns on the first equal key; keys may
    # repeat here (a time index written by other brokers can), so "<=" and no
    # early return make the answer the *largest* matching slot.
    if key(first_warm) <= target:
        low, high = first_warm, entries - 1
    else:
        if key(0) > target:
            return -1
        low, high = 0, first_warm - 1
    # Invariant: key(low) <= target, and every slot above high has key > target.
    while low < high:
        middle = (low + high + 1) >> 1
        if key(middle) <= target:
            low = middle
        else:
            high = middle - 1
    return low
