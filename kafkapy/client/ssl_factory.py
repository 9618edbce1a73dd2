"""Every ``ssl.SSLContext`` kafkapy builds, from Kafka's ``ssl.*`` settings
(Kafka's ``DefaultSslEngineFactory``), in server mode or client mode.

* Server mode: a broker listener's (``kafkapy.server.security``). A key store
  is required; ``ssl.client.auth`` none/requested/required is CERT_NONE /
  OPTIONAL / REQUIRED; a server never checks its clients' host names.
* Client mode: the broker's inter-broker client (its inter-broker listener's
  keys) and the tools (a Java client's ``--command-config`` properties). The
  trust store verifies the server (the system's when none is given); the key
  store, when given, is the client certificate (mutual TLS);
  ``ssl.endpoint.identification.algorithm`` ``https`` checks the host name
  (empty, or librdkafka's ``none``: not checked).

Both modes read the same keys: ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3)
and ``ssl.cipher.suites`` bound the handshake (``apply_cipher_suites``);
``ssl.keystore.type=PEM`` with either a file (``ssl.keystore.location``:
private key and certificate chain) or inline values
(``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``), the key
optionally encrypted with ``ssl.key.password``; ``ssl.truststore.type=PEM``
with ``ssl.truststore.location`` or inline ``ssl.truststore.certificates``.
A listener's JKS and PKCS12 stores are refused (the ``ssl`` module reads PEM;
convert with keytool/openssl). A client reads PKCS12 stores too (Java's
``ssl.keystore.type=PKCS12``, keytool's default since Java 9, with
``ssl.keystore.password`` / ``ssl.truststore.password``), and librdkafka's
names of the same things (``client_stores``), so the Spark data source's one
set of ``kafka.*`` settings serves librdkafka and this client alike.

``get(key)`` answers a setting's value, or None when it is not set: lists as
lists or comma-separated text, passwords in clear (the caller unwraps its own
password type). A bad setting raises ``SslConfigError`` (key, value, reason),
a ValueError that reads as Kafka's ConfigException and never holds a
password; the broker raises it again as its ConfigException. Stateless.
"""

from __future__ import annotations

import ctypes
import os
import re
import ssl
import tempfile
from dataclasses import dataclass

from kafkapy._core import openssl


class SslConfigError(ValueError):
    """A bad ``ssl.*`` setting: ``key``, ``value`` and ``reason``, worded as
    Kafka's ConfigException ("Invalid value V for configuration K: reason")."""

    def __init__(self, key: str, value, reason: str):
        super().__init__(f"Invalid value {value} for configuration {key}: {reason}")
        self.key, self.value, self.reason = key, value, reason


_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


_KX = {"ECDHE_RSA": "ECDHE-RSA-", "ECDHE_ECDSA": "ECDHE-ECDSA-", "DHE_RSA": "DHE-RSA-", "RSA": ""}
_BULK = re.compile(r"(?:AES_(?P<bits>128|256)_(?P<mode>GCM|CBC)_(?P<mac>SHA\d*)|(?P<chacha>CHACHA20_POLY1305)_SHA256)\Z")


def openssl_cipher_name(name: str) -> str:
    """A TLS 1.2 suite in Kafka's (Java's, IANA's) spelling, such as
    ``TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384``, in OpenSSL's
    (``ECDHE-RSA-AES256-GCM-SHA384``), which ``set_ciphers`` needs; other
    names (already OpenSSL's) unchanged."""
    kx, sep, bulk = name.removeprefix("TLS_").removeprefix("SSL_").partition("_WITH_")
    m = _BULK.match(bulk) if sep and kx in _KX else None
    if m is None:
        return name
    if m["chacha"]:
        return _KX[kx] + "CHACHA20-POLY1305"
    return _KX[kx] + f"AES{m['bits']}-" + ("GCM-" if m["mode"] == "GCM" else "") + m["mac"]


