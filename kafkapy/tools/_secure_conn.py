"""One blocking connection to a broker for tools that send raw requests,
with the client side of Kafka's security settings from ``--command-config``.

librdkafka takes no JAAS text, so the Java client's properties go through
``kafkapy.client.security`` (the mechanism the brokers' own clients use); tools that must reach a
secured listener (kafkapy-acls) use this: ``security.protocol`` PLAINTEXT,
SSL, SASL_PLAINTEXT or SASL_SSL; ``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or
SCRAM-SHA-512 with the user from ``sasl.jaas.config`` (``username="..."
password="..."``); TLS from the ``ssl.*`` keys, through the builder the
broker uses too (``kafkapy.client.ssl_factory``, client mode): trust from
``ssl.truststore.location`` (PEM) or ``ssl.ca.location``, a client
certificate from ``ssl.keystore.location`` (PEM: key and chain), host name
checks per ``ssl.endpoint.identification.algorithm`` (Kafka's default https).

Requests are kafkapy's codec over the broker's API table at the version the
caller names (non-flexible header v1, or v2 for flexible versions).
"""

from __future__ import annotations

import ssl

from kafkapy.client import security as client_security
from kafkapy.client.blocking import BlockingConnection
from kafkapy.tools._client import ClientError


class SecureConnection:
    """A ``BlockingConnection`` whose failures are the tools' ``ClientError``s."""

    def __init__(self, bootstrap: str, props: dict, client_id: str, timeout_s: float = 30.0):
        first = bootstrap.split(",")[0].strip()
        host, _, port = first.rpartition(":")
        self.host = host.strip("[]") or "localhost"
        try:
            security = client_security.ClientSecurity.from_client_properties(props)
        except ValueError as exc:
            raise ClientError("INVALID_CONFIG", -1, str(exc)) from None
        try:
            self.conn = BlockingConnection((self.host, int(port)), timeout_s, security, client_id.encode())
        except client_security.AuthenticationFailed as exc:
            name = "UNSUPPORTED_SASL_MECHANISM" if exc.error_code == 33 else "SASL_AUTHENTICATION_FAILED"
            raise ClientError(name, exc.error_code, str(exc)) from None
        except (OSError, ssl.SSLError) as exc:
            raise ClientError("NETWORK_EXCEPTION", -1, f"cannot connect to {first}: {exc}") from None

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def request(self, api_key: int, version: int, data: dict):
        """One request built from ``data`` -> the decoded response entity."""
        try:
            return self.conn.request(api_key, version, data)
        except ConnectionError:
            raise ClientError("NETWORK_EXCEPTION", -1, "the broker closed the connection") from None
        except ValueError as exc:
            raise ClientError("CORRELATION_ID_MISMATCH", -1, str(exc)) from None
