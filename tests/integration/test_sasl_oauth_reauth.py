"""SASL/OAUTHBEARER (Kafka's unsecured-JWS validator), re-authentication
(KIP-368) and the failed-authentication delay, on one real broker.

Listeners: PLAINTEXT (the harness's probe); SASL_PLAINTEXT offering PLAIN,
SCRAM-SHA-256 and OAUTHBEARER with ``listener.name.sasl_plaintext.
connections.max.reauth.ms`` = REAUTH_MS (2 s); SCOPED (SASL_PLAINTEXT, OAUTHBEARER
only, ``unsecuredValidatorRequiredScope="produce"``, no re-authentication).
One network thread, so a failed authentication waiting for its delay shares
its processor with the client that must still be served meanwhile.

Clients: confluent-kafka (librdkafka's built-in unsecured JWT,
``sasl.oauthbearer.config=principal=alice``; librdkafka >= 2.2 re-authenticates
when told a session lifetime, which its statistics show as one connect for
the whole run), Apache's Java client (OAuthBearerLoginModule's unsecured
login), and raw frames for the exact answers.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import time
from pathlib import Path

import pytest
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.security.scram_store import add_scram_credentials
from support.broker import free_port
from support.clients import module_broker
from support.java_client import JavaKafkaClient
from support.rawclient import RawClient, encode_request
from support.sasl import (
    authenticate,
    authenticate_frame,
    confluent_round_trip,
    decode_authenticate,
    handshake,
    serve_then_check_log,
)

confluent_kafka = pytest.importorskip("confluent_kafka")

REAUTH_MS = 2000
FAILED_DELAY_MS = 800
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredLoginStringClaim_sub="broker";')
SCOPED_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
               'unsecuredValidatorRequiredScope="produce" unsecuredValidatorAllowableClockSkewMs="1000";')
SECRETS = ("alice-secret", "bob-secret", "wrong-password")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    port, sasl_port, scoped_port = free_port(), free_port(), free_port()
    listeners = (f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                 f"SCOPED://127.0.0.1:{scoped_port}")
    overrides = {
        "listeners": listeners, "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SCOPED:SASL_PLAINTEXT",
        "num.partitions": 1, "num.network.threads": 1, "num.io.threads": 2,
        "connection.failed.authentication.delay.ms": FAILED_DELAY_MS,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.name.sasl_plaintext.connections.max.reauth.ms": REAUTH_MS,
        "listener.name.scoped.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.scoped.oauthbearer.sasl.jaas.config": SCOPED_JAAS,
    }
    def prepare(b):
        add_scram_credentials(str(b.log_dirs[0]), "alice", "SCRAM-SHA-256", "alice-secret")
        b.sasl = f"127.0.0.1:{sasl_port}"
        b.scoped = f"127.0.0.1:{scoped_port}"

    yield from serve_then_check_log(module_broker(tmp_path_factory, overrides, name="oauth-broker", port=port,
                                                  before_start=prepare), SECRETS)


def _b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def jwt(claims, alg="none") -> str:
    return f"{_b64({'alg': alg})}.{_b64(claims)}."


def oauth_message(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


_handshake = handshake
_authenticate = authenticate


def _lifetime_ms(response) -> int:
    value = response.session_lifetime  # the decoder gives milliseconds
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _metadata_ok(client) -> bool:
    client.send(encode_request(3, 1, 77, struct.pack(">i", 0)))  # Metadata v1, no topics
    try:
        frame = client.recv_frame(timeout_s=5)
    except ConnectionError:
        return False
    return struct.unpack_from(">i", frame)[0] == 77


def _plain_login(client, user="alice", password="alice-secret"):
    assert _handshake(client, "PLAIN").error_code == 0
    return _authenticate(client, f"\x00{user}\x00{password}".encode())


# ----------------------------------------------------------------- OAUTHBEARER, raw


def test_oauth_valid_token_and_session_lifetime(broker):
    now = time.time()
    with RawClient.connect(broker.sasl) as client:
        assert _handshake(client, "OAUTHBEARER").error_code == 0
        result = _authenticate(client, oauth_message(jwt({"sub": "alice", "iat": now, "exp": now + 3600})))
        assert result.error_code == 0 and result.auth_bytes == b""
        assert _lifetime_ms(result) == REAUTH_MS  # min(connections.max.reauth.ms, token exp - now)
        assert _metadata_ok(client)
    with RawClient.connect(broker.sasl) as client:
        assert _handshake(client, "OAUTHBEARER").error_code == 0
        result = _authenticate(client, oauth_message(jwt({"sub": "alice", "exp": now + 1.0}), authzid="alice"))
        assert result.error_code == 0 and 0 < _lifetime_ms(result) <= 1000  # the token expires first
    with RawClient.connect(broker.scoped) as client:
        assert _handshake(client, "OAUTHBEARER").error_code == 0
        result = _authenticate(client, oauth_message(jwt({"sub": "carol", "exp": now + 60,
                                                          "scope": ["consume", "produce"]})))
        assert result.error_code == 0 and _lifetime_ms(result) > 55000  # only the token bounds it


@pytest.mark.parametrize("claims,alg,listener,status", [
    ({"sub": "alice", "exp": 1}, "none", "sasl", '{"status":"invalid_token"}'),  # expired
    ({"sub": "alice"}, "none", "sasl", '{"status":"invalid_token"}'),  # no exp
    ({"exp": 4102444800}, "none", "sasl", '{"status":"invalid_token"}'),  # no sub
    ({"sub": "alice", "exp": 4102444800}, "HS256", "sasl", '{"status":"invalid_token"}'),
    ({"sub": "alice", "exp": 4102444800, "iat": 4102444000}, "none", "sasl", '{"status":"invalid_token"}'),
    ({"sub": "alice", "exp": 4102444800, "scope": "consume"}, "none", "scoped",
     '{"status":"insufficient_scope", "scope":"[produce]"}'),
])
def test_oauth_invalid_token_gets_the_json_challenge_then_fails(broker, claims, alg, listener, status):
    with RawClient.connect(getattr(broker, listener)) as client:
        assert _handshake(client, "OAUTHBEARER").error_code == 0
        challenge = _authenticate(client, oauth_message(jwt(claims, alg)))
        assert challenge.error_code == 0 and challenge.auth_bytes.decode() == status
        started = time.monotonic()
        result = _authenticate(client, b"\x01")  # RFC 7628: the client's acknowledgement
        assert result.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and result.error_message == status
        assert time.monotonic() - started >= FAILED_DELAY_MS / 1000 * 0.9
        assert client.wait_closed(5)


def test_oauth_garbage_and_authzid(broker):
    with RawClient.connect(broker.sasl) as client:
        assert _handshake(client, "OAUTHBEARER").error_code == 0
        result = _authenticate(client, b"n,,\x01auth=Basic abc\x01\x01")
        assert result.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert result.error_message == ("Authentication failed during authentication due to invalid credentials "
                                        "with SASL mechanism OAUTHBEARER")
        assert client.wait_closed(5)
    with RawClient.connect(broker.sasl) as client:
        assert _handshake(client, "OAUTHBEARER").error_code == 0
        result = _authenticate(client, oauth_message(jwt({"sub": "alice", "exp": 4102444800}), authzid="bob"))
        assert result.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "authorization id" in result.error_message
        assert client.wait_closed(5)


# ----------------------------------------------------------------- OAUTHBEARER, clients


_confluent_round_trip = confluent_round_trip


def _oauth_conf(config):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": config}


def test_confluent_oauthbearer(broker):
    # On the listener without re-authentication: with a 1.5 s session a
    # consumer's pipelined requests queued behind a 500 ms fetch may reach the
    # broker after expiry, before librdkafka's handshake, and Kafka closes
    # such a connection too (real lifetimes leave minutes of margin).
    _confluent_round_trip(broker.scoped, _oauth_conf("principal=alice scope=produce,consume"), "oauth-scoped")


def test_confluent_oauthbearer_missing_scope_is_an_authentication_error(broker):
    errors = []
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.scoped, **_oauth_conf("principal=alice"),
                                         "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == confluent_kafka.KafkaError._AUTHENTICATION, errors
    assert "insufficient_scope" in errors[0].str()


# The Java client's unsecured OAUTHBEARER login parses its own JWT with
# Jackson, which the wheel's jar set lacks: Debian's jars (libjackson2-
# databind-java, which the zookeeper package installs) join the class path.
JACKSON = [Path("/usr/share/java") / f"jackson-{n}.jar" for n in ("databind", "core", "annotations")]


class _JacksonClient(JavaKafkaClient):
    @property
    def classpath(self) -> str:
        return os.pathsep.join([JavaKafkaClient.classpath.fget(self)] + [str(j) for j in JACKSON])


def test_java_client_oauthbearer(broker, java_client):
    if not all(j.exists() for j in JACKSON):
        pytest.skip("Jackson jars missing (libjackson2-databind-java)")
    client = _JacksonClient(java_client.cache_root)
    client.classes_dir = java_client.classes_dir
    java_client = client
    configs = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
               "sasl.jaas.config": 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule '
                                   'required unsecuredLoginStringClaim_sub="alice";'}
    produced = java_client.produce(broker.sasl, "java-oauth", 30, configs=configs)
    assert produced.returncode == 0 and len(produced.acks) == 30, produced.describe()
    # The consumer polls for longer than two session lifetimes (it
    # re-authenticates; its 500 ms fetches may still cross the 2 s session's
    # end now and then, and such a connection is closed and made anew, as
    # Kafka's: the re-authentication itself is checked with librdkafka). The
    # window opens before the JVM's first poll, so it holds the SASL login
    # and the group join too: 1.5 s for those ran out on a loaded machine
    # (no record read, with or without requests handled in the processors).
    consumed = java_client.consume(broker.sasl, "java-oauth", "g-java-oauth", 31, timeout_ms=2 * REAUTH_MS + 8000,
                                   configs=configs)
    assert len(consumed.records) == 30, consumed.describe()


# ----------------------------------------------------------------- re-authentication


def test_reauthentication_raw(broker):
    # A session that is not renewed: the next request after expiry closes it.
    with RawClient.connect(broker.sasl) as client:
        result = _plain_login(client)
        assert result.error_code == 0 and _lifetime_ms(result) == REAUTH_MS
        assert _metadata_ok(client)
        time.sleep(REAUTH_MS / 1000 + 0.3)
        assert not _metadata_ok(client)
        assert client.wait_closed(5)
    # Renewed (same principal): requests go on flowing past the first expiry.
    with RawClient.connect(broker.sasl) as client:
        assert _plain_login(client).error_code == 0
        time.sleep(1.1)  # at most one re-authentication a second
        result = _plain_login(client)
        assert result.error_code == 0 and _lifetime_ms(result) == REAUTH_MS
        # A handshake sooner than a second after the last re-authentication
        # began reaches the workers: ILLEGAL_SASL_STATE, the session goes on.
        assert _handshake(client, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        time.sleep(REAUTH_MS / 1000 - 1.1 + 0.3)  # past the first session's end
        assert _metadata_ok(client)


def test_reauthentication_may_not_change_principal_or_mechanism(broker):
    with RawClient.connect(broker.sasl) as client:
        assert _plain_login(client).error_code == 0
        time.sleep(1.05)
        result = _plain_login(client, "bob", "bob-secret")
        assert result.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert result.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"
        assert client.wait_closed(5)
    with RawClient.connect(broker.sasl) as client:
        assert _plain_login(client).error_code == 0
        time.sleep(1.05)
        assert _handshake(client, "SCRAM-SHA-256").error_code == 0
        result = _authenticate(client, b"n,,n=alice,r=abcdefgh")
        assert result.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert result.error_message == ("SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
                                        "re-authentication of mechanism 'PLAIN'")
        assert client.wait_closed(5)
    with RawClient.connect(broker.sasl) as client:
        assert _plain_login(client).error_code == 0
        assert _handshake(client, "PLAIN").error_code == 0
        client.send(encode_request(18, 0, 5))  # ApiVersions is not part of a re-authentication
        assert client.wait_closed(5)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"])
def test_confluent_reauthenticates(broker, mechanism):
    """librdkafka re-authenticates within the session lifetime: a producer
    sending for more than two lifetimes keeps its one connection to the broker."""
    if mechanism == "OAUTHBEARER":
        conf = _oauth_conf("principal=alice")
    else:
        conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
                "sasl.username": "alice", "sasl.password": "alice-secret"}
    stats = []
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.sasl, **conf, "linger.ms": 0,
                                         "statistics.interval.ms": 500, "stats_cb": stats.append})
    topic = f"reauth-{mechanism.lower()}"
    errors = []
    before = broker.log_text().count("SASL session expired")
    deadline = time.monotonic() + 2.2 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < deadline:
        producer.produce(topic, b"r%d" % sent, on_delivery=lambda err, msg: err and errors.append(err))
        sent += 1
        producer.poll(0.1)
    assert producer.flush(30) == 0 and not errors, errors
    producer.poll(0.6)  # one more statistics event
    brokers = json.loads(stats[-1])["brokers"]
    learned = [b for b in brokers.values() if b["nodeid"] >= 0]
    assert learned and learned[0]["connects"] == 1, learned
    assert broker.log_text().count("SASL session expired") == before
    assert sent >= 10


# ----------------------------------------------------------------- failed-authentication delay


def test_failed_authentication_delay_does_not_block_others(broker):
    """The delayed answer to a wrong password waits in the processor's
    deadline list: the same (only) processor serves another client meanwhile."""
    with RawClient.connect(broker.sasl) as failing, RawClient.connect(broker.sasl) as other:
        assert _handshake(failing, "PLAIN").error_code == 0
        started = time.monotonic()
        failing.send(authenticate_frame(failing._next_correlation_id, b"\x00alice\x00wrong-password"))
        time.sleep(0.05)
        assert _plain_login(other).error_code == 0 and _metadata_ok(other)
        assert time.monotonic() - started < FAILED_DELAY_MS / 1000 * 0.8
        frame = failing.recv_frame(timeout_s=5)
        assert time.monotonic() - started >= FAILED_DELAY_MS / 1000 * 0.9
        result = decode_authenticate(frame)
        assert result.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert failing.wait_closed(5)
