"""Broker configuration, one module per job in the seams Kafka cut:

* ``types`` — Kafka's ``ConfigDef`` machinery: value types, importance,
  ``NO_DEFAULT``, ``ConfigException`` (and ``InvalidConfigError``),
  ``Password``, the validators, ``parse_typed`` / ``format_value``, and the
  ``ConfigKey`` / ``TopicConfigKey`` records the tables are made of.
* ``broker_keys`` — the broker keys table (Kafka's ``KafkaConfig`` ConfigDef):
  ``BROKER_CONFIGS``, the ``server.properties`` sections (``GROUP_ORDER``),
  ``NOT_IN_EFFECT``.
* ``listeners`` — ``Endpoint`` and the parsing of ``listeners`` /
  ``advertised.listeners`` (Kafka's ``EndPoint``).
* ``properties`` — Java ``.properties`` reading (``load_properties``,
  ``parse_properties``), ``--override`` arguments, and ``render_properties``.
* ``broker_config`` — ``BrokerConfig``, one broker's parsed settings and the
  values Kafka's ``KafkaConfig`` derives from them.
* ``topic_keys`` — the topic keys table (Kafka's ``LogConfig``):
  ``TOPIC_CONFIGS``, ``validate_topic_configs``, ``topic_config_values``,
  ``log_config_for``.
* ``dynamic`` — dynamic broker configs (Kafka's ``DynamicBrokerConfig``):
  which keys may change at run time, the per-broker / cluster-default
  layering, and the DescribeConfigs entries.

Each module imports only modules listed before it, so there is no cycle (an
import-linter contract in pyproject.toml holds it).  The package
re-exports the public names, so ``from kafkapy.server.config import
BrokerConfig`` keeps working; kafkapy's own modules import from the module
that defines a name.
"""

from kafkapy.server.config.broker_config import BrokerConfig
from kafkapy.server.config.broker_keys import (
    BROKER_CONFIGS,
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    DEFAULT_MESSAGE_MAX_BYTES,
    DEFAULT_SECURITY_PROTOCOL_MAP,
    GROUP_ORDER,
    MIN_SEGMENT_BYTES,
    NOT_IN_EFFECT,
    TIMESTAMP_TYPES,
)
from kafkapy.server.config.dynamic import (
    BROKER_SYNONYMS,
    CONFIG_TYPE_IDS,
    CONNECTION_LIMIT_CONFIGS,
    DEFAULT_BROKER_ENTITY,
    DYNAMIC_BROKER_CONFIGS,
    LISTENER_CONNECTION_LIMIT_CONFIGS,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    SOURCE_DYNAMIC_TOPIC,
    SOURCE_STATIC_BROKER,
    ConfigEntry,
    NonDynamicConfigError,
    broker_config_entries,
    check_reconfiguration,
    cluster_default_entries,
    effective_broker_config,
    topic_config_entries,
    validate_dynamic_broker_configs,
)
from kafkapy.server.config.listeners import Endpoint
from kafkapy.server.config.properties import (
    load_properties,
    parse_overrides,
    parse_properties,
    render_properties,
)
from kafkapy.server.config.topic_keys import (
    TOPIC_CONFIGS,
    log_config_for,
    topic_config_defaults,
    topic_config_values,
    validate_topic_configs,
)
from kafkapy.server.config.types import (
    BOOLEAN,
    CLASS,
    DOUBLE,
    HIGH,
    INT,
    INT_MAX,
    LIST,
    LONG,
    LONG_MAX,
    LOW,
    MEDIUM,
    NO_DEFAULT,
    PASSWORD,
    SHORT,
    STRING,
    ConfigException,
    ConfigKey,
    GzipLevel,
    InvalidConfigError,
    Password,
    Range,
    TopicConfigKey,
    ValidList,
    ValidString,
    format_value,
    parse_typed,
)

__all__ = [
    # types
    "BOOLEAN", "INT", "SHORT", "LONG", "DOUBLE", "STRING", "LIST", "PASSWORD", "CLASS",
    "HIGH", "MEDIUM", "LOW", "NO_DEFAULT", "INT_MAX", "LONG_MAX",
    "ConfigException", "InvalidConfigError", "Password", "Range", "ValidString", "ValidList", "GzipLevel",
    "parse_typed", "format_value", "ConfigKey", "TopicConfigKey",
    # broker_keys
    "BROKER_CONFIGS", "GROUP_ORDER", "NOT_IN_EFFECT", "COMPRESSION_TYPES", "TIMESTAMP_TYPES",
    "CLEANUP_POLICIES", "DEFAULT_SECURITY_PROTOCOL_MAP", "MIN_SEGMENT_BYTES", "DEFAULT_MESSAGE_MAX_BYTES",
    # listeners, properties, broker_config
    "Endpoint", "load_properties", "parse_properties", "parse_overrides", "render_properties",
    "BrokerConfig",
    # topic_keys
    "TOPIC_CONFIGS", "validate_topic_configs", "topic_config_defaults", "topic_config_values",
    "log_config_for",
    # dynamic
    "SOURCE_DYNAMIC_TOPIC", "SOURCE_DYNAMIC_BROKER", "SOURCE_DYNAMIC_DEFAULT_BROKER",
    "SOURCE_STATIC_BROKER", "SOURCE_DEFAULT", "CONFIG_TYPE_IDS", "DEFAULT_BROKER_ENTITY",
    "CONNECTION_LIMIT_CONFIGS", "LISTENER_CONNECTION_LIMIT_CONFIGS", "DYNAMIC_BROKER_CONFIGS",
    "BROKER_SYNONYMS", "NonDynamicConfigError", "ConfigEntry", "validate_dynamic_broker_configs",
    "effective_broker_config", "check_reconfiguration", "broker_config_entries",
    "cluster_default_entries", "topic_config_entries",
]
