"""OpenSSL as CPython's ``_ssl`` module links it, for what ``ssl`` does not
offer: ``SSL_CTX_set_ciphersuites`` (TLS 1.3 suites, client/ssl_factory.py),
``PKCS12_parse`` (Java's and librdkafka's PKCS12 stores as PEM,
``pkcs12_to_pem``, client/ssl_factory.py) and ``SSL_read_ex`` looped over
many records (tls.pyx).

Functions are found through ``_ssl``'s own symbols, so they are the same
library's as the objects they are called on. Pointers are read from CPython's
``_ssl`` objects (``PySSLContext.ctx`` and ``PySSLMemoryBIO.bio``: their first
field; ``PySSLSocket``: the Socket weak reference, then ``ssl``; the same
layout from 3.7 to 3.13) and handed out only once OpenSSL confirms them: an
``SSL *`` must name the ``SSL_CTX *`` of its object's context (and read from
its incoming BIO when one is given). On another interpreter, another layout,
or an ``_ssl`` that does not export OpenSSL's symbols, every lookup answers
``None`` or 0, and callers keep to the ``ssl`` module. Stateless but for the
library handle and the two confirming functions, resolved at import.
"""

from __future__ import annotations

import ctypes
import ssl
import sys

_HEAD = object.__basicsize__  # PyObject_HEAD: what precedes an object's first field
_WORD = ctypes.sizeof(ctypes.c_void_p)


def _library():
    if sys.implementation.name != "cpython" or not (3, 7) <= sys.version_info[:2] <= (3, 13):
        return None
    try:
        import _ssl

        return ctypes.CDLL(_ssl.__file__)
    except (ImportError, OSError):
        return None


_LIB = _library()


def function(name: str, restype, *argtypes):
    """OpenSSL's ``name`` as a ctypes function of its own (not CDLL's shared
    attribute, whose types another caller may set), or None."""
    if _LIB is None:
        return None
    try:
        f = _LIB[name]
    except AttributeError:
        return None
    f.restype, f.argtypes = restype, argtypes
    return f


def addresses(*names: str) -> dict[str, int] | None:
    """The addresses of OpenSSL's functions ``names``, or None unless all are found."""
    found = {name: function(name, None) for name in names}
    if not all(found.values()):
        return None
    return {name: ctypes.cast(f, ctypes.c_void_p).value for name, f in found.items()}


_get_ctx = function("SSL_get_SSL_CTX", ctypes.c_void_p, ctypes.c_void_p)
_get_rbio = function("SSL_get_rbio", ctypes.c_void_p, ctypes.c_void_p)


def _field(obj, index: int) -> int:
    """Pointer field ``index`` after ``obj``'s PyObject header."""
    return ctypes.c_void_p.from_address(id(obj) + _HEAD + index * _WORD).value or 0


def ssl_pointer(obj: ssl.SSLObject, incoming: ssl.MemoryBIO | None = None) -> int:
    """The ``SSL *`` of ``obj``, once OpenSSL confirms it belongs to ``obj``'s
    context (and reads from ``incoming`` when given); else 0."""
    if _get_ctx is None or _get_rbio is None:
        return 0
    import _ssl

    if type(obj._sslobj) is not _ssl._SSLSocket or not isinstance(obj.context, _ssl._SSLContext):
        return 0
    if incoming is not None and type(incoming) is not _ssl.MemoryBIO:
        return 0
    s = _field(obj._sslobj, 1)
    if not s or _get_ctx(s) != _field(obj.context, 0):
        return 0
    if incoming is not None and _get_rbio(s) != _field(incoming, 0):
        return 0
    return s


def context_pointer(ctx: ssl.SSLContext) -> int:
    """The ``SSL_CTX *`` of ``ctx``, once confirmed through an ``SSLObject``
    made from it on its own side (a client context cannot make a server one,
    and the reverse); else 0."""
    if ctx.protocol == ssl.PROTOCOL_TLS_CLIENT:
        probe = ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_side=False, server_hostname="probe.invalid")
    else:
        probe = ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_side=True)
    return _field(ctx, 0) if ssl_pointer(probe) else 0


