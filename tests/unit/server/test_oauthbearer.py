"""The OAUTHBEARER server and Kafka's unsecured-JWS validator without
sockets: RFC 7628 client messages, each validation rule with a fixed clock,
the JSON error challenge then failure, and the session lifetime it bounds."""

from __future__ import annotations

import base64
import json

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
