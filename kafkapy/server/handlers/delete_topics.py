"""DeleteTopics (key 20), v0-v6.

Contract: v0-v5 name topics (v0 answers without a throttle time); v6 names them or gives topic ids. Standalone,
each topic's partitions are removed under their locks (directories renamed
``<topic>-<partition>.<id>-delete`` and removed in the background, as Kafka
does) and it disappears from metadata at once. In cluster mode the topic is
marked for deletion in ZooKeeper and the controller deletes it (Kafka's
ZkAdminManager); the answer waits up to ``timeout_ms`` (none when it is 0)
until this broker's metadata no longer has the topic (Kafka's
DelayedDeleteTopics, a ``Hold``), then REQUEST_TIMED_OUT (7) for a topic
still there (its deletion goes on).
Errors per topic: UNKNOWN_TOPIC_OR_PARTITION (3), UNKNOWN_TOPIC_ID (100),
INVALID_REQUEST (42) when v6 gives both or neither, TOPIC_DELETION_DISABLED
(73) when ``delete.topic.enable`` is false.
"""

import time

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError
from kafkapy.server.handlers import construct, duration_ms, hold_topics
from kafkapy.protocol import acls

API_KEY = 20


def handle(ctx, request):
    broker = ctx.broker
    started = time.monotonic()
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    deleted = set()  # names marked for deletion, for the wait
    for name, topic_id in wanted:
        denied = _denied(ctx, name, topic_id)
        if denied is not None:
            results.append(denied)
            continue
        code, message, found_id, found_name = _delete(broker, name, topic_id)
        results.append({"name": found_name if ctx.api_version >= 6 else name, "topic_id": found_id,
                        "error_code": code, "error_message": message})
        if code == ErrorCode.NONE:
            deleted.add(found_name)
    if deleted and broker.admin.cluster_mode:
        hold_topics(ctx, lambda: deleted & broker.metadata().topics.keys(), "responses", started,
                    duration_ms(request.timeout))
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
        return ErrorCode.INVALID_REQUEST, "Topic name and id must not both be set", None, name
    if name is None:
        info = md.by_id(topic_id) if topic_id is not None else None
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id, None
    else:
        info = md.topics.get(name)
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None, name
    if not broker.config["delete.topic.enable"]:
        return ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.", info.topic_id, name
    try:
        broker.admin.delete_topic(info.name)
    except TopicError as exc:  # cluster mode: ZooKeeper could not be written
        return exc.error_code, exc.message, info.topic_id, name
    return ErrorCode.NONE, None, info.topic_id, info.name
