"""AlterClientQuotas (key 49), v0-1: set or remove client quota keys.

Contract (Kafka 3.9's ZkAdminManager.alterClientQuotas), per entry, each
alone (one entry's error does not stop the others):
- The entity is a user, a client id, or a user and a client id; a null name
  is the default entity (``<default>``). Empty entity, an empty name, an
  unknown entity type, ``ip`` with user/client, or an ``ip`` that is neither
  an address nor a name that resolves -> INVALID_REQUEST.
- Ops set (``remove`` false) or remove a key. Only the quota keys can be
  set (``producer_byte_rate`` and ``consumer_byte_rate`` are LONG: a value
  that is not whole -> INVALID_REQUEST "Configuration k must be a LONG
  value"; ``request_percentage`` and ``controller_mutation_rate`` DOUBLE);
  another key -> INVALID_REQUEST "Invalid configuration key k" (a SCRAM
  mechanism: UNKNOWN_SERVER_ERROR, as Kafka). An ``ip`` entity takes only
  ``connection_creation_rate`` (INT), enforced by the acceptor. Removing an
  absent key is fine.
- The entity's other keys (SCRAM credentials of a user) are kept: the change
  is made key by key, atomically (``MetadataStore.alter_entity_configs``);
  standalone in the embedded store, in a cluster in ZooKeeper
  (``/config/users/<u>[/clients/<c>]``, ``/config/clients/<c>`` and a
  ``/config/changes`` notification every broker follows).
- ``validate_only``: every check, nothing stored.
"""

from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError
from kafkapy.server.handlers import construct
from kafkapy.server.quotas import entities
from kafkapy.server.security.authorizer import cluster_denied

API_KEY = 49


def handle(ctx, request):
    answers = []
    denied = cluster_denied(ctx, acls.ALTER_CONFIGS)  # Kafka: AlterConfigs on the cluster, else every entry refused
    for entry in request.entries:
        code, message = ErrorCode.NONE, None
        try:
            if denied:
                raise TopicError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
            key = entities.alteration_entity([(e.entity_type, e.entity_name) for e in entry.entity])
            to_set, to_delete = entities.alteration_ops(((op.key, op.value, op.remove) for op in entry.ops), key)
            if not request.validate_only:
                ctx.broker.store.alter_entity_configs(key, to_set, to_delete)
        except TopicError as exc:
            code, message = exc.error_code, exc.message
        answers.append({"error_code": code, "error_message": message,
                        "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                                   for e in entry.entity]})
    return construct(ctx.response_class(), {"throttle_time": 0, "entries": answers})
