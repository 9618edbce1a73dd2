"""kafkapy's client takes TLS/SASL settings in Java's and librdkafka's names."""

from __future__ import annotations

import logging

from kafkapy.client import config


def test_plaintext_is_no_security():
    assert config.security(config.resolve(config.PRODUCER, {}, "KafkaProducer")) is None


def test_librdkafka_and_java_names_resolve_to_one_client_security(caplog):
    caplog.set_level(logging.WARNING, logger="kafkapy.client")
    rdkafka = config.resolve(config.PRODUCER, {"security.protocol": "sasl_plaintext", "sasl.mechanisms": "plain",
                                               "sasl.username": "spark", "sasl.password": "s3cret"}, "KafkaProducer")
    java = config.resolve(config.ADMIN, {"security_protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                                         "sasl.jaas.config": 'x required username="spark" password="s3cret";'},
                          "KafkaAdminClient")
    assert not [r for r in caplog.records if "unknown setting" in r.getMessage()]
    a, b = config.security(rdkafka), config.security(java)
    assert (a.protocol, a.mechanism, a.username, a.password, a.tls) == ("SASL_PLAINTEXT", "PLAIN", "spark", "s3cret",
                                                                        False)
    assert (b.protocol, b.mechanism, b.username, b.password) == ("SASL_PLAINTEXT", "SCRAM-SHA-512", "spark", "s3cret")
    assert "s3cret" not in repr(a)
