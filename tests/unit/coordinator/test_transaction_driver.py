"""The transaction coordinator's I/O half (decisions run against a store and a
marker channel) and its request handlers, with markers written into real logs."""

import importlib

import pytest

from coordinator.test_transaction_coordinator import Clock
from kafkapy.coordinator.transaction.coordinator import TransactionCoordinatorState, TxnConfig
from kafkapy.coordinator.transaction.handlers import TXN_HANDLERS
from kafkapy.coordinator.transaction.marker_channel import TransactionMarkerChannel
from kafkapy.protocol.transaction_log import decode_key, decode_value, encode_key
from kafkapy.coordinator.transaction.transaction_coordinator import (
    ABORT_TIMED_OUT_INTERVAL_MS, MARKER_RETRY_INTERVAL_MS, TransactionCoordinator)
from kafkapy.protocol.codec import encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.storage.errors import RecordError
from kafkapy.storage.transaction_index import AbortedTxn

from kafkapy._core.records_py import build_batch
from kafkapy.storage.config import LogConfig
from kafkapy.storage.log import Log
from kafkapy.storage.shared import LocalPartitionState
from kafkapy.protocol.transaction_log import encode_value

TXN = "txn-a"


class Store:
    """__transaction_state as a list of (partition, key, value); ``fail`` makes the next writes fail."""

    def __init__(self):
        self.records = []
        self.fail = 0
        self.num_partitions = 50  # __consumer_offsets' (AddOffsetsToTxn)
        self.topics = {"out": 3}  # what exists (AddPartitionsToTxn)

    def partition_exists(self, topic, partition):
        return 0 <= partition < self.topics.get(topic, 0)

    def persist(self, persist):
        if self.fail:
            return self.fail
        value = None if persist.tombstone else encode_value(persist.transit.log_value())
        self.records.append((persist.partition, encode_key(persist.transactional_id), value))
        return 0

    def log_end_offset(self, partition):
        return sum(1 for p, _k, _v in self.records if p == partition)

    def replay(self, partitions):
        for p, key, value in self.records:
            if p in partitions:
                yield p, key, value
                yield None

    def states(self, txn_id=TXN):
        return [decode_value(v).status if v is not None else None for _, k, v in self.records
                if decode_key(k) == txn_id]


