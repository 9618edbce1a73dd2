"""FindCoordinator (key 10), v0-v6.

Contract: a group's coordinator (key type 0) is the leader of its
``__consumer_offsets`` partition (``abs(hash(group)) % partitions``, Kafka's
partitionFor), as the metadata says: with one broker, this broker; in a
cluster, any live broker (COORDINATOR_NOT_AVAILABLE, retriable, while the
partition has no live leader). The first group lookup creates the topic, as
Kafka does (``offsets.topic.num.partitions`` partitions, compacted,
``offsets.topic.replication.factor`` replicas). While it cannot be created
(e.g. a replication factor above the brokers there are) the answer is
COORDINATOR_NOT_AVAILABLE (15), retriable, as in Kafka. A transactional
id's coordinator (key type 1) is found the same way over
``__transaction_state`` (``transaction.state.log.*``, Kafka's
partitionFor of the id), created on first lookup. Unknown key types -> INVALID_REQUEST (42), share groups (key
type 2, v6, KIP-932) included: kafkapy has none. v5 only adds an error code
(TRANSACTION_ABORTABLE, for transactions) to what v4 answers. v4 answers a
batch of keys (``coordinator_keys``); v0-v3 a single ``key`` (v0 has no
key type: always a group).
Advertising v0 matters beyond groups: librdkafka before 2.11 enables its LZ4
support only when FindCoordinator v0 is inside the broker's range.
"""

from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import advertised_endpoint, construct

API_KEY = 10
GROUP, TRANSACTION = 0, 1


def handle(ctx, request):
    key_type = getattr(request, "key_type", GROUP)
    auth = getattr(ctx.broker, "authorizer", None)
    locate = _locator(ctx.broker, key_type, ctx.listener_name) if auth is None else _authorized(ctx, auth, key_type)
    if ctx.api_version >= 4:
        coordinators = [dict(locate(key), key=key) for key in request.coordinator_keys]
        return construct(ctx.response_class(), {"throttle_time": 0, "coordinators": coordinators})
    return construct(ctx.response_class(), dict(locate(request.key), throttle_time=0))


def _authorized(ctx, auth, key_type):
    """Kafka's checks before the lookup: Describe on the group
    (GROUP_AUTHORIZATION_FAILED) or transactional id
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), no coordinator named."""
    located = []

    def locate(key):
        if key_type == GROUP and not auth.allowed(ctx, acls.DESCRIBE, acls.GROUP, key):
            return _not_found(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
        if key_type == TRANSACTION and not auth.allowed(ctx, acls.DESCRIBE, acls.TRANSACTIONAL_ID, key):
            return _not_found(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
        if not located:
            located.append(_locator(ctx.broker, key_type, ctx.listener_name))
        return located[0](key)

    return locate


def _locator(broker, key_type, listener_name=None):
    """``key -> coordinator answer`` for the request's key type: the live
    leader of the key's partition of the coordinator's internal topic."""
    if key_type == GROUP:
        from kafkapy.coordinator.offsets_topic import OFFSETS_TOPIC, ensure_offsets_topic
        from kafkapy.coordinator.records import partition_for

        error, _ = ensure_offsets_topic(broker, broker.config)
        topic = OFFSETS_TOPIC
    elif key_type == TRANSACTION:
        from kafkapy.protocol.transaction_log import TRANSACTION_STATE_TOPIC, partition_for
        from kafkapy.coordinator.transaction.state_store import ensure_transaction_state_topic

        error, _ = ensure_transaction_state_topic(broker, broker.config)
        topic = TRANSACTION_STATE_TOPIC
    else:
        return lambda key: _not_found(ErrorCode.INVALID_REQUEST, f"Unknown coordinator key type {key_type}")
    if error:
        return lambda key: _not_found(error, "The coordinator is not available.")
    md = broker.metadata()
    if md.cluster_mode:
        return lambda key: _coordinator(md, topic, partition_for, key, listener_name)
    local = md.brokers.get(broker.broker_id)
    host, port = advertised_endpoint(local, listener_name) if local is not None else broker.advertised_address
    here = {"node_id": broker.broker_id, "host": host, "port": port, "error_code": 0, "error_message": None}
    return lambda key: here


def _not_found(error_code: int, message: str) -> dict:
    return {"node_id": -1, "host": "", "port": -1, "error_code": error_code, "error_message": message}


def _coordinator(md, topic: str, partition_for, key: str, listener_name=None) -> dict:
    """The live leader of ``key``'s partition of ``topic``."""
    info = md.topics.get(topic)
    state = md.partition_state(topic, partition_for(key, info.num_partitions)) if info is not None else None
    leader = md.brokers.get(state.leader) if state is not None else None
    if leader is None:
        return _not_found(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
    host, port = advertised_endpoint(leader, listener_name)
    return {"node_id": leader.broker_id, "host": host, "port": port, "error_code": 0, "error_message": None}