def _pkcs12_functions():
    p, i, c = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    wanted = {
        "BIO_new_mem_buf": (p, c, i), "BIO_s_mem": (p,), "BIO_new": (p, p), "BIO_free": (i, p),
        "BIO_ctrl": (ctypes.c_long, p, i, ctypes.c_long, p), "d2i_PKCS12_bio": (p, p, p),
        "PKCS12_parse": (i, p, c, p, p, p), "PKCS12_free": (None, p), "EVP_PKEY_free": (None, p),
        "X509_free": (None, p), "OPENSSL_sk_num": (i, p), "OPENSSL_sk_value": (p, p, i),
        "OPENSSL_sk_free": (None, p), "PEM_write_bio_X509": (i, p, p),
        "PEM_write_bio_PrivateKey": (i, p, p, p, p, i, p, p), "ERR_clear_error": (None,),
    }
    found = {name: function(name, types[0], *types[1:]) for name, types in wanted.items()}
    return found if all(found.values()) else None


_P12 = _pkcs12_functions()
_BIO_CTRL_INFO = 3  # BIO_get_mem_data(b, pp) is BIO_ctrl(b, BIO_CTRL_INFO, 0, pp)


def pkcs12_to_pem(data: bytes, password: str | None) -> tuple[str | None, list[str]]:
    """A PKCS#12 store (``data``) as PEM text: (the private key or None, the
    certificates: the key's own first, then the others). ValueError when the
    store cannot be read (a wrong password, not PKCS#12, an algorithm the
    library does not offer), OSError when OpenSSL cannot be reached.

    The ``ssl`` module reads PEM only; Java's key and trust stores (Kafka's
    ``ssl.keystore.type=PKCS12``, keytool's default since Java 9) and
    librdkafka's ``ssl.keystore.location`` are PKCS#12. The key is written
    unencrypted to memory only; the caller decides where it goes."""
    f = _P12
    if f is None:
        raise OSError("PKCS#12 stores cannot be read: the ssl module does not export OpenSSL's PKCS12_parse")
    buf = ctypes.create_string_buffer(data, len(data))
    source = f["BIO_new_mem_buf"](buf, len(data))
    p12 = f["d2i_PKCS12_bio"](source, None) if source else None
    key, cert, chain = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    out = f["BIO_new"](f["BIO_s_mem"]())
    try:
        if not p12:
            raise ValueError("not a PKCS#12 store")
        secret = None if password is None else password.encode("utf-8")
        if f["PKCS12_parse"](p12, secret, ctypes.byref(key), ctypes.byref(cert), ctypes.byref(chain)) != 1:
            raise ValueError("cannot open the PKCS#12 store (a wrong password, or an algorithm "
                             "this OpenSSL does not offer)")

        def pem(write, obj) -> str:
            f["BIO_ctrl"](out, 1, 0, None)  # BIO_reset: empty the memory BIO
            if write(out, obj) != 1:
                raise ValueError("cannot write the PKCS#12 store's contents as PEM")
            start = ctypes.c_char_p()
            length = f["BIO_ctrl"](out, _BIO_CTRL_INFO, 0, ctypes.byref(start))
            return ctypes.string_at(start, length).decode("ascii")

        key_pem = pem(lambda b, k: f["PEM_write_bio_PrivateKey"](b, k, None, None, 0, None, None),
                      key) if key else None
        certs = [pem(f["PEM_write_bio_X509"], cert)] if cert else []
        for index in range(f["OPENSSL_sk_num"](chain) if chain else 0):
            certs.append(pem(f["PEM_write_bio_X509"], f["OPENSSL_sk_value"](chain, index)))
        return key_pem, certs
    finally:
        for index in range(f["OPENSSL_sk_num"](chain) if chain else 0):
            f["X509_free"](f["OPENSSL_sk_value"](chain, index))
        if chain:
            f["OPENSSL_sk_free"](chain)
        if cert:
            f["X509_free"](cert)
        if key:
            f["EVP_PKEY_free"](key)
        if p12:
            f["PKCS12_free"](p12)
        for bio in (source, out):
            if bio:
                f["BIO_free"](bio)
        # Leave no error in the thread's queue for the ssl module to find
        # under its next call.
        f["ERR_clear_error"]()
