"""DescribeGroups (key 15), v0-v5.

Contract (Kafka's handleDescribeGroup): state, protocol type, and in Stable
the selected protocol and each member's metadata and assignment (other
states list members without them). An unknown group is reported as state
"Dead" with no error. COORDINATOR_LOAD_IN_PROGRESS (14) per group while
loading. authorized_operations (v3+, when asked): the bit set of the group
operations the principal may do (all of them without an authorizer), on the
groups answered without error; else Kafka's INT32_MIN. client_host is the address the
member's JoinGroup came from, as Kafka formats it ("/127.0.0.1").
"""

from kafkapy.coordinator.handlers import authorized_operations, group_denied
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode

API_KEY = 15


def handle(ctx, request):
    groups = [{"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": group_id, "group_state": "",
               "protocol_type": "", "protocol_data": "", "members": []}
              if group_denied(ctx, acls.DESCRIBE, group_id)  # Kafka: Describe on each group
              else ctx.coordinator.describe_group(group_id) for group_id in request.groups]
    if getattr(request, "include_authorized_operations", False):
        for g in groups:
            if g["error_code"] == ErrorCode.NONE:
                g["authorized_operations"] = authorized_operations(ctx, acls.GROUP, g["group_id"])
    ctx.reply({"groups": groups, "throttle_time": 0})