class Logs:
    """Data partitions as real logs; writes markers as the local writer does."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.logs = {}
        self.down = set()  # (topic, p) answering NOT_LEADER_OR_FOLLOWER

    def log(self, topic, p):
        if (topic, p) not in self.logs:
            self.logs[topic, p] = Log.open(str(self.tmp_path / f"{topic}-{p}"), topic, p, LogConfig(),
                                           LocalPartitionState(), fsync=lambda fd: None)
        return self.logs[topic, p]

    def produce(self, topic, p, pid, epoch, seq):
        log = self.log(topic, p)
        data = build_batch([(b"k", b"v", [], 1)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           is_transactional=True, base_offset=log.log_end_offset)
        with log.lock():
            log.append_as_follower(memoryview(bytearray(data)))
            log.update_high_watermark(log.log_end_offset)

    def write_marker(self, topic, p, markers):
        if (topic, p) in self.down:
            return E.NOT_LEADER_OR_FOLLOWER
        log = self.log(topic, p)
        try:
            with log.lock():
                log.append_control_batch(markers.producer_id, markers.producer_epoch, markers.coordinator_epoch,
                                         markers.commit, 0)
                log.update_high_watermark(log.log_end_offset)
        except RecordError as e:
            return e.error_code
        return E.NONE

    def lso(self, topic, p):
        log = self.log(topic, p)
        with log.lock():
            return log.last_stable_offset()

    def aborted(self, topic, p):
        log = self.log(topic, p)
        with log.lock():
            return log.collect_aborted_transactions(0, log.log_end_offset + 1)


@pytest.fixture
def env(tmp_path):
    clock, store, logs = Clock(), Store(), Logs(tmp_path)
    pids = iter(range(5000, 6000))
    state = TransactionCoordinatorState(TxnConfig(num_partitions=3), lambda: next(pids), clock)
    txn = TransactionCoordinator(state, store, TransactionMarkerChannel(logs.write_marker))
    for p in range(3):
        txn.load(p, 4)
    yield txn, store, logs, clock
    for log in logs.logs.values():
        log.close()


def call(method, *args):
    answers = []
    method(*args, answers.append)
    assert len(answers) == 1
    return answers[0]


def test_commit_and_abort_reach_the_logs(env):
    txn, store, logs, clock = env
    a = call(txn.init_producer_id, TXN, 60000, -1, -1)
    assert (a.error_code, a.producer_id, a.producer_epoch) == (0, 5000, 0)
    assert call(txn.add_partitions, TXN, 5000, 0, [("out", 0), ("out", 1)]).error_code == 0
    logs.produce("out", 0, 5000, 0, 0)
    logs.produce("out", 1, 5000, 0, 0)
    assert logs.lso("out", 0) == 0
    assert call(txn.end_txn, TXN, 5000, 0, True).error_code == 0
    # Markers written, CompleteCommit persisted: Empty, Ongoing, PrepareCommit, CompleteCommit.
    assert store.states() == [0, 1, 2, 4]
    assert logs.lso("out", 0) == 2 and logs.lso("out", 1) == 2
    assert logs.aborted("out", 0) == []
    # A second transaction is aborted: the index says so.
    assert call(txn.add_partitions, TXN, 5000, 0, [("out", 0)]).error_code == 0
    logs.produce("out", 0, 5000, 0, 1)
    assert call(txn.end_txn, TXN, 5000, 0, False).error_code == 0
    assert logs.aborted("out", 0) == [AbortedTxn(5000, 2, 3, 4)]
    assert store.states()[-2:] == [3, 5]


def test_unwritten_markers_are_retried_and_block_the_transaction(env):
    txn, store, logs, clock = env
    written = []
    txn.channel.on_written = lambda tp, markers: written.append((tp, markers.commit))
    call(txn.init_producer_id, TXN, 60000, -1, -1)
    call(txn.add_partitions, TXN, 5000, 0, [("out", 0), ("out", 1)])
    logs.down.add(("out", 1))
    assert call(txn.end_txn, TXN, 5000, 0, True).error_code == 0   # answered once PrepareCommit is written
    assert store.states()[-1] == 2 and txn.channel.pending
    assert call(txn.add_partitions, TXN, 5000, 0, [("out", 0)]).error_code == E.CONCURRENT_TRANSACTIONS
    next_ms = txn.tick()
    assert next_ms <= clock.now + 100 and txn.channel.pending   # still down
    logs.down.clear()
    clock.now += 100   # retried after Kafka's backoff, not at every tick
    txn.tick()
    assert not txn.channel.pending and store.states()[-1] == 4
    assert written == [(("out", 0), True), (("out", 1), True)]   # each partition once, when written
    # Each partition got exactly one marker.
    for p in (0, 1):
        log = logs.log("out", p)
        assert log.log_end_offset == 1


def test_marker_retries_are_spaced_however_often_tick_runs(env):
    # The coordinator process ticks before every request: a leader that keeps
    # refusing a marker is tried again every MARKER_RETRY_INTERVAL_MS, not
    # once per request.
    txn, store, logs, clock = env
    attempts = []
    write_all = txn.channel.write_all
    txn.channel.write_all = lambda batch: (attempts.append(len(batch)), write_all(batch))[1]
    call(txn.init_producer_id, TXN, 60000, -1, -1)
    call(txn.add_partitions, TXN, 5000, 0, [("out", 0)])
    logs.down.add(("out", 0))
    failed_at = clock.now
    call(txn.end_txn, TXN, 5000, 0, True)
    assert attempts == [1] and txn.channel.pending
    for _ in range(150):   # a request every millisecond, each after a tick
        next_ms = txn.tick()
        clock.now += 1
    assert attempts == [1, 1]   # once, when the interval had passed
    assert next_ms == failed_at + 2 * MARKER_RETRY_INTERVAL_MS   # the next one
    logs.down.clear()
    clock.now = next_ms
    txn.tick()
    assert not txn.channel.pending and store.states()[-1] == 4 and len(attempts) == 3


def test_failed_state_write_answers_and_changes_nothing(env):
    txn, store, logs, clock = env
    call(txn.init_producer_id, TXN, 60000, -1, -1)
    store.fail = E.NOT_ENOUGH_REPLICAS
    assert call(txn.add_partitions, TXN, 5000, 0, [("out", 0)]).error_code == E.COORDINATOR_NOT_AVAILABLE
    store.fail = 0
    assert store.states() == [0]
    assert call(txn.add_partitions, TXN, 5000, 0, [("out", 0)]).error_code == 0


def test_timeout_aborts_and_fences(env):
    txn, store, logs, clock = env
    call(txn.init_producer_id, TXN, 1000, -1, -1)
    call(txn.add_partitions, TXN, 5000, 0, [("out", 0)])
    logs.produce("out", 0, 5000, 0, 0)
    clock.now += ABORT_TIMED_OUT_INTERVAL_MS + 1
    txn.tick()
    assert store.states()[-2:] == [3, 5]
    assert logs.aborted("out", 0) == [AbortedTxn(5000, 0, 1, 2)]
    # The marker carries the bumped epoch: the zombie's late writes are refused by the log.
    with logs.log("out", 0).lock(), pytest.raises(RecordError) as err:
        logs.log("out", 0).append_control_batch(5000, 0, 4, True, 0)
    assert err.value.error_code == E.INVALID_PRODUCER_EPOCH
    assert call(txn.end_txn, TXN, 5000, 0, True).error_code == E.PRODUCER_FENCED


def test_reload_resends_markers_of_a_prepared_transaction(env):
    txn, store, logs, clock = env
    call(txn.init_producer_id, TXN, 60000, -1, -1)
    call(txn.add_partitions, TXN, 5000, 0, [("out", 0)])
    logs.produce("out", 0, 5000, 0, 0)
    logs.down.add(("out", 0))
    call(txn.end_txn, TXN, 5000, 0, False)
    p = txn.state.partition_for(TXN)
    assert txn.unload(p) == 1 and not txn.channel.pending
    logs.down.clear()
    txn.load(p, 5)   # a new coordinator epoch
    assert store.states()[-1] == 5
    assert logs.aborted("out", 0) == [AbortedTxn(5000, 0, 1, 2)]


# ---------------------------------------------------------------- handlers


class Ctx:
    def __init__(self, api_key, version, store):
        self.api_key, self.api_version, self.store = api_key, version, store
        self.replies = []

    def reply(self, data):
        self.replies.append(data)


_MODULES = {22: "init_producer_id", 24: "add_partitions_to_txn", 25: "add_offsets_to_txn", 26: "end_txn",
            65: "describe_transactions", 66: "list_transactions"}
_VERSIONS = {22: range(0, 6), 24: range(0, 6), 25: range(0, 5), 26: range(0, 5), 65: range(0, 1),
             66: range(0, 2)}


def _cls(key, version, kind):
    module = importlib.import_module(f"kio.schema.{_MODULES[key]}.v{version}.{kind}")
    return next(getattr(module, n) for n in dir(module) if n.endswith(kind.capitalize())
                and n.startswith("".join(w.capitalize() for w in _MODULES[key].split("_"))))


def handle(txn, store, key, version, **fields):
    ctx = Ctx(key, version, store)
    request = construct(_cls(key, version, "request"), fields)
    TXN_HANDLERS[key](txn, ctx, request)
    [data] = ctx.replies
    response = construct(_cls(key, version, "response"), data)
    encode_to_bytes(response)  # every answer encodes in its version
    return response


@pytest.mark.parametrize("version", range(0, 6))
def test_handlers_answer_every_version(env, version):
    txn, store, logs, clock = env
    tid = f"t{version}"
    init = {"transactional_id": tid, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
    r = handle(txn, store, 22, version, **init)
    assert r.error_code == 0 and r.producer_epoch == 0
    pid = r.producer_id
    if version >= 3:  # KIP-360's producer id and epoch: an unknown epoch is a zombie
        r = handle(txn, store, 22, version, **{**init, "producer_id": pid, "producer_epoch": 7})
        assert r.error_code == (E.PRODUCER_FENCED if version >= 4 else E.INVALID_PRODUCER_EPOCH)
    topics = [{"name": "out", "partitions": [0, 1]}]
    if version < 4:
        r = handle(txn, store, 24, version, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                   v3_and_below_producer_epoch=0, v3_and_below_topics=topics)
        [topic] = r.results_by_topic_v3_and_below
        assert [p.partition_error_code for p in topic.results_by_partition] == [0, 0]
    else:
        r = handle(txn, store, 24, version, transactions=[
            {"transactional_id": tid, "producer_id": pid, "producer_epoch": 0, "topics": topics},
            {"transactional_id": tid, "producer_id": pid, "producer_epoch": 0, "verify_only": True,
             "topics": [{"name": "out", "partitions": [0, 2]}]}])
        added, verified = r.results_by_transaction
        assert [p.partition_error_code for p in added.topic_results[0].results_by_partition] == [0, 0]
        assert [p.partition_error_code for p in verified.topic_results[0].results_by_partition] == \
            [0, E.TRANSACTION_ABORTABLE]
    if version <= 4:
        r = handle(txn, store, 25, version, transactional_id=tid, producer_id=pid, producer_epoch=0,
                   group_id="grp")
        assert r.error_code == 0
        assert any(t == "__consumer_offsets" for t, _ in txn.state.get(tid).topic_partitions)
        r = handle(txn, store, 26, version, transactional_id=tid, producer_id=pid, producer_epoch=1,
                   committed=True)
        assert r.error_code == (E.PRODUCER_FENCED if version >= 2 else E.INVALID_PRODUCER_EPOCH)
    if version < 4:
        r = handle(txn, store, 24, version, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                   v3_and_below_producer_epoch=0, v3_and_below_topics=[{"name": "out", "partitions": [2, 9]},
                                                                       {"name": "nope", "partitions": [0]}])
        errors = {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
                  for p in t.results_by_partition}
        assert errors == {("out", 2): E.OPERATION_NOT_ATTEMPTED, ("out", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
                          ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert ("out", 2) not in txn.state.get(tid).topic_partitions
        # A zombie epoch: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before.
        r = handle(txn, store, 24, version, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                   v3_and_below_producer_epoch=5, v3_and_below_topics=[{"name": "out", "partitions": [2]}])
        fenced = r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        assert fenced == (E.PRODUCER_FENCED if version >= 2 else E.INVALID_PRODUCER_EPOCH)
    if version <= 1:
        r = handle(txn, store, 66, version, state_filters=["Ongoing", "Nope"], producer_id_filters=[])
        assert r.error_code == 0 and list(r.unknown_state_filters) == ["Nope"]
        assert (tid, pid, "Ongoing") in [(s.transactional_id, s.producer_id, s.transaction_state)
                                         for s in r.transaction_states]
    if version == 0:
        r = handle(txn, store, 65, 0, transactional_ids=[tid, "unknown"])
        known, unknown = r.transaction_states
        assert known.error_code == 0 and known.transaction_state == "Ongoing"
        assert unknown.error_code == E.TRANSACTIONAL_ID_NOT_FOUND


# ---------------------------------------------------------------- the local marker writer


def test_local_marker_writer_on_a_real_partition(tmp_path, table):
    from types import SimpleNamespace

    from kafkapy.coordinator.transaction.coordinator import WriteMarkers
    from kafkapy.coordinator.transaction.marker_channel import LocalMarkerWriter
    from kafkapy.replication.partition import Partition

    slot = table.allocate()
    log = Log.open(str(tmp_path / "out-0"), "out", 0, LogConfig(), table.slot(slot), fsync=lambda fd: None)
    partition = Partition("out", 0, None, log, slot, 0)
    topics = {"out": SimpleNamespace(num_partitions=1)}
    woken = []  # the slots whose parked fetches each wake was for
    broker = SimpleNamespace(
        metadata=lambda: SimpleNamespace(topics=topics),
        replica_manager=SimpleNamespace(get_partition=lambda t, p: partition if (t, p) == ("out", 0) else None,
                                        wake_delayed_operations=lambda slots=None: woken.append(slots)))
    local = LocalMarkerWriter(broker, timeout_ms=1000)

    def writer(topic, partition_id, markers):
        """One marker through the coordinator's pass (ISR alone: answered at once)."""
        return local.begin([(markers, [(topic, partition_id)])])[0][(topic, partition_id)]

    data = build_batch([(b"k", b"v", [], 1)], producer_id=7, producer_epoch=2, base_sequence=0,
                       is_transactional=True)
    with log.lock():
        log.append_as_follower(memoryview(bytearray(data)))
        log.update_high_watermark(1)

    def markers(epoch, commit=False, coordinator_epoch=3):
        return WriteMarkers("t", coordinator_epoch, 7, epoch, commit, frozenset({("out", 0)}), None)

    assert writer("out", 0, markers(2)) == E.NONE
    with log.lock():
        assert log.log_end_offset == 2 and log.high_watermark == 2     # ISR alone: committed in the append
        assert log.collect_aborted_transactions(0, 2) == [AbortedTxn(7, 0, 1, 2)]
    assert woken == [[slot]]  # a read_committed fetch parked at the old LSO is woken
    assert writer("out", 0, markers(1)) == E.INVALID_PRODUCER_EPOCH
    assert writer("out", 0, markers(2, coordinator_epoch=2)) == E.TRANSACTION_COORDINATOR_FENCED
    assert writer("gone", 0, markers(2)) == E.NONE                     # deleted topic: dropped
    topics["late"] = SimpleNamespace(num_partitions=1)
    assert writer("late", 0, markers(2)) == E.UNKNOWN_TOPIC_OR_PARTITION
    partition.make_follower(1, 1, (0, 1), 1)
    assert writer("out", 0, markers(2)) == E.NOT_LEADER_OR_FOLLOWER
    assert log.log_end_offset == 2
    assert woken == [[slot]]  # the refused markers appended nothing and woke nothing
    log.close()
