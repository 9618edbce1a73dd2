"""kafkapy.server.security without sockets: JAAS parsing, PLAIN and SCRAM
servers (RFC 7677's example exchange), the authenticator's state machine,
principals from certificates, and the request queue carrying listener and
principal to the handlers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import multiprocessing
import ssl
import struct

import pytest

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.reactor.channel import RequestQueue
from kafkapy.server.security import sasl
from kafkapy.server.security.principal import NoMatchingRule, SslPrincipalMapper, distinguished_name
from kafkapy.server.security.scram_store import (
    ScramCredential,
    ScramCredentialStore,
    add_scram_credentials,
    make_credential,
    parse_add_scram,
)


# ------------------------------------------------------------------ JAAS


def test_jaas_plain_users_with_kafkas_syntax():
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
            '  username="admin" password="admin-secret"\n'
            '  user_admin="admin-secret" user_alice="al\\"ice;"; ')
    [(module, flag, options)] = sasl.parse_jaas_config(text)
    assert module == sasl.PLAIN_LOGIN_MODULE and flag == "required"
    assert options["user_alice"] == 'al"ice;' and options["user_admin"] == "admin-secret"


@pytest.mark.parametrize("text", [
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x"',  # no ';'
    'org.apache.kafka.common.security.plain.PlainLoginModule user_a="x";',  # no flag
    'org.apache.kafka.common.security.plain.PlainLoginModule mandatory user_a="x";',
])
def test_jaas_errors_never_show_the_text(text):
    with pytest.raises(ValueError) as exc:
        sasl.parse_jaas_config(text)
    assert "x" not in str(exc.value).replace("configuration", "").replace("invalid", "")


# ------------------------------------------------------------------ PLAIN


def test_plain_accepts_and_rejects():
    server = sasl.PlainServer({"alice": "alice-secret"})
    assert server.evaluate(b"\x00alice\x00alice-secret") == b"" and server.complete
    assert server.authorization_id == "alice"
    for token, message in [(b"\x00alice\x00wrong", "Invalid username or password"),
                           (b"\x00bob\x00alice-secret", "Invalid username or password"),
                           (b"bob\x00alice\x00alice-secret", "authorization id that is different"),
                           (b"alice\x00alice-secret", "expected 3 tokens")]:
        with pytest.raises(sasl.SaslAuthenticationFailed, match=message) as exc:
            sasl.PlainServer({"alice": "alice-secret"}).evaluate(token)
        assert "secret" not in str(exc.value)


# ------------------------------------------------------------------ SCRAM


class _Store:
    def __init__(self, creds):
        self.creds = creds

    def get(self, user, mechanism):
        return self.creds.get((user, mechanism))


def test_scram_sha256_rfc7677_example():
    """RFC 7677 section 3: user "user", password "pencil"."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = make_credential("SCRAM-SHA-256", "pencil", 4096, salt)
    server = sasl.ScramServer("SCRAM-SHA-256", _Store({("user", "SCRAM-SHA-256"): cred}),
                              server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


def _scram_client(mechanism, user, password, server, nonce_prefix=""):
    """A client exchange (RFC 5802) against ``server``; returns the server-final
    message. ``nonce_prefix``: text sent before the combined nonce in the
    client-final message (librdkafka 2.0.x sends its own nonce there)."""
    name = sasl.SCRAM_HASHES[mechanism]
    bare = f"n={user},r=clientnonce123"
    first = server.evaluate(("n,," + bare).encode()).decode()
    fields = dict(kv.split("=", 1) for kv in first.split(","))
    salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", name).digest()
    without = f"c=biws,r={nonce_prefix}{fields['r']}"
    auth = f"{bare},{first},{without}".encode()
    signature = hmac.new(hashlib.new(name, client_key).digest(), auth, name).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    return server.evaluate(f"{without},p={proof}".encode())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_credentials_from_the_store(tmp_path, mechanism):
    add_scram_credentials(str(tmp_path), "bob", mechanism, "bob-secret")
    text = (tmp_path / "kafkapy-scram-credentials.json").read_text()
    assert "bob-secret" not in text and "stored_key=" in text and "iterations=4096" in text
    store = ScramCredentialStore(str(tmp_path))
    assert _scram_client(mechanism, "bob", "bob-secret", sasl.ScramServer(mechanism, store)).startswith(b"v=")
    with pytest.raises(sasl.SaslAuthenticationFailed, match=f"invalid credentials with SASL mechanism {mechanism}"):
        _scram_client(mechanism, "bob", "wrong", sasl.ScramServer(mechanism, store))
    with pytest.raises(sasl.SaslAuthenticationFailed, match="invalid credentials"):
        _scram_client(mechanism, "nobody", "bob-secret", sasl.ScramServer(mechanism, store))
    # A credential changed while a processor runs is seen at the next lookup.
    add_scram_credentials(str(tmp_path), "bob", mechanism, "new-secret")
    assert _scram_client(mechanism, "bob", "new-secret", sasl.ScramServer(mechanism, store)).startswith(b"v=")


def test_scram_final_nonce_is_checked_as_kafka_does(tmp_path):
    """Kafka's ScramSaslServer accepts a client-final nonce that ends with the
    combined nonce (librdkafka 2.0.x repeats its own nonce before it) and
    refuses one that does not."""
    add_scram_credentials(str(tmp_path), "bob", "SCRAM-SHA-256", "bob-secret")
    store = ScramCredentialStore(str(tmp_path))
    server = sasl.ScramServer("SCRAM-SHA-256", store)
    assert _scram_client("SCRAM-SHA-256", "bob", "bob-secret", server, nonce_prefix="clientnonce123").startswith(b"v=")
    server = sasl.ScramServer("SCRAM-SHA-256", store)
    first = server.evaluate(b"n,,n=bob,r=clientnonce123")
    assert first.startswith(b"r=clientnonce123")
    with pytest.raises(sasl.SaslAuthenticationFailed, match="Invalid client nonce in the final client message"):
        server.evaluate(b"c=biws,r=clientnonce123,p=AAAA")  # the client's nonce only


def test_scram_credential_string_is_kafkas():
    cred = ScramCredential(b"s", b"k", b"v", 8192)
    assert cred.to_string() == "salt=cw==,stored_key=aw==,server_key=dg==,iterations=8192"
    assert ScramCredential.from_string(cred.to_string()) == cred
    assert parse_add_scram("SCRAM-SHA-512=[name=alice,password=\"a,b\",iterations=8192]") == (
        "SCRAM-SHA-512", "alice", "a,b", 8192)


# ------------------------------------------------------------------ the authenticator


def _config(mechanisms=("PLAIN",)):
    return sasl.SaslConfig("SASL", mechanisms, {"alice": "alice-secret"}, _Store({}), 524288, 100)


def _frame(key, version, request, correlation_id=7):
    spec = API_TABLE[key]
    header = struct.pack(">hhih", key, version, correlation_id, 1) + b"c"
    if spec.is_flexible(version):
        header += b"\x00"
    return header + encode_to_bytes(request)


def _response(key, version, parts):
    data = b"".join(parts)
    spec = API_TABLE[key]
    offset = 8 + (1 if spec.is_flexible(version) and key != 18 else 0)
    return decode(spec.response_class(version), memoryview(data), offset)[0]


@pytest.mark.parametrize("auth_version", [0, 1, 2])
def test_session_handshake_v1_then_authenticate(auth_version):
    session = sasl.SaslSession(_config())
    hs = API_TABLE[17].request_class(1)(mechanism="PLAIN")
    action, parts = session.on_request(_frame(18, 0, API_TABLE[18].request_class(0)()))
    assert action == sasl.PASS
    action, parts = session.on_request(_frame(17, 1, hs))
    assert action == sasl.REPLY and _response(17, 1, parts).mechanisms == ("PLAIN",)
    auth = API_TABLE[36].request_class(auth_version)(auth_bytes=b"\x00alice\x00alice-secret")
    action, parts = session.on_request(_frame(36, auth_version, auth))
    assert action == sasl.REPLY and _response(36, auth_version, parts).error_code == ErrorCode.NONE
    assert session.complete and session.principal == "User:alice"


def test_session_v0_unframed_tokens():
    session = sasl.SaslSession(_config())
    action, _ = session.on_request(_frame(17, 0, API_TABLE[17].request_class(0)(mechanism="PLAIN")))
    assert action == sasl.REPLY and session.raw_tokens
    action, parts = session.on_request(b"\x00alice\x00alice-secret")
    assert action == sasl.REPLY and parts == [b"\x00\x00\x00\x00"] and session.complete


def test_session_failures():
    session = sasl.SaslSession(_config())
    action, parts = session.on_request(_frame(17, 1, API_TABLE[17].request_class(1)(mechanism="GSSAPI")))
    response = _response(17, 1, parts)
    assert action == sasl.FAIL and response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert response.mechanisms == ("PLAIN",)
    session = sasl.SaslSession(_config())
    session.on_request(_frame(17, 1, API_TABLE[17].request_class(1)(mechanism="PLAIN")))
    action, parts = session.on_request(_frame(36, 2, API_TABLE[36].request_class(2)(
        auth_bytes=b"\x00alice\x00wrong")))
    response = _response(36, 2, parts)
    assert action == sasl.FAIL and response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == "Authentication failed: Invalid username or password"
    # Anything but ApiVersions / SaslHandshake first, or garbage: close.
    metadata = API_TABLE[3].request_class(1)(topics=None)
    assert sasl.SaslSession(_config()).on_request(_frame(3, 1, metadata))[0] == sasl.CLOSE
    assert sasl.SaslSession(_config()).on_request(b"\x00\x01")[0] == sasl.CLOSE


# ------------------------------------------------------------------ principals


def test_distinguished_name_and_mapping_rules(tmp_path):
    from support.certs import make_certs

    certs = make_certs(tmp_path)
    cert_path, _ = certs.client("alice", "/C=US/O=kafkapy, Inc./OU=test/CN=alice/emailAddress=a@x.org")
    cert = ssl._ssl._test_decode_cert(str(cert_path))
    dn = distinguished_name(cert)
    assert dn == "1.2.840.113549.1.9.1=#16076140782e6f7267,CN=alice,OU=test,O=kafkapy\\, Inc.,C=US"
    assert SslPrincipalMapper("DEFAULT").principal_name(dn) == dn
    mapper = SslPrincipalMapper("RULE:^.*CN=([a-zA-Z0-9.]*),OU=(.*?),.*$/$1@$2/U, DEFAULT")
    assert mapper.principal_name(dn) == "ALICE@TEST"
    assert mapper.principal_name("CN=x") == "CN=x"  # falls to DEFAULT
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/L").principal_name("OU=x")


@pytest.mark.parametrize("kind", ["keystore", "truststore"])
def test_a_missing_store_file_stops_the_start_naming_its_key(kind, tmp_path):
    """Kafka's default store type (JKS) over a file that is not there: a
    ConfigException on that store's location, as Kafka's broker fails."""
    from kafkapy.server.config import ConfigException
    from kafkapy.server.security import ssl_context

    other = "truststore" if kind == "keystore" else "keystore"
    values = {f"ssl.{kind}.location": str(tmp_path / f"{kind}.jks"), f"ssl.{kind}.password": "hunter2"}
    if other == "keystore":  # a listener needs a key store: a PEM one that loads
        from support.certs import make_certs
        certs = make_certs(tmp_path / "certs")
        values.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_keystore)})
    with pytest.raises(ConfigException, match="cannot read the store") as err:
        ssl_context("server", lambda key: values.get(key), "listener SSL")
    assert f"ssl.{kind}.location" in str(err.value) and "hunter2" not in str(err.value)


# ------------------------------------------------------------------ the request queue


def test_request_queue_carries_listener_and_principal():
    q = RequestQueue(multiprocessing.get_context("fork"), 4)
    assert q.try_put(1, 5, -1, 3, 0, b"abc", 2, "User:alice".encode())
    assert q.try_put(1, 6, 128, 64, 0, None, 1, b"")
    first, second = q.get(timeout_s=2), q.get(timeout_s=2)
    assert (first.listener, first.principal, bytes(first.body)) == (2, "User:alice", b"abc")
    assert (second.listener, second.principal, second.body, second.arena_off) == (1, "User:ANONYMOUS", None, 128)
