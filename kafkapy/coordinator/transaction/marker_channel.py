"""Writing transaction markers (Kafka's TransactionMarkerChannelManager and
its completion handler), for the transaction coordinator's one thread.

``TransactionMarkerChannel`` keeps, per transaction, the partitions whose
COMMIT/ABORT marker is not written yet; ``send`` tries them all and
``retry`` tries every pending transaction's rest again in one pass (the
coordinator calls it from its timer). Each partition's outcome is Kafka's:
written, dropped (its topic is gone, or the marker format is not supported),
retried (no leader here yet, not enough replicas, timed out) or fatal for the
whole transaction's sending (the coordinator or the producer was fenced: a
newer coordinator owns the transaction now). When every partition is written
the transaction is ``done`` and the coordinator persists CompleteCommit /
CompleteAbort.

The writer does the writes, a pass at a time: ``write_all([(markers,
[(topic, partition), ...]), ...]) -> [{(topic, partition): error_code}, ...]``.
``MarkerWriter`` appends to the partitions this broker leads
(``LocalMarkerWriter``; standalone, every partition: no request is sent) and
sends each other leader ONE WriteTxnMarkers request holding all of the
pass's markers for it (Kafka batches per destination broker the same way),
to every such leader before reading any answer; the leader's handler makes
the same local appends. A partition without a live leader answers
NOT_LEADER_OR_FOLLOWER and is retried (docs/architecture.md, "Transactions").
A plain ``write_marker(topic, partition, markers) -> error_code`` callable is
accepted too (one partition at a time; the unit tests' writers).
"""

from __future__ import annotations

import logging
import socket
import struct

from kafkapy.coordinator.offsets_topic import await_replication
from kafkapy.coordinator.transaction.coordinator import WriteMarkers
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.protocol.errors import ErrorCode as E

log = logging.getLogger("kafkapy.coordinator")

# Kafka's TransactionMarkerRequestCompletionHandler, per partition error.
_RETRY = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR,
                    E.COORDINATOR_NOT_AVAILABLE})
_ABORT_SENDING = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED, E.PRODUCER_FENCED})
_SKIP = frozenset({E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})


def _one_by_one(write_marker):
    """``write_all`` over a per-partition ``write_marker`` callable."""
    def write_all(batch):
        return [{tp: write_marker(tp[0], tp[1], markers) for tp in tps} for markers, tps in batch]
    return write_all


class TransactionMarkerChannel:
    def __init__(self, writer, on_written=None):
        self.write_all = getattr(writer, "write_all", None) or _one_by_one(writer)
        # (topic, partition), markers -> None, after each marker is written:
        # the group coordinator's seam for TxnOffsetCommit (Kafka's
        # handleTxnCompletion: a marker on a __consumer_offsets partition
        # makes the producer's pending offsets committed or drops them).
        self.on_written = on_written
        # transactional id -> (markers, partitions still to write)
        self.pending: dict[str, tuple[WriteMarkers, set]] = {}

    def send(self, markers: WriteMarkers) -> bool:
        """Start writing ``markers``; True when all are written now."""
        self.pending[markers.transactional_id] = (markers, set(markers.partitions))
        return bool(self._attempt([markers.transactional_id]))

    def retry(self) -> list[WriteMarkers]:
        """Try every pending transaction's unwritten partitions again (one
        pass: one request per leader); the transactions now complete."""
        return self._attempt(list(self.pending)) if self.pending else []

    def _attempt(self, txn_ids) -> list[WriteMarkers]:
        batch = [(self.pending[t][0], sorted(self.pending[t][1])) for t in txn_ids]
        done = []
        for (markers, tps), errors in zip(batch, self.write_all(batch)):
            txn_id = markers.transactional_id
            remaining = self.pending[txn_id][1]
            for tp in tps:
                error = errors.get(tp, E.REQUEST_TIMED_OUT)
                if error == E.NONE and self.on_written is not None:
                    self.on_written(tp, markers)
                if error == E.NONE or error in _SKIP:
                    remaining.discard(tp)
                elif error in _ABORT_SENDING:
                    log.warning("markers of %s stop at %s-%d: %s (a newer coordinator or producer epoch owns it)",
                                txn_id, tp[0], tp[1], E(error).name)
                    break
                elif error not in _RETRY:
                    # Kafka treats the rest as a bug (IllegalStateException); a
                    # marker is never dropped silently: log and retry.
                    log.error("marker of %s for %s-%d failed with %s; retrying", txn_id, tp[0], tp[1], error)
            else:
                if not remaining:
                    del self.pending[txn_id]
                    done.append(markers)
                continue
            del self.pending[txn_id]  # sending stopped (fenced)
        return done

    def remove_for(self, still_owned) -> None:
        """Forget the transactions ``still_owned(transactional_id)`` rejects
        (their ``__transaction_state`` partition was unloaded)."""
        for txn_id in [t for t in self.pending if not still_owned(t)]:
            del self.pending[txn_id]


