"""KIP-890 verification's processor half (server/txn_verification.py):
the AddPartitionsToTxnManager's requests to a coordinator and what each
answer becomes, and the produce error mapping; the group coordinator
process's OffsetCommitVerification (TxnOffsetCommit) over a stub broker.

The coordinator is a small loopback peer that decodes each AddPartitionsToTxn
v4 request with kafkapy's schemas and answers a chosen error per partition;
it can hold its answers (a frozen coordinator) to show that transactions
queued meanwhile travel together in the next request and that nothing
waits on the caller's thread."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from support.loopback_peer import LoopbackPeer

from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.replication.purgatory import DelayedVerification, from_wire
from kafkapy.server.txn_verification import AddPartitionsToTxnManager, OffsetCommitVerification, produce_error
from kafkapy.storage.producer_state import NOT_VERIFIED

pytestmark = pytest.mark.timeout(30)

ADD_PARTITIONS_TO_TXN = 24


class Coordinator(LoopbackPeer):
    """Answers AddPartitionsToTxn v4: ``errors.get((txn id, topic, p), 0)``
    per partition, or ``top_error`` for the whole request."""

    def __init__(self, errors=None, top_error=0, frozen=False):
        self.errors = errors or {}
        self.top_error = top_error
        self.requests = []  # [[(txn id, pid, epoch, verify_only, {topic: [partitions]})]]
        super().__init__(ADD_PARTITIONS_TO_TXN, 4, self._record, self._answer, frozen)

    def _record(self, request):
        self.requests.append([(t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only,
                               {x.name: list(x.partitions) for x in t.topics}) for t in request.transactions])

    def _answer(self, request):
        return {"throttle_time": 0, "error_code": self.top_error, "results_by_transaction": [
            {"transactional_id": t.transactional_id, "topic_results": [
                {"name": x.name, "results_by_partition": [
                    {"partition_index": p,
                     "partition_error_code": int(self.errors.get((t.transactional_id, x.name, p), 0))}
                    for p in x.partitions]} for x in t.topics]} for t in request.transactions]}


def _op(txn_id, partitions, pid=7, epoch=0):
    return DelayedVerification({}, 0, txn_id, pid, epoch, [(t, p, (epoch, -1, -1)) for t, p in partitions])


def _manager(coordinator):
    woken = threading.Event()
    manager = AddPartitionsToTxnManager(lambda txn_id: (2, coordinator.address), woken.set, b"test")
    return manager, woken


def _answers(manager, woken, n):
    out = []
    deadline = time.monotonic() + 10
    while len(out) < n and time.monotonic() < deadline:
        woken.wait(0.5)
        woken.clear()
        out += manager.completions()
    return out


def test_answers_per_partition_and_the_request_shape():
    coordinator = Coordinator({("a", "t", 1): E.TRANSACTION_ABORTABLE})
    manager, woken = _manager(coordinator)
    try:
        op = _op("a", [("t", 0), ("t", 1), ("u", 0)])
        manager.verify("conn-1", op)
        (answer,) = _answers(manager, woken, 1)
        assert answer == ("conn-1", op, {("t", 1): E.TRANSACTION_ABORTABLE})
        assert coordinator.requests == [[("a", 7, 0, True, {"t": [0, 1], "u": [0]})]]
    finally:
        manager.close()
        coordinator.close()


def test_transactions_queued_while_one_is_in_flight_go_in_one_request():
    coordinator = Coordinator(frozen=True)
    manager, woken = _manager(coordinator)
    try:
        first = _op("a", [("t", 0)])
        started = time.monotonic()
        manager.verify(1, first)
        deadline = time.monotonic() + 5
        while not coordinator.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        later = [_op("b", [("t", 1)]), _op("c", [("t", 2)], pid=8),
                 _op("c", [("t", 2)], pid=8, epoch=1)]  # c again, newer epoch: the older one is fenced
        for i, op in enumerate(later):
            manager.verify(2 + i, op)
        assert time.monotonic() - started < 1.0  # verify never waits for the coordinator
        coordinator.running.set()
        answers = {key: errors for key, _op_, errors in _answers(manager, woken, 4)}
        assert answers == {1: {}, 2: {}, 3: {("t", 2): E.INVALID_PRODUCER_EPOCH}, 4: {}}
        assert [[t[0] for t in r] for r in coordinator.requests] == [["a"], ["b", "c"]]
        assert coordinator.requests[1][1][2] == 1  # the newer epoch asked
    finally:
        manager.close()
        coordinator.close()


def test_a_refused_request_or_a_dead_coordinator_answers_every_partition():
    coordinator = Coordinator(top_error=E.CLUSTER_AUTHORIZATION_FAILED)
    manager, woken = _manager(coordinator)
    try:
        op = _op("a", [("t", 0), ("t", 1)])
        manager.verify("k", op)
        (answer,) = _answers(manager, woken, 1)
        # Kafka hides the broker's missing ClusterAction from the client.
        assert answer[2] == {("t", 0): E.INVALID_TXN_STATE, ("t", 1): E.INVALID_TXN_STATE}
    finally:
        manager.close()
        coordinator.close()
    dead = socket.create_server(("127.0.0.1", 0))
    address = dead.getsockname()
    dead.close()  # nothing listens there now
    manager = AddPartitionsToTxnManager(lambda txn_id: (3, address), woken.set, b"test")
    try:
        op = _op("a", [("t", 0)])
        manager.verify("k", op)
        assert _answers(manager, woken, 1)[0][2] == {("t", 0): E.NETWORK_EXCEPTION}
        manager.locate = lambda txn_id: (None, None)  # no coordinator known
        manager.verify("k2", op)
        assert _answers(manager, woken, 1)[0][2] == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    finally:
        manager.close()


def test_produce_error_mapping_is_kafkas():
    assert produce_error(E.PRODUCER_FENCED, 9) == (E.INVALID_PRODUCER_EPOCH, None)
    assert produce_error(E.TRANSACTION_ABORTABLE, 10) == (E.INVALID_TXN_STATE,
                                                          "Partition was not added to the transaction")
    assert produce_error(E.TRANSACTION_ABORTABLE, 11) == (E.TRANSACTION_ABORTABLE, None)
    for retriable in (E.CONCURRENT_TRANSACTIONS, E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS,
                      E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR):
        code, message = produce_error(retriable, 9)
        assert code == E.NOT_ENOUGH_REPLICAS and message.endswith(E(retriable).name)
    assert produce_error(E.INVALID_PRODUCER_ID_MAPPING, 9) == (E.INVALID_PRODUCER_ID_MAPPING, None)


def test_delayed_verification_travels_as_plain_data():
    op = _op("a", [("t", 0), ("t", 1)])
    back = from_wire(op.to_wire())
    assert (back.transactional_id, back.producer_id, back.producer_epoch, back.partitions, back.result) == \
        ("a", 7, 0, op.partitions, None)
    assert not back.is_satisfied(None)
    back.result = {("t", 1): E.INVALID_TXN_STATE}
    assert back.is_satisfied(None)
    assert back.verified() == {("t", 0): (0, (0, -1, -1)), ("t", 1): (E.INVALID_TXN_STATE, (0, -1, -1))}


class _Partition:
    def __init__(self, token):
        self.token = token
        self.asked = []

    def maybe_start_transaction_verification(self, producer_id):
        self.asked.append(producer_id)
        return self.token


class _Broker:
    """What OffsetCommitVerification reads of the broker: its id, the
    setting, the group partition's verification token."""

    def __init__(self, enabled=True, token=(0, -1, -1)):
        self.broker_id = 1
        self.config = {"transaction.partition.verification.enable": enabled}
        self.partition = _Partition(token)
        self.replica_manager = self

    def get_partition(self, topic, partition):
        return self.partition if (topic, partition) == ("__consumer_offsets", 3) else None


