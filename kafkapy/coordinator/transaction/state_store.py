"""``__transaction_state`` as the transaction coordinator's store: create, append, replay.

The same store as ``__consumer_offsets``' (``coordinator.offsets_topic``),
for the other internal topic: owned by the group-coordinator process, the
only writer of this topic; appends with acks=-1 and waits for the high
watermark (bounded by ``request.timeout.ms``, Kafka's TransactionStateManager
append timeout); replay yields ``(partition, key, value)``.
"""

from __future__ import annotations

from kafkapy.coordinator.offsets_topic import OffsetsTopicStore, ensure_internal_topic
from kafkapy.coordinator.transaction.coordinator import Persist
from kafkapy.coordinator.transaction.state_log import TRANSACTION_STATE_TOPIC, encode_key, encode_value
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
    return ensure_internal_topic(broker, TRANSACTION_STATE_TOPIC, config["transaction.state.log.num.partitions"],
                                 transaction_state_topic_configs(config),
                                 config["transaction.state.log.replication.factor"])


class TransactionStateStore(OffsetsTopicStore):
    topic = TRANSACTION_STATE_TOPIC
    num_partitions_key = "transaction.state.log.num.partitions"
    append_timeout_key = "request.timeout.ms"

    def ensure_topic(self) -> tuple[int, int]:
        return ensure_transaction_state_topic(self.broker, self.config)

    def persist(self, persist: Persist) -> int:
        """Write one transition's record (a tombstone for an expired id);
        the append's error code (0: written and replicated)."""
        value = None if persist.tombstone else encode_value(persist.transit.log_value())
        code = self.append(persist.partition, [(encode_key(persist.transactional_id), value)])
        # The offsets store's group-specific answer to an oversized record is
        # Kafka's UNKNOWN_SERVER_ERROR here (append_error_to_coordinator_error).
        return E.RECORD_LIST_TOO_LARGE if code == E.INVALID_COMMIT_OFFSET_SIZE else code
