# BatchBuilder's C layout, shared with producer.pyx (FastSend appends to a
# builder without a Python call); the implementation is in records.pyx.

from cpython.bytearray cimport PyByteArray_GET_SIZE
from libc.stdint cimport int64_t


cdef class BatchBuilder:
    cdef readonly int compression
    cdef readonly Py_ssize_t batch_size
    cdef readonly int64_t base_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int records_count
    cdef bytearray _body

    cdef int _append(self, int64_t timestamp_ms, const char* key, Py_ssize_t key_len,
                     const char* value, Py_ssize_t value_len, list headers,
                     Py_ssize_t headers_size) except -2


# ``size_bytes`` without a call (FastSend asks once per record): the 61-byte
# batch header plus the records encoded so far.
cdef inline Py_ssize_t builder_size_bytes(BatchBuilder builder) noexcept:
    return 61 + PyByteArray_GET_SIZE(builder._body)
