# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``records_py``: the client's per-record hot paths.

``BatchBuilder.append`` (one call per ``KafkaProducer.send``) and
``decode_records`` / ``decode_consumer_records`` (one call per fetched batch)
are written against raw buffers here; the per-batch work — compression and
whole-batch ``build_batch`` used by tests and tools — is shared with the twin
(imported from it) because it is dominated by the codec libraries.
See ``records_py`` for the record format; results and exceptions are
identical (tests/unit/core/test_core_records_parity.py).
"""

import struct

import crc32c

cimport cython

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


cdef extern from *:
    """
    #include <time.h>
    static long long kafkapy_wall_clock_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    """
    long long kafkapy_wall_clock_ms() nogil


cdef class BatchBuilder:
    """Accumulate records for one v2 batch; ``build`` seals it (see the twin)."""

    cdef readonly int compression
    cdef readonly Py_ssize_t batch_size
    cdef readonly int64_t base_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int records_count
    cdef bytearray _body

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
        return BATCH_HEADER_SIZE + PyByteArray_GET_SIZE(self._body)

    cdef inline Py_ssize_t _size(self) noexcept:
        return BATCH_HEADER_SIZE + PyByteArray_GET_SIZE(self._body)

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


# ---------------------------------------------------------------- producer fast path


cdef object _behaviour = None


def set_future_behaviour(behaviour):
    """Install the client's ``RecordFuture`` methods.

    ``behaviour`` is a class whose functions take the future as their first
    argument (``done``, ``succeeded``, ``failed``, ``exception``, ``result``,
    ``add_callback``, ``add_errback``, ``add_both``, ``_wait``, ``_metadata``,
    ``_add``, ``_fire``).  The fields and the allocation of a future are
    here, in C; what it means to wait for one or fire its callbacks is the
    client's (``kafkapy.client.accumulator``), which installs it on import.
    Returns the behaviour it replaces.
    """
    global _behaviour
    previous = _behaviour
    _behaviour = behaviour
    return previous


@cython.final
@cython.no_gc
@cython.freelist(1024)
cdef class RecordFuture:
    """The producer's per-record future: its batch's result plus its offset delta.

    Java's FutureRecordMetadata: nothing per record is resolved until asked.
    A static type with a free list and outside the cyclic GC, because one is
    allocated per ``send``: as a GC-tracked heap class its allocation and the
    collector's passes were 45% of ``FastSend.send`` (py-spy, 650 -> 300 ns).
    A freed batch returns its 148 futures to the free list for the next one.
    Its references form no cycle the client keeps: the client drops a batch
    result's list of callback futures, and each future's callbacks, once
    they have fired.
    """

    cdef public object _result
    cdef public Py_ssize_t _relative_offset
    cdef public object _topic
    cdef public int _partition
    cdef public int64_t _timestamp
    cdef public Py_ssize_t _key_size
    cdef public Py_ssize_t _value_size
    cdef public object _callbacks
    cdef public object _errbacks

    def __init__(self, result, Py_ssize_t relative_offset, topic, int partition, int64_t timestamp,
                 Py_ssize_t key_size, Py_ssize_t value_size):
        self._result = result
        self._relative_offset = relative_offset
        self._topic = topic
        self._partition = partition
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    def done(self):
        return _behaviour.done(self)

    @property
    def is_done(self):
        return _behaviour.done(self)

    def succeeded(self):
        return _behaviour.succeeded(self)

    def failed(self):
        return _behaviour.failed(self)

    def exception(self, timeout=None):
        return _behaviour.exception(self, timeout)

    def result(self, timeout=None):
        return _behaviour.result(self, timeout)

    def get(self, timeout=None):
        return _behaviour.result(self, timeout)

    def add_callback(self, fn, *args, **kwargs):
        return _behaviour.add_callback(self, fn, *args, **kwargs)

    def add_errback(self, fn, *args, **kwargs):
        return _behaviour.add_errback(self, fn, *args, **kwargs)

    def add_both(self, fn, *args, **kwargs):
        return _behaviour.add_both(self, fn, *args, **kwargs)

    def _wait(self, timeout):
        return _behaviour._wait(self, timeout)

    def _metadata(self):
        return _behaviour._metadata(self)

    def _add(self, on_success, fn, args, kwargs):
        return _behaviour._add(self, on_success, fn, args, kwargs)

    def _fire(self):
        return _behaviour._fire(self)


cdef class ProducerBatchBase:
    """The fields of a producer batch that ``FastSend`` touches (the rest: the client's subclass)."""

    cdef public object tp
    cdef public BatchBuilder builder
    cdef public list futures
    cdef public object result
    cdef public bint closed

    def __init__(self, tp, BatchBuilder builder, result):
        self.tp = tp
        self.builder = builder
        self.futures = []
        self.result = result
        self.closed = False


cdef class FastSend:
    """``KafkaProducer.send`` for the common case, in one C call.

    The common case is a record of ``bytes``/None key and value and no
    headers, whose partition already has an open batch with room (a
    ``callback`` is handed to ``attach_callback(future, callback)``):
    about 148 of every 149 records of 100 bytes at the default batch.size of
    16384.  Everything else — serializers, a missing or full batch, sticky
    partition moves, unknown metadata, errors — goes to ``slow`` (the
    producer's Python ``send``, same signature), which also creates the
    batches this path appends to.

    Thread-safety: ``send`` runs without the accumulator lock.  Between its
    checks and the append it calls no Python code, so under the GIL it is
    atomic with respect to the sender thread, which only ever *closes* an
    open batch (``closed = True``) before sealing it.  The one allocation
    that could run Python code (the future's, were it ever GC-tracked: an
    allocation can trigger the collector and its finalizers) happens before
    any check.

    State (all owned by the client and only read here): ``open_batches``
    topic -> list indexed by partition of the open ``ProducerBatchBase`` or
    None; ``sticky`` topic -> the sticky partition for null keys (the
    partitioner's own map); ``metadata.partitions`` topic -> {partition: ...}.
    """

    cdef public bint enabled
    cdef public object metadata
    cdef public dict sticky
    cdef public dict open_batches
    cdef public object partition_for_key
    cdef public object slow
    cdef public object on_full
    cdef public object attach_callback
    cdef public Py_ssize_t batch_size
    cdef public Py_ssize_t max_record_size
    cdef public object lock

    def __init__(self, metadata, dict sticky, dict open_batches, partition_for_key,
                 slow, on_full, Py_ssize_t batch_size, Py_ssize_t max_record_size, lock=None,
                 attach_callback=None):
        self.enabled = True
        self.attach_callback = attach_callback
        self.metadata = metadata
        self.sticky = sticky
        self.open_batches = open_batches
        self.partition_for_key = partition_for_key
        self.slow = slow
        self.on_full = on_full
        self.batch_size = batch_size
        self.max_record_size = max_record_size
        self.lock = lock  # unused here: the twin needs it, this path relies on the GIL

    def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None,
             callback=None):
        if kafkapy_io_waiting_get() > 0:
            _yield_to_io_threads()
        if (not self.enabled or headers
                or (value is not None and type(value) is not bytes)
                or (key is not None and type(key) is not bytes)
                or (partition is not None and type(partition) is not int)
                or (timestamp_ms is not None and type(timestamp_ms) is not int)):
            return self.slow(topic, value, key, partition, timestamp_ms, headers, callback)
        slots = self.open_batches.get(topic)
        parts = self.metadata.partitions.get(topic)
        if slots is None or not parts:
            return self.slow(topic, value, key, partition, timestamp_ms, headers, callback)
        cdef Py_ssize_t count = len(parts)
        cdef Py_ssize_t p
        if partition is not None:
            p = partition
        elif key is None:
            sticky = self.sticky.get(topic)
            if sticky is None:
                return self.slow(topic, value, key, partition, timestamp_ms, headers, callback)
            p = sticky
        else:
            p = self.partition_for_key(key, count)
        cdef Py_ssize_t key_len = -1 if key is None else PyBytes_GET_SIZE(key)
        cdef Py_ssize_t value_len = -1 if value is None else PyBytes_GET_SIZE(value)
        # Java's worst-case record estimate: 61-byte batch header + 31 bytes of
        # record overhead (see accumulator.RECORD_OVERHEAD_BYTES).
        if (p < 0 or p >= count or p >= len(<list>slots)
                or max(key_len, 0) + max(value_len, 0) + 92 > self.max_record_size):
            return self.slow(topic, value, key, partition, timestamp_ms, headers, callback)
        cdef int64_t ts = kafkapy_wall_clock_ms() if timestamp_ms is None else <int64_t>timestamp_ms
        # Allocate first: from here to the append nothing may run Python code.
        cdef RecordFuture future = RecordFuture.__new__(RecordFuture)
        batch_obj = (<list>slots)[p]
        if batch_obj is None:
            return self.slow(topic, value, key, partition, timestamp_ms, headers, callback)
        cdef ProducerBatchBase batch = <ProducerBatchBase?>batch_obj
        if batch.closed:
            return self.slow(topic, value, key, partition, timestamp_ms, headers, callback)
        cdef BatchBuilder builder = batch.builder
        cdef int delta = builder._append(
            ts, NULL if key is None else PyBytes_AS_STRING(key), key_len,
            NULL if value is None else PyBytes_AS_STRING(value), value_len, None, 0)
        if delta < 0:
            return self.slow(topic, value, key, partition, timestamp_ms, headers, callback)
        future._result = batch.result
        future._relative_offset = delta
        future._topic = topic
        future._partition = <int>p
        future._timestamp = ts
        future._key_size = key_len
        future._value_size = value_len
        batch.futures.append(future)
        if builder._size() >= self.batch_size:
            self.on_full()
        if callback is not None:
            # After the append (Python code from here on is fine): a batch
            # completed meanwhile runs the callback at once.
            self.attach_callback(future, callback)
        return future


