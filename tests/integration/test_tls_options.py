"""TLS listener options of one real broker (issue 13): the principal taken
from the client certificate through ``ssl.principal.mapping.rules`` and
used by the authorizer, ``ssl.client.auth=requested``,
``ssl.enabled.protocols`` and ``ssl.cipher.suites`` in Kafka's (IANA)
spelling, TLS 1.3 suites included.

One broker with Kafka's ZooKeeper authorizer name and ``super.users=User:admin``;
listeners: PLAINTEXT (the harness's readiness probe), MTLS (client auth
required), REQ (client auth requested), TLS13 (``ssl.enabled.protocols=
TLSv1.3``), CIPHER (TLS 1.2 with one suite), SUITE13 (one TLS 1.3 suite)
and SUITES (one TLS 1.3 and one TLS 1.2 suite). The mapping rule turns
``CN=Admin,O=kafkapy`` into ``admin``. Certificates are made by the
``openssl`` CLI (tests/support/certs.py). Clients: confluent-kafka and
Python's ``ssl`` module for the handshake checks.
"""

from __future__ import annotations

import socket
import ssl
import struct

import pytest

from support.clients import module_broker
from support.certs import make_certs, named_listeners
from support.rawclient import RawClient

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType, ResourceType,
)

NAMES = ("MTLS", "REQ", "TLS13", "CIPHER", "SUITE13", "SUITES")
RULES = "RULE:^CN=([a-zA-Z0-9]*),.*$/$1/L,DEFAULT"
SUITE, SUITE_OPENSSL = "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"
TOPIC = "cert-topic"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    work = tmp_path_factory.mktemp("tls-options")
    certs = make_certs(work / "certs")
    port, ports, overrides = named_listeners(NAMES, {n: "SSL" for n in NAMES})
    overrides.update({
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
        "num.partitions": 1, "num.network.threads": 2, "num.io.threads": 2,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certs.server_keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca_cert,
        "ssl.principal.mapping.rules": RULES,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.req.ssl.client.auth": "requested",
        "listener.name.tls13.ssl.enabled.protocols": "TLSv1.3",
        "listener.name.cipher.ssl.enabled.protocols": "TLSv1.2",
        "listener.name.cipher.ssl.cipher.suites": SUITE,
        "listener.name.suite13.ssl.cipher.suites": "TLS_AES_128_GCM_SHA256",
        "listener.name.suites.ssl.cipher.suites": "TLS_CHACHA20_POLY1305_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    })
    with module_broker(tmp_path_factory, overrides, name="tls-options-broker", port=port) as b:
        b.certs, b.ports = certs, ports
        yield b


def _conf(broker, name, cn=None):
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.ports[name]}", "security.protocol": "SSL",
            "ssl.ca.location": str(broker.certs.ca_cert)}
    if cn:
        cert, key = broker.certs.client(cn.lower(), f"/O=kafkapy/CN={cn}")
        conf.update({"ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
    return conf


def _produce_error(conf):
    """None when a record is delivered, else the delivery error's code."""
    producer = confluent_kafka.Producer({**conf, "message.timeout.ms": 10000})
    result = []
    producer.produce(TOPIC, b"v", on_delivery=lambda err, msg: result.append(err))
    producer.flush(20)
    assert result, "no delivery report"
    return None if result[0] is None else result[0].code()


def test_certificate_principal_is_mapped_and_authorized(broker):
    # CN=Admin maps to User:admin, a super user: it creates the topic and the ACLs.
    admin = AdminClient(_conf(broker, "MTLS", "Admin"))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=30)
    bindings = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:client1", "*", op,
                           AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)
    # CN=Client1 maps to User:client1 (lower-cased by the rule): allowed.
    assert _produce_error(_conf(broker, "MTLS", "Client1")) is None
    # Another certificate's principal (User:other) has no ACL.
    assert _produce_error(_conf(broker, "MTLS", "Other")) == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    # ssl.client.auth=requested: a certificate gives its principal, none gives User:ANONYMOUS.
    assert _produce_error(_conf(broker, "REQ", "Client1")) is None
    assert _produce_error(_conf(broker, "REQ")) == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED


def _handshake(broker, name, *, maximum=None, ciphers=None):
    """A TLS handshake then ApiVersions v0 on listener ``name``: the
    negotiated (protocol, cipher)."""
    ctx = ssl.create_default_context(cafile=str(broker.certs.ca_cert))
    if maximum:
        ctx.maximum_version = maximum
    if ciphers:
        ctx.set_ciphers(ciphers)
    raw = socket.create_connection(("127.0.0.1", broker.ports[name]), timeout=10)
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        payload = struct.pack(">hhih", 18, 0, 7, -1)
        tls.sendall(struct.pack(">i", len(payload)) + payload)
        assert struct.unpack(">ii", tls.recv(8))[1] == 7
        return tls.version(), tls.cipher()[0]


def _openssl_handshake(broker, name, suite: str) -> bool:
    """Whether ``openssl s_client`` offering TLS 1.3 with only ``suite``
    completes a handshake with listener ``name`` (Python's client cannot
    narrow its TLS 1.3 suites)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("no openssl CLI")
    done = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{broker.ports[name]}", "-tls1_3",
                           "-ciphersuites", suite, "-CAfile", str(broker.certs.ca_cert), "-brief"],
                          input=b"", capture_output=True, timeout=30)
    return done.returncode == 0 and b"CONNECTION ESTABLISHED" in done.stderr


def test_enabled_protocols_and_cipher_suites(broker):
    assert _handshake(broker, "TLS13")[0] == "TLSv1.3"
    with pytest.raises(ssl.SSLError):
        _handshake(broker, "TLS13", maximum=ssl.TLSVersion.TLSv1_2)
    # Kafka's suite name is honoured: the one suite is chosen, others are refused.
    assert _handshake(broker, "CIPHER") == ("TLSv1.2", SUITE_OPENSSL)
    with pytest.raises(ssl.SSLError):
        _handshake(broker, "CIPHER", ciphers="ECDHE-RSA-AES128-GCM-SHA256")
    # TLS 1.3 suites are honoured too (Kafka's JVM offers only the listed
    # ones): a list without TLS 1.2 suites leaves TLS 1.2 nothing to negotiate.
    assert _handshake(broker, "SUITE13") == ("TLSv1.3", "TLS_AES_128_GCM_SHA256")
    with pytest.raises(ssl.SSLError):
        _handshake(broker, "SUITE13", maximum=ssl.TLSVersion.TLSv1_2)
    assert _openssl_handshake(broker, "SUITE13", "TLS_AES_256_GCM_SHA384") is False
    assert _openssl_handshake(broker, "SUITE13", "TLS_AES_128_GCM_SHA256") is True
    assert _handshake(broker, "SUITES") == ("TLSv1.3", "TLS_CHACHA20_POLY1305_SHA256")
    assert _handshake(broker, "SUITES", maximum=ssl.TLSVersion.TLSv1_2) == ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256")
    # A Kafka client over the one-suite listener.
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['SUITE13']}", "security.protocol": "SSL",
                         "ssl.ca.location": str(broker.certs.ca_cert)})
    assert admin.list_topics(timeout=20).brokers
    # The refused handshakes left the broker serving.
    with RawClient.connect(broker.bootstrap) as client:
        assert client.api_versions(timeout_s=5)[0] == 0
    assert broker.running, broker.log_tail()
