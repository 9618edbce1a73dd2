"""The transaction coordinator's decisions (Kafka's TransactionCoordinator and
the cache half of its TransactionStateManager), sans-IO.

Owned by the group-coordinator process's one thread (docs/architecture.md,
"Transactions"); nothing here reads a clock, a log or a socket. Each
request method returns a ``Result``:

* ``answer``: what to answer the client now (None: nothing yet);
* ``persist``: a ``Persist`` to write to ``__transaction_state`` (key
  ``transaction_log.encode_key(transactional_id)``, value
  ``persist.transit.log_value()`` or a tombstone when ``persist.tombstone``)
  at partition ``partition_for(transactional_id)``, acks=-1; the caller then
  calls ``complete(persist, error_code)``, which returns the next Result;
* ``markers``: a ``WriteMarkers`` to carry out (a COMMIT/ABORT control batch
  to every partition listed); when all are written the caller calls
  ``markers_written(markers)``, which returns a Result whose ``persist``
  records CompleteCommit / CompleteAbort.

So a transition is persisted before anything acts on it, as in Kafka
(prepare, append, complete). Error codes are Kafka's; a state Kafka treats as
impossible (Dead or PrepareEpochFence reached by a request) raises
``IllegalTransition``.

Which ``__transaction_state`` partitions this coordinator serves is told
from outside (``begin_load`` / ``load_partition`` / ``unload_partition``,
with the partition's coordinator epoch), as the group-coordinator process
follows leadership of ``__consumer_offsets``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kafkapy.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kafkapy.protocol.transaction_log import decode_key, decode_value, partition_for
from kafkapy.protocol.errors import ErrorCode as E

S = TransactionState

__all__ = ["TxnConfig", "Answer", "Persist", "WriteMarkers", "Result", "TransactionCoordinatorState",
           "append_error_to_coordinator_error"]


@dataclass(frozen=True)
class TxnConfig:
    """The broker settings the decisions use (Kafka's TransactionConfig)."""

    num_partitions: int = 50  # transaction.state.log.num.partitions (the topic's count once it exists)
    transaction_max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000


@dataclass(frozen=True)
class Answer:
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class Persist:
    """A record to write; ``kind`` says what completing it means:
    ``init`` (answer the new id and epoch), ``add`` (answer NONE), ``end``
    (answer NONE, write markers), ``fence`` (an InitProducerId that found a
    transaction open: answer CONCURRENT_TRANSACTIONS, write ABORT markers),
    ``timeout`` (abort of a timed-out transaction: write ABORT markers),
    ``complete`` (markers written), ``dead`` (expired id: forget it)."""

    kind: str
    transactional_id: str
    partition: int
    coordinator_epoch: int
    transit: TxnTransitMetadata
    tombstone: bool = False


@dataclass(frozen=True)
class WriteMarkers:
    transactional_id: str
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset
    # The CompleteX transition persisted once every marker is written.
    complete: TxnTransitMetadata = field(repr=False)


@dataclass(frozen=True)
class Result:
    answer: Answer | None = None
    persist: Persist | None = None
    markers: WriteMarkers | None = None


def _answer(error_code: int, producer_id: int = -1, producer_epoch: int = -1) -> Result:
    return Result(answer=Answer(int(error_code), producer_id, producer_epoch))


def append_error_to_coordinator_error(error_code: int) -> int:
    """Kafka's mapping of a failed ``__transaction_state`` append to the
    error the client gets (TransactionStateManager.appendTransactionToLog)."""
    if error_code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                      E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if error_code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error_code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return E.UNKNOWN_SERVER_ERROR
    return error_code


class TransactionCoordinatorState:
    def __init__(self, config: TxnConfig, generate_producer_id, clock_ms):
        self.config = config
        # () -> int; may raise (the caller's producer-id manager): its
        # exception propagates, nothing is changed.
        self.generate_producer_id = generate_producer_id
        self.clock_ms = clock_ms
        # __transaction_state partition -> {transactional id: metadata}
        self.partitions: dict[int, dict[str, TransactionMetadata]] = {}
        self.coordinator_epochs: dict[int, int] = {}
        self.loading: set[int] = set()

    # ------------------------------------------------------------ ownership

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def set_num_partitions(self, num_partitions: int) -> None:
        """``__transaction_state``'s partition count once the topic exists
        (it may predate a changed transaction.state.log.num.partitions)."""
        if num_partitions != self.config.num_partitions:
            self.config = replace(self.config, num_partitions=num_partitions)

    def begin_load(self, partition: int) -> None:
        self.loading.add(partition)

    def load_partition(self, partition: int, coordinator_epoch: int, records) -> list[WriteMarkers]:
        """Serve ``partition`` from its replayed records (``(key, value)``
        bytes in log order, value None for a tombstone). Returns the markers
        of transactions that were in PrepareCommit / PrepareAbort (the
        previous coordinator may not have written them all: Kafka resends)."""
        loaded: dict[str, TransactionMetadata] = {}
        for key, value in records:
            txn_id = decode_key(key)
            if txn_id is None:
                continue
            decoded = decode_value(value)
            if decoded is None:
                loaded.pop(txn_id, None)
            else:
                loaded[txn_id] = TransactionMetadata.from_log_value(txn_id, decoded)
        self.loading.discard(partition)
        self.partitions[partition] = loaded
        self.coordinator_epochs[partition] = coordinator_epoch
        now = self.clock_ms()
        pending = []
        for txn_id, metadata in loaded.items():
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                pending.append(self._markers(txn_id, coordinator_epoch, metadata, metadata.prepare_complete(now)))
        return pending

    def unload_partition(self, partition: int) -> int:
        """No longer the coordinator of ``partition``: forget its ids (they
        answer NOT_COORDINATOR); a Persist or WriteMarkers in flight for them
        completes as stale. Returns how many ids were dropped."""
        self.loading.discard(partition)
        self.coordinator_epochs.pop(partition, None)
        return len(self.partitions.pop(partition, {}))

    def _lookup(self, transactional_id: str):
        """(error, metadata or None, partition, coordinator epoch): Kafka's getTransactionState."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None, partition, -1
        txns = self.partitions.get(partition)
        if txns is None:
            return E.NOT_COORDINATOR, None, partition, -1
        return E.NONE, txns.get(transactional_id), partition, self.coordinator_epochs[partition]

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        error, metadata, _, _ = self._lookup(transactional_id)
        return None if error else metadata

    # ------------------------------------------------------------ InitProducerId

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                         expected_producer_id: int = -1, expected_producer_epoch: int = -1) -> Result:
        """InitProducerId with a transactional id (the null id is the
        idempotent path, not handled here). ``expected_*`` are the request's
        producer id and epoch (v3+, KIP-360); -1 when absent."""
        if not transactional_id:
            return _answer(E.INVALID_REQUEST)
        if not self.validate_transaction_timeout_ms(transaction_timeout_ms):
            return _answer(E.INVALID_TRANSACTION_TIMEOUT)
        error, metadata, partition, coordinator_epoch = self._lookup(transactional_id)
        if error:
            return _answer(error)
        if metadata is None:
            metadata = TransactionMetadata(transactional_id, self.generate_producer_id(),
                                           txn_timeout_ms=transaction_timeout_ms,
                                           txn_last_update_timestamp=self.clock_ms())
            self.partitions[partition][transactional_id] = metadata
        expected = None if expected_producer_id < 0 else (expected_producer_id, expected_producer_epoch)

        if metadata.pending_transition_in_progress:
            return _answer(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not (
                metadata.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == metadata.producer_id
                or (expected[0] == metadata.last_producer_id and is_epoch_exhausted(expected[1]))):
            return _answer(E.PRODUCER_FENCED)
        state = metadata.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return _answer(E.CONCURRENT_TRANSACTIONS)
        if state == S.ONGOING:
            # Abort the open transaction under a bumped epoch (fencing the
            # old producer); the client retries and gets a second bump.
            fence = metadata.prepare_fence_producer_epoch()
            return self._end_transaction(transactional_id, fence.producer_id, fence.producer_epoch, False,
                                         from_client=False, kind="fence")
        if state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            raise IllegalTransition(f"{transactional_id} found in state {state.kafka_name}")
        now = self.clock_ms()
        if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
            transit = metadata.prepare_producer_id_rotation(self.generate_producer_id(), transaction_timeout_ms,
                                                            now, expected is not None)
        else:
            error, transit = metadata.prepare_increment_producer_epoch(
                transaction_timeout_ms, None if expected is None else expected[1], now)
            if error:
                return _answer(error)
        return Result(persist=Persist("init", transactional_id, partition, coordinator_epoch, transit))

    # ------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions) -> Result:
        """``partitions``: (topic, partition) pairs. AddOffsetsToTxn is this
        with the group's ``__consumer_offsets`` partition."""
        if not transactional_id:
            return _answer(E.INVALID_REQUEST)
        partitions = frozenset(partitions)
        error, metadata, partition, coordinator_epoch = self._lookup(transactional_id)
        if error:
            return _answer(error)
        if metadata is None or metadata.producer_id != producer_id:
            return _answer(E.INVALID_PRODUCER_ID_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return _answer(E.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return _answer(E.CONCURRENT_TRANSACTIONS)
        if metadata.state == S.ONGOING and partitions <= metadata.topic_partitions:
            return _answer(E.NONE)
        transit = metadata.prepare_add_partitions(partitions, self.clock_ms())
        return Result(persist=Persist("add", transactional_id, partition, coordinator_epoch, transit))

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions) -> dict:
        """AddPartitionsToTxn v4+ ``verify_only``: (topic, partition) -> error code."""
        partitions = list(partitions)
        if not transactional_id:
            return dict.fromkeys(partitions, int(E.INVALID_REQUEST))
        error, metadata, _, _ = self._lookup(transactional_id)
        if not error:
            if metadata is None or metadata.producer_id != producer_id:
                error = E.INVALID_PRODUCER_ID_MAPPING
            elif metadata.producer_epoch != producer_epoch:
                error = E.PRODUCER_FENCED
            elif metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                error = E.CONCURRENT_TRANSACTIONS
        if error:
            return dict.fromkeys(partitions, int(error))
        return {tp: int(E.NONE if tp in metadata.topic_partitions else E.TRANSACTION_ABORTABLE)
                for tp in partitions}

    # ------------------------------------------------------------ EndTxn

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> Result:
        return self._end_transaction(transactional_id, producer_id, producer_epoch, commit, True, "end")

    def _end_transaction(self, transactional_id, producer_id, producer_epoch, commit, from_client, kind) -> Result:
        if not transactional_id:
            return _answer(E.INVALID_REQUEST)
        error, metadata, partition, coordinator_epoch = self._lookup(transactional_id)
        if error:
            return _answer(error)
        if metadata is None or metadata.producer_id != producer_id:
            return _answer(E.INVALID_PRODUCER_ID_MAPPING)
        # Clients must send the current epoch; the coordinator itself (a
        # fence) may send a bumped one.
        if (from_client and producer_epoch != metadata.producer_epoch) or producer_epoch < metadata.producer_epoch:
            return _answer(E.PRODUCER_FENCED)
        pending = metadata.pending_state
        if pending is not None and pending != S.PREPARE_EPOCH_FENCE:
            return _answer(E.CONCURRENT_TRANSACTIONS)
        state = metadata.state
        if state == S.ONGOING:
            next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            if next_state == S.PREPARE_ABORT and pending == S.PREPARE_EPOCH_FENCE:
                # Kafka's epoch fence: the bumped epoch goes into the metadata
                # now (remembered by has_failed_epoch_fence if the write fails).
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            elif pending is not None:
                raise IllegalTransition(f"{transactional_id}: commit while fencing its epoch")
            transit = metadata.prepare_abort_or_commit(next_state, self.clock_ms())
            return Result(persist=Persist(kind, transactional_id, partition, coordinator_epoch, transit))
        if state == S.COMPLETE_COMMIT:
            return _answer(E.NONE if commit else E.INVALID_TXN_STATE)
        if state == S.COMPLETE_ABORT:
            return _answer(E.INVALID_TXN_STATE if commit else E.NONE)
        if state == S.PREPARE_COMMIT:
            return _answer(E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE)
        if state == S.PREPARE_ABORT:
            return _answer(E.INVALID_TXN_STATE if commit else E.CONCURRENT_TRANSACTIONS)
        if state == S.EMPTY:
            return _answer(E.INVALID_TXN_STATE)
        raise IllegalTransition(f"{transactional_id} found in state {state.kafka_name}")

    # ------------------------------------------------------------ completion of a write

    def complete(self, persist: Persist, error_code: int = 0) -> Result:
        """``persist``'s record was written (``error_code`` 0) or not (the
        append's error code). Returns what to answer and do next."""
        txns = self.partitions.get(persist.partition)
        metadata = None if txns is None else txns.get(persist.transactional_id)
        if metadata is None or self.coordinator_epochs.get(persist.partition) != persist.coordinator_epoch:
            # Unloaded (or reloaded at another epoch) meanwhile: Kafka's
            # NOT_COORDINATOR, nothing applied.
            return _answer(E.NOT_COORDINATOR) if persist.kind in ("init", "add", "end", "fence") else Result()
        if error_code:
            metadata.abort_transition()
            if persist.kind in ("fence", "timeout"):
                metadata.has_failed_epoch_fence = True
            if persist.kind in ("complete", "dead", "timeout"):
                return Result()  # retried by the caller (markers) or the next timer round
            return _answer(append_error_to_coordinator_error(error_code))
        transit = persist.transit
        if persist.kind == "dead":
            if metadata.pending_state == S.DEAD:
                del txns[persist.transactional_id]
            return Result()
        metadata.complete_transition_to(transit)
        if persist.kind == "init":
            return _answer(E.NONE, transit.producer_id, transit.producer_epoch)
        if persist.kind == "add":
            return _answer(E.NONE)
        if persist.kind == "complete":
            return Result()
        # end / fence / timeout: PrepareCommit or PrepareAbort is on disk.
        markers = self._markers(persist.transactional_id, persist.coordinator_epoch, metadata,
                                metadata.prepare_complete(self.clock_ms()))
        answer = None
        if persist.kind == "end":
            answer = Answer(int(E.NONE))
        elif persist.kind == "fence":
            answer = Answer(int(E.CONCURRENT_TRANSACTIONS))
        return Result(answer=answer, markers=markers)

    @staticmethod
    def _markers(txn_id, coordinator_epoch, metadata, complete: TxnTransitMetadata) -> WriteMarkers:
        return WriteMarkers(txn_id, coordinator_epoch, metadata.producer_id, metadata.producer_epoch,
                            metadata.state == S.PREPARE_COMMIT, frozenset(metadata.topic_partitions), complete)

    def markers_written(self, markers: WriteMarkers) -> Result:
        """Every marker of ``markers`` is in its partition's log: persist CompleteX."""
        partition = self.partition_for(markers.transactional_id)
        txns = self.partitions.get(partition)
        metadata = None if txns is None else txns.get(markers.transactional_id)
        if (metadata is None or self.coordinator_epochs.get(partition) != markers.coordinator_epoch
                or metadata.pending_state != markers.complete.txn_state):
            return Result()
        return Result(persist=Persist("complete", markers.transactional_id, partition, markers.coordinator_epoch,
                                      markers.complete))

    # ------------------------------------------------------------ timers

    def abort_timed_out_transactions(self) -> list[Result]:
        """Ongoing transactions past their timeout, each fenced and aborted
        (Kafka's abortTimedOutTransactions, every
        transaction.abort.timed.out.transaction.cleanup.interval.ms)."""
        now = self.clock_ms()
        results = []
        for partition, txns in self.partitions.items():
            for txn_id, metadata in list(txns.items()):
                if (metadata.pending_state is None and metadata.state == S.ONGOING
                        and metadata.txn_start_timestamp + metadata.txn_timeout_ms < now):
                    fence = metadata.prepare_fence_producer_epoch()
                    results.append(self._end_transaction(txn_id, fence.producer_id, fence.producer_epoch, False,
                                                         from_client=False, kind="timeout"))
        return results

    def expire_transactional_ids(self) -> list[Persist]:
        """Ids idle for transactional.id.expiration.ms in Empty / CompleteX:
        tombstones to write (Kafka's removeExpiredTransactionalIds)."""
        cutoff = self.clock_ms() - self.config.transactional_id_expiration_ms
        out = []
        for partition, txns in self.partitions.items():
            for txn_id, metadata in txns.items():
                if (metadata.pending_state is None and metadata.state.is_expiration_allowed
                        and metadata.txn_last_update_timestamp <= cutoff):
                    out.append(Persist("dead", txn_id, partition, self.coordinator_epochs[partition],
                                       metadata.prepare_dead(), tombstone=True))
        return out

    # ------------------------------------------------------------ Describe / List

    def describe(self, transactional_id: str) -> dict:
        """DescribeTransactions' TransactionState for one id."""
        out = {"transactional_id": transactional_id, "error_code": 0, "transaction_state": "",
               "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
               "producer_epoch": -1, "topics": {}}
        if not transactional_id:
            out["error_code"] = int(E.INVALID_REQUEST)
            return out
        error, metadata, _, _ = self._lookup(transactional_id)
        if error or metadata is None or metadata.state == S.DEAD:
            out["error_code"] = int(error or E.TRANSACTIONAL_ID_NOT_FOUND)
            return out
        topics: dict[str, list[int]] = {}
        for topic, p in sorted(metadata.topic_partitions):
            topics.setdefault(topic, []).append(p)
        out.update(transaction_state=metadata.state.kafka_name, transaction_timeout_ms=metadata.txn_timeout_ms,
                   transaction_start_time_ms=metadata.txn_start_timestamp, producer_id=metadata.producer_id,
                   producer_epoch=metadata.producer_epoch, topics=topics)
        return out

    def list_transactions(self, producer_ids=(), state_names=(), duration_ms: int = -1):
        """ListTransactions: (error_code, unknown state filters, [(id, producer id, state name)])."""
        if self.loading:
            return int(E.COORDINATOR_LOAD_IN_PROGRESS), [], []
        states = set()
        unknown = []
        for name in state_names:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        producer_ids = set(producer_ids)
        now = self.clock_ms()
        found = []
        for txns in self.partitions.values():
            for txn_id, m in txns.items():
                if m.state == S.DEAD or (producer_ids and m.producer_id not in producer_ids) \
                        or (state_names and m.state not in states) \
                        or (duration_ms >= 0 and now - m.txn_start_timestamp <= duration_ms):
                    continue
                found.append((txn_id, m.producer_id, m.state.kafka_name))
        return 0, unknown, sorted(found)
