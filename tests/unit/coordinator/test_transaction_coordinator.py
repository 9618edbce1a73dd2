"""The transaction state machine (Kafka's TransactionMetadata) and the coordinator's
decisions (Kafka's TransactionCoordinator), without I/O: every Persist is "written"
by the test, which checks the record and completes it."""

import pytest

from kafkapy.coordinator.transaction.coordinator import (
    Answer, Persist, TransactionCoordinatorState, TxnConfig, WriteMarkers, append_error_to_coordinator_error)
from kafkapy.coordinator.transaction.metadata import (
    IllegalTransition, TransactionMetadata, TransactionState as S, VALID_PREVIOUS_STATES)
from kafkapy.protocol.transaction_log import decode_value, encode_key, encode_value
from kafkapy.protocol.errors import ErrorCode as E

TXN = "txn-a"
TP0, TP1 = ("out", 0), ("out", 1)


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self):
        return self.now


class Harness:
    """A coordinator serving every __transaction_state partition at coordinator epoch 7."""

    def __init__(self, partitions=4, **config):
        self.clock = Clock()
        self.next_pid = 1000
        self.log = []  # (key, value bytes or None) written to __transaction_state, in order
        self.state = TransactionCoordinatorState(TxnConfig(num_partitions=partitions, **config),
                                                 self._pid, self.clock)
        for p in range(partitions):
            self.state.load_partition(p, 7, [])

    def _pid(self):
        self.next_pid += 1
        return self.next_pid

    def write(self, result, error=0):
        """Persist ``result.persist`` (or fail it with ``error``) and complete it; returns the next Result."""
        persist = result.persist
        assert isinstance(persist, Persist), result
        if not error:
            value = None if persist.tombstone else encode_value(persist.transit.log_value())
            self.log.append((encode_key(persist.transactional_id), value))
        return self.state.complete(persist, error)

    def init(self, txn=TXN, timeout=60000, pid=-1, epoch=-1):
        result = self.state.init_producer_id(txn, timeout, pid, epoch)
        while result.persist is not None:
            result = self.write(result)
            if result.markers is not None:
                self.finish_markers(result.markers)
        return result.answer

    def add(self, pid, epoch, *partitions, txn=TXN):
        result = self.state.add_partitions(txn, pid, epoch, partitions)
        return result.answer if result.persist is None else self.write(result).answer

    def end(self, pid, epoch, commit, txn=TXN, write_markers=True):
        result = self.state.end_txn(txn, pid, epoch, commit)
        if result.persist is None:
            return result.answer, None
        result = self.write(result)
        if result.markers is not None and write_markers:
            self.finish_markers(result.markers)
        return result.answer, result.markers

    def finish_markers(self, markers):
        done = self.state.markers_written(markers)
        assert self.write(done).answer is None

    def meta(self, txn=TXN):
        return self.state.get(txn)


# ---------------------------------------------------------------- TransactionMetadata


def test_valid_previous_states_are_kafkas():
    assert VALID_PREVIOUS_STATES[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS_STATES[S.DEAD] == {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}
    assert [s.kafka_name for s in S] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                         "CompleteAbort", "Dead", "PrepareEpochFence"]
    assert S.from_name("PrepareEpochFence") is S.PREPARE_EPOCH_FENCE and S.from_name("nope") is None


