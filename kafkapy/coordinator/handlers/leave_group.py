"""LeaveGroup (key 13), v0-v5.

Contract (Kafka's handleLeaveGroup): v0-v2 carry one member_id; v3+ a batch
of members, each by member id or (static members) by group_instance_id
alone, with one error each. A member that leaves is removed and a Stable or
CompletingRebalance group rebalances. Unknown group or member:
UNKNOWN_MEMBER_ID (25); a member id that does not match the static member:
FENCED_INSTANCE_ID (82). v0-v2's single error is the top-level error, or
else the member's.
"""

from kafkapy.coordinator.handlers import group_denied
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode

API_KEY = 13


def handle(ctx, request):
    version = ctx.api_version
    if group_denied(ctx, acls.READ, request.group_id):  # Kafka: Read on the group
        ctx.reply({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": [], "throttle_time": 0})
        return
    if version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    top, errors = ctx.coordinator.leave_group(request.group_id, leaving)
    if version < 3:
        ctx.reply({"error_code": top or errors[0], "throttle_time": 0})
        return
    members = [{"member_id": m, "group_instance_id": i, "error_code": e}
               for (m, i), e in zip(leaving, errors)]
    ctx.reply({"error_code": top, "members": members if not top else [], "throttle_time": 0})
