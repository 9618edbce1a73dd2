"""DescribeProducers (key 61), v0.

Contract, per partition (Kafka's ReplicaManager.activeProducerState):
- The partition's active idempotent/transactional producers from its
  producer state (the log is the truth: the map is caught up to the log end
  first): ``producer_id``, ``producer_epoch``, ``last_sequence`` (-1 if none),
  ``last_timestamp``, ``coordinator_epoch`` (-1 until transactions exist) and
  ``current_txn_start_offset`` (-1: no open transaction).
- Unknown partition -> UNKNOWN_TOPIC_OR_PARTITION (3); unknown topic names
  every requested partition that way.
"""

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.protocol import acls
from kafkapy.server.security.authorizer import denied_topics

API_KEY = 61


def handle(ctx, request):
    broker = ctx.broker
    denied = denied_topics(ctx, acls.READ, [t.name for t in request.topics])  # Kafka: Read on the topic
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partition_indexes:
            partition = broker.replica_manager.get_partition(topic.name, p)
            if topic.name in denied:
                partitions.append({"partition_index": p, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   "error_message": None, "active_producers": []})
                continue
            if partition is None:
                partitions.append({"partition_index": p,
                                   "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   "error_message": None, "active_producers": []})
                continue
            entries = partition.active_producers()
            partitions.append({"partition_index": p, "error_code": 0, "error_message": None,
                               "active_producers": [
                                   {"producer_id": e.producer_id, "producer_epoch": e.producer_epoch,
                                    "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                                    "coordinator_epoch": e.coordinator_epoch,
                                    "current_txn_start_offset": e.current_txn_first_offset}
                                   for e in entries]})
        topics.append({"name": topic.name, "partitions": partitions})
    return construct(ctx.response_class(), {"throttle_time": 0, "topics": topics})