# ---------------------------------------------------------------- producer I/O thread helpers
#
# The producer's sender thread and the threads calling send() share the GIL.
# A thread that releases the GIL for a syscall and wants it back waits until
# the holder drops it, which a busy send() loop does only every
# sys.getswitchinterval() (5 ms).  The sender released it three or four
# times per batch (epoll, send, recv), so while the application produced,
# the sender got about one batch out per 5 ms and idled in 100-200 ms of
# gaps per 200k records.  Two remedies, both here because they are C:
#
# * the sender's non-blocking socket calls keep the GIL (a non-blocking
#   send or recv of 16 KiB on loopback takes microseconds, far less than a
#   hand-over), so only its blocking epoll_wait releases it;
# * when that epoll_wait returns with work, the sender raises a counter,
#   and FastSend.send (the application's hot loop) steps aside — releases
#   the GIL and yields the CPU, for at most 2 ms — until the sender holds it.

cdef extern from *:
    """
    #include <sched.h>
    #include <sys/epoll.h>
    #include <sys/socket.h>
    #include <errno.h>
    #include <time.h>
    static int kafkapy_io_waiting = 0;
    static int kafkapy_io_waiting_get(void) { return __atomic_load_n(&kafkapy_io_waiting, __ATOMIC_ACQUIRE); }
    static void kafkapy_io_waiting_add(int d) { __atomic_add_fetch(&kafkapy_io_waiting, d, __ATOMIC_ACQ_REL); }
    static long long kafkapy_monotonic_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    }
    """
    int kafkapy_io_waiting_get() nogil
    void kafkapy_io_waiting_add(int d) nogil
    long long kafkapy_monotonic_us() nogil
    int sched_yield() nogil
    struct epoll_event_data "epoll_data":
        int fd
    struct epoll_event:
        unsigned int events
        epoll_event_data data
    int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout) nogil
    ssize_t c_send "send"(int fd, const void* buf, size_t n, int flags) nogil
    ssize_t c_recv "recv"(int fd, void* buf, size_t n, int flags) nogil
    int MSG_DONTWAIT
    int MSG_NOSIGNAL
    int EAGAIN
    int EWOULDBLOCK
    int EINTR
    int errno

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE

