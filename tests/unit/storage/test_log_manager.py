"""LogManager: meta.properties, load with/without the clean-shutdown marker, checkpoints,
placement, deletion, retention and delayed file removal."""

import logging
import os

import pytest

from kafkapy.storage import checkpoints as cp
from kafkapy.storage.config import LogConfig
from kafkapy.storage.errors import InconsistentClusterId
from kafkapy.storage.log_manager import LogManager
from kafkapy.storage.shared import LocalPartitionState

from support.storage import T0, Clock, append, make_batch, no_fsync, read_all_offsets

TOPIC_ID = bytes(range(16))


def manager(dirs, clock=None, config=None, broker_id=1):
    return LogManager([str(d) for d in dirs], config or LogConfig(segment_bytes=1000, file_delete_delay_ms=5000),
                      broker_id, fsync=no_fsync, clock_ms=clock or Clock())


def test_meta_properties_created_and_checked(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    m = manager([a, b])
    props = cp.read_meta_properties(str(a))
    assert props["broker.id"] == "1" and props["version"] == "0" and props["cluster.id"] == m.cluster_id
    assert cp.read_meta_properties(str(b))["cluster.id"] == m.cluster_id
    assert len(m.cluster_id) == 22
    assert manager([a, b]).cluster_id == m.cluster_id
    with pytest.raises(InconsistentClusterId):
        manager([a], broker_id=2)
    cp.write_meta_properties(str(b), 1, "SomeOtherClusterIdxxxx", fsync=False)
    with pytest.raises(InconsistentClusterId):
        manager([a, b])


def test_new_logs_go_to_the_dir_with_fewest_partitions(tmp_path):
    m = manager([tmp_path / "a", tmp_path / "b"])
    placed = [os.path.basename(os.path.dirname(m.create_log("t", p, None, LocalPartitionState(), TOPIC_ID).dir))
              for p in range(4)]
    assert placed == ["a", "b", "a", "b"]
    assert cp.read_partition_metadata(str(tmp_path / "b" / "t-1")) == TOPIC_ID


def test_shutdown_then_clean_load(tmp_path, caplog):
    clock = Clock()
    m = manager([tmp_path / "a"], clock)
    log = m.create_log("t", 0, None, LocalPartitionState(), TOPIC_ID)
    for i in range(20):
        append(log, make_batch(2, value_size=50))
    with log.lock():
        log.update_high_watermark(30)
    m.shutdown()
    d = tmp_path / "a"
    assert (d / ".kafka_cleanshutdown").exists()
    assert (d / "recovery-point-offset-checkpoint").read_bytes() == b"0\n1\nt 0 40\n"
    assert (d / "replication-offset-checkpoint").read_bytes() == b"0\n1\nt 0 30\n"
    assert (d / "log-start-offset-checkpoint").read_bytes() == b"0\n0\n"

    m2 = manager([d], clock)
    with caplog.at_level(logging.WARNING, logger="kafkapy.storage"):
        logs = m2.load_logs(LocalPartitionState, {"t": LogConfig(segment_bytes=1000)})
    assert not [r for r in caplog.records if "recover" in r.getMessage()]
    log2 = logs[("t", 0)]
    assert (log2.log_end_offset, log2.high_watermark, log2.recovery_point) == (40, 30, 40)
    assert log2.topic_uuid().bytes == TOPIC_ID
    assert not (d / ".kafka_cleanshutdown").exists()     # a crash from now on means recovery
    assert read_all_offsets(log2) == [(i, i + 1) for i in range(0, 40, 2)]


def test_unclean_load_recovers_from_the_recovery_point(tmp_path, caplog):
    clock = Clock()
    d = tmp_path / "a"
    m = manager([d], clock)
    log = m.create_log("t", 0, None, LocalPartitionState(), TOPIC_ID)
    for _ in range(20):
        append(log, make_batch(2, value_size=50))
    m.flush_dirty_logs(clock())          # flushes the rolled segments: recovery point = active base
    m.checkpoint_recovery_points()
    active_base = log.state.active_base_offset
    assert log.recovery_point == active_base > 0
    assert cp.read_offset_checkpoint(str(d / "recovery-point-offset-checkpoint")) == {("t", 0): active_base}
    log.release()                         # crash: no marker
    seg = d / "t-0" / f"{active_base:020d}.log"
    with open(seg, "ab") as f:
        f.write(b"\x00" * 30)             # a torn tail
    m2 = manager([d], clock)
    with caplog.at_level(logging.WARNING, logger="kafkapy.storage"):
        logs = m2.load_logs(LocalPartitionState)
    messages = [r.getMessage() for r in caplog.records]
    assert any("truncated 30 invalid bytes" in msg for msg in messages)
    assert logs[("t", 0)].log_end_offset == 40


def test_delete_log_and_delayed_removal(tmp_path):
    clock = Clock()
    m = manager([tmp_path / "a"], clock)
    log = m.create_log("t", 0, None, LocalPartitionState(), TOPIC_ID)
    append(log, make_batch(1))
    target = m.delete_log("t", 0)
    assert target.endswith("-delete") and os.path.basename(target).startswith("t-0.")
    assert len(os.path.basename(target)) == len("t-0.") + 32 + len("-delete")
    assert not (tmp_path / "a" / "t-0").exists() and os.path.isdir(target)
    m.cleanup(clock())
    assert os.path.isdir(target)
    clock.advance(5000)
    m.cleanup(clock())
    assert not os.path.exists(target)


def test_leftover_delete_dirs_and_deleted_files_are_removed_at_load(tmp_path):
    d = tmp_path / "a"
    m = manager([d])
    log = m.create_log("t", 0, None, LocalPartitionState(), TOPIC_ID)
    append(log, make_batch(1))
    m.shutdown()
    (d / "t-1.0123456789abcdef0123456789abcdef-delete").mkdir()
    (d / "t-0" / "00000000000000000000.log.deleted").write_bytes(b"x")
    (d / "t-0" / "00000000000000000007.index").write_bytes(b"")     # orphan index
    logs = manager([d]).load_logs(LocalPartitionState)
    assert list(logs) == [("t", 0)]
    assert sorted(os.listdir(d / "t-0")) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "00000000000000000001.snapshot", "leader-epoch-checkpoint", "partition.metadata"]
    assert not (d / "t-1.0123456789abcdef0123456789abcdef-delete").exists()


