# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``records_py``: the client's per-record codec.

``BatchBuilder`` appends (one per ``KafkaProducer.send``: ``_append`` from
``producer.FastSend``, ``append`` from the Python path) and
``decode_records`` / ``decode_consumer_records`` (one call per fetched batch)
are written against raw buffers here; the per-batch work — compression and
whole-batch ``build_batch`` used by tests and tools — is shared with the twin
(imported from it) because it is dominated by the codec libraries.
See ``records_py`` for the record format; results and exceptions are
identical (tests/unit/core/test_core_records_parity.py).
"""

import struct

import crc32c

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint64_t, int32_t
from libc.string cimport memcpy

from kafkapy._core.batch_py import BATCH_HEADER_SIZE, LOG_OVERHEAD, read_header
from kafkapy._core.records_py import (  # noqa: F401 - re-exported, same API as the twin
    ATTRIBUTE_CONTROL,
    ATTRIBUTE_TIMESTAMP_TYPE,
    ATTRIBUTE_TRANSACTIONAL,
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    CorruptRecordError,
    UnsupportedCompressionError,
    build_batch,
    compress,
    decompress,
)

# BATCH_HEADER_SIZE as a C constant (the imported name is a Python int).
cdef enum:
    _BATCH_HEADER_BYTES = 61

_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")
_HEADER_BEFORE_CRC = struct.Struct(">qiib")
_CRC = struct.Struct(">I")


cdef inline int _varint_size(int64_t value) noexcept:
    cdef uint64_t v = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline Py_ssize_t _put_varint(char* out, Py_ssize_t pos, int64_t value) noexcept:
    cdef uint64_t v = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    while v >= 0x80:
        out[pos] = <char>((v & 0x7F) | 0x80)
        v >>= 7
        pos += 1
    out[pos] = <char>v
    return pos + 1


cdef inline Py_ssize_t _put_raw(char* out, Py_ssize_t pos, const char* data, Py_ssize_t n) noexcept:
    # n == -1: a null field (length -1, no bytes)
    pos = _put_varint(out, pos, n)
    if n > 0:
        memcpy(out + pos, data, n)
        pos += n
    return pos


cdef inline bytes _as_bytes(object data):
    # The twin accepts any bytes-like object (``out += data``); normalise here
    # so the encoder only ever sees bytes (one copy, off the bytes fast path).
    if type(data) is bytes:
        return <bytes>data
    return bytes(memoryview(data))


cdef class BatchBuilder:
    """Accumulate records for one v2 batch; ``build`` seals it (see the twin).

    The fields are declared in records.pxd, so that ``producer.FastSend``
    calls ``_append`` directly.
    """

    def __init__(self, int compression=0, Py_ssize_t batch_size=16384):
        if compression < 0 or compression > 4:
            raise UnsupportedCompressionError(f"unknown compression codec {compression}")
        self.compression = compression
        self.batch_size = batch_size
        self.base_timestamp = -1
        self.max_timestamp = -1
        self.records_count = 0
        self._body = bytearray()

    @property
    def size_bytes(self):
        return builder_size_bytes(self)

    cdef int _append(self, int64_t timestamp_ms, const char* key, Py_ssize_t key_len,
                     const char* value, Py_ssize_t value_len, list headers,
                     Py_ssize_t headers_size) except -2:
        """Encode one record straight into the body; -1 when it does not fit.

        ``key_len``/``value_len`` of -1 mean null.  ``headers``: None or
        ``[(utf8 key bytes, bytes | None)]`` whose encoded size is
        ``headers_size``.  Calls no Python code (the producer's fast path
        relies on this being atomic under the GIL).
        """
        cdef int64_t ts_delta = timestamp_ms - (timestamp_ms if self.records_count == 0 else self.base_timestamp)
        cdef Py_ssize_t n_headers = len(headers) if headers is not None else 0
        # Record body: attributes i8, timestampDelta, offsetDelta, key, value, headers.
        cdef Py_ssize_t body_len = (
            1 + _varint_size(ts_delta) + _varint_size(self.records_count)
            + (1 if key_len < 0 else _varint_size(key_len) + key_len)
            + (1 if value_len < 0 else _varint_size(value_len) + value_len)
            + _varint_size(n_headers) + headers_size
        )
        cdef Py_ssize_t record_len = _varint_size(body_len) + body_len
        cdef Py_ssize_t old_size = PyByteArray_GET_SIZE(self._body)
        if self.records_count and old_size + record_len > self.batch_size - BATCH_HEADER_SIZE:
            return -1
        # bytearray over-allocates by ~1/8 on growth, so appends are amortised O(1).
        if PyByteArray_Resize(self._body, old_size + record_len) < 0:
            return -2
        cdef char* out = PyByteArray_AS_STRING(self._body)
        cdef Py_ssize_t pos = old_size
        cdef bytes raw_key
        cdef object header_value
        pos = _put_varint(out, pos, body_len)
        out[pos] = 0
        pos += 1
        pos = _put_varint(out, pos, ts_delta)
        pos = _put_varint(out, pos, self.records_count)
        pos = _put_raw(out, pos, key, key_len)
        pos = _put_raw(out, pos, value, value_len)
        pos = _put_varint(out, pos, n_headers)
        if n_headers:
            for raw_key, header_value in headers:
                pos = _put_raw(out, pos, PyBytes_AS_STRING(raw_key), PyBytes_GET_SIZE(raw_key))
                if header_value is None:
                    pos = _put_raw(out, pos, NULL, -1)
                else:
                    pos = _put_raw(out, pos, PyBytes_AS_STRING(header_value), PyBytes_GET_SIZE(header_value))
        if self.records_count == 0:
            self.base_timestamp = timestamp_ms
            self.max_timestamp = timestamp_ms
        elif timestamp_ms > self.max_timestamp:
            self.max_timestamp = timestamp_ms
        cdef int delta = self.records_count
        self.records_count += 1
        return delta

    def append(self, int64_t timestamp_ms, key, value, headers=None):
        cdef bytes key_bytes = None if key is None else _as_bytes(key)
        cdef bytes value_bytes = None if value is None else _as_bytes(value)
        cdef list encoded = None
        cdef Py_ssize_t headers_size = 0
        cdef bytes raw_key, raw_value
        if headers:
            encoded = []
            for header_key, header_value in headers:
                raw_key = header_key.encode("utf-8")
                raw_value = None if header_value is None else _as_bytes(header_value)
                encoded.append((raw_key, raw_value))
                headers_size += _varint_size(len(raw_key)) + len(raw_key)
                headers_size += 1 if raw_value is None else _varint_size(len(raw_value)) + len(raw_value)
        return self._append(
            timestamp_ms,
            NULL if key_bytes is None else PyBytes_AS_STRING(key_bytes),
            -1 if key_bytes is None else PyBytes_GET_SIZE(key_bytes),
            NULL if value_bytes is None else PyBytes_AS_STRING(value_bytes),
            -1 if value_bytes is None else PyBytes_GET_SIZE(value_bytes),
            encoded, headers_size)

    def build(self, int64_t producer_id=-1, int producer_epoch=-1, int base_sequence=-1,
              bint is_transactional=False):
        # One allocation and one copy of the records (the sender seals a
        # 16 KiB batch per Produce request; concatenating header parts cost
        # three copies and ~10 us).
        cdef object payload = None
        cdef const char* src
        cdef Py_ssize_t n
        if self.compression == 0:
            src = PyByteArray_AS_STRING(self._body)
            n = PyByteArray_GET_SIZE(self._body)
        else:
            payload = compress(self.compression, self._body)
            src = PyBytes_AS_STRING(payload)
            n = PyBytes_GET_SIZE(payload)
        cdef int attributes = self.compression
        if is_transactional:
            attributes |= ATTRIBUTE_TRANSACTIONAL
        cdef bytes out = PyBytes_FromStringAndSize(NULL, _BATCH_HEADER_BYTES + n)
        cdef char* o = PyBytes_AS_STRING(out)
        _put_be(o, 0, 0, 8)                                   # baseOffset
        _put_be(o, 8, 4 + 1 + 4 + 40 + n, 4)                  # batchLength
        _put_be(o, 12, -1, 4)                                 # partitionLeaderEpoch
        o[16] = 2                                             # magic
        _put_be(o, 21, attributes, 2)
        _put_be(o, 23, max(self.records_count - 1, 0), 4)     # lastOffsetDelta
        _put_be(o, 27, self.base_timestamp, 8)
        _put_be(o, 35, self.max_timestamp, 8)
        _put_be(o, 43, producer_id, 8)
        _put_be(o, 51, producer_epoch, 2)
        _put_be(o, 53, base_sequence, 4)
        _put_be(o, 57, self.records_count, 4)
        if n:
            memcpy(o + _BATCH_HEADER_BYTES, src, n)
        cdef uint64_t crc
        with memoryview(out) as view:
            crc = crc32c.crc32c(view[21:])
        _put_be(o, 17, <int64_t>crc, 4)
        return out


cdef inline void _put_be(char* out, Py_ssize_t pos, int64_t value, int width) noexcept:
    cdef uint64_t v = <uint64_t>value
    cdef int i
    for i in range(width - 1, -1, -1):
        out[pos + i] = <char>(v & 0xFF)
        v >>= 8


cdef inline int64_t _get_varint(const unsigned char[::1] buf, Py_ssize_t* pos, Py_ssize_t end) except? -1:
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef unsigned char byte
    while True:
        if pos[0] >= end:
            raise CorruptRecordError("truncated varint")
        byte = buf[pos[0]]
        pos[0] += 1
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift >= 70:
            raise CorruptRecordError("varint longer than 10 bytes")
    return <int64_t>((result >> 1) ^ (-(result & 1)))


cdef inline object _get_bytes(const unsigned char[::1] buf, Py_ssize_t* pos, Py_ssize_t end):
    cdef int64_t length = _get_varint(buf, pos, end)
    if length < 0:
        return None
    if length > end - pos[0]:
        raise CorruptRecordError(f"field of {length} bytes overruns the record")
    cdef object out = PyBytes_FromStringAndSize(<const char*>&buf[pos[0]] if length else NULL, length)
    pos[0] += length
    return out


cdef list _decode(batch, object topic, object partition, int64_t min_offset, object record_cls):
    header = read_header(batch, 0)
    cdef Py_ssize_t end = header.batch_length + LOG_OVERHEAD
    if header.magic != 2 or header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or end > len(batch):
        raise CorruptRecordError("not a whole v2 batch")
    cdef int codec = header.attributes & 0x07
    if codec == 0:
        data = memoryview(batch)[BATCH_HEADER_SIZE:end]
    else:
        with memoryview(batch) as view:
            data = decompress(codec, view[BATCH_HEADER_SIZE:end])
    cdef const unsigned char[::1] buf
    cdef Py_ssize_t size = len(data)
    if size:
        buf = data
    else:
        buf = b"\x00"
    cdef bint log_append_time = header.attributes & ATTRIBUTE_TIMESTAMP_TYPE
    cdef int64_t base_offset = header.base_offset
    cdef int64_t base_timestamp = header.base_timestamp
    cdef int64_t max_timestamp = header.max_timestamp
    cdef int timestamp_type = 1 if log_append_time else 0
    cdef list records = []
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t record_end
    cdef int64_t length, timestamp_delta, offset_delta, header_count, offset, timestamp_ms
    cdef int32_t i, j
    cdef int32_t count = header.records_count
    for i in range(count):
        length = _get_varint(buf, &pos, size)
        if length < 0 or length > size - pos:
            raise CorruptRecordError(f"record of {length} bytes overruns the batch")
        record_end = pos + length
        pos += 1
        timestamp_delta = _get_varint(buf, &pos, record_end)
        offset_delta = _get_varint(buf, &pos, record_end)
        key = _get_bytes(buf, &pos, record_end)
        value = _get_bytes(buf, &pos, record_end)
        header_count = _get_varint(buf, &pos, record_end)
        if header_count < 0 or header_count > record_end - pos:
            raise CorruptRecordError(f"bad header count {header_count}")
        headers = []
        for j in range(header_count):
            header_key = _get_bytes(buf, &pos, record_end)
            if header_key is None:
                raise CorruptRecordError("null header key")
            header_value = _get_bytes(buf, &pos, record_end)
            try:
                headers.append((header_key.decode("utf-8"), header_value))
            except UnicodeDecodeError as exc:
                raise CorruptRecordError("header key is not UTF-8") from exc
        if pos != record_end:
            raise CorruptRecordError("record length does not match its fields")
        timestamp_ms = max_timestamp if log_append_time else base_timestamp + timestamp_delta
        offset = base_offset + offset_delta
        if record_cls is None:
            records.append((offset, timestamp_ms, key, value, headers))
        elif offset >= min_offset:
            records.append(record_cls(topic, partition, offset, timestamp_ms, timestamp_type, key, value, headers))
    if pos != size:
        raise CorruptRecordError("bytes left after the last record")
    return records


def decode_records(batch):
    """Records of the batch at the start of ``batch`` (see the twin)."""
    return _decode(batch, None, None, 0, None)


def decode_consumer_records(batch, topic, partition, min_offset, record_cls):
    """ConsumerRecords with offset >= ``min_offset`` (see the twin)."""
    return _decode(batch, topic, partition, min_offset, record_cls)
