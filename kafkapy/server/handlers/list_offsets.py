"""ListOffsets (key 2), v1-v7.

Contract, per partition (Kafka's special timestamps):
- -1 LATEST: the high watermark (read_uncommitted) or last stable offset
  (read_committed; equal until transactions exist); timestamp -1. For a
  replica (replica_id >= 0, a follower's fetcher after OFFSET_OUT_OF_RANGE)
  the log end offset, as Kafka reads a replica's request with no isolation.
- -2 EARLIEST: the log start offset; timestamp -1.
- -3 MAX_TIMESTAMP (v7+): the offset and timestamp of the batch holding the
  largest timestamp; -1/-1 for an empty log.
- t >= 0: the first offset whose timestamp is >= t, via the time index, with
  that batch's timestamp; -1/-1 if none (or if it is not yet below the high
  watermark). Other negative values: -1/-1.
- Errors: UNKNOWN_TOPIC_OR_PARTITION (3) (a partition another broker hosts:
  NOT_LEADER_OR_FOLLOWER, ``ReplicaManager.unhosted_error``); ``Partition.check_leader``'s
  NOT_LEADER_OR_FOLLOWER (6), FENCED_LEADER_EPOCH (74), UNKNOWN_LEADER_EPOCH
  (75) against ``current_leader_epoch`` (v4+). ``leader_epoch`` (v4+) is the
  partition's leader epoch.
"""

from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import LATEST_TIMESTAMP
from kafkapy.server.handlers import construct

API_KEY = 2


def handle(ctx, request):
    get_partition = ctx.broker.replica_manager.get_partition
    has_epoch = ctx.api_version >= 4
    topics = []
    for topic in request.topics:
        partitions = []
        for lp in topic.partitions:
            partition = get_partition(topic.name, lp.partition_index)
            code = (ctx.broker.replica_manager.unhosted_error(topic.name, lp.partition_index) if partition is None
                    else partition.check_leader(lp.current_leader_epoch if has_epoch else -1))
            if code:
                partitions.append({"partition_index": lp.partition_index, "error_code": code,
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1})
                continue
            if lp.timestamp == LATEST_TIMESTAMP and request.replica_id >= 0:
                offset, timestamp = partition.log_end_offset, -1
            else:
                offset, timestamp = partition.fetch_offset_for_timestamp(lp.timestamp)
            partitions.append({"partition_index": lp.partition_index, "error_code": 0,
                               "timestamp": timestamp, "offset": offset,
                               "leader_epoch": partition.leader_epoch})
        topics.append({"name": topic.name, "partitions": partitions})
    return construct(ctx.response_class(), {"throttle_time": 0, "topics": topics})