# Bound of one step aside: a sender round (responses, drain, one Produce
# request) takes 0.1-0.2 ms; 2 ms covers a slow one without ever stalling
# the application behind a sender that does not come.
cdef enum:
    _YIELD_MAX_US = 2000
    _MAX_EVENTS = 64


cdef inline void _yield_to_io_threads() noexcept:
    cdef long long deadline
    with nogil:
        deadline = kafkapy_monotonic_us() + _YIELD_MAX_US
        while kafkapy_io_waiting_get() > 0 and kafkapy_monotonic_us() < deadline:
            sched_yield()


def io_threads_waiting():
    """How many I/O threads are waiting for the GIL with work in hand (for tests)."""
    return kafkapy_io_waiting_get()


def io_wait(epoll, double timeout_s):
    """``epoll.poll(timeout_s)`` as ``[(fd, events)]``, flagging the caller as waiting.

    With a zero timeout the GIL is kept (nothing to wait for).  Otherwise it
    is released for the wait and, when events arrived, the calling thread
    counts as waiting for the GIL until it has it, so ``FastSend`` steps
    aside.  EINTR gives an empty list.
    """
    cdef int epfd = epoll.fileno()
    cdef epoll_event events[_MAX_EVENTS]
    cdef int timeout_ms = 0 if timeout_s <= 0 else max(1, <int>(timeout_s * 1000 + 0.999))
    cdef int n
    cdef int err = 0
    if timeout_ms == 0:
        n = epoll_wait(epfd, events, _MAX_EVENTS, 0)
        if n < 0:
            err = errno
    else:
        with nogil:
            n = epoll_wait(epfd, events, _MAX_EVENTS, timeout_ms)
            if n < 0:
                err = errno
            elif n > 0:
                kafkapy_io_waiting_add(1)
        if n > 0:
            kafkapy_io_waiting_add(-1)
    if n < 0:
        if err == EINTR:
            return []
        raise OSError(err, "epoll_wait failed")
    return [(events[i].data.fd, events[i].events) for i in range(n)]


def send_nowait(sock, data):
    """Non-blocking ``send`` keeping the GIL: bytes sent, or -1 when it would block."""
    cdef int fd = sock.fileno()
    cdef Py_buffer view
    cdef ssize_t n
    cdef int err
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        n = c_send(fd, view.buf, view.len, MSG_DONTWAIT | MSG_NOSIGNAL)
        err = errno
    finally:
        PyBuffer_Release(&view)
    if n < 0:
        if err == EAGAIN or err == EWOULDBLOCK:
            return -1
        if err == EINTR:
            return 0
        raise OSError(err, "send failed")
    return n


def recv_into_nowait(sock, buffer):
    """Non-blocking ``recv_into`` keeping the GIL: bytes read (0: EOF), or -1 when none are waiting."""
    cdef int fd = sock.fileno()
    cdef Py_buffer view
    cdef ssize_t n
    cdef int err
    PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE)
    try:
        n = c_recv(fd, view.buf, view.len, MSG_DONTWAIT)
        err = errno
    finally:
        PyBuffer_Release(&view)
    if n < 0:
        if err == EAGAIN or err == EWOULDBLOCK or err == EINTR:
            return -1
        raise OSError(err, "recv failed")
    return n