def test_metadata_full_cycle_and_checks():
    m = TransactionMetadata("t", 5, producer_epoch=0, txn_timeout_ms=100, txn_last_update_timestamp=1)
    transit = m.prepare_add_partitions({TP0}, now_ms=10)
    assert m.pending_state == S.ONGOING and m.state == S.EMPTY
    with pytest.raises(IllegalTransition):  # one pending transition at a time
        m.prepare_add_partitions({TP1}, now_ms=11)
    m.complete_transition_to(transit)
    assert (m.state, m.topic_partitions, m.txn_start_timestamp, m.pending_state) == (S.ONGOING, {TP0}, 10, None)
    # Adding more keeps the start time.
    m.complete_transition_to(m.prepare_add_partitions({TP1}, now_ms=20))
    assert m.txn_start_timestamp == 10 and m.topic_partitions == {TP0, TP1}
    with pytest.raises(IllegalTransition):  # Ongoing -> CompleteCommit skips PrepareCommit
        m._prepare(S.COMPLETE_COMMIT, 5, 0, -1, 100, frozenset(), 10, 30)
    m.complete_transition_to(m.prepare_abort_or_commit(S.PREPARE_COMMIT, 30))
    complete = m.prepare_complete(40)
    assert complete.txn_state == S.COMPLETE_COMMIT and complete.topic_partitions == frozenset()
    m.complete_transition_to(complete)
    assert m.state == S.COMPLETE_COMMIT and m.topic_partitions == set() and m.txn_last_update_timestamp == 40


def test_complete_refuses_a_transit_that_does_not_match():
    m = TransactionMetadata("t", 5, producer_epoch=3, txn_timeout_ms=100)
    transit = m.prepare_add_partitions({TP0}, 10)
    bad = transit.__class__(**{**transit.__dict__, "producer_epoch": 4})
    with pytest.raises(IllegalTransition):
        m.complete_transition_to(bad)
    m2 = TransactionMetadata("t", 5, producer_epoch=3)
    with pytest.raises(IllegalTransition):  # nothing pending
        m2.complete_transition_to(transit)


def test_epoch_bump_rules_kip_360():
    m = TransactionMetadata("t", 5, producer_epoch=3, last_producer_epoch=-1)
    # No expected epoch: bump, forget the last one.
    err, t = m.prepare_increment_producer_epoch(100, None, 1)
    assert err == 0 and (t.producer_epoch, t.last_producer_epoch) == (4, -1)
    m.complete_transition_to(t)
    # Expected == current: bump and remember the previous epoch.
    err, t = m.prepare_increment_producer_epoch(100, 4, 2)
    assert err == 0 and (t.producer_epoch, t.last_producer_epoch) == (5, 4)
    m.complete_transition_to(t)
    # Expected == last: a retry of that bump: same epoch again.
    err, t = m.prepare_increment_producer_epoch(100, 4, 3)
    assert err == 0 and (t.producer_epoch, t.last_producer_epoch) == (5, 4)
    m.complete_transition_to(t)
    # Anything else is a zombie.
    assert m.prepare_increment_producer_epoch(100, 2, 4) == (E.PRODUCER_FENCED, None)
    assert m.pending_state is None


def test_fence_does_not_bump_twice_after_a_failed_fence():
    m = TransactionMetadata("t", 5, producer_epoch=3, state=S.ONGOING, topic_partitions={TP0})
    assert m.prepare_fence_producer_epoch().producer_epoch == 4
    m.abort_transition()
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 3
    m.abort_transition()
    m.producer_epoch = 2**15 - 1
    m.has_failed_epoch_fence = False
    with pytest.raises(IllegalTransition):
        m.prepare_fence_producer_epoch()


def test_log_value_round_trip_of_metadata():
    m = TransactionMetadata("t", 5, producer_epoch=3, txn_timeout_ms=100, state=S.PREPARE_ABORT,
                            topic_partitions={TP0, TP1}, txn_start_timestamp=7, txn_last_update_timestamp=9)
    loaded = TransactionMetadata.from_log_value("t", decode_value(encode_value(m.current().log_value())))
    assert loaded.current() == m.current()


# ---------------------------------------------------------------- coordinator


