"""KIP-890 part 1, partition verification on Produce (Kafka 3.9's
``transaction.partition.verification.enable``, on by default).

Before a leader appends a transactional batch for a producer with no
transaction open on that partition, it asks the producer's transaction
coordinator whether the partition is in the producer's ongoing transaction
at that epoch (AddPartitionsToTxn v4, ``verify_only``, the inter-broker
batched form); a partition the coordinator does not know is refused
INVALID_TXN_STATE (or TRANSACTION_ABORTABLE to Produce v11), so a late or
stray write cannot open a transaction nobody will end (a "hanging"
transaction: the LSO stuck until an InitProducerId fences the producer).

The flow, Kafka's ``ReplicaManager.handleProduceAppend``:

1. ``start`` (the Produce handler's first run, in a worker or a processor):
   for a request with a transactional id, each partition whose batch is
   transactional takes a token (``Partition.maybe_start_transaction_
   verification``: None when the producer's transaction is already open
   there, the common case, read without the partition lock). If none needs
   verifying the produce goes on at once; otherwise nothing is appended and
   the request becomes a ``purgatory.DelayedVerification`` its processor
   parks.
2. The processor hands it to its ``AddPartitionsToTxnManager`` (one sender
   thread per coordinator broker, every transaction queued for it in one
   request, one request in flight, as Kafka's AddPartitionsToTxnManager),
   which posts the answer back and wakes the processor; the processor runs
   the produce again, itself, with ``DelayedVerification.verified()``.
3. The second run answers the partitions the coordinator refused with
   ``produce_error``'s mapping and appends the others with their tokens:
   ``Log.append_as_leader`` refuses a transactional batch of a producer with
   no open transaction unless the token is still current (a marker written
   meanwhile ended the transaction the answer was about: Kafka's
   VerificationGuard).

No handler waits: the worker or processor that ran the first half is free,
and the processor's loop goes on while the question is out.

TxnOffsetCommit is verified the same way by the group coordinator process
(``OffsetCommitVerification``, Kafka's GroupCoordinator.handleTxnCommitOffsets):
the group's ``__consumer_offsets`` partition, before the producer's first
offsets of a transaction are appended there.
"""

from __future__ import annotations

import collections
import logging

from kafkapy.client.blocking import request
from kafkapy.client.sender_thread import SenderThread, stop_all
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.transaction_log import TRANSACTION_STATE_TOPIC, partition_for
from kafkapy.replication.purgatory import DelayedVerification
from kafkapy.storage.producer_state import NOT_VERIFIED

log = logging.getLogger("kafkapy.request")

CONFIG = "transaction.partition.verification.enable"
ADD_PARTITIONS_TO_TXN = 24
# The batched inter-broker form with verify_only (Kafka 3.9 serves 0-5).
_VERIFY_VERSION = 4
# Each request-answer to a coordinator at most ~this (Kafka's
# AddPartitionsToTxnManager uses request.timeout.ms, 30 s by default).
REQUEST_TIMEOUT_S = 30.0
# A v2 batch header: magic at byte 16, attributes (int16) at 21-22 (bit 4 of
# the low byte: transactional), producer id at 43, producer epoch at 51.
_MAGIC_AT, _ATTRIBUTES_AT, _TRANSACTIONAL = 16, 22, 0x10
_PRODUCER_ID_AT, _PRODUCER_EPOCH_AT = 43, 51

# Coordinator answers a producer may not retry well, sent as
# NOT_ENOUGH_REPLICAS (retriable and no metadata refresh; Kafka's choice).
_RETRIABLE = frozenset({E.CONCURRENT_TRANSACTIONS, E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS,
                        E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR})
# Produce v11 (Kafka 3.8's KIP-890 bump) is the first to know TRANSACTION_ABORTABLE.
_ABORTABLE_FROM = 11


