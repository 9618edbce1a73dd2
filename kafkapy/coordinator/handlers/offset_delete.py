"""OffsetDelete (key 47), v0.

Contract (Kafka's handleDeleteOffsets): deletes committed offsets of an
Empty group, or of topics a live "consumer" group does not subscribe to;
partitions of subscribed topics get GROUP_SUBSCRIBED_TO_TOPIC (86).
GROUP_ID_NOT_FOUND (69) for an unknown group; NON_EMPTY_GROUP (68) for a
live group whose subscriptions cannot be read (not the consumer protocol).
"""

from kafkapy.coordinator.handlers import denied_topics, group_denied
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode

API_KEY = 47


def handle(ctx, request):
    partitions = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    if group_denied(ctx, acls.DELETE, request.group_id):  # Kafka: Delete on the group, then Read on each topic
        ctx.reply({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "topics": [], "throttle_time": 0})
        return
    denied = denied_topics(ctx, acls.READ, [t.name for t in request.topics])
    error, results = ctx.coordinator.delete_offsets(request.group_id, [tp for tp in partitions if tp[0] not in denied])
    results.update({tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp[0] in denied})
    topics = []
    if not error:
        for t in request.topics:
            topics.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": results[(t.name, p.partition_index)]}
                for p in t.partitions]})
    ctx.reply({"error_code": error, "topics": topics, "throttle_time": 0})