def test_init_commit_cycle_writes_kafkas_records():
    h = Harness()
    answer = h.init()
    assert answer == Answer(0, 1001, 0)
    assert h.add(1001, 0, TP0, TP1) == Answer(0)
    assert h.meta().state == S.ONGOING
    answer, markers = h.end(1001, 0, commit=True, write_markers=False)
    assert answer == Answer(0)
    assert markers.commit and markers.partitions == {TP0, TP1} and markers.coordinator_epoch == 7
    assert (markers.producer_id, markers.producer_epoch) == (1001, 0)
    # While the markers are written, the transaction answers CONCURRENT_TRANSACTIONS.
    assert h.meta().state == S.PREPARE_COMMIT and h.meta().pending_state == S.COMPLETE_COMMIT
    assert h.state.add_partitions(TXN, 1001, 0, [TP0]).answer == Answer(E.CONCURRENT_TRANSACTIONS)
    assert h.state.init_producer_id(TXN, 60000).answer == Answer(E.CONCURRENT_TRANSACTIONS)
    h.finish_markers(markers)
    assert h.meta().state == S.COMPLETE_COMMIT and h.meta().topic_partitions == set()
    states = [decode_value(v).status for _, v in h.log]
    assert states == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    # A retried EndTxn of the same outcome is fine; the other outcome is not.
    assert h.end(1001, 0, commit=True)[0] == Answer(0)
    assert h.end(1001, 0, commit=False)[0] == Answer(E.INVALID_TXN_STATE)
    # A next transaction starts from CompleteCommit.
    assert h.add(1001, 0, TP1) == Answer(0) and h.meta().topic_partitions == {TP1}


def test_add_partitions_already_in_the_transaction_writes_nothing():
    h = Harness()
    h.init()
    h.add(1001, 0, TP0)
    written = len(h.log)
    assert h.add(1001, 0, TP0) == Answer(0)
    assert len(h.log) == written


def test_request_errors():
    h = Harness(transaction_max_timeout_ms=1000)
    assert h.state.init_producer_id("", 100).answer == Answer(E.INVALID_REQUEST)
    assert h.state.init_producer_id(TXN, 1001).answer == Answer(E.INVALID_TRANSACTION_TIMEOUT)
    assert h.state.init_producer_id(TXN, 0).answer == Answer(E.INVALID_TRANSACTION_TIMEOUT)
    assert h.state.end_txn("unknown", 1, 0, True).answer == Answer(E.INVALID_PRODUCER_ID_MAPPING)
    assert h.state.add_partitions("unknown", 1, 0, [TP0]).answer == Answer(E.INVALID_PRODUCER_ID_MAPPING)
    h.init(timeout=500)
    assert h.state.add_partitions(TXN, 999, 0, [TP0]).answer == Answer(E.INVALID_PRODUCER_ID_MAPPING)
    assert h.state.add_partitions(TXN, 1001, 1, [TP0]).answer == Answer(E.PRODUCER_FENCED)
    assert h.state.end_txn(TXN, 1001, 1, True).answer == Answer(E.PRODUCER_FENCED)
    # EndTxn with no transaction open.
    assert h.state.end_txn(TXN, 1001, 0, True).answer == Answer(E.INVALID_TXN_STATE)
    assert h.state.end_txn("", 1001, 0, True).answer == Answer(E.INVALID_REQUEST)


def test_init_bumps_epoch_and_fences_the_old_producer():
    h = Harness()
    assert h.init() == Answer(0, 1001, 0)
    assert h.init() == Answer(0, 1001, 1)  # a second producer with the same id
    # The zombie (epoch 0) is fenced everywhere.
    assert h.state.add_partitions(TXN, 1001, 0, [TP0]).answer == Answer(E.PRODUCER_FENCED)
    assert h.state.end_txn(TXN, 1001, 0, False).answer == Answer(E.PRODUCER_FENCED)
    # KIP-360: the current producer re-initialising with its id and epoch gets a bump...
    assert h.init(pid=1001, epoch=1) == Answer(0, 1001, 2)
    # ...a retry of that call (its answer lost) gets the same epoch...
    assert h.init(pid=1001, epoch=1) == Answer(0, 1001, 2)
    # ...and an older epoch or another producer id is fenced.
    assert h.state.init_producer_id(TXN, 60000, 1001, 0).answer == Answer(E.PRODUCER_FENCED)
    assert h.state.init_producer_id(TXN, 60000, 555, 0).answer == Answer(E.PRODUCER_FENCED)


