"""WriteTxnMarkers parked like an acks=-1 produce (issue 11; Kafka's
handleWriteTxnMarkersRequest appends with requiredAcks=-1 and answers from
the DelayedProduce completion): ``DelayedTxnMarkers`` completes when every
watched high watermark passed its markers or a leadership moved, expires
with REQUEST_TIMED_OUT for the partitions still short, says
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
min.insync.replicas; it travels as plain data; the handler appends every
marker, answers at once when nothing waits and parks otherwise (its worker
free); the processor answers a parked one itself as a WriteTxnMarkersResponse
(v0 and the flexible v1). Real partition logs and a real shared table."""

import pickle
import time
from types import SimpleNamespace

import pytest

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode
from kafkapy.protocol.entities import construct
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.headers import encode_response
from kafkapy.replication.partition import Partition
from kafkapy.replication.purgatory import DelayedProduce, DelayedTxnMarkers, Purgatory, from_wire
from kafkapy.server.handlers import RequestContext
from kafkapy.server.handlers import write_txn_markers as handler

from support.storage import make_batch, open_log, records_of

HW = "high_watermark"
PID_A, PID_B = 4000, 4001


def _fields(**slots):
    """A read_field over ``{(slot, field): value}`` (the shared table's face)."""
    table = {}
    for slot, values in slots.items():
        for field, value in values.items():
            table[(int(slot[1:]), field)] = value
    return table, (lambda slot, field: table[(slot, field)])


def _op(deadline_ms=5000):
    # Producer A: t-0 (slot 3) waits for offset 10, t-1 failed at append.
    # Producer B: t-0 again (offset 11, so the slot waits for 11) and u-0 (slot 4, offset 6).
    results = [
        (PID_A, [("t", [(0, 0, 3, 10), (1, int(E.INVALID_PRODUCER_EPOCH), -1, 0)])]),
        (PID_B, [("t", [(0, 0, 3, 11)]), ("u", [(0, 0, 4, 6)])]),
    ]
    return DelayedTxnMarkers({3: (HW, 11), 4: (HW, 6)}, deadline_ms, 42, 1, results, {3: 5, 4: 5}, 0, {3: 2, 4: 1})


def _state(hw3, hw4, epoch4=5, isr3=0b11):
    return {"s3": {HW: hw3, "current_leader_epoch": 5, "leader_id": 1, "isr_mask": isr3},
            "s4": {HW: hw4, "current_leader_epoch": epoch4, "leader_id": 1, "isr_mask": 0b1}}


def test_satisfied_when_every_high_watermark_passed_its_markers():
    table, read = _fields(**_state(10, 6))
    op = _op()
    assert not op.is_satisfied(read), "slot 3 waits for B's marker at offset 10 (needs 11)"
    table[(3, HW)] = 11
    assert op.is_satisfied(read)
    assert op.final_results(read) == [
        (PID_A, [("t", [(0, 0), (1, E.INVALID_PRODUCER_EPOCH)])]),
        (PID_B, [("t", [(0, 0)]), ("u", [(0, 0)])]),
    ]


def test_expired_answers_request_timed_out_only_where_short():
    _table, read = _fields(**_state(11, 5))  # u-0 is one short
    op = _op()
    purgatory = Purgatory()
    purgatory.park("c", op)
    assert purgatory.poll(read, 4999, True) == []
    [(_key, done, expired)] = purgatory.poll(read, 5000, False)
    assert expired and done is op
    assert op.final_results(read) == [
        (PID_A, [("t", [(0, 0), (1, E.INVALID_PRODUCER_EPOCH)])]),
        (PID_B, [("t", [(0, 0)]), ("u", [(0, E.REQUEST_TIMED_OUT)])]),
    ]


def test_a_moved_leadership_completes_it_with_not_leader_or_follower():
    table, read = _fields(**_state(11, 5))
    op = _op()
    assert not op.is_satisfied(read)
    table[(4, "current_leader_epoch")] = 6  # LeaderAndIsr made this broker a follower of u-0
    assert op.is_satisfied(read)
    assert op.final_results(read)[1] == (PID_B, [("t", [(0, 0)]), ("u", [(0, E.NOT_LEADER_OR_FOLLOWER)])])
    table[(4, "current_leader_epoch")] = 5
    table[(4, "leader_id")] = -1  # StopReplica: no leader here any more
    assert op.is_satisfied(read)
    assert op.final_results(read)[1][1][1] == ("u", [(0, E.NOT_LEADER_OR_FOLLOWER)])


