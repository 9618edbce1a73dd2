"""The client producer's per-record send path, in plain Python (twin of ``producer``).

``FastSend`` (``KafkaProducer.send`` for the common case), the per-record
``RecordFuture`` and ``ProducerBatchBase``, with the compiled module's API;
see producer.pyx for the contract.  The client does not install this
``FastSend`` (it has to take the accumulator lock and costs more than the
Python send path); it is here so that both implementations are tested as
one.  State: ``_behaviour``, the client's future methods, set once on import
of ``kafkapy.client.accumulator``.
"""

import time

_behaviour = None


def set_future_behaviour(behaviour):
    """Install the client's ``RecordFuture`` methods; return the previous ones (see the compiled twin)."""
    global _behaviour
    previous = _behaviour
    _behaviour = behaviour
    return previous


class RecordFuture:
    """The producer's per-record future: its batch's result plus its offset delta."""

    __slots__ = ("_result", "_relative_offset", "_topic", "_partition", "_timestamp",
                 "_key_size", "_value_size", "_callbacks", "_errbacks")

    def __init__(self, result, relative_offset, topic, partition, timestamp, key_size, value_size):
        self._result = result
        self._relative_offset = relative_offset
        self._topic = topic
        self._partition = partition
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size
        self._callbacks = None
        self._errbacks = None

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


class ProducerBatchBase:
    """The fields of a producer batch that ``FastSend`` touches (the rest: the client's subclass)."""

    __slots__ = ("tp", "builder", "futures", "result", "closed")

    def __init__(self, tp, builder, result):
        self.tp = tp
        self.builder = builder
        self.futures = []
        self.result = result
        self.closed = False


class FastSend:
    """``KafkaProducer.send`` for the common case (see the compiled twin).

    Plain Python is not atomic under the GIL, so this twin holds ``lock``
    (the accumulator's) from its checks to the append.
    """

    __slots__ = ("enabled", "metadata", "sticky", "open_batches", "partition_for_key",
                 "slow", "on_full", "batch_size", "max_record_size", "lock", "attach_callback")

    def __init__(self, metadata, sticky, open_batches, partition_for_key, slow, on_full,
                 batch_size, max_record_size, lock=None, attach_callback=None):
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
        self.lock = lock

    def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None,
             callback=None):
        appended = self._append(topic, value, key, partition, timestamp_ms, headers, callback)
        if appended is None:
            return self.slow(topic, value, key, partition, timestamp_ms, headers, callback)
        future, full = appended
        if full:
            self.on_full()
        if callback is not None:
            self.attach_callback(future, callback)
        return future

    def _append(self, topic, value, key, partition, timestamp_ms, headers, callback):
        if (not self.enabled or headers
                or (value is not None and type(value) is not bytes)
                or (key is not None and type(key) is not bytes)
                or (partition is not None and type(partition) is not int)
                or (timestamp_ms is not None and type(timestamp_ms) is not int)):
            return None
        slots = self.open_batches.get(topic)
        parts = self.metadata.partitions.get(topic)
        if slots is None or not parts:
            return None
        count = len(parts)
        if partition is not None:
            p = partition
        elif key is None:
            p = self.sticky.get(topic)
            if p is None:
                return None
        else:
            p = self.partition_for_key(key, count)
        key_len = -1 if key is None else len(key)
        value_len = -1 if value is None else len(value)
        if p < 0 or p >= count or p >= len(slots) or max(key_len, 0) + max(value_len, 0) + 92 > self.max_record_size:
            return None
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        with self.lock:
            batch = slots[p]
            if batch is None or batch.closed:
                return None
            delta = batch.builder.append(ts, key, value)
            if delta < 0:
                return None
            future = RecordFuture(batch.result, delta, topic, p, ts, key_len, value_len)
            batch.futures.append(future)
            return future, batch.builder.size_bytes >= self.batch_size
