"""ListGroups (key 16), v0-v4.

Contract: every group this coordinator knows, with its protocol type and
(v4+) state; v4's states_filter keeps only the named states (compared
without case, as Kafka 4 does). COORDINATOR_LOAD_IN_PROGRESS (14) while
loading.
"""

API_KEY = 16


def handle(ctx, request):
    states = tuple(request.states_filter) if ctx.api_version >= 4 else ()
    error, groups = ctx.coordinator.list_groups(states)
    ctx.reply({"error_code": error, "groups": groups, "throttle_time": 0})