class LocalMarkerWriter:
    """Appends markers to partitions this broker leads
    (``Partition.append_control_batch_to_leader``: a produce's leader and
    min.insync.replicas checks, acks=-1 as Kafka's coordinator writes it),
    waiting for the high watermark at most ``timeout_ms``. ``write_all``
    appends every marker of the pass first, then waits for them (in a
    cluster the followers fetch them all in the same rounds)."""

    def __init__(self, broker, timeout_ms: int = 30000):
        self.broker = broker
        self.timeout_ms = timeout_ms

    def append(self, topic: str, partition_id: int, markers: WriteMarkers):
        """``(error_code, partition, offset the high watermark must pass)``;
        partition None when there is nothing to wait for."""
        info = self.broker.metadata().topics.get(topic)
        if info is None or partition_id >= info.num_partitions:
            # Deleted with its data: there is nothing to mark (Kafka drops it).
            return E.NONE, None, 0
        partition = self.broker.replica_manager.get_partition(topic, partition_id)
        if partition is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, None, 0
        error, result = partition.append_control_batch_to_leader(
            markers.producer_id, markers.producer_epoch, markers.coordinator_epoch, markers.commit)
        if error:
            return error, None, 0
        return E.NONE, partition, result.last_offset + 1

    def __call__(self, topic: str, partition_id: int, markers: WriteMarkers) -> int:
        return self.write_all([(markers, [(topic, partition_id)])])[0][(topic, partition_id)]

    def write_all(self, batch) -> list[dict]:
        appended = []
        results = []
        for markers, tps in batch:
            errors = {}
            for tp in tps:
                error, partition, offset = self.append(tp[0], tp[1], markers)
                errors[tp] = error
                if partition is not None:
                    appended.append((errors, tp, partition, offset))
            results.append(errors)
        if appended:
            # A marker moves the log end offset and, with the leader alone in
            # the ISR, the high watermark and last stable offset at once:
            # wake the fetches parked on them (a read_committed consumer
            # waiting at the LSO, followers), as Kafka's append completes its
            # delayed fetches. Otherwise they sleep out max_wait_ms.
            self.broker.replica_manager.wake_delayed_operations([a[2].slot for a in appended])
        for errors, tp, partition, offset in appended:
            errors[tp] = await_replication(self.broker, partition, offset, self.timeout_ms)
        return results


WRITE_TXN_MARKERS = 27
_WRITE_TXN_MARKERS_VERSION = 0  # Kafka 3.9 brokers serve 0-1; v0 has no tagged fields to frame
# One WriteTxnMarkers round trip at most this long (the leader's handler
# waits up to 10 s for its high watermark, write_txn_markers.MARKER_WAIT_MS).
REMOTE_TIMEOUT_S = 15.0
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length