def test_init_on_an_open_transaction_aborts_it_under_a_bumped_epoch():
    h = Harness()
    h.init()
    h.add(1001, 0, TP0)
    result = h.state.init_producer_id(TXN, 60000)
    assert result.answer is None and result.persist.kind == "fence"
    assert result.persist.transit.txn_state == S.PREPARE_ABORT and result.persist.transit.producer_epoch == 1
    result = h.write(result)
    # The new producer is told to retry; ABORT markers go out under the bumped epoch.
    assert result.answer == Answer(E.CONCURRENT_TRANSACTIONS)
    assert not result.markers.commit and result.markers.producer_epoch == 1
    assert result.markers.partitions == {TP0}
    # The old producer cannot commit any more.
    assert h.state.end_txn(TXN, 1001, 0, True).answer == Answer(E.PRODUCER_FENCED)
    h.finish_markers(result.markers)
    assert h.meta().state == S.COMPLETE_ABORT
    # The retry gets the second bump.
    assert h.init() == Answer(0, 1001, 2)


def test_failed_fence_write_does_not_bump_again():
    h = Harness()
    h.init()
    h.add(1001, 0, TP0)
    result = h.state.init_producer_id(TXN, 60000)
    result = h.write(result, error=E.NOT_ENOUGH_REPLICAS)
    assert result.answer == Answer(E.COORDINATOR_NOT_AVAILABLE)
    m = h.meta()
    assert m.state == S.ONGOING and m.pending_state is None and m.has_failed_epoch_fence
    retry = h.state.init_producer_id(TXN, 60000)
    assert retry.persist.transit.producer_epoch == 1  # not 2


def test_epoch_exhaustion_rotates_the_producer_id():
    h = Harness()
    h.init()
    h.meta().producer_epoch = 2**15 - 2
    # The producer recovering at the last usable epoch gets a new producer id.
    assert h.init(pid=1001, epoch=2**15 - 2) == Answer(0, 1002, 0)
    assert (h.meta().last_producer_id, h.meta().last_producer_epoch) == (1001, 2**15 - 2)
    # A retry of that call (previous id, exhausted epoch) is recognised, not fenced.
    assert h.init(pid=1001, epoch=2**15 - 2) == Answer(0, 1002, 0)
    # Without an expected epoch the rotation forgets the last epoch.
    h.meta().producer_epoch = 2**15 - 2
    assert h.init() == Answer(0, 1003, 0)
    assert h.meta().last_producer_epoch == -1


def test_failed_write_leaves_the_metadata_unchanged():
    h = Harness()
    h.init()
    result = h.state.add_partitions(TXN, 1001, 0, [TP0])
    assert h.write(result, error=E.NOT_LEADER_OR_FOLLOWER).answer == Answer(E.NOT_COORDINATOR)
    assert h.meta().state == S.EMPTY and h.meta().pending_state is None and h.meta().topic_partitions == set()
    assert h.add(1001, 0, TP0) == Answer(0)


def test_abort_path_and_prepare_states_answers():
    h = Harness()
    h.init()
    h.add(1001, 0, TP0)
    answer, markers = h.end(1001, 0, commit=False, write_markers=False)
    assert answer == Answer(0) and not markers.commit
    h.finish_markers(markers)
    # Between PrepareAbort's write and the markers, Kafka's per-state answers:
    h.add(1001, 0, TP1)
    result = h.state.end_txn(TXN, 1001, 0, False)
    h.state.complete(result.persist, 0)  # PrepareAbort applied; markers not yet written
    h.meta().pending_state = None  # as after a coordinator reload, before markers are resent
    assert h.state.end_txn(TXN, 1001, 0, False).answer == Answer(E.CONCURRENT_TRANSACTIONS)
    assert h.state.end_txn(TXN, 1001, 0, True).answer == Answer(E.INVALID_TXN_STATE)


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch():
    h = Harness()
    h.init(timeout=1000)
    h.add(1001, 0, TP0)
    h.clock.now += 1000
    assert h.state.abort_timed_out_transactions() == []  # not past it yet (strictly greater)
    h.clock.now += 1
    [result] = h.state.abort_timed_out_transactions()
    assert result.answer is None and result.persist.kind == "timeout"
    result = h.write(result)
    assert result.answer is None and result.markers.producer_epoch == 1 and not result.markers.commit
    assert h.state.abort_timed_out_transactions() == []  # pending: not twice
    h.finish_markers(result.markers)
    assert h.meta().state == S.COMPLETE_ABORT
    # The timed-out producer is fenced.
    assert h.state.end_txn(TXN, 1001, 0, True).answer == Answer(E.PRODUCER_FENCED)


