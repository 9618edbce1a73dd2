"""ReplicaManager: partitions opened lazily on the slot the metadata assigns,
shared through the table between processes (two Brokers on one table stand in
for two handler workers), let go of when their topic goes or is recreated,
and the one way appends reach a partition."""

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import Partition
from kafkapy.server import config as c
from kafkapy.server.broker import Broker
from kafkapy.storage.log_manager import LogManager
from kafkapy.storage.shared import SharedPartitionTable

from support.storage import make_batch, records_of

@pytest.fixture
def two_workers(tmp_path):
    config = c.BrokerConfig.from_props({"log.dirs": str(tmp_path / "logs"), "broker.id": "0",
                                        "listeners": "PLAINTEXT://127.0.0.1:9092"})
    table = SharedPartitionTable(capacity=256, lock_path=str(tmp_path / "locks"))

    def worker():
        return Broker(config, table, LogManager(config.log_dirs, c.log_config_for(config, {}), 0))

    a, b = worker(), worker()
    yield a.replica_manager, b.replica_manager, a
    a.close()
    b.close()
    table.close()


def test_partitions_open_lazily_on_the_metadata_slot(two_workers):
    rm_a, rm_b, broker = two_workers
    broker.admin.create_topic("t", 2)
    assert rm_a.all_partitions == {} and rm_b.all_partitions == {}
    partition = rm_b.get_partition("t", 1)
    assert isinstance(partition, Partition)
    info = broker.metadata().topics["t"]
    assert (partition.slot, partition.topic_id) == (broker.table.slot_for(info.topic_id, 1), info.topic_id)
    assert (partition.leader_id, partition.leader_epoch, partition.isr) == (0, 0, frozenset({0}))
    assert rm_b.get_partition("t", 1) is partition
    assert list(rm_b.all_partitions) == [("t", 1)]
    assert rm_b.get_partition("t", 2) is None and rm_b.get_partition("nope", 0) is None


def test_an_append_in_one_process_is_seen_by_the_other(two_workers):
    rm_a, rm_b, broker = two_workers
    broker.admin.create_topic("t", 1)
    code, result, _ = rm_a.append_records("t", 0, records_of(make_batch(3)), -1)
    assert code == ErrorCode.NONE and result.last_offset == 2
    other = rm_b.get_partition("t", 0)
    assert (other.log_end_offset, other.high_watermark) == (3, 3)
    code, result, _ = rm_b.append_records("t", 0, records_of(make_batch(2)), 1)
    assert result.first_offset == 3
    assert rm_a.get_partition("t", 0).high_watermark == 5
    assert rm_a.append_records("nope", 0, records_of(make_batch(1)))[0] == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_partitions_of_a_deleted_or_recreated_topic_are_let_go(two_workers):
    rm_a, rm_b, broker = two_workers
    broker.admin.create_topic("t", 2)
    rm_b.append_records("t", 0, records_of(make_batch(2)))
    old = rm_b.get_partition("t", 0)
    broker.admin.delete_topic("t")
    assert rm_b.get_partition("t", 0) is None
    assert ("t", 0) not in rm_b.all_partitions
    broker.admin.create_topic("t", 1)
    new = rm_b.get_partition("t", 0)
    assert new is not old and new.topic_id != old.topic_id
    assert (new.log_end_offset, new.high_watermark) == (0, 0)
    assert rm_b.get_partition("t", 1) is None


def test_sync_partitions_opens_every_partition_and_drops_stray_logs(two_workers):
    rm_a, rm_b, broker = two_workers
    broker.admin.create_topic("t", 3)
    broker.admin.create_topic("u", 1)
    rm_b.sync_partitions()
    assert sorted(rm_b.all_partitions) == [("t", 0), ("t", 1), ("t", 2), ("u", 0)]
    assert sorted(rm_b.log_manager.logs) == sorted(rm_b.all_partitions)
    broker.admin.delete_topic("u")
    rm_b.sync_partitions()
    assert sorted(rm_b.log_manager.logs) == [("t", 0), ("t", 1), ("t", 2)]


def test_config_changes_reach_open_partitions(two_workers):
    rm_a, rm_b, broker = two_workers
    broker.admin.create_topic("t", 1, {"min.insync.replicas": "1"})
    partition = rm_b.get_partition("t", 0)
    broker.admin.alter_topic_configs("t", lambda current: {"min.insync.replicas": "2",
                                                           "max.message.bytes": "10"})
    code, _, message = rm_b.append_records("t", 0, records_of(make_batch(1)), -1)
    assert code == ErrorCode.MESSAGE_TOO_LARGE, message
    assert partition.log.config.min_insync_replicas == 2 and partition.log_end_offset == 0
