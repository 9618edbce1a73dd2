"""The inter-broker keys as Kafka 3.9 validates them, and the broker's client side
of its inter-broker listener (kafkapy.server.security.inter_broker, kafkapy.client.security)."""

from __future__ import annotations

import ssl
from types import SimpleNamespace

import pytest

from kafkapy.client.security import AuthenticationFailed, ClientSecurity, ScramClient, jaas_option
from kafkapy.server.config import BrokerConfig, ConfigException
from kafkapy.server.security.inter_broker import client_security
from kafkapy.server.security.sasl import ScramServer
from kafkapy.server.security.scram_store import make_credential

LISTENERS = {"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9094",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
             "zookeeper.connect": "127.0.0.1:2181/x"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
              'password="pa\\"ss" user_broker="pa\\"ss" user_alice="a";')


def _config(tmp_path, **props):
    return BrokerConfig.from_props({"log.dirs": str(tmp_path), **LISTENERS, **props})


def test_both_inter_broker_keys_are_refused_as_kafka_does(tmp_path):
    with pytest.raises(ConfigException, match="Only one of inter.broker.listener.name and "
                                              "security.inter.broker.protocol should be set"):
        _config(tmp_path, **{"inter.broker.listener.name": "SASL_SSL", "security.inter.broker.protocol": "SASL_SSL",
                             "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN"})


def test_security_inter_broker_protocol_names_the_listener(tmp_path):
    c = _config(tmp_path, **{"security.inter.broker.protocol": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
                             "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    assert c.inter_broker_listener_name == "SASL_PLAINTEXT"
    with pytest.raises(ConfigException, match="String must be one of"):
        _config(tmp_path, **{"security.inter.broker.protocol": "TLS"})
    with pytest.raises(ConfigException, match="must be a listener name defined in advertised.listeners"):
        _config(tmp_path, **{"security.inter.broker.protocol": "SSL"})
    # Neither set: the first listener, as before.
    assert _config(tmp_path).inter_broker_listener_name == "PLAINTEXT"


@pytest.mark.parametrize("mechanism, enabled, message", [
    ("SCRAM-SHA-256", "SCRAM-SHA-512", "must be included in sasl.enabled.mechanisms"),
    ("GSSAPI", "GSSAPI", "authenticate to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    ("OAUTHBEARER", "OAUTHBEARER", "authenticate to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
])
def test_unusable_inter_broker_mechanisms_are_refused(tmp_path, mechanism, enabled, message):
    with pytest.raises(ConfigException, match=message):
        _config(tmp_path, **{"inter.broker.listener.name": "SASL_SSL", "sasl.enabled.mechanisms": enabled,
                             "sasl.mechanism.inter.broker.protocol": mechanism})


def test_listener_mechanism_override_counts(tmp_path):
    c = _config(tmp_path, **{"inter.broker.listener.name": "SASL_PLAINTEXT",
                             "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
                             "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    assert c.inter_broker_listener_name == "SASL_PLAINTEXT"


def test_the_brokers_login_comes_from_the_listeners_jaas_entry(tmp_path):
    assert client_security(_config(tmp_path)) is None  # PLAINTEXT: the plain path
    c = _config(tmp_path, **{"inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
                             "sasl.mechanism.inter.broker.protocol": "PLAIN",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    s = client_security(c)
    assert (s.protocol, s.mechanism, s.username, s.password, s.tls) == ("SASL_PLAINTEXT", "PLAIN", "broker",
                                                                        'pa"ss', False)
    assert 'pa"ss' not in repr(s)
    no_login = PLAIN_JAAS.replace('username="broker" password="pa\\"ss" ', "")
    c = _config(tmp_path, **{"inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
                             "sasl.mechanism.inter.broker.protocol": "PLAIN",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": no_login})
    with pytest.raises(ConfigException, match="needs username and password") as err:
        client_security(c)
    assert 'pa"ss' not in str(err.value) and "user_alice" not in str(err.value)


def test_tls_client_context_follows_endpoint_identification(tmp_path):
    props = {"inter.broker.listener.name": "SASL_SSL", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
             "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
             "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                 'username="b" password="p";'}
    s = client_security(_config(tmp_path, **props))
    assert s.tls and s.ssl_context.check_hostname and s.ssl_context.verify_mode == ssl.CERT_REQUIRED
    s = client_security(_config(tmp_path, **props, **{"listener.name.sasl_ssl.ssl.endpoint.identification.algorithm":
                                                      ""}))
    assert not s.ssl_context.check_hostname
    with pytest.raises(ConfigException, match="cannot load its trust store"):
        client_security(_config(tmp_path, **props, **{"ssl.truststore.location": str(tmp_path / "missing.pem")}))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_and_server_agree(mechanism):
    credential = make_credential(mechanism, "secret")
    store = SimpleNamespace(get=lambda user, mech: credential if (user, mech) == ("broker", mechanism) else None)
    server = ScramServer(mechanism, store)
    client = ScramClient(mechanism, "broker", "secret")
    final = server.evaluate(client.client_final(server.evaluate(client.client_first())))
    client.verify_server_final(final)
    assert server.complete
    forged = ScramClient(mechanism, "broker", "secret")
    forged.client_final(ScramServer(mechanism, store).evaluate(forged.client_first()))
    with pytest.raises(AuthenticationFailed):
        forged.verify_server_final(final)  # another exchange's signature does not verify


def test_client_properties_and_jaas_options():
    assert jaas_option('x required username="a\\"b" password="c";', "username") == 'a"b'
    s = ClientSecurity.from_client_properties({"security.protocol": "sasl_plaintext", "sasl.mechanism": "PLAIN",
                                               "sasl.jaas.config": 'x required username="u" password="p";'})
    assert (s.protocol, s.mechanism, s.username, s.password) == ("SASL_PLAINTEXT", "PLAIN", "u", "p")
    with pytest.raises(ValueError):
        ClientSecurity.from_client_properties({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"})
