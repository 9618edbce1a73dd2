"""The transactional producer's state machine (Java's TransactionManager, KIP-98).

States and transitions are Kafka's: UNINITIALIZED -> INITIALIZING -> READY
-> IN_TRANSACTION -> COMMITTING_TRANSACTION / ABORTING_TRANSACTION -> READY,
ABORTABLE_ERROR (a send failed: only abort is allowed) and FATAL_ERROR
(fenced, or an error Kafka treats as fatal: only close is allowed).

Ownership: the user thread runs init/begin/send_offsets/commit/abort; the
sender thread asks ``partitions_to_add`` / ``add_partitions`` before it
drains a partition's first batch of a transaction, and reports failed
batches with ``on_batch_failed``.  ``_lock`` guards the state; coordinator
requests go through this manager's own ``KafkaClient`` (its own
connections, serialized by ``_io_lock``), so the sender's connections stay
the sender thread's alone.

The coordinator is found with FindCoordinator key type 1; a retriable
coordinator error (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS) is retried after
retry.backoff.ms until max.block.ms (Java's TransactionalRequestResult
timeout), the coordinator looked up again for the first two.
PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
INVALID_TXN_STATE and UNSUPPORTED_VERSION are fatal, as in Java.
"""

from __future__ import annotations

import threading
import time


from . import conn as _conn
from . import errors
from .structs import TopicPartition

FIND_COORDINATOR, INIT_PRODUCER_ID = 10, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28


UNINITIALIZED, INITIALIZING, READY, IN_TRANSACTION = "UNINITIALIZED", "INITIALIZING", "READY", "IN_TRANSACTION"
COMMITTING, ABORTING = "COMMITTING_TRANSACTION", "ABORTING_TRANSACTION"
ABORTABLE_ERROR, FATAL_ERROR = "ABORTABLE_ERROR", "FATAL_ERROR"

COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
# Fatal for the producer (Java: ProducerFencedException and friends).
FENCING_CODES = frozenset((
    47,  # INVALID_PRODUCER_EPOCH
    90,  # PRODUCER_FENCED
    53,  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    48,  # INVALID_TXN_STATE
    35,  # UNSUPPORTED_VERSION
    52,  # TRANSACTION_COORDINATOR_FENCED
))
_RETRY_CODES = frozenset((COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
                          CONCURRENT_TRANSACTIONS))


class GroupMetadata:
    """What TxnOffsetCommit needs of a consumer (Java's ConsumerGroupMetadata)."""

    def __init__(self, group_id, generation_id=-1, member_id="", group_instance_id=None):
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id

    def __repr__(self):
        return (f"GroupMetadata(group_id={self.group_id!r}, generation_id={self.generation_id}, "
                f"member_id={self.member_id!r})")