def test_cleanup_applies_retention_and_removes_deleted_segments_after_the_delay(tmp_path):
    clock = Clock()
    config = LogConfig(segment_bytes=300, retention_ms=1000, file_delete_delay_ms=5000)
    m = manager([tmp_path / "a"], clock, config)
    log = m.create_log("t", 0, config, LocalPartitionState(), TOPIC_ID)
    for i in range(6):
        append(log, make_batch(1, timestamp=T0 + i, value_size=150))
    with log.lock():
        log.update_high_watermark(6)
    clock.advance(2000)
    assert m.cleanup(clock()) == 6
    assert log.log_start_offset == 6
    names = os.listdir(tmp_path / "a" / "t-0")
    assert sum(n.endswith(".log.deleted") for n in names) == 6
    clock.advance(4999)
    m.cleanup(clock())
    assert any(n.endswith(".deleted") for n in os.listdir(tmp_path / "a" / "t-0"))
    clock.advance(1)
    m.cleanup(clock())
    assert not any(n.endswith(".deleted") for n in os.listdir(tmp_path / "a" / "t-0"))
    m.checkpoint_log_start_offsets()
    # Kafka only checkpoints a start offset above the first segment's base offset.
    assert cp.read_offset_checkpoint(str(tmp_path / "a" / "log-start-offset-checkpoint")) == {}
    with log.lock():
        log.delete_records(6)
    append(log, make_batch(1))
    with log.lock():
        log.update_high_watermark(7)
        log.delete_records(7)
    m.checkpoint_log_start_offsets()
    assert cp.read_offset_checkpoint(str(tmp_path / "a" / "log-start-offset-checkpoint")) == {("t", 0): 7}


def test_attach_log_shares_the_state(tmp_path):
    m = manager([tmp_path / "a"])
    state = LocalPartitionState()
    created = m.create_log("t", 0, None, state, TOPIC_ID)
    append(created, make_batch(3))
    created.close()
    attached = m.attach_log("t", 0, None, state, TOPIC_ID)
    assert attached is not created and attached.log_end_offset == 3
    assert m.attach_log("t", 0, None, state, TOPIC_ID) is attached
    assert append(attached, make_batch(1)).first_offset == 3


def _create_when_released(dirs, partition, barrier, out):
    m = manager(dirs)
    barrier.wait(10)
    out.put(os.path.basename(os.path.dirname(m.create_log("t", partition, None, LocalPartitionState(),
                                                           TOPIC_ID).dir)))


def test_processes_creating_logs_at_once_still_spread_them(tmp_path):
    """Each process its own LogManager, as the broker's children have (a worker
    handling LeaderAndIsr, a processor attaching a partition a follower
    fetches): eight partitions created at the same moment go four to each dir,
    the choice and the mkdir being one step across processes."""
    import multiprocessing

    dirs = [tmp_path / "a", tmp_path / "b"]
    manager(dirs)  # meta.properties first, once
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(8), ctx.Queue()
    children = [ctx.Process(target=_create_when_released, args=(dirs, p, barrier, out)) for p in range(8)]
    for child in children:
        child.start()
    placed = sorted(out.get(timeout=30) for _ in children)
    for child in children:
        child.join(30)
        assert child.exitcode == 0
    assert placed == ["a"] * 4 + ["b"] * 4
