"""Client settings with Kafka's names and defaults.

Settings may be given in Kafka's dotted form (``linger.ms``) or in snake case
(``linger_ms``); both resolve to the dotted name.  Unknown names are logged
and ignored, as Java's clients warn about unused configs, so that a command
line tool can pass through whatever the user typed.
"""

from __future__ import annotations

import logging

log = logging.getLogger("kafkapy.client")

COMMON = {
    "bootstrap.servers": "localhost:9092",
    "client.id": None,
    "request.timeout.ms": 30000,
    "retry.backoff.ms": 100,
    "metadata.max.age.ms": 300000,
    "connections.max.idle.ms": 540000,
    "reconnect.backoff.ms": 50,
    "security.protocol": "PLAINTEXT",
    # TLS and SASL (security.ClientSecurity.from_client_properties reads them):
    # Java's names, and librdkafka's where they differ (sasl.mechanisms,
    # sasl.username/sasl.password, ssl.ca.location), so one set of settings
    # serves both clients (the Spark data source hands its kafka.* options to
    # librdkafka and to this client alike).
    "sasl.mechanism": None,
    "sasl.mechanisms": None,
    "sasl.jaas.config": None,
    "sasl.username": None,
    "sasl.password": None,
    # The stores in Java's names and librdkafka's (ssl_factory.client_stores).
    **{f"ssl.{name}": None for name in (
        "truststore.location", "truststore.certificates", "truststore.type", "truststore.password",
        "keystore.location", "keystore.certificate.chain", "keystore.key", "keystore.type", "keystore.password",
        "key.password", "ca.location", "ca.pem", "certificate.location", "key.location", "certificate.pem",
        "key.pem", "endpoint.identification.algorithm", "enabled.protocols", "protocol", "cipher.suites")},
}

PRODUCER = {
    **COMMON,
    "acks": None,  # resolved below: "all" with idempotence, else 1
    "linger.ms": 5,  # Kafka 4.0's default (KIP-1030)
    "batch.size": 16384,
    "buffer.memory": 33554432,
    "max.block.ms": 60000,
    "max.in.flight.requests.per.connection": 5,
    "max.request.size": 1048576,
    "retries": 2147483647,
    "delivery.timeout.ms": 120000,
    "enable.idempotence": True,
    "compression.type": "none",
    "key.serializer": None,
    "value.serializer": None,
    "partitioner": None,
    "transactional.id": None,
    "transaction.timeout.ms": 60000,
    "allow.auto.create.topics": True,
}

CONSUMER = {
    **COMMON,
    "group.id": None,
    "group.instance.id": None,
    "key.deserializer": None,
    "value.deserializer": None,
    "fetch.min.bytes": 1,
    "fetch.max.wait.ms": 500,
    "fetch.max.bytes": 52428800,
    "max.partition.fetch.bytes": 1048576,
    "max.poll.records": 500,
    "max.poll.interval.ms": 300000,
    "auto.offset.reset": "latest",
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "rebalance.timeout.ms": None,  # defaults to max.poll.interval.ms
    "partition.assignment.strategy": ("range", "roundrobin"),
    "isolation.level": "read_uncommitted",
    "check.crcs": True,
    "allow.auto.create.topics": True,
    "exclude.internal.topics": True,
    "consumer_timeout_ms": None,  # kafka-python's iterator timeout (no Kafka equivalent)
}

ADMIN = {**COMMON}

_CODECS = {"none": 0, None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def compression_code(name) -> int:
    if isinstance(name, int):
        return name
    try:
        return _CODECS[name.lower() if isinstance(name, str) else name]
    except KeyError:
        raise ValueError(f"compression.type must be one of none, gzip, snappy, lz4, zstd; got {name!r}") from None


def security(cfg: dict):
    """The ``security.ClientSecurity`` of resolved settings; None for PLAINTEXT
    (a plain socket, as before)."""
    if str(cfg.get("security.protocol") or "PLAINTEXT").upper() == "PLAINTEXT":
        return None
    from .security import ClientSecurity
    return ClientSecurity.from_client_properties({k: v for k, v in cfg.items() if v is not None})


def _as_bool(value):
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def resolve(defaults: dict, settings: dict, kind: str) -> dict:
    """Merge user ``settings`` into a copy of ``defaults`` (dotted names)."""
    out = dict(defaults)
    for name, value in settings.items():
        dotted = name.replace("_", ".")
        if dotted in defaults:
            key = dotted
        elif name in defaults:
            key = name
        else:
            log.warning("%s: ignoring unknown setting %r", kind, name)
            continue
        default = defaults[key]
        if isinstance(default, bool) and not isinstance(value, bool):
            value = _as_bool(value)
        elif isinstance(default, int) and not isinstance(default, bool) and isinstance(value, str):
            value = int(value)
        out[key] = value
    return out
