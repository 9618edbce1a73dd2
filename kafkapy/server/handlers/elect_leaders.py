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
  after ``timeout_ms`` (a ``Hold``: the worker serves other requests
  meanwhile; the controller's own UpdateMetadata arrives within
  milliseconds).
  NOT_CONTROLLER (41) per partition when this broker is not the controller.
- Standalone: the broker leads every partition, which is its preferred
  replica: ELECTION_NOT_NEEDED for each known partition,
  UNKNOWN_TOPIC_OR_PARTITION for the others.
"""

import dataclasses
import time

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import Hold, construct, duration_ms
from kafkapy.protocol import acls
from kafkapy.server.security.authorizer import cluster_denied

API_KEY = 43
PREFERRED, UNCLEAN = 0, 1


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
        started = time.monotonic()
        results, waiting = _elect(broker, config, election_type == PREFERRED, asked, timeout_ms)
        if waiting:
            # Kafka's DelayedElectLeader: done when this broker's metadata shows each new leader.
            ctx.hold = Hold(lambda: not _not_shown(broker, waiting),
                            lambda response: _timed_out(response, _not_shown(broker, waiting)),
                            started + timeout_ms / 1000)
    if asked is None:
        results = {tp: e for tp, e in results.items() if e != ErrorCode.ELECTION_NOT_NEEDED}
    by_topic: dict = {}
    for (topic, p), error in sorted(results.items()):
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": error, "error_message": None})
    return construct(ctx.response_class(), {
        "throttle_time": 0, "error_code": top,
        "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]})


def _elect(broker, config, preferred: bool, asked, timeout_ms: int) -> tuple[dict, dict]:
    """``(errors by partition, {partition: its new leader})``: the elected
    partitions answer NONE once this broker's metadata shows their leader."""
    from kafkapy.server.controller_channel import ask_controller

    reply = ask_controller(config, ("elect_leaders", preferred, None if asked is None else [list(tp) for tp in asked],
                                    max(timeout_ms, 1000)), max(timeout_ms / 1000, 1.0) + 5)
    if reply is None or (isinstance(reply, tuple) and reply and reply[0] in ("timeout", "failed", "not_controller")):
        error = ErrorCode.NOT_CONTROLLER if reply == ("not_controller",) else ErrorCode.REQUEST_TIMED_OUT
        return {tp: error for tp in asked or ()}, {}
    results, waiting = {}, {}
    for topic, p, error, leader in reply:
        results[(topic, p)] = error
        if error == ErrorCode.NONE:
            waiting[(topic, p)] = leader
    return results, waiting


def _not_shown(broker, waiting: dict) -> set:
    """The partitions of ``waiting`` whose new leader this broker's metadata does not show yet."""
    md = broker.metadata()
    out = set()
    for (topic, p), leader in waiting.items():
        info = md.topics.get(topic)
        state = info.partitions.get(p) if info is not None else None
        if state is None or state.leader != leader:
            out.add((topic, p))
    return out


def _timed_out(response, late: set):
    """``response`` with REQUEST_TIMED_OUT for the partitions of ``late``."""
    return dataclasses.replace(response, replica_election_results=tuple(
        dataclasses.replace(t, partition_result=tuple(
            dataclasses.replace(r, error_code=int(ErrorCode.REQUEST_TIMED_OUT)) if (t.topic, r.partition_id) in late
            else r for r in t.partition_result))
        for t in response.replica_election_results))
