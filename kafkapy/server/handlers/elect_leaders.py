"""ElectLeaders (key 43), v0-v2: preferred or unclean leader elections
(Kafka's ZooKeeper mode: KafkaApis.handleElectLeaders ->
ReplicaManager.electLeaders -> KafkaController.electLeaders, then
DelayedElectLeader).

Contract:
- ``election_type`` 0 PREFERRED (v0 has no field: preferred), 1 UNCLEAN;
  another value -> INVALID_REQUEST (42) for the request and every partition.
- ``topic_partitions`` null: every partition, and the answer leaves out the
  ones that answered ELECTION_NOT_NEEDED (Kafka's rule); otherwise every
  partition asked is answered.
- Cluster mode: the controller child decides (through the local door,
  ``Controller._request_elect_leaders``): per partition ELECTION_NOT_NEEDED
  (84; preferred: the first assigned replica leads; unclean: the leader is
  live), PREFERRED_LEADER_NOT_AVAILABLE (80) / ELIGIBLE_LEADERS_NOT_AVAILABLE
  (83), INVALID_TOPIC_EXCEPTION (17) for a topic being deleted,
  UNKNOWN_TOPIC_OR_PARTITION (3); an elected partition answers NONE once
  this broker's metadata shows its new leader, or REQUEST_TIMED_OUT (7)
  after ``timeout_ms`` (the worker polls its metadata meanwhile: the
  controller's own UpdateMetadata arrives within milliseconds).
  NOT_CONTROLLER (41) per partition when this broker is not the controller.
- Standalone: the broker leads every partition, which is its preferred
  replica: ELECTION_NOT_NEEDED for each known partition,
  UNKNOWN_TOPIC_OR_PARTITION for the others.
"""

import time

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct, duration_ms
from kafkapy.protocol import acls
from kafkapy.server.security.authorizer import cluster_denied

API_KEY = 43
PREFERRED, UNCLEAN = 0, 1
_POLL_S = 0.02


def handle(ctx, request):
    broker = ctx.broker
    config = broker.config
    election_type = getattr(request, "election_type", PREFERRED)
    timeout_ms = max(0, duration_ms(request.timeout))
    asked = None
    if request.topic_partitions is not None:
        asked = sorted({(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions})
    top = ErrorCode.NONE
    if cluster_denied(ctx, acls.ALTER):  # Kafka: Alter on the cluster, every partition refused
        top = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        results = {tp: ErrorCode.CLUSTER_AUTHORIZATION_FAILED for tp in asked or ()}
    elif election_type not in (PREFERRED, UNCLEAN):
        top = ErrorCode.INVALID_REQUEST
        results = {tp: ErrorCode.INVALID_REQUEST for tp in asked or ()}
    elif not config["zookeeper.connect"]:
        md = broker.metadata()
        known = [(t, p) for t, info in md.topics.items() for p in range(info.num_partitions)]
        results = {tp: ErrorCode.ELECTION_NOT_NEEDED if tp in set(known) else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                   for tp in (known if asked is None else asked)}
    else:
        results = _elect(broker, config, election_type == PREFERRED, asked, timeout_ms)
    if asked is None:
        results = {tp: e for tp, e in results.items() if e != ErrorCode.ELECTION_NOT_NEEDED}
    by_topic: dict = {}
    for (topic, p), error in sorted(results.items()):
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": error, "error_message": None})
    return construct(ctx.response_class(), {
        "throttle_time": 0, "error_code": top,
        "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]})


def _elect(broker, config, preferred: bool, asked, timeout_ms: int) -> dict:
    from kafkapy.server.controller_channel import ask_controller

    deadline = time.monotonic() + timeout_ms / 1000
    reply = ask_controller(config, ("elect_leaders", preferred, None if asked is None else [list(tp) for tp in asked],
                                    max(timeout_ms, 1000)), max(timeout_ms / 1000, 1.0) + 5)
    if reply is None or (isinstance(reply, tuple) and reply and reply[0] in ("timeout", "failed", "not_controller")):
        error = ErrorCode.NOT_CONTROLLER if reply == ("not_controller",) else ErrorCode.REQUEST_TIMED_OUT
        return {tp: error for tp in asked or ()}
    results, waiting = {}, {}
    for topic, p, error, leader in reply:
        if error == ErrorCode.NONE:
            waiting[(topic, p)] = leader
        else:
            results[(topic, p)] = error
    # Kafka's DelayedElectLeader: done when this broker's metadata shows each new leader
    while waiting:  # bounded by the deadline
        md = broker.metadata()
        for tp, leader in list(waiting.items()):
            info = md.topics.get(tp[0])
            state = info.partitions.get(tp[1]) if info is not None else None
            if state is not None and state.leader == leader:
                results[tp] = ErrorCode.NONE
                del waiting[tp]
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(_POLL_S)
    for tp in waiting:
        results[tp] = ErrorCode.REQUEST_TIMED_OUT
    return results
