"""SASL/OAUTHBEARER on the server side (RFC 7628) with Kafka's unsecured-JWS
validator (``OAuthBearerUnsecuredValidatorCallbackHandler``), sans-IO.

Configured as in Kafka: the listener's ``listener.name.<l>.oauthbearer.sasl.jaas.config``
(or the broker-wide ``sasl.jaas.config``) names
``org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule`` and
its options choose the validation:

* ``unsecuredValidatorPrincipalClaimName`` (default ``sub``): the claim that
  is the principal's name (``User:<name>``);
* ``unsecuredValidatorScopeClaimName`` (default ``scope``): a string (one
  scope value) or a list of strings;
* ``unsecuredValidatorRequiredScope``: space-separated scope values the token
  must all carry (else ``insufficient_scope``);
* ``unsecuredValidatorAllowableClockSkewMs`` (default 0) for the ``exp`` and
  ``iat`` checks.

A token is a JWS compact serialization ``header.claims.`` whose header says
``"alg":"none"`` and whose signature part is empty. Checks, in Kafka's order:
the principal claim is a string, ``iat`` (optional) is not in the future,
``exp`` (required) is not past, ``exp`` after ``iat``, the required scope.

The exchange: the client's first message is ``n,[a=<authzid>],\\x01auth=Bearer
<token>\\x01[key=value\\x01...]\\x01``. A valid token completes it (empty
server message, the token's ``exp`` is the credential's expiry, which bounds
the session lifetime for re-authentication, KIP-368). An invalid token is
answered with RFC 7628's JSON error challenge (``{"status":"invalid_token"}``
or ``{"status":"insufficient_scope", "scope":"[...]"}``, Kafka's spelling);
the client acknowledges it with a single ``\\x01`` and the server then fails
the authentication with that JSON as the message. A message that does not
parse fails at once with the generic message (no detail to the client).
Tokens are never logged. Owned by one connection's ``SaslSession``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time

from kafkapy.server.security.errors import SaslAuthenticationFailed

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                       "OAuthBearerUnsecuredValidatorCallbackHandler")

_SEP = "\x01"
_SASLNAME = r"(?:[\x01-\x7f](?<![=,])|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*"
_INITIAL = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01\Z")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)\Z")


class InvalidMessage(Exception):
    """The client's message does not parse (answered with the generic failure)."""


class IllegalToken(Exception):
    """A token that fails validation; ``scope``: the required scope that was missing."""

    def __init__(self, reason: str, scope: str | None = None):
        super().__init__(reason)
        self.scope = scope


