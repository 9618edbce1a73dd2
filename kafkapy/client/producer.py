"""KafkaProducer: send() -> serializers -> partitioner -> RecordAccumulator -> Sender thread.

Thread-safe: any number of threads may call ``send``; one background thread
(``sender.Sender``) does all network I/O.  Defaults follow Kafka 3+/4:
``enable.idempotence=true`` implies ``acks=all`` (``acks`` must then be
all/-1), ``retries`` is effectively infinite and bounded by
``delivery.timeout.ms``.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
import weakref

from kafkapy._core import load

from . import config as _config
from . import errors
from .accumulator import RecordAccumulator
from .conn import KafkaClient
from .partitioner import CallablePartitioner, DefaultPartitioner, partition_for_key
from .sender import Sender
from .structs import TopicPartition

log = logging.getLogger("kafkapy.client")

_CLIENT_IDS = itertools.count(1)
_BATCH_HEADER_BYTES = 61


def _acks(value) -> int:
    if value in ("all", "-1", -1):
        return -1
    return int(value)


def _to_bytes(value, what):
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise errors.SerializationError(
        f"{what} of type {type(value).__name__} needs a {what}.serializer (bytes expected)")


def _attach_callback(future, callback):
    """``callback(record_metadata, exception)`` (Java's onCompletion) on ``future``."""
    future.add_callback(lambda metadata: callback(metadata, None))
    future.add_errback(lambda exc: callback(None, exc))


class KafkaProducer:
    """``KafkaProducer(bootstrap_servers="host:port,...", **settings)``; see the module docstring."""

    def __init__(self, bootstrap_servers=None, **settings):
        if bootstrap_servers is not None:
            settings["bootstrap.servers"] = bootstrap_servers
        cfg = _config.resolve(_config.PRODUCER, settings, "KafkaProducer")
        self.config = cfg
        self.client_id = cfg["client.id"] or f"producer-{next(_CLIENT_IDS)}"
        idempotent = bool(cfg["enable.idempotence"])
        transactional_id = cfg["transactional.id"]
        if transactional_id:
            if not idempotent and ("enable.idempotence" in settings or "enable_idempotence" in settings):
                raise ValueError("Cannot set a transactional.id without also enabling idempotence.")
            idempotent = True
        if cfg["acks"] is None:
            acks = -1 if idempotent else 1
        else:
            acks = _acks(cfg["acks"])
            if idempotent and acks != -1:
                if "enable.idempotence" in settings or "enable_idempotence" in settings:
                    raise ValueError("enable.idempotence=true requires acks=all")
                idempotent = False  # Java 3.2+: idempotence is off unless explicitly set
        if idempotent and int(cfg["max.in.flight.requests.per.connection"]) > 5:
            raise ValueError("idempotence needs max.in.flight.requests.per.connection <= 5")
        self.acks = acks
        self.idempotent = idempotent
        self._key_serializer = cfg["key.serializer"]
        self._value_serializer = cfg["value.serializer"]
        partitioner = cfg["partitioner"]
        self._partitioner = DefaultPartitioner() if partitioner is None else (
            partitioner if hasattr(partitioner, "partition") else CallablePartitioner(partitioner))
        self._sticky = isinstance(self._partitioner, DefaultPartitioner)
        self._max_block_ms = int(cfg["max.block.ms"])
        self._max_request_size = int(cfg["max.request.size"])
        self._buffer_memory = int(cfg["buffer.memory"])
        security = _config.security(cfg)
        self._client = KafkaClient(cfg["bootstrap.servers"], self.client_id, int(cfg["request.timeout.ms"]),
                                   int(cfg["retry.backoff.ms"]), int(cfg["metadata.max.age.ms"]),
                                   bool(cfg["allow.auto.create.topics"]), security)
        self._metadata = self._client.metadata
        delivery_timeout_ms = int(cfg["delivery.timeout.ms"])
        linger_ms = int(cfg["linger.ms"])
        self._linger_s = linger_ms / 1000
        if delivery_timeout_ms < linger_ms + int(cfg["request.timeout.ms"]):
            raise ValueError("delivery.timeout.ms should be >= linger.ms + request.timeout.ms")
        self._accumulator = RecordAccumulator(
            int(cfg["batch.size"]), linger_ms, self._buffer_memory,
            _config.compression_code(cfg["compression.type"]), int(cfg["retry.backoff.ms"]),
            delivery_timeout_ms)
        self._sender = Sender(self._client, self._accumulator, cfg, idempotent, acks)
        self._txn = None
        if transactional_id:
            from .transaction_manager import TransactionManager
            # Its own connections for coordinator requests (see transaction_manager).
            txn_client = KafkaClient(cfg["bootstrap.servers"], self.client_id, int(cfg["request.timeout.ms"]),
                                     int(cfg["retry.backoff.ms"]), int(cfg["metadata.max.age.ms"]), False, security)
            self._txn = TransactionManager(transactional_id, int(cfg["transaction.timeout.ms"]), txn_client,
                                           self._max_block_ms, int(cfg["retry.backoff.ms"]))
            self._sender.transaction_manager = self._txn
            self._sender.transactional_id = transactional_id.encode("utf-8")
        self._closed = False
        self._tps: dict = {}
        self._close_lock = threading.Lock()
        self._fast = self._install_fast_send()
        self._sender.start()

    def _install_fast_send(self):
        """Route ``self.send`` through ``_core.producer.FastSend`` when it can serve it.

        The compiled FastSend appends a bytes record to an open batch and
        returns its future in one C call (about 0.5 us against 3 us for the
        Python path below, which it falls back to for everything else).  It
        is installed as an instance attribute so ``producer.send(...)`` costs
        no Python frame; it is skipped when a subclass overrides ``send``, a
        serializer is set, or a custom partitioner decides null-key
        placement.  It holds the producer only weakly (no reference cycle).
        """
        if (self._txn is not None or type(self).send is not KafkaProducer.send or self._key_serializer is not None
                or self._value_serializer is not None or type(self._partitioner) is not DefaultPartitioner):
            return None
        producer = load("producer")
        if not producer.__name__.endswith(".producer"):
            # The plain-Python twin has to take the accumulator lock and costs
            # more than the Python send below (4.6 against 3.1 us per record).
            return None
        ref = weakref.ref(self)

        def slow(topic, value, key, partition, timestamp_ms, headers, callback):
            producer = ref()
            if producer is None:
                raise errors.IllegalStateError("Cannot perform operation after producer has been closed")
            return KafkaProducer.send(producer, topic, value, key, partition, timestamp_ms, headers, callback)

        fast = producer.FastSend(
            self._metadata, self._partitioner._sticky, self._accumulator.open_batches, partition_for_key, slow, functools.partial(self._sender.maybe_wakeup, 0.0),
            int(self.config["batch.size"]), min(self._max_request_size, self._buffer_memory),
            self._accumulator._lock, _attach_callback)
        self.send = fast.send
        return fast

    # ------------------------------------------------------------ metadata

    def _wait_on_metadata(self, topic: str, partition, max_wait_ms: float):
        metadata = self._metadata
        count = metadata.partition_count(topic)
        if count is not None and (partition is None or partition < count):
            return count, 0.0
        begin = time.monotonic()
        deadline = begin + max_wait_ms / 1000
        while True:
            if topic not in self._client.topics:
                # The set is read by the sender thread; replacing it is atomic.
                self._client.topics = self._client.topics | {topic}
            version = metadata.request_update()
            self._sender.wakeup()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            metadata.wait_for_update(version, min(remaining, 0.5))
            count = metadata.partition_count(topic)
            if count is not None and (partition is None or partition < count):
                return count, (time.monotonic() - begin) * 1000
            if self._closed:
                raise errors.IllegalStateError("producer closed while waiting for metadata")
        if count is None:
            raise errors.KafkaTimeoutError(f"Topic {topic} not present in metadata after {max_wait_ms:.0f} ms.")
        raise errors.KafkaTimeoutError(
            f"Partition {partition} of topic {topic} with partition count {count} "
            f"is not present in metadata after {max_wait_ms:.0f} ms.")

    def partitions_for(self, topic: str) -> set:
        """The partition ids of ``topic`` (waits for its metadata up to max.block.ms)."""
        self._wait_on_metadata(topic, None, self._max_block_ms)
        return set(self._metadata.partitions.get(topic, {}))

    # ------------------------------------------------------------ send

    def _tp(self, topic, partition):
        # One TopicPartition per partition, reused: send() needs it per record.
        tp = self._tps.get((topic, partition))
        if tp is None:
            tp = self._tps[(topic, partition)] = TopicPartition(topic, partition)
        return tp

    def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None,
             callback=None):
        """Queue one record; returns a future resolving to RecordMetadata.

        ``callback(record_metadata, exception)`` — Java's onCompletion — is
        called on the sender thread when the record is acknowledged or fails.
        """
        if self._closed:
            raise errors.IllegalStateError("Cannot perform operation after producer has been closed")
        if self._txn is not None:
            self._txn.check_send()
        if topic is None:
            raise TypeError("topic is required")
        if value is None and key is None:
            pass  # a tombstone with a null key is legal
        parts = self._metadata.partitions.get(topic)
        if parts and (partition is None or partition < len(parts)):
            count, waited_ms = len(parts), 0.0
        else:
            count, waited_ms = self._wait_on_metadata(topic, partition, self._max_block_ms)
        # bytes pass straight through (the common case, checked inline: this
        # runs once per record).
        if key is None or (self._key_serializer is None and type(key) is bytes):
            key_bytes = key
        else:
            key_bytes = _to_bytes(self._key_serializer(key) if self._key_serializer else key, "key")
        if value is None or (self._value_serializer is None and type(value) is bytes):
            value_bytes = value
        else:
            value_bytes = _to_bytes(self._value_serializer(value) if self._value_serializer else value, "value")
        if headers:
            headers = [(k, _to_bytes(v, "header value")) for k, v in headers]
        size = ((len(key_bytes) if key_bytes is not None else 0)
                + (len(value_bytes) if value_bytes is not None else 0) + _BATCH_HEADER_BYTES + 31)
        if size > self._max_request_size or size > self._buffer_memory:
            raise errors.MessageTooLargeError(  # noqa: F821 - defined per error code
                f"The message is {size} bytes when serialized which is larger than "
                f"max.request.size ({self._max_request_size}) or buffer.memory")
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        remaining_ms = max(0.0, self._max_block_ms - waited_ms)
        accumulator = self._accumulator
        if partition is None:
            available = self._metadata.available_partitions(topic) if key_bytes is None else None
            partition = self._partitioner.partition(topic, key_bytes, count, available)
            tp = self._tp(topic, partition)
            if self._sticky and key_bytes is None:
                future, full, new_batch = accumulator.append(tp, timestamp_ms, key_bytes, value_bytes, headers,
                                                             remaining_ms, abort_on_new_batch=True)
                if future is None:
                    # KIP-480: a new batch is needed, so move the sticky
                    # partition first and put the record where it now points.
                    self._partitioner.on_new_batch(topic, partition, count, available)
                    partition = self._partitioner.partition(topic, None, count, available)
                    tp = self._tp(topic, partition)
                    future, full, new_batch = accumulator.append(tp, timestamp_ms, None, value_bytes, headers,
                                                                 remaining_ms)
            else:
                future, full, new_batch = accumulator.append(tp, timestamp_ms, key_bytes, value_bytes, headers,
                                                             remaining_ms)
        else:
            if partition < 0 or partition >= count:
                raise ValueError(f"partition {partition} out of range for topic {topic} with {count} partitions")
            tp = self._tp(topic, partition)
            future, full, new_batch = accumulator.append(tp, timestamp_ms, key_bytes, value_bytes, headers,
                                                         remaining_ms)
        if full:
            self._sender.maybe_wakeup(0.0)
        elif new_batch:
            self._sender.maybe_wakeup(time.monotonic() + self._linger_s)
        if callback is not None:
            _attach_callback(future, callback)
        return future

    # ------------------------------------------------------------ transactions

    def _transaction_manager(self):
        if self._txn is None:
            raise errors.IllegalStateError("Transactional method invoked on a non-transactional producer.")
        if self._closed:
            raise errors.IllegalStateError("Cannot perform operation after producer has been closed")
        return self._txn

    def init_transactions(self, timeout=None) -> None:
        """InitProducerId for transactional.id: fences older producers with the same
        id and completes (aborts) a transaction they left open.  ``timeout`` in
        seconds (default max.block.ms)."""
        txn = self._transaction_manager()
        producer_id, epoch = txn.init_transactions(timeout)
        self._sender.new_producer = (producer_id, epoch)
        self._sender.wakeup()

    def begin_transaction(self) -> None:
        self._transaction_manager().begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict, group_metadata, timeout=None) -> None:
        """Commit ``offsets`` ({TopicPartition: offset or OffsetAndMetadata}) for the
        group as part of the transaction.  ``group_metadata``: a consumer's
        ``group_metadata()`` or a group id."""
        self._transaction_manager().send_offsets_to_transaction(offsets, group_metadata, timeout)

    def commit_transaction(self, timeout=None) -> None:
        """Flush, then EndTxn(commit).  If a send of the transaction failed this
        raises and the transaction must be aborted."""
        self._transaction_manager().commit_transaction(self.flush, timeout)

    def abort_transaction(self, timeout=None) -> None:
        """Fail records not yet sent, wait for those in flight, EndTxn(abort)."""
        txn = self._transaction_manager()

        def abort_undrained(error):
            for batch in self._accumulator.abort_all():
                self._accumulator.complete(batch, -1, -1, error)

        if txn.abort_transaction(abort_undrained, self.flush, timeout):
            self._sender.new_producer = (txn.producer_id, txn.producer_epoch)
            self._sender.wakeup()

    # ------------------------------------------------------------ lifecycle

    def flush(self, timeout=None) -> None:
        """Send everything queued now and wait for it (``timeout`` in seconds)."""
        batches = self._accumulator.begin_flush()
        self._sender.wakeup()
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            for batch in batches:
                while True:
                    result = batch.result
                    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                    if not result.wait(remaining):
                        raise errors.KafkaTimeoutError(f"flush not completed in {timeout} s")
                    if result.done or not batch.futures or batch.futures[0]._result is result:
                        break
                    # The batch was split: wait for the parts.
                    for future in batch.futures:
                        future._wait(remaining)
                    break
        finally:
            self._accumulator.end_flush()

    def close(self, timeout=None) -> None:
        """Send what is queued, wait up to ``timeout`` s (None: forever, 0: abort), stop."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            if self._fast is not None:
                self._fast.enabled = False
        if timeout is not None and timeout <= 0:
            self._accumulator.close()
            self._sender.initiate_close(force=True)
            self._sender.join(5)
            return
        if self._txn is not None:
            self._txn.close()
        self._accumulator.close()
        self._sender.initiate_close()
        self._sender.join(timeout)
        if self._sender.is_alive():
            self._sender.initiate_close(force=True)
            self._sender.join(5)

    def metrics(self) -> dict:
        sender = self._sender
        return {
            "buffer-total-bytes": self._buffer_memory,
            "buffer-available-bytes": self._buffer_memory - self._accumulator.used_bytes,
            "incomplete-batches": len(self._accumulator.incomplete),
            "producer-id": self._sender.producer_id,
            "producer-epoch": self._sender.producer_epoch,
            "transaction-state": None if self._txn is None else self._txn.state,
            "request-total": sender.requests_sent,
            "record-send-total": sender.records_sent,
            "batch-size-avg": sender.batch_bytes_sent / sender.batches_sent if sender.batches_sent else 0.0,
            "records-per-request-avg": sender.records_sent / sender.requests_sent if sender.requests_sent else 0.0,
        }

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):  # pragma: no cover - best effort
        try:
            if not self._closed:
                self._closed = True
                self._sender.initiate_close(force=True)
        except Exception:
            pass
