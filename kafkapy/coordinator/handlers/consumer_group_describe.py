"""ConsumerGroupDescribe (key 69), v0-v1 (KIP-848).

Contract (Kafka's GroupMetadataManager.consumerGroupDescribe): per group its
state (Empty, Assigning, Reconciling, Stable), group epoch, target
assignment epoch, assignor, and each member's epoch, subscription, current
and target assignment (topic id and name); v1 adds member_type (1: a
consumer-protocol member). GROUP_ID_NOT_FOUND (69) for an unknown group and
for a classic group (with Kafka's messages), COORDINATOR_LOAD_IN_PROGRESS
(14) while loading. authorized_operations (when asked): the group operations
the principal may do, on the groups answered without error (else INT32_MIN).
"""

from kafkapy.coordinator.handlers import authorized_operations, group_denied
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode

API_KEY = 69


def handle(ctx, request):
    ids = list(request.group_ids)
    denied = {g for g in ids if group_denied(ctx, acls.DESCRIBE, g)}  # Kafka: Describe on each group
    described = ctx.coordinator.consumer_group_describe([g for g in ids if g not in denied])
    if getattr(request, "include_authorized_operations", False):
        for g in described:
            if g["error_code"] == ErrorCode.NONE:
                g["authorized_operations"] = authorized_operations(ctx, acls.GROUP, g["group_id"])
    described = iter(described)
    ctx.reply({"groups": [{"group_id": g, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "error_message": None,
                           "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                           "members": []} if g in denied else next(described) for g in ids],
               "throttle_time": 0})
