"""OffsetCommit (key 8), v0-v9.

Contract (Kafka's handleCommitOffsets): a commit with generation -1 and no
member is accepted for an Empty group (or creates an offsets-only group);
otherwise the member must belong to the group and give its generation:
UNKNOWN_MEMBER_ID (25), ILLEGAL_GENERATION (22) (also for a positive
generation of a group that does not exist), REBALANCE_IN_PROGRESS (27) while
the group awaits SyncGroup, FENCED_INSTANCE_ID (82). Per partition:
OFFSET_METADATA_TOO_LARGE (12) over offset.metadata.max.bytes,
UNKNOWN_TOPIC_OR_PARTITION (3). Offsets are appended to __consumer_offsets
(OffsetCommitValue v3, or v1 with an expire timestamp when v2-v4 give a
retention_time) before the answer, which waits (parked, not holding the
coordinator) until the followers have the append; meanwhile the offsets are
pending (see offset_fetch). committed_leader_epoch is kept from v6.

v9 (KIP-848): for a consumer group, ``generation_id_or_member_epoch`` is
the member epoch: UNKNOWN_MEMBER_ID (25) for an unknown member,
STALE_MEMBER_EPOCH (113) for any other epoch than the member's,
UNSUPPORTED_VERSION (35) for a consumer-protocol member below v9; an empty
consumer group takes commits with epoch -1 (admin tools). A positive
generation/epoch for a group that does not exist is GROUP_ID_NOT_FOUND (69)
from v9 (ILLEGAL_GENERATION before).

v0-v1 (Kafka 3.9 still serves them; 4.0 dropped them, KIP-896): v1 carries
a per-partition ``commit_timestamp`` that is stored as the commit time
(-1: now), so an offsets-only group's offsets expire
``offsets.retention.minutes`` after it, as Kafka's GroupCoordinatorAdapter
does; no retention time, so no expire timestamp. v1 with generation -1 and
no member is the group-less commit above.

v0 is not the coordinator's (Kafka 3.9's commitOffsetsToZookeeper): any
broker takes it, no group is created or checked, and each offset goes to
ZooKeeper's ``/consumers/<group>/offsets/<topic>/<partition>`` as decimal
text (standalone: the embedded store's file, ``MetadataStore
.set_consumer_offset``), never to ``__consumer_offsets``, so OffsetFetch
v1+ does not see it and a v0 fetch sees nothing else. Its metadata is
checked (OFFSET_METADATA_TOO_LARGE) and dropped. After Read on the group
and on each topic: UNKNOWN_TOPIC_OR_PARTITION (3) for a partition the
metadata lacks; any failure of the write (ZooKeeper, a group ZooKeeper
cannot name such as "") is UNKNOWN_SERVER_ERROR (-1), Kafka's
Errors.forException.
"""

import logging

from kafkapy.coordinator.handlers import denied_topics, group_denied
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode

API_KEY = 8

log = logging.getLogger("kafkapy.coordinator")


def _commit_v0(ctx, group_id, offsets) -> dict:
    """``{(topic, partition): error}`` of v0's offsets, written to the metadata store."""
    store = ctx.store
    max_bytes = ctx.coordinator.config.offset_metadata_max_bytes
    results = {}
    for topic, partition, offset, _epoch, metadata, _ts in offsets:
        if not store.partition_exists(topic, partition):
            results[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif metadata is not None and len(metadata.encode("utf-8")) > max_bytes:
            results[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        else:
            try:
                store.broker.store.set_consumer_offset(group_id, topic, partition, offset)
                results[(topic, partition)] = ErrorCode.NONE
            except Exception as exc:  # noqa: BLE001 - Kafka answers any failure as its error code
                log.warning("OffsetCommit v0 of group %r for %s-%d failed: %s", group_id, topic, partition, exc)
                results[(topic, partition)] = ErrorCode.UNKNOWN_SERVER_ERROR
    return results


def handle(ctx, request):
    version = ctx.api_version
    retention_ms = int(request.retention_time) if 2 <= version <= 4 else -1
    offsets = []
    for topic in request.topics:
        for p in topic.partitions:
            epoch = p.committed_leader_epoch if version >= 6 else -1
            commit_ts = p.commit_timestamp if version == 1 else -1
            offsets.append((topic.name, p.partition_index, p.committed_offset, epoch, p.committed_metadata,
                            commit_ts))
    member_id, generation = (request.member_id, request.generation_id_or_member_epoch) if version >= 1 \
        else ("", -1)
    def answer(results):
        topics = []
        for topic in request.topics:
            topics.append({"name": topic.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": results[(topic.name, p.partition_index)]}
                for p in topic.partitions]})
        ctx.reply({"topics": topics, "throttle_time": 0})

    if group_denied(ctx, acls.READ, request.group_id):  # Kafka: Read on the group, then Read on each topic
        return answer({(o[0], o[1]): ErrorCode.GROUP_AUTHORIZATION_FAILED for o in offsets})
    denied = denied_topics(ctx, acls.READ, [t.name for t in request.topics])
    refused = {(o[0], o[1]): ErrorCode.TOPIC_AUTHORIZATION_FAILED for o in offsets if o[0] in denied}
    if len(denied) >= len({t.name for t in request.topics}):
        return answer(refused)
    if version == 0:
        return answer({**_commit_v0(ctx, request.group_id, [o for o in offsets if o[0] not in denied]),
                       **refused})
    # Answered once the commit's append settled (parked while the followers replicate it).
    ctx.coordinator.commit_offsets(
        request.group_id, member_id, request.group_instance_id if version >= 7 else None,
        generation, [o for o in offsets if o[0] not in denied], retention_ms, api_version=version,
        respond=lambda results: answer({**results, **refused}))
