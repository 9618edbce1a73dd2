"""A ``__transaction_state`` write the followers have not replicated yet parks
its request instead of holding the coordinator's thread: ``TransactionCoordinator``
with a store double whose writes to chosen partitions wait until the test
settles them (and the real store's settling of a waiting append)."""

from types import SimpleNamespace

import pytest

from coordinator.test_transaction_coordinator import Clock
from coordinator.test_transaction_driver import Ctx, Store, _cls
from kafkapy.coordinator.offsets_topic import PendingAppend
from kafkapy.coordinator.transaction.coordinator import TransactionCoordinatorState, TxnConfig
from kafkapy.coordinator.transaction.handlers import TXN_HANDLERS
from kafkapy.coordinator.transaction.marker_channel import TransactionMarkerChannel
from kafkapy.coordinator.transaction.metadata import TransactionState as S
from kafkapy.coordinator.transaction.state_store import TransactionStateStore
from kafkapy.coordinator.transaction.transaction_coordinator import (
    MARKER_POLL_MAX_MS, MARKER_POLL_MIN_MS, TransactionCoordinator)
from kafkapy.protocol.entities import construct
from kafkapy.protocol.errors import ErrorCode as E

PARTITIONS = 3


class Waiting:
    """A write the followers have not replicated: ``code`` None until settled."""

    def __init__(self, persist):
        self.persist = persist
        self.code = None


class SlowStore(Store):
    """``Store`` whose writes to the partitions in ``slow`` wait (the record
    is in the log at once, as a real append's is) until ``settle``."""

    def __init__(self):
        super().__init__()
        self.slow = set()
        self.waiting = []
        self.polls = 0

    def persist(self, persist):
        code = super().persist(persist)
        if code or persist.partition not in self.slow:
            return code
        self.waiting.append(Waiting(persist))
        return self.waiting[-1]

    def poll_persist(self, pending):
        self.polls += 1
        return pending.code

    def settle(self, code=0):
        for w in self.waiting:
            w.code = code
        self.waiting = []


def _ids(state):
    """A transactional id on each __transaction_state partition."""
    found = {}
    for i in range(1000):
        found.setdefault(state.partition_for(f"t{i}"), f"t{i}")
        if len(found) == PARTITIONS:
            return found
    raise AssertionError("no id for some partition")


@pytest.fixture
def env():
    clock, store, written, frozen = Clock(), SlowStore(), [], set()
    pids = iter(range(5000, 6000))
    state = TransactionCoordinatorState(TxnConfig(num_partitions=PARTITIONS), lambda: next(pids), clock)

    def write_marker(topic, p, markers):
        if (topic, p) in frozen:  # its leader cannot be reached: retried
            return E.NOT_LEADER_OR_FOLLOWER
        written.append((topic, p, markers.transactional_id, markers.commit))
        return E.NONE

    txn = TransactionCoordinator(state, store, TransactionMarkerChannel(write_marker))
    for p in range(PARTITIONS):
        txn.load(p, 4)
    ids = _ids(state)
    return SimpleNamespace(txn=txn, store=store, clock=clock, written=written, frozen=frozen, t1=ids[0], t2=ids[1],
                           p1=0, p2=1)


def call(method, *args):
    """The answers ``method`` gave now (none yet while parked)."""
    answers = []
    method(*args, answers.append)
    return answers


def settle_all(env, code=0):
    """Settle every waiting write, and those their continuations make, as ticks go by."""
    for _ in range(10):
        if not env.store.waiting:
            return
        env.store.settle(code)
        env.txn.tick()
    raise AssertionError("writes keep waiting")


def ongoing(env, txn_id):
    [a] = call(env.txn.init_producer_id, txn_id, 60000, -1, -1)
    assert a.error_code == 0
    [a] = call(env.txn.add_partitions, txn_id, a.producer_id, 0, [("out", 0)])
    assert a.error_code == 0
    return env.txn.state.get(txn_id).producer_id


