"""DescribeCluster (key 60), v0-v1.

Contract:
- The live brokers and the controller come from the metadata model
  (standalone: this broker, which is also the controller); ``cluster_id`` is
  the one in meta.properties, ``rack`` is each broker's broker.rack.
- v1 ``endpoint_type``: 1 (brokers) answers the broker list; 2 (controllers)
  -> UNSUPPORTED_ENDPOINT_TYPE (115), as a Kafka broker answers it (only
  KRaft controllers serve that).
- ``cluster_authorized_operations``: INT32_MIN unless asked for; with no
  authorizer every cluster operation is allowed, so asked for it is the bit
  set of Kafka's cluster operations (ALTER 7, CREATE 5, DESCRIBE 8,
  CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12);
  with an authorizer 0 unless Describe on the cluster, else the bits of the
  operations allowed. DescribeCluster itself needs no ACL (Kafka 3.9).
"""

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import advertised_endpoint, construct
from kafkapy.server.security.authorizer import cluster_authorized_operations

API_KEY = 60
BROKERS, CONTROLLERS = 1, 2
_NOT_REQUESTED = -(2**31)


def handle(ctx, request):
    broker = ctx.broker
    md = broker.metadata()
    endpoint_type = getattr(request, "endpoint_type", BROKERS)
    data = {"throttle_time": 0, "error_code": 0, "error_message": None,
            "endpoint_type": endpoint_type, "cluster_id": broker.cluster_id,
            "controller_id": md.controller_id, "brokers": [],
            "cluster_authorized_operations": cluster_authorized_operations(ctx)
            if request.include_cluster_authorized_operations else _NOT_REQUESTED}
    if endpoint_type != BROKERS:
        data.update(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                    error_message="The broker does not support CONTROLLERS endpoint type" if
                    endpoint_type == CONTROLLERS else f"Unknown endpoint type {endpoint_type}")
    else:
        data["brokers"] = [{"broker_id": b.broker_id, "host": host, "port": port, "rack": b.rack}
                           for b in md.brokers.values()
                           for host, port in (advertised_endpoint(b, ctx.listener_name),)]
    return construct(ctx.response_class(), data)
