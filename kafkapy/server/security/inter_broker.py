"""The broker as a client of other brokers: its security on the inter-broker listener.

Kafka's brokers connect to each other (replica fetchers, the controller's
channel, the transaction coordinator's markers, controlled shutdown) over
the inter-broker listener with that listener's own settings, as a client:

* TLS (SSL, SASL_SSL): the listener's trust store verifies the other broker,
  its key store is the client certificate (mutual TLS when the other side
  requires one; the principal is then the certificate's, mapped by
  ``ssl.principal.mapping.rules``), ``ssl.endpoint.identification.algorithm``
  (https by default) checks the host name, ``ssl.enabled.protocols`` and
  ``ssl.cipher.suites`` bound the handshake.
* SASL (SASL_PLAINTEXT, SASL_SSL): ``sasl.mechanism.inter.broker.protocol``
  with the ``username`` and ``password`` of the listener's JAAS entry for that
  mechanism (``listener.name.<l>.<mech>.sasl.jaas.config``, else
  ``sasl.jaas.config``); for PLAIN the ``user_<name>`` options of the same
  entry are the server's users, the broker's own must be among them.

``client_security(config)`` is None for a PLAINTEXT inter-broker listener, so
those connections keep their plain path.
"""

from __future__ import annotations

from kafkapy.client.security import MECHANISMS, ClientSecurity
from kafkapy.server.config.types import ConfigException
from kafkapy.server.security import listener_value, ssl_context

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def inter_broker_protocol(config) -> str:
    name = config.inter_broker_listener_name
    return next(ep.security_protocol for ep in config.advertised_listeners if ep.listener_name == name)


def client_security(config) -> ClientSecurity | None:
    """What this broker speaks to the others' inter-broker listener (None:
    PLAINTEXT); ConfigException for a missing key store, trust store or login."""
    if not hasattr(config, "advertised_listeners"):
        return None  # a bare mapping of settings (unit tests of the fetcher)
    protocol = inter_broker_protocol(config)
    if protocol == "PLAINTEXT":
        return None
    listener = config.inter_broker_listener_name
    get = lambda key: listener_value(config, listener, key)  # noqa: E731
    ctx = ssl_context("client", get, f"listener {listener}: the inter-broker client") \
        if protocol.endswith("SSL") else None
    mechanism = username = password = None
    if protocol.startswith("SASL"):
        mechanism = config["sasl.mechanism.inter.broker.protocol"]
        username, password = _login(config, listener, mechanism)
    return ClientSecurity(protocol, ctx, mechanism, username, password)


def _login(config, listener: str, mechanism: str) -> tuple[str, str]:
    from kafkapy.server.security.sasl import _mechanism_jaas

    if mechanism not in MECHANISMS:
        raise ConfigException("sasl.mechanism.inter.broker.protocol", mechanism,
                              f"kafkapy's brokers authenticate to each other with {', '.join(MECHANISMS)}")
    for options in _mechanism_jaas(config, listener, mechanism, _LOGIN_MODULES[mechanism]):
        if "username" in options and "password" in options:
            return options["username"], options["password"]
    raise ConfigException(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config", "[hidden]",
                          f"listener {listener}: the inter-broker client needs username and password in the "
                          f"{_LOGIN_MODULES[mechanism]} entry")
