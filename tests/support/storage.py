"""Helpers for the storage tests: batch builders, a log opener with an injected clock."""

import os

from kafkapy._core import load
from kafkapy._core.records_py import build_batch
from kafkapy.storage.config import LogConfig
from kafkapy.storage.log import Log
from kafkapy.storage.shared import LocalPartitionState

batch = load("batch")

T0 = 1_700_000_000_000


def no_fsync(fd):
    """Tests that do not test durability skip fsync (it dominates their run time)."""


class Clock:
    def __init__(self, now_ms=T0):
        self.now_ms = now_ms

    def __call__(self):
        return self.now_ms

    def advance(self, ms):
        self.now_ms += ms


def make_batch(n=1, timestamp=T0, value_size=10, producer_id=-1, producer_epoch=-1, base_sequence=-1,
               tag=b"", **kw) -> bytes:
    records = [(b"k%d" % i, (tag + b"v%d-" % i).ljust(value_size, b"x"), [], timestamp + i) for i in range(n)]
    return build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence, **kw)


def records_of(*batches) -> memoryview:
    return memoryview(bytearray(b"".join(batches)))


def open_log(path, config=None, state=None, clock=None, topic_id=None, **kw) -> Log:
    kw.setdefault("fsync", no_fsync)
    return Log.open(str(path), "t", 0, config or LogConfig(), state if state is not None else LocalPartitionState(),
                    topic_id, clock or Clock(), **kw)


def append(log, *batches, epoch=0):
    with log.lock():
        return log.append_as_leader(records_of(*batches), epoch)


def read_bytes(log, fetch_offset, max_bytes=1 << 20, max_offset=None, min_one_batch=True) -> bytes:
    with log.lock():
        data = log.read(fetch_offset, max_bytes, max_offset, min_one_batch)
    out = b""
    for region in data.regions:
        fd = os.open(region.path, os.O_RDONLY)
        try:
            assert os.fstat(fd).st_ino == region.inode
            out += os.pread(fd, region.length, region.position)
        finally:
            os.close(fd)
    assert len(out) == data.size
    return out


def whole_batches(data: bytes, verify_crc=True):
    """Headers of the whole batches in ``data`` (a trailing partial batch is dropped, as clients do)."""
    headers, _, _ = batch.scan_batches(data, 0, -1, verify_crc, -1)
    return headers


def read_all_offsets(log, start=None):
    """Every (base_offset, last_offset) from ``start`` to the log end, by repeated fetches."""
    with log.lock():
        offset = log.log_start_offset if start is None else start
        end = log.log_end_offset
    seen = []
    guard = 0
    while offset < end:
        guard += 1
        assert guard < 100000
        headers = whole_batches(read_bytes(log, offset, 1 << 16))
        assert headers, f"no batch at {offset}"
        for h in headers:
            seen.append((h.base_offset, h.base_offset + h.last_offset_delta))
            offset = h.base_offset + h.last_offset_delta + 1
    return seen
