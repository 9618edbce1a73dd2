"""TxnOffsetCommit (key 28), v0-v4.

Contract (Kafka's handleTxnOffsetCommit / doTxnCommitOffsets): offsets a
transactional producer commits for a group inside its transaction
(``send_offsets_to_transaction``, after AddOffsetsToTxn). They are written to
the group's ``__consumer_offsets`` partition in a transactional batch of the
producer and become the group's committed offsets only when the
transaction's COMMIT marker reaches that partition (ABORT drops them);
meanwhile OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT
(88) for them. v3+ carry the member id, generation and instance id:
UNKNOWN_MEMBER_ID (25) for a member the group does not have,
ILLEGAL_GENERATION (22) for another generation, FENCED_INSTANCE_ID (82).
Per partition as OffsetCommit: OFFSET_METADATA_TOO_LARGE (12),
UNKNOWN_TOPIC_OR_PARTITION (3); a producer epoch older than the one the
partition last saw: INVALID_PRODUCER_EPOCH (47).

KIP-890 (``transaction.partition.verification.enable``, on by default;
Kafka 3.6+): the producer's first offsets of a transaction for the group's
``__consumer_offsets`` partition wait for its transaction coordinator to say
that partition is in its ongoing transaction at this epoch (the process's
``OffsetCommitVerification``); refused, every partition answers
INVALID_TXN_STATE (48; TRANSACTION_ABORTABLE, 120, from v4) when the
partition is not in the transaction (a commit after EndTxn),
INVALID_PRODUCER_EPOCH (47) when fenced, CONCURRENT_TRANSACTIONS (51) while
it ends, COORDINATOR_LOAD_IN_PROGRESS (14) when the coordinator did not
answer, the coordinator's own errors as they are. v0-v1 get
COORDINATOR_NOT_AVAILABLE (15) for COORDINATOR_LOAD_IN_PROGRESS, as
Kafka's KafkaApis answers clients before 2.3.
"""

from kafkapy.coordinator.handlers import denied_topics, group_denied
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode

API_KEY = 28


def handle(ctx, request):
    version = ctx.api_version
    offsets = [(topic.name, p.partition_index, p.committed_offset,
                p.committed_leader_epoch if version >= 2 else -1, p.committed_metadata)
               for topic in request.topics for p in topic.partitions]
    member_id = request.member_id if version >= 3 else ""
    generation = request.generation_id if version >= 3 else -1
    instance = request.group_instance_id if version >= 3 else None
    def answer(results):
        ctx.reply({"throttle_time": 0, "topics": [
            {"name": topic.name, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": _compatible(int(results[(topic.name, p.partition_index)]), version)}
                for p in topic.partitions]}
            for topic in request.topics]})

    auth = getattr(ctx, "authorizer", None)
    if auth is not None and not auth.allowed(ctx, acls.WRITE, acls.TRANSACTIONAL_ID, request.transactional_id):
        return answer({(o[0], o[1]): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for o in offsets})
    if group_denied(ctx, acls.READ, request.group_id):
        return answer({(o[0], o[1]): ErrorCode.GROUP_AUTHORIZATION_FAILED for o in offsets})
    # Kafka: Write on the transactional id, Read on the group, then Read on each topic
    denied = denied_topics(ctx, acls.READ, [t.name for t in request.topics])
    allowed = [o for o in offsets if o[0] not in denied]
    refused = {(o[0], o[1]): ErrorCode.TOPIC_AUTHORIZATION_FAILED for o in offsets if o[0] in denied}
    if not allowed:
        return answer(refused)
    verification = getattr(ctx, "verification", None)

    def verify(topic, partition, then):
        verification.start(request.transactional_id, request.producer_id, request.producer_epoch, topic,
                           partition, version >= _ABORTABLE_FROM, then)
    # Answered once the batch's append settled (parked while the followers replicate it).
    ctx.coordinator.txn_commit_offsets(request.group_id, request.producer_id, request.producer_epoch,
                                       member_id, instance, generation, allowed,
                                       respond=lambda results: answer({**results, **refused}),
                                       verify=None if verification is None else verify)


# TxnOffsetCommit v4 (KIP-890, Kafka 3.8) is the first to know TRANSACTION_ABORTABLE.
_ABORTABLE_FROM = 4


def _compatible(error_code: int, version: int) -> int:
    """Kafka's KafkaApis: clients before TxnOffsetCommit v2 (0.11-2.0) may crash
    on COORDINATOR_LOAD_IN_PROGRESS (KAFKA-7296); they get COORDINATOR_NOT_AVAILABLE."""
    if error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < 2:
        return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return error_code