class MarkerWriter:
    """Where each marker goes (Kafka's TransactionMarkerChannelManager
    destinations): a partition this broker leads is appended here
    (``LocalMarkerWriter``), those led by another live broker go there in one
    WriteTxnMarkers request per broker and pass (a connection kept per
    broker; ``address_of(broker_id)`` is its inter-broker endpoint or None);
    no live leader: NOT_LEADER_OR_FOLLOWER, retried. A failed connection
    answers REQUEST_TIMED_OUT for its partitions, retried. The requests of a
    pass are all sent before the local appends and before any answer is
    read, so the leaders write in parallel with each other and with this one."""

    def __init__(self, broker, address_of, local=None, connect=None):
        self.broker = broker
        self.address_of = address_of
        # connect(address, timeout_s) -> a blocking socket with the inter-broker
        # listener's TLS/SASL done (kafkapy.client.security.open_socket); None: PLAINTEXT.
        self.connect = connect
        self.local = local or LocalMarkerWriter(broker)
        self.connections: dict[int, tuple] = {}  # broker id -> (address, socket)
        self._correlation_id = 0
        self._client_id = f"transaction-coordinator-{broker.broker_id}".encode()

    def __call__(self, topic: str, partition_id: int, markers: WriteMarkers) -> int:
        return self.write_all([(markers, [(topic, partition_id)])])[0][(topic, partition_id)]

    def write_all(self, batch) -> list[dict]:
        metadata = self.broker.metadata()
        results = [{} for _ in batch]
        local = []
        remote: dict[int, list] = {}  # leader -> [(batch index, markers, tp)]
        for i, (markers, tps) in enumerate(batch):
            mine = []
            for tp in tps:
                state = metadata.partition_state(*tp)
                if state is None or state.leader == self.broker.broker_id:
                    mine.append(tp)
                elif state.leader < 0 or self.address_of(state.leader) is None:
                    results[i][tp] = E.NOT_LEADER_OR_FOLLOWER
                else:
                    remote.setdefault(state.leader, []).append((i, markers, tp))
            if mine:
                local.append((i, markers, mine))
        sent = []
        for leader, items in remote.items():
            try:
                sent.append((leader, self._send(leader, self.address_of(leader), items), items))
            except (OSError, ValueError) as exc:
                self._failed(leader, exc, items, results)
        if local:
            for (i, _, _), errors in zip(local, self.local.write_all([(m, tps) for _, m, tps in local])):
                results[i].update(errors)
        for leader, correlation_id, items in sent:
            try:
                for (i, _, tp), error in zip(items, self._receive(leader, correlation_id, items)):
                    results[i][tp] = error
            except (OSError, ValueError) as exc:
                self._failed(leader, exc, items, results)
        return results

    def _failed(self, leader: int, exc, items, results) -> None:
        log.warning("WriteTxnMarkers to broker %d for %d partition(s) failed: %s", leader, len(items), exc)
        self.close(leader)
        for i, _, tp in items:
            results[i][tp] = E.REQUEST_TIMED_OUT

    @staticmethod
    def _request_markers(items) -> list:
        """One WritableTxnMarker per transaction of ``items``, in their order."""
        grouped: dict[int, tuple] = {}  # id(markers) -> (markers, {topic: [partitions]})
        for _, markers, (topic, p) in items:
            grouped.setdefault(id(markers), (markers, {}))[1].setdefault(topic, []).append(p)
        return [{"producer_id": m.producer_id, "producer_epoch": m.producer_epoch, "transaction_result": m.commit,
                 "coordinator_epoch": m.coordinator_epoch,
                 "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
                for m, topics in grouped.values()]

    def _send(self, leader: int, address, items) -> int:
        sock = self._socket(leader, address)
        spec = API_TABLE[WRITE_TXN_MARKERS]
        body = encode_to_bytes(construct(spec.request_class(_WRITE_TXN_MARKERS_VERSION),
                                         {"markers": self._request_markers(items)}))
        self._correlation_id = correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        frame = _HEADER.pack(WRITE_TXN_MARKERS, _WRITE_TXN_MARKERS_VERSION, correlation_id,
                             len(self._client_id)) + self._client_id + body
        sock.sendall(_SIZE.pack(len(frame)) + frame)
        return correlation_id

    def _receive(self, leader: int, correlation_id: int, items) -> list[int]:
        """The error of each of ``items``' partitions, in their order."""
        sock = self.connections[leader][1]
        (size,) = _SIZE.unpack(_recv_exactly(sock, 4))
        data = _recv_exactly(sock, size)
        if _SIZE.unpack_from(data)[0] != correlation_id:
            raise ValueError("WriteTxnMarkers answer with another correlation id")
        spec = API_TABLE[WRITE_TXN_MARKERS]
        response, _ = decode(spec.response_class(_WRITE_TXN_MARKERS_VERSION), memoryview(data)[4:], 0)
        errors = {}
        requested = self._request_markers(items)
        if len(response.markers) != len(requested):
            raise ValueError("WriteTxnMarkers answer with another number of markers")
        for asked, answered in zip(requested, response.markers):
            for t in answered.topics:
                for p in t.partitions:
                    errors[asked["producer_id"], t.name, p.partition_index] = p.error_code
        return [errors.get((m.producer_id, tp[0], tp[1]), E.REQUEST_TIMED_OUT) for _, m, tp in items]

    def _socket(self, leader: int, address):
        known = self.connections.get(leader)
        if known is not None and known[0] == address:
            return known[1]
        self.close(leader)
        if self.connect is not None:
            sock = self.connect(address, REMOTE_TIMEOUT_S)
        else:
            sock = socket.create_connection(address, timeout=REMOTE_TIMEOUT_S)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connections[leader] = (address, sock)
        return sock

    def close(self, leader: int | None = None) -> None:
        for broker_id in list(self.connections) if leader is None else [leader]:
            known = self.connections.pop(broker_id, None)
            if known is not None:
                known[1].close()


def _recv_exactly(sock, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
