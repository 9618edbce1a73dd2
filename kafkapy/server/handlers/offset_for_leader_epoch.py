"""OffsetForLeaderEpoch (key 23), v0-v4: where a leader epoch ends in the
leader's log (Kafka's ReplicaManager.lastOffsetForLeaderEpoch; consumers
use it to detect truncation after a leader change, KIP-320).

Contract, per partition:
- Only the leader answers (Kafka 3.9 asks for the leader whatever the
  ``replica_id``, v3+): a partition this broker hosts but does not lead
  (a follower, or no role yet) -> NOT_LEADER_OR_FOLLOWER (6); one another
  broker hosts -> NOT_LEADER_OR_FOLLOWER; an unknown one ->
  UNKNOWN_TOPIC_OR_PARTITION (3).
- ``current_leader_epoch`` (v2+; -1 or absent: no check) is checked first, as Kafka's
  getLocalLog: older than the partition's -> FENCED_LEADER_EPOCH (74),
  newer -> UNKNOWN_LEADER_EPOCH (75).
- Otherwise ``leader_epoch`` and ``end_offset`` are Kafka's endOffsetFor over
  the leader-epoch cache (``Partition.last_offset_for_leader_epoch``): the
  largest epoch not above the one asked with the start of the next epoch as
  its end (the latest epoch ends at the log end offset); -1/-1 when it is
  undefined (an epoch above the latest, or -1). Errors answer -1/-1.
- v0 answers the end offset without its leader epoch, v1 with it; both are
  computed as above. kio has no schemas for v0-v1 (KIP-896 dropped them in
  4.0): ours are in kafkapy.protocol.schema.
- ACLs (with an authorizer): ClusterAction on the cluster (a broker), else
  Describe on each topic; an unauthorized topic's partitions answer
  TOPIC_AUTHORIZATION_FAILED (29), -1/-1.
"""

from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.server.security.authorizer import denied_topics

API_KEY = 23


def handle(ctx, request):
    replica_manager = ctx.broker.replica_manager
    denied = denied_topics(ctx, acls.DESCRIBE, [t.topic for t in request.topics], acls.CLUSTER_ACTION)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            partition = replica_manager.get_partition(topic.topic, p.partition)
            epoch = end_offset = -1
            if topic.topic in denied:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition is None:
                code = replica_manager.unhosted_error(topic.topic, p.partition)
            else:
                code = partition.check_leader(p.current_leader_epoch if ctx.api_version >= 2 else -1)
                if code == ErrorCode.NONE:
                    epoch, end_offset = partition.last_offset_for_leader_epoch(p.leader_epoch)
            partitions.append({"error_code": code, "partition": p.partition, "leader_epoch": epoch,
                               "end_offset": end_offset})
        topics.append({"topic": topic.topic, "partitions": partitions})
    return construct(ctx.response_class(), {"throttle_time": 0, "topics": topics})
