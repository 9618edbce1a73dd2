"""DeleteGroups (key 42), v0-v2.

Contract (Kafka's handleDeleteGroups): only an Empty group can be deleted:
its offsets and group metadata are tombstoned in __consumer_offsets.
GROUP_ID_NOT_FOUND (69) for unknown groups, NON_EMPTY_GROUP (68) for groups
with members, COORDINATOR_LOAD_IN_PROGRESS (14) while loading.
"""

API_KEY = 42


def handle(ctx, request):
    results = ctx.coordinator.delete_groups(list(request.groups_names))
    ctx.reply({"results": [{"group_id": gid, "error_code": err} for gid, err in results.items()],
               "throttle_time": 0})
