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
Both modes read Java's stores too: ``ssl.keystore.type`` JKS (Kafka's
default) or PKCS12 (keytool's default since Java 9), with
``ssl.keystore.password`` / ``ssl.truststore.password``, read into PEM in
memory (``_open_store``). A listener holds to its declared types as Kafka's
broker does (``server_stores``); a client reads librdkafka's
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
        stores = server_stores(get, where)
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


# Kafka's store types (ssl.keystore.type / ssl.truststore.type); JKS is its default.
STORE_TYPES = ("JKS", "PKCS12", "PEM")


def server_stores(get, where: str) -> Stores:
    """A listener's stores as Kafka's broker reads them (DefaultSslEngineFactory):
    each store's ``ssl.*.type`` (JKS when unset) says what its file is. A JKS
    or PKCS12 file is read with its ``ssl.*.password`` (the key's password,
    ``ssl.key.password``, defaults to the key store's; a key store needs its
    password, a trust store is read unchecked without one), either binary
    format under either name as Java reads them since Java 9; a PEM file or
    inline PEM (``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``,
    ``ssl.truststore.certificates``) needs the type PEM. Anything else, a
    missing file too, raises SslConfigError naming the key."""
    try:
        return _server_stores(get, where)
    except OSError as exc:  # a store file missing or unreadable
        kind = "keystore" if exc.filename == get("ssl.keystore.location") else "truststore"
        raise SslConfigError(f"ssl.{kind}.location", exc.filename,
                             f"{where}: cannot read the store: {exc.strerror}") from None


def _server_stores(get, where: str) -> Stores:
    key_password = get("ssl.key.password") or None
    types = {}
    for kind in ("keystore", "truststore"):
        declared = get(f"ssl.{kind}.type")
        store_type = (declared or "JKS").upper()
        if store_type not in STORE_TYPES:
            raise SslConfigError(f"ssl.{kind}.type", declared,
                                 f"{where}: a store type is one of {', '.join(STORE_TYPES)}")
        inline = get("ssl.keystore.key") if kind == "keystore" else get("ssl.truststore.certificates")
        if inline and store_type != "PEM":
            raise SslConfigError(f"ssl.{kind}.type", declared,
                                 f"{where}: a store given inline is PEM (ssl.{kind}.type=PEM)")
        location = get(f"ssl.{kind}.location")
        if location and store_type != "PEM":
            if not _binary_store(location, store_type, f"ssl.{kind}", where):
                raise SslConfigError(f"ssl.{kind}.type", declared,
                                     f"{where}: {location} is PEM, not a {store_type} store (ssl.{kind}.type=PEM)")
            if kind == "keystore" and not get("ssl.keystore.password"):
                raise SslConfigError("ssl.keystore.password", None,
                                     f"{where}: the {store_type} key store {location} needs its password")
        elif location:
            _binary_store(location, store_type, f"ssl.{kind}", where)  # PEM declared: a binary file is refused
        types[kind] = store_type
    trust_file, trust_pem = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if trust_file and types["truststore"] != "PEM":
        trust_file, trust_pem = None, _trusted_pem(trust_file, get, where)
    keystore = get("ssl.keystore.location")
    if keystore and types["keystore"] != "PEM":
        return _binary_key_store(trust_file, trust_pem, keystore, get, key_password, where)
    return Stores(trust_file, trust_pem, keystore, None, get("ssl.keystore.certificate.chain"),
                  get("ssl.keystore.key"), key_password)


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
    of them. A store file's contents decide PEM, PKCS12 or JKS (Java reads
    either binary format under either type name, since Java 9);
    ``ssl.*.type=PEM`` over a binary file, or a store that does not open
    (a wrong password) raise SslConfigError; a missing file OSError."""
    key_password = get("ssl.key.password") or None
    trust_file = get("ssl.truststore.location") or get("ssl.ca.location")
    trust_pem = get("ssl.truststore.certificates") or get("ssl.ca.pem")
    if trust_file and _binary_store(trust_file, get("ssl.truststore.type"), "ssl.truststore", where):
        trust_file, trust_pem = None, _trusted_pem(trust_file, get, where)
    keystore = get("ssl.keystore.location")
    if keystore and _binary_store(keystore, get("ssl.keystore.type"), "ssl.keystore", where):
        return _binary_key_store(trust_file, trust_pem, keystore, get, key_password, where)
    if keystore:
        return Stores(trust_file, trust_pem, keystore, None, None, None, key_password)
    if get("ssl.certificate.location"):
        return Stores(trust_file, trust_pem, get("ssl.certificate.location"), get("ssl.key.location"),
                      None, None, key_password)
    return Stores(trust_file, trust_pem, None, None,
                  get("ssl.keystore.certificate.chain") or get("ssl.certificate.pem"),
                  get("ssl.keystore.key") or get("ssl.key.pem"), key_password)


def _trusted_pem(path: str, get, where: str) -> str:
    """The certificates of the JKS or PKCS12 trust store at ``path`` as PEM
    text (read with ``ssl.truststore.password``; unchecked without one)."""
    _key, certs = _open_store(path, get("ssl.truststore.password"), None, "ssl.truststore", where)
    return "".join(certs)


def _binary_key_store(trust_file, trust_pem, path: str, get, key_password, where: str) -> Stores:
    """``Stores`` with the key and chain of the JKS or PKCS12 key store at
    ``path`` as PEM text (Kafka's DefaultSslEngineFactory: the key's password
    defaults to the store's, the store's to the key's)."""
    store_password = get("ssl.keystore.password")
    key, certs = _open_store(path, store_password or key_password, key_password or store_password,
                             "ssl.keystore", where)
    return Stores(trust_file, trust_pem, None, None, "".join(certs), key, None)


_JKS_MAGIC = b"\xfe\xed\xfe\xed"


def _binary_store(path: str, declared, key: str, where: str) -> bool:
    """Whether the store file at ``path`` is PKCS12 or JKS (else PEM), from its first bytes."""
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
    if head.startswith(b"-----BEGIN"):
        return False
    if (declared or "").upper() == "PEM":
        raise SslConfigError(f"{key}.type", declared, f"{where}: {path} is not PEM")
    return True


def _open_store(path: str, password, key_password, key: str, where: str) -> tuple[str | None, list[str]]:
    """(private key PEM or None, certificate PEMs) of a PKCS12 or JKS file."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        if data.startswith(_JKS_MAGIC):
            found = jks_to_pem(data, password, key_password)
        else:
            found = openssl.pkcs12_to_pem(data, password)
    except ValueError as exc:
        raise SslConfigError(f"{key}.location", path, f"{where}: {exc}") from None
    if key == "ssl.keystore" and (found[0] is None or not found[1]):
        raise SslConfigError(f"{key}.location", path, f"{where}: the store holds no private key "
                             "with its certificate")
    return found


# Java's JKS format (sun.security.provider.JavaKeyStore and KeyProtector):
# magic, version 1 or 2, entry count; entries 1 (private key: its
# EncryptedPrivateKeyInfo and certificate chain) and 2 (trusted certificate),
# each with a modified-UTF-8 alias and a timestamp; then SHA-1 over the
# password (UTF-16BE), the text "Mighty Aphrodite" and everything before it.
_JKS_WHITENER = b"Mighty Aphrodite"
_JKS_KEY_PROTECTOR = "1.3.6.1.4.1.42.2.17.1.1"
_SHA1_BYTES = 20


def jks_to_pem(data: bytes, password: str | None, key_password: str | None) -> tuple[str | None, list[str]]:
    """A JKS store as PEM text: (the first private key or None, its chain then
    the trusted certificates). The store's digest is checked when
    ``password`` is given (Java skips it without one); the key is unsealed
    with ``key_password`` (Sun's KeyProtector: SHA-1 key stream over the
    salt, and SHA-1 of password and key as its check). ValueError when the
    store is damaged or a password is wrong."""
    import hashlib
    import struct

    def secret(text) -> bytes:
        return (text or "").encode("utf-16-be")

    body, digest = data[:-_SHA1_BYTES], data[-_SHA1_BYTES:]
    if password is not None and hashlib.sha1(secret(password) + _JKS_WHITENER + body).digest() != digest:
        raise ValueError("the JKS store's integrity check failed (a wrong ssl.*store.password, or a damaged file)")
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(body):
            raise ValueError("a truncated JKS store")
        pos += n
        return body[pos - n:pos]

    def number(fmt: str) -> int:
        return struct.unpack(fmt, take(struct.calcsize(fmt)))[0]

    def utf() -> str:
        return take(number(">H")).decode("utf-8", "replace")

    _magic, version, count = struct.unpack(">III", take(12))
    key_pem, chain, trusted = None, [], []

    def certificate() -> str:
        if version == 2:
            utf()   # the certificate type, X.509
        return ssl.DER_cert_to_PEM_cert(take(number(">I")))

    for _ in range(count):
        tag = number(">I")
        utf()          # alias
        number(">Q")   # creation time
        if tag == 1:
            sealed = take(number(">I"))
            certs = [certificate() for _ in range(number(">I"))]
            if key_pem is None:
                key_pem, chain = _unseal_jks_key(sealed, secret(key_password)), certs
        elif tag == 2:
            trusted.append(certificate())
        else:
            raise ValueError(f"a JKS entry of unknown type {tag}")
    return key_pem, chain + trusted


def _unseal_jks_key(sealed: bytes, secret: bytes) -> str:
    import base64
    import hashlib

    algorithm, encrypted = _der_sequence(_der_sequence(sealed)[0])[0], _der_sequence(sealed)[1]
    if _der_oid(algorithm) != _JKS_KEY_PROTECTOR:
        raise ValueError(f"a JKS key sealed with {_der_oid(algorithm)}, not Sun's KeyProtector")
    encrypted = _der_value(encrypted, 0x04)
    salt, body, check = encrypted[:_SHA1_BYTES], encrypted[_SHA1_BYTES:-_SHA1_BYTES], encrypted[-_SHA1_BYTES:]
    stream, block = bytearray(), salt
    while len(stream) < len(body):
        block = hashlib.sha1(secret + block).digest()
        stream += block
    plain = bytes(a ^ b for a, b in zip(body, stream))
    if hashlib.sha1(secret + plain).digest() != check:
        raise ValueError("cannot unseal the JKS store's key (a wrong ssl.key.password)")
    text = base64.encodebytes(plain).decode("ascii").replace("\n", "")
    lines = [text[i:i + 64] for i in range(0, len(text), 64)]
    return "-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----\n"


def _der_tlv(data: bytes, pos: int = 0) -> tuple[int, bytes, int]:
    """(tag, value, position after) of the DER element at ``pos``."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER")
    tag, length, pos = data[pos], data[pos + 1], pos + 2
    if length & 0x80:
        size = length & 0x7F
        length, pos = int.from_bytes(data[pos:pos + size], "big"), pos + size
    if pos + length > len(data):
        raise ValueError("truncated DER")
    return tag, data[pos:pos + length], pos + length


def _der_sequence(data: bytes) -> list[bytes]:
    """The elements (each whole, tag and length included) of the SEQUENCE ``data``."""
    tag, value, _end = _der_tlv(data)
    if tag != 0x30:
        raise ValueError("DER: a SEQUENCE was expected")
    out, pos = [], 0
    while pos < len(value):
        _tag, _v, end = _der_tlv(value, pos)
        out.append(value[pos:end])
        pos = end
    return out


def _der_value(data: bytes, tag: int) -> bytes:
    found, value, _end = _der_tlv(data)
    if found != tag:
        raise ValueError(f"DER: tag {tag:#x} was expected, not {found:#x}")
    return value


def _der_oid(data: bytes) -> str:
    value = _der_value(data, 0x06)
    parts, number = [value[0] // 40, value[0] % 40], 0
    for byte in value[1:]:
        number = (number << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(number)
            number = 0
    return ".".join(map(str, parts))


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
