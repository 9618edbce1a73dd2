"""Metadata (key 3), v0-v12.

Contract:
- Topics: v0 empty list = all topics; v1+ null = all, empty = none. v10+ may
  name a topic by id (name null): unknown id -> UNKNOWN_TOPIC_ID (100).
- Auto-creation: v0-v3 always ask for it, v4+ per ``allow_auto_topic_creation``;
  done only if ``auto.create.topics.enable``. Creation is synchronous here, so
  the new topic is answered at once with NONE (Kafka may say
  LEADER_NOT_AVAILABLE while its controller works).
- Invalid names -> INVALID_TOPIC_EXCEPTION (17); unknown -> UNKNOWN_TOPIC_OR_PARTITION (3).
- One broker: it is every partition's leader, sole replica and ISR, and the controller.
"""

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.protocol.topics import topic_name_error

API_KEY = 3

_NO_OPERATIONS = -2147483648  # INT32_MIN: "authorized operations not requested"


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
    topics = []
    for name, topic_id in wanted:
        if name is None:
            info = md.by_id(topic_id)
            if info is None:
                topics.append(_topic_error(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id))
                continue
            name = info.name
        info = md.topics.get(name)
        if info is None:
            if topic_name_error(name):
                topics.append(_topic_error(ErrorCode.INVALID_TOPIC_EXCEPTION, name))
                continue
            if auto_create:
                broker.admin.create_topic(name)
                info = broker.metadata().topics.get(name)
            if info is None:
                topics.append(_topic_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name))
                continue
        topics.append(_topic(broker, info))
    host, port = broker.advertised_address
    return construct(ctx.response_class(), {
        "throttle_time": 0,
        "brokers": [{"node_id": broker.broker_id, "host": host, "port": port, "rack": None}],
        "cluster_id": broker.cluster_id,
        "controller_id": broker.broker_id,
        "topics": topics,
    })


def _topic(broker, info):
    me = broker.broker_id
    return {
        "error_code": ErrorCode.NONE,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.name.startswith("__"),
        "partitions": [
            {"error_code": ErrorCode.NONE, "partition_index": p, "leader_id": me,
             "leader_epoch": 0, "replica_nodes": (me,), "isr_nodes": (me,),
             "offline_replicas": ()}
            for p in range(info.num_partitions)
        ],
        "topic_authorized_operations": _NO_OPERATIONS,
    }


def _topic_error(code, name, topic_id=None):
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": (), "topic_authorized_operations": _NO_OPERATIONS}