class _TxnState:
    """The process's TransactionCoordinatorState: ``verify_partitions``' answer."""

    def __init__(self, error):
        self.error = error
        self.asked = []

    def verify_partitions(self, txn_id, pid, epoch, partitions):
        self.asked.append((txn_id, pid, epoch, partitions))
        return dict.fromkeys(partitions, int(self.error))


def _start(verification, txn_id="a", generic_error=False):
    out = []
    verification.start(txn_id, 7, 0, "__consumer_offsets", 3, generic_error, lambda *answer: out.append(answer))
    return out


def test_offset_commit_verification_asks_only_what_needs_asking():
    off = _Broker(enabled=False)
    assert _start(OffsetCommitVerification(off, None, b"t")) == [(E.NONE, None)]
    assert off.partition.asked == []  # the setting off: nothing looked at
    assert _start(OffsetCommitVerification(_Broker(), None, b"t"), txn_id=None) == [(E.NONE, None)]
    open_here = _Broker(token=None)  # the producer's transaction is open on the group's partition
    assert _start(OffsetCommitVerification(open_here, None, b"t")) == [(E.NONE, NOT_VERIFIED)]
    assert open_here.partition.asked == [7]


def test_offset_commit_verification_asks_this_process_coordinator_directly():
    for answer, generic_error, expected in ((E.NONE, False, E.NONE),
                                            (E.TRANSACTION_ABORTABLE, False, E.INVALID_TXN_STATE),
                                            (E.TRANSACTION_ABORTABLE, True, E.TRANSACTION_ABORTABLE),
                                            (E.PRODUCER_FENCED, True, E.INVALID_PRODUCER_EPOCH),
                                            (E.CONCURRENT_TRANSACTIONS, False, E.CONCURRENT_TRANSACTIONS)):
        state = _TxnState(answer)
        verification = OffsetCommitVerification(_Broker(), state, b"t")
        verification.locate = lambda txn_id: (1, None)  # this broker leads the id's __transaction_state partition
        assert _start(verification, generic_error=generic_error) == [(expected, (0, -1, -1))]
        assert state.asked == [("a", 7, 0, [("__consumer_offsets", 3)])]
        assert not verification.poll() and verification.manager is None


def test_offset_commit_verification_asks_another_broker_and_answers_from_poll():
    coordinator = Coordinator({("b", "__consumer_offsets", 3): E.TRANSACTION_ABORTABLE})
    verification = OffsetCommitVerification(_Broker(), None, b"t")
    verification.locate = lambda txn_id: (2, coordinator.address)
    try:
        ok, refused = [], []
        verification.start("a", 7, 0, "__consumer_offsets", 3, False, lambda *answer: ok.append(answer))
        verification.start("b", 8, 0, "__consumer_offsets", 3, False, lambda *answer: refused.append(answer))
        assert ok == refused == []  # nothing waits on the caller's thread
        deadline = time.monotonic() + 10
        while verification.poll() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert ok == [(E.NONE, (0, -1, -1))] and refused == [(E.INVALID_TXN_STATE, (0, -1, -1))]
        asked = [t for r in coordinator.requests for t in r]
        assert sorted(t[:4] for t in asked) == [("a", 7, 0, True), ("b", 8, 0, True)]
    finally:
        verification.close()
        coordinator.close()
