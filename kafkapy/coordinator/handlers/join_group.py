"""JoinGroup (key 11), v0-v9.

Contract (Kafka's GroupCoordinator.handleJoinGroup):
* v0 has no rebalance timeout: the session timeout is used for both.
* A new member (empty member_id) gets its id from the coordinator. From v4
  it first gets MEMBER_ID_REQUIRED (79) with that id and must join again
  with it; v0-v3 join at once. Static members (group_instance_id, v5+)
  skip MEMBER_ID_REQUIRED; a static member rejoining a Stable group without
  changing protocols gets the current generation without a rebalance, and
  the id it replaces is fenced (FENCED_INSTANCE_ID, 82). Before v9 the
  answer names the old leader id, so a returning leader acts as a follower;
  from v9 (KIP-814) a returning leader is answered as leader, with the
  members, and ``skip_assignment`` true.
* v8's ``reason`` (KIP-800) is accepted; Kafka only logs it, and so do we.
* The response is parked until the rebalance completes (all members
  rejoined, or the rebalance timeout passed; an Empty group's first
  rebalance waits group.initial.rebalance.delay.ms). The leader's answer
  lists every member's metadata for the selected protocol.
* Errors: INVALID_GROUP_ID (24) empty group id, INVALID_SESSION_TIMEOUT (26)
  outside group.min/max.session.timeout.ms, INCONSISTENT_GROUP_PROTOCOL (23)
  empty protocol list / other protocol type / no common protocol,
  UNKNOWN_MEMBER_ID (25), GROUP_MAX_SIZE_REACHED (81),
  COORDINATOR_LOAD_IN_PROGRESS (14), REBALANCE_IN_PROGRESS (27) to an
  earlier parked JoinGroup of the same member that a newer one replaced.
"""

import logging
from kafkapy.coordinator.handlers import group_denied
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode

API_KEY = 11
log = logging.getLogger("kafkapy.coordinator")


def handle(ctx, request):
    version = ctx.api_version
    if group_denied(ctx, acls.READ, request.group_id):  # Kafka: Read on the group
        ctx.reply({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "generation_id": -1,
                   "protocol_type": None, "protocol_name": "", "leader": "", "skip_assignment": False,
                   "member_id": "", "members": [], "throttle_time": 0})
        return
    session_timeout = int(request.session_timeout)
    rebalance_timeout = int(request.rebalance_timeout) if version >= 1 else session_timeout
    instance_id = request.group_instance_id if version >= 5 else None
    protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]

    def respond(result):
        if version < 7 and result["protocol_name"] is None:
            result["protocol_name"] = ""  # nullable only from v7
        ctx.reply(result)

    if version >= 8 and request.reason:
        log.info("JoinGroup %s member %r: client reason: %s", request.group_id, request.member_id,
                 request.reason)
    ctx.coordinator.join_group(request.group_id, request.member_id, instance_id, version >= 4,
                               ctx.client_id, ctx.client_host, rebalance_timeout, session_timeout,
                               request.protocol_type, protocols, respond,
                               support_skipping_assignment=version >= 9)
