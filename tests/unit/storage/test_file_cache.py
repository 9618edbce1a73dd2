"""The per-process open-file LRU: logs stay correct when their files are
closed under them, and the descriptors held stay bounded."""

import os

import pytest

from kafkapy.storage import file_cache
from kafkapy.storage.config import LogConfig
from kafkapy.storage.log_manager import LogManager
from kafkapy.storage.shared import LocalPartitionState

from support.storage import make_batch


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def small_cache():
    cache = file_cache.FILE_CACHE
    saved = cache.max_open
    cache.resize(8)
    yield cache
    cache.resize(saved)


def test_lru_evicts_oldest_and_keeps_the_newest():
    evicted = []

    class Holder:
        def __init__(self, name):
            self.name = name

        def _evict(self):
            evicted.append(self.name)

    cache = file_cache.OpenFileCache(2)
    a, b, c = Holder("a"), Holder("b"), Holder("c")
    cache.opened(a)
    cache.opened(b)
    cache.touch(a)
    cache.opened(c)
    assert evicted == ["b"]
    cache.forget(a)
    cache.close_all()
    assert evicted == ["b", "c"]


def test_many_partitions_hold_bounded_descriptors(tmp_path, small_cache):
    manager = LogManager([str(tmp_path)], LogConfig(index_interval_bytes=64), 0, fsync=lambda fd: None)
    before = _fds()
    logs = manager.create_logs("t", ((p, LocalPartitionState()) for p in range(40)), None, b"\x01" * 16)
    for round_ in range(3):
        for lg in logs:
            with lg.lock():
                lg.append_as_leader(memoryview(bytearray(make_batch(2))), 0)
        # Cache entries are 1 descriptor each; nothing else stays open per partition.
        assert _fds() - before <= small_cache.max_open + 2
    assert small_cache.evictions > 0
    for lg in logs:
        with lg.lock():
            assert lg.log_end_offset == 6
            data = lg.read(2, 1 << 20)
            assert data.size > 0
            assert [h.base_offset for h in lg.read_batch_headers(0)] == [0, 2, 4]
            assert lg.offset_for_timestamp(-1) == (6, -1)
    manager.shutdown()
    assert _fds() - before <= 2


def test_reload_after_clean_shutdown_reads_evicted_logs(tmp_path, small_cache):
    config = LogConfig(index_interval_bytes=64)
    manager = LogManager([str(tmp_path)], config, 0, fsync=lambda fd: None)
    logs = manager.create_logs("t", ((p, LocalPartitionState()) for p in range(20)), None, b"\x02" * 16)
    for lg in logs:
        with lg.lock():
            for _ in range(5):
                lg.append_as_leader(memoryview(bytearray(make_batch(3))), 0)
    manager.shutdown()
    again = LogManager([str(tmp_path)], config, 0, fsync=lambda fd: None)
    loaded = again.load_logs(LocalPartitionState)
    assert len(loaded) == 20
    for lg in loaded.values():
        with lg.lock():
            assert lg.log_end_offset == 15
            assert [h.base_offset for h in lg.read_batch_headers(0)] == [0, 3, 6, 9, 12]
    again.shutdown()
