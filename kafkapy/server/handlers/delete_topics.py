"""DeleteTopics (key 20), v0-v6.

Contract: v0-v5 name topics (v0 answers without a throttle time); v6 names them or gives topic ids. Standalone,
each topic's partitions are removed under their locks (directories renamed
``<topic>-<partition>.<id>-delete`` and removed in the background, as Kafka
does) and it disappears from metadata at once. In cluster mode the topic is
marked for deletion in ZooKeeper and the controller deletes it (Kafka's
ZkAdminManager, answered without waiting for the deletion).
Errors per topic: UNKNOWN_TOPIC_OR_PARTITION (3), UNKNOWN_TOPIC_ID (100),
INVALID_REQUEST (42) when v6 gives both or neither, TOPIC_DELETION_DISABLED
(73) when ``delete.topic.enable`` is false.
"""

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError
from kafkapy.server.handlers import construct
from kafkapy.protocol import acls

API_KEY = 20


def handle(ctx, request):
    broker = ctx.broker
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        denied = _denied(ctx, name, topic_id)
        if denied is not None:
            results.append(denied)
            continue
        code, message, found_id = _delete(broker, name, topic_id)
        results.append({"name": name, "topic_id": found_id, "error_code": code,
                        "error_message": message})
    return construct(ctx.response_class(), {"throttle_time": 0, "responses": results})


def _denied(ctx, name, topic_id):
    """Kafka's checks before existence: a topic named by id needs Describe
    (else TOPIC_AUTHORIZATION_FAILED without its name), every topic Delete."""
    auth = getattr(ctx.broker, "authorizer", None)
    if auth is None:
        return None
    if name is None and topic_id is not None and topic_id.int != 0:
        info = ctx.broker.metadata().by_id(topic_id)
        if info is None:
            return None  # UNKNOWN_TOPIC_ID, answered by _delete
        if not auth.allowed(ctx, acls.DESCRIBE, acls.TOPIC, info.name):
            return {"name": None, "topic_id": topic_id, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    "error_message": None}
        name = info.name
    if name is not None and not auth.allowed(ctx, acls.DELETE, acls.TOPIC, name):
        return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                "error_message": None}
    return None


def _delete(broker, name, topic_id):
    md = broker.metadata()
    if topic_id is not None and topic_id.int == 0:
        topic_id = None
    if name is not None and topic_id is not None:
        return ErrorCode.INVALID_REQUEST, "Topic name and id must not both be set", None
    if name is None:
        info = md.by_id(topic_id) if topic_id is not None else None
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id
    else:
        info = md.topics.get(name)
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None
    if not broker.config["delete.topic.enable"]:
        return ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.", info.topic_id
    try:
        broker.admin.delete_topic(info.name)
    except TopicError as exc:  # cluster mode: ZooKeeper could not be written
        return exc.error_code, exc.message, info.topic_id
    return ErrorCode.NONE, None, info.topic_id
