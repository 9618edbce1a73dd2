"""Heartbeat (key 12), v0-v4.

Contract (Kafka's handleHeartbeat): NONE in Stable and CompletingRebalance
(the session timer restarts), REBALANCE_IN_PROGRESS (27) while preparing a
rebalance (the member must rejoin), UNKNOWN_MEMBER_ID (25) for an unknown
group or member, ILLEGAL_GENERATION (22), FENCED_INSTANCE_ID (82),
INVALID_GROUP_ID (24) for an empty group id. While the coordinator is still
loading, NONE (Kafka answers blindly then).
"""

from kafkapy.coordinator.handlers import group_denied
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode

API_KEY = 12


def handle(ctx, request):
    if group_denied(ctx, acls.READ, request.group_id):  # Kafka: Read on the group
        ctx.reply({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time": 0})
        return
    instance_id = request.group_instance_id if ctx.api_version >= 3 else None
    error = ctx.coordinator.heartbeat(request.group_id, request.member_id, instance_id,
                                      request.generation_id)
    ctx.reply({"error_code": error, "throttle_time": 0})
