"""DeleteAcls (key 31), v0-v3: remove the ACL bindings matching filters.

Contract (Kafka 3.9's AclApis.handleDeleteAcls and AclAuthorizer.deleteAcls):
- Needs Alter on the cluster: else every filter result
  CLUSTER_AUTHORIZATION_FAILED (31); without an authorizer SECURITY_DISABLED (54).
- Filters as DescribeAcls's (v0: LITERAL, ANY read as LITERAL); an UNKNOWN
  (0) field fails to parse: the connection is closed.
- Every resource pattern matched by some filter is updated once (conditional
  on what is stored when written, so ACLs another broker added meanwhile
  are matched too); each binding removed is reported under the first filter
  that matched it, in ``matching_acls`` with error 0.
- Filters that can name only one pattern (no ANY type or name, no MATCH)
  also reach patterns this broker has not heard of yet (Kafka's
  filterToResources).
"""

import logging

from kafkapy.protocol import acls as A
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import CloseConnection, construct
from kafkapy.server.handlers.describe_acls import entry_filter, pattern_type_of

API_KEY = 31
log = logging.getLogger("kafkapy.acls")


def _resources_of(f: A.ResourcePatternFilter) -> list:
    """Kafka's filterToResources, for a filter that matches at most one pattern per type."""
    if f.pattern_type == A.PT_ANY:
        return [A.ResourcePattern(f.resource_type, f.name, A.LITERAL),
                A.ResourcePattern(f.resource_type, f.name, A.PREFIXED)]
    return [A.ResourcePattern(f.resource_type, f.name, f.pattern_type)]


def handle(ctx, r):
    filters = []
    for f in r.filters:
        pattern_type = pattern_type_of(getattr(f, "pattern_type_filter", None), ctx.api_version)
        if pattern_type is None or A.PT_UNKNOWN in (pattern_type, f.resource_type_filter, f.operation,
                                                    f.permission_type):
            return CloseConnection
        filters.append((A.ResourcePatternFilter(f.resource_type_filter, f.resource_name_filter, pattern_type),
                        entry_filter(f.principal_filter, f.host_filter, f.operation, f.permission_type)))
    auth = getattr(ctx.broker, "authorizer", None)

    def fail_all(code, message):
        return construct(ctx.response_class(), {"throttle_time": 0, "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []} for _ in filters]})

    if auth is None:
        return fail_all(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not auth.allowed_cluster(ctx, A.ALTER):
        return fail_all(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        "Request is not authorized: Alter on the cluster is needed.")
    resources = set(auth.acls())
    for pattern_filter, _ in filters:
        if pattern_filter.matches_at_most_one and pattern_filter.resource_type in A.CONCRETE_RESOURCE_TYPES \
                and pattern_filter.name and "/" not in pattern_filter.name:
            resources.update(_resources_of(pattern_filter))
    deleted = [[] for _ in filters]
    for resource in sorted(resources):
        matching = [(i, ef) for i, (pf, ef) in enumerate(filters) if pf.matches(resource)]
        if not matching:
            continue
        first = {}

        def remove(entry, matching=matching, first=first):
            for i, ef in matching:
                if ef.matches(entry):
                    first.setdefault(entry, i)
                    return True
            return False

        try:
            auth.delete(resource, remove)
            error = (ErrorCode.NONE, None)
        except Exception:
            log.exception("deleting ACLs of %s failed", resource)
            error = (ErrorCode.UNKNOWN_SERVER_ERROR, None)
        for entry, i in sorted(first.items()):
            deleted[i].append({"error_code": error[0], "error_message": error[1],
                               "resource_type": resource.resource_type, "resource_name": resource.name,
                               "pattern_type": resource.pattern_type, "principal": entry.principal,
                               "host": entry.host, "operation": entry.operation,
                               "permission_type": entry.permission_type})
    return construct(ctx.response_class(), {"throttle_time": 0, "filter_results": [
        {"error_code": 0, "error_message": None, "matching_acls": acls} for acls in deleted]})
