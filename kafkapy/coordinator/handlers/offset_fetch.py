"""OffsetFetch (key 9), v0-v9.

Contract (Kafka's handleFetchOffsets): committed offset, leader epoch (v5+)
and metadata per partition; -1 / "" for partitions without a commit and for
unknown groups (no error). Null topics (v2+) means every committed
partition. v8 batches several groups. COORDINATOR_LOAD_IN_PROGRESS (14)
while loading: per partition in v1, top level from v2, per group in v8.
``require_stable`` (v7+) answers UNSTABLE_OFFSET_COMMIT (88) for a
partition with a pending commit: a transactional one waiting for its
marker, or one whose append waits for the followers (Kafka's
pendingOffsetCommits); without it such a partition answers its last
committed offset.

v0 is not the coordinator's (Kafka 3.9's handleOffsetFetchRequestFromZookeeper):
it reads what OffsetCommit v0 wrote to ZooKeeper's
``/consumers/<group>/offsets/<topic>/<partition>`` (standalone: the
embedded store's file), never ``__consumer_offsets``. Describe on the
group (else GROUP_AUTHORIZATION_FAILED (30) on every partition) and on each
topic (TOPIC_AUTHORIZATION_FAILED (29)); a partition the metadata lacks, or
one without a v0 commit, answers -1, "" and UNKNOWN_TOPIC_OR_PARTITION (3)
(Kafka's OffsetFetchResponse.UNKNOWN_PARTITION); a stored one its offset,
"" and NONE; a failed read UNKNOWN_SERVER_ERROR (-1).
"""

import logging

from kafkapy.protocol.errors import ErrorCode
from kafkapy.coordinator.handlers import denied_topics, group_denied
from kafkapy.protocol import acls

API_KEY = 9

log = logging.getLogger("kafkapy.coordinator")


def _stored_v0(ctx, group_id, topic, partition) -> tuple:
    """``(offset, error)`` of one partition's v0 commit (module docstring)."""
    if not ctx.store.partition_exists(topic, partition):
        return -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    try:
        offset = ctx.store.broker.store.consumer_offset(group_id, topic, partition)
    except Exception as exc:  # noqa: BLE001 - Kafka answers any failure as its error code
        log.warning("OffsetFetch v0 of group %r for %s-%d failed: %s", group_id, topic, partition, exc)
        return -1, ErrorCode.UNKNOWN_SERVER_ERROR
    return (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) if offset is None else (offset, ErrorCode.NONE)


def _fetch_v0(ctx, request) -> list:
    if group_denied(ctx, acls.DESCRIBE, request.group_id):
        denied, group_error = (), ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        denied, group_error = denied_topics(ctx, acls.DESCRIBE, [t.name for t in request.topics]), None
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partition_indexes:
            if group_error is not None or t.name in denied:
                offset, error = -1, group_error or ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                offset, error = _stored_v0(ctx, request.group_id, t.name, p)
            partitions.append({"partition_index": p, "committed_offset": offset, "metadata": "",
                               "error_code": error})
        topics.append({"name": t.name, "partitions": partitions})
    return topics


def _partition(p, om, error):
    if om is None:
        return {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                "metadata": "", "error_code": error}
    return {"partition_index": p, "committed_offset": om.offset,
            "committed_leader_epoch": om.leader_epoch, "metadata": om.metadata, "error_code": error}


def _fetch(ctx, group_id, topics, require_stable, member_id=None, member_epoch=-1):
    wanted = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    if group_denied(ctx, acls.DESCRIBE, group_id):  # Kafka: Describe on the group
        error, found = ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    else:
        error, found = ctx.coordinator.fetch_offsets(group_id, wanted, require_stable, member_id, member_epoch)
        if getattr(ctx, "authorizer", None) is not None and not error:
            # Kafka: offsets of topics the principal may not Describe are left out of an
            # all-topics answer, and answered TOPIC_AUTHORIZATION_FAILED when asked for.
            denied = denied_topics(ctx, acls.DESCRIBE, [t for t, _ in found])
            if wanted is None:
                found = [(t, parts) for t, parts in found if t not in denied]
            else:
                found = [(t, [(p, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p, _om, _e in parts]
                          if t in denied else parts) for t, parts in found]
    if error and wanted is not None:
        # v0-v1 have no top-level error: every partition carries it.
        found = [(t, [(p, None, error) for p in parts]) for t, parts in wanted]
    out = [{"name": t, "partitions": [_partition(p, om, e) for p, om, e in parts]} for t, parts in found]
    return error, out


def handle(ctx, request):
    version = ctx.api_version
    if version == 0:
        ctx.reply({"topics": _fetch_v0(ctx, request), "throttle_time": 0})
        return
    require_stable = request.require_stable if version >= 7 else False
    if version >= 8:
        groups = []
        for grp in request.groups:
            member_id, member_epoch = (grp.member_id, grp.member_epoch) if version >= 9 else (None, -1)
            error, topics = _fetch(ctx, grp.group_id, grp.topics, require_stable, member_id, member_epoch)
            groups.append({"group_id": grp.group_id, "topics": topics if not error else [],
                           "error_code": error})
        ctx.reply({"groups": groups, "throttle_time": 0})
        return
    error, topics = _fetch(ctx, request.group_id, request.topics, require_stable)
    if version >= 2 and error:
        topics = []
    ctx.reply({"topics": topics, "error_code": error if version >= 2 else ErrorCode.NONE,
               "throttle_time": 0})
