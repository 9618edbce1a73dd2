"""The purgatory in the reactor, in-process: a processor parks what a worker
returns (DELAY), re-checks the watched fields right after parking, keeps a
parked large body out of the arena, hands a complete or expired operation
back to the request queue (a fetch with its original deadline and its bytes
restored) or answers it itself (a produce, from the results it carries),
forgets it when the connection closes, and answers everything when stopping.
The Produce handler parks acks=-1 only while a partition's high watermark
is short of its records (an ISR with a follower that has not fetched).
Real channel pieces, a real shared table and real partition logs."""

import multiprocessing
import pickle
import time
from types import SimpleNamespace

import pytest

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode
from kafkapy.protocol.entities import construct
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import Partition
from kafkapy.replication.purgatory import (
    HIGH_WATERMARK,
    LOG_END_OFFSET,
    DelayedFetch,
    DelayedProduce,
    Purgatory,
    from_wire,
)
from kafkapy.server.handlers import NoResponse, RequestContext
from kafkapy.server.handlers import produce as produce_handler
from kafkapy.server.reactor.channel import DELAY, WakePipe
from kafkapy.server.reactor.worker import finish_request

from support.storage import make_batch, open_log, records_of

HW = HIGH_WATERMARK


def _parked_count(p):
    return p.wake_pipe._parked.value


