"""StopReplica (key 5), v0-v4: stop replicating partitions here, and maybe
delete them (Kafka's ZooKeeper mode: ReplicaManager.stopReplicas). v0-v3
(an older Kafka controller's) are read as v4 (``controller_versions.upgraded``:
v0-v2's one delete flag for every partition, leader epoch -1).

Contract (cluster mode; sent by the elected controller child):
- STALE_CONTROLLER_EPOCH (11) as the top-level and every partition's error
  when ``controller_epoch`` is older than the image's; nothing changes.
  Standalone (no ``zookeeper.connect``) every request gets it: the broker
  runs its own metadata and no controller can be current.
- A newer controller epoch is recorded in the image, as Kafka's broker
  records it from any controller request.
- Per partition (``ReplicaManager.stop_replica``): FENCED_LEADER_EPOCH (74)
  when ``leader_epoch`` is older than the partition's (-1 and -2, Kafka's
  NoEpoch and EpochDuringDelete, always pass); otherwise the partition's
  role is cleared (the replica fetcher leaves it, clients get
  NOT_LEADER_OR_FOLLOWER) and with ``delete_partition`` its log is deleted
  and its slot freed, and every process lets go of it. A partition not
  hosted here is still deleted from disk (deleted while this broker was
  down), as Kafka does. A storage failure is that partition's error.
- Parked operations are woken (an acks=all produce on a stopped partition
  answers NOT_LEADER_OR_FOLLOWER rather than time out).
- Answer: ``error_code`` and ``partition_errors`` (topic, partition, error).
"""

from __future__ import annotations

import logging

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.server.handlers.controller_versions import upgraded
from kafkapy.protocol import acls
from kafkapy.server.security.authorizer import cluster_denied
from kafkapy.server.handlers.update_metadata import StaleControllerEpoch, apply_to_image, check_controller_epoch
from kafkapy.storage.errors import StorageError

API_KEY = 5

log = logging.getLogger("kafkapy.state.change")


def handle(ctx, request):
    request = upgraded(API_KEY, ctx.api_version, request)
    broker = ctx.broker
    cls = ctx.response_class()
    if cluster_denied(ctx, acls.CLUSTER_ACTION):  # a broker's request: ClusterAction (Kafka's ACLs)
        return _cluster_authorization_failed(cls, request)
    md = broker.metadata()
    try:
        if not md.cluster_mode or request.controller_epoch > md.controller_epoch:
            def change(image):
                check_controller_epoch(image, request.controller_epoch)
                image.controller_epoch = request.controller_epoch
                image.controller_id = request.controller_id

            apply_to_image(broker, change)
        else:
            check_controller_epoch(md, request.controller_epoch)
    except StaleControllerEpoch as exc:
        log.warning("ignoring StopReplica from controller %d: %s", request.controller_id, exc)
        return construct(cls, {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "partition_errors": [
            {"topic_name": ts.topic_name, "partition_index": ps.partition_index,
             "error_code": ErrorCode.STALE_CONTROLLER_EPOCH}
            for ts in request.topic_states for ps in ts.partition_states]})
    replica_manager = broker.replica_manager
    errors = []
    for ts in request.topic_states:
        for ps in ts.partition_states:
            try:
                code = replica_manager.stop_replica(ts.topic_name, ps.partition_index, ps.leader_epoch,
                                                    ps.delete_partition)
            except (StorageError, OSError) as exc:
                log.error("StopReplica of %s-%d failed: %s", ts.topic_name, ps.partition_index, exc)
                code = getattr(exc, "error_code", ErrorCode.KAFKA_STORAGE_ERROR)
            errors.append({"topic_name": ts.topic_name, "partition_index": ps.partition_index,
                           "error_code": code})
    replica_manager.wake_delayed_operations()
    return construct(cls, {"error_code": ErrorCode.NONE, "partition_errors": errors})


def _cluster_authorization_failed(cls, request):
    return construct(cls, {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "partition_errors": [
        {"topic_name": ts.topic_name, "partition_index": ps.partition_index,
         "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
        for ts in request.topic_states for ps in ts.partition_states]})
