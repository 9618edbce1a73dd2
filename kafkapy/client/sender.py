"""The producer's I/O thread (Java's Sender over a NetworkClient).

One loop, one thread ("kafkapy-producer-network-thread | <client.id>"):

1. refresh metadata when asked (unknown topic, NOT_LEADER_OR_FOLLOWER...) or
   when it is older than metadata.max.age.ms;
2. with idempotence, obtain a producer id (InitProducerId) before sending;
3. ask the accumulator which leaders have ready batches, drain at most one
   batch per partition per node, stamp producer id/epoch/sequence, and send
   one Produce request per node while the node has fewer than
   max.in.flight.requests.per.connection requests outstanding;
4. wait in ``select`` for responses, a wake-up byte (a new or full batch) or
   the next linger expiry, then complete, retry or split batches.

Idempotence (KIP-98): sequences are per partition and assigned when a batch
is first drained.  A partition with a batch being retried is drained only
once nothing else of it is in flight, and retried batches are re-inserted in
sequence order, so the broker sees sequences in order and records keep their
order across retries.  Without transactions the sequence errors, epoch bumps
(KIP-360) and batches of unknown outcome follow Java's TransactionManager
(idempotence.py): a retry keeps its producer id, epoch and sequence, and a
batch that may have been written is failed, never re-sent under a new epoch.
With transactions a sequence error fails the batch (the transaction aborts).

Ownership: everything here belongs to the sender thread, except
``wakeup()`` (any thread) and the accumulator/metadata (own locks).
"""

from __future__ import annotations

import functools
import logging
import select
import socket
import threading
import time

from kafkapy._core import load

from . import _produce, errors
from .conn import KafkaClient
from .idempotence import Idempotence
from .structs import TopicPartition

log = logging.getLogger("kafkapy.client")

_gil_io = load("gil_io")
_io_wait = _gil_io.io_wait
_send_nowait = _gil_io.send_nowait
_recv_into_nowait = _gil_io.recv_into_nowait

PRODUCE = 0
INIT_PRODUCER_ID = 22

MESSAGE_TOO_LARGE = 10
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
UNKNOWN_PRODUCER_ID = 59
# Errors after which the leader may have moved: refresh metadata (Java's
# InvalidMetadataException subclasses).
_METADATA_ERRORS = frozenset((3, 5, 6, 74, 75, 100))
# Answers after which the batch may be in the log: REQUEST_TIMED_OUT (acks=all
# waited too long), NOT_ENOUGH_REPLICAS_AFTER_APPEND.
_MAYBE_WRITTEN = frozenset((7, 20))


