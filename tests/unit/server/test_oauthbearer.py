"""The OAUTHBEARER server and Kafka's unsecured-JWS validator without
sockets: RFC 7628 client messages, each validation rule with a fixed clock,
the JSON error challenge then failure, and the session lifetime it bounds."""

from __future__ import annotations

import base64
import json
import time

import pytest

from kafkapy.server.security import oauthbearer, sasl

NOW = 1_700_000_000.0


def _b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def jwt(claims, header=None, signature="") -> str:
    return f"{_b64(header or {'alg': 'none'})}.{_b64(claims)}.{signature}"


def message(token, authzid="", extra="") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{extra}\x01".encode()


def server(**options):
    return oauthbearer.OAuthBearerServer(oauthbearer.UnsecuredValidator(options), clock=lambda: NOW)


def test_valid_token_with_extensions_and_authzid():
    s = server()
    token = jwt({"sub": "alice", "iat": NOW - 10, "exp": NOW + 60})
    assert s.evaluate(message(token, "alice", "traceId=123\x01")) == b""
    assert s.complete and s.authorization_id == "alice"
    assert s.credential_expiration_ms == int((NOW + 60) * 1000)


def test_principal_claim_name_and_clock_skew():
    s = server(unsecuredValidatorPrincipalClaimName="client_id", unsecuredValidatorAllowableClockSkewMs="5000")
    # iat 3 s in the future is inside the 5 s skew; exp 2 s ago likewise.
    assert s.evaluate(message(jwt({"client_id": "svc", "iat": NOW + 3, "exp": NOW - 2 + 60}))) == b""
    assert s.authorization_id == "svc"
    s = server(unsecuredValidatorAllowableClockSkewMs="5000")
    assert s.evaluate(message(jwt({"sub": "a", "exp": NOW - 2}))) == b""


@pytest.mark.parametrize("token", [
    jwt({"sub": "alice", "exp": NOW}),  # exp == now: expired
    jwt({"sub": "alice"}),
    jwt({"exp": NOW + 60}),
    jwt({"sub": 7, "exp": NOW + 60}),
    jwt({"sub": " ", "exp": NOW + 60}),
    jwt({"sub": "alice", "exp": NOW + 60, "iat": NOW + 1}),  # issued in the future
    jwt({"sub": "alice", "exp": NOW + 60}, header={"alg": "HS256"}),
    jwt({"sub": "alice", "exp": NOW + 60}, signature="c2ln"),
    "a.b",
    "a..b",
    "bm90anNvbg.e30.",  # header "notjson"
])
def test_invalid_tokens_get_the_challenge_then_fail(token):
    s = server()
    assert s.evaluate(message(token)) == b'{"status":"invalid_token"}'
    assert not s.complete
    with pytest.raises(sasl.SaslAuthenticationFailed, match='invalid_token'):
        s.evaluate(b"\x01")


def test_required_scope():
    s = server(unsecuredValidatorRequiredScope="write read")
    assert s.evaluate(message(jwt({"sub": "a", "exp": NOW + 9, "scope": ["read"]}))) == \
        b'{"status":"insufficient_scope", "scope":"[write, read]"}'
    s = server(unsecuredValidatorRequiredScope="write read")
    assert s.evaluate(message(jwt({"sub": "a", "exp": NOW + 9, "scope": ["read", "write", "x"]}))) == b""
    s = server(unsecuredValidatorRequiredScope="write", unsecuredValidatorScopeClaimName="scp")
    assert s.evaluate(message(jwt({"sub": "a", "exp": NOW + 9, "scp": "write"}))) == b""


@pytest.mark.parametrize("raw", [b"n,,auth=Bearer x\x01\x01", b"n,,\x01auth=Basic abc\x01\x01",
                                 b"n,,\x01\x01", b"\xff\xfe", b"y,,\x01auth=Bearer a.b.\x01\x01"])
def test_unparsable_messages_fail_at_once(raw):
    with pytest.raises(sasl.SaslAuthenticationFailed, match="invalid credentials with SASL mechanism OAUTHBEARER"):
        server().evaluate(raw)


def test_authzid_must_match():
    with pytest.raises(sasl.SaslAuthenticationFailed, match="authorization id"):
        server().evaluate(message(jwt({"sub": "alice", "exp": NOW + 60}), authzid="bob"))


def test_bad_options():
    with pytest.raises(ValueError):
        oauthbearer.UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "-1"})
    with pytest.raises(ValueError):
        oauthbearer.UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "soon"})


# ------------------------------------------------------------------ configuration


def _listener_sasl(**props):
    from kafkapy.server.config import BrokerConfig
    from kafkapy.server.security import listener_securities

    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "log.dirs": "/tmp/kafkapy-unused",
            "sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'}
    return listener_securities(BrokerConfig.from_props({**base, **props}, warn_unknown=False))[0].sasl


OAUTH_JAAS = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required {};'


def test_oauthbearer_and_reauth_configuration():
    from kafkapy.server.config import ConfigException

    sasl_config = _listener_sasl(**{
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            OAUTH_JAAS.format('unsecuredValidatorRequiredScope="a b" unsecuredValidatorAllowableClockSkewMs="250"'),
        "connections.max.reauth.ms": "60000",
        "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": "5000"})
    assert sasl_config.oauth.required_scope == ("a", "b") and sasl_config.oauth.clock_skew_ms == 250
    assert sasl_config.reauth_ms == {"OAUTHBEARER": 5000, "PLAIN": 60000}
    with pytest.raises(ConfigException):  # no OAuthBearerLoginModule entry
        _listener_sasl()
    with pytest.raises(ConfigException):  # a validator kafkapy does not have
        _listener_sasl(**{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS.format(""),
                          "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                              "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"})
    with pytest.raises(ConfigException):
        _listener_sasl(**{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                          OAUTH_JAAS.format('unsecuredValidatorAllowableClockSkewMs="-5"')})


def test_session_lifetime_is_the_smaller_of_max_reauth_and_the_token():
    sasl_config = _listener_sasl(**{
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS.format(""),
        "connections.max.reauth.ms": "60000"})
    for exp_in_s, expected_ms in ((30, 30000), (600, 60000)):
        session = sasl.SaslSession(sasl_config)
        session.mechanism = "OAUTHBEARER"
        session.server = oauthbearer.OAuthBearerServer(sasl_config.oauth)
        now = time.time()
        assert session.server.evaluate(message(jwt({"sub": "u", "exp": now + exp_in_s}))) == b""
        session._session_lifetime()
        assert abs(session.session_lifetime_ms - expected_ms) < 2000 and session.expires_at > 0
