"""Two processes, one partition: a forked child appends through its own Log object
on a SharedPartitionTable slot; index entries and offsets are visible to the parent."""

import multiprocessing

from kafkapy.storage.config import LogConfig
from kafkapy.storage.shared import SharedPartitionTable

from support.storage import append, make_batch, open_log, read_all_offsets, read_bytes, whole_batches

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=100)


def _child(path, table, slot, rounds, out):
    log = open_log(path, CONFIG, state=table.slot(slot))
    firsts = [append(log, make_batch(2, value_size=40, tag=b"child")).first_offset for _ in range(rounds)]
    log.release()
    out.put(firsts)


def test_forked_worker_appends_are_visible(tmp_path):
    table = SharedPartitionTable(capacity=4, lock_path=str(tmp_path / "locks"))
    slot = table.allocate()
    path = str(tmp_path / "t-0")
    log = open_log(path, CONFIG, state=table.slot(slot))
    for _ in range(10):
        append(log, make_batch(2, value_size=40, tag=b"parent"))
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child, args=(path, table, slot, 30, out))
    child.start()
    parent_firsts = [append(log, make_batch(2, value_size=40, tag=b"parent")).first_offset for _ in range(30)]
    child_firsts = out.get(timeout=30)
    child.join(30)
    assert child.exitcode == 0
    firsts = sorted(parent_firsts + child_firsts)
    assert firsts == list(range(20, 140, 2))            # never an offset twice
    assert read_all_offsets(log) == [(i, i + 1) for i in range(0, 140, 2)]
    assert len(log.segments()) > 3                      # rolls happened in both processes
    for offset in child_firsts[::7]:
        data = read_bytes(log, offset + 1)
        assert whole_batches(data)[0].base_offset == offset
        assert b"child" in data[:200]
    log.close()
    table.close() if hasattr(table, "close") else None
