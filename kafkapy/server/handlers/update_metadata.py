"""UpdateMetadata (key 6), v0-v8: the controller's metadata for every broker
(Kafka's ZooKeeper mode: ZkMetadataCache.updateMetadata). v0-v7 (an older
Kafka controller's) are read as v8 (``controller_versions.upgraded``):
without topic ids before v7, so only topics the image knows are updated.

Contract (cluster mode; sent by the elected controller child over the
inter-broker listener, kafkapy.controller.channel_manager):
- STALE_CONTROLLER_EPOCH (11) when the request's ``controller_epoch`` is
  older than the one the broker's metadata image holds (Kafka's
  ControllerMovedException); nothing changes. Standalone (no
  ``zookeeper.connect``) every request gets it: the broker runs its own
  metadata and no controller can be current.
- Otherwise, in one atomic change of the image (``MetadataImage.apply``,
  published to every process by the metadata generation): the live brokers
  are ``live_brokers`` (endpoints with listener and security protocol, rack;
  host/port of the first endpoint), the controller is ``controller_id`` at
  ``controller_epoch``, and each partition state replaces the image's
  (replicas, leader, leader epoch, ISR; ``zk_version`` is the partition
  epoch). Offline replicas are not stored: the Metadata answer derives them
  from the live brokers, which is what Kafka's controller sends in ZooKeeper
  mode. A state whose leader is -2 (Kafka's LeaderDuringDelete) removes the
  partition, and a topic left with no partition is removed. A topic id in
  the request that differs from the image's is a new incarnation of the
  topic: its old partition states go. A topic the image does not know
  needs its ``topic_id``; without one its partitions are skipped.
- ``broker_epoch`` is not checked (the broker's ZooKeeper registration,
  whose czxid Kafka compares, lives in the controller child).
- Answer: ``error_code`` only.
"""

from __future__ import annotations

import logging

from kafkapy.metadata.model import BrokerInfo, EndPoint, PartitionState, TopicInfo
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.server.handlers.controller_versions import SECURITY_PROTOCOLS, upgraded
from kafkapy.protocol import acls
from kafkapy.server.security.authorizer import cluster_denied

API_KEY = 6
LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete

log = logging.getLogger("kafkapy.state.change")


class StaleControllerEpoch(Exception):
    """A controller request older than the image's controller epoch: the change is abandoned."""


def check_controller_epoch(md, controller_epoch: int) -> None:
    """Raise StaleControllerEpoch if a request of ``controller_epoch`` is older
    than the image's controller epoch."""
    if controller_epoch < md.controller_epoch:
        raise StaleControllerEpoch(f"controller epoch {controller_epoch} is older than "
                                   f"{md.controller_epoch}")


def apply_to_image(broker, change) -> None:
    """``change`` the broker's metadata image (StaleControllerEpoch from it
    aborts); standalone there is no image, so every controller request is stale."""
    if not broker.metadata().cluster_mode:
        raise StaleControllerEpoch("no controller: the broker is standalone")
    broker.store.apply(change)


def topic_id_of(topic_id):
    """The request's topic id, or None for a missing or zero one (Kafka's Uuid.ZERO_UUID)."""
    return topic_id if topic_id is not None and topic_id.int else None


def topic_for(md, name: str, topic_id):
    """The image's TopicInfo for ``name`` at ``topic_id`` (None: keep the
    image's id), created when absent and replaced when the id differs (a new
    incarnation: its old partition states go, its configs stay, as they are
    ``/config/topics/<name>``'s); None when unknown and no id was sent."""
    info = md.topics.get(name)
    if info is not None and (topic_id is None or info.topic_id == topic_id):
        return info
    if topic_id is None:
        return None
    configs = info.configs if info is not None else {}
    info = md.topics[name] = TopicInfo(name, topic_id, 0, dict(configs))
    return info


def set_partition_state(info, partition: int, state: PartitionState) -> None:
    info.partitions[partition] = state
    if partition >= info.num_partitions:
        info.num_partitions = partition + 1


def _broker(b) -> BrokerInfo:
    endpoints = tuple(EndPoint(e.host, e.port, e.listener, SECURITY_PROTOCOLS.get(e.security_protocol,
                                                                                 str(e.security_protocol)))
                      for e in b.endpoints)
    first = endpoints[0] if endpoints else EndPoint("", -1)
    return BrokerInfo(b.id, first.host, first.port, b.rack, endpoints)


def apply_update_metadata(md, request) -> list:
    """Apply ``request`` to ``md`` (the module docstring); returns the
    ``(topic, partition)`` removed (leader -2)."""
    check_controller_epoch(md, request.controller_epoch)
    md.controller_id = request.controller_id
    md.controller_epoch = request.controller_epoch
    md.brokers = {b.id: _broker(b) for b in request.live_brokers}
    deleted = []
    for ts in request.topic_states:
        name = ts.topic_name
        removals = [ps.partition_index for ps in ts.partition_states if ps.leader == LEADER_DURING_DELETE]
        info = md.topics.get(name)
        if removals and info is not None:
            for p in removals:
                if info.partitions.pop(p, None) is not None:
                    deleted.append((name, p))
            if not info.partitions:
                del md.topics[name]
        states = [ps for ps in ts.partition_states if ps.leader != LEADER_DURING_DELETE]
        if not states:
            continue
        info = topic_for(md, name, topic_id_of(ts.topic_id))
        if info is None:
            log.warning("UpdateMetadata: topic %s has no topic id and is unknown here; skipped", name)
            continue
        for ps in states:
            # Kept: replicas on a failed log dir of a live broker (a broker not
            # live is offline anyway, and must not stay listed once it returns).
            set_partition_state(info, ps.partition_index, PartitionState(
                tuple(ps.replicas), ps.leader, ps.leader_epoch, tuple(ps.isr), ps.zk_version,
                tuple(r for r in ps.offline_replicas if r in md.brokers)))
    return deleted


def handle(ctx, request):
    request = upgraded(API_KEY, ctx.api_version, request)
    broker = ctx.broker
    cls = ctx.response_class()
    if cluster_denied(ctx, acls.CLUSTER_ACTION):  # a broker's request: ClusterAction (Kafka's ACLs)
        return _cluster_authorization_failed(cls, request)
    deleted = []
    try:
        apply_to_image(broker, lambda md: deleted.extend(apply_update_metadata(md, request)))
    except StaleControllerEpoch as exc:
        log.warning("ignoring UpdateMetadata from controller %d: %s", request.controller_id, exc)
        return construct(cls, {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH})
    if deleted:
        log.info("UpdateMetadata from controller %d removed %d partitions", request.controller_id,
                 len(deleted))
    broker.metadata()  # this process follows at once (the others on their next request)
    return construct(cls, {"error_code": ErrorCode.NONE})


def _cluster_authorization_failed(cls, request):
    return construct(cls, {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED})
