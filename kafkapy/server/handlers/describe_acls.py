"""DescribeAcls (key 29), v0-v3: the ACL bindings matching one filter.

Contract (Kafka 3.9's AclApis.handleDescribeAcls):
- Needs Describe on the cluster: else CLUSTER_AUTHORIZATION_FAILED (31).
- Without an authorizer: SECURITY_DISABLED (54), "No Authorizer is
  configured on the broker".
- The filter is Kafka's AclBindingFilter: resource type (ANY 1 or one type),
  name (null: any), pattern type (ANY 1: exact name in any pattern type;
  MATCH 2: every pattern that applies to the name: the literal name, the
  literal ``*`` and the prefixes covering it; LITERAL 3; PREFIXED 4),
  principal and host (null: any), operation and permission type (ANY 1).
  Codes Kafka does not know match nothing.
- v0 has no pattern type (LITERAL); ANY sent to v0 is read as LITERAL.
  A filter with an UNKNOWN (0) field, or v0 with a pattern type other than
  LITERAL/ANY, fails to parse in Kafka: the connection is closed.
- The answer lists each matching resource pattern once with its entries.
"""

from kafkapy.protocol import acls as A
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import CloseConnection, construct

API_KEY = 29


def entry_filter(principal, host, operation: int, permission: int) -> A.AccessControlEntryFilter:
    return A.AccessControlEntryFilter(principal, host, operation, permission)


def pattern_type_of(request_pattern, version: int):
    """The filter's pattern type, None for what Kafka fails to parse (v0 takes ANY as LITERAL)."""
    if version == 0:
        return A.LITERAL if request_pattern in (None, A.PT_ANY, A.LITERAL) else None
    return request_pattern


def handle(ctx, r):
    pattern_type = pattern_type_of(getattr(r, "pattern_type_filter", None), ctx.api_version)
    if pattern_type is None or A.PT_UNKNOWN in (pattern_type, r.resource_type_filter, r.operation,
                                                r.permission_type):
        return CloseConnection
    data = {"throttle_time": 0, "error_code": 0, "error_message": None, "resources": []}
    auth = getattr(ctx.broker, "authorizer", None)
    if auth is None:
        data.update(error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured on the broker")
    elif not auth.allowed_cluster(ctx, A.DESCRIBE):
        data.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message="Request is not authorized: Describe on the cluster is needed.")
    else:
        resources = {}
        for resource, e in auth.matching_bindings(
                A.ResourcePatternFilter(r.resource_type_filter, r.resource_name_filter, pattern_type),
                entry_filter(r.principal_filter, r.host_filter, r.operation, r.permission_type)):
            resources.setdefault(resource, []).append(
                {"principal": e.principal, "host": e.host, "operation": e.operation,
                 "permission_type": e.permission_type})
        data["resources"] = [{"resource_type": res.resource_type, "resource_name": res.name,
                              "pattern_type": res.pattern_type, "acls": acls}
                             for res, acls in resources.items()]
    return construct(ctx.response_class(), data)
