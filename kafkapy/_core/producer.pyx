# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``producer_py``: the client producer's per-record send path.

``FastSend.send`` is ``KafkaProducer.send`` for the common case in one C
call; ``RecordFuture`` is the future it returns (one per record, allocated
from a free list); ``ProducerBatchBase`` holds the fields of a producer batch
it touches.  The record encoding is ``records.BatchBuilder``'s (``_append``,
cimported through records.pxd); the step aside for the sender thread is
``gil_io.yield_to_io_threads`` (cimported through gil_io.pxd).  What a
future means — waiting, callbacks — is the client's
(``kafkapy.client.accumulator``), installed with ``set_future_behaviour``.
Results and exceptions are the twin's (tests/unit/core/test_core_producer.py).
"""

cimport cython

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int64_t

from kafkapy._core.gil_io cimport yield_to_io_threads
from kafkapy._core.records cimport BatchBuilder, builder_size_bytes


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
        yield_to_io_threads()
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
        if builder_size_bytes(builder) >= self.batch_size:
            self.on_full()
        if callback is not None:
            # After the append (Python code from here on is fine): a batch
            # completed meanwhile runs the callback at once.
            self.attach_callback(future, callback)
        return future