def _fetch_body(n):
    return b"\x00\x01" + bytes(range(256)) * (n // 256)


def test_a_parked_fetch_runs_again_with_its_deadline_and_its_bytes(processor, table):
    p = processor
    slot = table.allocate()
    table.slot(slot).high_watermark = 7
    body = _fetch_body(64 * 1024)  # a large request: in the arena
    conn = p.connect(body, in_arena=True)
    deadline = int(time.time() * 1000) + 60_000
    p.answer(conn, DelayedFetch({slot: (HW, 8)}, deadline))
    assert conn.conn_id in p.purgatory and _parked_count(p) == 1
    # Parked, its bytes left the arena ring (which is empty again).
    assert conn.arena_off == -1 and conn.parked_body == body and p.arena._live == {}
    p._check_delayed(woken=True)
    assert conn.conn_id in p.purgatory, "nothing moved: stays parked"
    table.slot(slot).high_watermark = 8
    p._check_delayed(woken=False)
    assert conn.conn_id in p.purgatory, "only a wake checks the watches"
    p._check_delayed(woken=True)
    assert len(p.purgatory) == 0 and _parked_count(p) == 0
    req = p.channel.requests.get(timeout_s=1)
    assert (req.conn_id, req.deadline_ms, req.arena_off >= 0) == (conn.conn_id, deadline, True)
    assert bytes(req.view([p.arena.view])) == body and conn.parked_body is None


def test_an_append_racing_with_the_park_is_caught_by_the_recheck(processor, table):
    p = processor
    slot = table.allocate()
    table.slot(slot).high_watermark = 5  # moved between the worker's read and the park
    conn = p.connect(_fetch_body(256))
    p.answer(conn, DelayedFetch({slot: (HW, 5)}, int(time.time() * 1000) + 60_000))
    req = p.channel.requests.get(timeout_s=1)
    assert req.conn_id == conn.conn_id and len(p.purgatory) == 0 and _parked_count(p) == 0


def test_an_expired_fetch_runs_again_and_a_closed_connection_forgets_its_own(processor, table):
    p = processor
    slot = table.allocate()
    soon = p.connect(_fetch_body(256))
    later = p.connect(_fetch_body(512))
    now = int(time.time() * 1000)
    p.answer(soon, DelayedFetch({slot: (HW, 1)}, now + 30))
    p.answer(later, DelayedFetch({slot: (HW, 1)}, now + 60_000))
    assert p.purgatory.next_deadline_ms() == now + 30 and 0 <= p._timeout() <= 0.03
    time.sleep(0.04)
    p._check_delayed(woken=False)
    req = p.channel.requests.get(timeout_s=1)
    assert (req.conn_id, req.deadline_ms) == (soon.conn_id, now + 30)
    assert list(p.purgatory._parked) == [later.conn_id] and _parked_count(p) == 1
    p._close(later)
    assert len(p.purgatory) == 0 and _parked_count(p) == 0
    table.slot(slot).high_watermark = 1
    p._check_delayed(woken=True)
    assert p.channel.requests.size() == 0


def test_stopping_answers_every_parked_operation_now(processor, table):
    p = processor
    slot = table.allocate()
    fetch, produce = p.connect(_fetch_body(256)), p.connect(b"\x00\x00produce")
    now = int(time.time() * 1000)
    p.answer(fetch, DelayedFetch({slot: (HW, 1)}, now + 60_000))
    p.answer(produce, DelayedProduce({slot: (HW, 1)}, now + 60_000, 9, 9,
                                     [("t", [(0, 0, 0, -1, 0, None, slot)])]))
    p.stopping = True
    p._check_delayed(woken=False)
    # The fetch runs again with a deadline already passed: it answers at once.
    req = p.channel.requests.get(timeout_s=1)
    assert req.conn_id == fetch.conn_id and now <= req.deadline_ms <= int(time.time() * 1000)
    assert p.channel.requests.size() == 0
    # The produce is answered by the processor: its partition timed out.
    frame = p.received(produce)
    response, _ = decode(API_TABLE[0].response_class(9), memoryview(frame), 9)
    [part] = response.responses[0].partition_responses
    assert int.from_bytes(frame[4:8], "big") == 9 and part.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert len(p.purgatory) == 0 and _parked_count(p) == 0


def test_a_parked_produce_is_answered_by_its_processor_from_its_results(processor, table):
    p = processor
    done, short = table.allocate(), table.allocate()
    table.slot(done).high_watermark = 10
    body = b"\x00\x00" + b"p" * (64 * 1024)  # a large produce: in the arena
    conn = p.connect(body, in_arena=True)
    op = DelayedProduce({done: (HW, 10), short: (HW, 4)}, int(time.time() * 1000) + 60_000, 77, 9,
                        [("t", [(0, 0, 9, -1, 0, None, done), (1, 0, 3, -1, 0, None, short)])])
    p.answer(conn, op)
    # Its request bytes are not needed any more: the arena region is freed, nothing kept.
    assert conn.arena_off == -1 and conn.parked_body is None and conn.inline is None
    assert p.arena._live == {} and _parked_count(p) == 1
    table.slot(short).high_watermark = 4
    p._check_delayed(woken=True)
    # No worker round trip: nothing goes back to the request queue.
    assert p.channel.requests.size() == 0 and len(p.purgatory) == 0 and _parked_count(p) == 0
    frame = p.received(conn)
    response, _ = decode(API_TABLE[0].response_class(9), memoryview(frame), 9)
    got = [(p.index, p.error_code, p.base_offset) for p in response.responses[0].partition_responses]
    assert int.from_bytes(frame[4:8], "big") == 77 and got == [(0, 0, 9), (1, 0, 3)]


def test_finish_request_emits_the_operation_as_plain_data():
    op = DelayedFetch({3: (HW, 4)}, 1234)
    kind, payload = finish_request(None, op)
    assert kind == DELAY and isinstance(payload, tuple)
    assert from_wire(pickle.loads(pickle.dumps(payload))).watch == {3: (HW, 4)}


# -- Produce acks=-1 ------------------------------------------------------------------


class _OneReplica:
    """The replica manager's face the Produce handler uses, over one real
    partition "t"-0 (a unit test of the handler; the broker is elsewhere)."""

    def __init__(self, partition):
        self.partition = partition
        self.wakes = 0

    def get_partition(self, topic, partition_id):
        return self.partition if (topic, partition_id) == ("t", 0) else None

    def append_records(self, topic, partition_id, records, acks=1, verification=None):
        partition = self.get_partition(topic, partition_id)
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None
        return partition.append_records_to_leader(records, acks, verification)

    def wake_delayed_operations(self, slots=None, high_watermark_only=False):
        self.wakes += 1


@pytest.fixture
def leader(tmp_path, table):
    slot = table.allocate()
    log = open_log(tmp_path / "t-0", state=table.slot(slot))
    yield Partition("t", 0, None, log, slot, 0)
    log.close()


def _produce(replica_manager, acks, n=5, version=9, timeout=1500):
    request = construct(API_TABLE[0].request_class(version), {
        "transactional_id": None, "acks": acks, "timeout": timeout, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": records_of(make_batch(n))},
                                             {"index": 1, "records": records_of(make_batch(1))}]}]})
    broker = SimpleNamespace(replica_manager=replica_manager, config={"transaction.partition.verification.enable": True})
    ctx = RequestContext(broker, 0, version, 55, "c", 0)
    return ctx, produce_handler.handle(ctx, request)


