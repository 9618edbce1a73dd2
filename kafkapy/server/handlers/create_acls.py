"""CreateAcls (key 30), v0-v3: add ACL bindings.

Contract (Kafka 3.9's AclApis.handleCreateAcls and AclAuthorizer.createAcls),
one result per creation, in order:
- Needs Alter on the cluster: else every result CLUSTER_AUTHORIZATION_FAILED (31).
- Without an authorizer: every result SECURITY_DISABLED (54).
- A creation naming ANY (1) as resource type, MATCH/ANY as pattern type, or
  ANY as operation or permission is refused by Kafka's binding constructors:
  every result UNKNOWN_SERVER_ERROR (-1). An UNKNOWN (0) code (or v0 with a
  pattern type) fails to parse: the connection is closed.
- Per creation: a Cluster resource not named ``kafka-cluster``, an empty
  name -> INVALID_REQUEST (42); a code Kafka does not know (resource type,
  pattern type, operation, permission) or a name containing '/' ->
  INVALID_REQUEST "Failed to create ACL"; a principal not of the form
  ``type:name`` -> UNKNOWN_SERVER_ERROR (-1) for every creation of that
  resource pattern (Kafka parses it inside the resource's update).
- The creations of one resource pattern are one conditional update of its
  ACLs (metadata.acl_store: ZooKeeper ``/kafka-acl...`` and a change
  notification in cluster mode, the ACL file standalone).
"""

import logging

from kafkapy.protocol import acls as A
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import CloseConnection, construct

API_KEY = 30
log = logging.getLogger("kafkapy.acls")


def _known(code: int, table: dict) -> int:
    return code if code in table else 0


def handle(ctx, r):
    creations = r.creations
    patterns = [getattr(c, "resource_pattern_type", A.LITERAL) for c in creations]
    if any(A.PT_UNKNOWN in (c.resource_type, p, c.operation, c.permission_type)
           for c, p in zip(creations, patterns)):
        return CloseConnection
    auth = getattr(ctx.broker, "authorizer", None)
    results = [None] * len(creations)

    def fail_all(code, message=None):
        return construct(ctx.response_class(), {"throttle_time": 0, "results": [
            {"error_code": code, "error_message": message} for _ in creations]})

    if auth is None:
        return fail_all(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not auth.allowed_cluster(ctx, A.ALTER):
        return fail_all(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        "Request is not authorized: Alter on the cluster is needed.")
    if any(c.resource_type == A.RT_ANY or p in (A.PT_ANY, A.MATCH) or c.operation == A.OP_ANY
           or c.permission_type == A.PERM_ANY for c, p in zip(creations, patterns)):
        return fail_all(ErrorCode.UNKNOWN_SERVER_ERROR)
    groups = {}
    for i, (c, p) in enumerate(zip(creations, patterns)):
        resource = A.ResourcePattern(_known(c.resource_type, A.RESOURCE_TYPE_ENUM), c.resource_name,
                                     _known(p, A.PATTERN_TYPE_ENUM))
        entry = A.AccessControlEntry(c.principal, c.host, _known(c.operation, A.OPERATION_ENUM),
                                     _known(c.permission_type, A.PERMISSION_ENUM))
        if resource.resource_type == A.CLUSTER and resource.name != A.CLUSTER_NAME:
            results[i] = (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster")
        elif not resource.name:
            results[i] = (ErrorCode.INVALID_REQUEST, "Invalid empty resource name")
        elif resource.is_unknown or entry.is_unknown or "/" in resource.name:
            results[i] = (ErrorCode.INVALID_REQUEST, "Failed to create ACL")
        else:
            groups.setdefault(resource, []).append((i, entry))
    for resource, items in groups.items():
        try:
            for _, entry in items:
                A.parse_principal(entry.principal)
            auth.create(resource, [entry for _, entry in items])
            outcome = (ErrorCode.NONE, None)
        except ValueError:
            outcome = (ErrorCode.UNKNOWN_SERVER_ERROR, None)
        except Exception:
            log.exception("creating ACLs for %s failed", resource)
            outcome = (ErrorCode.UNKNOWN_SERVER_ERROR, None)
        for i, _ in items:
            results[i] = outcome
    return construct(ctx.response_class(), {"throttle_time": 0, "results": [
        {"error_code": code, "error_message": message} for code, message in results]})
