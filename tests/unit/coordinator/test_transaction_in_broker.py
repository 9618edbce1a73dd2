"""The transaction coordinator over a real standalone broker view (the Broker
object a coordinator process builds: metadata store, admin, replica manager,
producer-id manager on a shared table), with its real store and marker
writer: __transaction_state created with Kafka's configs and written with
Kafka's records, markers appended to the data partitions' logs, and a new
coordinator loading what the first one wrote."""

import pytest

from kafkapy.coordinator.transaction.coordinator import TransactionCoordinatorState
from kafkapy.coordinator.transaction.marker_channel import LocalMarkerWriter, TransactionMarkerChannel
from kafkapy.coordinator.transaction.metadata import TransactionState as S
from kafkapy.protocol.transaction_log import TRANSACTION_STATE_TOPIC, decode_key, decode_value
from kafkapy.coordinator.transaction.state_store import TransactionStateStore
from kafkapy.coordinator.transaction.transaction_coordinator import TransactionCoordinator, txn_config
from kafkapy._core.records_py import build_batch
from kafkapy.server import config as c
from kafkapy.server.broker import Broker
from kafkapy.server.config import BrokerConfig
from kafkapy.storage.log_manager import LogManager
from kafkapy.storage.shared import SharedPartitionTable
from kafkapy.storage.transaction_index import AbortedTxn


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig.from_props({
        "log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:9092", "broker.id": "0",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.num.partitions": "5"})
    table = SharedPartitionTable(capacity=64, lock_path=str(tmp_path / "locks"))
    b = Broker(config, table, LogManager(config.log_dirs, c.log_config_for(config, {}), 0))
    yield b
    b.close()
    table.close()


def coordinator(broker, clock=lambda: 1_000_000):
    config = broker.config
    state = TransactionCoordinatorState(txn_config(config), broker.producer_id_manager.generate_producer_id,
                                        clock)
    return TransactionCoordinator(state, TransactionStateStore(broker, config),
                                  TransactionMarkerChannel(LocalMarkerWriter(broker)))


def call(method, *args):
    answers = []
    method(*args, answers.append)
    [answer] = answers
    return answer


def produce_transactional(broker, topic, p, pid, epoch, seq):
    """A transactional batch on the leader's log (Produce refuses them until it is wired)."""
    log = broker.replica_manager.get_partition(topic, p).log
    with log.lock():
        data = build_batch([(b"k", b"v", [], 1)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           is_transactional=True, base_offset=log.log_end_offset)
        log.append_as_follower(memoryview(bytearray(data)))
        log.update_high_watermark(log.log_end_offset)


def test_a_transaction_through_the_broker_and_a_reload(broker):
    txn = coordinator(broker)
    assert txn.store.ensure() == 0
    info = broker.metadata().topics[TRANSACTION_STATE_TOPIC]
    assert info.num_partitions == 5
    assert info.configs["cleanup.policy"] == "compact" and info.configs["min.insync.replicas"] == "2"
    for p in range(5):
        txn.load(p, 0)
    broker.admin.create_topic("out", 2, {})

    first = call(txn.init_producer_id, "t1", 60000, -1, -1)
    assert first.error_code == 0 and first.producer_epoch == 0
    pid = first.producer_id
    assert call(txn.add_partitions, "t1", pid, 0, [("out", 0), ("out", 1)]).error_code == 0
    produce_transactional(broker, "out", 0, pid, 0, 0)
    produce_transactional(broker, "out", 1, pid, 0, 0)
    out0 = broker.replica_manager.get_partition("out", 0).log
    with out0.lock():
        assert out0.last_stable_offset() == 0
    assert call(txn.end_txn, "t1", pid, 0, False).error_code == 0
    for p in (0, 1):
        log = broker.replica_manager.get_partition("out", p).log
        with log.lock():
            assert log.log_end_offset == 2 and log.last_stable_offset() == 2
            assert log.collect_aborted_transactions(0, 2) == [AbortedTxn(pid, 0, 1, 2)]

    records = [(p, decode_key(k), decode_value(v)) for item in txn.store.replay() if item is not None
               for p, k, v in (item,)]
    assert [(r[1], S(r[2].status)) for r in records] == [
        ("t1", S.EMPTY), ("t1", S.ONGOING), ("t1", S.PREPARE_ABORT), ("t1", S.COMPLETE_ABORT)]
    assert {r[0] for r in records} == {txn.state.partition_for("t1")}

    # Another coordinator (a restart, or a new leader of the partition) loads it.
    again = coordinator(broker)
    for p in range(5):
        again.load(p, 1)
    metadata = again.state.get("t1")
    assert (metadata.producer_id, metadata.producer_epoch, metadata.state) == (pid, 0, S.COMPLETE_ABORT)
    # The producer restarts with the same id: its epoch is bumped from the loaded state.
    assert call(again.init_producer_id, "t1", 60000, -1, -1).producer_epoch == 1
