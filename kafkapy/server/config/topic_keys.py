"""The topic keys table (Kafka's ``LogConfig``) and a topic's effective configs.

``TOPIC_CONFIGS``: each topic key names the broker key that supplies its
default (its "synonym"), so a topic without overrides behaves exactly as the
broker's ``log.*`` settings say.  ``validate_topic_configs`` checks
CreateTopics/AlterConfigs values (Kafka's ``LogConfig.validate``);
``topic_config_values`` layers a topic's overrides over the broker's
defaults, and ``log_config_for`` turns them into the storage layer's
``LogConfig``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from kafkapy.server.config.broker_config import BrokerConfig
from kafkapy.server.config.broker_keys import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    DEFAULT_MESSAGE_MAX_BYTES,
    MIN_SEGMENT_BYTES,
    TIMESTAMP_TYPES,
)
from kafkapy.server.config.types import (
    BOOLEAN,
    DOUBLE,
    INT,
    LIST,
    LONG,
    LONG_MAX,
    STRING,
    ConfigException,
    GzipLevel,
    InvalidConfigError,
    Range,
    TopicConfigKey,
    ValidList,
    ValidString,
    _at_least,
    _metadata_version,
)

# ---------------------------------------------------------------------------
# Topic-level configs
# ---------------------------------------------------------------------------


def _throttled_replicas(name: str, value) -> None:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker,...``."""
    from kafkapy.replication.quota import parse_throttled_replicas

    try:
        parse_throttled_replicas(",".join(value or ()), -1)
    except ValueError as exc:
        raise ConfigException(name, ",".join(value or ()), str(exc)) from None


def _t(name, type_, default, validator, synonym, doc) -> TopicConfigKey:
    return TopicConfigKey(name, type_, default, validator, synonym, doc)


