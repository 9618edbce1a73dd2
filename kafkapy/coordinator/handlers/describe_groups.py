"""DescribeGroups (key 15), v0-v5.

Contract (Kafka's handleDescribeGroup): state, protocol type, and in Stable
the selected protocol and each member's metadata and assignment (other
states list members without them). An unknown group is reported as state
"Dead" with no error. COORDINATOR_LOAD_IN_PROGRESS (14) per group while
loading. authorized_operations (v3+) is not computed: Kafka's "not
requested" value (INT32_MIN) is sent. client_host is the address the
member's JoinGroup came from, as Kafka formats it ("/127.0.0.1").
"""

API_KEY = 15


def handle(ctx, request):
    groups = [ctx.coordinator.describe_group(group_id) for group_id in request.groups]
    ctx.reply({"groups": groups, "throttle_time": 0})
