"""DeleteRecords (key 21), v0-v2: advance partitions' log start offset.

Contract, per partition (Kafka's ReplicaManager.deleteRecords):
- ``offset`` -1 means the high watermark; otherwise it must be within
  [0, high watermark], else OFFSET_OUT_OF_RANGE (1).
- The log start offset becomes max(current, offset) (it never moves back);
  ``low_watermark`` answers the resulting log start offset. Records below it
  are no longer readable at once (Fetch from below -> OFFSET_OUT_OF_RANGE,
  ListOffsets EARLIEST -> the new start); segments wholly below it are
  deleted by the next retention pass, as in Kafka.
- Unknown partition -> UNKNOWN_TOPIC_OR_PARTITION (3), low_watermark -1.
- With one replica the high watermark is the log end offset, so the request
  never waits for followers: ``timeout`` is not needed.
"""

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.storage.errors import OffsetOutOfRange

API_KEY = 21
HIGH_WATERMARK = -1


def handle(ctx, request):
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, low_watermark = _delete(broker, topic.name, p.partition_index, p.offset)
            partitions.append({"partition_index": p.partition_index, "low_watermark": low_watermark,
                               "error_code": code})
        topics.append({"name": topic.name, "partitions": partitions})
    return construct(ctx.response_class(), {"throttle_time": 0, "topics": topics})


def _delete(broker, topic, partition, offset):
    part = broker.partition(topic, partition)
    if part is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
    lg, _slot = part
    with lg.lock():
        if offset == HIGH_WATERMARK:
            offset = lg.high_watermark
        try:
            return ErrorCode.NONE, lg.delete_records(offset)
        except OffsetOutOfRange:
            return ErrorCode.OFFSET_OUT_OF_RANGE, -1
