"""Kafka's client quota keys and entities, and the DescribeClientQuotas /
AlterClientQuotas rules over the metadata model (ZkAdminManager's).

Quota configs live in the user and client entity configs of the metadata
store (``Metadata.entity_configs``, keyed by ``metadata.model``'s
entity keys), beside SCRAM credentials: only the keys below are quotas, and
alterations go key by key (``MetadataStore.alter_entity_configs``).

IP entities (``ip_entity``) take ``connection_creation_rate`` (INT), which
the acceptor enforces (``connections.py``).

Values are stored as Kafka stores them: strings, LONG keys as integers
(``1048576``), DOUBLE keys as Java's ``Double.toString`` (``50.0``,
``1.0E7``). Nothing here is owned state: pure functions.
"""

from __future__ import annotations

import math

import ipaddress
import socket

from kafkapy.metadata.model import DEFAULT_ENTITY, ENTITY_IPS, entity_key, entity_names, ip_entity, ip_name
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.java_text import java_double
from kafkapy.protocol.topics import TopicError

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# QuotaConfig.buildUserClientQuotaConfigDef: key -> ConfigDef type
QUOTA_KEYS = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
# An IP entity's one key (DynamicConfig.Ip): new connections per second from it.
CONNECTION_CREATION_RATE = "connection_creation_rate"
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}
# A user entity also takes SCRAM credentials (type STRING), which
# AlterClientQuotas cannot set (Kafka: "Unexpected config type STRING").
SCRAM_KEYS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

# ClientQuotaEntity's entity types on the wire.
USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
# DescribeClientQuotas match types.
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def invalid(message: str) -> TopicError:
    return TopicError(ErrorCode.INVALID_REQUEST, message)


# ------------------------------------------------------------------ AlterClientQuotas

def alteration_entity(entity) -> tuple:
    """The metadata entity key of an AlterClientQuotas entity (``[(type, name or
    None for the default)]``), with ZkAdminManager.parseAndSanitizeQuotaEntity's
    errors."""
    if not entity:
        raise invalid("Invalid empty client quota entity")
    parts = {}
    for entity_type, name in entity:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise invalid(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise invalid(f"Empty {entity_type} not supported")
        parts[entity_type] = name
    if IP in parts:
        if USER in parts or CLIENT_ID in parts:
            raise invalid("Invalid quota entity combination, IP entity should not be used with "
                          "user/client ID entity.")
        ip = parts[IP]
        if ip is not None and not valid_ip_entity(ip):
            raise invalid(f"{ip} is not a valid IP or resolvable host.")
        return ip_entity(ip)
    return entity_key(parts.get(USER), parts.get(CLIENT_ID),
                      user_default=USER in parts and parts[USER] is None,
                      client_default=CLIENT_ID in parts and parts[CLIENT_ID] is None)


def valid_ip_entity(ip: str) -> bool:
    """DynamicConfig.Ip.isValidIpEntity: an IP address or a name that resolves."""
    try:
        ipaddress.ip_address(ip)
        return True
    except ValueError:
        pass
    try:
        socket.gethostbyname(ip)
        return True
    except (OSError, UnicodeError):
        return False


def alteration_ops(ops, entity: tuple = ("users", "")) -> tuple[dict, list]:
    """``(keys to set, keys to delete)`` of AlterClientQuotas ops ``[(key, value,
    remove)]`` on ``entity``, each value converted as Kafka's alterClientQuotas
    does (a LONG or INT must be whole within 1e-6); INVALID_REQUEST for a key
    the entity does not take."""
    keys = IP_KEYS if entity[0] == ENTITY_IPS else QUOTA_KEYS
    to_set, to_delete = {}, []
    for key, value, remove in ops:
        if remove:
            to_set.pop(key, None)
            to_delete.append(key)
            continue
        kind = keys.get(key)
        if kind is None:
            if key in SCRAM_KEYS and entity[0] == "users":
                raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, "Unexpected config type STRING")
            raise invalid(f"Invalid configuration key {key}")
        to_set[key] = config_value(key, value, kind)
        if key in to_delete:
            to_delete.remove(key)
    return to_set, to_delete


