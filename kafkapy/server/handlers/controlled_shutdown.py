"""ControlledShutdown (key 7), v0-v3: a stopping broker asks the controller to
move its leaderships away (Kafka's ZooKeeper mode: KafkaApis
handleControlledShutdownRequest -> KafkaController.controlledShutdown).

Contract (v0 comes with request header v0, without client id:
``protocol.headers``; v0-v1 have no ``broker_epoch``: -1):
- Cluster mode: the request goes through the local door
  (``controller_channel.ask_controller``) to this broker's controller child,
  which runs it as a controller event (``Controller._request_controlled_shutdown``):
  leaders move to another ISR member that is not shutting down, the ISRs
  lose the broker, and the answer is ``error_code`` NONE with the partitions
  the broker still leads (those no other replica can take: one replica, or
  an ISR of it alone), or:
  NOT_CONTROLLER (41) when this broker is not the controller (or stops
  being it meanwhile); STALE_BROKER_EPOCH (77) for a ``broker_epoch`` older
  than the broker's registration (-1, Kafka's unknown epoch, is accepted);
  BROKER_NOT_AVAILABLE (8) for a broker id not registered;
  REQUEST_TIMED_OUT (7) when the controller did not answer within
  ``request.timeout.ms`` (the broker tries again).
- Standalone (no ``zookeeper.connect``): NOT_CONTROLLER; there is no
  controller to move anything.
"""

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.protocol import acls
from kafkapy.server.security.authorizer import cluster_denied

API_KEY = 7


def handle(ctx, request):
    if cluster_denied(ctx, acls.CLUSTER_ACTION):
        return construct(ctx.response_class(), {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                "remaining_partitions": []})
    config = ctx.broker.config
    error, remaining = ErrorCode.NOT_CONTROLLER, []
    if config["zookeeper.connect"]:
        from kafkapy.server.controller_channel import ask_controller

        timeout_ms = config["request.timeout.ms"]
        reply = ask_controller(config, ("controlled_shutdown", int(request.broker_id),
                                        int(getattr(request, "broker_epoch", -1)), timeout_ms), timeout_ms / 1000 + 5)
        if reply is None or reply[0] in ("timeout", "failed"):
            error = ErrorCode.REQUEST_TIMED_OUT
        elif reply[0] != "not_controller":
            error, remaining = reply
    return construct(ctx.response_class(), {
        "error_code": error,
        "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining]})
