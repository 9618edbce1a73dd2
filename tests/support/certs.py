"""Test certificates, made by the ``openssl`` CLI into a temporary directory.

A CA, a server certificate for 127.0.0.1/localhost signed by it, and client
certificates (for mutual TLS), all PEM; a client's Java stores (PKCS12 and
JKS, written by the JDK's ``keytool``) on request. Keys are throw-away: made
per test module, never checked in.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

_DAYS = "2"


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass
class Certs:
    dir: Path
    ca_cert: Path
    server_cert: Path
    server_key: Path  # PKCS#8, unencrypted
    server_keystore: Path  # key + chain in one PEM (ssl.keystore.location)
    server_key_encrypted: Path  # PKCS#8 encrypted with key_password
    key_password: str

    def client(self, name: str, subject: str) -> tuple[Path, Path]:
        """A client certificate (cert, key) signed by the CA, with ``subject``
        in openssl's /K=V/ form."""
        key, cert = self.dir / f"{name}.key", self.dir / f"{name}.crt"
        if not cert.exists():
            _run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key.name, "-out", f"{name}.csr",
                 "-subj", subject, cwd=self.dir)
            _run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", cert.name, "-days", _DAYS, cwd=self.dir)
        return cert, key


    def java_stores(self, name: str, subject: str, password: str = "store-secret") -> "JavaStores":
        """Client ``name``'s key store and a trust store holding the CA, as a
        Java user has them: written by ``keytool`` (PKCS12, keytool's default
        since Java 9, and JKS), each protected by ``password``."""
        cert, key = self.client(name, subject)
        return self._java_stores(name, cert, key, password)

    def server_java_stores(self, password: str = "store-secret") -> "JavaStores":
        """The server certificate's key store and the CA's trust store, as a
        Kafka operator has them (keytool's JKS and PKCS12)."""
        return self._java_stores("server", self.server_cert, self.server_key, password)

    def _java_stores(self, name: str, cert: Path, key: Path, password: str) -> "JavaStores":
        stores = JavaStores(self.dir / f"{name}.keystore.p12", self.dir / f"{name}.keystore.jks",
                            self.dir / "truststore.p12", self.dir / "truststore.jks", password)
        if stores.keystore_p12.exists():
            return stores
        _run("pkcs12", "-export", "-in", cert.name, "-inkey", key.name, "-certfile", "ca.crt", "-name", name,
             "-out", f"{name}.openssl.p12", "-passout", f"pass:{password}", cwd=self.dir)
        for path, store_type in ((stores.keystore_p12, "PKCS12"), (stores.keystore_jks, "JKS")):
            _keytool("-importkeystore", "-srckeystore", f"{name}.openssl.p12", "-srcstoretype", "PKCS12",
                     "-srcstorepass", password, "-destkeystore", path.name, "-deststoretype", store_type,
                     "-deststorepass", password, cwd=self.dir)
        for path, store_type in ((stores.truststore_p12, "PKCS12"), (stores.truststore_jks, "JKS")):
            if not path.exists():
                _keytool("-importcert", "-noprompt", "-alias", "ca", "-file", "ca.crt", "-keystore", path.name,
                         "-storetype", store_type, "-storepass", password, cwd=self.dir)
        return stores


@dataclass
class JavaStores:
    keystore_p12: Path
    keystore_jks: Path
    truststore_p12: Path
    truststore_jks: Path
    password: str


def _keytool(*args: str, cwd: Path) -> None:
    subprocess.run(["keytool", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


def make_certs(directory: Path, key_password: str = "key-secret") -> Certs:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
         "-days", _DAYS, "-subj", "/CN=kafkapy-test-ca", cwd=d)
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
         "-subj", "/CN=localhost/O=kafkapy", cwd=d)
    _run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "server.crt", "-days", _DAYS, "-extfile", "server.ext", cwd=d)
    _run("pkcs8", "-topk8", "-in", "server.key", "-out", "server.key.enc", "-v2", "aes-256-cbc",
         "-passout", f"pass:{key_password}", cwd=d)
    keystore = d / "server.keystore.pem"
    keystore.write_text((d / "server.key").read_text() + (d / "server.crt").read_text())
    return Certs(d, d / "ca.crt", d / "server.crt", d / "server.key", keystore, d / "server.key.enc",
                 key_password)


def named_listeners(names, protocols: dict) -> tuple[int, dict, dict]:
    """A PLAINTEXT listener (the harness's readiness probe) and one listener
    per name in ``names`` on 127.0.0.1, each on a free port, mapped to its
    security protocol in ``protocols``: (plaintext port, {name: port}, the
    listener overrides)."""
    from .broker import free_port

    ports = {name: free_port() for name in names}
    port = free_port()
    listeners = ",".join([f"PLAINTEXT://127.0.0.1:{port}"] + [f"{n}://127.0.0.1:{ports[n]}" for n in names])
    protocol_map = ",".join(["PLAINTEXT:PLAINTEXT"] + [f"{n}:{protocols[n]}" for n in names])
    return port, ports, {"listeners": listeners, "advertised.listeners": listeners,
                         "listener.security.protocol.map": protocol_map}