def test_expired_ids_are_tombstoned_and_forgotten():
    h = Harness(transactional_id_expiration_ms=5000)
    h.init()
    h.init(txn="busy")
    h.add(1002, 0, TP0, txn="busy")
    h.clock.now += 5000
    persists = h.state.expire_transactional_ids()
    assert [p.transactional_id for p in persists] == [TXN]  # "busy" is Ongoing
    [persist] = persists
    assert persist.tombstone
    h.log.append((encode_key(TXN), None))
    assert h.state.complete(persist, 0).answer is None
    assert h.meta() is None
    assert h.state.describe(TXN)["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
    # The id starts afresh with a new producer id.
    assert h.init().producer_id == 1003 and h.meta().producer_epoch == 0


def test_load_replays_records_and_resends_pending_markers():
    h = Harness()
    h.init()
    h.add(1001, 0, TP0, TP1)
    h.end(1001, 0, commit=True, write_markers=False)
    h.init(txn="other")
    h.init(txn="gone")
    records = list(h.log) + [(encode_key("gone"), None)]
    p = h.state.partition_for(TXN)
    # A new coordinator (another broker, or after a restart) loads the partitions.
    fresh = TransactionCoordinatorState(TxnConfig(num_partitions=4), lambda: 5000, h.clock)
    for partition in range(4):
        fresh.begin_load(partition)
    assert fresh.init_producer_id(TXN, 60000).answer == Answer(E.COORDINATOR_LOAD_IN_PROGRESS)
    pending = []
    for partition in range(4):
        pending += fresh.load_partition(partition, 8, [r for r in records
                                                       if fresh.partition_for(_key_id(r[0])) == partition])
    [markers] = pending
    assert isinstance(markers, WriteMarkers)
    assert (markers.transactional_id, markers.commit, markers.partitions, markers.coordinator_epoch) == \
        (TXN, True, frozenset({TP0, TP1}), 8)
    assert fresh.get("gone") is None and fresh.get("other").state == S.EMPTY
    assert p == fresh.partition_for(TXN)
    done = fresh.markers_written(markers)
    assert done.persist.transit.txn_state == S.COMPLETE_COMMIT
    fresh.complete(done.persist, 0)
    assert fresh.get(TXN).state == S.COMPLETE_COMMIT


def _key_id(key):
    from kafkapy.protocol.transaction_log import decode_key
    return decode_key(key)


def test_not_coordinator_and_stale_completions():
    h = Harness()
    h.init()
    p = h.state.partition_for(TXN)
    result = h.state.add_partitions(TXN, 1001, 0, [TP0])
    h.state.unload_partition(p)
    assert h.state.complete(result.persist, 0).answer == Answer(E.NOT_COORDINATOR)
    assert h.state.init_producer_id(TXN, 60000).answer == Answer(E.NOT_COORDINATOR)
    assert h.state.describe(TXN)["error_code"] == E.NOT_COORDINATOR


def test_verify_only_partitions():
    h = Harness()
    h.init()
    h.add(1001, 0, TP0)
    assert h.state.verify_partitions(TXN, 1001, 0, [TP0, TP1]) == {TP0: 0, TP1: E.TRANSACTION_ABORTABLE}
    assert h.state.verify_partitions(TXN, 1001, 1, [TP0]) == {TP0: E.PRODUCER_FENCED}
    assert h.state.verify_partitions(TXN, 7, 0, [TP0]) == {TP0: E.INVALID_PRODUCER_ID_MAPPING}
    assert h.state.verify_partitions("", 7, 0, [TP0]) == {TP0: E.INVALID_REQUEST}


def test_describe_and_list():
    h = Harness()
    h.init()
    h.add(1001, 0, TP1, TP0, ("in", 3))
    h.init(txn="idle")
    d = h.state.describe(TXN)
    assert d["error_code"] == 0 and d["transaction_state"] == "Ongoing" and d["producer_id"] == 1001
    assert d["topics"] == {"in": [3], "out": [0, 1]} and d["transaction_start_time_ms"] == h.clock.now
    assert h.state.list_transactions() == (0, [], [("idle", 1002, "Empty"), (TXN, 1001, "Ongoing")])
    assert h.state.list_transactions(state_names=["Ongoing", "Bogus"]) == (0, ["Bogus"], [(TXN, 1001, "Ongoing")])
    assert h.state.list_transactions(producer_ids=[1002])[2] == [("idle", 1002, "Empty")]
    h.clock.now += 100
    assert h.state.list_transactions(duration_ms=50)[2] == [("idle", 1002, "Empty"), (TXN, 1001, "Ongoing")]
    assert h.state.list_transactions(duration_ms=100)[2] == [("idle", 1002, "Empty")]


def test_append_errors_map_as_kafka():
    assert append_error_to_coordinator_error(E.REQUEST_TIMED_OUT) == E.COORDINATOR_NOT_AVAILABLE
    assert append_error_to_coordinator_error(E.KAFKA_STORAGE_ERROR) == E.NOT_COORDINATOR
    assert append_error_to_coordinator_error(E.RECORD_LIST_TOO_LARGE) == E.UNKNOWN_SERVER_ERROR
    assert append_error_to_coordinator_error(E.INVALID_RECORD) == E.INVALID_RECORD


def _failover(h, cut):
    """A coordinator of another broker loading ``h``'s log cut after its first
    ``cut`` records (what the dead coordinator's followers had): its state,
    and the markers it resends."""
    fresh = TransactionCoordinatorState(TxnConfig(num_partitions=4), lambda: 5000, h.clock)
    p = fresh.partition_for(TXN)
    records = [r for r in h.log[:cut] if fresh.partition_for(_key_id(r[0])) == p]
    pending = fresh.load_partition(p, 8, records)
    for other in set(range(4)) - {p}:
        fresh.load_partition(other, 8, [])
    return fresh, pending


def _persisted(state, result):
    """Complete ``result``'s Persist as written; the next Result."""
    return state.complete(result.persist, 0)


@pytest.mark.parametrize("commit", [True, False])
def test_a_retried_end_txn_after_a_coordinator_failover_answers_as_kafka(commit):
    """Kafka 3.9's handleEndTransaction, state by state, for the client's
    retry of EndTxn (same producer id and epoch) at the next coordinator,
    whatever the dead one had logged: the retry is never told
    INVALID_TXN_STATE for the transaction it ended, only the opposite
    outcome is."""
    h = Harness()
    h.init()
    h.add(1001, 0, TP0)
    ongoing = len(h.log)
    answer, markers = h.end(1001, 0, commit=commit, write_markers=False)
    assert answer == Answer(E.NONE)
    prepared = len(h.log)
    h.finish_markers(markers)
    completed = len(h.log)

    # Died before PrepareX reached the followers: the retry ends it here.
    fresh, pending = _failover(h, ongoing)
    assert pending == [] and fresh.get(TXN).state == S.ONGOING
    result = fresh.end_txn(TXN, 1001, 0, commit)
    assert result.answer is None and result.persist.transit.txn_state == (
        S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    after = _persisted(fresh, result)
    assert after.answer == Answer(E.NONE) and after.markers.commit == commit

    # Died with PrepareX logged (answered or not): the new coordinator resends
    # the markers; until CompleteX is logged the retry is told to wait.
    fresh, [resent] = _failover(h, prepared)
    assert resent.commit == commit and resent.coordinator_epoch == 8
    assert fresh.end_txn(TXN, 1001, 0, commit).answer == Answer(E.CONCURRENT_TRANSACTIONS)
    assert fresh.end_txn(TXN, 1001, 0, not commit).answer == Answer(E.CONCURRENT_TRANSACTIONS)  # pending wins
    _persisted(fresh, fresh.markers_written(resent))
    assert fresh.end_txn(TXN, 1001, 0, commit).answer == Answer(E.NONE)
    assert fresh.end_txn(TXN, 1001, 0, not commit).answer == Answer(E.INVALID_TXN_STATE)

    # Died after CompleteX: the retry is told it is done.
    fresh, pending = _failover(h, completed)
    assert pending == []
    assert fresh.end_txn(TXN, 1001, 0, commit).answer == Answer(E.NONE)
    assert fresh.end_txn(TXN, 1001, 0, not commit).answer == Answer(E.INVALID_TXN_STATE)
    # A next transaction goes on at the same epoch.
    assert fresh.add_partitions(TXN, 1001, 0, [TP1]).persist.transit.txn_state == S.ONGOING


def test_a_loaded_prepare_commit_answers_other_requests_as_kafka():
    """While the markers of a loaded PrepareCommit are resent: InitProducerId
    (KIP-360, with the producer's id and epoch, or a new producer without)
    and AddPartitionsToTxn wait (CONCURRENT_TRANSACTIONS); a stale epoch is
    fenced; verification says CONCURRENT_TRANSACTIONS."""
    h = Harness()
    h.init()
    h.add(1001, 0, TP0)
    h.end(1001, 0, commit=True, write_markers=False)
    fresh, [resent] = _failover(h, len(h.log))
    assert fresh.init_producer_id(TXN, 60000, 1001, 0).answer == Answer(E.CONCURRENT_TRANSACTIONS)
    assert fresh.init_producer_id(TXN, 60000).answer == Answer(E.CONCURRENT_TRANSACTIONS)
    assert fresh.add_partitions(TXN, 1001, 0, [TP1]).answer == Answer(E.CONCURRENT_TRANSACTIONS)
    assert fresh.verify_partitions(TXN, 1001, 0, [TP0]) == {TP0: E.CONCURRENT_TRANSACTIONS}
    assert fresh.end_txn(TXN, 1001, 1, True).answer == Answer(E.PRODUCER_FENCED)
    _persisted(fresh, fresh.markers_written(resent))
    # Completed: the KIP-360 InitProducerId bumps the epoch (last epoch 0 kept for its retry).
    transit = fresh.init_producer_id(TXN, 60000, 1001, 0).persist.transit
    assert (transit.producer_epoch, transit.last_producer_epoch, transit.txn_state) == (1, 0, S.EMPTY)


def test_a_transaction_aborted_for_its_timeout_fences_the_commit_not_invalid_state():
    """The old coordinator aborted the transaction past its timeout (an epoch
    fence: epoch + 1) and died: the client's EndTxn(commit) at its old epoch
    is PRODUCER_FENCED at the next coordinator, as in Kafka, not
    INVALID_TXN_STATE."""
    h = Harness()
    h.init()
    h.add(1001, 0, TP0)
    h.clock.now += 60001
    [result] = h.state.abort_timed_out_transactions()
    assert result.persist.transit.producer_epoch == 1
    h.write(result)
    fresh, [resent] = _failover(h, len(h.log))
    assert not resent.commit and resent.producer_epoch == 1
    assert fresh.end_txn(TXN, 1001, 0, True).answer == Answer(E.PRODUCER_FENCED)
    _persisted(fresh, fresh.markers_written(resent))
    assert fresh.end_txn(TXN, 1001, 0, True).answer == Answer(E.PRODUCER_FENCED)
