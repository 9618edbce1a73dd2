"""Kafka's ACL model as wire codes and names (Java's ``org.apache.kafka.common.acl``
and ``common.resource``): pure data, no decisions.

* resource types, pattern types, operations and permission types with
  Kafka's codes (what CreateAcls / DescribeAcls / DeleteAcls carry), their
  enum names (``TOPIC``, what Kafka's ``toString`` prints) and the names
  ZooKeeper's ACL JSON uses (``SecurityUtils``: ``Topic``,
  ``TransactionalId``, ``DescribeConfigs``, ``Allow``);
* ``ResourcePattern`` and ``AccessControlEntry`` (an ACL binding is one of
  each), ``ResourcePatternFilter`` / ``AccessControlEntryFilter`` with
  Kafka's ``matches`` rules (ANY, MATCH, the literal ``*`` resource,
  prefixes) used by DescribeAcls, DeleteAcls and the tool;
* ``parse_principal``: Kafka's ``SecurityUtils.parseKafkaPrincipal`` (a
  ``type:name`` string; ValueError otherwise).

The authorizer (``kafkapy.server.security.authorizer``) and the ACL store
(``kafkapy.metadata.acl_store``) are built on these; the group and
transaction coordinators name operations with them.
"""

from __future__ import annotations

from typing import NamedTuple

# ResourceType codes
RT_UNKNOWN, RT_ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = range(8)
# PatternType codes
PT_UNKNOWN, PT_ANY, MATCH, LITERAL, PREFIXED = range(5)
# AclOperation codes
(OP_UNKNOWN, OP_ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION,
 DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS) = range(15)
# AclPermissionType codes
PERM_UNKNOWN, PERM_ANY, DENY, ALLOW = range(4)

RESOURCE_TYPE_ENUM = {RT_UNKNOWN: "UNKNOWN", RT_ANY: "ANY", TOPIC: "TOPIC", GROUP: "GROUP", CLUSTER: "CLUSTER",
                      TRANSACTIONAL_ID: "TRANSACTIONAL_ID", DELEGATION_TOKEN: "DELEGATION_TOKEN", USER: "USER"}
PATTERN_TYPE_ENUM = {PT_UNKNOWN: "UNKNOWN", PT_ANY: "ANY", MATCH: "MATCH", LITERAL: "LITERAL", PREFIXED: "PREFIXED"}
OPERATION_ENUM = {OP_UNKNOWN: "UNKNOWN", OP_ANY: "ANY", ALL: "ALL", READ: "READ", WRITE: "WRITE", CREATE: "CREATE",
                  DELETE: "DELETE", ALTER: "ALTER", DESCRIBE: "DESCRIBE", CLUSTER_ACTION: "CLUSTER_ACTION",
                  DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS", ALTER_CONFIGS: "ALTER_CONFIGS",
                  IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE", CREATE_TOKENS: "CREATE_TOKENS",
                  DESCRIBE_TOKENS: "DESCRIBE_TOKENS"}
PERMISSION_ENUM = {PERM_UNKNOWN: "UNKNOWN", PERM_ANY: "ANY", DENY: "DENY", ALLOW: "ALLOW"}


def _camel(enum_name: str) -> str:
    """SecurityUtils.toPascalCase: ``DESCRIBE_CONFIGS`` -> ``DescribeConfigs``."""
    return "".join(part.capitalize() for part in enum_name.split("_"))


# The names in ZooKeeper's JSON and paths (SecurityUtils.resourceTypeName / operationName / permissionTypeName).
RESOURCE_TYPE_NAME = {code: _camel(name) for code, name in RESOURCE_TYPE_ENUM.items()}
OPERATION_NAME = {code: _camel(name) for code, name in OPERATION_ENUM.items()}
PERMISSION_NAME = {code: _camel(name) for code, name in PERMISSION_ENUM.items()}


def _by_name(table: dict) -> dict:
    """Case-insensitive lookup by either spelling (Kafka's fromString accepts both)."""
    out = {}
    for code, name in table.items():
        out[name.upper()] = code
        out[name.replace("_", "").upper()] = code
    return out