def _transactional_producer(records):
    """``(producer_id, producer_epoch)`` of a partition's records when its
    first batch is a transactional v2 batch, else None."""
    if records is None or len(records) <= _PRODUCER_EPOCH_AT + 1 or records[_MAGIC_AT] < 2 \
            or not records[_ATTRIBUTES_AT] & _TRANSACTIONAL:
        return None
    return (int.from_bytes(records[_PRODUCER_ID_AT:_PRODUCER_ID_AT + 8], "big", signed=True),
            int.from_bytes(records[_PRODUCER_EPOCH_AT:_PRODUCER_EPOCH_AT + 2], "big", signed=True))


def start(ctx, request) -> DelayedVerification | None:
    """The first run's half: a ``DelayedVerification`` when some partition
    needs the coordinator's answer, else None (append now)."""
    replica_manager = ctx.broker.replica_manager
    producer = None
    partitions = []
    for topic in request.topic_data:
        for pdata in topic.partition_data:
            found = _transactional_producer(pdata.records)
            if found is None:
                continue
            if producer is None:
                producer = found
            elif found != producer:
                # Kafka refuses the request (InvalidPidMappingException); the
                # append checks each batch against its own producer anyway.
                continue
            partition = replica_manager.get_partition(topic.name, pdata.index)
            if partition is None:
                continue  # the append answers it
            token = partition.maybe_start_transaction_verification(producer[0])
            if token is not None:
                partitions.append((topic.name, pdata.index, token))
    if not partitions:
        return None
    # Kafka waits for the coordinator's answer whatever the produce's own
    # timeout says (its inter-broker client times out at request.timeout.ms);
    # the deadline is the same bound, in case a sender thread never answers.
    return DelayedVerification({}, ctx.now_ms + int(REQUEST_TIMEOUT_S * 1000), request.transactional_id,
                               producer[0], producer[1], partitions)


def manager_error(error_code: int, generic_error: bool) -> int:
    """A coordinator's verification answer as Kafka's AddPartitionsToTxnManager
    passes it on, to a Produce or a TxnOffsetCommit alike: PRODUCER_FENCED
    as INVALID_PRODUCER_EPOCH (what producers expect there), and
    TRANSACTION_ABORTABLE as INVALID_TXN_STATE unless the request's version
    knows it (``generic_error``: Kafka's transactionSupportedOperation
    genericError, Produce v11+ and TxnOffsetCommit v4+)."""
    if error_code == E.PRODUCER_FENCED:
        return E.INVALID_PRODUCER_EPOCH
    if error_code == E.TRANSACTION_ABORTABLE and not generic_error:
        return E.INVALID_TXN_STATE
    return error_code


def produce_error(error_code: int, api_version: int) -> tuple[int, str | None]:
    """A coordinator's verification error as the produce answers it
    (Kafka's AddPartitionsToTxnManager then handleProduceAppend)."""
    error_code = manager_error(error_code, api_version >= _ABORTABLE_FROM)
    if error_code == E.INVALID_TXN_STATE:
        return error_code, "Partition was not added to the transaction"
    if error_code in _RETRIABLE:
        return (E.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added to the transaction. "
                f"Underlying error: {E(error_code).name}")
    return error_code, None


def coordinator_address(broker, transactional_id: str):
    """The inter-broker endpoint of ``transactional_id``'s coordinator (the
    live leader of its ``__transaction_state`` partition), or None."""
    from kafkapy.controller.channel_manager import endpoint_for

    md = broker.metadata()
    info = md.topics.get(TRANSACTION_STATE_TOPIC)
    if info is None:
        return None, None
    state = md.partition_state(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, info.num_partitions))
    if state is None or state.leader < 0:
        return None, None
    leader = md.brokers.get(state.leader)
    if leader is None:
        return None, None
    return state.leader, endpoint_for(leader, broker.static_config.inter_broker_listener_name)


