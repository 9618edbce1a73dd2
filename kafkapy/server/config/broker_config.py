"""``BrokerConfig``: one broker's parsed, validated settings (Kafka's
``KafkaConfig`` instance), built from ``server.properties`` and
``--override``s against the broker keys table, with the values Kafka derives
from several keys (``log.retention.ms`` from its minutes/hours synonyms, the
listeners, the inter-broker listener, ...).

Ownership: a ``BrokerConfig`` is built once by the supervisor before it forks
and is never mutated afterwards; children inherit it read-only.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from kafkapy.server.config.broker_keys import BROKER_CONFIGS
from kafkapy.server.config.listeners import Endpoint, _parse_listeners, _parse_security_protocol_map
from kafkapy.server.config.properties import load_properties
from kafkapy.server.config.types import ConfigException

log = logging.getLogger("kafkapy.config")

# ---------------------------------------------------------------------------
# BrokerConfig
# ---------------------------------------------------------------------------

_MS_PER_MINUTE = 60 * 1000
_MS_PER_HOUR = 60 * _MS_PER_MINUTE


class BrokerConfig:
    """Parsed, validated broker settings.

    ``cfg["log.segment.bytes"]`` gives a known key's typed value (None when
    unset and without default) or an unknown key's raw string.  Derived
    settings follow Kafka's ``KafkaConfig`` rules and are computed once.
    Immutable after construction (built by the supervisor before forking).
    """

    def __init__(self, values: Mapping[str, Any], originals: Mapping[str, str],
                 unknown: Mapping[str, str]):
        self._values = dict(values)
        self.originals: dict[str, str] = dict(originals)  # as given, before parsing
        self.unknown: dict[str, str] = dict(unknown)      # keys not in BROKER_CONFIGS
        self._derive()

    # -- construction -------------------------------------------------------

    @classmethod
    def from_props(cls, props: Mapping[str, Any], warn_unknown: bool = True) -> "BrokerConfig":
        values: dict[str, Any] = {}
        for name, key in BROKER_CONFIGS.items():
            if name in props:
                values[name] = key.parse(props[name])
            elif not key.has_default:
                raise ConfigException(f'Missing required configuration "{name}" which has no default value.')
            else:
                values[name] = key.default
        unknown = {k: v for k, v in props.items() if k not in BROKER_CONFIGS}
        # listener.name.<listener>.<key>: per-listener overrides (read by
        # kafkapy.server.security.listener_config), known by their prefix.
        reported = [k for k in unknown if warn_unknown and not k.startswith("listener.name.")]
        for name in sorted(reported):
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
        return cls(values, {k: v for k, v in props.items()}, unknown)

    @classmethod
    def from_file(cls, path: str, overrides: Optional[Mapping[str, str]] = None) -> "BrokerConfig":
        props = load_properties(path)
        props.update(overrides or {})
        return cls.from_props(props)

    def with_overrides(self, overrides: Mapping[str, Any]) -> "BrokerConfig":
        props = dict(self.originals)
        props.update(overrides)
        # The file's unknown keys were reported once at start-up; dynamic
        # configs rebuild the config in every process on each change.
        return BrokerConfig.from_props(props, warn_unknown=False)

    # -- access ---------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        if name in self.unknown:
            return self.unknown[name]
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return name in self._values or name in self.unknown

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def is_set(self, name: str) -> bool:
        """True when the key was given explicitly (file or override), not defaulted."""
        return name in self.originals

    def values(self) -> dict[str, Any]:
        """Typed values of every known key."""
        return dict(self._values)

    def __repr__(self) -> str:
        return f"BrokerConfig(broker_id={self.broker_id}, listeners={self.listeners}, log_dirs={self.log_dirs})"

    # -- derived values (Kafka's KafkaConfig rules) ---------------------------

    def _derive(self) -> None:
        v = self._values
        # log.retention.ms > log.retention.minutes > log.retention.hours; any negative = -1.
        if v["log.retention.ms"] is not None:
            retention_ms, retention_key = v["log.retention.ms"], "log.retention.ms"
        elif v["log.retention.minutes"] is not None:
            retention_ms, retention_key = v["log.retention.minutes"] * _MS_PER_MINUTE, "log.retention.minutes"
        else:
            retention_ms, retention_key = v["log.retention.hours"] * _MS_PER_HOUR, "log.retention.hours"
        if retention_ms < 0:
            retention_ms = -1
        if retention_ms == 0:
            raise ConfigException(retention_key, v[retention_key],
                                  "log.retention.ms must be unlimited (-1) or, greater than or equal to 1")
        self.log_retention_ms: int = retention_ms

        if v["log.roll.ms"] is not None:
            self.log_roll_ms: int = v["log.roll.ms"]
        else:
            self.log_roll_ms = v["log.roll.hours"] * _MS_PER_HOUR
        if self.log_roll_ms < 1:
            raise ConfigException("log.roll.ms", self.log_roll_ms, "log.roll.ms must be greater than or equal to 1")

        if v["log.roll.jitter.ms"] is not None:
            self.log_roll_jitter_ms: int = v["log.roll.jitter.ms"]
        else:
            self.log_roll_jitter_ms = v["log.roll.jitter.hours"] * _MS_PER_HOUR
        if self.log_roll_jitter_ms < 0:
            raise ConfigException("log.roll.jitter.ms", self.log_roll_jitter_ms,
                                  "log.roll.jitter.ms must be greater than or equal to 0")

        if v["log.flush.interval.ms"] is not None:
            self.log_flush_interval_ms: int = v["log.flush.interval.ms"]
        else:
            self.log_flush_interval_ms = v["log.flush.scheduler.interval.ms"]

        dirs = v["log.dirs"] if v["log.dirs"] is not None else v["log.dir"]
        dirs = [d for d in (dirs or []) if d]
        if not dirs:
            raise ConfigException("log.dirs", self.originals.get("log.dirs", self.originals.get("log.dir")),
                                  "At least one log directory must be defined via log.dirs or log.dir.")
        if len(set(dirs)) != len(dirs):
            raise ConfigException("log.dirs", ",".join(dirs), "Duplicate log directory")
        self.log_dirs: list[str] = dirs

        broker_id = v["broker.id"]
        if not -1 <= broker_id <= v["reserved.broker.max.id"]:
            raise ConfigException("broker.id", broker_id,
                                  "broker.id must be greater than or equal to -1 and not greater than "
                                  "reserved.broker.max.id")
        self.broker_id: int = broker_id

        protocol_map = _parse_security_protocol_map(v["listener.security.protocol.map"])
        self.listeners: list[Endpoint] = _parse_listeners("listeners", v["listeners"], protocol_map, True)
        if not self.listeners:
            raise ConfigException("listeners", v["listeners"], "At least one listener is required")
        if v["advertised.listeners"] is not None:
            advertised = _parse_listeners("advertised.listeners", v["advertised.listeners"], protocol_map, False)
            for ep in advertised:
                if ep.host == "0.0.0.0":
                    raise ConfigException("advertised.listeners", v["advertised.listeners"],
                                          "advertised.listeners cannot use the nonroutable meta-address "
                                          "0.0.0.0. Use a routable IP address.")
            self.advertised_listeners: list[Endpoint] = advertised
        else:
            self.advertised_listeners = list(self.listeners)
        # The listener other brokers reach this one on (Kafka's interBrokerListenerName).
        names = [ep.listener_name for ep in self.advertised_listeners]
        if v["inter.broker.listener.name"] and "security.inter.broker.protocol" in self.originals:
            raise ConfigException("security.inter.broker.protocol", v["security.inter.broker.protocol"],
                                  "Only one of inter.broker.listener.name and security.inter.broker.protocol "
                                  "should be set.")
        if "security.inter.broker.protocol" in self.originals:
            self.inter_broker_listener_name: str = v["security.inter.broker.protocol"]
        else:
            self.inter_broker_listener_name = v["inter.broker.listener.name"] or names[0]
        if self.inter_broker_listener_name not in names:
            raise ConfigException("inter.broker.listener.name", self.inter_broker_listener_name,
                                  "inter.broker.listener.name must be a listener name defined in "
                                  "advertised.listeners. The valid options based on currently configured "
                                  f"listeners are {','.join(names)}")
        inter_broker = next(ep for ep in self.advertised_listeners
                            if ep.listener_name == self.inter_broker_listener_name)
        if inter_broker.security_protocol.startswith("SASL") and v["zookeeper.connect"]:
            # Kafka's check; the broker's own login is read from the listener's
            # JAAS entry (kafkapy.server.security.inter_broker). Only in cluster
            # mode: a standalone broker opens no inter-broker connection, and a
            # SASL-only standalone broker must not need GSSAPI enabled.
            mechanism = v["sasl.mechanism.inter.broker.protocol"]
            override = self.originals.get(f"listener.name.{inter_broker.listener_name.lower()}"
                                          ".sasl.enabled.mechanisms")
            enabled = ([m.strip() for m in override.split(",")] if override is not None
                       else v["sasl.enabled.mechanisms"])
            if mechanism not in enabled:
                raise ConfigException("sasl.mechanism.inter.broker.protocol", mechanism,
                                      "sasl.mechanism.inter.broker.protocol must be included in "
                                      "sasl.enabled.mechanisms when SASL is used for inter-broker communication")
            if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                raise ConfigException("sasl.mechanism.inter.broker.protocol", mechanism,
                                      "kafkapy's brokers authenticate to each other with PLAIN, SCRAM-SHA-256 "
                                      "or SCRAM-SHA-512")

        if v["zookeeper.connection.timeout.ms"] is not None:
            self.zookeeper_connection_timeout_ms: int = v["zookeeper.connection.timeout.ms"]
        else:
            self.zookeeper_connection_timeout_ms = v["zookeeper.session.timeout.ms"]

    # Plain conveniences for values handlers read often.
    @property
    def message_max_bytes(self) -> int:
        return self._values["message.max.bytes"]

    @property
    def num_network_threads(self) -> int:
        return self._values["num.network.threads"]

    @property
    def num_io_threads(self) -> int:
        return self._values["num.io.threads"]
