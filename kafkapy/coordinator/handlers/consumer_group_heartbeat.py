"""ConsumerGroupHeartbeat (key 68), v0-v1 (KIP-848).

Contract (Kafka's GroupMetadataManager.consumerGroupHeartbeat):
* ``member_epoch`` 0 joins (v1: the client made the member id; v0: an empty
  id gets one from the coordinator), -1 leaves, -2 leaves as a static member
  (treated as -1 here), anything else is the member's current epoch.
* The answer carries the member's epoch, ``group.consumer.heartbeat.interval.ms``
  and, when it changed (or on join), the partitions the member may own now.
  Partitions move revoke-before-assign: a member first loses partitions (its
  epoch stays), and a partition is handed to its new owner only after the
  old owner heartbeats without it.
* Errors: INVALID_REQUEST (42) for a malformed request (empty group or v1
  member id, epoch 0 without rebalance timeout / subscription / with owned
  partitions, epoch < -2), INVALID_REGULAR_EXPRESSION (128),
  UNSUPPORTED_ASSIGNOR (112), UNKNOWN_MEMBER_ID (25) for an unknown member
  (or group) with a non-zero epoch, FENCED_MEMBER_EPOCH (110) for an epoch
  the coordinator did not give (the member must rejoin with 0),
  UNRELEASED_INSTANCE_ID (111), GROUP_MAX_SIZE_REACHED (81),
  GROUP_ID_NOT_FOUND (69) when the group is a non-empty classic group,
  COORDINATOR_LOAD_IN_PROGRESS (14).
"""

from kafkapy.coordinator.handlers import group_denied
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode

API_KEY = 68


def handle(ctx, request):
    if group_denied(ctx, acls.READ, request.group_id):  # Kafka: Read on the group
        ctx.reply({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "error_message": None, "member_id": None,
                   "member_epoch": 0, "heartbeat_interval": 0, "assignment": None, "throttle_time": 0})
        return
    # Answered once the heartbeat's records settled (parked while the followers replicate them).
    ctx.coordinator.consumer_group_heartbeat(ctx.api_version, request, ctx.client_id, ctx.client_host,
                                             respond=ctx.reply)
