"""Kafka's ACL authorizer (AclAuthorizer, ZooKeeper mode): the decisions.

Enabled by ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``
(or the KRaft name ``org.apache.kafka.metadata.authorizer.StandardAuthorizer``,
which makes the same decisions); unset, ``Broker.authorizer`` is None and
handlers skip every check (one attribute read per request).

The rules, Kafka's (``AclAuthorizer.authorizeAction``):

* a principal in ``super.users`` (``User:a;User:b``) is allowed everything;
* the ACLs that apply to a resource are those of its literal name, of the
  literal ``*`` of its type, and of every prefixed pattern its name starts
  with; with none, ``allow.everyone.if.no.acl.found`` decides (default false);
* a DENY entry matching the principal (or ``User:*``), the client's host (or
  ``*``) and the operation (or ``All``) wins over any ALLOW;
* else an ALLOW entry is needed for the operation or ``All``, where
  ``Describe`` is also granted by Read, Write, Delete or Alter, and
  ``DescribeConfigs`` by AlterConfigs (implied operations apply to ALLOW
  only, as in Kafka: Deny Read does not deny Describe).

``allowed_by_resource_type`` is Kafka's authorizeByResourceType (used by
InitProducerId without a transactional id: IdempotentWrite on the cluster or
Write on *some* topic).

Cost: the ACLs come from ``metadata.acl_store`` (a file and the shared
``acl_generation`` counter); each check reads that counter (one shared-memory
word) and then one dict lookup in a memo of decisions keyed by (principal,
host, operation, resource type, name), rebuilt when the counter moves. A
decision not memoized yet costs a few dict lookups plus a scan of the
prefixed patterns of the type. Denials are logged at INFO on the logger
``kafka.authorizer.logger`` with Kafka's message, once per memoized decision.

Ownership: one ``Authorizer`` per process (handler worker, group-coordinator
process), unshared; ``ctx.principal`` and ``ctx.peer_host`` come from the
processor that authenticated the connection.
"""

from __future__ import annotations

import logging

from kafkapy.protocol import acls as A
from kafkapy.protocol.acls import ResourcePattern

audit = logging.getLogger("kafka.authorizer.logger")

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_CLASSES = ("", ACL_AUTHORIZER, STANDARD_AUTHORIZER)

# Operations an ALLOW of which also grants the key (AclAuthorizer.allowAclExists).
_IMPLIED_BY = {
    A.DESCRIBE: (A.DESCRIBE, A.READ, A.WRITE, A.DELETE, A.ALTER),
    A.DESCRIBE_CONFIGS: (A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS),
}
# The memo is dropped whole when it reaches this many decisions (a client
# naming endless topics cannot grow a worker without bound); ~100 bytes each.
MEMO_LIMIT = 100_000


def parse_super_users(text: str) -> frozenset:
    """``super.users``: principals separated by ';' (each ``type:name``)."""
    out = set()
    for item in (text or "").split(";"):
        item = item.strip()
        if item:
            A.parse_principal(item)
            out.add(item)
    return frozenset(out)


