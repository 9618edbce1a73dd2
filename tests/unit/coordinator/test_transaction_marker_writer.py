"""The marker writer's passes (issue 11): every marker of a pass for one
leader travels in ONE WriteTxnMarkers request (all transactions, all their
partitions), requests to every leader go out before any answer is read,
local partitions are appended without a request, and each answer's errors
reach the right transaction and partition (the channel then retries or
completes as Kafka's completion handler does). Nothing waits on the
caller's thread: a pass returns at once, outcomes come back through
``poll``, so a frozen leader (or a slow follower of a local partition) holds
only its own transactions, and ``close`` stops the sender threads even
while they wait for a frozen leader.

The remote leaders are small loopback peers that decode each request with
kafkapy's schemas and answer a chosen error per partition."""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace

from support.loopback_peer import LoopbackPeer

from kafkapy.coordinator.transaction.coordinator import WriteMarkers
from kafkapy.coordinator.transaction.marker_channel import MarkerWriter, TransactionMarkerChannel
from kafkapy.protocol.errors import ErrorCode as E

WRITE_TXN_MARKERS = 27


class Peer(LoopbackPeer):
    """A leader's inter-broker listener that answers WriteTxnMarkers v0:
    records each request's markers and answers ``errors.get((pid, topic, p), 0)``."""

    def __init__(self, errors=None, frozen=False):
        self.errors = errors or {}
        self.requests = []  # [(receive time, [(pid, commit, {topic: [partitions]})])]
        super().__init__(WRITE_TXN_MARKERS, 0, self._record, self._answer, frozen)

    def _record(self, request):
        self.requests.append((time.monotonic(), [
            (m.producer_id, m.transaction_result, {t.name: list(t.partition_indexes) for t in m.topics})
            for m in request.markers]))

    def _answer(self, request):
        return {"markers": [
            {"producer_id": m.producer_id, "topics": [
                {"name": t.name, "partitions": [
                    {"partition_index": p, "error_code": int(self.errors.get((m.producer_id, t.name, p), 0))}
                    for p in t.partition_indexes]} for t in m.topics]} for m in request.markers]}


class Local:
    """The local appends (``LocalMarkerWriter.begin``'s contract, all written at once)."""

    outstanding = 0

    def __init__(self):
        self.calls = []

    def begin(self, batch):
        self.calls.append([(m.producer_id, list(tps)) for m, tps in batch])
        return [dict.fromkeys(tps, E.NONE) for _, tps in batch]

    def poll(self):
        return []

    def forget(self, keep):
        pass

    def close(self):
        pass


def _markers(txn_id, pid, tps, commit=True):
    return WriteMarkers(txn_id, 5, pid, 0, commit, frozenset(tps), None)


def _writer(leaders, peers):
    """Broker 1 (this one) with partitions ``leaders[(topic, p)] = broker id``."""
    metadata = SimpleNamespace(partition_state=lambda t, p: SimpleNamespace(leader=leaders[t, p])
                               if (t, p) in leaders else None)
    broker = SimpleNamespace(broker_id=1, metadata=lambda: metadata)
    local = Local()
    writer = MarkerWriter(broker, lambda b: peers[b].address if b in peers else None, local=local)
    return writer, local


