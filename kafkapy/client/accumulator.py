"""RecordAccumulator: per-partition deques of open batches (Java's design).

``append`` (user threads) adds a record to the last batch of its partition's
deque or opens a new batch; the sender thread asks ``ready`` which leader
nodes have a sendable batch and ``drain``s at most one batch per partition per
request.  A batch is ready when it is full (or another batch queued behind
it), its ``linger.ms`` has passed, a flush or close is in progress, or memory
is exhausted and appenders are waiting.

``buffer.memory`` is accounted per batch as ``max(batch.size, first record)``
bytes reserved when the batch opens and released when it completes, the way
Java's BufferPool hands out batch.size buffers; an append that finds no room
blocks up to ``max.block.ms`` and then raises ``KafkaTimeoutError``.

Ownership: every field is guarded by ``self._lock`` (one lock for the whole
accumulator: under the GIL per-deque locks buy nothing); batches leave the
deques only in ``drain`` (sender thread) and come back via ``reenqueue``.
"""

from __future__ import annotations

import collections
import threading
import time

from kafkapy._core import load

from . import errors
from .structs import RecordMetadata, TopicPartition

BatchBuilder = load("records").BatchBuilder
_producer = load("producer")

# Java's estimate of a record's worst-case overhead in a v2 batch: 5-byte
# length + attributes + 10-byte timestamp delta + 5-byte offset delta + two
# 5-byte length varints + header count = 31 bytes, plus the batch header.
RECORD_OVERHEAD_BYTES = 31


class BatchResult:
    """Completion state shared by the futures of one batch (Java's ProduceRequestResult)."""

    __slots__ = ("_event", "base_offset", "log_append_time", "error", "done", "callback_futures", "_woken")

    def __init__(self):
        # Created only when someone blocks (get() or flush()): an Event is a
        # Condition plus two locks, and most batches are never waited on.
        self._event = None
        self._woken = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error = None
        self.done = False
        # Futures of this batch with callbacks (guarded by _CALLBACK_LOCK):
        # completing a batch of 148 records then touches only these, not all.
        self.callback_futures = None

    def wait(self, timeout) -> bool:
        """Block until completed (or woken by a split); False on timeout."""
        with _CALLBACK_LOCK:
            if self.done or self._woken:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        return event.wait(timeout)

    def wake(self) -> None:
        """Release every waiter (call after setting ``done``, or when split)."""
        with _CALLBACK_LOCK:
            self._woken = True
            event = self._event
        if event is not None:
            event.set()


class _FutureBehaviour:
    """What the future ``send`` returns does; ``get``/``result`` block for RecordMetadata.

    The future itself is ``_core.producer.RecordFuture`` (fields and a C
    allocation, so the compiled ``FastSend`` makes one in ~20 ns); these
    functions, installed with ``set_future_behaviour``, take it as ``self``.
    Java's FutureRecordMetadata: a batch-level result plus this record's
    offset delta, resolved when asked.
    """

    def done(self) -> bool:
        return self._result.done

    @property
    def is_done(self) -> bool:
        return self._result.done

    def succeeded(self) -> bool:
        return self._result.done and self._result.error is None

    def failed(self) -> bool:
        return self._result.done and self._result.error is not None

    def exception(self, timeout=None):
        self._wait(timeout)
        return self._result.error

    def _wait(self, timeout):
        while True:
            result = self._result
            if not result.wait(timeout):
                raise errors.KafkaTimeoutError(f"send to {self._topic} not completed in {timeout} s")
            # A split batch re-points its futures at the new batches; follow.
            if self._result is result:
                return

    def _metadata(self):
        result = self._result
        base = result.base_offset
        offset = base + self._relative_offset if base >= 0 else -1
        timestamp = result.log_append_time if result.log_append_time >= 0 else self._timestamp
        return RecordMetadata(self._topic, self._partition, offset, timestamp, self._key_size, self._value_size)

    def result(self, timeout=None):
        self._wait(timeout)
        if self._result.error is not None:
            raise self._result.error
        return self._metadata()

    get = result

    def add_callback(self, fn, *args, **kwargs):
        """``fn(*args, record_metadata, **kwargs)`` on success (kafka-python's convention)."""
        self._add(True, fn, args, kwargs)
        return self

    def add_errback(self, fn, *args, **kwargs):
        """``fn(*args, exception, **kwargs)`` on failure."""
        self._add(False, fn, args, kwargs)
        return self

    def add_both(self, fn, *args, **kwargs):
        self.add_callback(fn, *args, **kwargs)
        self.add_errback(fn, *args, **kwargs)
        return self

    def _add(self, on_success, fn, args, kwargs):
        with _CALLBACK_LOCK:
            if not self._result.done:
                if self._callbacks is None and self._errbacks is None:
                    if self._result.callback_futures is None:
                        self._result.callback_futures = []
                    self._result.callback_futures.append(self)
                if on_success:
                    if self._callbacks is None:
                        self._callbacks = []
                    self._callbacks.append((fn, args, kwargs))
                else:
                    if self._errbacks is None:
                        self._errbacks = []
                    self._errbacks.append((fn, args, kwargs))
                return
        error = self._result.error
        if on_success and error is None:
            fn(*args, self._metadata(), **kwargs)
        elif not on_success and error is not None:
            fn(*args, error, **kwargs)

    def _fire(self):
        error = self._result.error
        callbacks = self._errbacks if error is not None else self._callbacks
        # The compiled future is not GC-tracked: drop the callbacks (which may
        # refer back to it) once fired so no uncollectable cycle remains.
        self._callbacks = self._errbacks = None
        if not callbacks:
            return
        arg = error if error is not None else self._metadata()
        for fn, args, kwargs in callbacks:
            try:
                fn(*args, arg, **kwargs)
            except Exception:  # a user callback must not kill the sender thread
                import logging
                logging.getLogger("kafkapy.client").exception("producer callback raised")