def test_acks_all_answers_at_once_while_the_isr_is_this_broker(leader):
    _ctx, response = _produce(_OneReplica(leader), -1)
    assert not isinstance(response, DelayedProduce) and response is not NoResponse
    got = [(p.index, p.error_code) for p in response.responses[0].partition_responses]
    assert got == [(0, 0), (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_acks_all_parks_until_the_follower_has_the_records(leader, table):
    leader.remote_log_end_offsets[1] = 0
    leader.make_leader(1, (0, 1))
    replica_manager = _OneReplica(leader)
    _ctx, response = _produce(replica_manager, 1, n=2)
    assert not isinstance(response, DelayedProduce), "acks=1 never waits for the ISR"
    ctx, op = _produce(replica_manager, -1, n=5)  # offsets 2-6
    assert isinstance(op, DelayedProduce) and replica_manager.wakes == 2
    assert op.watch == {leader.slot: (HW, 7)} and op.deadline_ms == ctx.now_ms + 1500
    assert (op.correlation_id, op.api_version) == (55, 9)
    # The unknown partition answered at once: it is kept as it is.
    assert op.results == [("t", [(0, 0, 2, -1, 0, None, leader.slot),
                                 (1, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), -1, -1, -1, None, -1)])]
    op = from_wire(pickle.loads(pickle.dumps(op.to_wire())))
    purgatory = Purgatory()
    purgatory.park("conn", op)

    def read(slot, field):
        return getattr(table.slot(slot), field)

    assert purgatory.poll(read, ctx.now_ms, True) == []
    # The follower fetched up to offset 5: not yet all of the records.
    leader.remote_log_end_offsets[1] = 6
    leader._update_high_watermark_limit()
    with leader.lock():
        leader.maybe_increment_high_watermark()
    assert purgatory.poll(read, ctx.now_ms, True) == []
    leader.remote_log_end_offsets[1] = 7
    leader._update_high_watermark_limit()
    with leader.lock():
        leader.maybe_increment_high_watermark()
    [(key, done, expired)] = purgatory.poll(read, ctx.now_ms, True)
    assert (key, done, expired) == ("conn", op, False)
    response = produce_handler.delayed_produce_response(done, read)
    got = [(p.index, p.error_code, p.base_offset) for p in response.responses[0].partition_responses]
    assert got == [(0, 0, 2), (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]


def test_acks_all_expires_with_request_timed_out(leader, table):
    leader.remote_log_end_offsets[1] = 0
    leader.make_leader(1, (0, 1))
    ctx, op = _produce(_OneReplica(leader), -1, timeout=100)
    purgatory = Purgatory()
    purgatory.park(1, op)

    def read(slot, field):
        return getattr(table.slot(slot), field)

    assert purgatory.poll(read, ctx.now_ms + 99, False) == []
    [(_key, done, expired)] = purgatory.poll(read, ctx.now_ms + 100, False)
    assert expired
    response = produce_handler.delayed_produce_response(done, read)
    got = [(p.index, p.error_code, p.base_offset) for p in response.responses[0].partition_responses]
    assert got == [(0, ErrorCode.REQUEST_TIMED_OUT, -1), (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]


def _watched_pipe():
    """A processor's wake pipe and ``woken()``: whether it was woken since last asked."""
    import os

    pipe = WakePipe(multiprocessing.get_context("fork"), slots=16)

    def woken():
        try:
            return bool(os.read(pipe.read_fd, 16))
        except BlockingIOError:
            return False

    return pipe, woken


def test_an_appender_wakes_only_processors_watching_what_it_moved():
    pipe, woken = _watched_pipe()

    pipe.wake_if_watched([3])
    assert not woken(), "nothing parked"
    pipe.add_parked(1, {3: (HW, 1), 7: (HW, 2)})
    pipe.wake_if_watched([5, 9])
    assert not woken(), "another partition moved"
    pipe.wake_if_watched([9, 7])
    assert woken()
    pipe.wake_if_watched(None)  # a leader epoch moved: anything parked may care
    assert woken()
    pipe.add_parked(-1, {3: (HW, 1), 7: (HW, 2)})
    pipe.wake_if_watched([3, 7])
    pipe.wake_if_watched(None)
    assert not woken()


def test_a_high_watermark_move_leaves_parked_follower_fetches_asleep():
    """A follower's Fetch moves only high watermarks: the processor whose
    parked operation waits on a log end offset (another follower's Fetch) is
    not woken by it; one waiting on the high watermark is; an append (which
    moves the log end offset) wakes both."""
    pipe, woken = _watched_pipe()

    follower_fetch = {4: (LOG_END_OFFSET, 10)}
    pipe.add_parked(1, follower_fetch)
    pipe.wake_if_watched([4], high_watermark_only=True)
    assert not woken(), "a high watermark move woke a follower's fetch"
    pipe.wake_if_watched([4])
    assert woken(), "an append must wake it"
    produce = {4: (HW, 10), 5: (HW, 3)}
    pipe.add_parked(1, produce)
    pipe.wake_if_watched([5], high_watermark_only=True)
    assert woken(), "an acks=all produce waits on the high watermark"
    pipe.add_parked(-1, produce)
    pipe.wake_if_watched([4, 5], high_watermark_only=True)
    assert not woken()
    pipe.add_parked(-1, follower_fetch)
    pipe.wake_if_watched([4])
    assert not woken()


class _LeadershipMovesAfterTheAppend(_OneReplica):
    """A LeaderAndIsr lands between the append and the handler's look at the
    high watermark: this broker follows broker 1 now, and its high watermark
    is the new leader's, past the offsets our records had (a preferred
    election in a kafkapy-chaos run)."""

    def append_records(self, topic, partition_id, records, acks=1, verification=None):
        answer = super().append_records(topic, partition_id, records, acks, verification)
        if answer[1] is not None:
            self.partition.make_follower(1, 2, (0, 1), 2)
            self.partition.state.high_watermark = answer[1].last_offset + 10
        return answer


def test_acks_all_answers_not_leader_when_the_leadership_moved_after_the_append(leader, table):
    leader.remote_log_end_offsets[1] = 0
    leader.make_leader(1, (0, 1))
    _ctx, response = _produce(_LeadershipMovesAfterTheAppend(leader), -1, n=5)
    assert not isinstance(response, DelayedProduce)
    got = [(p.index, p.error_code) for p in response.responses[0].partition_responses]
    assert got == [(0, ErrorCode.NOT_LEADER_OR_FOLLOWER), (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


class _LeadershipGoesAndComesBack(_OneReplica):
    """Between the append and the handler's look at the high watermark,
    this broker follows broker 1 (epoch 2), then leads again (epoch 3),
    with a high watermark past our records: they may have been truncated
    and other records written at their offsets meanwhile."""

    def append_records(self, topic, partition_id, records, acks=1, verification=None):
        answer = super().append_records(topic, partition_id, records, acks, verification)
        if answer[1] is not None:
            self.partition.make_follower(1, 2, (0, 1), 2)
            self.partition.make_leader(3, (0, 1), partition_epoch=3)
            self.partition.state.high_watermark = answer[1].last_offset + self.past
        return answer


@pytest.mark.parametrize("past", [10, 0], ids=["high-watermark-past-them", "high-watermark-below-them"])
def test_acks_all_answers_not_leader_when_the_leadership_went_away_and_came_back(leader, table, past):
    leader.remote_log_end_offsets[1] = 0
    leader.make_leader(1, (0, 1))
    replicas = _LeadershipGoesAndComesBack(leader)
    replicas.past = past
    _ctx, response = _produce(replicas, -1, n=5)
    assert leader.is_leader and leader.leader_epoch == 3
    assert not isinstance(response, DelayedProduce)
    got = [(p.index, p.error_code) for p in response.responses[0].partition_responses]
    assert got == [(0, ErrorCode.NOT_LEADER_OR_FOLLOWER), (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
