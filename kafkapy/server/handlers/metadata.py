"""Metadata (key 3), v0-v12 (Kafka 3.9's range; v13 is Kafka 4.0's, see below).

Contract:
- Topics: v0 empty list = all topics; v1+ null = all, empty = none. v10+ may
  name a topic by id (name null): unknown id -> UNKNOWN_TOPIC_ID (100).
- Auto-creation: v0-v3 always ask for it, v4+ per ``allow_auto_topic_creation``;
  done only if ``auto.create.topics.enable``. Standalone, creation is
  synchronous, so the new topic is answered at once with NONE; in cluster
  mode it is answered LEADER_NOT_AVAILABLE (5) until the controller has
  announced it, as Kafka does, and a failed creation with its error (e.g.
  INVALID_REPLICATION_FACTOR with fewer live brokers than
  ``default.replication.factor``).
- Invalid names -> INVALID_TOPIC_EXCEPTION (17); unknown -> UNKNOWN_TOPIC_OR_PARTITION (3).
- v13 (KIP-1102) adds a top-level error code: NONE (kafkapy never asks a
  client to rebootstrap); not in the API table, as Kafka 3.9 does not serve it.
- Brokers, the controller and each partition's leader, leader epoch,
  replicas and ISR come from the metadata model (``metadata.model``):
  standalone, this broker is all of them; a partition whose leader is not a
  live broker answers LEADER_NOT_AVAILABLE (5) with leader -1, and replicas
  that are not live brokers, or are on a failed log dir of their broker
  (UpdateMetadata's offline_replicas), are its offline replicas.
- ACLs (with an authorizer, Kafka's handleTopicMetadataRequest): a topic
  the principal may not Describe is left out of an all-topics answer and
  answered TOPIC_AUTHORIZATION_FAILED (29) when named (by name: the name
  and a zero id; by id: the id and no name), before its existence or name
  is looked at; auto-creation needs Create on the cluster or the topic
  (else TOPIC_AUTHORIZATION_FAILED). ``topic_authorized_operations`` (v8+,
  when asked): the bit set of the topic operations allowed (all of them
  without an authorizer).
"""

from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import advertised_endpoint, construct
from kafkapy.server.security.authorizer import cluster_authorized_operations
from kafkapy.protocol.topics import TopicError, topic_name_error

API_KEY = 3

_NO_OPERATIONS = -2147483648  # INT32_MIN: "authorized operations not requested"
_ALL_TOPIC_OPERATIONS = acls.all_operations(acls.TOPIC)


def handle(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    md = broker.metadata()
    requested = request.topics
    if requested is None or (version == 0 and not requested):
        wanted = [(name, None) for name in sorted(md.topics)]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in requested]
    auto_create = request.allow_auto_topic_creation if version >= 4 else True
    auto_create = auto_create and broker.config["auto.create.topics.enable"]
    auth = getattr(broker, "authorizer", None)
    all_topics = requested is None or (version == 0 and not requested)
    with_operations = getattr(request, "include_topic_authorized_operations", False)
    topics = []
    for name, topic_id in wanted:
        by_id = name is None
        if by_id:
            info = md.by_id(topic_id)
            if info is None:
                topics.append(_topic_error(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id))
                continue
            name = info.name
        if auth is not None and not auth.allowed(ctx, acls.DESCRIBE, acls.TOPIC, name):
            if not all_topics:
                topics.append(_topic_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None if by_id else name,
                                           topic_id if by_id else None))
            continue
        info = md.topics.get(name)
        if info is None:
            if auto_create and auth is not None and not (auth.allowed_cluster(ctx, acls.CREATE) or
                                                          auth.allowed(ctx, acls.CREATE, acls.TOPIC, name)):
                topics.append(_topic_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                continue
            if topic_name_error(name):
                topics.append(_topic_error(ErrorCode.INVALID_TOPIC_EXCEPTION, name))
                continue
            if auto_create:
                error = _auto_create(broker, name)
                md = broker.metadata()
                info = md.topics.get(name)
                if info is None:
                    topics.append(_topic_error(error, name))
                    continue
            if info is None:
                topics.append(_topic_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name))
                continue
        topics.append(_topic(md, info))
        if with_operations:
            topics[-1]["topic_authorized_operations"] = (
                _ALL_TOPIC_OPERATIONS if auth is None else auth.authorized_operations(ctx, acls.TOPIC, name))
    return construct(ctx.response_class(), {
        "throttle_time": 0,
        "brokers": [{"node_id": b.broker_id, "host": host, "port": port, "rack": b.rack}
                    for b in md.brokers.values()
                    for host, port in (advertised_endpoint(b, ctx.listener_name),)],
        "cluster_id": broker.cluster_id,
        "controller_id": md.controller_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_authorized_operations(ctx) if getattr(
            request, "include_cluster_authorized_operations", False) else _NO_OPERATIONS,  # v8-v10
        "error_code": ErrorCode.NONE,  # v13+
    })


def _topic(md, info):
    live = md.brokers
    # What depends only on the state, once per state object: standalone every
    # partition shares one (1,000 partitions: 2.1 ms before the model, 2.6 ms
    # deriving the fields per partition, the same 2.1 ms this way).
    described = {}
    partitions = []
    for p, state in enumerate(md.partition_states(info)):
        fields = described.get(id(state))
        if fields is None:
            fields = described[id(state)] = _state_fields(state, live)
        partitions.append({"partition_index": p, **fields})
    return {
        "error_code": ErrorCode.NONE,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.name.startswith("__"),
        "partitions": partitions,
        "topic_authorized_operations": _NO_OPERATIONS,
    }


def _state_fields(state, live) -> dict:
    if state.leader in live:
        code, leader = ErrorCode.NONE, state.leader
    else:
        code, leader = ErrorCode.LEADER_NOT_AVAILABLE, -1
    return {"error_code": code, "leader_id": leader, "leader_epoch": state.leader_epoch,
            "replica_nodes": state.replicas, "isr_nodes": state.isr,
            "offline_replicas": tuple(r for r in state.replicas
                                      if r not in live or r in state.offline_replicas)}


def _auto_create(broker, name):
    """Create topic ``name``; the error to answer while it is not in the metadata yet
    (cluster mode, until the controller announces it), as Kafka's
    AutoTopicCreationManager: LEADER_NOT_AVAILABLE once created (by this
    request or another), else the creation's error."""
    try:
        broker.admin.create_topic(name)
    except TopicError as exc:
        if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
            return exc.error_code
    return ErrorCode.LEADER_NOT_AVAILABLE


def _topic_error(code, name, topic_id=None):
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": (), "topic_authorized_operations": _NO_OPERATIONS}