_producer.set_future_behaviour(_FutureBehaviour)
# The name users and kafka-python code know.
FutureRecordMetadata = _producer.RecordFuture


# Guards "is it done? else register a callback" against the sender thread
# completing the batch in between; held only for a few instructions.
_CALLBACK_LOCK = threading.Lock()


class ProducerBatch(_producer.ProducerBatchBase):
    """One batch for one partition; owned by the accumulator, then the sender.

    ``tp``, ``builder``, ``futures``, ``result`` and ``closed`` are fields of
    ``_core.producer.ProducerBatchBase`` (read by ``FastSend``).  ``closed``
    only ever goes False -> True, always before the batch is sealed.
    """

    __slots__ = ("created_ms", "attempts", "retry_at_ms", "reserved_bytes", "built", "producer_id",
                 "producer_epoch", "base_sequence", "in_retry", "drained_ms", "maybe_written")

    def __init__(self, tp, builder, created_ms, reserved_bytes):
        super().__init__(tp, builder, BatchResult())
        self.created_ms = created_ms
        self.attempts = 0
        self.retry_at_ms = 0.0
        self.reserved_bytes = reserved_bytes
        self.built = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.in_retry = False
        self.drained_ms = 0.0
        # An attempt ended without a definite answer (timeout, dropped
        # connection): the broker may have written it (see idempotence.py).
        self.maybe_written = False

    @property
    def record_count(self) -> int:
        return self.builder.records_count

    def seal(self, producer_id=-1, producer_epoch=-1, base_sequence=-1, is_transactional=False):
        """Close for appends and encode (again only if the producer identity changed)."""
        self.closed = True
        if (self.built is None or producer_id != self.producer_id
                or producer_epoch != self.producer_epoch or base_sequence != self.base_sequence):
            self.producer_id = producer_id
            self.producer_epoch = producer_epoch
            self.base_sequence = base_sequence
            self.built = self.builder.build(producer_id, producer_epoch, base_sequence, is_transactional)
        return self.built

    def complete(self, base_offset, log_append_time, error):
        result = self.result
        with _CALLBACK_LOCK:
            result.base_offset = base_offset
            result.log_append_time = log_append_time
            result.error = error
            result.done = True
            result._woken = True
            event = result._event
        if event is not None:
            event.set()
        callback_futures = result.callback_futures
        if callback_futures:
            result.callback_futures = None
            for future in callback_futures:
                future._fire()


