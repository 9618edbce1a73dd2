"""Partition: appends as leader move the log end offset and the high watermark
(the smallest log end offset over the ISR), acks=-1 is refused before writing
when the ISR is below min.insync.replicas, and every read stops at the high
watermark. Real logs in temporary dirs on a real shared table."""

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import NOTHING_READ, Partition
from kafkapy.storage.config import LogConfig

from support.storage import T0, make_batch, open_log, records_of

BROKER = 0


@pytest.fixture
def make_partition(tmp_path, table):
    opened = []

    def make(config=None, name="t-0"):
        slot = table.allocate()
        log = open_log(tmp_path / name, config=config, state=table.slot(slot))
        partition = Partition("t", 0, None, log, slot, BROKER)
        opened.append(log)
        return partition

    yield make
    for log in opened:
        log.close()


def _append(partition, n=1, acks=1, **kw):
    return partition.append_records_to_leader(records_of(make_batch(n, **kw)), acks)


def test_append_moves_the_log_end_offset_and_the_high_watermark(make_partition, table):
    partition = make_partition()
    code, result, message = _append(partition, 3)
    assert (code, message) == (ErrorCode.NONE, None)
    assert (result.first_offset, result.last_offset) == (0, 2)
    assert (partition.log_end_offset, partition.high_watermark) == (3, 3)
    # Other processes see it in the shared slot.
    assert table.slot(partition.slot).high_watermark == 3
    _append(partition, 2)
    assert (partition.log_end_offset, partition.high_watermark) == (5, 5)


def test_high_watermark_is_the_smallest_log_end_offset_over_the_isr(make_partition):
    partition = make_partition()
    partition.remote_log_end_offsets[1] = 2
    partition.make_leader(1, (BROKER, 1))
    _append(partition, 5)
    assert (partition.log_end_offset, partition.high_watermark) == (5, 2)
    # Reads stop at the high watermark: the one batch (offsets 0-4) is not committed whole.
    data, high_watermark, _start = partition.fetch_records(0, 1 << 20, True)
    assert (data.size, high_watermark) == (0, 2)
    assert partition.fetch_offset_for_timestamp(-1) == (2, -1)
    assert partition.delete_records_on_leader(4) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    # The follower catches up: the high watermark follows.
    partition.remote_log_end_offsets[1] = 5
    partition._update_high_watermark_limit()
    with partition.lock():
        assert partition.maybe_increment_high_watermark()
    assert partition.high_watermark == 5
    with partition.lock():
        assert not partition.maybe_increment_high_watermark()


def test_reads_stop_at_the_high_watermark(make_partition):
    partition = make_partition()
    partition.remote_log_end_offsets[1] = 0
    partition.make_leader(1, (BROKER, 1))
    for _ in range(4):
        _append(partition, 1)
    assert (partition.log_end_offset, partition.high_watermark) == (4, 0)
    data, high_watermark, start = partition.fetch_records(0, 1 << 20, True)
    assert (data.size, high_watermark, start) == (0, 0, 0)
    partition.remote_log_end_offsets[1] = 2
    partition._update_high_watermark_limit()
    with partition.lock():
        partition.maybe_increment_high_watermark()
    one_batch = len(make_batch(1))
    data, high_watermark, _ = partition.fetch_records(0, 1 << 20, True)
    assert (data.size, high_watermark) == (2 * one_batch, 2)


def test_acks_all_refused_below_min_insync_replicas_before_writing(make_partition):
    partition = make_partition(LogConfig(min_insync_replicas=2))
    # Kafka 3.9's effective min ISR is capped at the replica count: this
    # broker alone is enough while it is the only replica.
    assert _append(partition, 1, acks=-1)[0] == ErrorCode.NONE
    partition.make_leader(1, (BROKER,), replicas=(BROKER, BROKER + 1), partition_epoch=1)
    code, result, message = _append(partition, 1, acks=-1)
    assert (code, result) == (ErrorCode.NOT_ENOUGH_REPLICAS, None)
    assert message == (f"The size of the current ISR Set({BROKER}) is insufficient to satisfy the min.isr "
                       "requirement of 2 for partition t-0")
    assert partition.log_end_offset == 1
    # acks=1 does not ask for the ISR.
    assert _append(partition, 1, acks=1)[0] == ErrorCode.NONE
    assert partition.log_end_offset == 2


def test_rejected_append_writes_nothing(make_partition):
    partition = make_partition()
    _append(partition, 2)
    bad = bytearray(make_batch(1))
    bad[-1] ^= 1
    code, result, message = partition.append_records_to_leader(memoryview(bad), 1)
    assert code == ErrorCode.CORRUPT_MESSAGE and result is None and message
    assert (partition.log_end_offset, partition.high_watermark) == (2, 2)
    assert partition.append_records_to_leader(memoryview(bytearray()), 1)[0] == ErrorCode.CORRUPT_MESSAGE


def test_duplicate_idempotent_batch_gets_its_first_offsets(make_partition):
    partition = make_partition()
    _append(partition, 2)
    batch = make_batch(3, producer_id=7, producer_epoch=0, base_sequence=0)
    first = partition.append_records_to_leader(records_of(batch), -1)
    again = partition.append_records_to_leader(records_of(batch), -1)
    assert first[0] == again[0] == ErrorCode.NONE
    assert (again[1].first_offset, again[1].last_offset) == (2, 4) and again[1].duplicate
    assert (partition.log_end_offset, partition.high_watermark) == (5, 5)
    assert [e.producer_id for e in partition.active_producers()] == [7]


def test_caught_up_fetch_and_out_of_range(make_partition):
    partition = make_partition()
    _append(partition, 3)
    assert partition.fetch_records(3, 100, True) == (NOTHING_READ, 3, 0)
    assert partition.fetch_records(4, 100, True) == (None, 3, 0)
    assert partition.delete_records_on_leader(-1) == (ErrorCode.NONE, 3)
    assert partition.fetch_records(1, 100, True) == (None, 3, 3)
    assert partition.fetch_offset_for_timestamp(-2) == (3, -1)


def test_list_offsets_by_timestamp_below_the_high_watermark(make_partition):
    partition = make_partition()
    _append(partition, 2, timestamp=T0)
    _append(partition, 2, timestamp=T0 + 1000)
    assert partition.fetch_offset_for_timestamp(T0 + 500) == (2, T0 + 1000)
    assert partition.fetch_offset_for_timestamp(T0 + 5000) == (-1, -1)
    assert partition.fetch_offset_for_timestamp(-3) == (3, T0 + 1001)
    assert partition.fetch_offset_for_timestamp(-4) == (-1, -1)


def test_make_leader_commits_the_whole_log_when_the_isr_is_this_broker(tmp_path, table):
    slot = table.allocate()
    log = open_log(tmp_path / "t-0", state=table.slot(slot))
    with log.lock():
        log.append_as_leader(records_of(make_batch(4)), 0)  # storage alone never moves it
    assert (log.log_end_offset, log.high_watermark) == (4, 0)
    partition = Partition("t", 0, None, log, slot, BROKER)
    partition.make_leader(3, (BROKER,))
    assert (partition.high_watermark, partition.leader_epoch) == (4, 3)
    assert log.leader_epoch_entries()[-1] == (3, 4)
    log.close()