# Kafka's (IANA's) names of the TLS 1.3 suites, which OpenSSL spells the same;
# every other name in ssl.cipher.suites is a TLS 1.2 suite.
TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                          "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"})


def apply_cipher_suites(ctx: ssl.SSLContext, versions, suites, where: str) -> None:
    """Kafka's ``ssl.enabled.protocols`` (``versions``: their TLSVersions) and
    ``ssl.cipher.suites`` on ``ctx``, as the JVM's SSLEngine applies them: an
    empty list keeps the defaults; otherwise only the listed suites are
    offered, TLS 1.3 ones included, so a protocol none of the listed suites
    belongs to cannot be negotiated (it is dropped from the enabled ones).
    SslConfigError when a name is unknown or no enabled protocol is left."""
    enabled = set(versions)
    suites = [c for c in suites or () if c]
    if suites:
        value = ",".join(suites)
        tls13 = [c for c in suites if c in TLS13_SUITES]
        tls12 = [openssl_cipher_name(c) for c in suites if c not in TLS13_SUITES]
        for name, openssl_name in zip([c for c in suites if c not in TLS13_SUITES], tls12):
            # OpenSSL skips a name it does not know when another in the list
            # selects a suite; the JVM refuses the whole list (a typo must not
            # pass unseen).
            try:
                ctx.set_ciphers(openssl_name)
            except ssl.SSLError:
                raise SslConfigError("ssl.cipher.suites", value, f"{where}: unsupported cipher suite {name}") from None
        try:
            if tls12:
                ctx.set_ciphers(":".join(tls12))
            if tls13:
                _set_tls13_suites(ctx, ":".join(tls13))
        except (ssl.SSLError, OSError) as exc:
            raise SslConfigError("ssl.cipher.suites", value, f"{where}: {exc}") from None
        if not tls12:
            enabled.discard(ssl.TLSVersion.TLSv1_2)
        if not tls13:
            enabled.discard(ssl.TLSVersion.TLSv1_3)
        if not enabled:
            raise SslConfigError("ssl.cipher.suites", value,
                                 f"{where}: none of these suites is of a protocol in ssl.enabled.protocols")
    if enabled:
        ctx.minimum_version = min(enabled)
        ctx.maximum_version = max(enabled)


