"""DescribeConfigs (key 32), v0-v4.

Contract, per resource (Kafka's ConfigAdminManager.describeConfigs):
- TOPIC (2): every topic key with its value — the topic's override
  (source DYNAMIC_TOPIC_CONFIG=1) or the default its broker synonym gives
  (per-broker dynamic 2, cluster-default dynamic 3, static server.properties
  4, Kafka's default 5). Invalid name -> INVALID_TOPIC_EXCEPTION (17),
  unknown topic -> UNKNOWN_TOPIC_OR_PARTITION (3).
- BROKER (4): name = this broker's id: every broker key, read_only unless it
  can change at run time; name "" = the cluster-wide dynamic default, only
  the keys set there. Another id or a non-number -> INVALID_REQUEST (42).
- Any other resource type (BROKER_LOGGER 8 included) -> INVALID_REQUEST.
- ``configuration_keys`` null = all keys, else only those named (unknown
  names are left out). Synonyms are sent only with ``include_synonyms``
  (most specific first), documentation only with ``include_documentation``
  (v3+), ``config_type`` from v3. Sensitive (password) values are null.
- v0 has ``is_default`` instead of a source: true when the value is not
  set on the resource itself, as Kafka 1.x answered (a topic's value not
  overridden on the topic; a broker's value from Kafka's default), which is
  how the Java client reads v0 back into a source. Kafka 3.9 leaves the
  field false on every entry (its ConfigHelper never sets it).
"""

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol import acls
from kafkapy.server.handlers import construct
from kafkapy.server.handlers.alter_configs import config_resource_denied
from kafkapy.protocol.topics import TopicError, topic_name_error

API_KEY = 32
TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5  # Kafka's ConfigSource ids


def handle(ctx, request):
    broker = ctx.broker
    include_synonyms = getattr(request, "include_synonyms", False)
    include_documentation = getattr(request, "include_documentation", False)
    results = []
    for resource in request.resources:
        result = {"error_code": 0, "error_message": None, "resource_type": resource.resource_type,
                  "resource_name": resource.resource_name, "configs": []}
        try:
            if code := config_resource_denied(ctx, acls.DESCRIBE_CONFIGS, resource.resource_type,
                                              resource.resource_name):
                raise TopicError(code, None)
            entries = _entries(broker, resource.resource_type, resource.resource_name)
        except TopicError as exc:
            result.update(error_code=exc.error_code, error_message=exc.message)
            results.append(result)
            continue
        wanted = resource.configuration_keys
        if wanted is not None:
            wanted = set(wanted)
        configs = []
        for e in entries:
            if wanted is not None and e.name not in wanted:
                continue
            configs.append({
                "name": e.name, "value": e.value, "read_only": e.read_only,
                "config_source": e.source, "is_sensitive": e.is_sensitive,
                "is_default": e.source == DEFAULT_CONFIG
                or (resource.resource_type == TOPIC and e.source != DYNAMIC_TOPIC_CONFIG),
                "synonyms": [{"name": n, "value": v, "source": src} for n, v, src in e.synonyms]
                if include_synonyms else [],
                "config_type": e.config_type,
                "documentation": e.documentation if include_documentation else None,
            })
        result["configs"] = configs
        results.append(result)
    return construct(ctx.response_class(), {"throttle_time": 0, "results": results})


def _entries(broker, resource_type, name):
    if resource_type == TOPIC:
        if topic_name_error(name):
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, topic_name_error(name))
        info = broker.metadata().topics.get(name)
        if info is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "The topic '%s' does not exist." % name)
        return broker.admin.describe_topic_configs(info.configs)
    if resource_type == BROKER:
        return broker.admin.describe_broker_configs(name)
    raise TopicError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource_type}")