_TOPIC_KEYS = [
    _t("cleanup.policy", LIST, ["delete"], ValidList(*CLEANUP_POLICIES), "log.cleanup.policy",
       "delete and/or compact."),
    _t("compression.type", STRING, "producer", ValidString(*COMPRESSION_TYPES), "compression.type",
       "Final compression of stored batches; producer keeps the producer's codec."),
    _t("delete.retention.ms", LONG, 86400000, _at_least(0), "log.cleaner.delete.retention.ms",
       "How long tombstones are kept in a compacted topic."),
    _t("file.delete.delay.ms", LONG, 60000, _at_least(0), "log.segment.delete.delay.ms",
       "Delay before a deleted segment's files are removed."),
    _t("flush.messages", LONG, LONG_MAX, _at_least(1), "log.flush.interval.messages",
       "Records appended before the log is fsynced; 1 fsyncs every append."),
    _t("flush.ms", LONG, LONG_MAX, _at_least(0), "log.flush.interval.ms",
       "Most time a record may stay unflushed."),
    _t("index.interval.bytes", INT, 4096, _at_least(0), "log.index.interval.bytes",
       "Bytes appended between two offset index entries."),
    _t("max.message.bytes", INT, DEFAULT_MESSAGE_MAX_BYTES, _at_least(0), "message.max.bytes",
       "Largest record batch accepted."),
    _t("message.timestamp.type", STRING, "CreateTime", ValidString(*TIMESTAMP_TYPES),
       "log.message.timestamp.type", "CreateTime or LogAppendTime."),
    _t("message.timestamp.difference.max.ms", LONG, LONG_MAX, _at_least(0),
       "log.message.timestamp.difference.max.ms",
       "Largest allowed gap between a CreateTime timestamp and the broker's clock."),
    _t("min.compaction.lag.ms", LONG, 0, _at_least(0), "log.cleaner.min.compaction.lag.ms",
       "Minimum age of a record before it may be compacted."),
    _t("max.compaction.lag.ms", LONG, LONG_MAX, _at_least(1), "log.cleaner.max.compaction.lag.ms",
       "Maximum age before a record must be eligible for compaction."),
    _t("min.cleanable.dirty.ratio", DOUBLE, 0.5, Range.between(0.0, 1.0), "log.cleaner.min.cleanable.ratio",
       "Dirty ratio above which the log becomes eligible for cleaning."),
    _t("min.insync.replicas", INT, 1, _at_least(1), "min.insync.replicas",
       "In-sync replicas required for acks=all."),
    _t("preallocate", BOOLEAN, False, None, "log.preallocate",
       "Preallocate segment files on roll."),
    _t("retention.bytes", LONG, -1, None, "log.retention.bytes",
       "Size limit of the partition; -1: none."),
    _t("retention.ms", LONG, 604800000, _at_least(-1), "log.retention.ms",
       "Time limit of a segment's records; -1: none."),
    _t("segment.bytes", INT, 1073741824, _at_least(MIN_SEGMENT_BYTES), "log.segment.bytes",
       "Segment size at which the log rolls."),
    _t("segment.index.bytes", INT, 10485760, _at_least(4), "log.index.size.max.bytes",
       "Size of each segment's offset and time index."),
    _t("segment.jitter.ms", LONG, 0, _at_least(0), "log.roll.jitter.ms",
       "Random jitter subtracted from segment.ms."),
    _t("segment.ms", LONG, 604800000, _at_least(1), "log.roll.ms",
       "Segment age at which the log rolls."),
    _t("unclean.leader.election.enable", BOOLEAN, False, None, "unclean.leader.election.enable",
       "Allow an out-of-sync replica to become leader (accepted, not enforced)."),
    _t("message.downconversion.enable", BOOLEAN, True, None, "log.message.downconversion.enable",
       "Allow down-conversion to message format v0/v1 for Fetch v0-v3; false: UNSUPPORTED_VERSION."),
    _t("leader.replication.throttled.replicas", LIST, [], _throttled_replicas, None,
       "Replicas (partition:broker or *) whose leader-side replication is throttled."),
    _t("follower.replication.throttled.replicas", LIST, [], _throttled_replicas, None,
       "Replicas (partition:broker or *) whose follower-side replication is throttled."),
    # Kafka 3.9's other topic keys (KIP-390, KIP-937, KIP-405/950, the deprecated format version).
    _t("compression.gzip.level", INT, -1, GzipLevel(), "compression.gzip.level",
       "Level of gzip when compression.type recompresses to gzip; -1: zlib's default (6)."),
    _t("compression.lz4.level", INT, 9, Range.between(1, 17), "compression.lz4.level",
       "Level of lz4 when compression.type recompresses to lz4."),
    _t("compression.zstd.level", INT, 3, Range.between(-131072, 22), "compression.zstd.level",
       "Level of zstd when compression.type recompresses to zstd."),
    _t("message.timestamp.before.max.ms", LONG, LONG_MAX, _at_least(0), "log.message.timestamp.before.max.ms",
       "How far a CreateTime timestamp may lie before the broker's clock; unset: difference.max.ms."),
    _t("message.timestamp.after.max.ms", LONG, LONG_MAX, _at_least(0), "log.message.timestamp.after.max.ms",
       "How far a CreateTime timestamp may lie after the broker's clock; unset: difference.max.ms."),
    _t("message.format.version", STRING, "3.0-IV1", _metadata_version, "log.message.format.version",
       "Deprecated since Kafka 3.0: ignored (accepted, not in effect)."),
    _t("remote.storage.enable", BOOLEAN, False, None, None,
       "Tiered storage for this topic; true is refused: the broker has no remote log storage."),
    _t("local.retention.ms", LONG, -2, _at_least(-2), "log.local.retention.ms",
       "Tiered storage's local retention time; -2: retention.ms (accepted, not in effect)."),
    _t("local.retention.bytes", LONG, -2, _at_least(-2), "log.local.retention.bytes",
       "Tiered storage's local retention size; -2: retention.bytes (accepted, not in effect)."),
    _t("remote.log.copy.disable", BOOLEAN, False, None, None,
       "Tiered storage: stop copying to remote storage; true is refused in ZooKeeper mode."),
    _t("remote.log.delete.on.disable", BOOLEAN, False, None, None,
       "Tiered storage: delete remote data on disable; true is refused in ZooKeeper mode."),
]

TOPIC_CONFIGS: dict[str, TopicConfigKey] = {key.name: key for key in _TOPIC_KEYS}

# Broker keys whose topic default is a derived value rather than the key itself
# (e.g. segment.ms falls back through log.roll.ms to log.roll.hours).
_DERIVED_TOPIC_DEFAULTS = {
    "retention.ms": "log_retention_ms",
    "segment.ms": "log_roll_ms",
    "segment.jitter.ms": "log_roll_jitter_ms",
    "flush.ms": "log_flush_interval_ms",
}


