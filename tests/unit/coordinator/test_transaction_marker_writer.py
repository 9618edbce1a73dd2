"""The marker writer's passes (issue 11): every marker of a pass for one
leader travels in ONE WriteTxnMarkers request (all transactions, all their
partitions), requests to every leader go out before any answer is read,
local partitions are appended without a request, and each answer's errors
reach the right transaction and partition (the channel then retries or
completes as Kafka's completion handler does).

The remote leaders are small loopback peers that decode each request with
kafkapy's schemas and answer a chosen error per partition."""

from __future__ import annotations

import socket
import struct
import threading
from types import SimpleNamespace

from kafkapy.coordinator.transaction.coordinator import WriteMarkers
from kafkapy.coordinator.transaction.marker_channel import MarkerWriter, TransactionMarkerChannel, _recv_exactly
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.protocol.errors import ErrorCode as E

_SIZE = struct.Struct(">i")
WRITE_TXN_MARKERS = 27


class Peer:
    """A leader's inter-broker listener that answers WriteTxnMarkers v0:
    records each request's markers and answers ``errors.get((pid, topic, p), 0)``."""

    def __init__(self, errors=None, delay_s=0.0):
        self.errors = errors or {}
        self.delay_s = delay_s
        self.requests = []  # [(receive time, [(pid, commit, {topic: [partitions]})])]
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = self.server.getsockname()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        import time

        conn, _ = self.server.accept()
        conn.settimeout(10)
        spec = API_TABLE[WRITE_TXN_MARKERS]
        with conn:
            for _ in range(20):  # bounded: a test sends a few requests
                try:
                    frame = _recv_exactly(conn, _SIZE.unpack(_recv_exactly(conn, 4))[0])
                except (ConnectionError, OSError):
                    return
                api_key, version, correlation_id, client_id_len = struct.unpack_from(">hhih", frame)
                assert (api_key, version) == (WRITE_TXN_MARKERS, 0)
                request, _ = decode(spec.request_class(0), memoryview(frame)[10 + client_id_len:], 0)
                self.requests.append((time.monotonic(), [
                    (m.producer_id, m.transaction_result, {t.name: list(t.partition_indexes) for t in m.topics})
                    for m in request.markers]))
                time.sleep(self.delay_s)
                body = encode_to_bytes(construct(spec.response_class(0), {"markers": [
                    {"producer_id": m.producer_id, "topics": [
                        {"name": t.name, "partitions": [
                            {"partition_index": p, "error_code": int(self.errors.get((m.producer_id, t.name, p), 0))}
                            for p in t.partition_indexes]} for t in m.topics]} for m in request.markers]}))
                answer = struct.pack(">i", correlation_id) + body
                conn.sendall(_SIZE.pack(len(answer)) + answer)

    def close(self):
        self.server.close()


class Local:
    """The local appends (``LocalMarkerWriter.write_all``'s contract)."""

    def __init__(self):
        self.calls = []

    def write_all(self, batch):
        self.calls.append([(m.producer_id, list(tps)) for m, tps in batch])
        return [dict.fromkeys(tps, E.NONE) for _, tps in batch]


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


def test_one_request_per_leader_for_all_transactions_of_a_pass():
    leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): 3, ("u", 0): 2, ("u", 1): 3, ("t", 3): 4}
    peers = {2: Peer(delay_s=0.2), 3: Peer({(11, "u", 1): E.NOT_ENOUGH_REPLICAS}, delay_s=0.2)}
    writer, local = _writer(leaders, peers)
    try:
        a = _markers("a", 10, [("t", 0), ("t", 1), ("t", 2), ("u", 0)])
        b = _markers("b", 11, [("t", 1), ("u", 1), ("t", 3), ("gone", 0)], commit=False)
        results = writer.write_all([(a, sorted(a.partitions)), (b, sorted(b.partitions))])
        assert results[0] == {("t", 0): E.NONE, ("t", 1): E.NONE, ("t", 2): E.NONE, ("u", 0): E.NONE}
        # Broker 4 has no address (not live): retried later; a partition the
        # metadata does not know is appended locally (which drops it).
        assert results[1] == {("t", 1): E.NONE, ("u", 1): E.NOT_ENOUGH_REPLICAS, ("t", 3): E.NOT_LEADER_OR_FOLLOWER,
                              ("gone", 0): E.NONE}
        # One request per leader, carrying both transactions' partitions there.
        assert [r[1] for r in peers[2].requests] == [[(10, True, {"t": [1], "u": [0]}), (11, False, {"t": [1]})]]
        assert [r[1] for r in peers[3].requests] == [[(10, True, {"t": [2]}), (11, False, {"u": [1]})]]
        assert local.calls == [[(10, [("t", 0)]), (11, [("gone", 0)])]]
        # Both requests were out before either answer was read: the two
        # leaders' 0.2 s waits overlapped.
        assert abs(peers[2].requests[0][0] - peers[3].requests[0][0]) < 0.15
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
        assert channel.send(a) is False              # ("t", 1) answered NOT_LEADER_OR_FOLLOWER
        assert channel.send(b) is True
        assert set(channel.pending) == {"a"} and channel.pending["a"][1] == {("t", 1)}
        peers[2].errors.clear()
        assert channel.retry() == [a]                # only the failed partition is sent again
        assert channel.pending == {}
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
        channel.pending["a"] = (_markers("a", 10, [("t", 0), ("t", 1)]), {("t", 0), ("t", 1)})
        channel.pending["b"] = (_markers("b", 11, [("t", 0)]), {("t", 0)})
        assert [m.transactional_id for m in channel.retry()] == ["b"]
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
        assert writer.write_all([(m, [("t", 0)])]) == [{("t", 0): E.NONE}]
        peer.close()
        writer.connections[2][1].shutdown(socket.SHUT_RDWR)   # the leader went away mid-connection
        assert writer.write_all([(m, [("t", 0)])]) == [{("t", 0): E.REQUEST_TIMED_OUT}]
        assert 2 not in writer.connections
        peer2 = Peer()
        peers = {2: peer2}
        writer.address_of = lambda b: peers[b].address
        assert writer.write_all([(m, [("t", 0)])]) == [{("t", 0): E.NONE}]
        peer2.close()
    finally:
        writer.close()
