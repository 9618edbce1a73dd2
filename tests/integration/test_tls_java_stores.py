"""A TLS listener configured as a Kafka broker is: Java's key and trust stores
(keytool's JKS, types left at Kafka's default) with their passwords, client
certificates required. A real client (confluent-kafka) produces and reads
back over it, and a broker given a wrong store password does not start: its
log names the key, never the password."""

from __future__ import annotations

import pytest

from support.broker import BrokerStartError
from support.certs import make_certs, named_listeners
from support.clients import module_broker

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402

PASSWORD = "store-secret"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    made = make_certs(tmp_path_factory.mktemp("java-store-certs"))
    made.server_java_stores(PASSWORD)
    return made


def _overrides(certs, keystore_password: str = PASSWORD) -> tuple[dict, dict]:
    stores = certs.server_java_stores(PASSWORD)
    port, ports, overrides = named_listeners(["SSL"], {"SSL": "SSL"})
    overrides.update({"num.partitions": 1, "num.network.threads": 1, "num.io.threads": 1,
                      # Kafka's defaults left alone: ssl.keystore.type and ssl.truststore.type are JKS.
                      "ssl.keystore.location": stores.keystore_jks, "ssl.keystore.password": keystore_password,
                      "ssl.key.password": PASSWORD, "ssl.truststore.location": stores.truststore_jks,
                      "ssl.truststore.password": PASSWORD, "ssl.client.auth": "required"})
    return overrides, {"port": port, "ssl": ports["SSL"]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory, certs):
    overrides, ports = _overrides(certs)
    with module_broker(tmp_path_factory, overrides, name="java-stores-broker", port=ports["port"]) as b:
        b.ssl_port = ports["ssl"]
        yield b


def test_clients_produce_and_read_back_over_a_listener_with_jks_stores(broker, certs):
    cert, key = certs.client("writer", "/CN=writer")
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.ssl_port}", "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca_cert), "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key)}
    producer = confluent_kafka.Producer({**conf, "message.timeout.ms": 20000})
    errors = []
    for i in range(20):
        producer.produce("jks", b"v%d" % i, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    assert errors == [None] * 20
    consumer = confluent_kafka.Consumer({**conf, "group.id": "jks-readers", "auto.offset.reset": "earliest"})
    consumer.subscribe(["jks"])
    got = []
    try:
        for _ in range(60):  # bounded: at most 60 polls of 0.5 s
            got += [m.value() for m in consumer.consume(20, 0.5) if m.error() is None]
            if len(got) >= 20:
                break
    finally:
        consumer.close()
    assert got == [b"v%d" % i for i in range(20)]
    # Without a client certificate the handshake is refused (ssl.client.auth=required).
    anonymous = AdminClient({k: v for k, v in conf.items()
                             if k not in ("ssl.certificate.location", "ssl.key.location")})
    with pytest.raises(confluent_kafka.KafkaException):
        anonymous.list_topics(timeout=5)


def test_a_wrong_key_store_password_stops_the_start_naming_the_key(broker_factory, certs):
    overrides, ports = _overrides(certs, keystore_password="hunter2")
    b = broker_factory(overrides, port=ports["port"], start=False, start_timeout_s=30)
    with pytest.raises(BrokerStartError):
        b.start()
    text = b.log_text()
    assert "ssl.keystore.location" in text and "integrity check failed" in text, b.log_tail()
    assert "hunter2" not in text and PASSWORD not in text
