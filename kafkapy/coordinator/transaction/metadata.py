"""One transactional id's state and its legal transitions (Kafka's TransactionMetadata).

Sans-IO and single-threaded: owned by the transaction coordinator's state
(``coordinator.transaction.coordinator``), itself owned by the
group-coordinator process's one thread, so there is no lock (Kafka's
``inLock`` has nothing to guard here).

A change is made in two steps, as Kafka makes it: ``prepare_*`` checks the
transition, sets ``pending_state`` and returns a ``TxnTransitMetadata``
(the record to persist in ``__transaction_state``); once that record is
written, ``complete_transition_to`` applies it (and checks it again). While
a transition is pending every other request gets CONCURRENT_TRANSACTIONS.
A failed write calls ``abort_transition`` (Kafka clears the pending state in
its append callback).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.transaction_log import TransactionState, TxnLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 2**15 - 1


S = TransactionState

# Kafka's validPreviousStates per target state.
VALID_PREVIOUS_STATES = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


class IllegalTransition(Exception):
    """A transition Kafka's TransactionMetadata refuses with IllegalStateException:
    a bug in the caller, never an answer to a client."""


def is_epoch_exhausted(producer_epoch: int) -> bool:
    # Kafka keeps the last epoch (Short.MaxValue) for fencing.
    return producer_epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The target of one transition: what is persisted, then applied."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset
    txn_start_timestamp: int
    txn_last_update_timestamp: int

    def log_value(self) -> TxnLogValue:
        """The TransactionLogValue this transition writes (Dead is written as a tombstone instead)."""
        return TxnLogValue(self.producer_id, self.producer_epoch, self.txn_timeout_ms, int(self.txn_state),
                           frozenset() if self.txn_state == S.EMPTY else self.topic_partitions,
                           self.txn_last_update_timestamp, self.txn_start_timestamp)


class TransactionMetadata:
    __slots__ = ("transactional_id", "producer_id", "last_producer_id", "producer_epoch", "last_producer_epoch",
                 "txn_timeout_ms", "state", "topic_partitions", "txn_start_timestamp",
                 "txn_last_update_timestamp", "pending_state", "has_failed_epoch_fence")

    def __init__(self, transactional_id: str, producer_id: int, last_producer_id: int = NO_PRODUCER_ID,
                 producer_epoch: int = NO_PRODUCER_EPOCH, last_producer_epoch: int = NO_PRODUCER_EPOCH,
                 txn_timeout_ms: int = 60000, state: TransactionState = S.EMPTY, topic_partitions=(),
                 txn_start_timestamp: int = -1, txn_last_update_timestamp: int = -1):
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set = set(topic_partitions)
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.pending_state: TransactionState | None = None
        # A fence whose write failed: the next fence does not bump again (the
        # bumped epoch was never handed to anyone).
        self.has_failed_epoch_fence = False

    @classmethod
    def from_log_value(cls, transactional_id: str, value: TxnLogValue) -> "TransactionMetadata":
        """Kafka's readTxnRecordValue: the last producer id/epoch are not in the record."""
        state = TransactionState(value.status)
        return cls(transactional_id, value.producer_id, NO_PRODUCER_ID, value.producer_epoch, NO_PRODUCER_EPOCH,
                   value.transaction_timeout_ms, state,
                   () if state == S.EMPTY else value.partitions,
                   value.start_timestamp_ms, value.last_update_timestamp_ms)

    # ---------------------------------------------------------------- queries

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    def current(self) -> TxnTransitMetadata:
        """Kafka's prepareNoTransit: the metadata as it is, as a transit (for tests and loading)."""
        return TxnTransitMetadata(self.producer_id, self.last_producer_id, self.producer_epoch,
                                  self.last_producer_epoch, self.txn_timeout_ms, self.state,
                                  frozenset(self.topic_partitions), self.txn_start_timestamp,
                                  self.txn_last_update_timestamp)

    # ---------------------------------------------------------------- prepare

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransition("cannot fence a producer at epoch Short.MaxValue: it would overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH,
                             self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int, expected_producer_epoch: int | None,
                                         now_ms: int):
        """InitProducerId on a known id: ``(error_code, None)`` or ``(0, transit)``.

        KIP-360: with an expected epoch (a producer recovering after an
        error) the epoch is bumped if it is the current one, kept if it is
        the previous one (a retry of a bump whose answer was lost), and the
        producer is fenced otherwise.
        """
        if self.is_producer_epoch_exhausted:
            raise IllegalTransition(f"no more producer epochs for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            next_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            next_epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            next_epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED, None
        return 0, self._prepare(S.EMPTY, self.producer_id, next_epoch, last_epoch, new_txn_timeout_ms,
                                frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        if self.has_pending_transaction:
            raise IllegalTransition("cannot rotate producer ids while a transaction is pending")
        return self._prepare(S.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             new_txn_timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, partitions, now_ms: int) -> TxnTransitMetadata:
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) else self.txn_start_timestamp
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions) | frozenset(partitions),
                             start, now_ms)

    def prepare_abort_or_commit(self, new_state: TransactionState, now_ms: int) -> TxnTransitMetadata:
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp,
                             now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        new_state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        # The PrepareX record was written, so a failed fence before it is history.
        self.has_failed_epoch_fence = False
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def _prepare(self, new_state, new_producer_id, new_epoch, new_last_epoch, new_timeout_ms, new_partitions,
                 new_start, now_ms) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: preparing {new_state.kafka_name} while "
                                    f"{self.pending_state.kafka_name} is pending")
        if new_producer_id < 0:
            raise IllegalTransition(f"illegal new producer id {new_producer_id}")
        if new_state != S.DEAD and new_epoch < 0:
            raise IllegalTransition(f"illegal new producer epoch {new_epoch}")
        if self.state not in VALID_PREVIOUS_STATES[new_state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> "
                                    f"{new_state.kafka_name} is not a valid transition")
        self.pending_state = new_state
        return TxnTransitMetadata(new_producer_id, self.producer_id, new_epoch, new_last_epoch, new_timeout_ms,
                                  new_state, new_partitions, new_start, now_ms)

    # ---------------------------------------------------------------- complete

    def abort_transition(self) -> None:
        """The transit's write failed: nothing changes (Kafka's append callback clears the pending state)."""
        self.pending_state = None

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply ``transit`` after its record was persisted, with Kafka's checks."""
        to_state = self.pending_state
        if to_state is None or to_state != transit.txn_state:
            self._fail(transit)
        if to_state == S.EMPTY:  # InitProducerId
            if ((self.producer_epoch != transit.producer_epoch and not self._valid_epoch_bump(transit))
                    or transit.topic_partitions or transit.txn_start_timestamp != -1):
                self._fail(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to_state == S.ONGOING:  # AddPartitionsToTxn
            if (not self._valid_epoch(transit) or not self.topic_partitions <= transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions |= transit.topic_partitions
        elif to_state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):  # EndTxn
            if (not self._valid_epoch(transit) or self.topic_partitions != transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms
                    or self.txn_start_timestamp != transit.txn_start_timestamp):
                self._fail(transit)
        elif to_state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):  # markers written
            if (not self._valid_epoch(transit) or self.txn_timeout_ms != transit.txn_timeout_ms
                    or transit.txn_start_timestamp == -1):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
        else:
            # PrepareEpochFence is never completed (EndTxn turns it into
            # PrepareAbort); Dead ends with the metadata's removal.
            raise IllegalTransition(f"{self.transactional_id}: {to_state.kafka_name} is never completed")
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def _valid_epoch(self, transit) -> bool:
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    def _valid_epoch_bump(self, transit) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id)

    def _fail(self, transit):
        raise IllegalTransition(f"{self.transactional_id}: transition from {self!r} to {transit} does not "
                                f"match the pending state or the metadata")

    def __repr__(self) -> str:
        pending = self.pending_state.kafka_name if self.pending_state is not None else None
        return (f"TransactionMetadata(transactional_id={self.transactional_id!r}, producer_id={self.producer_id}, "
                f"producer_epoch={self.producer_epoch}, last_producer_epoch={self.last_producer_epoch}, "
                f"txn_timeout_ms={self.txn_timeout_ms}, state={self.state.kafka_name}, pending_state={pending}, "
                f"topic_partitions={sorted(self.topic_partitions)}, "
                f"txn_start_timestamp={self.txn_start_timestamp}, "
                f"txn_last_update_timestamp={self.txn_last_update_timestamp})")

