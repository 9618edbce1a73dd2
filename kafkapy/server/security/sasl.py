"""SASL on the server side, sans-IO: Kafka's SaslServerAuthenticator state
machine and the PLAIN and SCRAM-SHA-256/512 mechanisms.

The processor owning a connection on a SASL listener feeds every complete
request frame (size prefix stripped) to its ``SaslSession`` until the session
is complete, and does what it answers (``Action``): pass the request on to the
handler workers (ApiVersions only), send a reply, or send a failure reply and
close the connection after ``connection.failed.authentication.delay.ms``.
The rules are Kafka's:

* Before the handshake only ApiVersions and SaslHandshake (v0-1) are
  accepted; any other request closes the connection.
* SaslHandshake v1: the tokens then travel in SaslAuthenticate (v0-2)
  requests; SaslHandshake v0 (old clients): the tokens travel as raw
  size-prefixed frames, the server's tokens likewise.
* A mechanism not enabled: UNSUPPORTED_SASL_MECHANISM with the enabled list,
  then the connection is closed. Bad credentials: SASL_AUTHENTICATION_FAILED
  (v1: in the SaslAuthenticate response), then the connection is closed.
* Once authenticated the principal is ``User:<authorization id>`` and
  every request goes to the workers (whose SaslHandshake and SaslAuthenticate
  handlers answer ILLEGAL_SASL_STATE, as KafkaApis does).
* Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 (or an
  OAUTHBEARER token, whose expiry bounds it) the completed authentication
  has a session lifetime, told to SaslAuthenticate v1+ clients
  (``session_lifetime_ms``; ``SaslSession.expires_at`` for the processor). A
  SaslHandshake on the authenticated connection (at most one per second)
  starts a new ``SaslSession`` with ``previous`` = (mechanism, principal):
  ApiVersions is not accepted then, a different mechanism is refused on its
  first token, and a different principal fails the re-authentication
  ("Cannot change principals during re-authentication ...").

Passwords never appear in a log line or an error message.
Owned by one processor, one ``SaslSession`` per connection.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import os
import re
import struct
import time

from kio.static.primitive import i64Timedelta

from kafkapy.client.security import DEFAULT_ITERATIONS, SCRAM_HASHES
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import DecodeError, decode
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.headers import encode_response, read_request_header, skip_tagged_fields
from kafkapy.server.config.types import ConfigException, secret
from kafkapy.server.security import oauthbearer
from kafkapy.server.security.errors import SaslAuthenticationFailed

# The mechanisms a listener's sasl.enabled.mechanisms may name.
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
API_VERSIONS_KEY = 18
# Served here (the workers' handlers only answer ILLEGAL_SASL_STATE).
HANDSHAKE_VERSIONS = (0, 1)
AUTHENTICATE_VERSIONS = (0, 2)


# ---------------------------------------------------------------------------
# JAAS configuration (PLAIN users)
# ---------------------------------------------------------------------------

_JAAS_TOKEN = re.compile(r'\s*(?:(;)|([A-Za-z_][\w.$-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))|([^\s;=]+))')


def parse_jaas_config(text: str) -> list[tuple[str, str, dict]]:
    """``module flag key="value" ...;`` entries (Kafka's JaasConfig syntax) as
    ``(login module class, control flag, options)``."""
    entries = []
    module = flag = None
    options: dict[str, str] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _JAAS_TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError("invalid JAAS configuration")  # the text may hold passwords: not shown
        pos = m.end()
        if m.group(1):
            if module is None or flag is None:
                raise ValueError("invalid JAAS configuration: a login module and a control flag are required")
            entries.append((module, flag, options))
            module = flag = None
            options = {}
        elif m.group(2):
            if flag is None:
                raise ValueError("invalid JAAS configuration: options before the control flag")
            value = m.group(3) if m.group(3) is not None else m.group(4)
            options[m.group(2)] = re.sub(r"\\(.)", r"\1", value) if m.group(3) is not None else value
        elif module is None:
            module = m.group(5)
        elif flag is None:
            if m.group(5) not in ("required", "requisite", "sufficient", "optional"):
                raise ValueError(f"invalid JAAS configuration: control flag {m.group(5)!r}")
            flag = m.group(5)
        else:
            raise ValueError("invalid JAAS configuration")
    if module is not None:
        raise ValueError("invalid JAAS configuration: an entry must end with ';'")
    return entries


PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _mechanism_jaas(config, listener: str, mechanism: str, login_module: str) -> list:
    """The options of ``login_module`` in ``listener.name.<l>.<mechanism>.sasl.jaas.config``
    (the broker-wide ``sasl.jaas.config`` as a fallback), one dict per entry."""
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    raw = config.originals.get(key)
    jaas = raw if raw is not None else secret(config["sasl.jaas.config"])
    if not jaas:
        raise ConfigException(key, None, f"listener {listener}: {mechanism} needs a JAAS configuration "
                                         f"with {login_module}")
    try:
        entries = parse_jaas_config(jaas)
    except ValueError as exc:
        raise ConfigException(key, "[hidden]", str(exc)) from None
    return [options for module, _flag, options in entries if module == login_module]


def _reauth_ms(config, listener: str, mechanism: str, get) -> int:
    """``connections.max.reauth.ms`` for one mechanism of one listener:
    ``listener.name.<l>.<mechanism>.connections.max.reauth.ms``, else the
    listener's, else the broker's (Kafka's per-mechanism prefix)."""
    from kafkapy.server.config.broker_keys import BROKER_CONFIGS

    raw = config.originals.get(f"listener.name.{listener.lower()}.{mechanism.lower()}.connections.max.reauth.ms")
    if raw is None:
        return get("connections.max.reauth.ms") or 0
    value = BROKER_CONFIGS["connections.max.reauth.ms"].parse(raw)
    if value < 0:
        raise ConfigException("connections.max.reauth.ms", raw, "must be at least 0")
    return value


class SaslConfig:
    """One SASL listener's mechanisms and credential sources (immutable).
    ``reauth_ms``: ``connections.max.reauth.ms`` by mechanism."""

    __slots__ = ("listener", "mechanisms", "plain_users", "scram_store", "max_receive_size",
                 "failed_delay_ms", "oauth", "reauth_ms")

    def __init__(self, listener, mechanisms, plain_users, scram_store, max_receive_size, failed_delay_ms,
                 oauth=None, reauth_ms=None):
        self.listener = listener
        self.mechanisms = tuple(mechanisms)
        self.plain_users = plain_users
        self.scram_store = scram_store
        self.max_receive_size = max_receive_size
        self.failed_delay_ms = failed_delay_ms
        self.oauth = oauth
        self.reauth_ms = reauth_ms or {}

    @classmethod
    def from_config(cls, config, listener: str, get, log_dir: str, table=None) -> "SaslConfig":
        from kafkapy.server.security.scram_store import ScramCredentialStore

        mechanisms = [m.strip().upper() for m in get("sasl.enabled.mechanisms") if m.strip()]
        unsupported = [m for m in mechanisms if m not in MECHANISMS]
        if unsupported or not mechanisms:
            raise ConfigException("sasl.enabled.mechanisms", ",".join(mechanisms),
                                  f"listener {listener}: kafkapy implements {', '.join(MECHANISMS)}")
        plain_users: dict[str, str] = {}
        if "PLAIN" in mechanisms:
            for options in _mechanism_jaas(config, listener, "PLAIN", PLAIN_LOGIN_MODULE):
                plain_users.update({k[5:]: v for k, v in options.items() if k.startswith("user_")})
        oauth = None
        if "OAUTHBEARER" in mechanisms:
            oauth = cls._oauth_validator(config, listener)
        reauth_ms = {m: _reauth_ms(config, listener, m, get) for m in mechanisms}
        return cls(listener, mechanisms, plain_users, ScramCredentialStore(log_dir, table, bool(config["zookeeper.connect"])),
                   get("sasl.server.max.receive.size"), get("connection.failed.authentication.delay.ms"),
                   oauth, reauth_ms)

    @staticmethod
    def _oauth_validator(config, listener: str):
        handler_key = f"listener.name.{listener.lower()}.oauthbearer.sasl.server.callback.handler.class"
        handler = config.originals.get(handler_key)
        if handler and handler.strip() != oauthbearer.UNSECURED_VALIDATOR:
            raise ConfigException(handler_key, handler, "kafkapy implements OAUTHBEARER with Kafka's "
                                                        "unsecured JWS validator only")
        entries = _mechanism_jaas(config, listener, "OAUTHBEARER", oauthbearer.LOGIN_MODULE)
        if len(entries) != 1:
            raise ConfigException(f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config", "[hidden]",
                                  f"exactly one {oauthbearer.LOGIN_MODULE} entry is required")
        try:
            return oauthbearer.UnsecuredValidator(entries[0])
        except ValueError as exc:
            raise ConfigException(f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config",
                                  "[hidden]", str(exc)) from None

    def server(self, mechanism: str):
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        if mechanism == "OAUTHBEARER":
            return oauthbearer.OAuthBearerServer(self.oauth)
        return ScramServer(mechanism, self.scram_store)


# ---------------------------------------------------------------------------
# Mechanisms
# ---------------------------------------------------------------------------

class PlainServer:
    """RFC 4616: one token ``[authzid] NUL authcid NUL passwd``."""

    credential_expiration_ms = None  # passwords do not expire

    def __init__(self, users: dict):
        self.users = users
        self.complete = False
        self.authorization_id = None

    def evaluate(self, token: bytes) -> bytes:
        parts = bytes(token).split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got "
                                           f"{len(parts)}")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(username)
        # Compared in constant time whether or not the user exists.
        ok = hmac.compare_digest((expected if expected is not None else "\x00" + password).encode(),
                                 password.encode())
        if expected is None or not ok:
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an authorization id "
                                           "that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


_CLIENT_FIRST = re.compile(r"n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<name>[^,]+),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
                           r"(?P<ext>(?:,[A-Za-z]+=[^,]*)*))\Z")
_CLIENT_FINAL = re.compile(r"(?P<without>c=(?P<channel>[A-Za-z0-9+/=]+),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
                           r"(?:,[A-Za-z]+=[^,]*)*),p=(?P<proof>[A-Za-z0-9+/=]+)\Z")


def _saslname(text: str) -> str:
    return text.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """RFC 5802 / RFC 7677 server (Kafka's ScramSaslServer): client-first ->
    server-first (salt, iterations, nonce), client-final (proof) -> server-final."""

    credential_expiration_ms = None  # delegation tokens (which expire) are not implemented

    def __init__(self, mechanism: str, store, server_nonce: str | None = None):
        self.mechanism = mechanism
        self._server_nonce = server_nonce  # tests: RFC 7677's example; else random
        self.hash = SCRAM_HASHES[mechanism]
        self.store = store
        self.complete = False
        self.authorization_id = None
        self._step = 0
        self._credential = None
        self._client_first_bare = self._server_first = ""
        self._nonce = ""
        self._gs2 = ""
        self._name = ""

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.hash).digest()

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Invalid SCRAM message: not UTF-8") from None
        if self._step == 0:
            return self._client_first(text)
        if self._step == 1:
            return self._client_final(text)
        raise SaslAuthenticationFailed("Unexpected SCRAM message after authentication completed")

    def _invalid(self):
        return SaslAuthenticationFailed("Authentication failed during authentication due to invalid "
                                        f"credentials with SASL mechanism {self.mechanism}")

    def _client_first(self, text: str) -> bytes:
        m = _CLIENT_FIRST.match(text)
        if m is None:
            raise SaslAuthenticationFailed("Invalid SCRAM client first message")
        extensions = dict(kv[1:].split("=", 1) for kv in re.findall(r",[A-Za-z]+=[^,]*", m["ext"]))
        if extensions.get("tokenauth", "").lower() == "true":
            raise self._invalid()  # delegation tokens are not implemented
        name = _saslname(m["name"])
        if m["authzid"] and _saslname(m["authzid"]) != name:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an authorization id "
                                           "that is different from username")
        credential = self.store.get(name, self.mechanism)
        if credential is None or credential.iterations < DEFAULT_ITERATIONS:
            raise self._invalid()
        self._credential = credential
        self._name = name
        self._gs2 = text[: m.start("bare")]
        self._client_first_bare = m["bare"]
        self._nonce = m["nonce"] + (self._server_nonce or base64.b64encode(os.urandom(24)).decode().rstrip("="))
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._step = 1
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        m = _CLIENT_FINAL.match(text)
        if m is None:
            raise SaslAuthenticationFailed("Invalid SCRAM client final message")
        # Kafka's ScramSaslServer checks endsWith, not equality: librdkafka
        # 2.0.x (Debian's kcat) sends its own nonce before the combined one.
        # The proof still covers the message as sent.
        if not m["nonce"].endswith(self._nonce):
            raise SaslAuthenticationFailed("Invalid client nonce in the final client message.")
        try:
            channel = base64.b64decode(m["channel"], validate=True)
            proof = base64.b64decode(m["proof"], validate=True)
        except ValueError:
            raise SaslAuthenticationFailed("Invalid SCRAM client final message") from None
        if channel != self._gs2.encode():
            raise SaslAuthenticationFailed("Invalid channel binding in the final client message.")
        auth_message = f"{self._client_first_bare},{self._server_first},{m['without']}".encode()
        cred = self._credential
        signature = self._hmac(cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._invalid()
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), cred.stored_key):
            raise self._invalid()
        self._step = 2
        self.complete = True
        self.authorization_id = self._name
        server_signature = self._hmac(cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


# ---------------------------------------------------------------------------
# The authenticator state machine
# ---------------------------------------------------------------------------

# Actions for the processor.
PASS = 0  # hand the request to the workers as usual (ApiVersions)
REPLY = 1  # send ``parts``; authentication goes on (or completed: ``session.principal``)
FAIL = 2  # after the failed-authentication delay, send ``parts`` (may be empty) and close
CLOSE = 3  # close now (a protocol violation: Kafka's IllegalSaslStateException and friends)

_HANDSHAKE, _AUTHENTICATE, _COMPLETE, _FAILED, _BAD_MECHANISM = range(5)
_SIZE = struct.Struct(">i")


class SaslSession:
    """One connection's authentication or re-authentication (owned by its
    processor). ``previous``: (mechanism, principal) of the authentication
    being renewed (KIP-368), None for the first. Once complete:
    ``principal``, ``session_lifetime_ms`` (0: the session does not expire)
    and ``expires_at`` (``time.monotonic()`` seconds, 0.0: never)."""

    __slots__ = ("config", "state", "raw_tokens", "server", "principal", "mechanism", "previous",
                 "session_lifetime_ms", "expires_at", "bad_mechanism")

    def __init__(self, config: SaslConfig, previous: tuple | None = None):
        self.config = config
        self.state = _HANDSHAKE
        self.raw_tokens = False  # SaslHandshake v0: tokens are unframed
        self.server = None
        self.principal = None
        self.mechanism = None
        self.previous = previous
        self.session_lifetime_ms = 0
        self.expires_at = 0.0
        self.bad_mechanism = None

    @property
    def complete(self) -> bool:
        return self.state == _COMPLETE

    @property
    def what(self) -> str:
        return "re-authentication" if self.previous else "authentication"

    def on_request(self, body) -> tuple[int, list]:
        """What to do with one complete frame (without its size prefix)."""
        if self.state == _AUTHENTICATE and self.raw_tokens:
            return self._token(bytes(body), None)
        buf = memoryview(body)
        try:
            header = read_request_header(buf)
        except DecodeError:
            return CLOSE, []
        key, version = header.api_key, header.api_version
        if self.state == _HANDSHAKE:
            if key == API_VERSIONS_KEY and self.previous is None:
                return PASS, []
            if key != SASL_HANDSHAKE_KEY or not HANDSHAKE_VERSIONS[0] <= version <= HANDSHAKE_VERSIONS[1]:
                return CLOSE, []
            request = self._decode(key, version, buf, header)
            if request is None:
                return CLOSE, []
            mechanism = request.mechanism
            response_cls = API_TABLE[key].response_class(version)
            if mechanism not in self.config.mechanisms:
                self.state = _FAILED
                response = response_cls(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                        mechanisms=self.config.mechanisms)
                return FAIL, encode_response(header.correlation_id, response, False)
            self.mechanism = mechanism
            self.raw_tokens = version == 0
            if self.previous is not None and mechanism != self.previous[0]:
                # Kafka answers the handshake and refuses the first token
                # (REAUTH_BAD_MECHANISM), so the failure is counted as a
                # failed re-authentication.
                self.state = _BAD_MECHANISM
                self.bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                      f"re-authentication of mechanism '{self.previous[0]}'")
            else:
                self.server = self.config.server(mechanism)
                self.state = _AUTHENTICATE
            response = response_cls(error_code=ErrorCode.NONE, mechanisms=self.config.mechanisms)
            return REPLY, encode_response(header.correlation_id, response, False)
        if self.state in (_AUTHENTICATE, _BAD_MECHANISM):
            if key != SASL_AUTHENTICATE_KEY or not AUTHENTICATE_VERSIONS[0] <= version <= AUTHENTICATE_VERSIONS[1]:
                return CLOSE, []
            request = self._decode(key, version, buf, header)
            if request is None:
                return CLOSE, []
            return self._token(request.auth_bytes, (header.correlation_id, version))
        return CLOSE, []

    def _decode(self, key, version, buf, header):
        spec = API_TABLE[key]
        try:
            offset = header.offset
            flexible = spec.is_flexible(version)
            if flexible:
                offset = skip_tagged_fields(buf, offset)
            request, _ = decode(spec.request_class(version), buf, offset)
        except DecodeError:
            return None
        return request

    def _token(self, token: bytes, framed) -> tuple[int, list]:
        try:
            if self.state == _BAD_MECHANISM:
                raise SaslAuthenticationFailed(self.bad_mechanism)
            challenge = self.server.evaluate(token)
            if self.server.complete:
                principal = f"User:{self.server.authorization_id}"
                if self.previous is not None and principal != self.previous[1]:
                    old, new = self.previous[1].split(":", 1), principal.split(":", 1)
                    raise SaslAuthenticationFailed(f"Cannot change principals during re-authentication from "
                                                   f"{old[0]}.{old[1]}: {new[0]}.{new[1]}")
        except SaslAuthenticationFailed as exc:
            self.state = _FAILED
            if framed is None:
                return FAIL, []  # v0: the client sees the connection close
            return FAIL, self._authenticate_response(framed, ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b"")
        if self.server.complete:
            self.state = _COMPLETE
            self.principal = principal
            self._session_lifetime()
        if framed is None:
            return REPLY, [_SIZE.pack(len(challenge)) + challenge]
        return REPLY, self._authenticate_response(framed, ErrorCode.NONE, None, challenge,
                                                  self.session_lifetime_ms)

    def _session_lifetime(self) -> None:
        """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: the smaller
        of connections.max.reauth.ms (when > 0) and the time left on the
        credential (an OAUTHBEARER token's exp), never negative."""
        credential_ms = self.server.credential_expiration_ms
        max_reauth_ms = self.config.reauth_ms.get(self.mechanism, 0)
        if credential_ms is None and max_reauth_ms <= 0:
            return
        now_ms = int(time.time() * 1000)
        lifetimes = [] if credential_ms is None else [credential_ms - now_ms]
        if max_reauth_ms > 0:
            lifetimes.append(max_reauth_ms)
        self.session_lifetime_ms = max(0, min(lifetimes))
        # An expired session is detected on the connection's next request;
        # a lifetime of 0 expires at once (never "no expiry").
        self.expires_at = time.monotonic() + self.session_lifetime_ms / 1000.0

    @staticmethod
    def _authenticate_response(framed, error_code, message, auth_bytes, lifetime_ms=0) -> list:
        correlation_id, version = framed
        spec = API_TABLE[SASL_AUTHENTICATE_KEY]
        cls = spec.response_class(version)
        fields = {"error_code": error_code, "error_message": message, "auth_bytes": auth_bytes}
        if version >= 1:
            fields["session_lifetime"] = i64Timedelta.parse(datetime.timedelta(milliseconds=lifetime_ms))
        response = cls(**fields)
        return encode_response(correlation_id, response, spec.is_flexible(version))
