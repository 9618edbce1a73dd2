"""Transaction API handlers for the group-coordinator process (``owner=
"coordinator"`` in the API table; registered in ``coordinator.handlers``).

Each takes ``(txn, ctx, request)``: the process's ``TransactionCoordinator``,
the request's ``CoordinatorContext`` (``api_version``, ``reply(dict)``,
``store``: the ``__consumer_offsets`` store, for AddOffsetsToTxn's partition
and which partitions exist)
and the decoded kio request; it calls ``ctx.reply`` exactly once: at once,
or later from the coordinator's ``tick`` when the request's
``__transaction_state`` write waits for its followers. Versions
as Kafka 3.9 serves them: InitProducerId 0-5 (with a transactional id; the
null id stays with the workers), AddPartitionsToTxn 0-5 (v4+: batched,
``verify_only``), AddOffsetsToTxn 0-4, EndTxn 0-4, DescribeTransactions 0,
ListTransactions 0-1. InitProducerId without a transactional id (an
idempotent producer) is answered here too, as Kafka's transaction
coordinator does: a fresh producer id at epoch 0.
"""

from __future__ import annotations

from kafkapy.coordinator.offsets_topic import OFFSETS_TOPIC
from kafkapy.coordinator.records import partition_for as group_partition_for
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode as E


# ACLs (Kafka 3.9's KafkaApis; ``ctx.authorizer`` None: no checks): a transactional
# id needs Write (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 53) for InitProducerId,
# AddPartitionsToTxn v0-3, AddOffsetsToTxn and EndTxn, Describe for
# DescribeTransactions / ListTransactions (others are left out); an idempotent
# producer's InitProducerId needs IdempotentWrite on the cluster or Write on some
# topic (CLUSTER_AUTHORIZATION_FAILED, 31); AddPartitionsToTxn needs Write on each
# topic (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED), v4+
# (broker verification) ClusterAction; AddOffsetsToTxn Read on the group.
def _denied(ctx, operation: int, resource_type: int, name) -> bool:
    auth = getattr(ctx, "authorizer", None)
    return auth is not None and not auth.allowed(ctx, operation, resource_type, name or "")


def _compatible(error_code: int, version: int, fenced_from: int) -> int:
    """Kafka answers clients older than PRODUCER_FENCED (``version <
    fenced_from``) with INVALID_PRODUCER_EPOCH instead, which they handle the same way."""
    if error_code == E.PRODUCER_FENCED and version < fenced_from:
        return int(E.INVALID_PRODUCER_EPOCH)
    return error_code


def _answer_reply(ctx):
    """A reply(Answer) that answers its error code (AddOffsetsToTxn, EndTxn: PRODUCER_FENCED from v2)."""
    def reply(answer):
        ctx.reply({"throttle_time": 0, "error_code": _compatible(answer.error_code, ctx.api_version, 2)})
    return reply


def init_producer_id(txn, ctx, request) -> None:
    def reply(answer):
        ctx.reply({"throttle_time": 0, "error_code": _compatible(answer.error_code, ctx.api_version, 4),
                   "producer_id": answer.producer_id, "producer_epoch": answer.producer_epoch})
    if request.transactional_id is not None and _denied(ctx, acls.WRITE, acls.TRANSACTIONAL_ID,
                                                        request.transactional_id):
        ctx.reply({"throttle_time": 0, "error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                   "producer_id": -1, "producer_epoch": -1})
        return
    auth = getattr(ctx, "authorizer", None)
    if request.transactional_id is None and auth is not None and \
            not auth.allowed(ctx, acls.IDEMPOTENT_WRITE, acls.CLUSTER, acls.CLUSTER_NAME) and \
            not auth.allowed_by_resource_type(ctx.principal, ctx.peer_host, acls.WRITE, acls.TOPIC):
        ctx.reply({"throttle_time": 0, "error_code": E.CLUSTER_AUTHORIZATION_FAILED,
                   "producer_id": -1, "producer_epoch": -1})
        return
    if request.transactional_id is None:
        # Kafka issues a new id whatever id and epoch the request carries.
        ctx.reply({"throttle_time": 0, "error_code": 0, "producer_id": txn.state.generate_producer_id(),
                   "producer_epoch": 0})
        return
    producer_id = getattr(request, "producer_id", -1)
    producer_epoch = getattr(request, "producer_epoch", -1)
    txn.init_producer_id(request.transactional_id, int(request.transaction_timeout), producer_id,
                         producer_epoch, reply)


def _partitions(topics) -> list:
    return [(t.name, int(p)) for t in topics for p in t.partitions]


def _topic_results(errors: dict) -> list:
    by_topic: dict[str, list] = {}
    for (topic, p), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "partition_error_code": int(error)})
    return [{"name": topic, "results_by_partition": parts} for topic, parts in by_topic.items()]


