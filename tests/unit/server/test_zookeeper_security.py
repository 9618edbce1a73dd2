"""kafkapy.server.security.zookeeper: Kafka's ways of securing the ZooKeeper
session read from the config, KAFKA_OPTS and the JAAS file (the system test
tests/system/test_zookeeper_security.py runs them against real servers)."""

from __future__ import annotations

import ssl

import pytest

from kafkapy.metadata.zk.client import ZkClient, default_acls
from kafkapy.server.config import BrokerConfig, ConfigException
from kafkapy.server.security.zookeeper import parse_jaas_file, sasl_options, system_properties, zk_security

CLIENT = """/* Kafka's docs' example, comments and all */
KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b"; };
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  username="kafka" // the broker's ZooKeeper user
  password="p//w;d";
};
"""


def _config(tmp_path, **props):
    return BrokerConfig.from_props({"log.dirs": str(tmp_path), "zookeeper.connect": "127.0.0.1:1/k", **props})


def _opts(path, *more):
    return {"KAFKA_OPTS": " ".join([f"-Xmx1g -Djava.security.auth.login.config='{path}'", *more])}


def test_jaas_file_sections_and_comments():
    sections = parse_jaas_file(CLIENT)
    assert set(sections) == {"KafkaServer", "Client"}
    assert sections["Client"] == [("org.apache.zookeeper.server.auth.DigestLoginModule", "required",
                                   {"username": "kafka", "password": "p//w;d"})]
    with pytest.raises(ValueError):
        parse_jaas_file("Client { x required; ")


def test_system_properties_from_kafka_opts():
    assert system_properties({"KAFKA_OPTS": '-Da=1 -Xmx1g "-Db=two words" -Dc'}) == {
        "a": "1", "b": "two words", "c": ""}
    assert system_properties({}) == {}


def test_client_section_gives_digest_md5(tmp_path):
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(CLIENT)
    assert sasl_options(_opts(jaas)) == {"mechanism": "DIGEST-MD5", "username": "kafka", "password": "p//w;d",
                                         "service": "zookeeper"}
    # Another section name (zookeeper.sasl.clientconfig), absent here: no SASL, as in Kafka.
    assert sasl_options(_opts(jaas, "-Dzookeeper.sasl.clientconfig=Other")) is None
    assert sasl_options({}) is None
    with pytest.raises(ConfigException, match="zookeeper.sasl.client is set to false"):
        sasl_options(_opts(jaas, "-Dzookeeper.sasl.client=false"))
    with pytest.raises(ConfigException, match="cannot be read"):
        sasl_options(_opts(tmp_path / "missing.conf"))
    krb = tmp_path / "krb.conf"
    krb.write_text("Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };")
    with pytest.raises(ConfigException, match="Kerberos"):
        sasl_options(_opts(krb))


def test_set_acl_needs_sasl_or_a_client_certificate(tmp_path):
    with pytest.raises(ConfigException, match="zookeeper.set.acl is true"):
        zk_security(_config(tmp_path, **{"zookeeper.set.acl": "true"}), environ={})
    with pytest.raises(ConfigException, match="zookeeper.set.acl is true"):  # TLS without a key store
        zk_security(_config(tmp_path, **{"zookeeper.set.acl": "true", "zookeeper.ssl.client.enable": "true"}),
                    environ={})
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(CLIENT)
    security = zk_security(_config(tmp_path, **{"zookeeper.set.acl": "true"}), environ=_opts(jaas))
    assert security.set_acl and security.sasl["username"] == "kafka" and security.tls is None
    assert zk_security(_config(tmp_path), environ={}).set_acl is False


def test_tls_keys(tmp_path):
    security = zk_security(_config(tmp_path, **{
        "zookeeper.ssl.client.enable": "true", "zookeeper.ssl.keystore.location": "/k/broker.pem",
        "zookeeper.ssl.keystore.password": "pw", "zookeeper.ssl.truststore.location": "/k/ca.pem",
        "zookeeper.set.acl": "true"}), environ={})
    tls = security.tls
    assert (tls.certfile, tls.keyfile, tls.keyfile_password, tls.ca) == ("/k/broker.pem", "/k/broker.pem", "pw",
                                                                          "/k/ca.pem")
    # Kafka's defaults: host names checked (HTTPS), TLSv1.2 only (zookeeper.ssl.protocol).
    assert tls.check_hostname and tls.options == ssl.OP_NO_TLSv1_3 and tls.ciphers is None
    tls = zk_security(_config(tmp_path, **{
        "zookeeper.ssl.client.enable": "true", "zookeeper.ssl.endpoint.identification.algorithm": "",
        "zookeeper.ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
        "zookeeper.ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256"}),
        environ={}).tls
    assert not tls.check_hostname and tls.options == 0 and tls.ciphers == "ECDHE-RSA-AES256-GCM-SHA384"
    for props in ({"zookeeper.ssl.keystore.type": "JKS"}, {"zookeeper.ssl.truststore.location": "/k/t.jks"},
                  {"zookeeper.ssl.protocol": "TLSv1.1"}):
        with pytest.raises(ConfigException):
            zk_security(_config(tmp_path, **{"zookeeper.ssl.client.enable": "true", **props}), environ={})
    assert zk_security(_config(tmp_path, **{"zookeeper.ssl.keystore.type": "JKS"}), environ={}).tls is None


def test_default_acls_as_kafka():
    def ids(path):
        return {(a.id.scheme, a.id.id, a.perms) for a in default_acls(True, path)}

    assert ids("/brokers/ids/1") == {("auth", "", 31), ("world", "anyone", 1)}
    assert ids("/config/users/alice") == {("auth", "", 31)}
    assert ids("/config/brokers") == {("auth", "", 31)}
    assert ids("/consumers") == {("world", "anyone", 31)}
    assert ids("/consumers/g") == {("auth", "", 31), ("world", "anyone", 1)}  # only the path itself is open
    assert {(a.id.scheme, a.perms) for a in default_acls(False, "/config/users")} == {("world", 31)}


def test_connection_attempts_bounded_as_the_java_client():
    """ClientCnxn's connectTimeout: the session timeout over the number of servers."""
    client = ZkClient("a:2181,b:2181,c:2181/k", session_timeout_ms=6000)
    kazoo = client._kazoo("a:2181,b:2181,c:2181/k")
    try:
        assert kazoo.handler.connect_timeout_s == 2.0
        assert type(kazoo).__name__ == "KazooClient"  # no zookeeper.set.acl: kazoo's own creates
    finally:
        kazoo.close()
