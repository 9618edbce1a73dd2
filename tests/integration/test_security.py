"""TLS and SASL listeners of one real broker, with real clients.

One broker, six listeners (listener.security.protocol.map maps names to
Kafka's four protocols): PLAINTEXT (the harness's readiness probe), SSL
(server authentication), MTLS (SSL with ``listener.name.mtls.ssl.client.auth
=required``: mutual TLS), SASL_PLAINTEXT, SASL_SSL, and OLDSASL (SASL_PLAINTEXT
offering PLAIN only, for mechanism refusals). Certificates are made by the
``openssl`` CLI in a temporary directory (tests/support/certs.py); SCRAM users
are stored with the standalone credential tool before the broker starts.

Clients: confluent-kafka (librdkafka) for SSL, mTLS, SASL_PLAINTEXT and
SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, each producing and then
consuming in a group; Debian's kcat (librdkafka 2.0.2, whose SCRAM final
message repeats its nonce: Kafka's endsWith check) and aiokafka over SSL, mTLS
and SASL (PLAIN, SCRAM-SHA-256/512 over plaintext and TLS), consuming in a
group; kafka-python over SSL, mTLS and SASL (PLAIN, SCRAM); Apache's
Java client over SASL_SSL with SCRAM-SHA-512; raw frames for SaslHandshake v0
(unframed tokens, as old clients), failures (wrong password, unknown
mechanism, requests before authentication, oversized frames) and hostile
TLS input (garbage instead of a ClientHello, a handshake that stalls).
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from pathlib import Path

import pytest
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.security.scram_store import add_scram_credentials
from support.clients import module_broker
from support.certs import make_certs, named_listeners
from support.rawclient import RawClient, encode_request
from support.sasl import authenticate, confluent_round_trip, handshake, serve_then_check_log

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
IDLE_MS = 3000  # connections.max.idle.ms: bounds a stalled handshake
FAILED_DELAY_MS = 300  # connection.failed.authentication.delay.ms
SECRETS = ("alice-secret", "bob-secret", "admin-secret", "wrong-password")
NAMES = ("SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL", "OLDSASL")


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    work = tmp_path_factory.mktemp("security")
    certs = make_certs(work / "certs")
    port, ports, overrides = named_listeners(NAMES, {"SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
                                                     "SASL_SSL": "SASL_SSL", "OLDSASL": "SASL_PLAINTEXT"})
    overrides.update({
        "num.partitions": 1, "num.network.threads": 2, "num.io.threads": 2,
        "connections.max.idle.ms": IDLE_MS,
        "connection.failed.authentication.delay.ms": FAILED_DELAY_MS,
        # The broker-wide key store: a file with key and chain.
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certs.server_keystore,
        # MTLS: inline PEM values, an encrypted key, a trust store, client auth required.
        "listener.name.mtls.ssl.keystore.location": "",
        "listener.name.mtls.ssl.keystore.certificate.chain": certs.server_cert.read_text(),
        "listener.name.mtls.ssl.keystore.key": certs.server_key_encrypted.read_text(),
        "listener.name.mtls.ssl.key.password": certs.key_password,
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": certs.ca_cert,
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.oldsasl.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.oldsasl.plain.sasl.jaas.config": PLAIN_JAAS,
    })
    def prepare(broker):
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            add_scram_credentials(str(broker.log_dirs[0]), "bob", mechanism, "bob-secret")
        broker.certs = certs
        broker.ports = ports

    yield from serve_then_check_log(module_broker(tmp_path_factory, overrides, name="security-broker",
                                                  port=port, before_start=prepare), SECRETS)


def _address(secure, name):
    return f"127.0.0.1:{secure.ports[name]}"


def _alive(secure):
    """The broker still serves plaintext clients (after an attack)."""
    assert secure.running, secure.log_tail()
    with RawClient.connect(secure.bootstrap) as client:
        assert client.api_versions(timeout_s=5)[0] == 0


# ----------------------------------------------------------------- confluent-kafka


def _confluent_round_trip(secure, name, conf, topic, count=20):
    confluent_round_trip(_address(secure, name), conf, topic, count)


def _tls(secure, client_cert=None):
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(secure.certs.ca_cert)}
    if client_cert:
        conf.update({"ssl.certificate.location": str(client_cert[0]), "ssl.key.location": str(client_cert[1])})
    return conf


def _sasl(protocol, mechanism, user, password, secure=None):
    conf = {"security.protocol": protocol, "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password}
    if protocol == "SASL_SSL":
        conf["ssl.ca.location"] = str(secure.certs.ca_cert)
    return conf


def test_confluent_ssl(secure):
    _confluent_round_trip(secure, "SSL", _tls(secure), "ssl-topic")


def test_confluent_mutual_tls(secure):
    cert = secure.certs.client("client1", "/O=kafkapy/OU=test/CN=client1")
    _confluent_round_trip(secure, "MTLS", _tls(secure, cert), "mtls-topic")
    # Without a client certificate the handshake fails: nothing is delivered.
    producer = confluent_kafka.Producer({"bootstrap.servers": _address(secure, "MTLS"), **_tls(secure),
                                         "message.timeout.ms": 3000})
    failed = []
    producer.produce("mtls-topic", b"x", on_delivery=lambda err, msg: failed.append(err))
    producer.flush(10)
    assert failed and failed[0] is not None
    _alive(secure)


@pytest.mark.parametrize("protocol,mechanism,user,password", [
    ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "bob-secret"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "bob", "bob-secret"),
    ("SASL_SSL", "PLAIN", "alice", "alice-secret"),
    ("SASL_SSL", "SCRAM-SHA-256", "bob", "bob-secret"),
    ("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret"),
])
def test_confluent_sasl(secure, protocol, mechanism, user, password):
    topic = f"{protocol}-{mechanism}".lower()
    _confluent_round_trip(secure, protocol, _sasl(protocol, mechanism, user, password, secure), topic)


@pytest.mark.parametrize("mechanism,user", [("PLAIN", "alice"), ("SCRAM-SHA-256", "bob"),
                                            ("SCRAM-SHA-512", "bob"), ("SCRAM-SHA-256", "nobody")])
def test_confluent_wrong_password_is_an_authentication_error(secure, mechanism, user):
    errors = []
    producer = confluent_kafka.Producer({"bootstrap.servers": _address(secure, "SASL_PLAINTEXT"),
                                         **_sasl("SASL_PLAINTEXT", mechanism, user, "wrong-password"),
                                         "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == confluent_kafka.KafkaError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str()
    _alive(secure)


# ----------------------------------------------------------------- kafka-python


@pytest.mark.parametrize("name,conf", [
    ("SSL", {"security_protocol": "SSL"}),
    ("MTLS", {"security_protocol": "SSL"}),
    ("SASL_PLAINTEXT", {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                        "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}),
    ("SASL_SSL", {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256",
                  "sasl_plain_username": "bob", "sasl_plain_password": "bob-secret"}),
])
def test_kafka_python(secure, name, conf):
    kafka = pytest.importorskip("kafka")
    if "SSL" in conf["security_protocol"]:
        conf = {**conf, "ssl_cafile": str(secure.certs.ca_cert), "ssl_check_hostname": True}
    if name == "MTLS":
        cert, key = secure.certs.client("client-kp", "/O=kafkapy/CN=kafka-python")
        conf = {**conf, "ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    topic = f"kp-{name.lower()}"
    producer = kafka.KafkaProducer(bootstrap_servers=_address(secure, name), **conf)
    for i in range(10):
        producer.send(topic, b"k%d" % i).get(timeout=30)
    producer.close(timeout=10)
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=_address(secure, name), group_id=f"g-{topic}",
                                   auto_offset_reset="earliest", consumer_timeout_ms=15000, **conf)
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == 10:
            break
    consumer.close()
    assert got == [b"k%d" % i for i in range(10)]


# ----------------------------------------------------------------- kcat and aiokafka

# (listener, security settings): server-auth TLS, mutual TLS, and SASL with
# each mechanism over plaintext and TLS. Credentials are filled per client.
SECURED = [
    ("SSL", None, None, None),
    ("MTLS", None, None, None),
    ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "bob", "bob-secret"),
    ("SASL_SSL", "SCRAM-SHA-256", "bob", "bob-secret"),
    ("SASL_SSL", "PLAIN", "alice", "alice-secret"),
]
KCAT = "/usr/bin/kcat"


def _librdkafka_conf(secure, name, mechanism, user, password):
    if mechanism is None:
        cert = secure.certs.client("client-kcat", "/O=kafkapy/CN=kcat") if name == "MTLS" else None
        return _tls(secure, cert)
    return _sasl(name, mechanism, user, password, secure)


@pytest.mark.parametrize("name,mechanism,user,password", SECURED)
def test_kcat(secure, name, mechanism, user, password):
    """Debian's kcat (librdkafka) produces, then consumes in a balanced group
    (-G) and commits, over each secured listener."""
    import subprocess

    if not Path(KCAT).exists():
        pytest.skip("kcat is not installed")
    topic = f"kcat-{name}-{mechanism or 'tls'}".lower()
    settings = []
    for key, value in _librdkafka_conf(secure, name, mechanism, user, password).items():
        settings += ["-X", f"{key}={value}"]
    values = [f"kcat-{i}" for i in range(10)]
    produced = subprocess.run([KCAT, "-P", "-b", _address(secure, name), "-t", topic, *settings],
                              input="\n".join(values) + "\n", capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr[-2000:]
    consumed = subprocess.run([KCAT, "-b", _address(secure, name), "-G", f"g-{topic}", "-c", str(len(values)),
                               "-f", "%s\n", "-X", "auto.offset.reset=earliest", *settings, topic],
                              capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr[-2000:]
    assert consumed.stdout.splitlines() == values


def _aiokafka_conf(secure, name, mechanism, user, password):
    from aiokafka.helpers import create_ssl_context

    conf = {"security_protocol": "SSL" if mechanism is None else name}
    if "SSL" in conf["security_protocol"]:
        cert = secure.certs.client("client-aio", "/O=kafkapy/CN=aiokafka") if name == "MTLS" else (None, None)
        conf["ssl_context"] = create_ssl_context(cafile=str(secure.certs.ca_cert), certfile=cert[0] and str(cert[0]),
                                                 keyfile=cert[1] and str(cert[1]))
    if mechanism is not None:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    return conf


@pytest.mark.parametrize("name,mechanism,user,password", SECURED)
def test_aiokafka(secure, name, mechanism, user, password):
    """aiokafka produces, then consumes in a group and commits, over each
    secured listener."""
    pytest.importorskip("aiokafka")
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = f"aio-{name}-{mechanism or 'tls'}".lower()
    bootstrap = _address(secure, name)
    conf = _aiokafka_conf(secure, name, mechanism, user, password)
    values = [b"aio-%d" % i for i in range(10)]

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **conf)
        await producer.start()
        try:
            for value in values:
                await asyncio.wait_for(producer.send_and_wait(topic, value), 30)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}",
                                    auto_offset_reset="earliest", enable_auto_commit=False, **conf)
        await consumer.start()
        got = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < len(values) and time.monotonic() < deadline:
                for msgs in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in msgs)
            await asyncio.wait_for(consumer.commit(), 30)
            committed = await consumer.committed(next(iter(consumer.assignment())))
        finally:
            await consumer.stop()
        return got, committed

    got, committed = asyncio.run(run())
    assert got == values and committed == len(values)


# ----------------------------------------------------------------- the Java client


def test_java_client_sasl_ssl_scram(secure, java_client):
    configs = {"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
               "ssl.truststore.location": str(secure.certs.ca_cert), "sasl.mechanism": "SCRAM-SHA-512",
               "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                   'username="bob" password="bob-secret";'}
    produced = java_client.produce(_address(secure, "SASL_SSL"), "java-sasl", 50, configs=configs)
    assert produced.returncode == 0 and len(produced.acks) == 50, produced.describe()
    consumed = java_client.consume(_address(secure, "SASL_SSL"), "java-sasl", "g-java", 50, configs=configs)
    assert len(consumed.records) == 50, consumed.describe()


# ----------------------------------------------------------------- the tools' --command-config


def test_configs_tool_over_sasl_ssl(secure, tmp_path):
    """kafkapy-configs reaches a SASL_SSL listener with a Java client's
    properties: a PEM trust store, host name checks on, SCRAM-SHA-512."""
    import subprocess
    import sys

    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
                      f"ssl.truststore.location={secure.certs.ca_cert}\n"
                      "ssl.endpoint.identification.algorithm=https\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      'username="bob" password="bob-secret";\n')

    def configs(*args):
        return subprocess.run([sys.executable, "-m", "kafkapy.tools.configs", "--bootstrap-server",
                               _address(secure, "SASL_SSL"), "--command-config", str(config), "--entity-type", "users",
                               "--entity-name", "bob", *args], capture_output=True, text=True, timeout=60)

    # (100 MB/s: harmless to the module's other clients of bob if left behind)
    done = configs("--alter", "--add-config", "consumer_byte_rate=104857600")
    assert done.returncode == 0 and done.stdout == "Completed updating config for user bob.\n", done.stderr
    described = configs("--describe")
    assert described.returncode == 0, described.stderr
    assert described.stdout.splitlines() == [
        "Quota configs for user-principal 'bob' are consumer_byte_rate=1.048576E8",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096, "
        "SCRAM-SHA-512=iterations=4096"]
    assert configs("--alter", "--delete-config", "consumer_byte_rate").returncode == 0


# ----------------------------------------------------------------- raw SASL frames


_handshake = handshake
_authenticate_v2 = authenticate


def test_sasl_handshake_v0_unframed_plain(secure):
    with RawClient.connect(_address(secure, "OLDSASL")) as client:
        assert client.api_versions()[0] == 0
        assert _handshake(client, "PLAIN", version=0) == 0
        token = b"\x00alice\x00alice-secret"
        client.send(struct.pack(">i", len(token)) + token)  # no SaslAuthenticate framing
        assert client.recv_frame(timeout_s=5) == b""  # PLAIN's empty server token
        assert client.api_versions()[0] == 0  # authenticated: requests flow


def test_sasl_authenticate_then_requests_flow(secure):
    with RawClient.connect(_address(secure, "SASL_PLAINTEXT")) as client:
        response = _handshake(client, "PLAIN")
        assert response.error_code == 0 and set(response.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        result = _authenticate_v2(client, b"\x00alice\x00alice-secret")
        assert result.error_code == 0 and result.error_message is None
        # After authentication a second handshake reaches KafkaApis' answer.
        assert _handshake(client, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_sasl_wrong_password_is_answered_late_and_closed(secure):
    with RawClient.connect(_address(secure, "SASL_PLAINTEXT")) as client:
        assert _handshake(client, "PLAIN").error_code == 0
        started = time.monotonic()
        result = _authenticate_v2(client, b"\x00alice\x00wrong-password")
        waited = time.monotonic() - started
        assert result.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert result.error_message == "Authentication failed: Invalid username or password"
        assert waited >= FAILED_DELAY_MS / 1000 * 0.9
        assert client.wait_closed(5)
    _alive(secure)


def test_sasl_unsupported_mechanism(secure):
    with RawClient.connect(_address(secure, "OLDSASL")) as client:
        response = _handshake(client, "SCRAM-SHA-256")
        assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and response.mechanisms == ("PLAIN",)
        assert client.wait_closed(5)


def test_sasl_requests_before_authentication_close(secure):
    with RawClient.connect(_address(secure, "SASL_PLAINTEXT")) as client:
        client.send(encode_request(3, 1, 1, struct.pack(">i", -1)))  # Metadata v1, all topics
        assert client.wait_closed(5)
    with RawClient.connect(_address(secure, "SASL_PLAINTEXT")) as client:
        assert _handshake(client, "PLAIN").error_code == 0
        client.send(encode_request(3, 1, 2, struct.pack(">i", -1)))  # not SaslAuthenticate
        assert client.wait_closed(5)
    with RawClient.connect(_address(secure, "SASL_PLAINTEXT")) as client:
        client.send(struct.pack(">i", 1 << 20) + b"\x00" * 1024)  # over sasl.server.max.receive.size
        assert client.wait_closed(5)
    with RawClient.connect(_address(secure, "SASL_PLAINTEXT")) as client:
        client.send(struct.pack(">i", 100) + b"\x00" * 10)  # truncated, then silence: idle close
        assert client.wait_closed(IDLE_MS / 1000 + 5)
    _alive(secure)


# ----------------------------------------------------------------- hostile TLS


def test_garbage_instead_of_a_client_hello(secure):
    for name in ("SSL", "SASL_SSL"):
        with RawClient.connect(_address(secure, name)) as client:
            client.send(b"\x00\x00\x00\x10" + b"GET / HTTP/1.1\r\n" * 4)
            assert client.wait_closed(5)
    _alive(secure)


def test_stalled_handshake_is_closed_and_others_are_served(secure):
    stalled = socket.create_connection(("127.0.0.1", secure.ports["SSL"]), timeout=5)
    half = socket.create_connection(("127.0.0.1", secure.ports["SSL"]), timeout=5)
    try:
        half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # the start of a ClientHello
        # Meanwhile a full TLS client is served on the same listener.
        ctx = ssl.create_default_context(cafile=str(secure.certs.ca_cert))
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", secure.ports["SSL"]), timeout=5),
                             server_hostname="127.0.0.1") as tls:
            payload = struct.pack(">hhih", 18, 0, 9, -1)
            tls.sendall(struct.pack(">i", len(payload)) + payload)
            assert struct.unpack(">ii", tls.recv(8))[1] == 9
        started = time.monotonic()
        for sock in (stalled, half):
            sock.settimeout(IDLE_MS / 1000 + 5)
            assert sock.recv(100) == b""  # closed by connections.max.idle.ms
        assert time.monotonic() - started < IDLE_MS / 1000 + 5
    finally:
        stalled.close()
        half.close()
    _alive(secure)


def test_metadata_answers_the_listener_asked(secure):
    admin = AdminClient({"bootstrap.servers": _address(secure, "SASL_SSL"),
                                               **_sasl("SASL_SSL", "PLAIN", "alice", "alice-secret", secure)})
    brokers = admin.list_topics(timeout=10).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", secure.ports["SASL_SSL"])]


def test_large_requests_and_fetches_over_tls(secure):
    """Produce requests of several MB (past the processor's per-event read
    bound, so bytes left decrypted inside the ssl object must be picked up)
    and fetches of several MB written through the 256 KiB TLS chunks."""
    from confluent_kafka.admin import NewTopic

    conf = {"bootstrap.servers": _address(secure, "SASL_SSL"),
            **_sasl("SASL_SSL", "SCRAM-SHA-256", "bob", "bob-secret", secure)}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("tls-large", 4, 1)])["tls-large"].result(timeout=30)
    producer = confluent_kafka.Producer({**conf, "linger.ms": 50, "batch.size": 1000000,
                                         "message.max.bytes": 16000000})
    values = [bytes([i % 251]) * 200_000 for i in range(80)]  # 16 MB
    for i, value in enumerate(values):
        producer.produce("tls-large", value, partition=i % 4)
    assert producer.flush(60) == 0
    consumer = confluent_kafka.Consumer({**conf, "group.id": "g-tls-large", "auto.offset.reset": "earliest",
                                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    consumer.subscribe(["tls-large"])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < len(values) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    consumer.close()
    assert sorted(got) == sorted(values)


def test_pipelined_request_spanning_tls_records(secure):
    """A small request and a 20 KB one sent together: the first TLS record
    holds the first request and the start of the second, the rest stays
    decrypted-later in the connection's BIO while the first is handled. The
    second must be answered without the client sending anything more (the
    selector cannot see bytes already in the BIO)."""
    ctx = ssl.create_default_context(cafile=str(secure.certs.ca_cert))
    first = struct.pack(">hhih", 18, 0, 1, -1)
    client_id = b"c" * 20000
    second = struct.pack(">hhih", 18, 0, 2, len(client_id)) + client_id
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", secure.ports["SSL"]), timeout=5),
                         server_hostname="127.0.0.1") as tls:
        tls.sendall(b"".join(struct.pack(">i", len(p)) + p for p in (first, second)))
        got = []
        buf = b""
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            try:
                buf += tls.recv(65536)
            except socket.timeout:
                break
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                size = struct.unpack_from(">i", buf)[0]
                got.append(struct.unpack_from(">i", buf, 4)[0])
                buf = buf[4 + size:]
        assert got == [1, 2]
