# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``tls_py``: decrypting many TLS records per call.

OpenSSL hands out at most one record per ``SSL_read``, and clients write
small records: librdkafka calls ``SSL_write`` once per buffer segment, so a
produce request of 1 KiB records arrives as a 10-byte record (the record's
header) and a 1 KiB record (its value) per Kafka record, ~450,000 TLS records
per GB in perf/bench_security.py.  Through ``SSLObject.read`` each record
cost ~11,000 instructions, ~6,500 of them the Python call around it; here one
call loops ``SSL_read_ex`` in C over every whole record the incoming BIO
holds, up to the bytes asked for.

It calls the ``SSL_read_ex`` of the libssl the ``_ssl`` module is linked to
on the ``SSL *`` of the ``SSLObject``; ``openssl.py`` finds both, and hands
out the pointer only once OpenSSL confirms it belongs to the object's context
and incoming BIO.  Otherwise (another interpreter or layout, or an ``_ssl``
that does not export OpenSSL's symbols) ``Reader`` returns the plain-Python
reader.  Stateless but for the resolved function pointers (process-wide, set
at import).
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport uintptr_t

import ssl

from kafkapy._core import openssl, tls_py

cdef extern from *:
    """
    typedef int (*kafkapy_ssl_read_ex_t)(void *, void *, size_t, size_t *);
    typedef int (*kafkapy_ssl_get_error_t)(const void *, int);
    typedef void (*kafkapy_err_clear_t)(void);
    """
    ctypedef int (*kafkapy_ssl_read_ex_t)(void *, void *, size_t, size_t *) nogil
    ctypedef int (*kafkapy_ssl_get_error_t)(const void *, int) nogil
    ctypedef void (*kafkapy_err_clear_t)() nogil

cdef kafkapy_ssl_read_ex_t _read_ex = NULL
cdef kafkapy_ssl_get_error_t _get_error = NULL
cdef kafkapy_err_clear_t _clear_error = NULL

# OpenSSL's SSL_get_error values.
cdef enum:
    _WANT_READ = 2
    _ZERO_RETURN = 6


def _resolve():
    """Point the function pointers at the OpenSSL ``_ssl`` uses; False when
    they are not all found."""
    global _read_ex, _get_error, _clear_error
    found = openssl.addresses("SSL_read_ex", "SSL_get_error", "ERR_clear_error")
    if found is None:
        return False
    _read_ex = <kafkapy_ssl_read_ex_t><uintptr_t>found["SSL_read_ex"]
    _get_error = <kafkapy_ssl_get_error_t><uintptr_t>found["SSL_get_error"]
    _clear_error = <kafkapy_err_clear_t><uintptr_t>found["ERR_clear_error"]
    return True


AVAILABLE = _resolve()


cdef class _Reader:
    cdef void *ssl
    cdef object obj  # keeps the SSLObject (owner of the SSL) alive
    cdef object error

    def read_into(self, buffer, Py_ssize_t offset, Py_ssize_t want):
        """As ``tls_py.Reader.read_into``."""
        cdef Py_buffer view
        cdef size_t n = 0, got = 0
        cdef int ok = 1, err = 0
        cdef char *start
        if self.error is not None:
            raise self.error
        PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE)
        try:
            if offset < 0 or want < 0 or offset + want > view.len:
                raise ValueError(f"[{offset}:{offset + want}] outside a buffer of {view.len} bytes")
            start = <char *>view.buf + offset
            with nogil:
                _clear_error()
                while got < <size_t>want:
                    ok = _read_ex(self.ssl, start + got, <size_t>want - got, &n)
                    if ok <= 0:
                        err = _get_error(self.ssl, ok)
                        _clear_error()
                        break
                    got += n
        finally:
            PyBuffer_Release(&view)
        if ok <= 0 and err != _WANT_READ and err != _ZERO_RETURN:
            exc = ssl.SSLError(1, f"TLS record refused (SSL_get_error {err})")
            if not got:
                raise exc
            self.error = exc
        if got:
            return got
        return -1 if err == _WANT_READ else 0


def Reader(obj, incoming):
    """A reader of ``obj`` (a server ``ssl.SSLObject`` over ``incoming``):
    the compiled one when its ``SSL *`` is confirmed, else the twin's."""
    cdef uintptr_t s = openssl.ssl_pointer(obj, incoming) if AVAILABLE else 0
    cdef _Reader reader
    if s:
        reader = _Reader.__new__(_Reader)
        reader.ssl = <void *>s
        reader.obj = obj
        return reader
    return tls_py.Reader(obj, incoming)