def _until(predicate, timeout_s=10.0):
    """Poll ``predicate`` (which polls the writer or channel) until true, bounded."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.002)
    raise AssertionError("timed out")


def _write_all(writer, batch, results=None):
    """A pass and all its outcomes: begin (or ``results``, what it answered),
    then poll until nothing is in flight."""
    results = writer.begin(batch) if results is None else results
    index = {id(m): i for i, (m, _) in enumerate(batch)}

    def settled():
        for markers, tp, error in writer.poll():
            results[index[id(markers)]][tp] = error
        return writer.outstanding == 0

    _until(settled)
    return results


def _drain(channel, timeout_s=10.0):
    """Transactions completed by the outcomes that come back until nothing is in flight."""
    done = []

    def settled():
        done.extend(channel.poll())
        return not channel.in_flight

    _until(settled, timeout_s)
    return done


def _sender_threads():
    return [t for t in threading.enumerate() if t.name.startswith("txn-marker-sender")]


def test_one_request_per_leader_for_all_transactions_of_a_pass():
    leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): 3, ("u", 0): 2, ("u", 1): 3, ("t", 3): 4}
    # Both leaders hold their answers until thawed: what ``begin`` answers
    # while they are frozen it answered without waiting for them.
    peers = {2: Peer(frozen=True), 3: Peer({(11, "u", 1): E.NOT_ENOUGH_REPLICAS}, frozen=True)}
    writer, local = _writer(leaders, peers)
    try:
        a = _markers("a", 10, [("t", 0), ("t", 1), ("t", 2), ("u", 0)])
        b = _markers("b", 11, [("t", 1), ("u", 1), ("t", 3), ("gone", 0)], commit=False)
        now = writer.begin([(a, sorted(a.partitions)), (b, sorted(b.partitions))])
        # Answered at once: the local appends and the leader with no address;
        # the rest is in flight.
        assert now == [{("t", 0): E.NONE}, {("t", 3): E.NOT_LEADER_OR_FOLLOWER, ("gone", 0): E.NONE}]
        assert writer.outstanding == 5
        # Both requests are out before either leader answers: the senders do
        # not wait for one leader before writing to the next.
        deadline = time.monotonic() + 10
        while not (peers[2].requests and peers[3].requests) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert peers[2].requests and peers[3].requests, "a leader got no request while the other was frozen"
        for peer in peers.values():
            peer.thaw()
        results = _write_all(writer, [(a, None), (b, None)], now)
        assert results[0] == {("t", 0): E.NONE, ("t", 1): E.NONE, ("t", 2): E.NONE, ("u", 0): E.NONE}
        # Broker 4 has no address (not live): retried later; a partition the
        # metadata does not know is appended locally (which drops it).
        assert results[1] == {("t", 1): E.NONE, ("u", 1): E.NOT_ENOUGH_REPLICAS, ("t", 3): E.NOT_LEADER_OR_FOLLOWER,
                              ("gone", 0): E.NONE}
        # One request per leader, carrying both transactions' partitions there.
        assert [r[1] for r in peers[2].requests] == [[(10, True, {"t": [1], "u": [0]}), (11, False, {"t": [1]})]]
        assert [r[1] for r in peers[3].requests] == [[(10, True, {"t": [2]}), (11, False, {"u": [1]})]]
        assert local.calls == [[(10, [("t", 0)]), (11, [("gone", 0)])]]
    finally:
        writer.close()
        for p in peers.values():
            p.close()


def test_channel_retries_only_what_failed_and_completes_each_transaction():
    leaders = {("t", 0): 1, ("t", 1): 2}
    peers = {2: Peer({(10, "t", 1): E.NOT_LEADER_OR_FOLLOWER})}
    writer, local = _writer(leaders, peers)
    written = []
    channel = TransactionMarkerChannel(writer, on_written=lambda tp, m: written.append((m.producer_id, tp)))
    try:
        a = _markers("a", 10, [("t", 0), ("t", 1)])
        b = _markers("b", 11, [("t", 1)])
        assert channel.send(a) is False              # ("t", 1) in flight
        assert _drain(channel) == []                 # ... and answered NOT_LEADER_OR_FOLLOWER
        assert channel.failed and channel.unsent == {"a"}
        assert channel.send(b) is False
        assert _drain(channel) == [b]
        assert set(channel.pending) == {"a"} and channel.pending["a"].remaining == {("t", 1)}
        peers[2].errors.clear()
        assert channel.retry() == []                 # only the failed partition is sent again
        assert _drain(channel) == [a]
        assert channel.pending == {} and not channel.unsent
        assert [r[1] for r in peers[2].requests] == [[(10, True, {"t": [1]})], [(11, True, {"t": [1]})],
                                                     [(10, True, {"t": [1]})]]
        assert written == [(10, ("t", 0)), (11, ("t", 1)), (10, ("t", 1))]
    finally:
        writer.close()
        peers[2].close()


def test_a_fenced_partition_stops_its_transaction_only():
    leaders = {("t", 0): 2, ("t", 1): 2}
    peers = {2: Peer({(10, "t", 0): E.TRANSACTION_COORDINATOR_FENCED})}
    writer, _ = _writer(leaders, peers)
    channel = TransactionMarkerChannel(writer)
    try:
        assert channel.send(_markers("a", 10, [("t", 0), ("t", 1)])) is False
        assert channel.send(_markers("b", 11, [("t", 0)])) is False
        assert [m.transactional_id for m in _drain(channel)] == ["b"]
        assert channel.pending == {}                 # "a" is no longer this coordinator's to finish
    finally:
        writer.close()
        peers[2].close()


def test_a_dead_connection_answers_request_timed_out_and_reconnects():
    leaders = {("t", 0): 2}
    peer = Peer()
    writer, _ = _writer(leaders, {2: peer})
    try:
        m = _markers("a", 10, [("t", 0)])
        assert _write_all(writer, [(m, [("t", 0)])]) == [{("t", 0): E.NONE}]
        peer.close()
        writer.destinations[2]._sock.shutdown(socket.SHUT_RDWR)   # the leader went away mid-connection
        assert _write_all(writer, [(m, [("t", 0)])]) == [{("t", 0): E.REQUEST_TIMED_OUT}]
        assert writer.destinations[2]._sock is None
        peer2 = Peer()
        peers = {2: peer2}
        writer.address_of = lambda b: peers[b].address
        assert _write_all(writer, [(m, [("t", 0)])]) == [{("t", 0): E.NONE}]
        peer2.close()
    finally:
        writer.close()


def test_a_frozen_leader_holds_only_its_own_transactions():
    # Kafka's marker channel: a queue and a sender per destination, so one
    # leader that does not answer (SIGSTOPped) stalls nothing but the
    # markers for it; the coordinator's thread never waits for it.
    leaders = {("frozen", 0): 2, ("live", 0): 3, ("mine", 0): 1}
    peers = {2: Peer(frozen=True), 3: Peer()}
    writer, _ = _writer(leaders, peers)
    channel = TransactionMarkerChannel(writer)
    try:
        a = _markers("a", 10, [("frozen", 0), ("mine", 0)])
        started = time.monotonic()
        assert channel.send(a) is False
        assert channel.pending["a"].remaining == {("frozen", 0)}   # the local one is written already
        done = []
        for i in range(5):   # other transactions complete, one after another, while "a" waits
            b = _markers(f"b{i}", 20 + i, [("live", 0), ("mine", 0)])
            assert channel.send(b) is False
            _until(lambda: bool(done.extend(channel.poll()) or b in done))
        assert time.monotonic() - started < 3.0 and [m.transactional_id for m in done] == [f"b{i}" for i in range(5)]
        assert set(channel.pending) == {"a"} and channel.in_flight
        # One request for the frozen leader, not one per pass: "a" is in flight.
        assert channel.retry() == [] and len(peers[2].requests) == 1
        peers[2].thaw()
        assert _drain(channel) == [a] and channel.pending == {}
    finally:
        writer.close()
        for p in peers.values():
            p.close()


def test_close_stops_senders_waiting_for_a_frozen_leader():
    leaders = {("frozen", 0): 2}
    peer = Peer(frozen=True)
    writer, _ = _writer(leaders, {2: peer})
    try:
        channel = TransactionMarkerChannel(writer)
        assert channel.send(_markers("a", 10, [("frozen", 0)])) is False
        _until(lambda: len(peer.requests) == 1)   # the sender waits in recv for the answer
        assert _sender_threads()
        started = time.monotonic()
        channel.close()
        assert time.monotonic() - started < 1.0 and _sender_threads() == []
    finally:
        peer.close()


def test_unloaded_transactions_are_dropped_queued_and_in_flight():
    # Emigration (remove_for): markers queued behind a frozen leader's
    # request are dropped; the in-flight one's outcome is ignored when it
    # comes back, and no callback runs for a transaction no longer owned.
    leaders = {("frozen", 0): 2, ("frozen", 1): 2}
    peer = Peer(frozen=True)
    writer, _ = _writer(leaders, {2: peer})
    written = []
    channel = TransactionMarkerChannel(writer, on_written=lambda tp, m: written.append(tp))
    try:
        assert channel.send(_markers("a", 10, [("frozen", 0)])) is False
        _until(lambda: len(peer.requests) == 1)
        assert channel.send(_markers("b", 11, [("frozen", 1)])) is False   # queued behind "a"'s request
        assert writer.outstanding == 2
        channel.remove_for(lambda txn_id: False)
        assert channel.pending == {} and writer.outstanding == 1
        peer.thaw()
        assert _drain(channel) == [] and written == [] and writer.outstanding == 0
        assert len(peer.requests) == 1   # "b" was never sent
    finally:
        writer.close()
        peer.close()


def test_local_markers_wait_for_the_high_watermark_without_blocking():
    from kafkapy.coordinator.transaction.marker_channel import LocalMarkerWriter

    class Partition:
        slot = 7
        high_watermark = 0
        is_leader = True

        def append_control_batch_to_leader(self, pid, epoch, coordinator_epoch, commit):
            return E.NONE, SimpleNamespace(last_offset=4)

        def check_enough_replicas_reach_offset(self, offset):
            if not self.is_leader:
                return False, E.NOT_LEADER_OR_FOLLOWER
            return self.high_watermark >= offset, E.NONE

    partitions = {("t", 0): Partition(), ("t", 1): Partition()}
    woken = []
    broker = SimpleNamespace(
        metadata=lambda: SimpleNamespace(topics={"t": SimpleNamespace(num_partitions=2)}),
        replica_manager=SimpleNamespace(get_partition=lambda t, p: partitions[t, p],
                                        wake_delayed_operations=lambda slots=None: woken.append(slots)))
    now = [100.0]
    writer = LocalMarkerWriter(broker, timeout_ms=30000, clock=lambda: now[0])
    channel = TransactionMarkerChannel(writer)
    a = _markers("a", 10, [("t", 0), ("t", 1)])
    assert channel.send(a) is False and writer.outstanding == 2   # appended; the followers have not fetched it
    assert woken == [[7, 7], None]   # the markers' slots, then the followers' parked fetches
    assert channel.poll() == [] and channel.in_flight
    partitions["t", 0].high_watermark = 5
    assert channel.poll() == [] and channel.pending["a"].remaining == {("t", 1)}
    partitions["t", 1].is_leader = False   # lost leadership meanwhile: retried
    assert channel.poll() == [] and channel.unsent == {"a"} and not channel.in_flight
    partitions["t", 1].is_leader = True
    assert channel.retry() == [] and writer.outstanding == 1
    now[0] += 30.0   # the followers never caught up: timed out, retried later
    assert channel.poll() == [] and channel.unsent == {"a"}
    partitions["t", 1].high_watermark = 5
    assert channel.retry() == [a] and channel.pending == {}   # the HW had passed: written at once


class Later:
    """A writer whose markers stay in flight until the test answers them."""

    def __init__(self):
        self.flying = []   # (markers, tp) started, not answered
        self.answers = []  # (markers, tp, error) for the next poll
        self.passes = 0

    @property
    def outstanding(self):
        return len(self.flying) + len(self.answers)   # until ``poll`` returned them

    def begin(self, batch):
        self.passes += 1
        self.flying += [(m, tp) for m, tps in batch for tp in tps]
        return [{} for _ in batch]

    def answer(self, txn_id, error=E.NONE):
        for m, tp in [f for f in self.flying if f[0].transactional_id == txn_id]:
            self.flying.remove((m, tp))
            self.answers.append((m, tp, error))

    def poll(self):
        out, self.answers = self.answers, []
        return out

    def forget(self, keep):
        self.flying = [f for f in self.flying if keep(f[0])]

    def close(self):
        pass


def test_the_coordinator_answers_and_completes_transactions_as_outcomes_come_back():
    from coordinator.test_transaction_coordinator import Clock
    from coordinator.test_transaction_driver import Store
    from kafkapy.coordinator.transaction.coordinator import TransactionCoordinatorState, TxnConfig
    from kafkapy.coordinator.transaction.transaction_coordinator import (
        MARKER_POLL_MAX_MS, MARKER_RETRY_INTERVAL_MS, TransactionCoordinator)

    clock, store, writer = Clock(), Store(), Later()
    pids = iter(range(5000, 6000))
    txn = TransactionCoordinator(TransactionCoordinatorState(TxnConfig(num_partitions=3), lambda: next(pids), clock),
                                 store, TransactionMarkerChannel(writer))
    for p in range(3):
        txn.load(p, 4)

    def call(method, *args):
        answers = []
        method(*args, answers.append)
        [answer] = answers
        return answer

    pid = {}
    for t in ("a", "b"):
        pid[t] = call(txn.init_producer_id, t, 60000, -1, -1).producer_id
        assert call(txn.add_partitions, t, pid[t], 0, [("out", 0), ("out", 1)]).error_code == 0
    # Both EndTxn are answered while the first one's markers are in flight.
    assert call(txn.end_txn, "a", pid["a"], 0, True).error_code == 0
    assert call(txn.end_txn, "b", pid["b"], 0, False).error_code == 0
    assert store.states("a")[-1] == 2 and store.states("b")[-1] == 3   # PrepareCommit, PrepareAbort
    # In flight: the loop is asked back in 1 ms, then less often while nothing comes back.
    waits = []
    for _ in range(7):
        waits.append(txn.tick() - clock.now)
    assert waits == [1, 2, 4, 8, 16, 16, 16] and MARKER_POLL_MAX_MS == 16
    writer.answer("b")
    assert txn.tick() == clock.now + 1
    assert store.states("b")[-1] == 5 and store.states("a")[-1] == 2   # CompleteAbort; "a" still waits
    assert call(txn.add_partitions, "a", pid["a"], 0, [("out", 0)]).error_code == E.CONCURRENT_TRANSACTIONS
    writer.answer("a", E.NOT_LEADER_OR_FOLLOWER)   # retried after the backoff, not at once
    passes = writer.passes
    assert txn.tick() == clock.now + MARKER_RETRY_INTERVAL_MS and writer.passes == passes
    clock.now += MARKER_RETRY_INTERVAL_MS
    assert txn.tick() == clock.now + 1 and writer.passes == passes + 1   # started again: in flight
    writer.answer("a")
    txn.tick()
    assert store.states("a")[-1] == 4 and not txn.channel.pending and not txn.channel.in_flight