_RT_BY_NAME = _by_name(RESOURCE_TYPE_ENUM)
_PT_BY_NAME = _by_name(PATTERN_TYPE_ENUM)
_OP_BY_NAME = _by_name(OPERATION_ENUM)
_PERM_BY_NAME = _by_name(PERMISSION_ENUM)


def resource_type_from_name(name: str) -> int:
    return _RT_BY_NAME.get(name.strip().upper(), RT_UNKNOWN)


def pattern_type_from_name(name: str) -> int:
    return _PT_BY_NAME.get(name.strip().upper(), PT_UNKNOWN)


def operation_from_name(name: str) -> int:
    return _OP_BY_NAME.get(name.strip().upper(), OP_UNKNOWN)


def permission_from_name(name: str) -> int:
    return _PERM_BY_NAME.get(name.strip().upper(), PERM_UNKNOWN)


# Concrete resource types an ACL can name (AclEntry.RESOURCE_TYPES) and what each supports
# (AclEntry.supportedOperations; ALL is accepted everywhere).
SUPPORTED_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE),
    DELEGATION_TOKEN: (DESCRIBE,),
    USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}
CONCRETE_RESOURCE_TYPES = tuple(SUPPORTED_OPERATIONS)


def all_operations(resource_type: int) -> int:
    """The authorized-operations bit set of every operation the type supports
    (what Kafka answers without an authorizer)."""
    return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type])

CLUSTER_NAME = "kafka-cluster"
WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"


def parse_principal(text) -> tuple:
    """(type, name) of a ``type:name`` principal (SecurityUtils.parseKafkaPrincipal)."""
    if not text:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    parts = text.split(":", 1)
    if len(parts) != 2:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return parts[0], parts[1]


class ResourcePattern(NamedTuple):
    resource_type: int
    name: str
    pattern_type: int

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={RESOURCE_TYPE_ENUM.get(self.resource_type, 'UNKNOWN')}, "
                f"name={self.name}, patternType={PATTERN_TYPE_ENUM.get(self.pattern_type, 'UNKNOWN')})")

    @property
    def is_unknown(self) -> bool:
        return self.resource_type not in CONCRETE_RESOURCE_TYPES or self.pattern_type not in (LITERAL, PREFIXED)


class AccessControlEntry(NamedTuple):
    principal: str
    host: str
    operation: int
    permission_type: int

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={OPERATION_ENUM.get(self.operation, 'UNKNOWN')}, "
                f"permissionType={PERMISSION_ENUM.get(self.permission_type, 'UNKNOWN')})")

    @property
    def is_unknown(self) -> bool:
        return self.operation in (OP_UNKNOWN, OP_ANY) or self.operation not in OPERATION_ENUM \
            or self.permission_type not in (DENY, ALLOW)


class ResourcePatternFilter(NamedTuple):
    resource_type: int
    name: str | None  # None: any name
    pattern_type: int

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={RESOURCE_TYPE_ENUM.get(self.resource_type, 'UNKNOWN')}, "
                f"name={'<any>' if self.name is None else self.name}, "
                f"patternType={PATTERN_TYPE_ENUM.get(self.pattern_type, 'UNKNOWN')})")

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ResourcePatternFilter.matches: MATCH also finds the literal
        ``*`` and the prefixes that cover the name."""
        if self.resource_type != RT_ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PT_ANY, MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type == PT_ANY or self.pattern_type == pattern.pattern_type:
            return self.name == pattern.name
        if pattern.pattern_type == LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)

    @property
    def matches_at_most_one(self) -> bool:
        return (self.resource_type not in (RT_ANY, RT_UNKNOWN) and self.name is not None
                and self.pattern_type not in (MATCH, PT_UNKNOWN))


class AccessControlEntryFilter(NamedTuple):
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != OP_ANY and self.operation != entry.operation:
            return False
        return self.permission_type == PERM_ANY or self.permission_type == entry.permission_type


ANY_ENTRY = AccessControlEntryFilter(None, None, OP_ANY, PERM_ANY)