def _set_tls13_suites(ctx: ssl.SSLContext, value: str) -> None:
    """``SSL_CTX_set_ciphersuites(ctx, value)``, which the ``ssl`` module does
    not offer (its ``set_ciphers`` sets TLS 1.2 suites only), through
    ``openssl.py``. OSError when that cannot be done, SSLError when OpenSSL
    refuses the list."""
    set_suites = openssl.function("SSL_CTX_set_ciphersuites", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
    if set_suites is None:
        raise OSError("TLS 1.3 suites cannot be restricted: the ssl module does not export OpenSSL's "
                      "SSL_CTX_set_ciphersuites")
    ctx_pointer = openssl.context_pointer(ctx)
    if not ctx_pointer:
        raise OSError("TLS 1.3 suites cannot be restricted: unknown ssl context layout")
    if set_suites(ctx_pointer, value.encode("ascii")) != 1:
        raise ssl.SSLError(f"OpenSSL knows none of the TLS 1.3 suites {value}")


def create_context(mode: str, get, where: str) -> ssl.SSLContext:
    """An ``SSLContext`` for ``mode`` ``"server"`` or ``"client"``; ``where``
    opens every message ("listener SSL")."""
    # Store types in server mode only: a listener's type defaults to Kafka's
    # JKS, refused once a store is given; the inter-broker client reads the
    # same listener's keys after the listener was built, and the tools'
    # properties leave the type out (their stores are PEM).
    for kind in ("keystore", "truststore") if mode == "server" else ():
        store_type = get(f"ssl.{kind}.type")
        inline = get("ssl.keystore.key") if kind == "keystore" else get("ssl.truststore.certificates")
        if (get(f"ssl.{kind}.location") or inline) and (store_type or "").upper() != "PEM":
            raise SslConfigError(f"ssl.{kind}.type", store_type,
                                 f"{where}: kafkapy reads PEM stores only (ssl.{kind}.type=PEM)")
    enabled = _listed(get("ssl.enabled.protocols"))
    if enabled is None:
        enabled = list(_VERSIONS)  # Kafka's default
    unknown = [p for p in enabled if p not in _VERSIONS]
    if unknown or not enabled:
        raise SslConfigError("ssl.enabled.protocols", ",".join(enabled),
                             f"{where}: supported protocols are {', '.join(_VERSIONS)}")
    protocol = get("ssl.protocol")
    if protocol is not None and protocol not in ("TLS", "TLSv1.2", "TLSv1.3"):
        raise SslConfigError("ssl.protocol", protocol, f"{where}: use TLSv1.2 or TLSv1.3")
    if mode == "server":
        stores = Stores(get("ssl.truststore.location"), get("ssl.truststore.certificates"),
                        get("ssl.keystore.location"), None, get("ssl.keystore.certificate.chain"),
                        get("ssl.keystore.key"), get("ssl.key.password") or None)
        if not stores.cert_file and not (stores.chain_pem and stores.key_pem):
            raise SslConfigError("ssl.keystore.location", None,
                                 f"{where}: a TLS listener needs ssl.keystore.location or "
                                 "ssl.keystore.certificate.chain with ssl.keystore.key")
    trust_location = None
    try:
        if mode == "server":
            trust_location = stores.trust_file
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            if stores.trust_file:
                ctx.load_verify_locations(cafile=stores.trust_file)
            elif stores.trust_pem:
                ctx.load_verify_locations(cadata=stores.trust_pem)
        else:
            stores = client_stores(get, where)
            trust_location = stores.trust_file
            # The system's trust store when none is given.
            ctx = ssl.create_default_context(cafile=stores.trust_file or None, cadata=stores.trust_pem or None)
        if stores.cert_file:
            ctx.load_cert_chain(stores.cert_file, stores.key_file, password=stores.key_password)
        elif stores.chain_pem and stores.key_pem:
            _load_inline_chain(ctx, stores.chain_pem, stores.key_pem, stores.key_password)
    except (OSError, ssl.SSLError) as exc:
        # Never the password in the message.
        if mode == "server":
            raise SslConfigError("ssl.keystore.location", get("ssl.keystore.location"),
                                 f"{where}: cannot load the key store or trust store: {exc}") from None
        raise SslConfigError("ssl.truststore.location", trust_location,
                             f"{where} cannot load its trust store or key store: {exc}") from None
    apply_cipher_suites(ctx, [_VERSIONS[p] for p in enabled], _listed(get("ssl.cipher.suites")), where)
    if mode == "server":
        ctx.verify_mode = _CLIENT_AUTH[get("ssl.client.auth") or "none"]
        ctx.check_hostname = False  # a server never verifies client host names
        ctx.options |= ssl.OP_NO_COMPRESSION
    else:
        algorithm = get("ssl.endpoint.identification.algorithm")
        ctx.check_hostname = (algorithm if algorithm is not None else "https").lower() == "https"
    return ctx


@dataclass(frozen=True)
class Stores:
    """What a context trusts and presents: the trust store as a PEM file or
    PEM text; the key store as a PEM file (key and chain, or the chain with
    ``key_file``) or as PEM text (``chain_pem`` + ``key_pem``), the key
    encrypted with ``key_password`` or not."""
    trust_file: str | None = None
    trust_pem: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    chain_pem: str | None = None
    key_pem: str | None = None
    key_password: str | None = None


def client_stores(get, where: str = "the client") -> Stores:
    """A client's stores from Java's keys or librdkafka's, in this order of
    preference: Java's ``ssl.truststore.location`` (PEM or PKCS12, with
    ``ssl.truststore.password``) or librdkafka's ``ssl.ca.location``; inline
    ``ssl.truststore.certificates`` or librdkafka's ``ssl.ca.pem``. Java's
    ``ssl.keystore.location`` (PEM: key and chain; PKCS12 with
    ``ssl.keystore.password``, which is also librdkafka's meaning of the
    key); librdkafka's ``ssl.certificate.location`` with
    ``ssl.key.location``; inline ``ssl.keystore.certificate.chain`` +
    ``ssl.keystore.key`` or librdkafka's ``ssl.certificate.pem`` +
    ``ssl.key.pem``; ``ssl.key.password`` for an encrypted PEM key in any
    of them. A store file's contents decide PEM or PKCS12 (Java's JKS type
    reads PKCS12 files too, since Java 9); ``ssl.*.type=PEM`` over a binary
    file, a JKS file, or a PKCS12 file that does not open raise
    SslConfigError; a missing file OSError."""
    key_password = get("ssl.key.password") or None
    trust_file = get("ssl.truststore.location") or get("ssl.ca.location")
    trust_pem = get("ssl.truststore.certificates") or get("ssl.ca.pem")
    if trust_file and _pkcs12_store(trust_file, get("ssl.truststore.type"), "ssl.truststore", where):
        _key, certs = _open_pkcs12(trust_file, get("ssl.truststore.password"), "ssl.truststore", where)
        trust_file, trust_pem = None, "".join(certs)
    keystore = get("ssl.keystore.location")
    if keystore and _pkcs12_store(keystore, get("ssl.keystore.type"), "ssl.keystore", where):
        key, certs = _open_pkcs12(keystore, get("ssl.keystore.password") or key_password, "ssl.keystore", where)
        return Stores(trust_file, trust_pem, None, None, "".join(certs), key, None)
    if keystore:
        return Stores(trust_file, trust_pem, keystore, None, None, None, key_password)
    if get("ssl.certificate.location"):
        return Stores(trust_file, trust_pem, get("ssl.certificate.location"), get("ssl.key.location"),
                      None, None, key_password)
    return Stores(trust_file, trust_pem, None, None,
                  get("ssl.keystore.certificate.chain") or get("ssl.certificate.pem"),
                  get("ssl.keystore.key") or get("ssl.key.pem"), key_password)


_JKS_MAGIC = b"\xfe\xed\xfe\xed"


def _pkcs12_store(path: str, declared, key: str, where: str) -> bool:
    """Whether the store file at ``path`` is PKCS12 (else PEM), from its first bytes."""
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
    if head.startswith(b"-----BEGIN"):
        return False
    if head.startswith(_JKS_MAGIC):
        raise SslConfigError(f"{key}.location", path, f"{where}: JKS stores are not read; convert it with "
                             "keytool -importkeystore -deststoretype PKCS12 (or to PEM)")
    if (declared or "").upper() == "PEM":
        raise SslConfigError(f"{key}.type", declared, f"{where}: {path} is not PEM")
    return True


def _open_pkcs12(path: str, password, key: str, where: str) -> tuple[str | None, list[str]]:
    with open(path, "rb") as f:
        data = f.read()
    try:
        found = openssl.pkcs12_to_pem(data, password)
    except ValueError as exc:
        raise SslConfigError(f"{key}.location", path, f"{where}: {exc}") from None
    if key == "ssl.keystore" and (found[0] is None or not found[1]):
        raise SslConfigError(f"{key}.location", path, f"{where}: the PKCS12 store holds no private key "
                             "with its certificate")
    return found


def _listed(value) -> list[str] | None:
    """A list setting as a list (the tools' properties are text)."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    return [item.strip() for item in items if item and item.strip()]


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password) -> None:
    """``load_cert_chain`` reads files only: the inline PEMs go through a
    private temporary file (mode 0600, removed at once)."""
    fd, path = tempfile.mkstemp(prefix="kafkapy-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)