class TransactionManager:
    def __init__(self, transactional_id: str, transaction_timeout_ms: int, client, max_block_ms: int,
                 retry_backoff_ms: int):
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._client = client
        self._max_block_ms = max_block_ms
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self.state = UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self._coordinator = None  # node id of the transaction coordinator
        self._partitions: set = set()   # added to the transaction (AddPartitionsToTxn answered)
        self._last_error: Exception | None = None
        # A send failed in this transaction: its sequences may have gaps, so
        # the abort ends with an epoch bump (KIP-360), as Java's does.
        self._epoch_bump_needed = False

    # ------------------------------------------------------------ state

    def _transition(self, target, error=None) -> None:
        with self._lock:
            if self.state == FATAL_ERROR:
                return
            self.state = target
            if error is not None:
                self._last_error = error

    def _fail(self, error: errors.KafkaError) -> errors.KafkaError:
        code = int(error.error_code)
        self._transition(FATAL_ERROR if code in FENCING_CODES else ABORTABLE_ERROR, error)
        return error

    def check_send(self) -> None:
        """Java's maybeFailWithError + the IN_TRANSACTION check of send()."""
        state = self.state
        if state == IN_TRANSACTION:
            return
        if state in (ABORTABLE_ERROR, FATAL_ERROR):
            raise errors.IllegalStateError(
                f"Cannot perform send because at least one previous transactional or idempotent request "
                f"has failed with errors: {self._last_error}")
        if state == UNINITIALIZED:
            raise errors.IllegalStateError("Cannot perform a 'send' before completing a call to initTransactions "
                                           "when transactions are enabled.")
        raise errors.IllegalStateError(f"Cannot call send in state {state}")

    def _require(self, operation, *states) -> None:
        state = self.state
        if state == FATAL_ERROR:
            raise errors.IllegalStateError(
                f"Cannot {operation}: the producer is in a fatal error state: {self._last_error}")
        if state not in states:
            raise errors.IllegalStateError(f"Cannot {operation} in state {state}")

    def on_batch_failed(self, error) -> None:
        """Sender thread: a batch of the open transaction failed for good."""
        self._epoch_bump_needed = True
        code = int(getattr(error, "error_code", 0) or 0)
        with self._lock:
            if self.state == FATAL_ERROR:
                return
            if code in FENCING_CODES:
                self.state = FATAL_ERROR
            elif self.state in (IN_TRANSACTION, COMMITTING):
                self.state = ABORTABLE_ERROR
            else:
                return
            self._last_error = error

    # ------------------------------------------------------------ coordinator I/O

    def _deadline(self, timeout) -> float:
        return time.monotonic() + (self._max_block_ms / 1000 if timeout is None else timeout)

    def _find_coordinator(self, key_type: int, key: str, deadline: float) -> int:
        while True:
            conn = self._client.least_loaded_connection()
            response = conn.request(FIND_COORDINATOR, {"key": key, "key_type": key_type,
                                                       "coordinator_keys": [key]})
            entry = response.coordinators[0] if conn.version(FIND_COORDINATOR) >= 4 else response
            if not entry.error_code:
                self._client.metadata.brokers[entry.node_id] = _conn.BrokerMetadata(
                    entry.node_id, entry.host, entry.port, None)
                return entry.node_id
            error = errors.for_code(entry.error_code, f"FindCoordinator {key}")
            if not error.retriable or time.monotonic() > deadline:
                raise error
            time.sleep(self._retry_backoff_s)

    def _call(self, api_key: int, values, error_of, deadline: float, group_id: str | None = None):
        """One request to the transaction (or ``group_id``'s) coordinator, retried as Java retries it.

        ``error_of(response)`` is the response's error code (0 if none).
        """
        with self._io_lock:
            node = None if group_id is not None else self._coordinator
            while True:
                try:
                    if node is None:
                        node = (self._find_coordinator(0, group_id, deadline) if group_id is not None
                                else self._find_coordinator(1, self.transactional_id, deadline))
                        if group_id is None:
                            self._coordinator = node
                    response = self._client.request(node, api_key, values)
                    code = error_of(response)
                except errors.KafkaError as exc:
                    if not exc.retriable or time.monotonic() > deadline:
                        raise
                    code, response = int(exc.error_code), None
                    node = None
                if code == 0:
                    return response
                if code not in _RETRY_CODES or time.monotonic() > deadline:
                    return response if response is not None else None
                if code in (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR):
                    node = None
                    if group_id is None:
                        self._coordinator = None
                time.sleep(self._retry_backoff_s)

    @staticmethod
    def _code(response) -> int:
        return int(response.error_code)

    def _raise_for(self, response, error_of, what) -> None:
        code = error_of(response) if response is not None else COORDINATOR_NOT_AVAILABLE
        if code:
            raise self._fail(errors.for_code(code, f"{what} for transactional.id {self.transactional_id}"))

    def _init_producer_id(self, deadline, producer_id=-1, producer_epoch=-1) -> None:
        response = self._call(INIT_PRODUCER_ID, {
            "transactional_id": self.transactional_id, "transaction_timeout": self.transaction_timeout_ms,
            "producer_id": producer_id, "producer_epoch": producer_epoch}, self._code, deadline)
        self._raise_for(response, self._code, "InitProducerId")
        self.producer_id = response.producer_id
        self.producer_epoch = response.producer_epoch

    # ------------------------------------------------------------ user thread API

    def init_transactions(self, timeout=None) -> tuple[int, int]:
        self._require("initTransactions", UNINITIALIZED)
        self._transition(INITIALIZING)
        try:
            self._init_producer_id(self._deadline(timeout))
        except errors.KafkaError as exc:
            with self._lock:
                if self.state == INITIALIZING:
                    self.state = UNINITIALIZED  # Java lets a timed-out init be retried
            if int(exc.error_code) in FENCING_CODES:
                self._transition(FATAL_ERROR, exc)
            raise
        self._transition(READY)
        return self.producer_id, self.producer_epoch

    def begin_transaction(self) -> None:
        self._require("beginTransaction", READY)
        self._partitions = set()
        self._epoch_bump_needed = False
        self._transition(IN_TRANSACTION)

    def send_offsets_to_transaction(self, offsets: dict, group_metadata, timeout=None) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator (Java's two steps)."""
        self._require("sendOffsetsToTransaction", IN_TRANSACTION)
        if isinstance(group_metadata, str):
            group_metadata = GroupMetadata(group_metadata)
        group_id = group_metadata.group_id
        deadline = self._deadline(timeout)
        response = self._call(ADD_OFFSETS_TO_TXN, {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "group_id": group_id}, self._code, deadline)
        self._raise_for(response, self._code, "AddOffsetsToTxn")
        topics: dict = {}
        for tp, meta in offsets.items():
            offset = getattr(meta, "offset", meta)
            metadata = getattr(meta, "metadata", "") or ""
            leader_epoch = getattr(meta, "leader_epoch", -1)
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": offset,
                "committed_leader_epoch": -1 if leader_epoch is None else leader_epoch,
                "committed_metadata": metadata})

        def error_of(response):
            return next((p.error_code for t in response.topics for p in t.partitions if p.error_code), 0)

        response = self._call(TXN_OFFSET_COMMIT, {
            "transactional_id": self.transactional_id, "group_id": group_id,
            "producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
            "generation_id": group_metadata.generation_id, "member_id": group_metadata.member_id,
            "group_instance_id": group_metadata.group_instance_id,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]},
            error_of, deadline, group_id=group_id)
        self._raise_for(response, error_of, "TxnOffsetCommit")

    def _end(self, commit: bool, deadline: float) -> None:
        response = self._call(END_TXN, {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "committed": commit}, self._code, deadline)
        self._raise_for(response, self._code, "EndTxn")

    def commit_transaction(self, flush, timeout=None) -> None:
        """``flush(timeout)`` sends what is queued; a failed send makes this raise (abort then)."""
        self._require("commitTransaction", IN_TRANSACTION, COMMITTING)
        deadline = self._deadline(timeout)
        self._transition(COMMITTING)
        flush(max(0.0, deadline - time.monotonic()))
        if self.state != COMMITTING:
            raise errors.IllegalStateError(
                f"Cannot commit transaction: a send failed ({self._last_error}); abort it") from self._last_error
        # An empty transaction is ended too (the coordinator answers it
        # without markers).
        self._end(True, deadline)
        self._partitions = set()
        self._transition(READY)

    def abort_transaction(self, abort_undrained, wait_in_flight, timeout=None) -> bool:
        """Fail queued batches, wait for in-flight ones, EndTxn(abort); then the
        epoch bump if a send failed.  Returns True if the producer epoch changed."""
        self._require("abortTransaction", IN_TRANSACTION, COMMITTING, ABORTING, ABORTABLE_ERROR)
        deadline = self._deadline(timeout)
        self._transition(ABORTING)
        abort_undrained(errors.KafkaError("Failing batch since transaction was aborted"))
        wait_in_flight(max(0.0, deadline - time.monotonic()))
        self._end(False, deadline)
        bumped = False
        if self._epoch_bump_needed:
            self._init_producer_id(deadline, self.producer_id, self.producer_epoch)
            self._epoch_bump_needed = False
            bumped = True
        self._partitions = set()
        self._transition(READY)
        return bumped

    def end_resumed(self, producer_id: int, producer_epoch: int, commit: bool, timeout=None) -> None:
        """EndTxn for a transaction another producer instance (another process)
        opened with this transactional id and left open (Flink's
        resumeTransaction, the second phase of a two-phase commit: the Spark
        sink's tasks write, the driver commits).  PRODUCER_FENCED /
        INVALID_PRODUCER_EPOCH mean a newer producer took the id over: that
        transaction was aborted, and this raises."""
        self._require("endTransaction of a resumed transaction", UNINITIALIZED, READY)
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self._transition(COMMITTING if commit else ABORTING)
        self._end(commit, self._deadline(timeout))
        self._transition(READY)

    # ------------------------------------------------------------ sender thread

    def partitions_to_add(self, tps) -> list:
        return [tp for tp in tps if tp not in self._partitions]

    def is_added(self, tp) -> bool:
        return tp in self._partitions

    def add_partitions(self, tps) -> None:
        """AddPartitionsToTxn for ``tps`` (sender thread, blocking)."""
        if self.state not in (IN_TRANSACTION, COMMITTING):
            # Their batches fail (Java fails batches once the transaction is
            # in an error state or aborting).
            raise self._last_error or errors.IllegalStateError(
                f"Cannot add partitions to the transaction in state {self.state}")
        topics: dict = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)

        def error_of(response):
            results = response.results_by_topic_v3_and_below
            return next((p.partition_error_code for t in results for p in t.results_by_partition
                         if p.partition_error_code and p.partition_error_code != OPERATION_NOT_ATTEMPTED), 0)

        try:
            response = self._call(ADD_PARTITIONS_TO_TXN, {
                "v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.producer_epoch,
                "v3_and_below_topics": [{"name": t, "partitions": p} for t, p in topics.items()]},
                error_of, self._deadline(None))
            self._raise_for(response, error_of, "AddPartitionsToTxn")
        except errors.KafkaError as exc:
            self.on_batch_failed(exc)
            raise
        self._partitions.update(TopicPartition(tp.topic, tp.partition) for tp in tps)

    def last_error(self):
        return self._last_error

    def close(self) -> None:
        with self._io_lock:
            self._client.close()
