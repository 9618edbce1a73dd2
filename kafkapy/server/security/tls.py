"""TLS server contexts from Kafka's ``ssl.*`` keys, PEM form only.

Kafka accepts ``ssl.keystore.type=PEM`` with either a file
(``ssl.keystore.location``: private key and certificate chain) or inline
values (``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``), the key
optionally encrypted with ``ssl.key.password``; and ``ssl.truststore.type=PEM``
with ``ssl.truststore.location`` or inline ``ssl.truststore.certificates``.
JKS and PKCS12 stores are refused at start-up with a ConfigException (the
``ssl`` module reads PEM; convert with keytool/openssl).
"""

from __future__ import annotations

import ctypes
import os
import re
import ssl
import tempfile

from kafkapy._core import openssl
from kafkapy.server.config.types import ConfigException

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
    ConfigException when a name is unknown or no enabled protocol is left."""
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
                raise ConfigException("ssl.cipher.suites", value, f"{where}: unsupported cipher suite {name}") from None
        try:
            if tls12:
                ctx.set_ciphers(":".join(tls12))
            if tls13:
                _set_tls13_suites(ctx, ":".join(tls13))
        except (ssl.SSLError, OSError) as exc:
            raise ConfigException("ssl.cipher.suites", value, f"{where}: {exc}") from None
        if not tls12:
            enabled.discard(ssl.TLSVersion.TLSv1_2)
        if not tls13:
            enabled.discard(ssl.TLSVersion.TLSv1_3)
        if not enabled:
            raise ConfigException("ssl.cipher.suites", value,
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


def _secret(value):
    from kafkapy.server.security import secret

    return secret(value)


def server_context(get, listener: str) -> ssl.SSLContext:
    """An ``SSLContext`` for a server socket of ``listener``; ``get(key)`` is
    the listener's value of a broker key."""
    where = f"listener {listener}"
    for kind in ("keystore", "truststore"):
        store_type = get(f"ssl.{kind}.type")
        inline = get("ssl.keystore.key") if kind == "keystore" else get("ssl.truststore.certificates")
        location = get(f"ssl.{kind}.location")
        if (location or inline) and store_type.upper() != "PEM":
            raise ConfigException(f"ssl.{kind}.type", store_type,
                                  f"{where}: kafkapy reads PEM stores only (ssl.{kind}.type=PEM)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    enabled = [p for p in get("ssl.enabled.protocols") if p]
    unknown = [p for p in enabled if p not in _VERSIONS]
    if unknown or not enabled:
        raise ConfigException("ssl.enabled.protocols", ",".join(enabled),
                              f"{where}: supported protocols are {', '.join(_VERSIONS)}")
    protocol = get("ssl.protocol")
    if protocol not in ("TLS", "TLSv1.2", "TLSv1.3"):
        raise ConfigException("ssl.protocol", protocol, f"{where}: use TLSv1.2 or TLSv1.3")
    apply_cipher_suites(ctx, [_VERSIONS[p] for p in enabled], get("ssl.cipher.suites"), where)
    key_password = _secret(get("ssl.key.password"))
    location = get("ssl.keystore.location")
    chain = _secret(get("ssl.keystore.certificate.chain"))
    key = _secret(get("ssl.keystore.key"))
    try:
        if location:
            ctx.load_cert_chain(location, password=key_password)
        elif chain and key:
            _load_inline_chain(ctx, chain, key, key_password)
        else:
            raise ConfigException("ssl.keystore.location", None,
                                  f"{where}: a TLS listener needs ssl.keystore.location or "
                                  "ssl.keystore.certificate.chain with ssl.keystore.key")
        trust_location = get("ssl.truststore.location")
        trust_inline = _secret(get("ssl.truststore.certificates"))
        if trust_location:
            ctx.load_verify_locations(cafile=trust_location)
        elif trust_inline:
            ctx.load_verify_locations(cadata=trust_inline)
    except (OSError, ssl.SSLError) as exc:
        # Never the password in the message.
        raise ConfigException("ssl.keystore.location", location,
                              f"{where}: cannot load the key store or trust store: {exc}") from None
    client_auth = get("ssl.client.auth")
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    ctx.check_hostname = False  # a server never verifies client host names
    ctx.options |= ssl.OP_NO_COMPRESSION
    return ctx


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