def _add_or_verify(txn, ctx, txn_id, producer_id, producer_epoch, topics, done, verify_only=False) -> None:
    """One transaction of AddPartitionsToTxn: ``done({(topic, partition): error})``
    once, now or when its ``__transaction_state`` write settles (parked
    while the followers replicate it).
    As Kafka's KafkaApis: partitions of unknown topics fail the whole
    transaction (UNKNOWN_TOPIC_OR_PARTITION for them, OPERATION_NOT_ATTEMPTED
    for the others); otherwise the coordinator's one answer for them all."""
    partitions = _partitions(topics)
    auth = getattr(ctx, "authorizer", None)
    if auth is not None and ctx.api_version < 4:
        if _denied(ctx, acls.WRITE, acls.TRANSACTIONAL_ID, txn_id):
            return done(dict.fromkeys(partitions, int(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)))
        denied = auth.denied(ctx, acls.WRITE, acls.TOPIC, {t for t, _ in partitions})
        if denied:
            return done({tp: int(E.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied else E.OPERATION_NOT_ATTEMPTED)
                         for tp in partitions})
    unknown = {tp for tp in partitions if not ctx.store.partition_exists(*tp)}
    if unknown:
        return done({tp: int(E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED)
                     for tp in partitions})
    if verify_only:
        return done(txn.state.verify_partitions(txn_id, producer_id, producer_epoch, partitions))
    txn.add_partitions(txn_id, producer_id, producer_epoch, partitions,
                       lambda answer: done(dict.fromkeys(partitions,
                                                         _compatible(answer.error_code, ctx.api_version, 2))))


def add_partitions_to_txn(txn, ctx, request) -> None:
    if ctx.api_version < 4:
        _add_or_verify(txn, ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                       request.v3_and_below_producer_epoch, request.v3_and_below_topics,
                       lambda errors: ctx.reply({"throttle_time": 0,
                                                 "results_by_topic_v3_and_below": _topic_results(errors)}))
        return
    if _denied(ctx, acls.CLUSTER_ACTION, acls.CLUSTER, acls.CLUSTER_NAME):  # v4+: a broker's verification
        ctx.reply({"throttle_time": 0, "error_code": E.CLUSTER_AUTHORIZATION_FAILED, "results_by_transaction": []})
        return
    # One answer once every transaction's result is in (some may wait for
    # their __transaction_state write), in the request's order.
    results = [None] * len(request.transactions)
    left = [len(results)]

    def done_for(i, txn_id):
        def done(errors):
            results[i] = {"transactional_id": txn_id, "topic_results": _topic_results(errors)}
            left[0] -= 1
            if not left[0]:
                ctx.reply({"throttle_time": 0, "error_code": 0, "results_by_transaction": results})
        return done

    if not results:
        ctx.reply({"throttle_time": 0, "error_code": 0, "results_by_transaction": []})
    for i, t in enumerate(request.transactions):
        _add_or_verify(txn, ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics,
                       done_for(i, t.transactional_id), t.verify_only)


def add_offsets_to_txn(txn, ctx, request) -> None:
    if _denied(ctx, acls.WRITE, acls.TRANSACTIONAL_ID, request.transactional_id):
        ctx.reply({"throttle_time": 0, "error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
        return
    if _denied(ctx, acls.READ, acls.GROUP, request.group_id):
        ctx.reply({"throttle_time": 0, "error_code": E.GROUP_AUTHORIZATION_FAILED})
        return
    partition = (OFFSETS_TOPIC, group_partition_for(request.group_id, ctx.store.num_partitions))
    txn.add_partitions(request.transactional_id, request.producer_id, request.producer_epoch, [partition],
                       _answer_reply(ctx))


def end_txn(txn, ctx, request) -> None:
    if _denied(ctx, acls.WRITE, acls.TRANSACTIONAL_ID, request.transactional_id):
        ctx.reply({"throttle_time": 0, "error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
        return
    txn.end_txn(request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed),
                _answer_reply(ctx))


def describe_transactions(txn, ctx, request) -> None:
    states = []
    for txn_id in request.transactional_ids:
        if _denied(ctx, acls.DESCRIBE, acls.TRANSACTIONAL_ID, txn_id):
            states.append({"error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional_id": txn_id,
                           "transaction_state": "", "transaction_timeout": -1, "transaction_start_time": -1,
                           "producer_id": -1, "producer_epoch": -1, "topics": []})
            continue
        d = txn.state.describe(txn_id)
        states.append({"error_code": d["error_code"], "transactional_id": txn_id,
                       "transaction_state": d["transaction_state"],
                       "transaction_timeout": d["transaction_timeout_ms"],
                       "transaction_start_time": d["transaction_start_time_ms"],
                       "producer_id": d["producer_id"], "producer_epoch": d["producer_epoch"],
                       "topics": [{"topic": t, "partitions": ps} for t, ps in d["topics"].items()
                                  if not _denied(ctx, acls.DESCRIBE, acls.TOPIC, t)]})
    ctx.reply({"throttle_time": 0, "transaction_states": states})


def list_transactions(txn, ctx, request) -> None:
    error, unknown, found = txn.state.list_transactions(
        request.producer_id_filters, request.state_filters, getattr(request, "duration_filter", -1))
    ctx.reply({"throttle_time": 0, "error_code": error, "unknown_state_filters": unknown,
               "transaction_states": [{"transactional_id": t, "producer_id": pid, "transaction_state": s}
                                      for t, pid, s in found
                                      if not _denied(ctx, acls.DESCRIBE, acls.TRANSACTIONAL_ID, t)]})


# api key -> handler
TXN_HANDLERS = {22: init_producer_id, 24: add_partitions_to_txn, 25: add_offsets_to_txn, 26: end_txn,
                65: describe_transactions, 66: list_transactions}