class Authorizer:
    """One process's authorizer over its ACL store (``metadata.acl_store``);
    owned by that process's one handler thread, never shared."""

    def __init__(self, store, super_users=frozenset(), allow_everyone_if_no_acl_found: bool = False):
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self._memo: dict = {}
        self._literal: dict = {}   # (resource type, name) -> entries
        self._prefixed: dict = {}  # resource type -> {prefix: entries}
        self._acls: dict = {}

    # -- the cache ---------------------------------------------------------------------
    def _refresh(self) -> None:
        acls = self.store.current()
        literal, prefixed = {}, {}
        for resource, entries in acls.items():
            if resource.pattern_type == A.LITERAL:
                literal[(resource.resource_type, resource.name)] = tuple(entries)
            else:
                prefixed.setdefault(resource.resource_type, {})[resource.name] = tuple(entries)
        self._acls, self._literal, self._prefixed = acls, literal, prefixed
        self._memo = {}

    def acls(self) -> dict:
        """``{ResourcePattern: frozenset(AccessControlEntry)}`` now."""
        if self.store.changed():
            self._refresh()
        return self._acls

    # -- decisions ---------------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str,
                  api_key: int = -1) -> bool:
        """``api_key`` >= 0: a request's own check, whose denial is logged (Kafka's
        logIfDenied); -1 for what only computes (authorized operations)."""
        if self.store.changed():
            self._refresh()
        key = (principal, host, operation, resource_type, name)
        result = self._memo.get(key)
        if result is None:
            result = self._decide(principal, host, operation, resource_type, name)
            if len(self._memo) >= MEMO_LIMIT:
                self._memo = {}
            self._memo[key] = result
            if not result and api_key >= 0:
                audit.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s "
                           "for request = %s with resourceRefCount = 1", principal, A.OPERATION_NAME[operation],
                           host, A.RESOURCE_TYPE_NAME[resource_type], name, _api_name(api_key))
        return result

    def _matching(self, resource_type: int, name: str) -> list:
        found = []
        entries = self._literal.get((resource_type, name))
        if entries:
            found.extend(entries)
        if name != A.WILDCARD_RESOURCE:
            entries = self._literal.get((resource_type, A.WILDCARD_RESOURCE))
            if entries:
                found.extend(entries)
        prefixes = self._prefixed.get(resource_type)
        if prefixes:
            if len(prefixes) <= len(name):
                for prefix, entries in prefixes.items():
                    if name.startswith(prefix):
                        found.extend(entries)
            else:
                for i in range(1, len(name) + 1):
                    entries = prefixes.get(name[:i])
                    if entries:
                        found.extend(entries)
        return found

    def _decide(self, principal, host, operation, resource_type, name) -> bool:
        if principal in self.super_users:
            return True
        entries = self._matching(resource_type, name)
        if not entries:
            return self.allow_if_no_acl
        principals = (principal, A.WILDCARD_PRINCIPAL)
        hosts = (host, A.WILDCARD_HOST)
        allow_ops = _IMPLIED_BY.get(operation, (operation,))
        allowed = False
        for e in entries:
            if e.principal not in principals or e.host not in hosts:
                continue
            if e.permission_type == A.DENY:
                if e.operation == operation or e.operation == A.ALL:
                    return False
            elif e.operation == A.ALL or e.operation in allow_ops:
                allowed = True
        return allowed

    def allowed_by_resource_type(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """AclAuthorizer.authorizeByResourceType: may the principal do
        ``operation`` on at least one resource of the type (an ALLOW literal or
        prefix not covered by a DENY; a literal ``*`` DENY refuses outright)?"""
        if principal in self.super_users:
            return True
        acls = self.acls()
        principals = (principal, A.WILDCARD_PRINCIPAL)
        hosts = (host, A.WILDCARD_HOST)
        ops = (operation, A.ALL)
        names = {(A.DENY, A.LITERAL): set(), (A.DENY, A.PREFIXED): set(),
                 (A.ALLOW, A.LITERAL): set(), (A.ALLOW, A.PREFIXED): set()}
        for resource, entries in acls.items():
            if resource.resource_type != resource_type:
                continue
            for e in entries:
                if e.principal in principals and e.host in hosts and e.operation in ops:
                    names[(e.permission_type, resource.pattern_type)].add(resource.name)
        deny_literals, deny_prefixes = names[(A.DENY, A.LITERAL)], names[(A.DENY, A.PREFIXED)]
        if A.WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_if_no_acl:
            return True

        def dominated(name: str) -> bool:
            return any(name[:i] in deny_prefixes for i in range(1, len(name) + 1))

        if any(not dominated(p) for p in names[(A.ALLOW, A.PREFIXED)]):
            return True
        return any(n == A.WILDCARD_RESOURCE or (n not in deny_literals and not dominated(n))
                   for n in names[(A.ALLOW, A.LITERAL)])

    # -- what handlers call ------------------------------------------------------------
    def allowed(self, ctx, operation: int, resource_type: int, name: str) -> bool:
        return self.authorize(ctx.principal, ctx.peer_host, operation, resource_type, name, ctx.api_key)

    def allowed_cluster(self, ctx, operation: int) -> bool:
        return self.allowed(ctx, operation, A.CLUSTER, A.CLUSTER_NAME)

    def denied(self, ctx, operation: int, resource_type: int, names) -> set:
        """The names of ``names`` the request's principal may not ``operation``."""
        principal, host, api_key = ctx.principal, ctx.peer_host, ctx.api_key
        return {n for n in set(names) if not self.authorize(principal, host, operation, resource_type, n, api_key)}

    def authorized_operations(self, ctx, resource_type: int, name: str) -> int:
        """AuthHelper.authorizedOperations: a bit per supported operation allowed."""
        bits = 0
        for op in A.SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(ctx.principal, ctx.peer_host, op, resource_type, name):
                bits |= 1 << op
        return bits

    # -- ACL administration (CreateAcls / DeleteAcls / DescribeAcls) --------------------
    def matching_bindings(self, pattern_filter, entry_filter) -> list:
        """``[(ResourcePattern, AccessControlEntry)]`` matching both filters (Authorizer.acls)."""
        return [(resource, e) for resource, entries in sorted(self.acls().items())
                for e in sorted(entries) if pattern_filter.matches(resource) and entry_filter.matches(e)]

    def create(self, resource: ResourcePattern, entries) -> None:
        """Add ``entries`` to ``resource``'s ACLs (one conditional update)."""
        self.store.update(resource, lambda old: old | frozenset(entries))
        self._refresh()  # the store's own write does not look like a change to it

    def delete(self, resource: ResourcePattern, remove) -> frozenset:
        """Remove the entries for which ``remove(entry)`` holds, as they are in the
        store when written (Kafka's updateResourceAcls); returns those removed."""
        removed = []

        def change(old):
            gone = frozenset(e for e in old if remove(e))
            removed[:] = [gone]
            return old - gone

        self.store.update(resource, change)
        self._refresh()
        return removed[0] if removed else frozenset()


def denied_topics(ctx, operation: int, names, cluster_operation: int | None = None):
    """What a worker handler asks most: the topics of ``names`` its principal
    may not ``operation`` (empty without an authorizer, or when it holds
    ``cluster_operation`` on the cluster, e.g. a broker's ClusterAction)."""
    auth = getattr(ctx.broker, "authorizer", None)
    if auth is None:
        return ()
    if cluster_operation is not None and auth.allowed_cluster(ctx, cluster_operation):
        return ()
    return auth.denied(ctx, operation, A.TOPIC, names)


def cluster_denied(ctx, operation: int) -> bool:
    """True when an authorizer refuses ``operation`` on the cluster."""
    auth = getattr(ctx.broker, "authorizer", None)
    return auth is not None and not auth.allowed_cluster(ctx, operation)


def cluster_authorized_operations(ctx) -> int:
    """Kafka's clusterAuthorizedOperations (Metadata v8-10, DescribeCluster): every
    cluster operation without an authorizer; with one, 0 unless Describe on the
    cluster, else the bits of those allowed."""
    auth = getattr(ctx.broker, "authorizer", None)
    if auth is None:
        return A.all_operations(A.CLUSTER)
    if not auth.allowed_cluster(ctx, A.DESCRIBE):
        return 0
    return auth.authorized_operations(ctx, A.CLUSTER, A.CLUSTER_NAME)


def authorizer_for(config, table, zk=None) -> Authorizer | None:
    """The process's authorizer, or None when ``authorizer.class.name`` is empty."""
    if not config["authorizer.class.name"]:
        return None
    from kafkapy.metadata.acl_store import acl_store
    from kafkapy.server.config.types import ConfigException

    try:
        super_users = parse_super_users(config["super.users"])
    except ValueError as exc:  # stops start-up with Kafka's reason, as its authorizer's configure()
        raise ConfigException("super.users", config["super.users"], str(exc)) from None
    return Authorizer(acl_store(config, table, zk), super_users, config["allow.everyone.if.no.acl.found"])


def _api_name(api_key: int) -> str:
    from kafkapy.protocol.api import API_TABLE

    spec = API_TABLE.get(api_key)
    return spec.name if spec is not None else str(api_key)