class _CoordinatorSender(SenderThread):
    """One coordinator broker's verification requests. Items are
    ``(key, op)``; every transaction queued meanwhile goes in one request
    (a transactional id twice: the later asks, the earlier answers
    NETWORK_EXCEPTION, as Kafka's addTxnData, or INVALID_PRODUCER_EPOCH if
    the later has a newer epoch)."""

    def __init__(self, broker_id: int, client_id: bytes, security, completions, notify):
        super().__init__(f"txn-verification-sender-{broker_id}", client_id, security, REQUEST_TIMEOUT_S)
        self.broker_id = broker_id
        self.completions = completions
        self.notify = notify
        self.start()

    def exchange(self, address, items):
        latest = {}
        for key, op in items:
            earlier = latest.get(op.transactional_id)
            if earlier is None or earlier[1].producer_epoch <= op.producer_epoch:
                latest[op.transactional_id] = (key, op)
        asked = list(latest.values())
        transactions = []
        for _key, op in asked:
            topics: dict[str, list[int]] = {}
            for topic, p, _token in op.partitions:
                topics.setdefault(topic, []).append(p)
            transactions.append({"transactional_id": op.transactional_id, "producer_id": op.producer_id,
                                 "producer_epoch": op.producer_epoch, "verify_only": True,
                                 "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        response = request(self.socket(address), ADD_PARTITIONS_TO_TXN, _VERIFY_VERSION,
                           {"transactions": transactions}, self.next_correlation_id(), self.client_id)
        return asked, response

    def done(self, items, answer) -> None:
        asked, response = answer
        out = []
        chosen = {id(op) for _key, op in asked}
        for key, op in items:
            if id(op) not in chosen:
                newer = next(o for _k, o in asked if o.transactional_id == op.transactional_id)
                error = E.INVALID_PRODUCER_EPOCH if newer.producer_epoch > op.producer_epoch else E.NETWORK_EXCEPTION
                out.append((key, op, _all(op, error)))
        if response.error_code:
            # Kafka hides CLUSTER_AUTHORIZATION_FAILED (this broker may not
            # verify) from the client: the partition is not verified.
            error = E.INVALID_TXN_STATE if response.error_code == E.CLUSTER_AUTHORIZATION_FAILED \
                else response.error_code
            out.extend((key, op, _all(op, error)) for key, op in asked)
        else:
            by_id = {r.transactional_id: r for r in response.results_by_transaction}
            for key, op in asked:
                result = by_id.get(op.transactional_id)
                if result is None:
                    out.append((key, op, _all(op, E.NETWORK_EXCEPTION)))
                    continue
                errors = {(t.name, p.partition_index): p.partition_error_code
                          for t in result.topic_results for p in t.results_by_partition
                          if p.partition_error_code}
                out.append((key, op, errors))
        self._post(out)

    def failed(self, items, exc) -> None:
        log.warning("verifying %d transaction(s) with broker %d failed: %s", len(items), self.broker_id, exc)
        self._post([(key, op, _all(op, E.NETWORK_EXCEPTION)) for key, op in items])

    def _post(self, out) -> None:
        self.completions.extend(out)
        self.notify()


def _all(op: DelayedVerification, error: int) -> dict:
    return {(t, p): int(error) for t, p, _token in op.partitions}


class AddPartitionsToTxnManager:
    """A processor's verification requests (Kafka's AddPartitionsToTxnManager):
    ``verify(key, op)`` queues ``op`` for its coordinator's sender;
    ``completions()`` gives ``(key, op, {(topic, partition): coordinator
    error})`` for the answers in since (empty dict: every partition
    verified). ``notify()`` is called from a sender thread when one comes
    in (the processor's wake pipe); ``locate(transactional_id) ->
    (broker id, address)`` finds the coordinator (``coordinator_address``).
    Owned by the processor's loop; the sender threads share only the
    completions deque."""

    def __init__(self, locate, notify, client_id: bytes, security=None):
        self.locate = locate
        self.notify = notify
        self.security = security
        self.senders: dict[int, _CoordinatorSender] = {}
        self._completions: collections.deque = collections.deque()
        self._client_id = client_id

    def verify(self, key, op: DelayedVerification) -> None:
        broker_id, address = self.locate(op.transactional_id)
        if address is None:
            self._completions.append((key, op, _all(op, E.COORDINATOR_NOT_AVAILABLE)))
            self.notify()
            return
        sender = self.senders.get(broker_id)
        if sender is None:
            sender = self.senders[broker_id] = _CoordinatorSender(broker_id, self._client_id, self.security,
                                                                  self._completions, self.notify)
        sender.enqueue(address, [(key, op)])

    def completions(self) -> list:
        out = []
        completions = self._completions
        while completions:
            out.append(completions.popleft())
        return out

    def close(self) -> None:
        senders, self.senders = list(self.senders.values()), {}
        stop_all(senders)


class OffsetCommitVerification:
    """KIP-890 for TxnOffsetCommit, the group coordinator process's half of
    Kafka's ``ReplicaManager.maybeStartTransactionVerificationForPartition``
    (called by ``GroupCoordinator.handleTxnCommitOffsets`` since Kafka 3.6):
    before a producer's first offsets of a transaction go to the group's
    ``__consumer_offsets`` partition, the producer's transaction coordinator
    is asked whether that partition is in the producer's ongoing
    transaction at its epoch (AddOffsetsToTxn put it there). A late
    TxnOffsetCommit (its transaction already ended) is refused instead of
    opening a transaction there that nobody ends: the group's offsets would
    answer UNSTABLE_OFFSET_COMMIT until the producer is fenced.

    ``start(..., then)`` calls ``then(error, verification)``: the error
    as the manager passes it on (``manager_error``; the group coordinator
    maps it for an offset commit), and what the append is to check
    (``Log.append_as_leader``'s ``verification``: None with the setting
    off, ``NOT_VERIFIED`` when the transaction is already open there, else
    the token verified). A coordinator in this process (standalone always)
    is asked directly, its ``verify_partitions`` being what the
    AddPartitionsToTxn v4 request would reach; another broker's through an
    ``AddPartitionsToTxnManager`` (one sender thread per coordinator broker,
    as the processors' for Produce), whose answers ``poll`` hands out.
    Owned by the coordinator process's thread; the sender threads share only
    the manager's completions deque."""

    def __init__(self, broker, txn_state, client_id: bytes, security=None):
        self.broker = broker
        self.txn_state = txn_state  # this process's TransactionCoordinatorState
        self._client_id = client_id
        self._security = security
        self.manager = None  # made at the first question for another broker
        self.waiting: dict[int, tuple] = {}  # key -> (then, generic_error)
        self._next_key = 0
        # transactional id -> (coordinator broker id, address); a test's seam
        self.locate = lambda txn_id: coordinator_address(broker, txn_id)

    def start(self, transactional_id, producer_id: int, producer_epoch: int, topic: str, partition: int,
              generic_error: bool, then) -> None:
        broker = self.broker
        if transactional_id is None or not broker.config[CONFIG]:
            return then(E.NONE, None)
        replica = broker.replica_manager.get_partition(topic, partition)
        token = None if replica is None else replica.maybe_start_transaction_verification(producer_id)
        if token is None:  # open here already, or not led here (the append answers that)
            return then(E.NONE, NOT_VERIFIED)
        coordinator_id, _address = self.locate(transactional_id)
        if coordinator_id == broker.broker_id:
            errors = self.txn_state.verify_partitions(transactional_id, producer_id, producer_epoch,
                                                      [(topic, partition)])
            return then(manager_error(errors[(topic, partition)], generic_error), token)
        if self.manager is None:
            self.manager = AddPartitionsToTxnManager(self.locate, _no_wake, self._client_id, self._security)
        key = self._next_key
        self._next_key += 1
        self.waiting[key] = (then, generic_error)
        # No purgatory holds it (deadline unused): the sender's request
        # timeout (30 s) bounds the wait, then NETWORK_EXCEPTION.
        self.manager.verify(key, DelayedVerification({}, -1, transactional_id, producer_id, producer_epoch,
                                                     [(topic, partition, token)]))

    def poll(self) -> bool:
        """Hand the answers in since to their ``then``; True while others
        are still out (the caller looks again within a few ms)."""
        if self.manager is not None:
            for key, op, errors in self.manager.completions():
                then, generic_error = self.waiting.pop(key)
                topic, partition, token = op.partitions[0]
                then(manager_error(errors.get((topic, partition), E.NONE), generic_error), token)
        return bool(self.waiting)

    def close(self) -> None:
        if self.manager is not None:
            self.manager.close()


def _no_wake() -> None:
    """The coordinator process looks for answers from its loop (``poll``)."""
