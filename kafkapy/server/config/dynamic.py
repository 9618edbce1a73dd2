"""Dynamic broker configs (Kafka's ``DynamicBrokerConfig``) and the
DescribeConfigs entries.

Which broker keys may change at run time (``DYNAMIC_BROKER_CONFIGS``) and how
a change is checked (``validate_dynamic_broker_configs``,
``check_reconfiguration``); the layering of per-broker and cluster-default
(``<default>``) dynamic values over the static file and the table's defaults
(``effective_broker_config``); and the DescribeConfigs view of a broker, the
cluster default and a topic, each value with its source and synonyms
(``broker_config_entries``, ``cluster_default_entries``,
``topic_config_entries``).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional

from kafkapy.server.config.broker_config import BrokerConfig  # noqa: F401  (annotations)
from kafkapy.server.config.broker_keys import BROKER_CONFIGS
from kafkapy.server.config.topic_keys import _TOPIC_KEYS, TOPIC_CONFIGS, topic_config_values
from kafkapy.server.config.types import (
    BOOLEAN,
    CLASS,
    DOUBLE,
    INT,
    LIST,
    LONG,
    PASSWORD,
    SHORT,
    STRING,
    ConfigException,
    InvalidConfigError,
    format_value,
)

# ---------------------------------------------------------------------------
# Dynamic broker configs and DescribeConfigs entries
# ---------------------------------------------------------------------------

# DescribeConfigs ConfigSource ids (Kafka's DescribeConfigsResponse.ConfigSource).
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# DescribeConfigs v3+ config_type ids (Kafka's DescribeConfigsResponse.ConfigType).
CONFIG_TYPE_IDS = {BOOLEAN: 1, STRING: 2, INT: 3, SHORT: 4, LONG: 5, DOUBLE: 6, LIST: 7,
                   CLASS: 8, PASSWORD: 9}

# The metadata store's entity name for the cluster-wide dynamic default
# (Kafka's ZooKeeper path /config/brokers/<default>).
DEFAULT_BROKER_ENTITY = "<default>"

# Broker keys that may change at run time: Kafka's DynamicLogConfig makes
# every broker synonym of a topic config reconfigurable (log.retention.ms but
# not log.retention.hours, message.max.bytes, compression.type, ...), and
# kafkapy applies exactly those: each process rebuilds its open logs'
# LogConfig when the metadata generation moves.  The connection limits
# (Kafka's DynamicConnectionQuota) are dynamic too: the acceptor reads them
# again when the generation moves.  Kafka's other dynamic keys
# (num.io.threads, num.network.threads, listeners, ...) size processes forked
# at start-up here, so they are refused like any read-only key.
CONNECTION_LIMIT_CONFIGS = frozenset({"max.connections", "max.connections.per.ip",
                                      "max.connections.per.ip.overrides", "max.connection.creation.rate"})
# Of those, the keys a listener may override (listener.name.<l>.<key>), at run time too.
LISTENER_CONNECTION_LIMIT_CONFIGS = ("max.connections", "max.connection.creation.rate")
DYNAMIC_BROKER_CONFIGS = CONNECTION_LIMIT_CONFIGS | frozenset(
    key.synonym for key in _TOPIC_KEYS if key.synonym is not None and key.synonym in BROKER_CONFIGS
    # Kafka keeps log.message.format.version read-only (DynamicLogConfig)
    and key.synonym != "log.message.format.version") | {
    # the replication throttles (kafkapy.replication.quota), read per request
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    # Kafka's LogCleaner.ReconfigurableConfigs: the log-cleaner process reads
    # them from the effective config each pass (log.cleaner.threads only
    # divides the dedupe buffer: NOT_IN_EFFECT)
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
    # KIP-890 (dynamic in Kafka too): Produce reads it from the effective config per transactional request
    "transaction.partition.verification.enable"}

# Broker keys whose value falls back through other keys (Kafka's
# DynamicBrokerConfig.brokerConfigSynonyms), most specific first.
BROKER_SYNONYMS = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.retention.minutes": ("log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}


class NonDynamicConfigError(Exception):
    """AlterConfigs on a broker key that cannot change at run time: INVALID_REQUEST (42)."""

    error_code = 42

    def __init__(self, names):
        self.names = sorted(names)
        self.message = "Cannot update these configs dynamically: Set(" + ", ".join(self.names) + ")"
        super().__init__(self.message)


@dataclasses.dataclass
class ConfigEntry:
    """One DescribeConfigs result entry; ``synonyms`` are ``(name, value, source)``."""

    name: str
    value: Optional[str]
    source: int
    read_only: bool
    is_sensitive: bool
    synonyms: list
    config_type: int
    documentation: Optional[str]


def validate_dynamic_broker_configs(configs: Mapping[str, Optional[str]]) -> dict[str, str]:
    """Check a dynamic broker config set; returns the trimmed strings.

    Unknown or read-only keys raise ``NonDynamicConfigError``; a null value or
    a value that does not parse raises ``InvalidConfigError``.
    """
    refused = [name for name in configs if name not in DYNAMIC_BROKER_CONFIGS and _listener_key(name) is None]
    if refused:
        raise NonDynamicConfigError(refused)
    result: dict[str, str] = {}
    for name, raw in configs.items():
        if raw is None:
            raise InvalidConfigError(name, f"Null value not supported for : {name}")
        try:
            BROKER_CONFIGS[_listener_key(name) or name].parse(raw)
        except ConfigException as exc:
            raise InvalidConfigError(name, str(exc)) from None
        if name == "max.connections.per.ip.overrides":
            _check_ip_overrides(name, raw)
        result[name] = raw.strip()
    return result


def _listener_key(name: str) -> Optional[str]:
    """The connection-limit key a ``listener.name.<l>.<key>`` name overrides, else None."""
    if name.startswith("listener.name."):
        for key in LISTENER_CONNECTION_LIMIT_CONFIGS:
            if name.endswith("." + key) and len(name) > len("listener.name.") + len(key) + 1:
                return key
    return None


def _check_ip_overrides(name: str, raw: str) -> None:
    """``host:count,...`` with whole counts (Kafka's DynamicConnectionQuota
    validation; host names are resolved when applied, not here)."""
    for item in raw.split(","):
        item = item.strip()
        host, sep, count = item.rpartition(":")
        if item and (not sep or not host or not count.strip().isdigit()):
            raise InvalidConfigError(name, f"Invalid entry in {name}: {item}")


def effective_broker_config(static: "BrokerConfig", cluster_dynamic: Mapping[str, str],
                            broker_dynamic: Mapping[str, str]) -> "BrokerConfig":
    """Kafka's precedence: per-broker dynamic > cluster-default dynamic > static file > default.

    Raises ``InvalidConfigError`` when the layered result does not validate
    (e.g. a derived check such as log.retention.ms = 0).
    """
    if not cluster_dynamic and not broker_dynamic:
        return static
    layered = dict(cluster_dynamic)
    layered.update(broker_dynamic)
    try:
        return static.with_overrides(layered)
    except ConfigException as exc:
        raise InvalidConfigError(getattr(exc, "name", None), str(exc)) from None


def check_reconfiguration(current: "BrokerConfig", new: "BrokerConfig") -> None:
    """The run-time bounds Kafka's reconfigurable components put on a change
    (``validateReconfiguration``), beyond each key's validator: the log
    cleaner's thread count, while the cleaner runs (log.cleaner.enable, read
    at start-up), may not drop below 1, below half or above double its
    current value.  Raises ``InvalidConfigError`` (INVALID_CONFIG)."""
    threads, now = new["log.cleaner.threads"], current["log.cleaner.threads"]
    if not current["log.cleaner.enable"] or threads == now:
        return
    if threads < 1:
        reason = "Log cleaner threads should be at least 1"
    elif threads < now // 2:
        reason = f"Log cleaner threads cannot be reduced to less than half the current value {now}"
    elif threads > now * 2:
        reason = f"Log cleaner threads cannot be increased to more than double the current value {now}"
    else:
        return
    raise InvalidConfigError("log.cleaner.threads", reason)


def _broker_layers(static: "BrokerConfig", cluster_dynamic, broker_dynamic):
    """``(source, {name: raw string})`` from most to least specific."""
    return ((SOURCE_DYNAMIC_BROKER, broker_dynamic), (SOURCE_DYNAMIC_DEFAULT_BROKER, cluster_dynamic),
            (SOURCE_STATIC_BROKER, {k: v for k, v in static.originals.items() if k in BROKER_CONFIGS}))


def _broker_synonyms(name: str, layers) -> list:
    out = []
    for synonym in BROKER_SYNONYMS.get(name, (name,)):
        key = BROKER_CONFIGS[synonym]
        for source, values in layers:
            if synonym in values:
                out.append((synonym, _formatted(key, values[synonym]), source))
        if key.has_default and key.default is not None:
            out.append((synonym, key.default_string(), SOURCE_DEFAULT))
    return out


def _formatted(key, raw: str) -> Optional[str]:
    try:
        return format_value(key.type, key.parse(raw))
    except ConfigException:
        return raw


def broker_config_entries(static: "BrokerConfig", cluster_dynamic: Mapping[str, str],
                          broker_dynamic: Mapping[str, str]) -> list[ConfigEntry]:
    """DescribeConfigs of a broker id: every broker key with its source and synonyms."""
    layers = _broker_layers(static, cluster_dynamic, broker_dynamic)
    entries = []
    for name in sorted(BROKER_CONFIGS):
        key = BROKER_CONFIGS[name]
        value = key.default_string() if key.has_default else None
        for _source, values in layers:
            if name in values:
                value = _formatted(key, values[name])
                break
        synonyms = _broker_synonyms(name, layers)
        source = synonyms[0][2] if synonyms else SOURCE_DEFAULT
        sensitive = key.type == PASSWORD
        entries.append(ConfigEntry(name, None if sensitive else value, source,
                                   name not in DYNAMIC_BROKER_CONFIGS, sensitive, synonyms,
                                   CONFIG_TYPE_IDS.get(key.type, 0), key.doc))
    return entries


def cluster_default_entries(cluster_dynamic: Mapping[str, str]) -> list[ConfigEntry]:
    """DescribeConfigs of broker "" (the cluster default): only its dynamic keys, as Kafka."""
    entries = []
    for name in sorted(cluster_dynamic):
        key = BROKER_CONFIGS.get(name)
        if key is None:
            continue
        value = _formatted(key, cluster_dynamic[name])
        entries.append(ConfigEntry(name, value, SOURCE_DYNAMIC_DEFAULT_BROKER, False, False,
                                   [(name, value, SOURCE_DYNAMIC_DEFAULT_BROKER)],
                                   CONFIG_TYPE_IDS.get(key.type, 0), key.doc))
    return entries


def topic_config_entries(effective: "BrokerConfig", static: "BrokerConfig",
                         cluster_dynamic: Mapping[str, str], broker_dynamic: Mapping[str, str],
                         overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """DescribeConfigs of a topic: each topic key, its override or broker-derived default.

    ``effective`` is the layered broker config (for derived defaults such as
    retention.ms from log.retention.hours); the layers give the sources.
    """
    values = topic_config_values(effective, overrides)
    layers = _broker_layers(static, cluster_dynamic, broker_dynamic)
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        key = TOPIC_CONFIGS[name]
        synonyms = []
        if name in overrides:
            synonyms.append((name, format_value(key.type, values[name]), SOURCE_DYNAMIC_TOPIC))
        if key.synonym is not None and key.synonym in BROKER_CONFIGS:
            synonyms.extend(_broker_synonyms(key.synonym, layers))
        source = synonyms[0][2] if synonyms else SOURCE_DEFAULT
        entries.append(ConfigEntry(name, format_value(key.type, values[name]), source, False,
                                   key.type == PASSWORD, synonyms, CONFIG_TYPE_IDS.get(key.type, 0),
                                   key.doc))
    return entries
