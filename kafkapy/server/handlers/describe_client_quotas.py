"""DescribeClientQuotas (key 48), v0-1: the client quotas matching a filter.

Contract (Kafka 3.9's ZkAdminManager.describeClientQuotas):
- Each component names an entity type (``user``, ``client-id``, ``ip``) and a
  match: 0 exact name, 1 the default entity (``<default>``), 2 any specified
  name (the default included). ``strict``: entities with a part the filter
  does not name are left out; otherwise they match.
- Only entities holding at least one quota key (``producer_byte_rate``,
  ``consumer_byte_rate``, ``request_percentage``, ``controller_mutation_rate``)
  are answered, with only those keys (never a user's SCRAM credentials), each
  value a float64. A default part has a null name.
- A duplicate or empty entity type, an ``ip`` filter beside user/client, an
  exact match without a name -> INVALID_REQUEST; an unknown entity type ->
  UNSUPPORTED_VERSION ("Custom entity type 'x' not supported"); then
  ``entries`` is null. ``ip`` entities hold ``connection_creation_rate``;
  they are answered for an ``ip`` filter, or for no filter component at all
  when not strict.
- Reads the metadata this broker has (in a cluster, its image as followed
  from ZooKeeper's ``/config/changes``).
"""

from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError
from kafkapy.server.handlers import construct
from kafkapy.server.quotas import entities
from kafkapy.server.security.authorizer import cluster_denied

API_KEY = 48


def handle(ctx, request):
    if cluster_denied(ctx, acls.DESCRIBE_CONFIGS):  # Kafka: DescribeConfigs on the cluster
        return construct(ctx.response_class(), {"throttle_time": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                "error_message": None, "entries": None})
    try:
        components = entities.describe_filter(
            (c.entity_type, c.match_type, c.match) for c in request.components)
    except TopicError as exc:
        return construct(ctx.response_class(), {"throttle_time": 0, "error_code": exc.error_code,
                                                "error_message": exc.message, "entries": None})
    found = entities.describe(ctx.broker.metadata().entity_configs, components, request.strict)
    entries = [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
               for entity, values in found]
    return construct(ctx.response_class(), {"throttle_time": 0, "error_code": 0, "error_message": None,
                                            "entries": entries})
