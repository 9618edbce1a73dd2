"""DeleteGroups (key 42), v0-v2.

Contract (Kafka's handleDeleteGroups): only an Empty group can be deleted:
its offsets and group metadata are tombstoned in __consumer_offsets.
GROUP_ID_NOT_FOUND (69) for unknown groups, NON_EMPTY_GROUP (68) for groups
with members, COORDINATOR_LOAD_IN_PROGRESS (14) while loading.
"""

from kafkapy.coordinator.handlers import group_denied
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode

API_KEY = 42


def handle(ctx, request):
    names = list(request.groups_names)
    denied = [g for g in names if group_denied(ctx, acls.DELETE, g)]  # Kafka: Delete on each group
    results = ctx.coordinator.delete_groups([g for g in names if g not in denied])
    results.update({g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in denied})
    ctx.reply({"results": [{"group_id": gid, "error_code": err} for gid, err in results.items()],
               "throttle_time": 0})
