"""ConsumerGroupDescribe (key 69), v0-v1 (KIP-848).

Contract (Kafka's GroupMetadataManager.consumerGroupDescribe): per group its
state (Empty, Assigning, Reconciling, Stable), group epoch, target
assignment epoch, assignor, and each member's epoch, subscription, current
and target assignment (topic id and name); v1 adds member_type (1: a
consumer-protocol member). GROUP_ID_NOT_FOUND (69) for an unknown group and
for a classic group (with Kafka's messages), COORDINATOR_LOAD_IN_PROGRESS
(14) while loading. authorized_operations is not computed (INT32_MIN).
"""

API_KEY = 69


def handle(ctx, request):
    ctx.reply({"groups": ctx.coordinator.consumer_group_describe(list(request.group_ids)),
               "throttle_time": 0})
