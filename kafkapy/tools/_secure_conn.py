"""One blocking connection to a broker for tools that send raw requests,
with the client side of Kafka's security settings from ``--command-config``.

Neither kafkapy's client (PLAINTEXT only) nor librdkafka (no JAAS text)
takes a Java client's properties as they are, so tools that must reach a
secured listener (kafkapy-acls) use this: ``security.protocol`` PLAINTEXT,
SSL, SASL_PLAINTEXT or SASL_SSL; ``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or
SCRAM-SHA-512 with the user from ``sasl.jaas.config`` (``username="..."
password="..."``); TLS trust from ``ssl.truststore.location`` (PEM) or
``ssl.ca.location``, a client certificate from ``ssl.keystore.location``
(PEM: key and chain), host name checks per
``ssl.endpoint.identification.algorithm`` (Kafka's default https).

Requests are kafkapy's codec over the broker's API table at the version the
caller names (non-flexible header v1, or v2 for flexible versions).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import socket
import ssl
import struct

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.protocol.headers import skip_tagged_fields
from kafkapy.tools._client import ClientError

_SIZE = struct.Struct(">i")
_SASL_HANDSHAKE, _SASL_AUTHENTICATE = 17, 36


def _jaas_option(jaas: str, key: str) -> str | None:
    match = re.search(rf'\b{key}\s*=\s*"((?:[^"\\]|\\.)*)"', jaas or "")
    return match.group(1) if match else None


class SecureConnection:
    def __init__(self, bootstrap: str, props: dict, client_id: str, timeout_s: float = 30.0):
        first = bootstrap.split(",")[0].strip()
        host, _, port = first.rpartition(":")
        self.host = host.strip("[]") or "localhost"
        self.client_id = client_id.encode()
        self.correlation_id = 0
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ClientError("INVALID_CONFIG", -1, f"security.protocol {protocol} is not supported")
        try:
            sock = socket.create_connection((self.host, int(port)), timeout=timeout_s)
        except OSError as exc:
            raise ClientError("NETWORK_EXCEPTION", -1, f"cannot connect to {first}: {exc}") from None
        if protocol.endswith("SSL"):
            sock = self._tls(sock, props)
        self.sock = sock
        if protocol.startswith("SASL"):
            self._sasl(props)

    def _tls(self, sock, props):
        ctx = ssl.create_default_context(cafile=props.get("ssl.truststore.location") or props.get("ssl.ca.location")
                                         or None)
        if props.get("ssl.endpoint.identification.algorithm", "https") == "":
            ctx.check_hostname = False
        keystore = props.get("ssl.keystore.location")
        if keystore:
            ctx.load_cert_chain(keystore, password=props.get("ssl.key.password") or None)
        return ctx.wrap_socket(sock, server_hostname=self.host)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- frames ------------------------------------------------------------------------
    def _recv(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ClientError("NETWORK_EXCEPTION", -1, "the broker closed the connection")
            out += chunk
        return bytes(out)

    def _frame(self, api_key: int, version: int, body: bytes, flexible: bool) -> memoryview:
        self.correlation_id += 1
        header = struct.pack(">hhih", api_key, version, self.correlation_id, len(self.client_id)) + self.client_id
        frame = header + (b"\x00" if flexible else b"") + body
        self.sock.sendall(_SIZE.pack(len(frame)) + frame)
        raw = memoryview(self._recv(_SIZE.unpack(self._recv(4))[0]))
        if struct.unpack_from(">i", raw)[0] != self.correlation_id:
            raise ClientError("CORRELATION_ID_MISMATCH", -1, "an answer to another request")
        return raw

    def request(self, api_key: int, version: int, data: dict):
        """One request built from ``data`` -> the decoded response entity."""
        spec = API_TABLE[api_key]
        flexible = spec.is_flexible(version)
        raw = self._frame(api_key, version, encode_to_bytes(construct(spec.request_class(version), data)),
                          flexible)
        offset = skip_tagged_fields(raw, 4) if flexible and api_key != 18 else 4
        return decode(spec.response_class(version), raw, offset)[0]

    # -- SASL (the client side of SaslHandshake v1 + SaslAuthenticate v0) -----------
    def _sasl(self, props: dict) -> None:
        mechanism = props.get("sasl.mechanism", "GSSAPI").upper()
        jaas = props.get("sasl.jaas.config", "")
        user, password = _jaas_option(jaas, "username"), _jaas_option(jaas, "password")
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") or user is None or password is None:
            raise ClientError("INVALID_CONFIG", -1, f"sasl.mechanism {mechanism} with a username and password in "
                                                    "sasl.jaas.config is needed")
        answer = self.request(_SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        if answer.error_code:
            raise ClientError("UNSUPPORTED_SASL_MECHANISM", answer.error_code,
                              f"the broker offers {', '.join(answer.mechanisms)}")
        if mechanism == "PLAIN":
            self._authenticate(f"\0{user}\0{password}".encode())
            return
        name = "sha256" if mechanism.endswith("256") else "sha512"
        nonce = base64.b64encode(os.urandom(18)).decode()
        bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={nonce}"
        first = dict(item.split("=", 1) for item in self._authenticate(f"n,,{bare}".encode()).decode().split(","))
        salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(first["s"]), int(first["i"]))
        client_key = hmac.new(salted, b"Client Key", name).digest()
        without_proof = f"c=biws,r={first['r']}"
        message = f"{bare},r={first['r']},s={first['s']},i={first['i']},{without_proof}".encode()
        signature = hmac.new(hashlib.new(name, client_key).digest(), message, name).digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        self._authenticate(f"{without_proof},p={proof}".encode())

    def _authenticate(self, token: bytes) -> bytes:
        answer = self.request(_SASL_AUTHENTICATE, 0, {"auth_bytes": token})
        if answer.error_code:
            raise ClientError("SASL_AUTHENTICATION_FAILED", answer.error_code, answer.error_message or "")
        return bytes(answer.auth_bytes)
