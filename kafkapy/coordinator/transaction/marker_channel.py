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
``LocalMarkerWriter`` appends to a partition this broker leads (standalone,
every partition); a partition led elsewhere answers NOT_LEADER_OR_FOLLOWER
and is retried until WriteTxnMarkers to other brokers exists (see
docs/architecture.md, "Transactions").
"""

from __future__ import annotations

import logging

from kafkapy.coordinator.offsets_topic import await_replication
from kafkapy.coordinator.transaction.coordinator import WriteMarkers
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