class UnsecuredValidator:
    """The JAAS options of one listener's OAUTHBEARER (immutable)."""

    __slots__ = ("principal_claim", "scope_claim", "required_scope", "clock_skew_ms")

    def __init__(self, options: dict):
        def option(name, default):
            value = (options.get("unsecuredValidator" + name) or "").strip()
            return value or default

        self.principal_claim = option("PrincipalClaimName", "sub")
        self.scope_claim = option("ScopeClaimName", "scope")
        self.required_scope = tuple(option("RequiredScope", "").split())
        try:
            self.clock_skew_ms = int(option("AllowableClockSkewMs", "0"))
        except ValueError:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must be an integer") from None
        if self.clock_skew_ms < 0:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must not be negative")

    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """``(principal name, expiry in epoch ms)``; raises IllegalToken."""
        if ".." in token:
            raise IllegalToken("Malformed compact serialization contains '..'")
        parts = token.split(".")
        if len(parts) != 3:
            raise IllegalToken("Unsecured JWS compact serializations must have 3 dot-separated "
                               "Base64URL-encoded values")
        header, claims = _json_part(parts[0]), _json_part(parts[1])
        if header.get("alg") != "none":
            raise IllegalToken("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise IllegalToken("Unsecured JWS must not contain a digital signature")
        scope = self._scope(claims)
        exp = claims.get("exp")
        if exp is None:
            raise IllegalToken("No expiration time in JWT")
        if not _is_number(exp):
            raise IllegalToken(f"The 'exp' claim was not of type Number: {type(exp).__name__}")
        principal = claims.get(self.principal_claim)
        if principal is None:
            raise IllegalToken(f"Required claim missing: {self.principal_claim}")
        if not isinstance(principal, str):
            raise IllegalToken(f"The {self.principal_claim} claim had the incorrect type")
        if not principal.strip():
            raise IllegalToken(f"No principal name in JWT claim: {self.principal_claim}")
        iat = claims.get("iat")
        if iat is not None:
            if not _is_number(iat):
                raise IllegalToken(f"The 'iat' claim was not of type Number: {type(iat).__name__}")
            if 1000 * iat > now_ms + self.clock_skew_ms:
                raise IllegalToken("The Issued At value was after the indicated time plus allowable clock skew")
        if now_ms - self.clock_skew_ms >= 1000 * exp:
            raise IllegalToken("The indicated time minus allowable clock skew was on or after the "
                               "Expiration Time value")
        if iat is not None and exp <= iat:
            raise IllegalToken("The Expiration Time time was not after the Issued At time")
        for required in self.required_scope:
            if required not in scope:
                raise IllegalToken(f"The provided scope was missing a required scope ({required})",
                                   scope="[" + ", ".join(self.required_scope) + "]")
        return principal, int(1000 * exp)

    def _scope(self, claims: dict) -> set:
        value = claims.get(self.scope_claim)
        if isinstance(value, str):
            return {value.strip()} if value.strip() else set()
        if value is None:
            return set()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise IllegalToken(f"The '{self.scope_claim}' claim was not of type List")
        return {v.strip() for v in value if v.strip()}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_part(part: str) -> dict:
    try:
        raw = base64.urlsafe_b64decode(part.replace("+", "-").replace("/", "_") + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise IllegalToken("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(raw)
    except ValueError:
        raise IllegalToken("malformed JSON") from None
    if not isinstance(value, dict):
        raise IllegalToken("malformed JSON")
    return value


def parse_initial_response(message: bytes) -> tuple[str, str, dict]:
    """``(token, authorization id, extensions)`` of the client's first message."""
    try:
        text = bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidMessage("Invalid OAUTHBEARER client first message") from None
    m = _INITIAL.match(text)
    if m is None:
        raise InvalidMessage("Invalid OAUTHBEARER client first message")
    pairs = dict(kv.split("=", 1) for kv in m["kvpairs"].split(_SEP) if kv)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise InvalidMessage("Invalid OAUTHBEARER client first message: 'auth' not specified")
    a = _AUTH.match(auth)
    if a is None:
        raise InvalidMessage("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if a["scheme"].lower() != "bearer":
        raise InvalidMessage("Invalid scheme in OAUTHBEARER client first message")
    authzid = (m["authzid"] or "").replace("=2C", ",").replace("=3D", "=")
    return a["token"], authzid, pairs


class OAuthBearerServer:
    """Kafka's OAuthBearerSaslServer with the unsecured validator.
    ``credential_expiration_ms``: the token's ``exp`` once complete."""

    mechanism = "OAUTHBEARER"

    def __init__(self, validator: UnsecuredValidator, clock=time.time):
        self.validator = validator
        self.clock = clock
        self.complete = False
        self.authorization_id = None
        self.credential_expiration_ms = None
        self._error = None  # the JSON challenge sent; the client's \x01 ends the exchange

    def evaluate(self, token: bytes) -> bytes:
        if bytes(token) == b"\x01" and self._error is not None:
            raise SaslAuthenticationFailed(self._error)
        self._error = None
        try:
            value, authzid, _extensions = parse_initial_response(token)
        except InvalidMessage:
            raise SaslAuthenticationFailed("Authentication failed during authentication due to invalid "
                                           "credentials with SASL mechanism OAUTHBEARER") from None
        try:
            principal, expires_ms = self.validator.validate(value, int(self.clock() * 1000))
        except IllegalToken as exc:
            status = "insufficient_scope" if exc.scope is not None else "invalid_token"
            error = f'{{"status":"{status}"'
            if exc.scope is not None:
                error += f', "scope":"{exc.scope}"'
            self._error = error + "}"
            return self._error.encode()
        if authzid and authzid != principal:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an authorization id that "
                                           "is different from the token's principal name")
        self.authorization_id = principal
        self.credential_expiration_ms = expires_ms
        self.complete = True
        return b""
