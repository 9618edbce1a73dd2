"""ListPartitionReassignments (key 46), v0: the reassignments in progress
(Kafka 3.9's ZooKeeper mode: KafkaController.processListPartitionReassignments).

Contract:
- ``topics`` null: every partition being reassigned; otherwise only the
  partitions named that are being reassigned (unknown ones are left out, no
  error). Each with ``replicas`` (RS: the target followed by the original
  replicas leaving), ``adding_replicas`` and ``removing_replicas``.
- Cluster mode: the controller answers through this broker's local door;
  NOT_CONTROLLER (41) at the top level on another broker, REQUEST_TIMED_OUT
  (7) if the controller did not answer within ``timeout_ms`` (at least 1 s).
- Standalone: nothing is ever being reassigned (a one-broker reassignment
  completes at once): an empty answer.
"""

from __future__ import annotations

from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct, duration_ms
from kafkapy.server.security.authorizer import cluster_denied

API_KEY = 46


def handle(ctx, request):
    broker = ctx.broker
    top, message, rows = ErrorCode.NONE, None, []
    if cluster_denied(ctx, acls.DESCRIBE):  # Kafka: Describe on the cluster
        top = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif broker.config["zookeeper.connect"]:
        from kafkapy.server.controller_channel import ask_controller

        wanted = None if request.topics is None else [[t.name, int(p)] for t in request.topics
                                                      for p in t.partition_indexes]
        timeout_ms = max(1000, duration_ms(request.timeout))
        reply = ask_controller(broker.config, ("list_reassignments", wanted, timeout_ms), timeout_ms / 1000 + 5)
        if reply == ("not_controller",):
            top, message = ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster."
        elif reply is None or (isinstance(reply, tuple) and reply and reply[0] in ("timeout", "failed")):
            top = ErrorCode.REQUEST_TIMED_OUT
        else:
            rows = reply
    by_topic: dict = {}
    for topic, p, replicas, adding, removing in rows:
        by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": tuple(replicas),
                                               "adding_replicas": tuple(adding),
                                               "removing_replicas": tuple(removing)})
    return construct(ctx.response_class(), {
        "throttle_time": 0, "error_code": top, "error_message": message,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
