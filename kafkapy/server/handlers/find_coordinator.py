"""FindCoordinator (key 10), v0-v6.

Contract: with one broker, this broker coordinates every group (key type 0)
once ``__consumer_offsets`` exists: the first group lookup creates it, as
Kafka does (``offsets.topic.num.partitions`` partitions, compacted,
``offsets.topic.replication.factor`` replicas). While it cannot be created
(e.g. a replication factor above the one broker there is) the answer is
COORDINATOR_NOT_AVAILABLE (15), retriable, as in Kafka. Transactions (key type 1) have no coordinator yet: COORDINATOR_NOT_AVAILABLE
(15), retriable. Unknown key types -> INVALID_REQUEST (42), share groups (key
type 2, v6, KIP-932) included: kafkapy has none. v5 only adds an error code
(TRANSACTION_ABORTABLE, for transactions) to what v4 answers. v4 answers a
batch of keys (``coordinator_keys``); v0-v3 a single ``key`` (v0 has no
key type: always a group).
Advertising v0 matters beyond groups: librdkafka before 2.11 enables its LZ4
support only when FindCoordinator v0 is inside the broker's range.
"""

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct

API_KEY = 10
GROUP, TRANSACTION = 0, 1


def handle(ctx, request):
    broker = ctx.broker
    key_type = getattr(request, "key_type", GROUP)
    host, port = broker.advertised_address
    if key_type == GROUP:
        from kafkapy.coordinator.offsets_topic import ensure_offsets_topic

        error, _ = ensure_offsets_topic(broker, broker.config)
        if error:
            found = {"node_id": -1, "host": "", "port": -1, "error_code": error,
                     "error_message": "The coordinator is not available."}
        else:
            found = {"node_id": broker.broker_id, "host": host, "port": port,
                     "error_code": 0, "error_message": None}
    elif key_type == TRANSACTION:
        found = {"node_id": -1, "host": "", "port": -1,
                 "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                 "error_message": "The transaction coordinator is not available."}
    else:
        found = {"node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.INVALID_REQUEST,
                 "error_message": f"Unknown coordinator key type {key_type}"}
    if ctx.api_version >= 4:
        coordinators = [dict(found, key=key) for key in request.coordinator_keys]
        return construct(ctx.response_class(), {"throttle_time": 0, "coordinators": coordinators})
    return construct(ctx.response_class(), dict(found, throttle_time=0))
