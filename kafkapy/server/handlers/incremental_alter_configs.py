"""IncrementalAlterConfigs (key 44), v0-v1: change single keys of a resource.

Contract, per resource (Kafka's ConfigAdminManager.incrementalAlterConfigs):
- Operations: SET (0) sets the key; DELETE (1) drops the override (back to
  the default); APPEND (2) / SUBTRACT (3) add / remove elements of a LIST key
  (cleanup.policy, log.cleanup.policy), starting from its current effective
  value; APPEND adds only elements not already present.
- APPEND/SUBTRACT on a non-list key -> INVALID_CONFIG (40) "Config value
  append is not allowed for config key: K"; an unknown operation, a null SET
  value or a key named twice in one resource -> INVALID_REQUEST (42).
- Resources, validation, persistence and ``validate_only`` as AlterConfigs
  (see alter_configs): TOPIC and BROKER ("" = cluster default, or this
  broker's id); read-only broker keys -> INVALID_REQUEST.
- The read-modify-write runs under the metadata store's lock, so changes to
  different keys from concurrent requests are never lost.
"""

from collections import Counter

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.config.broker_keys import BROKER_CONFIGS
from kafkapy.server.config.topic_keys import TOPIC_CONFIGS, topic_config_values
from kafkapy.server.config.types import LIST, format_value
from kafkapy.server.handlers.alter_configs import BROKER, TOPIC, alter_each
from kafkapy.protocol.topics import TopicError

API_KEY = 44
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {APPEND: "append", SUBTRACT: "subtract"}


def handle(ctx, request):
    return alter_each(ctx, request, lambda resource: _computer(
        ctx.broker, resource.resource_type, _check_ops(resource)))


def _check_ops(resource):
    names = Counter(c.name for c in resource.configs)
    duplicates = sorted(n for n, k in names.items() if k > 1)
    if duplicates:
        raise TopicError(ErrorCode.INVALID_REQUEST,
                         "Error due to duplicate config keys : " + ",".join(duplicates))
    table = TOPIC_CONFIGS if resource.resource_type == TOPIC else BROKER_CONFIGS
    ops = []
    for c in resource.configs:
        if c.config_operation not in (SET, DELETE, APPEND, SUBTRACT):
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             f"Unknown operation type {c.config_operation} for config {c.name}")
        if c.config_operation in (SET, APPEND, SUBTRACT) and c.value is None:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {c.name}")
        if c.config_operation in (APPEND, SUBTRACT):
            key = table.get(c.name)
            if key is None or key.type != LIST:
                raise TopicError(ErrorCode.INVALID_CONFIG,
                                 f"Config value {_OP_NAMES[c.config_operation]} is not allowed "
                                 f"for config key: {c.name}")
        ops.append((c.config_operation, c.name, c.value))
    return ops


def _computer(broker, resource_type, ops):
    def current_list(current, name):
        if name in current:
            return [v for v in (x.strip() for x in current[name].split(",")) if v]
        if resource_type == TOPIC:
            return list(topic_config_values(broker.config, current)[name])
        if resource_type == BROKER:
            return list(broker.config[name] or [])
        return []

    def compute(current):
        result = dict(current)
        for op, name, value in ops:
            if op == SET:
                result[name] = value
            elif op == DELETE:
                result.pop(name, None)
            else:
                items = current_list(result, name)
                given = [v for v in (x.strip() for x in value.split(",")) if v]
                if op == APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                result[name] = format_value(LIST, items)
        return result

    return compute
