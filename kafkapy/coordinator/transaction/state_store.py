"""``__transaction_state`` as the transaction coordinator's store: create, append, replay.

The same store as ``__consumer_offsets``' (``coordinator.offsets_topic``),
for the other internal topic: owned by the group-coordinator process, the
only writer of this topic; appends with acks=-1 and leaves the wait for
the high watermark to its caller (``persist`` / ``poll_persist``: the
transaction coordinator parks the request meanwhile), bounded by
``request.timeout.ms`` (Kafka's TransactionStateManager append timeout);
replay yields ``(partition, key, value)``.
"""

from __future__ import annotations

from kafkapy.coordinator.offsets_topic import OffsetsTopicStore, PendingAppend, ensure_internal_topic
from kafkapy.coordinator.transaction.coordinator import Persist
from kafkapy.protocol.transaction_log import TRANSACTION_STATE_TOPIC, encode_key, encode_value
from kafkapy.protocol.errors import ErrorCode as E


def transaction_state_topic_configs(config) -> dict:
    """Kafka's TransactionStateManager.transactionTopicConfigs."""
    return {"cleanup.policy": "compact", "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
            "segment.bytes": str(config["transaction.state.log.segment.bytes"])}


def ensure_transaction_state_topic(broker, config) -> tuple[int, int]:
    """Create ``__transaction_state`` if missing (FindCoordinator key type 1,
    the store): ``(error_code, num_partitions)``."""
    return ensure_internal_topic(broker, TRANSACTION_STATE_TOPIC, lambda: (
        config["transaction.state.log.num.partitions"], transaction_state_topic_configs(config),
        config["transaction.state.log.replication.factor"]))


class TransactionStateStore(OffsetsTopicStore):
    topic = TRANSACTION_STATE_TOPIC
    num_partitions_key = "transaction.state.log.num.partitions"
    append_timeout_key = "request.timeout.ms"

    def ensure_topic(self) -> tuple[int, int]:
        return ensure_transaction_state_topic(self.broker, self.config)

    def persist(self, persist: Persist):
        """Write one transition's record (a tombstone for an expired id)
        without waiting for the followers: its error code (0: written and
        replicated) when settled at once (always with the ISR the leader
        alone, a standalone broker), else a ``PendingAppend`` for
        ``poll_persist`` (Kafka parks the append in its DelayedProduce
        purgatory; this process has one thread for every coordinator)."""
        value = None if persist.tombstone else encode_value(persist.transit.log_value())
        code, _offset, pending = self.begin_append(persist.partition, [(encode_key(persist.transactional_id), value)])
        return _persist_error(code) if pending is None else pending

    def log_end_offset(self, partition: int) -> int | None:
        """The partition's log end offset here (None: not hosted)."""
        replica = self.broker.replica_manager.get_partition(self.topic, partition)
        return None if replica is None else replica.log_end_offset

    def poll_persist(self, pending: PendingAppend) -> int | None:
        """A waiting ``persist``'s error code once settled (the high watermark
        passed it: 0; leadership moved: NOT_COORDINATOR; request.timeout.ms
        ran out: COORDINATOR_NOT_AVAILABLE); None while it still waits."""
        settled = self.poll_append(pending)
        return None if settled is None else _persist_error(settled[0])


def _persist_error(code: int) -> int:
    # The offsets store's group-specific answer to an oversized record is
    # Kafka's UNKNOWN_SERVER_ERROR here (append_error_to_coordinator_error).
    return E.RECORD_LIST_TOO_LARGE if code == E.INVALID_COMMIT_OFFSET_SIZE else code
