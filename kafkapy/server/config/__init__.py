"""Broker configuration (Kafka's ``ConfigDef`` / ``KafkaConfig`` / ``LogConfig``).

Being split into one module per job (issue 24); for now the whole of it lives
in ``broker_keys`` and this package re-exports its names.
"""

from kafkapy.server.config.broker_keys import *  # noqa: F401,F403
from kafkapy.server.config.broker_keys import (  # noqa: F401  (names outside broker_keys.__all__)
    BROKER_SYNONYMS,
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    CONFIG_TYPE_IDS,
    CONNECTION_LIMIT_CONFIGS,
    ConfigEntry,
    DEFAULT_BROKER_ENTITY,
    DEFAULT_MESSAGE_MAX_BYTES,
    DEFAULT_SECURITY_PROTOCOL_MAP,
    DYNAMIC_BROKER_CONFIGS,
    GROUP_ORDER,
    GzipLevel,
    INT_MAX,
    LISTENER_CONNECTION_LIMIT_CONFIGS,
    LONG_MAX,
    MIN_SEGMENT_BYTES,
    NOT_IN_EFFECT,
    NonDynamicConfigError,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    SOURCE_DYNAMIC_TOPIC,
    SOURCE_STATIC_BROKER,
    TIMESTAMP_TYPES,
    broker_config_entries,
    check_reconfiguration,
    cluster_default_entries,
    effective_broker_config,
    format_value,
    parse_typed,
    topic_config_defaults,
    topic_config_entries,
    validate_dynamic_broker_configs,
)
