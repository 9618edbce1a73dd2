"""DeleteRecords (key 21), v0-v2: advance partitions' log start offset.

Contract, per partition (Kafka's ReplicaManager.deleteRecords):
- ``offset`` -1 means the high watermark; otherwise it must be within
  [0, high watermark], else OFFSET_OUT_OF_RANGE (1).
- The log start offset becomes max(current, offset) (it never moves back);
  ``low_watermark`` answers the resulting log start offset. Records below it
  are no longer readable at once (Fetch from below -> OFFSET_OUT_OF_RANGE,
  ListOffsets EARLIEST -> the new start); segments wholly below it are
  deleted by the next retention pass, as in Kafka.
- Unknown partition -> UNKNOWN_TOPIC_OR_PARTITION (3), low_watermark -1 (one
  another broker hosts: NOT_LEADER_OR_FOLLOWER, ``ReplicaManager.unhosted_error``);
  not led here -> NOT_LEADER_OR_FOLLOWER (6) (``Partition.check_leader``).
- With one replica the high watermark is the log end offset, so the request
  never waits for followers: ``timeout`` is not needed.
"""

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.protocol import acls
from kafkapy.server.security.authorizer import denied_topics

API_KEY = 21


def handle(ctx, request):
    get_partition = ctx.broker.replica_manager.get_partition
    denied = denied_topics(ctx, acls.DELETE, [t.name for t in request.topics])  # Kafka: Delete on the topic
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            partition = get_partition(topic.name, p.partition_index)
            if topic.name in denied:
                code, low_watermark = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
            elif partition is None:
                code, low_watermark = ctx.broker.replica_manager.unhosted_error(topic.name, p.partition_index), -1
            elif code := partition.check_leader(-1):
                low_watermark = -1
            else:
                code, low_watermark = partition.delete_records_on_leader(p.offset)
            partitions.append({"partition_index": p.partition_index, "low_watermark": low_watermark,
                               "error_code": code})
        topics.append({"name": topic.name, "partitions": partitions})
    return construct(ctx.response_class(), {"throttle_time": 0, "topics": topics})

