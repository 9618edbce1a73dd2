"""The client side of Kafka's security protocols, for kafkapy's own connections.

One mechanism for every kafkapy connection that must reach a secured
listener: the broker's inter-broker clients (replica fetchers through
``conn.Connection``, the controller's channel, the transaction coordinator's
marker writer) and the tools' ``_secure_conn.SecureConnection``.

``ClientSecurity`` says what to speak: ``PLAINTEXT``, ``SSL``,
``SASL_PLAINTEXT`` or ``SASL_SSL``; a client ``ssl.SSLContext`` (built by
``ssl_factory``: trust, an optional client certificate for mutual TLS, host
name checks per ``ssl.endpoint.identification.algorithm``); a SASL mechanism
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with the username and password.
``authenticate`` is the client side of the SASL exchange (SaslHandshake v1,
SaslAuthenticate v0: what Kafka's clients send to brokers of any version);
``blocking.open_socket`` connects, completes the TLS handshake and runs it,
and the caller then speaks Kafka over the socket (blocking, or non-blocking
after ``setblocking(False)``: ``Connection`` does that). SCRAM's
mechanisms and ``salted_password`` (Kafka's ScramMechanism and ScramFormatter,
which are in its clients too) serve the broker's credential store and
kafkapy-configs as well.

Who builds one: the broker from its inter-broker listener's keys
(``kafkapy.server.security.inter_broker``), the tools from a Java client's
``--command-config`` properties (``from_client_properties``), kafkapy's
producer, consumer and admin client from their settings
(``config.security``; their ``KafkaClient`` hands it to every
``conn.Connection``). Immutable.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import ssl
from dataclasses import dataclass

from kafkapy.client import ssl_factory


PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class AuthenticationFailed(ConnectionError):
    """The broker refused the SASL mechanism or the credentials (a
    ConnectionError, so callers that retry lost connections retry this too,
    with their back-off, as Kafka's inter-broker clients do)."""

    def __init__(self, message: str, error_code: int = 58):  # SASL_AUTHENTICATION_FAILED
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def tls(self) -> bool:
        return self.ssl_context is not None

    def __repr__(self) -> str:  # never the password
        return f"ClientSecurity({self.protocol}, mechanism={self.mechanism}, username={self.username})"

    @classmethod
    def from_client_properties(cls, props: dict) -> "ClientSecurity":
        """From a Java client's properties (``security.protocol``,
        ``sasl.mechanism`` with ``username``/``password`` in
        ``sasl.jaas.config``, the ``ssl.*`` keys ``ssl_factory`` reads in
        client mode, librdkafka's names of the stores among them; librdkafka's
        ``sasl.mechanisms``, ``sasl.username`` and ``sasl.password`` too);
        ValueError names what is missing or wrong (``SslConfigError`` for an
        ``ssl.*`` key, never with a password)."""
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise ValueError(f"security.protocol {protocol} is not supported")
        ctx = None
        if protocol.endswith("SSL"):
            ctx = ssl_factory.create_context("client", props.get,
                                             "the client")
        mechanism = user = password = None
        if protocol.startswith("SASL"):
            # Java's sasl.mechanism or librdkafka's sasl.mechanisms; the login
            # from Java's JAAS text or librdkafka's sasl.username/sasl.password.
            mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").upper()
            jaas = props.get("sasl.jaas.config", "")
            user = jaas_option(jaas, "username") or props.get("sasl.username")
            password = jaas_option(jaas, "password") or props.get("sasl.password")
            if mechanism not in MECHANISMS or user is None or password is None:
                raise ValueError(f"sasl.mechanism {mechanism} with a username and password in "
                                 "sasl.jaas.config is needed")
        return cls(protocol, ctx, mechanism, user, password)


def jaas_option(jaas: str, key: str) -> str | None:
    """``key="value"`` of a JAAS text (the first), unescaped, or None."""
    match = re.search(rf'\b{key}\s*=\s*"((?:[^"\\]|\\.)*)"', jaas or "")
    return re.sub(r"\\(.)", r"\1", match.group(1)) if match else None


# -- SCRAM's mechanisms: Kafka's ScramMechanism and ScramFormatter, both in its clients --
DEFAULT_ITERATIONS = 4096  # ScramMechanism.minIterations, and kafka-configs' default
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's org.apache.kafka.clients.admin.ScramMechanism types (0: UNKNOWN).
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF_MECHANISM = {name: t for t, name in MECHANISM_TYPES.items()}


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's SaltedPassword = Hi(password, salt, i) (what an admin client
    sends in AlterUserScramCredentials)."""
    return hashlib.pbkdf2_hmac(SCRAM_HASHES[mechanism], password.encode("utf-8"), salt, iterations)


# -- SASL: the client side of SaslHandshake v1 + SaslAuthenticate v0 -----------------
def authenticate(call, mechanism: str, user: str, password: str) -> None:
    """``call(api_key, version, data) -> response`` carries the exchange;
    AuthenticationFailed when the broker refuses."""
    answer = call(SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    if answer.error_code:
        raise AuthenticationFailed(f"the broker does not offer {mechanism} (it offers "
                                   f"{', '.join(answer.mechanisms)})", answer.error_code)

    def step(token: bytes) -> bytes:
        reply = call(SASL_AUTHENTICATE, 0, {"auth_bytes": token})
        if reply.error_code:
            raise AuthenticationFailed(reply.error_message or "authentication failed", reply.error_code)
        return bytes(reply.auth_bytes)

    if mechanism == "PLAIN":
        step(f"\0{user}\0{password}".encode())
        return
    scram = ScramClient(mechanism, user, password)
    scram.verify_server_final(step(scram.client_final(step(scram.client_first()))))


class ScramClient:
    """RFC 5802 client messages (Kafka's ScramSaslClient, no channel binding)."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None):
        self.mechanism = mechanism
        self.hash = SCRAM_HASHES[mechanism]
        self.password = password
        self.nonce = nonce or base64.b64encode(os.urandom(18)).decode()
        self.bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"
        self.server_signature = b""

    def client_first(self) -> bytes:
        return f"n,,{self.bare}".encode()

    def client_final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        fields = dict(item.split("=", 1) for item in text.split(","))
        if not fields.get("r", "").startswith(self.nonce):
            raise AuthenticationFailed("the server's nonce does not extend the client's")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        without_proof = f"c=biws,r={fields['r']}"
        message = f"{self.bare},{text},{without_proof}".encode()
        signature = hmac.new(hashlib.new(self.hash, client_key).digest(), message, self.hash).digest()
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self.server_signature = hmac.new(server_key, message, self.hash).digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        return f"{without_proof},p={proof}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        verifier = server_final.decode().partition("v=")[2]
        if not hmac.compare_digest(base64.b64decode(verifier), self.server_signature):
            raise AuthenticationFailed("the server's SCRAM signature does not verify")
