"""AlterUserScramCredentials (key 51), v0: create, replace or delete users'
SCRAM credentials (KIP-554). The client sends the salt and the salted
password (never the password); the broker keeps the salt, StoredKey,
ServerKey and iterations in the user's entity config under the mechanism's
name (Kafka's ScramCredentialUtils format; ``security/scram_store.py``).

Contract (Kafka 3.9's ZooKeeper mode, ZkAdminManager), one result per user:
- An empty user name -> UNACCEPTABLE_CREDENTIAL (93) "Username must not be
  empty"; an unknown mechanism type (not 1 SCRAM-SHA-256 / 2 SCRAM-SHA-512)
  -> UNSUPPORTED_SASL_MECHANISM (33) "Unknown SCRAM mechanism"; iterations
  outside 4096..16384 -> UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too
  many iterations". Such a user's other alterations are not made.
- The same (user, mechanism) twice in the request -> DUPLICATE_RESOURCE (92)
  "A user credential cannot be altered twice in the same request".
- Deleting a credential the user does not have -> RESOURCE_NOT_FOUND (91)
  "Attempt to delete a user credential that does not exist".
- Else the user's deletions and upsertions are applied together (its quota
  keys untouched) and it gets NONE.
- In cluster mode only the controller alters: another broker answers
  NOT_CONTROLLER (41) for every user (clients send this to the controller);
  standalone the broker is the controller. With an authorizer ALTER on the
  cluster is required, else CLUSTER_AUTHORIZATION_FAILED (31) for every user.
The change is written to the metadata store (ZooKeeper ``/config/users/<user>``
with a change notification in cluster mode), which every broker's processors
follow before their next SCRAM authentication.
"""

from __future__ import annotations

from kafkapy.client.security import DEFAULT_ITERATIONS, MECHANISM_TYPES
from kafkapy.metadata.model import user_entity
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.server.handlers.describe_user_scram_credentials import EMPTY_NAME
from kafkapy.server.security.authorizer import cluster_denied
from kafkapy.server.security.scram_store import MAX_ITERATIONS, credential_from_salted

API_KEY = 51


def _everyone(ctx, request, code, message):
    users = sorted({a.name for a in (*request.deletions, *request.upsertions)})
    return construct(ctx.response_class(), {"throttle_time": 0, "results": [
        {"user": u, "error_code": code, "error_message": message} for u in users]})


def handle(ctx, request):
    broker = ctx.broker
    if broker.config["zookeeper.connect"] and broker.metadata().controller_id != broker.broker_id:
        return _everyone(ctx, request, ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
    if cluster_denied(ctx, acls.ALTER):
        return _everyone(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    results = {}  # user -> (code, message); the first failure found for a user stands
    for d in request.deletions:
        if not d.name:
            results.setdefault(d.name, (ErrorCode.UNACCEPTABLE_CREDENTIAL, EMPTY_NAME))
        elif d.mechanism not in MECHANISM_TYPES:
            results.setdefault(d.name, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))
    for u in request.upsertions:
        if not u.name:
            results[u.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, EMPTY_NAME)
        elif u.mechanism not in MECHANISM_TYPES:
            results[u.name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif not DEFAULT_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
            results[u.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                               "Too many iterations" if u.iterations > MAX_ITERATIONS else "Too few iterations")
    pairs = [(a.name, a.mechanism) for a in (*request.upsertions, *request.deletions) if a.name not in results]
    for user, mechanism in pairs:
        if pairs.count((user, mechanism)) > 1:
            results[user] = (ErrorCode.DUPLICATE_RESOURCE,
                             "A user credential cannot be altered twice in the same request")
    configs = broker.metadata().entity_configs
    for d in request.deletions:
        if d.name not in results and MECHANISM_TYPES[d.mechanism] not in (configs.get(user_entity(d.name)) or {}):
            results[d.name] = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    alterations = {}
    for d in request.deletions:
        if d.name not in results:
            alterations.setdefault(user_entity(d.name), ({}, []))[1].append(MECHANISM_TYPES[d.mechanism])
    for u in request.upsertions:
        if u.name not in results:
            mechanism = MECHANISM_TYPES[u.mechanism]
            credential = credential_from_salted(mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations)
            alterations.setdefault(user_entity(u.name), ({}, []))[0][mechanism] = credential.to_string()
    if alterations:
        broker.store.alter_entity_configs_batch(alterations)
    users = [a.name for a in (*request.deletions, *request.upsertions)]
    return construct(ctx.response_class(), {"throttle_time": 0, "results": [
        {"user": user, "error_code": results.get(user, (0, None))[0], "error_message": results.get(user, (0, None))[1]}
        for user in dict.fromkeys(users)]})