def parked_end(env, txn_id, partition, commit=True):
    """An ongoing transaction of ``txn_id`` whose EndTxn waits for its
    write on the slow ``partition``: the list its answer will land in."""
    pid = ongoing(env, txn_id)
    env.store.slow.add(partition)
    late = []
    env.txn.end_txn(txn_id, pid, 0, commit, late.append)
    return late


def test_a_parked_end_txn_is_answered_after_its_write_and_others_are_served_meanwhile(env):
    txn, store = env.txn, env.store
    pid1, pid2 = ongoing(env, env.t1), ongoing(env, env.t2)
    store.slow.add(env.p1)
    late = []
    txn.end_txn(env.t1, pid1, 0, True, late.append)
    assert late == [] and len(store.waiting) == 1
    meta = txn.state.get(env.t1)
    assert (meta.state, meta.pending_state) == (S.ONGOING, S.PREPARE_COMMIT)
    # The same id meanwhile: its transition is pending.
    assert [a.error_code for a in call(txn.end_txn, env.t1, pid1, 0, True)] == [E.CONCURRENT_TRANSACTIONS]
    assert [a.error_code for a in call(txn.add_partitions, env.t1, pid1, 0, [("out", 1)])] == \
        [E.CONCURRENT_TRANSACTIONS]
    assert [a.error_code for a in call(txn.init_producer_id, env.t1, 60000, -1, -1)] == [E.CONCURRENT_TRANSACTIONS]
    # Another id, on another partition, is served at once, markers and all.
    assert [a.error_code for a in call(txn.end_txn, env.t2, pid2, 0, True)] == [E.NONE]
    assert env.written == [("out", 0, env.t2, True)]
    assert txn.state.get(env.t2).state == S.COMPLETE_COMMIT
    # While it waits, tick asks to run again soon, backing off to the cap.
    now = env.clock.now
    polls = [txn.tick() - now for _ in range(8)]
    assert polls[0] <= 2 * MARKER_POLL_MIN_MS and polls[-1] == MARKER_POLL_MAX_MS
    assert late == [] and store.polls == 8
    store.settle()
    # Answered once, its markers written; CompleteCommit's write waits in turn.
    assert txn.tick() - now == MARKER_POLL_MIN_MS
    assert [a.error_code for a in late] == [E.NONE]
    assert env.written[-1] == ("out", 0, env.t1, True)
    assert txn.state.get(env.t1).pending_state == S.COMPLETE_COMMIT
    settle_all(env)
    assert txn.state.get(env.t1).state == S.COMPLETE_COMMIT
    assert store.states(env.t1) == [0, 1, 2, 4]
    # Nothing parked: tick no longer asks for the loop (timers only).
    assert txn.tick() - env.clock.now > MARKER_POLL_MAX_MS


def test_the_completion_write_parks_too_and_is_picked_up(env):
    txn, store = env.txn, env.store
    late = parked_end(env, env.t1, env.p1, commit=False)
    store.settle()  # PrepareAbort replicated
    txn.tick()
    # Answered; the markers went out and CompleteAbort's write waits in turn.
    assert [a.error_code for a in late] == [E.NONE] and len(store.waiting) == 1
    meta = txn.state.get(env.t1)
    assert (meta.state, meta.pending_state) == (S.PREPARE_ABORT, S.COMPLETE_ABORT)
    store.settle()
    txn.tick()
    assert txn.state.get(env.t1).state == S.COMPLETE_ABORT and late == late[:1]


def test_a_timed_out_write_answers_coordinator_not_available_and_changes_nothing(env):
    txn, store = env.txn, env.store
    pid1 = ongoing(env, env.t1)
    before = repr(txn.state.get(env.t1))
    store.slow.add(env.p1)
    late = []
    txn.end_txn(env.t1, pid1, 0, True, late.append)
    # What the real store answers when request.timeout.ms ran out
    # (poll_persist maps REQUEST_TIMED_OUT as Kafka's appendTransactionToLog).
    store.settle(E.COORDINATOR_NOT_AVAILABLE)
    txn.tick()
    assert [a.error_code for a in late] == [E.COORDINATOR_NOT_AVAILABLE]
    assert repr(txn.state.get(env.t1)) == before
    assert env.written == []
    # The client's retry goes through once the followers keep up.
    store.slow.clear()
    assert [a.error_code for a in call(txn.end_txn, env.t1, pid1, 0, True)] == [E.NONE]


