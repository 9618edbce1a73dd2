"""Writing transaction markers (Kafka's TransactionMarkerChannelManager and
its completion handler), for the transaction coordinator's one thread.

``TransactionMarkerChannel`` keeps, per transaction, the partitions whose
COMMIT/ABORT marker is not written yet; ``send`` tries them all and
``retry`` tries the rest again (the coordinator calls it from its timer).
Each partition's outcome is Kafka's: written, dropped (its topic is gone, or
the marker format is not supported), retried (no leader here yet, not
enough replicas, timed out) or fatal for the whole transaction's sending
(the coordinator or the producer was fenced: a newer coordinator owns the
transaction now). When every partition is written the transaction is
``done`` and the coordinator persists CompleteCommit / CompleteAbort.

``write_marker(topic, partition, markers) -> error_code`` does the write:
``MarkerWriter`` appends to a partition this broker leads
(``LocalMarkerWriter``; standalone, every partition) and sends
WriteTxnMarkers to the leader of any other (whose handler makes the same
local append); a partition without a live leader answers
NOT_LEADER_OR_FOLLOWER and is retried (docs/architecture.md, "Transactions").
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


class TransactionMarkerChannel:
    def __init__(self, write_marker, on_written=None):
        self.write_marker = write_marker
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
        return self._attempt(markers.transactional_id)

    def retry(self) -> list[WriteMarkers]:
        """Try the unwritten partitions again; the transactions now complete."""
        done = []
        for txn_id in list(self.pending):
            markers = self.pending[txn_id][0]
            if self._attempt(txn_id):
                done.append(markers)
        return done

    def _attempt(self, txn_id: str) -> bool:
        markers, remaining = self.pending[txn_id]
        for tp in sorted(remaining):
            error = self.write_marker(tp[0], tp[1], markers)
            if error == E.NONE and self.on_written is not None:
                self.on_written(tp, markers)
            if error == E.NONE or error in _SKIP:
                remaining.discard(tp)
            elif error in _ABORT_SENDING:
                log.warning("markers of %s stop at %s-%d: %s (a newer coordinator or producer epoch owns it)",
                            txn_id, tp[0], tp[1], E(error).name)
                del self.pending[txn_id]
                return False
            elif error not in _RETRY:
                # Kafka treats the rest as a bug (IllegalStateException); a
                # marker is never dropped silently: log and retry.
                log.error("marker of %s for %s-%d failed with %s; retrying", txn_id, tp[0], tp[1], error)
        if remaining:
            return False
        del self.pending[txn_id]
        return True

    def remove_for(self, still_owned) -> None:
        """Forget the transactions ``still_owned(transactional_id)`` rejects
        (their ``__transaction_state`` partition was unloaded)."""
        for txn_id in [t for t in self.pending if not still_owned(t)]:
            del self.pending[txn_id]


class LocalMarkerWriter:
    """Appends a marker to a partition this broker leads
    (``Partition.append_control_batch_to_leader``: a produce's leader and
    min.insync.replicas checks, acks=-1 as Kafka's coordinator writes it),
    waiting for the high watermark at most ``timeout_ms``."""

    def __init__(self, broker, timeout_ms: int = 30000):
        self.broker = broker
        self.timeout_ms = timeout_ms

    def __call__(self, topic: str, partition_id: int, markers: WriteMarkers) -> int:
        info = self.broker.metadata().topics.get(topic)
        if info is None or partition_id >= info.num_partitions:
            # Deleted with its data: there is nothing to mark (Kafka drops it).
            return E.NONE
        partition = self.broker.replica_manager.get_partition(topic, partition_id)
        if partition is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        error, result = partition.append_control_batch_to_leader(
            markers.producer_id, markers.producer_epoch, markers.coordinator_epoch, markers.commit)
        if error:
            return error
        return await_replication(self.broker, partition, result.last_offset + 1, self.timeout_ms)


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
    (``LocalMarkerWriter``), one led by another live broker is sent there as
    WriteTxnMarkers (one blocking round trip on the coordinator's thread, a
    connection kept per broker; ``address_of(broker_id)`` is its
    inter-broker endpoint or None); no live leader: NOT_LEADER_OR_FOLLOWER,
    retried. A failed connection answers REQUEST_TIMED_OUT, retried."""

    def __init__(self, broker, address_of, local=None):
        self.broker = broker
        self.address_of = address_of
        self.local = local or LocalMarkerWriter(broker)
        self.connections: dict[int, tuple] = {}  # broker id -> (address, socket)
        self._correlation_id = 0
        self._client_id = f"transaction-coordinator-{broker.broker_id}".encode()

    def __call__(self, topic: str, partition_id: int, markers: WriteMarkers) -> int:
        state = self.broker.metadata().partition_state(topic, partition_id)
        if state is None or state.leader == self.broker.broker_id:
            return self.local(topic, partition_id, markers)
        address = self.address_of(state.leader) if state.leader >= 0 else None
        if address is None:
            return E.NOT_LEADER_OR_FOLLOWER
        try:
            return self._send(state.leader, address, topic, partition_id, markers)
        except (OSError, ValueError) as exc:
            log.warning("WriteTxnMarkers to broker %d for %s-%d failed: %s", state.leader, topic, partition_id, exc)
            self.close(state.leader)
            return E.REQUEST_TIMED_OUT

    def _send(self, leader: int, address, topic: str, partition_id: int, markers: WriteMarkers) -> int:
        sock = self._socket(leader, address)
        spec = API_TABLE[WRITE_TXN_MARKERS]
        body = encode_to_bytes(construct(spec.request_class(_WRITE_TXN_MARKERS_VERSION), {"markers": [{
            "producer_id": markers.producer_id, "producer_epoch": markers.producer_epoch,
            "transaction_result": markers.commit, "coordinator_epoch": markers.coordinator_epoch,
            "topics": [{"name": topic, "partition_indexes": [partition_id]}]}]}))
        self._correlation_id = correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        frame = _HEADER.pack(WRITE_TXN_MARKERS, _WRITE_TXN_MARKERS_VERSION, correlation_id,
                             len(self._client_id)) + self._client_id + body
        sock.sendall(_SIZE.pack(len(frame)) + frame)
        (size,) = _SIZE.unpack(_recv_exactly(sock, 4))
        data = _recv_exactly(sock, size)
        if _SIZE.unpack_from(data)[0] != correlation_id:
            raise ValueError("WriteTxnMarkers answer with another correlation id")
        response, _ = decode(spec.response_class(_WRITE_TXN_MARKERS_VERSION), memoryview(data)[4:], 0)
        return response.markers[0].topics[0].partitions[0].error_code

    def _socket(self, leader: int, address):
        known = self.connections.get(leader)
        if known is not None and known[0] == address:
            return known[1]
        self.close(leader)
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
