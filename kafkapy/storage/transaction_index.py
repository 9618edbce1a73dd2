"""The aborted-transaction index of a segment: ``%020d.txnindex`` (Kafka's TransactionIndex).

One 34-byte entry per transaction aborted by a marker in the segment, in
marker order, big-endian (Kafka's AbortedTxn)::

    version              int16   0
    producer_id          int64
    first_offset         int64   the transaction's first offset in this partition
    last_offset          int64   the ABORT marker's offset
    last_stable_offset   int64   the LSO right after the marker

A read_committed fetch from offset F whose data ends before offset U needs the
entries with ``last_offset >= F`` and ``first_offset < U`` from the segment
holding F and the later ones, up to the first entry whose
``last_stable_offset >= U`` (past it, no transaction overlapping [F, U) can
still be open).

Ownership: written by ``Log`` under the partition's slot lock (leader marker
appends, follower appends, recovery, truncation), read by any process under
it. The file is not preallocated or mapped: it is appended with
``O_APPEND`` and read whole (one entry per aborted transaction is small), so
every process sees the same bytes without shared counters. A torn last entry
(crash mid-write) is ignored on read and removed when the segment is
recovered. A segment without the file has no aborted transactions.
"""

from __future__ import annotations

import os
import struct
from collections import namedtuple

from kafkapy.storage.errors import CorruptIndexError
from kafkapy.storage.segment import TXN_INDEX_SUFFIX, segment_file_name

__all__ = ["AbortedTxn", "TransactionIndex", "TXN_INDEX_SUFFIX", "ENTRY_SIZE", "encode_entry", "decode_entries"]

ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34

AbortedTxn = namedtuple("AbortedTxn", ("producer_id", "first_offset", "last_offset", "last_stable_offset"))


def encode_entry(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(ABORTED_TXN_VERSION, *txn)


def decode_entries(data) -> list[AbortedTxn]:
    """Every whole entry of ``data`` (a torn tail is ignored)."""
    whole = len(data) - len(data) % ENTRY_SIZE
    out = []
    for version, *fields in _ENTRY.iter_unpack(memoryview(data)[:whole]):
        if version != ABORTED_TXN_VERSION:
            raise CorruptIndexError(f"aborted transaction entry version {version}, expected {ABORTED_TXN_VERSION}")
        out.append(AbortedTxn(*fields))
    return out


def txn_index_path(dir_path: str, base_offset: int) -> str:
    return os.path.join(dir_path, segment_file_name(base_offset, TXN_INDEX_SUFFIX))


class TransactionIndex:
    """A view of one segment's ``.txnindex`` (cheap: no descriptor kept)."""

    __slots__ = ("path", "start_offset")

    def __init__(self, dir_path: str, base_offset: int):
        self.path = txn_index_path(dir_path, base_offset)
        self.start_offset = base_offset

    def entries(self) -> list[AbortedTxn]:
        try:
            with open(self.path, "rb") as f:
                return decode_entries(f.read())
        except FileNotFoundError:
            return []

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; its last offset must not be below the last entry's
        (Kafka's check: markers are appended in offset order)."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            size = 0
        if size % ENTRY_SIZE:
            # A torn entry from a crash: drop it before appending after it.
            os.truncate(self.path, size - size % ENTRY_SIZE)
            size -= size % ENTRY_SIZE
        if size:
            with open(self.path, "rb") as f:
                f.seek(size - ENTRY_SIZE)
                last = decode_entries(f.read(ENTRY_SIZE))[0]
            if txn.last_offset < last.last_offset:
                raise ValueError(f"{self.path}: aborted transaction ending at {txn.last_offset} after one "
                                 f"ending at {last.last_offset}")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, encode_entry(txn))
        finally:
            os.close(fd)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int):
        """(entries overlapping [fetch_offset, upper_bound_offset), complete):
        ``complete`` when an entry's last stable offset reached the bound."""
        found = []
        for txn in self.entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset``."""
        entries = self.entries()
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) == len(entries):
            return
        if not keep:
            self.delete()
            return
        os.truncate(self.path, len(keep) * ENTRY_SIZE)

    def sanity_check(self) -> None:
        """Kafka's check: no entry ends before the segment starts."""
        for txn in self.entries():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(f"{self.path}: aborted transaction {txn} ends before the segment's "
                                        f"start offset {self.start_offset}")

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