def config_value(key: str, value: float, kind: str | None = None) -> str:
    """A quota value as Kafka stores it (``kind``: the key's ConfigDef type)."""
    kind = kind or QUOTA_KEYS.get(key) or IP_KEYS[key]
    if kind in ("LONG", "INT"):
        epsilon = 1e-6
        if not math.isfinite(value):
            raise invalid(f"Configuration {key} must be a {kind} value")
        whole = int(value + epsilon)  # Scala's toLong / toInt truncate toward zero
        if abs(whole - value) > epsilon:
            raise invalid(f"Configuration {key} must be a {kind} value")
        return str(whole)
    return java_double(value)


# ------------------------------------------------------------------ DescribeClientQuotas

def describe_filter(components) -> dict:
    """``{entity type: (match type, match)}`` of DescribeClientQuotas components
    ``[(type, match type, match)]``, with ZkAdminManager.describeClientQuotas' errors."""
    out = {}
    for entity_type, match_type, match in components:
        if entity_type in (USER, CLIENT_ID, IP):
            if entity_type in out:
                what = {USER: "user", CLIENT_ID: "client", IP: "ip"}[entity_type]
                raise invalid(f"Duplicate {what} filter component entity type")
        elif entity_type == "":
            raise invalid("Unexpected empty filter component entity type")
        else:
            raise TopicError(ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{entity_type}' not supported")
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise invalid(f"Unexpected match type: {match_type}")
        if match_type == MATCH_EXACT and match is None:
            raise invalid(f"Exact match of entity type '{entity_type}' without a name")
        out[entity_type] = (match_type, match)
    if IP in out and (USER in out or CLIENT_ID in out):
        raise invalid("Invalid entity filter component combination, IP filter component should not be used "
                      "with user or clientId filter component.")
    return out


def _matches(component, part, strict: bool) -> bool:
    """``part``: the entity's name of that type (``DEFAULT_ENTITY``; None: the
    entity has no such part)."""
    if component is None:
        return part is None or not strict
    match_type, match = component
    if match_type == MATCH_EXACT:
        return part is not None and part != DEFAULT_ENTITY and part == match
    if match_type == MATCH_DEFAULT:
        return part == DEFAULT_ENTITY
    return part is not None


def describe(entity_configs, components: dict, strict: bool) -> list:
    """The entries DescribeClientQuotas answers: ``[([(type, name or None)], {key:
    float})]`` of the entities matching ``components`` (``describe_filter``) that
    hold at least one quota key (ZkAdminManager's handleDescribeClientQuotas and
    handleDescribeIpQuotas)."""
    out = []
    user_client = IP not in components
    ips = USER not in components and CLIENT_ID not in components and (IP in components or not strict)
    for key in sorted(entity_configs):
        if key[0] == ENTITY_IPS:
            if not ips:
                continue
            quotas = {k: float(v) for k, v in entity_configs[key].items() if k in IP_KEYS}
            ip = ip_name(key)
            if quotas and _matches(components.get(IP), ip, strict):
                out.append(([(IP, None if ip == DEFAULT_ENTITY else ip)], quotas))
            continue
        if not user_client or key[0] not in ("users", "clients"):
            continue
        quotas = {k: float(v) for k, v in entity_configs[key].items() if k in QUOTA_KEYS}
        if not quotas:
            continue
        user, client = entity_names(key)
        if not (_matches(components.get(USER), user, strict)
                and _matches(components.get(CLIENT_ID), client, strict)):
            continue
        entity = []
        if user is not None:
            entity.append((USER, None if user == DEFAULT_ENTITY else user))
        if client is not None:
            entity.append((CLIENT_ID, None if client == DEFAULT_ENTITY else client))
        out.append((entity, quotas))
    return out