class Sender(threading.Thread):
    def __init__(self, client: KafkaClient, accumulator, config: dict, idempotent: bool, acks: int):
        super().__init__(name=f"kafkapy-producer-network-thread | {client.client_id}", daemon=True)
        self.client = client
        self.accumulator = accumulator
        self.metadata = client.metadata
        self.acks = acks
        self.idempotent = idempotent
        self.max_in_flight = int(config["max.in.flight.requests.per.connection"])
        self.max_request_size = int(config["max.request.size"])
        self.request_timeout_ms = int(config["request.timeout.ms"])
        self.retries = int(config["retries"])
        self.retry_backoff_ms = int(config["retry.backoff.ms"])
        self.delivery_timeout_ms = int(config["delivery.timeout.ms"])
        self.metadata_max_age_ms = int(config["metadata.max.age.ms"])
        self.running = True
        self.force_close = False
        self.producer_id = -1
        self.producer_epoch = -1
        # Without transactions: sequences, epoch bumps (idempotence.py).
        self._idem = Idempotence()
        self._next_sequence: dict[TopicPartition, int] = {}
        self._in_flight_batches: dict[TopicPartition, int] = {}
        self._fatal_error: Exception | None = None
        # Partitions with a batch waiting to be retried: an OUT_OF_ORDER for
        # them is explained by that batch, not by lost broker state.
        self._retrying: set = set()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        # epoll through _core's io_wait: it tells FastSend when this thread
        # has work and waits for the GIL (see gil_io.pyx).
        self._epoll = select.epoll()
        self._epoll.register(self._wake_r.fileno(), select.EPOLLIN)
        self._wake_fd = self._wake_r.fileno()
        self._wake_buf = bytearray(4096)
        self._registered: dict[int, object] = {}
        # When the sleeping loop will wake by itself (monotonic s; 0 while
        # awake).  send() wakes it only if a new batch is due earlier: a
        # wake-up is a syscall plus a GIL hand-over, about 1 ms each under
        # load, so one per batch capped throughput at ~20k records/s.
        self.wake_deadline = 0.0
        self._wakeup_pending = False
        self._node_backoff_until: dict[int, float] = {}
        # Totals for KafkaProducer.metrics() (Java's request-total,
        # record-send-total, batch-size-avg...); written by this thread only.
        self.requests_sent = 0
        self.batches_sent = 0
        self.records_sent = 0
        self.batch_bytes_sent = 0
        # Transactions (transaction_manager.TransactionManager, set by the
        # producer): the producer id comes from its init_transactions, and a
        # partition's first batch of a transaction waits for AddPartitionsToTxn.
        self.transaction_manager = None
        self.transactional_id: bytes | None = None
        self.new_producer: tuple[int, int] | None = None  # (id, epoch) to take on, set by the user thread
        self._txn_pending: set = set()

    # ------------------------------------------------------------ any thread

    def wakeup(self) -> None:
        if self._wakeup_pending:
            return
        self._wakeup_pending = True
        try:
            _send_nowait(self._wake_w, b"\x00")  # -1: the pipe is full, the sender is awake already
        except OSError:
            pass

    def maybe_wakeup(self, due_s: float) -> None:
        """Wake the loop if it sleeps past ``due_s`` (when a new batch becomes ready)."""
        deadline = self.wake_deadline
        if deadline and deadline > due_s:
            self.wakeup()

    def initiate_close(self, force: bool = False) -> None:
        self.running = False
        if force:
            self.force_close = True
        self.wakeup()

    # ------------------------------------------------------------ the loop

    def run(self) -> None:
        try:
            while self.running:
                self._run_once()
            # Graceful close: keep sending until everything is acknowledged.
            while not self.force_close and (self.accumulator.has_incomplete() or self._in_flight_count()):
                self._run_once()
            if self.force_close:
                error = errors.IllegalStateError("producer closed forcefully")
                for batch in self.accumulator.abort_all():
                    self.accumulator.complete(batch, -1, -1, error)
                for conn in self.client.connections.values():
                    conn.close(error)
        except Exception as exc:  # pragma: no cover - a bug; fail everything loudly
            log.exception("producer sender thread died")
            self._fatal_error = exc
            for batch in self.accumulator.abort_all():
                self.accumulator.complete(batch, -1, -1, exc)
        finally:
            self.client.close()
            self._epoll.close()
            self._wake_r.close()
            self._wake_w.close()

    def _in_flight_count(self) -> int:
        return sum(len(c.in_flight) for c in self.client.connections.values())

    def _run_once(self) -> None:
        now_ms = time.monotonic() * 1000
        refresh_in_ms = self._maybe_refresh_metadata(now_ms)
        if self.idempotent and not self._ensure_producer_id():
            self._poll(self.retry_backoff_ms)
            return
        self._expire(now_ms)
        ready_nodes, next_check_ms, unknown = self.accumulator.ready(self.metadata, now_ms)
        if unknown:
            self.client.topics.update(unknown)
            self.metadata.request_update()
        sendable = set()
        for node in ready_nodes:
            if self._node_backoff_until.get(node, 0) > now_ms:
                next_check_ms = min(next_check_ms, self._node_backoff_until[node] - now_ms)
                continue
            try:
                conn = self.client.connection(node)
            except errors.KafkaError as exc:
                log.warning("cannot connect to node %s: %s", node, exc)
                self._node_backoff_until[node] = now_ms + self.retry_backoff_ms
                self.metadata.request_update()
                continue
            if len(conn.in_flight) < self.max_in_flight:
                sendable.add(node)
        sent = False
        if sendable:
            drained = self.accumulator.drain(self.metadata, sendable, self.max_request_size, now_ms,
                                             self._can_drain if self.idempotent else None)
            for node, batches in drained.items():
                if batches:
                    self._send_produce(node, batches, now_ms)
                    sent = True
            if self._txn_pending and self._add_pending_partitions():
                sent = True  # loop at once: their batches can be drained now
        if sent:
            # Java's Sender: having sent, poll without blocking and loop, so
            # the next ready batch goes out while this one is in flight.
            # Sleeping here until the response instead left one request in
            # flight at a time (0.42 ms broker round trip per 16 KiB batch):
            # 1,600 requests/s, ~240k records/s, whatever the producer did.
            timeout_ms = 0.0
        else:
            timeout_ms = min(next_check_ms, refresh_in_ms,
                             100.0 if self._in_flight_count() else 1000.0)
        self._poll(max(0.0, timeout_ms))
        self._check_request_timeouts()

    def _maybe_refresh_metadata(self, now_ms: float) -> float:
        """Refresh metadata if it is wanted and allowed now; returns the ms
        until a wanted refresh is allowed (the sender must not sleep past it:
        a send waiting for a new topic's metadata would wait with it)."""
        metadata = self.metadata
        stale = now_ms - metadata.last_refresh_ms >= self.metadata_max_age_ms
        # A producer wants metadata only for topics it sends to (Java's
        # producer fetches none before its first send): a refresh at start-up
        # would only make the first send wait retry.backoff.ms for its topic.
        if not (metadata.need_update or stale) or not self.client.topics:
            return float("inf")
        since_ms = now_ms - metadata.last_refresh_ms
        if metadata.need_update and since_ms < self.retry_backoff_ms:
            # retry.backoff.ms between refreshes, as Java's Metadata does.
            return self.retry_backoff_ms - since_ms
        try:
            self.client.refresh_metadata()
        except errors.KafkaError as exc:
            log.warning("metadata refresh failed: %s", exc)
            metadata.last_refresh_ms = now_ms
        return float("inf")

    def _ensure_producer_id(self) -> bool:
        if self.transaction_manager is not None:
            new = self.new_producer
            if new is not None and not self._in_flight_count():
                self.new_producer = None
                self.producer_id, self.producer_epoch = new
                self._next_sequence.clear()
            return self.producer_id >= 0 and self.new_producer is None
        idem = self._idem
        idem.resolve()
        if idem.bump_partitions:
            self._maybe_bump()
        self.producer_id, self.producer_epoch = idem.producer_id, idem.producer_epoch
        if self.producer_id >= 0:
            return True
        if self._in_flight_count():
            return False  # wait for in-flight batches before changing identity
        try:
            response = self.client.any_request(INIT_PRODUCER_ID, {
                "transactional_id": None, "transaction_timeout": 60000,
                "producer_id": -1, "producer_epoch": -1,
            })
        except errors.KafkaError as exc:
            log.warning("InitProducerId failed: %s", exc)
            return False
        if response.error_code:
            error = errors.for_code(response.error_code, "InitProducerId")
            if not error.retriable:
                self._fail_everything(error)
            return False
        self.producer_id = response.producer_id
        self.producer_epoch = response.producer_epoch
        idem.set_producer(self.producer_id, self.producer_epoch)
        return True

    def _maybe_bump(self) -> None:
        """Bump the epoch for the partitions that asked, once none of their
        batches is on the wire; fail their batches that may have been
        written (re-sent under the new epoch, the broker could not tell them
        from new records: the chaos run's duplicate)."""
        idem = self._idem
        if any(self._in_flight_batches.get(tp) for tp in idem.bump_partitions):
            return
        for batch in idem.bump():
            self.accumulator.remove(batch)
            self.accumulator.complete(batch, -1, -1, errors.for_code(
                OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"{batch.tp.topic}-{batch.tp.partition}: the producer epoch was bumped after a sequence error "
                f"and this batch (sequence {batch.base_sequence}, epoch {batch.producer_epoch}) may have been "
                f"written already; it is not sent again"))

    def _fail_everything(self, error) -> None:
        for batch in self.accumulator.abort_all():
            self.accumulator.complete(batch, -1, -1, error)

    def _can_drain(self, tp, batch) -> bool:
        # A retried batch goes out only when nothing else of its partition is
        # in flight, so sequences reach the broker in order.
        if batch.in_retry and self._in_flight_batches.get(tp, 0):
            return False
        txn = self.transaction_manager
        if txn is None:
            return self._idem.can_drain(tp, batch)
        if txn is not None and not txn.is_added(tp):
            self._txn_pending.add(tp)
            return False
        return True

    def _add_pending_partitions(self) -> bool:
        """AddPartitionsToTxn for the partitions whose first batch of the
        transaction is ready (Java's sender sends it before their Produce)."""
        pending, self._txn_pending = self._txn_pending, set()
        txn = self.transaction_manager
        try:
            txn.add_partitions(pending)
        except errors.KafkaError as exc:
            log.warning("AddPartitionsToTxn failed: %s", exc)
            self._fail_everything(exc)
            return False
        return all(txn.is_added(tp) for tp in pending)

    def _send_produce(self, node: int, batches, now_ms: float) -> None:
        topics: dict[str, list] = {}
        for batch in batches:
            tp = batch.tp
            if self.idempotent and self.transaction_manager is None:
                data = batch.seal(*self._idem.stamp(batch))
            elif self.idempotent:
                if batch.producer_id != self.producer_id or batch.base_sequence < 0:
                    sequence = self._next_sequence.get(tp, 0)
                    self._next_sequence[tp] = (sequence + batch.record_count) & 0x7FFFFFFF
                else:
                    sequence = batch.base_sequence
                data = batch.seal(self.producer_id, self.producer_epoch, sequence,
                                  self.transaction_manager is not None)
            else:
                data = batch.seal()
            self._in_flight_batches[tp] = self._in_flight_batches.get(tp, 0) + 1
            self.records_sent += batch.record_count
            self.batch_bytes_sent += len(data)
            topics.setdefault(tp.topic, []).append((tp.partition, data))
        conn = self.client.connections[node]
        expect = self.acks != 0
        self.requests_sent += 1
        self.batches_sent += len(batches)

        def on_response(response, error, batches=batches, node=node):
            self._handle_response(node, batches, response, error)

        try:
            version = conn.version(PRODUCE)
            body = _produce.encode_request(version, self.acks, self.request_timeout_ms, topics.items(),
                                           self.transactional_id)
            conn.send_encoded(PRODUCE, version, body, on_response if expect else None,
                              functools.partial(_produce.decode_response, version),
                              version >= _produce.FLEXIBLE_FROM, expect_response=expect)
        except errors.KafkaError as exc:
            # conn.send closed the connection, failing earlier in-flight
            # requests; this one was never registered, so handle it here.
            self._handle_response(node, batches, None, exc)
            return
        self._register(conn)
        if not expect:
            for batch in batches:
                self._done_in_flight(batch.tp)
                self.accumulator.complete(batch, -1, -1, None)

    def _register(self, conn) -> None:
        fd = conn.fileno()
        if fd >= 0 and self._registered.get(fd) is not conn:
            try:
                self._epoll.register(fd, select.EPOLLIN)
            except FileExistsError:  # the fd number was reused before we noticed
                self._epoll.modify(fd, select.EPOLLIN)
            self._registered[fd] = conn

    def _poll(self, timeout_ms: float) -> None:
        # Drop closed connections first (the kernel already removed a closed
        # fd from the epoll set; a reused number is re-registered above).
        for fd, conn in list(self._registered.items()):
            if conn.fileno() != fd:
                try:
                    self._epoll.unregister(fd)
                except (OSError, ValueError):
                    pass
                del self._registered[fd]
        self.wake_deadline = time.monotonic() + timeout_ms / 1000
        try:
            events = _io_wait(self._epoll, timeout_ms / 1000)
        finally:
            self.wake_deadline = 0.0
        for fd, _ in events:
            if fd == self._wake_fd:
                try:
                    while _recv_into_nowait(self._wake_r, self._wake_buf) > 0:
                        pass
                except OSError:
                    pass
                # Clear the flag only once the pipe is drained: cleared
                # before, a wakeup() landing in between (its byte then eaten
                # by this drain) left the flag set with the pipe empty, and
                # every later wakeup() was skipped until the 1 s idle poll
                # expired (a 1,000 ms stall in one bench run out of two).
                # A wakeup() suppressed after the drain is harmless: this
                # thread is awake and checks the accumulator next.
                self._wakeup_pending = False
            else:
                conn = self._registered.get(fd)
                if conn is not None:
                    conn.on_readable()

    def _check_request_timeouts(self) -> None:
        now = time.monotonic()
        for conn in list(self.client.connections.values()):
            if conn.in_flight and now - conn.in_flight[0].sent_at > self.request_timeout_ms / 1000:
                conn.close(errors.KafkaTimeoutError(
                    f"no Produce response from node {conn.node_id} in {self.request_timeout_ms} ms"))
                self.metadata.request_update()

    def _done_in_flight(self, tp) -> None:
        n = self._in_flight_batches.get(tp, 0) - 1
        if n > 0:
            self._in_flight_batches[tp] = n
        else:
            self._in_flight_batches.pop(tp, None)

    def _expire(self, now_ms: float) -> None:
        for batch in self.accumulator.expired(now_ms):
            if self.idempotent and self.transaction_manager is None and batch.base_sequence >= 0:
                self._idem.on_failed(batch, True)  # expired in a retry: outcome unknown
            self.accumulator.complete(batch, -1, -1, errors.KafkaTimeoutError(
                f"Expiring {batch.record_count} record(s) for {batch.tp.topic}-{batch.tp.partition}: "
                f"{now_ms - batch.created_ms:.0f} ms has passed since batch creation"))

    # ------------------------------------------------------------ responses

    def _handle_response(self, node, batches, response, error) -> None:
        now_ms = time.monotonic() * 1000
        by_tp = {}
        if response is not None:
            for topic in response.responses:
                for part in topic.partition_responses:
                    by_tp[(topic.name, part.index)] = part
        retried_tps = set()
        for batch in batches:
            tp = batch.tp
            self._done_in_flight(tp)
            if error is not None:
                code, message = int(error.error_code), str(error)
                self.metadata.request_update()
            else:
                part = by_tp.get((tp.topic, tp.partition))
                if part is None:
                    code, message = 13, "partition missing from the Produce response"
                else:
                    code, message = part.error_code, getattr(part, "error_message", None)
            if error is not None or code in _MAYBE_WRITTEN:
                batch.maybe_written = True
            txn = self.transaction_manager
            idem = self._idem if self.idempotent and txn is None else None
            if code == 0 or code == DUPLICATE_SEQUENCE_NUMBER:
                base_offset = part.base_offset if code == 0 else -1
                if batch.in_retry:
                    self._retrying.discard(tp)
                if idem is not None:
                    idem.on_acked(batch)
                self.accumulator.complete(batch, base_offset, getattr(part, "log_append_time", -1), None)
                continue
            if code == MESSAGE_TOO_LARGE and batch.record_count > 1 and txn is None:
                log.info("splitting a batch of %d records for %s after MESSAGE_TOO_LARGE", batch.record_count, tp)
                if idem is not None:  # its sequences go; the halves are new batches
                    idem.on_failed(batch, batch.maybe_written)
                self.accumulator.split(batch, now_ms)
                self._retrying.add(tp)
                retried_tps.add(tp)
                continue
            failure = errors.for_code(code, message)
            retriable = failure.retriable
            if txn is not None and (code == UNKNOWN_PRODUCER_ID or (
                    code == OUT_OF_ORDER_SEQUENCE_NUMBER and tp not in self._retrying)):
                # A transactional producer does not change identity mid-
                # transaction: the batch fails, the transaction must abort
                # (which bumps the epoch and restarts sequences, KIP-360).
                retriable = False
            elif code == OUT_OF_ORDER_SEQUENCE_NUMBER or code == UNKNOWN_PRODUCER_ID:
                retriable = True  # Java's canRetry: with the same sequence, or after an epoch bump
                if idem is not None:
                    idem.on_sequence_error(batch, code)
            if code in _METADATA_ERRORS:
                self.metadata.request_update()
            within_deadline = now_ms - batch.created_ms < self.delivery_timeout_ms
            if retriable and batch.attempts < self.retries and within_deadline and not self.force_close:
                retried_tps.add(tp)
                self._retrying.add(tp)
                self.accumulator.reenqueue(batch, now_ms)
            else:
                if not within_deadline:
                    failure = errors.KafkaTimeoutError(
                        f"delivery.timeout.ms ({self.delivery_timeout_ms}) expired for {tp}: {failure}")
                if txn is not None:
                    txn.on_batch_failed(failure)
                elif idem is not None:
                    idem.on_failed(batch, batch.maybe_written)
                self.accumulator.complete(batch, -1, -1, failure)
