"""Listener security: TLS (``ssl_context``, by the one ``SSLContext`` builder,
``kafkapy.client.ssl_factory``), SASL (``sasl``, ``scram_store``,
``oauthbearer``, their failure in ``errors``) and principals (``principal``),
configured per listener as Kafka does.

``ListenerSecurity`` is what a processor needs to know about one listener:
its security protocol, its ``ssl.SSLContext`` (SSL, SASL_SSL), and the SASL
mechanisms it serves with their credentials (SASL_PLAINTEXT, SASL_SSL).
Built once per process from the broker config (the supervisor builds them
before forking only to fail start-up on a bad key or certificate; each
processor builds its own). Pure: no sockets here, the processor drives them.
"""

from __future__ import annotations

from typing import Any

from kafkapy.client import ssl_factory
from kafkapy.server.config.broker_keys import BROKER_CONFIGS
from kafkapy.server.config.types import ConfigException, secret
from kafkapy.server.security import principal, sasl

ANONYMOUS = "User:ANONYMOUS"


def listener_value(config, listener_name: str, key: str) -> Any:
    """``key`` for one listener: ``listener.name.<listener>.<key>`` when set,
    else the broker-wide value (Kafka's valuesWithPrefixOverride with
    ListenerName.configPrefix, the listener name in lower case)."""
    prefixed = f"listener.name.{listener_name.lower()}.{key}"
    raw = config.originals.get(prefixed)
    if raw is None:
        return config[key]
    return BROKER_CONFIGS[key].parse(raw)


def ssl_context(mode: str, get, where: str):
    """An ``SSLContext`` in ``mode`` (``"server"``: a listener's; ``"client"``:
    the inter-broker client's) from ``get(key)``, a listener's values
    (``listener_value``), through the one builder (``kafkapy.client.ssl_factory``); a
    bad setting is a ConfigException with the same key, value and reason."""
    def value(key: str):
        # The builder also asks for librdkafka's names of the stores (a
        # client's); they are no broker settings, so not set here.
        return secret(get(key)) if key in BROKER_CONFIGS else None

    try:
        return ssl_factory.create_context(mode, value, where)
    except ssl_factory.SslConfigError as exc:
        raise ConfigException(exc.key, exc.value, exc.reason) from None


class ListenerSecurity:
    """One listener's protocol, TLS context and SASL servers (immutable)."""

    __slots__ = ("name", "protocol", "ssl_context", "principal_mapper", "sasl", "client_auth")

    def __init__(self, config, endpoint, log_dir: str, table=None):
        self.name = endpoint.listener_name
        self.protocol = endpoint.security_protocol
        self.ssl_context = None
        self.principal_mapper = None
        self.sasl = None
        self.client_auth = "none"
        get = lambda key: listener_value(config, self.name, key)  # noqa: E731
        if self.protocol in ("SSL", "SASL_SSL"):
            self.ssl_context = ssl_context("server", get, f"listener {self.name}")
            self.client_auth = get("ssl.client.auth")
            self.principal_mapper = principal.SslPrincipalMapper(get("ssl.principal.mapping.rules"))
        if self.protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            self.sasl = sasl.SaslConfig.from_config(config, self.name, get, log_dir, table)

    @property
    def tls(self) -> bool:
        return self.ssl_context is not None


    @classmethod
    def plaintext(cls, name: str = "PLAINTEXT") -> "ListenerSecurity":
        """A PLAINTEXT listener's (no TLS, no SASL)."""
        self = cls.__new__(cls)
        self.name, self.protocol, self.client_auth = name, "PLAINTEXT", "none"
        self.ssl_context = self.principal_mapper = self.sasl = None
        return self


def listener_securities(config, table=None) -> list[ListenerSecurity]:
    """One per listener, in ``listeners`` order (the acceptor's listener
    index); one PLAINTEXT listener for a bare mapping of settings (tests
    driving a processor directly). ``table``: the broker's shared table, so
    SCRAM credentials are read from its metadata (a processor's); without
    it (the supervisor's start-up check) from the offline file."""
    if not hasattr(config, "listeners"):
        return [ListenerSecurity.plaintext()]
    return [ListenerSecurity(config, ep, config.log_dirs[0], table) for ep in config.listeners]


__all__ = ["ANONYMOUS", "ConfigException", "ListenerSecurity", "listener_securities",
           "listener_value", "secret", "ssl_context"]
