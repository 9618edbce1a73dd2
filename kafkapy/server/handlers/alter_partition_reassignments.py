"""AlterPartitionReassignments (key 45), v0: start or cancel partition
reassignments (Kafka 3.9's ZooKeeper mode: KafkaApis ->
KafkaController.processApiPartitionReassignment; docs/architecture.md,
"Partition reassignment and replication throttles").

Contract:
- Per partition, ``replicas`` the target replica list, or null to cancel the
  reassignment in progress. In Kafka's order of checks:
  INVALID_REPLICA_ASSIGNMENT (39) for an empty list, duplicate ids, a
  negative id, or a replica to add on a broker that is not live;
  NO_REASSIGNMENT_IN_PROGRESS (85) for a cancel with none running;
  UNKNOWN_TOPIC_OR_PARTITION (3) for a partition that does not exist or
  whose topic is being deleted; NONE once the reassignment is started (the
  answer does not wait for it to finish: ListPartitionReassignments shows it
  until it does). A reassignment of a partition already being reassigned
  replaces it; one also in ``/admin/reassign_partitions`` leaves that znode.
- Cluster mode: the controller decides, through this broker's local door
  (``Controller._request_alter_reassignments``); a broker that is not the
  controller answers NOT_CONTROLLER (41) at the top level, as Kafka's
  (clients send these to the controller Metadata names); REQUEST_TIMED_OUT
  (7) at the top level when the controller did not answer within
  ``timeout_ms`` (at least 1 s).
- Standalone: the broker is the whole cluster and its own controller, so the
  same checks run with this broker as the only live one: a target of this
  broker alone completes at once (NONE), any other broker is
  INVALID_REPLICA_ASSIGNMENT.
"""

from __future__ import annotations

from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct, duration_ms
from kafkapy.server.security.authorizer import cluster_denied

API_KEY = 45


def handle(ctx, request):
    broker = ctx.broker
    asked = [(t.name, int(p.partition_index), None if p.replicas is None else tuple(int(r) for r in p.replicas))
             for t in request.topics for p in t.partitions]
    timeout_ms = max(1000, duration_ms(request.timeout))
    top, message = ErrorCode.NONE, None
    if cluster_denied(ctx, acls.ALTER):  # Kafka: Alter on the cluster
        top, message, results = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, {}
    elif not broker.config["zookeeper.connect"]:
        results = _standalone(broker, asked)
    else:
        from kafkapy.server.controller_channel import ask_controller

        reply = ask_controller(broker.config, ("alter_reassignments", [list(a) for a in asked], timeout_ms),
                               timeout_ms / 1000 + 5)
        results = {}
        if reply == ("not_controller",):
            top, message = ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster."
        elif reply is None or (isinstance(reply, tuple) and reply and reply[0] in ("timeout", "failed")):
            top, message = ErrorCode.REQUEST_TIMED_OUT, None
        else:
            results = {(t, p): (code, msg) for t, p, code, msg in reply}
    return construct(ctx.response_class(), {
        "throttle_time": 0, "error_code": top, "error_message": message,
        "responses": [] if top != ErrorCode.NONE else _by_topic(request, results)})


def _by_topic(request, results) -> list:
    out = []
    for t in request.topics:
        out.append({"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": results[(t.name, p.partition_index)][0],
             "error_message": results[(t.name, p.partition_index)][1]} for p in t.partitions]})
    return out


def _standalone(broker, asked) -> dict:
    """The controller's checks over a one-broker cluster (``ControllerState``)."""
    from kafkapy.controller.state import ControllerState

    md = broker.metadata()
    state = ControllerState(0, {broker.broker_id})
    for name, info in md.topics.items():
        for p in range(info.num_partitions):
            state.assignments[(name, p)] = (broker.broker_id,)
    results = {}
    for topic, p, replicas in asked:
        tp = (topic, p)
        refused = None if replicas is None else state.validate_reassignment(tp, replicas)
        if refused is None:
            if state.build_reassignment(tp, replicas) is None:
                refused = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
            elif state.reassignment_refused(tp) is not None:
                refused = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
        results[tp] = refused or (ErrorCode.NONE, None)
    return results