def test_unloading_the_partition_answers_its_parked_requests_not_coordinator(env):
    txn, store = env.txn, env.store
    late1, late2 = parked_end(env, env.t1, env.p1), parked_end(env, env.t2, env.p2)
    txn.unload(env.p1)
    assert [a.error_code for a in late1] == [E.NOT_COORDINATOR] and late2 == []
    # The other partition's request still completes; the unloaded one's
    # late settling changes nothing and answers nothing twice.
    settle_all(env)
    assert [a.error_code for a in late2] == [E.NONE] and len(late1) == 1
    assert txn._parked == []


def test_a_leader_epoch_bump_of_a_partition_still_led_keeps_its_parked_end_txn(env):
    """The race of test_cluster_transactions' failover test: EndTxn's
    PrepareCommit waits for a follower that froze; the controller takes the
    follower out of the ISR with a leader-epoch bump (ZooKeeper mode), the
    same broker leading. As in Kafka (makeLeader: no new leader, no
    onElection) the partition stays loaded at its coordinator epoch and the
    EndTxn is answered once the write settles, though a marker's leader is
    frozen too. Reloaded instead, the EndTxn was answered NOT_COORDINATOR and
    its retry CONCURRENT_TRANSACTIONS until every marker is written."""
    txn, store = env.txn, env.store
    env.frozen.add(("out", 0))
    late = parked_end(env, env.t1, env.p1)
    changes = txn.follow({p: 5 for p in range(PARTITIONS)})
    assert late == []
    assert changes == ([], []) and txn.state.coordinator_epochs == dict.fromkeys(range(PARTITIONS), 4)
    store.settle()  # the ISR without the frozen follower: the high watermark passes PrepareCommit
    txn.tick()
    assert [a.error_code for a in late] == [E.NONE]
    assert txn.state.get(env.t1).state == S.PREPARE_COMMIT and env.written == []
    # The marker goes out once its leader is back, at the same coordinator epoch.
    env.frozen.clear()
    for _ in range(3):
        env.clock.now += 1000
        txn.tick()
        settle_all(env)
    assert env.written == [("out", 0, env.t1, True)]
    assert txn.state.get(env.t1).state == S.COMPLETE_COMMIT


def test_follow_loads_new_partitions_at_their_epoch_and_unloads_lost_ones(env):
    txn = env.txn
    late = parked_end(env, env.t1, env.p1)
    # Partition 0 lost (its parked EndTxn answers NOT_COORDINATOR), 1 at a newer epoch, 2 as it was.
    assert txn.follow({1: 6, 2: 4}) == ([(0, 4, 1)], [])
    assert [a.error_code for a in late] == [E.NOT_COORDINATOR]
    # Led again: loaded from the log at the new leader epoch.
    assert txn.follow({0: 7, 1: 6, 2: 4}) == ([], [(0, 7)])
    assert txn.state.coordinator_epochs == {0: 7, 1: 4, 2: 4}
    assert txn.state.get(env.t1).state == S.PREPARE_COMMIT  # the write was in the log
    assert txn.follow({}) == ([(0, 7, 1), (1, 4, 0), (2, 4, 0)], [])


