"""ListGroups (key 16), v0-v5.

Contract: every group this coordinator knows, with its protocol type,
(v4+) state and (v5+) type, "classic" or "consumer" (KIP-848); v4's
states_filter and v5's types_filter keep only the named states / types
(compared without case, as Kafka 4 does; an unknown name matches nothing).
COORDINATOR_LOAD_IN_PROGRESS (14) while loading.
"""

from kafkapy.coordinator.handlers import group_denied
from kafkapy.protocol import acls

API_KEY = 16


def handle(ctx, request):
    states = tuple(request.states_filter) if ctx.api_version >= 4 else ()
    types = tuple(request.types_filter) if ctx.api_version >= 5 else ()
    error, groups = ctx.coordinator.list_groups(states, types)
    auth = getattr(ctx, "authorizer", None)
    if auth is not None and not auth.allowed(ctx, acls.DESCRIBE, acls.CLUSTER, acls.CLUSTER_NAME):
        # Kafka: Describe on the cluster lists every group, else those the principal may Describe.
        groups = [g for g in groups if not group_denied(ctx, acls.DESCRIBE, g["group_id"])]
    ctx.reply({"error_code": error, "groups": groups, "throttle_time": 0})
