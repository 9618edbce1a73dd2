"""ListOffsets' leader_epoch (v4+) as Kafka 3.9 answers it: LATEST carries
the partition's leader epoch, every other lookup (a timestamp,
MAX_TIMESTAMP, EARLIEST) the epoch of the batch holding the offset found
(FileRecords.searchForTimestamp's ``batch.partitionLeaderEpoch``), -1 when
nothing is found. A real partition whose batches were written under leader
epochs 0 and 3, led now at epoch 5, through the real handler."""

from types import SimpleNamespace

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.entities import construct
from kafkapy.replication.partition import Partition
from kafkapy.server.handlers import RequestContext
from kafkapy.server.handlers import list_offsets

from support.storage import T0, make_batch, open_log, records_of

BROKER = 0


def test_lookups_answer_the_found_batchs_epoch_and_latest_the_partitions(tmp_path, table):
    slot = table.allocate()
    log = open_log(tmp_path / "t-0", state=table.slot(slot))
    partition = Partition("t", 0, None, log, slot, BROKER)
    try:
        partition.make_leader(0, (BROKER,))
        partition.append_records_to_leader(records_of(make_batch(2, timestamp=T0)), 1)          # offsets 0-1
        partition.make_leader(3, (BROKER,))
        partition.append_records_to_leader(records_of(make_batch(2, timestamp=T0 + 1000)), 1)   # offsets 2-3
        partition.make_leader(5, (BROKER,))
        broker = SimpleNamespace(authorizer=None, replica_manager=SimpleNamespace(
            get_partition=lambda t, p: partition if (t, p) == ("t", 0) else None))
        version = 7
        ctx = RequestContext(broker, 2, version, 1, "test", 0)

        def lookup(timestamp, isolation_level=0):
            request = construct(API_TABLE[2].request_class(version), {
                "replica_id": -1, "isolation_level": isolation_level, "topics": [{"name": "t", "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
            (p,) = list_offsets.handle(ctx, request).topics[0].partitions
            assert p.error_code == 0
            return p.offset, p.leader_epoch

        assert lookup(T0 - 1) == (0, 0)            # a timestamp found in the epoch-0 batch
        assert lookup(T0 + 500) == (2, 3)          # ... in the epoch-3 batch
        assert lookup(T0 + 500, 1) == (2, 3)       # read_committed: the same batch
        assert lookup(T0 + 9000) == (-1, -1)       # none: no epoch
        assert lookup(-3) == (3, 3)                # MAX_TIMESTAMP: its batch's epoch
        assert lookup(-2) == (0, 0)                # EARLIEST: the first batch's
        assert lookup(-1) == (4, 5)                # LATEST: the partition's leader epoch
        assert lookup(-1, 1) == (4, 5)
    finally:
        log.close()