def test_a_partition_led_again_after_another_leader_wrote_is_loaded_again(env):
    """Led at both looks but not in between (this broker paused, or its
    loop busy): the other leader completed the aborted transaction the
    producer ended there and took the next one's AddPartitionsToTxn, and its
    records reached this log as a follower's. Kept as loaded, the
    coordinator answered that transaction's EndTxn(commit) from the
    previous transaction's state (CompleteAbort: INVALID_TXN_STATE); it is
    loaded again at the leader epoch now, as Kafka's onResignation and
    onElection would have, and commits it."""
    from kafkapy.protocol.transaction_log import encode_key, encode_value

    txn, store = env.txn, env.store
    led = dict.fromkeys(range(PARTITIONS), 4)
    pid = ongoing(env, env.t1)
    [a] = call(txn.end_txn, env.t1, pid, 0, False)
    assert a.error_code == 0 and txn.state.get(env.t1).state == S.COMPLETE_ABORT
    # A look that finds nothing moved keeps the load (as for a same-leader epoch bump).
    assert txn.follow({**led, env.p1: 5}) == ([], [])
    # The other leader's coordinator (its own load of the same log) adds a partition; its write lands here.
    other = TransactionCoordinatorState(TxnConfig(num_partitions=PARTITIONS), lambda: 0, env.clock)
    other.load_partition(env.p1, 6, [(k, v) for q, k, v in store.records if q == env.p1])
    add = other.add_partitions(env.t1, pid, 0, [("out", 1)]).persist
    store.records.append((env.p1, encode_key(env.t1), encode_value(add.transit.log_value())))
    assert txn.follow({**led, env.p1: 7}) == ([(env.p1, 4, 1)], [(env.p1, 7)])
    assert txn.state.get(env.t1).state == S.ONGOING and txn.state.coordinator_epochs[env.p1] == 7
    [a] = call(txn.end_txn, env.t1, pid, 0, True)
    assert a.error_code == E.NONE


def test_close_drops_parked_requests(env):
    txn, store = env.txn, env.store
    late = parked_end(env, env.t1, env.p1)
    txn.close()
    store.settle()
    txn.tick()
    assert late == [] and txn._parked == []


def test_a_failing_reply_does_not_strand_the_other_parked_requests(env):
    txn, store = env.txn, env.store
    pid1, pid2 = ongoing(env, env.t1), ongoing(env, env.t2)
    store.slow |= {env.p1, env.p2}

    def broken(answer):
        raise OSError("pipe gone")
    late2 = []
    txn.end_txn(env.t1, pid1, 0, True, broken)
    txn.end_txn(env.t2, pid2, 0, True, late2.append)
    settle_all(env)
    assert [a.error_code for a in late2] == [E.NONE]
    # The unanswered request's transaction goes on too (markers, completion).
    assert txn.state.get(env.t1).state == S.COMPLETE_COMMIT
    assert txn.state.get(env.t2).state == S.COMPLETE_COMMIT


@pytest.mark.parametrize("version", [3, 4])
def test_add_partitions_to_txn_is_answered_when_its_write_settles(env, version):
    txn, store = env.txn, env.store
    [a] = call(txn.init_producer_id, env.t1, 60000, -1, -1)
    pid = a.producer_id
    store.slow.add(env.p1)
    ctx = Ctx(24, version, store)
    topics = [{"name": "out", "partitions": [0, 1]}]
    if version < 4:
        fields = dict(v3_and_below_transactional_id=env.t1, v3_and_below_producer_id=pid,
                      v3_and_below_producer_epoch=0, v3_and_below_topics=topics)
    else:  # batched: one answer once each transaction's result is in
        fields = dict(transactions=[
            {"transactional_id": env.t1, "producer_id": pid, "producer_epoch": 0, "topics": topics},
            {"transactional_id": env.t1, "producer_id": pid, "producer_epoch": 0, "verify_only": True,
             "topics": [{"name": "out", "partitions": [2]}]}])
    TXN_HANDLERS[24](txn, ctx, construct(_cls(24, version, "request"), fields))
    assert ctx.replies == []
    store.settle()
    txn.tick()
    [data] = ctx.replies
    response = construct(_cls(24, version, "response"), data)
    if version < 4:
        [topic] = response.results_by_topic_v3_and_below
    else:
        added, verified = response.results_by_transaction
        [topic] = added.topic_results
        assert verified.topic_results[0].results_by_partition[0].partition_error_code == E.TRANSACTION_ABORTABLE
    assert [p.partition_error_code for p in topic.results_by_partition] == [0, 0]
    assert txn.state.get(env.t1).topic_partitions == {("out", 0), ("out", 1)}


