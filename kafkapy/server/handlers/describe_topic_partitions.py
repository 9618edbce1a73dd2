"""DescribeTopicPartitions (key 75), v0 (KIP-966): Metadata's topic part, paged.

Contract (Kafka's DescribeTopicPartitionsRequestHandler and
getTopicMetadataForDescribeTopicResponse):
- ``topics`` empty = every topic; the topics are answered in name order, from
  the ``cursor`` on (topics named before the cursor's are left out).
- At most min(``response_partition_limit``, ``max.request.partition.size.limit``)
  partitions (and at least 1) per response; where that cuts a topic,
  ``next_cursor`` names the topic and the first partition not answered, and
  where it falls between topics, the next topic at partition 0.
- A named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (3), or
  INVALID_TOPIC_EXCEPTION (17) for an invalid name, with the zero topic id;
  when every topic is asked for, none of those arise.
- Each partition as Metadata answers it (leader, leader epoch, replicas, ISR,
  offline replicas; kafkapy has no eligible leader replicas: empty lists).
- A cursor whose topic is not among the named topics, or whose partition is
  negative: INVALID_REQUEST, which Kafka answers by closing the connection
  (an exception in the handler): so do we.
"""

import uuid

from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import topic_name_error
from kafkapy.server.handlers import construct
from kafkapy.server.handlers.metadata import _NO_OPERATIONS, _state_fields

API_KEY = 75
ZERO_UUID = uuid.UUID(int=0)


class InvalidRequest(Exception):
    """The request contradicts itself (Kafka's InvalidRequestException)."""


def handle(ctx, request):
    broker = ctx.broker
    md = broker.metadata()
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not request.topics
    if fetch_all:
        names = sorted(n for n in md.topics if n >= cursor_topic)
    else:
        names = sorted({t.name for t in request.topics if t.name >= cursor_topic})
        if cursor is not None and cursor.topic_name not in names:
            raise InvalidRequest(f"DescribeTopicPartitionsRequest topic list should contain the "
                                 f"cursor topic: {cursor.topic_name}")
    if cursor is not None and cursor.partition_index < 0:
        raise InvalidRequest(f"DescribeTopicPartitionsRequest cursor partition must be valid: {cursor}")
    remaining = max(min(broker.config["max.request.partition.size.limit"],
                        request.response_partition_limit), 1)
    live = md.brokers
    topics = []
    next_cursor = None
    auth = getattr(broker, "authorizer", None)
    unauthorized = []  # Kafka: Describe on each topic; refused ones are left out, or answered when named
    if auth is not None:
        refused = auth.denied(ctx, acls.DESCRIBE, acls.TOPIC, names)
        names = [n for n in names if n not in refused]
        if not fetch_all:
            unauthorized = [{"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": n, "topic_id": ZERO_UUID,
                             "is_internal": False, "partitions": [], "topic_authorized_operations": _NO_OPERATIONS}
                            for n in sorted(refused)]
    for name in names:
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        info = md.topics.get(name)
        if info is None:
            if not fetch_all:
                code = (ErrorCode.INVALID_TOPIC_EXCEPTION if topic_name_error(name)
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                topics.append({"error_code": code, "name": name, "topic_id": ZERO_UUID,
                               "is_internal": name.startswith("__"), "partitions": [],
                               "topic_authorized_operations": _NO_OPERATIONS})
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        states = md.partition_states(info)
        upper = min(len(states), start + remaining)
        described = {}
        partitions = []
        for p in range(start, upper):
            state = states[p]
            fields = described.get(id(state))
            if fields is None:
                fields = described[id(state)] = _state_fields(state, live)
            # Kafka answers a partition without a live leader with leader -1
            # but no error code here (Metadata says LEADER_NOT_AVAILABLE).
            partitions.append({"partition_index": p, "eligible_leader_replicas": (),
                               "last_known_elr": (), **fields, "error_code": ErrorCode.NONE})
        topics.append({"error_code": ErrorCode.NONE, "name": name, "topic_id": info.topic_id,
                       "is_internal": name.startswith("__"), "partitions": partitions,
                       "topic_authorized_operations": _NO_OPERATIONS})
        if upper < len(states):
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= len(partitions)
    if auth is not None:
        for t in topics:
            if t["error_code"] == ErrorCode.NONE:
                t["topic_authorized_operations"] = auth.authorized_operations(ctx, acls.TOPIC, t["name"])
    return construct(ctx.response_class(), {"throttle_time": 0, "topics": topics + unauthorized,
                                            "next_cursor": next_cursor})