def test_an_isr_shrunk_below_min_insync_answers_not_enough_replicas_after_append():
    _table, read = _fields(**_state(11, 6, isr3=0b1))  # t-0 needs 2 in sync; its high watermark passed with 1
    op = _op()
    assert op.is_satisfied(read)
    codes = op.final_results(read)
    assert codes[0][1][0][1][0] == (0, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert codes[1][1] == [("t", [(0, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)]), ("u", [(0, 0)])]


def test_it_travels_as_plain_data_and_is_a_delayed_produce():
    op = _op()
    wire = op.to_wire()
    assert all(type(v) in (int, dict, list) for v in wire)
    again = from_wire(pickle.loads(pickle.dumps(wire)))
    assert type(again) is DelayedTxnMarkers and isinstance(again, DelayedProduce)
    assert again.__getstate__() == op.__getstate__()
    assert pickle.loads(pickle.dumps(op)).min_isr == {3: 2, 4: 1}


@pytest.mark.parametrize("version", [0, 1])
def test_the_response_encodes_per_producer_topic_and_partition(version):
    _table, read = _fields(**_state(11, 5))
    op = _op()
    op.api_version = version
    flexible = API_TABLE[27].is_flexible(version)
    frame = b"".join(bytes(part) for part in encode_response(42, handler.delayed_txn_markers_response(op, read),
                                                             flexible))
    response, _ = decode(API_TABLE[27].response_class(version), memoryview(frame), 9 if flexible else 8)
    assert _codes(response) == [(PID_A, [("t", [(0, 0), (1, E.INVALID_PRODUCER_EPOCH)])]),
                                (PID_B, [("t", [(0, 0)]), ("u", [(0, E.REQUEST_TIMED_OUT)])])]


def _codes(response):
    """``[(producer id, [(topic, [(partition, error code)])])]`` of a WriteTxnMarkersResponse."""
    return [(m.producer_id, [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in m.topics])
            for m in response.markers]


# -- the handler over a real partition ------------------------------------------------


class _Broker:
    """The broker's face the handler uses: metadata with topic "t" (2
    partitions: "t"-0 a real partition, "t"-1 not hosted) and a replica
    manager over "t"-0."""

    def __init__(self, partition):
        self.partition = partition
        self.woken = []
        topics = {"t": SimpleNamespace(num_partitions=2)}
        self.replica_manager = SimpleNamespace(get_partition=self._get, wake_delayed_operations=self.woken.append)
        self.metadata = lambda: SimpleNamespace(topics=topics)

    def _get(self, topic, partition_id):
        return self.partition if (topic, partition_id) == ("t", 0) else None


@pytest.fixture
def leader(tmp_path, table):
    slot = table.allocate()
    log = open_log(tmp_path / "t-0", state=table.slot(slot))
    partition = Partition("t", 0, None, log, slot, 0)
    with log.lock():  # two transactions' data, producers A and B (offsets 0 and 1)
        for pid in (PID_A, PID_B):
            log.append_as_leader(records_of(make_batch(1, producer_id=pid, producer_epoch=0, base_sequence=0,
                                                       is_transactional=True)), 0)
    yield partition
    log.close()


def _reader(table):
    return lambda slot, field: getattr(table.slot(slot), field)


def _follower_fetched(leader, offset):
    """The follower (broker 1) has fetched up to ``offset``: the high watermark follows."""
    leader.remote_log_end_offsets[1] = offset
    leader._update_high_watermark_limit()
    with leader.lock():
        leader.maybe_increment_high_watermark()


def _request(version=1):
    return construct(API_TABLE[27].request_class(version), {"markers": [
        {"producer_id": PID_A, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
         "topics": [{"name": "t", "partition_indexes": [0, 1]}, {"name": "gone", "partition_indexes": [0]}]},
        {"producer_id": PID_B, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
         "topics": [{"name": "t", "partition_indexes": [0]}]}]})


def _handle(broker, version=1):
    ctx = RequestContext(broker, 27, version, 66, "coordinator", 0)
    return ctx, handler.handle(ctx, _request(version))


EXPECTED = [(PID_A, [("t", [(0, 0), (1, E.UNKNOWN_TOPIC_OR_PARTITION)]),
                     ("gone", [(0, E.UNKNOWN_TOPIC_OR_PARTITION)])]),
            (PID_B, [("t", [(0, 0)])])]


def test_the_handler_answers_at_once_while_the_isr_is_this_broker(leader):
    broker = _Broker(leader)
    _ctx, response = _handle(broker)
    assert not isinstance(response, DelayedTxnMarkers)
    assert _codes(response) == EXPECTED
    assert leader.log.log_end_offset == 4 and broker.woken == [[leader.slot, leader.slot]]


def test_the_handler_parks_until_the_follower_has_the_markers(leader, table):
    leader.remote_log_end_offsets[1] = 2  # the follower has both transactions' data
    leader.make_leader(1, (0, 1))
    broker = _Broker(leader)
    ctx, op = _handle(broker)
    # Appended (the worker is free), waiting for the follower: both markers, offsets 2 and 3.
    assert isinstance(op, DelayedTxnMarkers) and leader.log.log_end_offset == 4
    assert op.watch == {leader.slot: (HW, 4)} and op.deadline_ms == ctx.now_ms + handler.MARKER_WAIT_MS
    assert op.leader_epochs == {leader.slot: 1} and op.min_isr == {leader.slot: 1}
    assert (op.correlation_id, op.api_version, op.KIND) == (66, 1, 2)
    purgatory = Purgatory()
    purgatory.park("conn", from_wire(pickle.loads(pickle.dumps(op.to_wire()))))
    read = _reader(table)
    assert purgatory.poll(read, ctx.now_ms, True) == []
    _follower_fetched(leader, 3)  # A's marker, not yet B's
    assert purgatory.poll(read, ctx.now_ms, True) == []
    assert _codes(handler.delayed_txn_markers_response(op, read))[1] == (PID_B, [("t", [(0, E.REQUEST_TIMED_OUT)])])
    _follower_fetched(leader, 4)
    [(_key, done, expired)] = purgatory.poll(read, ctx.now_ms, True)
    assert done.__getstate__() == op.__getstate__() and not expired
    assert _codes(handler.delayed_txn_markers_response(done, read)) == EXPECTED


def test_append_errors_answer_as_they_are_and_a_moved_leader_ends_the_wait(leader, table):
    leader.remote_log_end_offsets[1] = 2
    leader.make_leader(1, (0, 1))
    broker = _Broker(leader)

    def marker(pid, coordinator_epoch):
        return {"producer_id": pid, "producer_epoch": 0, "transaction_result": True,
                "coordinator_epoch": coordinator_epoch, "topics": [{"name": "t", "partition_indexes": [0]}]}

    ctx = RequestContext(broker, 27, 0, 1, "c", 0)
    first = handler.handle(ctx, construct(API_TABLE[27].request_class(0), {"markers": [marker(PID_A, 3)]}))
    assert isinstance(first, DelayedTxnMarkers)
    # A's marker again from an older coordinator: refused at append, answered as
    # it is; B's waits for the follower.
    op = handler.handle(ctx, construct(API_TABLE[27].request_class(0), {"markers": [marker(PID_A, 2),
                                                                                      marker(PID_B, 3)]}))
    assert isinstance(op, DelayedTxnMarkers) and leader.log.log_end_offset == 4
    assert op.results == [(PID_A, [("t", [(0, int(E.TRANSACTION_COORDINATOR_FENCED), -1, 0)])]),
                          (PID_B, [("t", [(0, 0, leader.slot, 4)])])]
    read = _reader(table)
    assert not op.is_satisfied(read)
    leader.make_follower(2, 2, (2, 0), 1)  # LeaderAndIsr: broker 2 leads at epoch 2
    assert op.is_satisfied(read)
    assert _codes(handler.delayed_txn_markers_response(op, read)) == [
        (PID_A, [("t", [(0, E.TRANSACTION_COORDINATOR_FENCED)])]), (PID_B, [("t", [(0, E.NOT_LEADER_OR_FOLLOWER)])])]
    # A request to a broker that does not lead the partition any more: at once.
    response = handler.handle(ctx, construct(API_TABLE[27].request_class(0), {"markers": [marker(PID_B, 3)]}))
    assert _codes(response) == [(PID_B, [("t", [(0, E.NOT_LEADER_OR_FOLLOWER)])])]


# -- the processor answers it ---------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_the_processor_answers_a_parked_request_itself(processor, table, version):
    p = processor
    short = table.allocate()
    table.slot(short).high_watermark = 10
    table.slot(short).current_leader_epoch = 5
    table.slot(short).leader_id = 1
    table.slot(short).isr_mask = 0b11
    conn = p.connect(b"\x00\x1b" + b"m" * 64)
    op = DelayedTxnMarkers({short: (HW, 11)}, int(time.time() * 1000) + 60_000, 78, version,
                           [(PID_A, [("t", [(0, 0, short, 11), (1, int(E.NOT_ENOUGH_REPLICAS), -1, 0)])])],
                           {short: 5}, 0, {short: 2})
    p.answer(conn, op)
    assert conn.conn_id in p.purgatory and conn.inline is None
    p._check_delayed(woken=True)
    assert conn.conn_id in p.purgatory, "the high watermark has not passed the marker"
    table.slot(short).high_watermark = 11
    p._check_delayed(woken=True)
    # No worker round trip: nothing goes back to the request queue.
    assert p.channel.requests.size() == 0 and len(p.purgatory) == 0
    frame = p.received(conn)
    flexible = API_TABLE[27].is_flexible(version)
    response, _ = decode(API_TABLE[27].response_class(version), memoryview(frame), 9 if flexible else 8)
    assert int.from_bytes(frame[4:8], "big") == 78
    assert _codes(response) == [(PID_A, [("t", [(0, 0), (1, E.NOT_ENOUGH_REPLICAS)])])]
