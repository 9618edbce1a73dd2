"""DescribeUserScramCredentials (key 50), v0: which SCRAM mechanisms a user
has a credential for, and with how many iterations (never the salt or keys).

Contract (Kafka 3.9's ZooKeeper mode, ZkAdminManager):
- ``users`` null or empty: every user with a SCRAM credential, sorted by name.
- Named users, each answered once in request order: an empty name ->
  RESOURCE_NOT_FOUND (91) "Username must not be empty"; a name given twice ->
  DUPLICATE_RESOURCE (92); a user without a SCRAM credential ->
  RESOURCE_NOT_FOUND "Attempt to describe a user credential that does not
  exist: <user>"; else NONE with one (mechanism type, iterations) per
  mechanism (1: SCRAM-SHA-256, 2: SCRAM-SHA-512).
- With an authorizer, DESCRIBE on the cluster is required, else
  CLUSTER_AUTHORIZATION_FAILED (31) at the top and in one result per named
  user with an empty user name, Kafka's getErrorResponse. (librdkafka 2.16
  corrupts its heap on any DescribeUserScramCredentials answer with a
  top-level error, also without results: seen here.)
Read from the broker's metadata (the user entity configs; in cluster mode
the image every broker follows from ZooKeeper), so any broker answers.
"""

from __future__ import annotations

from kafkapy.client.security import MECHANISM_TYPES
from kafkapy.metadata.model import ENTITY_USERS, entity_names, user_entity
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.server.security.authorizer import cluster_denied
from kafkapy.server.security.scram_store import ScramCredential

API_KEY = 50
EMPTY_NAME = "Username must not be empty"


def credential_infos(config: dict) -> list:
    return [{"mechanism": t, "iterations": ScramCredential.from_string(config[name]).iterations}
            for t, name in sorted(MECHANISM_TYPES.items()) if config.get(name)]


def handle(ctx, request):
    names = [u.name for u in request.users or ()]
    if cluster_denied(ctx, acls.DESCRIBE):
        code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        return construct(ctx.response_class(), {
            "throttle_time": 0, "error_code": code, "error_message": message,
            "results": [{"user": "", "error_code": code, "error_message": message, "credential_infos": []}
                        for _ in names]})
    configs = ctx.broker.metadata().entity_configs
    results = []
    if not names:
        for key in sorted(configs, key=lambda k: entity_names(k)[0] or ""):
            user, client = entity_names(key)
            infos = credential_infos(configs[key]) if key[0] == ENTITY_USERS and client is None else []
            if infos:
                results.append({"user": user, "error_code": 0, "error_message": None, "credential_infos": infos})
    else:
        for user in dict.fromkeys(names):
            result = {"user": user, "error_code": ErrorCode.NONE, "error_message": None, "credential_infos": []}
            if not user:
                result.update(error_code=ErrorCode.RESOURCE_NOT_FOUND, error_message=EMPTY_NAME)
            elif names.count(user) > 1:
                result.update(error_code=ErrorCode.DUPLICATE_RESOURCE,
                              error_message="Cannot describe SCRAM credentials for the same user twice in a "
                                            f"single request: {user}")
            else:
                infos = credential_infos(configs.get(user_entity(user)) or {})
                if infos:
                    result["credential_infos"] = infos
                else:
                    result.update(error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                  error_message=f"Attempt to describe a user credential that does not exist: {user}")
            results.append(result)
    return construct(ctx.response_class(), {"throttle_time": 0, "error_code": 0, "error_message": None,
                                            "results": results})
