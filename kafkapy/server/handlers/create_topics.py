"""CreateTopics (key 19), v0-v7.

Contract, per topic (Kafka's checks and messages):
- a name given twice in one request -> INVALID_REQUEST (42) for that name;
- invalid name -> INVALID_TOPIC_EXCEPTION (17); existing -> TOPIC_ALREADY_EXISTS (36);
- ``num_partitions`` -1 = ``num.partitions``; 0 or < -1 -> INVALID_PARTITIONS (37);
- ``replication_factor`` -1 = ``default.replication.factor``; more than the
  live brokers (standalone: 1) or < 1 -> INVALID_REPLICATION_FACTOR (38);
- manual ``assignments`` need num_partitions = replication_factor = -1
  (INVALID_REQUEST), consecutive partition ids from 0 and (standalone) only
  known broker ids (INVALID_REPLICA_ASSIGNMENT, 39); in cluster mode the
  admin manager checks them as Kafka's AdminZkClient does;
- configs are checked against the topic config table -> INVALID_CONFIG (40);
- ``validate_only`` (v1+) runs every check and creates nothing.
v0 answers name and error code only, v1 adds the message, v5+ answers with the partition count, replication factor and the topic's
configs; v7 with the topic id.

In cluster mode the topics are created by writing their znodes; the
controller then elects their leaders and tells every broker. As Kafka's
DelayedCreatePartitions, the answer waits (up to the request's
``timeout_ms``; none when it is 0 or ``validate_only``) until this broker's
metadata shows a leader for every partition of the topics it created, so a
client can produce at once; a topic still without one then answers
REQUEST_TIMED_OUT (it is created all the same, as in Kafka). The wait is a
``Hold``: the worker handles other requests meanwhile.
"""

import time
from collections import Counter

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol import acls
from kafkapy.server.handlers import construct, duration_ms, hold_topics
from kafkapy.protocol.topics import TopicError

API_KEY = 19


def handle(ctx, request):
    broker = ctx.broker
    started = time.monotonic()
    counts = Counter(t.name for t in request.topics)
    results = []
    created = {}  # name -> its result, for the wait below
    auth = getattr(broker, "authorizer", None)
    # Kafka: Create on the cluster, else on each topic; the configs answered need DescribeConfigs.
    may_create = None if auth is None or auth.allowed_cluster(ctx, acls.CREATE) else (
        lambda name: auth.allowed(ctx, acls.CREATE, acls.TOPIC, name))
    for topic in request.topics:
        result = {"name": topic.name, "topic_id": None, "error_code": 0, "error_message": None,
                  "num_partitions": -1, "replication_factor": -1, "configs": None}
        try:
            if counts[topic.name] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 f"Create topics request from client contains multiple "
                                 f"entries for topic {topic.name}")
            if may_create is not None and not may_create(topic.name):
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            num_partitions = _partition_count(broker, topic)
            configs = {c.name: c.value for c in topic.configs}
            assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None
            info = broker.admin.create_topic(topic.name, num_partitions, configs,
                                       validate_only=ctx.api_version >= 1 and request.validate_only,
                                       replication_factor=topic.replication_factor,
                                       assignments=assignments)
            result.update(topic_id=info.topic_id, num_partitions=info.num_partitions,
                          replication_factor=len(info.replicas(0) or (broker.broker_id,)),
                          configs=[{"name": k, "value": v, "read_only": False,
                                    "config_source": source, "is_sensitive": False}
                                   for k, v, source in broker.admin.topic_config_entries(info.configs)])
            if auth is not None and not auth.allowed(ctx, acls.DESCRIBE_CONFIGS, acls.TOPIC, topic.name):
                result.update(configs=None, topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if not (ctx.api_version >= 1 and request.validate_only):
                created[topic.name] = result
        except TopicError as exc:
            result.update(error_code=exc.error_code, error_message=exc.message)
        results.append(result)
    hold_for_leaders(ctx, {name: r["num_partitions"] for name, r in created.items()}, "topics", started,
                     duration_ms(request.timeout))
    return construct(ctx.response_class(), {"throttle_time": 0, "topics": results})


def hold_for_leaders(ctx, partitions: dict, field: str, started: float, timeout_ms: int) -> None:
    """Kafka's DelayedCreatePartitions, for CreateTopics and CreatePartitions
    in cluster mode (``hold_topics``): the answer waits until this broker's
    metadata shows each topic of ``partitions`` (name -> partition count)
    with that many partitions, each with a leader."""
    broker = ctx.broker
    if partitions and broker.admin.cluster_mode:
        hold_topics(ctx, lambda: _without_leaders(broker, partitions), field, started, timeout_ms)


def _without_leaders(broker, partitions: dict) -> set:
    """The topics of ``partitions`` this broker's metadata does not show with
    that many partitions, each with a leader."""
    md = broker.metadata()
    return {name for name, count in partitions.items()
            if (info := md.topics.get(name)) is None or info.num_partitions < count
            or any(s.leader < 0 for s in md.partition_states(info))}


def _partition_count(broker, topic) -> int:
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignments "
                             "were set. Both cannot be used at the same time.")
        if broker.admin.cluster_mode:  # the admin manager checks it against the cluster
            return len(topic.assignments)
        ids = sorted(a.partition_index for a in topic.assignments)
        if ids != list(range(len(ids))):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "Partitions should be a consecutive 0-based integer sequence")
        for a in topic.assignments:
            if not a.broker_ids or any(b != broker.broker_id for b in a.broker_ids) \
                    or len(set(a.broker_ids)) != len(a.broker_ids):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Unknown broker or duplicate replica in assignment "
                                 f"{list(a.broker_ids)} for partition {a.partition_index}")
        return len(ids)
    n = topic.num_partitions
    if n == -1:
        n = broker.config["num.partitions"]
    if n <= 0:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    return n
