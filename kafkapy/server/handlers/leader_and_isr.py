"""LeaderAndIsr (key 4), v0-v7 (v0-v6, an older Kafka controller's, read as
v7 by ``controller_versions.upgraded``; without topic ids before v5 a topic
the image does not know yet answers UNKNOWN_TOPIC_ID, as below, since
partitions are kept by topic id; v0-v4 answer per topic name and partition): the controller's leader and ISR decisions for
the partitions this broker replicates (Kafka's ZooKeeper mode:
ReplicaManager.becomeLeaderOrFollower).

Contract (cluster mode; sent by the elected controller child):
- STALE_CONTROLLER_EPOCH (11) as the top-level and every partition's error
  when ``controller_epoch`` is older than the image's; nothing changes.
  Standalone (no ``zookeeper.connect``) every request gets it: the broker
  runs its own metadata and no controller can be current.
- Per partition, in Kafka's order of checks, against the partition's role in
  its shared-table slot (none yet: leader epoch -1):
  * its log in an offline log dir: KAFKA_STORAGE_ERROR (56), nothing changes
    (the controller then moves leadership away: "Log-dir failure");
  * a topic id that differs from the one in the partition.metadata of a log
    of the same name already on disk: INCONSISTENT_TOPIC_ID (103); a topic
    unknown here sent without a topic id: UNKNOWN_TOPIC_ID (100);
  * a newer leader epoch (or the same one with a newer partition epoch: the
    ISR or replicas changed without an election) is applied if this broker
    is among ``replicas`` (else UNKNOWN_TOPIC_OR_PARTITION);
  * an older leader epoch, or the same one at the same partition epoch:
    STALE_CONTROLLER_EPOCH (Kafka answers that for both).
- Applied partitions: the image gets their state (replicas, leader, leader
  epoch, ISR, partition epoch) and the controller's id and epoch, in one
  atomic change; the partition's slot is claimed and its log created if it
  is new here (Kafka's createLogIfNotExists); then ``make_leader`` (leader
  is this broker) or ``make_follower`` (leader alive: in the image's brokers
  or the request's ``live_leaders``; otherwise only the log is created, as
  Kafka does). A follower's log is not truncated here: the replica fetcher
  truncates by the leader's epochs. The metadata generation moves again
  once the roles are set (processes that follow roles on it look again).
  Parked operations are woken (an acks=all
  produce on a partition no longer led here answers NOT_LEADER_OR_FOLLOWER).
- Answer: ``error_code`` NONE and the partition errors grouped by topic id.
"""

from __future__ import annotations

import logging

from kafkapy.metadata.model import PartitionState
from kafkapy.metadata.store import METADATA_GENERATION
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.server.handlers.controller_versions import upgraded
from kafkapy.protocol import acls
from kafkapy.server.security.authorizer import cluster_denied
from kafkapy.server.handlers.update_metadata import (
    StaleControllerEpoch,
    apply_to_image,
    check_controller_epoch,
    set_partition_state,
    topic_for,
    topic_id_of,
)
from kafkapy.storage.errors import InconsistentTopicId, StorageError

API_KEY = 4

log = logging.getLogger("kafkapy.state.change")


def handle(ctx, request):
    request = upgraded(API_KEY, ctx.api_version, request)
    broker = ctx.broker
    cls = ctx.response_class()
    if cluster_denied(ctx, acls.CLUSTER_ACTION):  # a broker's request: ClusterAction (Kafka's ACLs)
        return _cluster_authorization_failed(cls, request)
    md = broker.metadata()
    errors = {}  # (topic name, partition) -> error code
    accepted = []  # (topic name, partition state)
    for ts in request.topic_states:
        for ps in ts.partition_states:
            code = _check(broker, md, ts, ps) if md.cluster_mode else ErrorCode.STALE_CONTROLLER_EPOCH
            errors[(ts.topic_name, ps.partition_index)] = code
            if code == ErrorCode.NONE:
                accepted.append((ts, ps))

    def change(image):
        check_controller_epoch(image, request.controller_epoch)
        image.controller_id = request.controller_id
        image.controller_epoch = request.controller_epoch
        for ts, ps in accepted:
            info = topic_for(image, ts.topic_name, topic_id_of(ts.topic_id))
            set_partition_state(info, ps.partition_index, PartitionState(
                tuple(ps.replicas), ps.leader, ps.leader_epoch, tuple(ps.isr), ps.partition_epoch))

    try:
        apply_to_image(broker, change)
    except StaleControllerEpoch as exc:
        log.warning("ignoring LeaderAndIsr from controller %d: %s", request.controller_id, exc)
        return _answer(cls, request, ErrorCode.STALE_CONTROLLER_EPOCH,
                       dict.fromkeys(errors, ErrorCode.STALE_CONTROLLER_EPOCH))
    md = broker.metadata()
    live = set(md.brokers) | {leader.broker_id for leader in request.live_leaders}
    for ts, ps in accepted:
        errors[(ts.topic_name, ps.partition_index)] = _become(broker, md, ts.topic_name, ps, live)
    if accepted:
        # The roles changed after the image did: move the generation again so
        # a process that looked in between (the replica fetcher, the group
        # coordinator) looks again now.
        broker.table.increment(METADATA_GENERATION)
    broker.replica_manager.wake_delayed_operations()
    return _answer(cls, request, ErrorCode.NONE, errors)


