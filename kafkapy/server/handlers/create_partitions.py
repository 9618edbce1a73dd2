"""CreatePartitions (key 37), v0-v3: add partitions to existing topics.

Contract, per topic (Kafka's AdminManager.createPartitions):
- ``count`` is the new total; below the current count -> INVALID_PARTITIONS
  (37) "Topic currently has N partitions, which is higher than the requested
  M.", equal -> INVALID_PARTITIONS "Topic already has N partitions.";
  partitions are never removed.
- ``assignments`` (optional): one replica list per new partition, each with
  the topic's replication factor (1) and only known broker ids; otherwise
  INVALID_REPLICA_ASSIGNMENT (39).
- Unknown topic -> UNKNOWN_TOPIC_OR_PARTITION (3); the same topic twice in
  one request -> INVALID_REQUEST (42) for it.
- ``validate_only`` runs every check and creates nothing. Standalone, new
  partitions are created synchronously (empty logs), so clients see them at
  once; in cluster mode the answer waits up to ``timeout_ms`` for this
  broker's metadata to show every partition of the topic with a leader
  (Kafka's DelayedCreatePartitions, a ``Hold``: ``create_topics``), then
  REQUEST_TIMED_OUT (7) for a topic still short (its partitions are added
  all the same).
"""

import time
from collections import Counter

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct, duration_ms
from kafkapy.server.handlers.create_topics import hold_for_leaders
from kafkapy.protocol import acls
from kafkapy.server.security.authorizer import denied_topics
from kafkapy.protocol.topics import TopicError

API_KEY = 37


def handle(ctx, request):
    broker = ctx.broker
    started = time.monotonic()
    counts = Counter(t.name for t in request.topics)
    grown = {}  # name -> its new partition count, for the wait
    denied = denied_topics(ctx, acls.ALTER, [t.name for t in request.topics])  # Kafka: Alter on the topic
    results = []
    for topic in request.topics:
        code, message = 0, None
        try:
            if counts[topic.name] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            if topic.name in denied:
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed.")
            assignments = None
            if topic.assignments is not None:
                assignments = [list(a.broker_ids) for a in topic.assignments]
            broker.admin.create_partitions(topic.name, topic.count, assignments, request.validate_only)
            if not request.validate_only:
                grown[topic.name] = topic.count
        except TopicError as exc:
            code, message = exc.error_code, exc.message
        results.append({"name": topic.name, "error_code": code, "error_message": message})
    hold_for_leaders(ctx, grown, "results", started, duration_ms(request.timeout))
    return construct(ctx.response_class(), {"throttle_time": 0, "results": results})