# ---------------------------------------------------------------- the real store's settling


class FrozenFollowerPartition:
    """A leader partition whose high watermark stays put until ``replicated``."""

    partition_id = 2

    def __init__(self):
        self.answer = (False, E.NONE)

    def check_enough_replicas_reach_offset(self, required_offset):
        return self.answer


def test_the_store_settles_a_waiting_append_by_its_high_watermark_leadership_or_deadline():
    store = TransactionStateStore.__new__(TransactionStateStore)  # no broker: poll_persist only
    store.config = {"request.timeout.ms": 30000}
    now = [100.0]
    store.monotonic = lambda: now[0]
    partition = FrozenFollowerPartition()
    pending = PendingAppend(partition, 11, 10, deadline=now[0] + 30)
    assert store.poll_persist(pending) is None
    partition.answer = (True, E.NONE)
    assert store.poll_persist(pending) == E.NONE
    partition.answer = (False, E.NOT_LEADER_OR_FOLLOWER)  # leadership moved
    assert store.poll_persist(pending) == E.NOT_COORDINATOR
    partition.answer = (True, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert store.poll_persist(pending) == E.COORDINATOR_NOT_AVAILABLE
    partition.answer = (False, E.NONE)
    now[0] += 29.9
    assert store.poll_persist(pending) is None
    now[0] += 0.1  # request.timeout.ms ran out: REQUEST_TIMED_OUT, mapped
    assert store.poll_persist(pending) == E.COORDINATOR_NOT_AVAILABLE


def test_a_completion_that_fails_for_want_of_replicas_is_written_again(env):
    """CompleteCommit failing with COORDINATOR_NOT_AVAILABLE (a write timed
    out, min.insync.replicas not met) is retried every marker retry interval,
    the transaction pending CompleteCommit meanwhile (Kafka's
    txnLogAppendRetryQueue); it used to stay in PrepareCommit until the
    partition was reloaded."""
    txn, store = env.txn, env.store
    late = parked_end(env, env.t1, env.p1)
    store.settle()
    txn.tick()  # PrepareCommit replicated: answered, markers written, CompleteCommit parked
    assert [a.error_code for a in late] == [E.NONE] and len(store.waiting) == 1
    store.settle(E.COORDINATOR_NOT_AVAILABLE)
    txn.tick()
    meta = txn.state.get(env.t1)
    assert (meta.state, meta.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    pid = meta.producer_id
    assert [a.error_code for a in call(txn.end_txn, env.t1, pid, 0, True)] == [E.CONCURRENT_TRANSACTIONS]
    assert store.waiting == []
    env.clock.now += 100
    txn.tick()  # the retry interval passed: written again
    assert len(store.waiting) == 1 and store.waiting[0].persist.kind == "complete"
    settle_all(env)
    meta = txn.state.get(env.t1)
    assert (meta.state, meta.pending_state) == (S.COMPLETE_COMMIT, None)


def test_a_parked_request_whose_continuation_fails_is_answered(env, monkeypatch):
    """A continuation that raises (here completing the transition) answers
    the parked request UNKNOWN_SERVER_ERROR instead of leaving its client
    waiting for its request timeout."""
    [a] = call(env.txn.init_producer_id, env.t1, 60000, -1, -1)
    env.store.slow.add(env.p1)
    late = []
    env.txn.add_partitions(env.t1, a.producer_id, 0, [("out", 0)], late.append)
    assert late == []

    def broken(persist, error_code=0):
        raise RuntimeError("broken completion")

    monkeypatch.setattr(env.txn.state, "complete", broken)
    env.store.settle()
    env.txn.tick()
    assert [a.error_code for a in late] == [E.UNKNOWN_SERVER_ERROR]