def _check(broker, md, ts, ps) -> int:
    """One partition's checks before anything changes (the module docstring)."""
    name, p = ts.topic_name, ps.partition_index
    if broker.replica_manager.is_offline(name, p):
        # Kafka's HostedPartition.Offline: the controller learns the replica is
        # on an offline log dir and moves leadership away from it.
        log.warning("ignoring LeaderAndIsr for %s-%d: its log dir is offline", name, p)
        return ErrorCode.KAFKA_STORAGE_ERROR
    info = md.topics.get(name)
    topic_id = topic_id_of(ts.topic_id) or (info.topic_id if info is not None else None)
    if topic_id is None:
        return ErrorCode.UNKNOWN_TOPIC_ID
    table = broker.table
    slot = table.slot_for(topic_id, p)
    if slot is None:
        on_disk = broker.replica_manager._topic_id_on_disk(name, p)
        if on_disk is not None and on_disk != topic_id:
            log.error("LeaderAndIsr for %s-%d with topic id %s, but its log has topic id %s", name, p,
                      topic_id, on_disk)
            return ErrorCode.INCONSISTENT_TOPIC_ID
        epoch, partition_epoch = -1, -1
    else:
        # Role words written only by this handler (one request from the
        # controller at a time) and update_isr: aligned words, read unlocked.
        state = table.slot(slot)
        epoch, partition_epoch = state.current_leader_epoch, state.partition_epoch
    if ps.leader_epoch > epoch or (ps.leader_epoch == epoch and ps.partition_epoch > partition_epoch):
        if broker.broker_id not in ps.replicas:
            log.warning("ignoring LeaderAndIsr for %s-%d: broker %d is not among its replicas %s", name, p,
                        broker.broker_id, list(ps.replicas))
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NONE
    log.info("ignoring LeaderAndIsr for %s-%d: leader epoch %d (partition epoch %d) is not newer than %d "
             "(%d)", name, p, ps.leader_epoch, ps.partition_epoch, epoch, partition_epoch)
    return ErrorCode.STALE_CONTROLLER_EPOCH


def _become(broker, md, name: str, ps, live) -> int:
    """Create the partition here if new, then make it leader or follower."""
    p = ps.partition_index
    try:
        partition = broker.replica_manager.create_partition(name, p)
    except InconsistentTopicId as exc:
        log.error("LeaderAndIsr for %s-%d: %s", name, p, exc)
        return ErrorCode.INCONSISTENT_TOPIC_ID
    except StorageError as exc:
        log.error("LeaderAndIsr for %s-%d: %s", name, p, exc)
        return exc.error_code
    if ps.leader == broker.broker_id:
        partition.make_leader(ps.leader_epoch, ps.isr, ps.replicas, ps.partition_epoch)
        log.info("%s-%d: leader at epoch %d, ISR %s", name, p, ps.leader_epoch, list(ps.isr))
    elif ps.leader in live:
        partition.make_follower(ps.leader, ps.leader_epoch, ps.replicas, ps.partition_epoch)
        log.info("%s-%d: follower of broker %d at epoch %d", name, p, ps.leader, ps.leader_epoch)
    else:
        # Kafka's makeFollowers: the log exists, the role waits for a live leader.
        log.warning("%s-%d: leader %d is not alive; not following it", name, p, ps.leader)
    return ErrorCode.NONE


def _cluster_authorization_failed(cls, request):
    return _answer(cls, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, {
        (ts.topic_name, ps.partition_index): ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        for ts in request.topic_states for ps in ts.partition_states})


def _answer(cls, request, error_code: int, errors: dict):
    # v5+ answers per topic id, v0-v4 per topic name and partition: each
    # version keeps the one of the two it has (construct drops the other).
    topics = []
    for ts in request.topic_states:
        topics.append({"topic_id": ts.topic_id, "partition_errors": [
            {"partition_index": ps.partition_index, "error_code": errors[(ts.topic_name, ps.partition_index)]}
            for ps in ts.partition_states]})
    by_name = [{"topic_name": t, "partition_index": p, "error_code": e} for (t, p), e in errors.items()]
    return construct(cls, {"error_code": error_code, "topics": topics, "partition_errors": by_name})
