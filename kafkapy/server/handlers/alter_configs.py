"""AlterConfigs (key 33), v0-v2: replace a resource's whole set of dynamic configs.

Contract, per resource (Kafka's legacy AlterConfigs):
- The configs given become the resource's complete set of dynamic configs:
  keys not named lose their override (back to the broker default).
- TOPIC (2): unknown topic -> UNKNOWN_TOPIC_OR_PARTITION (3); unknown key or
  a value that does not validate -> INVALID_CONFIG (40).
- BROKER (4): name "" = the cluster-wide default, or this broker's id (another
  id -> INVALID_REQUEST 42). Keys that cannot change at run time ->
  INVALID_REQUEST "Cannot update these configs dynamically: Set(...)"; bad
  values -> INVALID_CONFIG. Stored in the metadata store, so they survive a
  restart and reach every process (docs/architecture.md).
- A null value -> INVALID_REQUEST; the same resource twice in one request ->
  INVALID_REQUEST for each; other resource types -> INVALID_REQUEST.
- ``validate_only`` runs every check and changes nothing.
"""

from collections import Counter

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.protocol import acls
from kafkapy.protocol.topics import TopicError

API_KEY = 33
TOPIC, BROKER = 2, 4


def handle(ctx, request):
    def compute_for(resource):
        configs = {}
        for c in resource.configs:
            if c.value is None:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {c.name}")
            configs[c.name] = c.value
        return lambda current: configs

    return alter_each(ctx, request, compute_for)


def alter_each(ctx, request, compute_for):
    """Shared with IncrementalAlterConfigs: answer every resource of the
    request, each alone (one resource's error does not fail the others).
    ``compute_for(resource)`` checks it and returns ``compute(current) -> new set``."""
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    responses = []
    for resource in request.resources:
        code, message = 0, None
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 f"Error due to duplicate resource {resource.resource_name} "
                                 f"of type {resource.resource_type}")
            if code := config_resource_denied(ctx, acls.ALTER_CONFIGS, resource.resource_type,
                                              resource.resource_name):
                raise TopicError(code, None)
            apply_resource(ctx.broker, resource.resource_type, resource.resource_name,
                           compute_for(resource), request.validate_only)
        except TopicError as exc:
            code, message = exc.error_code, exc.message
        responses.append({"error_code": code, "error_message": message,
                          "resource_type": resource.resource_type,
                          "resource_name": resource.resource_name})
    return construct(ctx.response_class(), {"throttle_time": 0, "responses": responses})


def config_resource_denied(ctx, operation: int, resource_type: int, name: str) -> int:
    """0, or the error for a config resource the principal may not ``operation``
    (AlterConfigs / DescribeConfigs): a topic's on the topic
    (TOPIC_AUTHORIZATION_FAILED), a broker's on the cluster
    (CLUSTER_AUTHORIZATION_FAILED), as Kafka's handlers."""
    auth = getattr(ctx.broker, "authorizer", None)
    if auth is None:
        return 0
    if resource_type == TOPIC:
        return 0 if auth.allowed(ctx, operation, acls.TOPIC, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return 0 if auth.allowed_cluster(ctx, operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def apply_resource(broker, resource_type, name, compute, validate_only):
    """Shared with IncrementalAlterConfigs: ``compute(current) -> new set``."""
    if resource_type == TOPIC:
        return broker.admin.alter_topic_configs(name, compute, validate_only)
    if resource_type == BROKER:
        return broker.admin.alter_broker_configs(name, compute, validate_only)
    raise TopicError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource_type}")
