"""OpenSSL as CPython's ``_ssl`` module links it, for what ``ssl`` does not
offer: ``SSL_CTX_set_ciphersuites`` (TLS 1.3 suites, client/ssl_factory.py)
and ``SSL_read_ex`` looped over many records (tls.pyx).

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
