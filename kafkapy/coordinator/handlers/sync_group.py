"""SyncGroup (key 14), v0-v5.

Contract (Kafka's handleSyncGroup): followers' SyncGroup is parked until the
leader's arrives; the leader's assignment is stored in __consumer_offsets
(group metadata record) and then every parked member gets its part. A member
the leader assigned nothing gets a valid empty assignment (for a "consumer"
group an encoded ConsumerProtocolAssignment with no partitions; see
GroupCoordinator.sync_group). In Stable, the stored assignment is returned
at once. Errors: UNKNOWN_MEMBER_ID (25), ILLEGAL_GENERATION (22),
REBALANCE_IN_PROGRESS (27) while preparing a rebalance or when a new one
starts before the leader synced, INCONSISTENT_GROUP_PROTOCOL (23) when v5's
protocol type/name differ from the group's, FENCED_INSTANCE_ID (82).
"""

API_KEY = 14


def handle(ctx, request):
    version = ctx.api_version
    ctx.coordinator.sync_group(
        request.group_id, request.generation_id, request.member_id,
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None,
        request.group_instance_id if version >= 3 else None,
        [(a.member_id, bytes(a.assignment)) for a in request.assignments], ctx.reply)