class RecordAccumulator:
    def __init__(self, batch_size: int, linger_ms: int, buffer_memory: int, compression: int,
                 retry_backoff_ms: int, delivery_timeout_ms: int):
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.compression = compression
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self._lock = threading.Lock()
        self._memory_freed = threading.Condition(self._lock)
        self.batches: dict[TopicPartition, collections.deque] = {}
        # topic -> [open batch or None per partition]: the batch FastSend may
        # append to without this lock (see _core.producer.FastSend).
        self.open_batches: dict[str, list] = {}
        self.incomplete: set = set()
        self.used_bytes = 0
        self._waiters = 0
        self.flushes_in_progress = 0
        self.closed = False

    # ------------------------------------------------------------ user threads

    def append(self, tp, timestamp_ms, key, value, headers, max_block_ms, abort_on_new_batch=False):
        """Returns ``(future, batch_is_full, new_batch_created)``; ``(None, False, False)``
        when ``abort_on_new_batch`` and the record would need a new batch."""
        with self._lock:
            if self.closed:
                raise errors.IllegalStateError("producer closed while send in progress")
            dq = self.batches.get(tp)
            if dq is None:
                dq = self.batches[tp] = collections.deque()
            if dq:
                last = dq[-1]
                if not last.closed:
                    builder = last.builder
                    delta = builder.append(timestamp_ms, key, value, headers)
                    if delta >= 0:
                        # The per-record fast path: the future is built inline.
                        future = FutureRecordMetadata(last.result, delta, tp.topic, tp.partition, timestamp_ms,
                                                      len(key) if key is not None else -1,
                                                      len(value) if value is not None else -1)
                        last.futures.append(future)
                        return future, len(dq) > 1 or builder.size_bytes >= self.batch_size, False
                    last.closed = True
            if abort_on_new_batch:
                return None, False, False
            estimate = (RECORD_OVERHEAD_BYTES + 61 + (len(key) if key is not None else 0)
                        + (len(value) if value is not None else 0)
                        + sum(len(k) + (len(v) if v else 0) + 10 for k, v in headers or ()))
            reserve = max(self.batch_size, estimate)
            if self.used_bytes + reserve > self.buffer_memory:
                self._waiters += 1
                try:
                    deadline = time.monotonic() + max_block_ms / 1000
                    while self.used_bytes + reserve > self.buffer_memory:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0 or self.closed:
                            raise errors.KafkaTimeoutError(
                                f"Failed to allocate memory within the configured max blocking time {max_block_ms} ms.")
                        self._memory_freed.wait(remaining)
                finally:
                    self._waiters -= 1
                # Someone may have opened a batch while we waited.
                if dq and not dq[-1].closed:
                    delta = dq[-1].builder.append(timestamp_ms, key, value, headers)
                    if delta >= 0:
                        last = dq[-1]
                        return self._future(last, delta, tp, timestamp_ms, key, value), len(dq) > 1, False
                    dq[-1].closed = True
            batch = ProducerBatch(tp, BatchBuilder(self.compression, max(self.batch_size, estimate)),
                                  time.monotonic() * 1000, reserve)
            delta = batch.builder.append(timestamp_ms, key, value, headers)
            self.used_bytes += reserve
            dq.append(batch)
            self.incomplete.add(batch)
            slots = self.open_batches.get(tp.topic)
            if slots is None:
                slots = self.open_batches[tp.topic] = []
            if len(slots) <= tp.partition:
                slots.extend([None] * (tp.partition + 1 - len(slots)))
            slots[tp.partition] = batch
            future = self._future(batch, delta, tp, timestamp_ms, key, value)
            return future, len(dq) > 1 or batch.builder.size_bytes >= self.batch_size, True

    @staticmethod
    def _future(batch, delta, tp, timestamp_ms, key, value):
        future = FutureRecordMetadata(batch.result, delta, tp.topic, tp.partition, timestamp_ms,
                                      len(key) if key is not None else -1,
                                      len(value) if value is not None else -1)
        batch.futures.append(future)
        return future

    def begin_flush(self):
        with self._lock:
            self.flushes_in_progress += 1
            return list(self.incomplete)

    def end_flush(self):
        with self._lock:
            self.flushes_in_progress -= 1

    def has_incomplete(self) -> bool:
        return bool(self.incomplete)

    # ------------------------------------------------------------ sender thread

    def ready(self, metadata, now_ms, blocked_tps=()):
        """``(ready_nodes, next_ready_check_ms, unknown_leader_topics)``."""
        ready_nodes = set()
        unknown = set()
        next_check = 1e18
        with self._lock:
            exhausted = self._waiters > 0
            flushing = self.flushes_in_progress > 0 or self.closed
            for tp, dq in self.batches.items():
                if not dq:
                    continue
                batch = dq[0]
                leader = metadata.leader_for(tp.topic, tp.partition)
                if leader < 0:
                    unknown.add(tp.topic)
                    continue
                if leader in ready_nodes or tp in blocked_tps:
                    continue
                if batch.in_retry and batch.retry_at_ms > now_ms:
                    next_check = min(next_check, batch.retry_at_ms - now_ms)
                    continue
                waited = now_ms - batch.created_ms
                full = len(dq) > 1 or batch.closed or batch.builder.size_bytes >= self.batch_size
                linger = 0 if batch.in_retry else self.linger_ms
                if full or waited >= linger or exhausted or flushing:
                    ready_nodes.add(leader)
                else:
                    next_check = min(next_check, linger - waited)
        return ready_nodes, next_check, unknown

    def drain(self, metadata, nodes, max_request_size, now_ms, can_drain=None):
        """Up to one batch per partition for each node, within ``max.request.size``."""
        out = {}
        with self._lock:
            for tp, dq in self.batches.items():
                if not dq:
                    continue
                node = metadata.leader_for(tp.topic, tp.partition)
                if node not in nodes:
                    continue
                batch = dq[0]
                if batch.in_retry and batch.retry_at_ms > now_ms:
                    continue
                if can_drain is not None and not can_drain(tp, batch):
                    continue
                drained = out.setdefault(node, [])
                size = sum(b.builder.size_bytes for b in drained)
                if drained and size + batch.builder.size_bytes > max_request_size:
                    continue
                dq.popleft()
                batch.closed = True
                self._forget_open(batch)
                batch.drained_ms = now_ms
                drained.append(batch)
        return out

    def reenqueue(self, batch, now_ms):
        """Put a batch back at the front of its deque for a retry, after the backoff."""
        batch.attempts += 1
        batch.in_retry = True
        batch.retry_at_ms = now_ms + self.retry_backoff_ms
        with self._lock:
            dq = self.batches.setdefault(batch.tp, collections.deque())
            # Keep sequence order among retried batches (idempotence): a later
            # batch may have been re-enqueued first.
            index = 0
            while (index < len(dq) and dq[index].in_retry and dq[index].base_sequence >= 0
                   and batch.base_sequence >= 0 and dq[index].base_sequence < batch.base_sequence):
                index += 1
            dq.insert(index, batch)

    def remove(self, batch) -> bool:
        """Take a queued batch out of its deque (to fail it); False if it is not queued."""
        with self._lock:
            dq = self.batches.get(batch.tp)
            if dq is None or batch not in dq:
                return False
            dq.remove(batch)
            return True

    def split(self, batch, now_ms):
        """MESSAGE_TOO_LARGE: re-encode the records in two halves and requeue both.

        Java splits into batch.size pieces; halving guarantees progress even
        when batch.size itself is over the broker's limit, and a one-record
        batch cannot be split (the caller fails it instead).
        """
        records = load("records").decode_records(batch.built or batch.seal())
        half = (len(records) + 1) // 2
        parts = []
        for chunk in (records[:half], records[half:]):
            builder = BatchBuilder(self.compression, 1 << 30)
            for _offset, timestamp_ms, key, value, headers in chunk:
                builder.append(timestamp_ms, key, value, headers)
            part = ProducerBatch(batch.tp, builder, batch.created_ms, 0)
            part.closed = True
            part.attempts = batch.attempts
            parts.append(part)
        # Re-point the original futures at the new batches (Java keeps the
        # thunks for this); the original result is never completed, and
        # waiters on it follow ``future._result`` once it is replaced.
        with _CALLBACK_LOCK:  # against add_callback registering on the old result meanwhile
            for index, future in enumerate(batch.futures):
                target = parts[0] if index < half else parts[1]
                future._result = target.result
                future._relative_offset = index if index < half else index - half
                target.futures.append(future)
                if future._callbacks is not None or future._errbacks is not None:
                    if target.result.callback_futures is None:
                        target.result.callback_futures = []
                    target.result.callback_futures.append(future)
        parts[0].reserved_bytes = batch.reserved_bytes
        with self._lock:
            self.incomplete.discard(batch)
            dq = self.batches.setdefault(batch.tp, collections.deque())
            for part in reversed(parts):
                self.incomplete.add(part)
                part.in_retry = True
                part.retry_at_ms = now_ms
                dq.appendleft(part)
        # Wake anyone blocked on the old result so they re-wait on the new one.
        batch.result.wake()

    def complete(self, batch, base_offset, log_append_time, error):
        batch.complete(base_offset, log_append_time, error)
        with self._lock:
            self.incomplete.discard(batch)
            self.used_bytes -= batch.reserved_bytes
            batch.reserved_bytes = 0
            if self._waiters:
                self._memory_freed.notify_all()

    def expired(self, now_ms):
        """Remove and return queued batches older than delivery.timeout.ms."""
        out = []
        with self._lock:
            for dq in self.batches.values():
                while dq and now_ms - dq[0].created_ms >= self.delivery_timeout_ms:
                    batch = dq.popleft()
                    batch.closed = True
                    self._forget_open(batch)
                    out.append(batch)
        return out

    def _forget_open(self, batch):
        # Drop the fast path's reference once a batch leaves its deque (the
        # closed flag alone already stops appends; this frees the memory).
        slots = self.open_batches.get(batch.tp.topic)
        if slots is not None and batch.tp.partition < len(slots) and slots[batch.tp.partition] is batch:
            slots[batch.tp.partition] = None

    def abort_all(self):
        with self._lock:
            batches = [b for dq in self.batches.values() for b in dq]
            for dq in self.batches.values():
                dq.clear()
            for batch in batches:
                batch.closed = True
            self.open_batches.clear()
        return batches

    def close(self):
        with self._lock:
            self.closed = True
            for slots in self.open_batches.values():
                for batch in slots:
                    if batch is not None:
                        batch.closed = True
            self._memory_freed.notify_all()
