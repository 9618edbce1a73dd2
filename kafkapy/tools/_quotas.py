"""DescribeClientQuotas and AlterClientQuotas for kafkapy-configs, as raw requests.

Neither confluent-kafka (librdkafka has no client-quota admin API) nor
kafkapy's own admin client speaks them, so the tool sends them itself, v1
(flexible; Kafka 2.8+ and kafkapy answer it), over one
``_secure_conn.SecureConnection`` to the first bootstrap server with
``--command-config``'s security settings (``props``), as Kafka's tools do.
Errors come back as ``ClientError`` with Kafka's error name, as from the
tool's client seam.
"""

from __future__ import annotations

from kafkapy.tools._client import ClientError
from kafkapy.tools._secure_conn import SecureConnection

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
_VERSION = 1


def _call(bootstrap: str, props: dict, api_key: int, data: dict, timeout_s: float):
    with SecureConnection(bootstrap, props or {}, "kafkapy-configs", timeout_s) as conn:
        return conn.request(api_key, _VERSION, data)


def describe(bootstrap: str, props: dict, components, strict: bool, timeout_s: float = 30.0) -> list:
    """``[([(entity type, name or None)], {key: float})]``; ``components``:
    ``[(entity type, name or "" for the default or None for any)]``."""
    wire = []
    for entity_type, name in components:
        if name is None:
            wire.append({"entity_type": entity_type, "match_type": 2, "match": None})
        elif name == "":
            wire.append({"entity_type": entity_type, "match_type": 1, "match": None})
        else:
            wire.append({"entity_type": entity_type, "match_type": 0, "match": name})
    response = _call(bootstrap, props, DESCRIBE_CLIENT_QUOTAS, {"components": wire, "strict": strict}, timeout_s)
    if response.error_code:
        raise ClientError.from_code(response.error_code, response.error_message)
    return [([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: v.value for v in entry.values})
            for entry in response.entries or ()]


def alter(bootstrap: str, props: dict, entity, to_set: dict, to_delete, validate_only: bool = False,
          timeout_s: float = 30.0) -> None:
    """One entity ``[(entity type, name or None for the default)]``."""
    ops = [{"key": k, "value": float(v), "remove": False} for k, v in to_set.items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in to_delete]
    data = {"entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "ops": ops}],
            "validate_only": validate_only}
    response = _call(bootstrap, props, ALTER_CLIENT_QUOTAS, data, timeout_s)
    for entry in response.entries:
        if entry.error_code:
            raise ClientError.from_code(entry.error_code, entry.error_message)