def validate_topic_configs(configs: Mapping[str, Optional[str]]) -> dict[str, str]:
    """Check CreateTopics/AlterConfigs topic configs; returns the trimmed strings.

    Raises ``InvalidConfigError`` for a null value, an unknown key, or a value
    that does not parse or validate (Kafka's messages).
    """
    nulls = sorted(k for k, v in configs.items() if v is None)
    if nulls:
        raise InvalidConfigError(nulls[0], "Null value not supported for topic configs: " + ",".join(nulls))
    result: dict[str, str] = {}
    for name, raw in configs.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise InvalidConfigError(name, f"Unknown topic config name: {name}")
        try:
            key.parse(raw)
        except ConfigException as exc:
            raise InvalidConfigError(name, str(exc)) from None
        result[name] = raw.strip()
    parsed = {name: TOPIC_CONFIGS[name].parse(raw) for name, raw in result.items()}
    # Tiered storage (Kafka's LogConfig.validate in ZooKeeper mode): kafkapy
    # has no remote log storage, as a broker with remote.log.storage.system.enable=false.
    if parsed.get("remote.log.delete.on.disable") or parsed.get("remote.log.copy.disable"):
        raise InvalidConfigError("remote.log.copy.disable",
                                 "It is invalid to set `remote.log.delete.on.disable` or "
                                 "`remote.log.copy.disable` under Zookeeper's mode.")
    if parsed.get("remote.storage.enable"):
        raise InvalidConfigError("remote.storage.enable",
                                 "Tiered Storage functionality is disabled in the broker. "
                                 "Topic cannot be configured with remote log storage.")
    min_lag = parsed.get("min.compaction.lag.ms", 0)
    max_lag = parsed.get("max.compaction.lag.ms", LONG_MAX)
    if min_lag > max_lag:
        raise InvalidConfigError("min.compaction.lag.ms",
                                 f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                                 f"max.compaction.lag.ms ({max_lag})")
    return result


def topic_config_defaults(broker: BrokerConfig) -> dict[str, Any]:
    """Each topic key's value when the topic has no override (from its broker synonym)."""
    defaults: dict[str, Any] = {}
    for name, key in TOPIC_CONFIGS.items():
        if name in _DERIVED_TOPIC_DEFAULTS:
            defaults[name] = getattr(broker, _DERIVED_TOPIC_DEFAULTS[name])
        elif key.synonym is not None:
            defaults[name] = broker[key.synonym]
        else:
            defaults[name] = key.default
    return defaults


def topic_config_values(broker: BrokerConfig, topic_overrides: Mapping[str, str]) -> dict[str, Any]:
    """Effective typed topic configs: overrides over the broker's defaults.

    Overrides are parsed here too, so a stored override that no longer
    validates raises ``InvalidConfigError`` instead of being silently used.
    """
    values = topic_config_defaults(broker)
    for name, raw in topic_overrides.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise InvalidConfigError(name, f"Unknown topic config name: {name}")
        try:
            values[name] = key.parse(raw)
        except ConfigException as exc:
            raise InvalidConfigError(name, str(exc)) from None
    return values


def log_config_for(broker: BrokerConfig, topic_overrides: Mapping[str, str]):
    """Build the storage layer's ``LogConfig`` for one topic.

    Field names are the topic keys with dots replaced by underscores; fields
    the ``LogConfig`` dataclass does not declare are left out, so storage may
    add or drop fields without breaking this function.
    """
    from kafkapy.storage.config import LogConfig  # lazy: server sits above storage

    values = topic_config_values(broker, topic_overrides)
    fields = {f.name: f for f in dataclasses.fields(LogConfig)}
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        field = name.replace(".", "_")
        if field not in fields:
            continue
        if field == "cleanup_policy":
            value = _cleanup_policy_for(fields[field], value)
        kwargs[field] = value
    return LogConfig(**kwargs)


def _cleanup_policy_for(field: dataclasses.Field, policies: list[str]):
    # LogConfig may hold the policy as the comma-joined string or as a
    # sequence; follow whatever its default is.
    default = field.default
    if default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        default = field.default_factory()  # type: ignore[misc]
    if isinstance(default, str):
        return ",".join(policies)
    if isinstance(default, tuple):
        return tuple(policies)
    if isinstance(default, frozenset):
        return frozenset(policies)
    return list(policies)
