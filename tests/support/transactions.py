"""A transactional producer and a reader by isolation level over confluent-kafka,
the last offset by isolation level over a raw ListOffsets, raw
AddOffsetsToTxn / TxnOffsetCommit / OffsetFetch (require_stable), and ``Copier``
(Kafka's transactional message copier, in a thread): what the transaction
tests share (integration and system alike).

Each helper bounds its wait by ``TIMEOUT_S`` and closes the clients it made,
except ``producer``, whose transactional producer the caller owns.
"""

from __future__ import annotations

import time

import pytest

from .raw_api import call

# A module that imports these helpers is skipped, as a module that imports
# confluent-kafka itself is, where it is not installed.
pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

TIMEOUT_S = 30


def producer(bootstrap: str, txn_id: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **conf})
    p.init_transactions(TIMEOUT_S)
    return p


def consume(bootstrap: str, topic: str, partitions: int, isolation: str, want: int | None = None,
            idle_s: float = 2.0) -> list[bytes]:
    """Values read from offset 0 of every partition, in partition then offset
    order: until ``want`` records came (then one more idle poll shows no
    extra), or, without ``want``, nothing new for ``idle_s`` (short of
    ``want`` it waits to the deadline: a loaded machine's first fetch can come
    later than any quiet spell)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list] = {}
    count = 0
    deadline = time.monotonic() + TIMEOUT_S
    last_new = time.monotonic()
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                if want is not None and count < want:
                    continue
                if time.monotonic() - last_new > (0.5 if want is not None else idle_s):
                    break
                continue
            assert m.error() is None, m.error()
            got.setdefault(m.partition(), []).append((m.offset(), m.value()))
            count += 1
            last_new = time.monotonic()
    finally:
        c.close()
    out = []
    for p in sorted(got):
        offsets = [o for o, _ in got[p]]
        assert offsets == sorted(offsets), f"partition {p} out of order: {offsets}"
        out += [v for _, v in got[p]]
    return out


def list_offset(bootstrap: str, topic: str, partition: int, isolation_level: int) -> int:
    r = call(bootstrap, 2, 7, {"replica_id": -1, "isolation_level": isolation_level, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": -1}]}]})
    (p,) = r.topics[0].partitions
    assert p.error_code == 0
    return p.offset


def txn_offset_commit(bs: str, txn_id: str, pid: int, epoch: int, group: str, topic: str, offset: int,
                      version: int = 3) -> int:
    """A raw TxnOffsetCommit of ``offset`` for ``topic``-0: its error."""
    r = call(bs, 28, version, {"transactional_id": txn_id, "group_id": group, "producer_id": pid,
                               "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                               "group_instance_id": None, "topics": [
                                   {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                                   "committed_leader_epoch": -1,
                                                                   "committed_metadata": ""}]}]})
    (t,) = r.topics
    (p,) = t.partitions
    return p.error_code


def add_offsets(bs: str, txn_id: str, pid: int, epoch: int, group: str) -> int:
    """A raw AddOffsetsToTxn v3: its error."""
    return call(bs, 25, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                            "group_id": group}).error_code


def stable_offset(bs: str, group: str, topic: str) -> tuple[int, int]:
    """OffsetFetch v7 with require_stable: (committed offset, partition error)."""
    r = call(bs, 9, 7, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
                        "require_stable": True})
    assert r.error_code == 0
    (p,) = r.topics[0].partitions
    return p.committed_offset, p.error_code


def _rdkafka_debug(client_id: str) -> dict:
    """``KAFKAPY_TEST_RDKAFKA_DEBUG=eos,protocol`` (librdkafka's ``debug``
    contexts): the copiers' librdkafka logs on stderr, named by client id."""
    import os

    contexts = os.environ.get("KAFKAPY_TEST_RDKAFKA_DEBUG")
    return {"debug": contexts, "client.id": client_id} if contexts else {}


# The copier's bound on one librdkafka transactional call (retried while retriable).
CALL_TIMEOUT_S = 10


class _Replaced(Exception):
    """A copier incarnation learns it was replaced (its thread stops quietly)."""


class Copier:
    """Kafka's TransactionalMessageCopier over confluent-kafka, in a thread: a
    read_committed consumer assigned ``input_topic``-``partition`` in ``group``
    (starting from the group's committed offset), and a producer with its own
    ``transactional.id``; each batch of at most ``transaction_size`` records
    goes to ``output_topic``-``partition`` in one transaction together with
    the consumer's position (``send_offsets_to_transaction`` with the
    consumer's group metadata), then is committed. Every ``abort_every``-th
    transaction is aborted on purpose (0: none). A failed transaction is
    aborted and the consumer goes back to the committed offset, as Kafka's
    copier does. It stops when the committed position reaches ``end`` (the
    input partition's end, written before), or at ``timeout_s``. Until
    ``release()`` it sleeps ``pause_s`` between transactions.

    librdkafka (2.16 included) can block in ``send_offsets_to_transaction``
    past its timeout when the cached group coordinator's broker left the
    metadata (confluentinc/librdkafka#5511, #5456), and a thread cannot be
    interrupted inside the C call. So an incarnation whose call has not
    returned within ``stall_s`` is replaced, as Kafka's test bounces a
    copier: a new consumer and producer with the same ``transactional.id``,
    whose ``init_transactions`` fences the stuck one (its transaction is
    aborted, or completed first), then the group's committed offset. The
    stuck thread stops quietly whenever its call returns; ``replaced``
    counts these.

    Each librdkafka call is bounded by ``CALL_TIMEOUT_S`` (and asked again
    while its error is retriable), so a live incarnation returns well within
    ``stall_s``.

    Mutable state is owned by the current incarnation's thread; the test reads
    ``position``, ``commits``, ``aborts``, ``replaced`` and ``error`` (set once,
    when it gave up) after ``join``, or as rough progress while it runs."""

    def __init__(self, bootstrap: str, input_topic: str, output_topic: str, partition: int, end: int,
                 group: str, transactional_id: str, transaction_size: int = 100, pause_s: float = 0.0,
                 abort_every: int = 0, timeout_s: float = 120.0, stall_s: float = 25.0):
        import threading

        self.bootstrap, self.input_topic, self.output_topic = bootstrap, input_topic, output_topic
        self.partition, self.end, self.group, self.transactional_id = partition, end, group, transactional_id
        self.transaction_size, self.pause_s, self.abort_every = transaction_size, pause_s, abort_every
        self.timeout_s, self.stall_s = timeout_s, stall_s
        self.position = 0
        self.commits = self.aborts = self.replaced = 0
        self.renewed = 0  # producers made anew after an abort left messages unacknowledged
        self.stage = "starting"  # what the current incarnation does now (shown when a test waits for it)
        self.empty_polls = 0
        self.last_error = ""
        self.stalls: list[tuple] = []  # (when, stage, last error) of each incarnation replaced
        self.abort_reasons: list[str] = []
        self.error: BaseException | None = None
        self.failed_at = ""
        self._released = threading.Event()
        self._finished = threading.Event()
        self._generation = 0
        self._beat = time.monotonic()
        self._lock = threading.Lock()  # guards _generation and _beat
        self._thread = threading.Thread(target=self._supervise, name=f"copier-{transactional_id}", daemon=True)

    def start(self) -> "Copier":
        self._thread.start()
        return self

    def release(self) -> None:
        self._released.set()

    def stop(self) -> None:
        """Give up (a failed test): the incarnation stops after its current call."""
        with self._lock:
            self._generation += 1
        self._finished.set()

    def join(self, timeout_s: float) -> None:
        self.release()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"{self.transactional_id} still copying after {timeout_s} s"

    def _supervise(self) -> None:
        import threading

        deadline = time.monotonic() + self.timeout_s
        generation = 0
        threading.Thread(target=self._run, args=(generation, deadline), daemon=True).start()
        while not self._finished.wait(1.0):  # bounded by the deadline
            with self._lock:
                stalled = time.monotonic() - self._beat > self.stall_s
                if stalled:
                    generation = self._generation = self._generation + 1
                    self._beat = time.monotonic()
            if time.monotonic() >= deadline:
                self._finish(generation, AssertionError(
                    f"{self.transactional_id}: at {self.position} of {self.end} after {self.timeout_s} s"))
                return
            if stalled:
                self.replaced += 1
                self.stalls.append((time.strftime("%H:%M:%S"), self.stage, self.last_error,
                                    self._offset_fetch_probe()))
                threading.Thread(target=self._run, args=(generation, deadline), daemon=True).start()

    def _offset_fetch_probe(self):
        """What the group coordinator answers now, without librdkafka: a raw
        OffsetFetch v7 with require_stable of the input partition to each
        broker, ``(broker, error code, committed offset)`` from the one
        coordinating the group (top-level NONE), else the errors seen."""
        answers = []
        for address in self.bootstrap.split(","):
            try:
                r = call(address, 9, 7, {"group_id": self.group, "require_stable": True, "topics": [
                    {"name": self.input_topic, "partition_indexes": [self.partition]}]}, timeout_s=5)
            except Exception as e:  # a broker down or restarting
                answers.append((address, type(e).__name__))
                continue
            if r.error_code == 0:
                (q,) = r.topics[0].partitions
                return address, q.error_code, q.committed_offset
            answers.append((address, r.error_code))
        return answers

    def _alive(self, generation: int) -> None:
        """A call returned: the incarnation is alive, unless it was replaced meanwhile."""
        with self._lock:
            if generation != self._generation:
                raise _Replaced()
            self._beat = time.monotonic()

    def _finish(self, generation: int, error: BaseException | None) -> None:
        with self._lock:
            if generation != self._generation or self._finished.is_set():
                return
            self.error = error
            if error is not None:
                self.failed_at = time.strftime("%H:%M:%S")
            self._finished.set()

    def _retrying(self, call, deadline: float, generation: int, retry=lambda error: error.retriable()):
        """``call()`` again while it fails with an error ``retry`` accepts (by
        default a retriable one: librdkafka's advice for a transactional call
        that timed out); other errors (abortable, fatal) are raised. Only a
        success counts as alive: a call failing again and again for
        ``stall_s`` is a stall too."""
        from confluent_kafka import KafkaException

        while True:  # bounded by the deadline
            try:
                result = call()
            except KafkaException as e:
                with self._lock:
                    if generation != self._generation:
                        raise _Replaced() from None
                self.last_error = str(e.args[0])
                if not retry(e.args[0]) or time.monotonic() >= deadline:
                    raise
            else:
                self._alive(generation)
                return result
            time.sleep(0.1)

    def _committed(self, consumer, deadline: float, generation: int) -> int:
        """The group's committed offset of the input partition. librdkafka
        gives up on OffsetFetch at the first NOT_COORDINATOR (a bounced
        coordinator; not flagged retriable), where Kafka's consumer looks
        the coordinator up again: asked again on any non-fatal error."""
        tp = TopicPartition(self.input_topic, self.partition)
        (got,) = self._retrying(lambda: consumer.committed([tp], timeout=10), deadline, generation,
                                retry=lambda error: not error.fatal())
        return max(got.offset, 0)  # OFFSET_INVALID (-1001): nothing committed yet, so the beginning

    def _run(self, generation: int, deadline: float) -> None:
        from confluent_kafka import KafkaException

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
        try:
            def transactional_producer():
                p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id,
                              "linger.ms": 5, "batch.size": 512, **_rdkafka_debug(self.transactional_id)})
                self.stage = "init_transactions"
                self._retrying(lambda: p.init_transactions(CALL_TIMEOUT_S), deadline, generation)
                return p

            p = transactional_producer()
            delivered = [0]  # the current transaction's messages acknowledged by the leader

            def on_delivery(err, _msg):
                if err is None:
                    delivered[0] += 1

            self.stage = "committed"
            position = self._committed(consumer, deadline, generation)
            consumer.assign([TopicPartition(self.input_topic, self.partition, position)])
            transactions = 0
            while position < self.end:  # bounded by the supervisor's deadline
                if not self._released.is_set():
                    self._released.wait(self.pause_s)
                # (a message of the fetch before a rewind is left out: the
                # input has no gaps, so each batch starts at the position)
                self.stage = f"consume at {position}"
                polled = consumer.consume(self.transaction_size, 0.2)
                batch = [m for m in polled if m.error() is None and m.offset() >= position]
                if not batch:  # (the input is all there: polls that stay empty are a stall too)
                    with self._lock:
                        if generation != self._generation:
                            raise _Replaced()
                    self.empty_polls += 1
                    if polled and polled[0].error() is not None:
                        self.stage = f"consume at {position}: {polled[0].error()}"
                    continue
                self._alive(generation)
                assert batch[0].offset() == position, (self.transactional_id, batch[0].offset(), position)
                transactions += 1
                nxt = batch[-1].offset() + 1
                abort = bool(self.abort_every) and transactions % self.abort_every == 0
                delivered[0] = 0
                try:
                    p.begin_transaction()
                    for m in batch:
                        p.produce(self.output_topic, value=m.value(), key=m.key(), partition=self.partition,
                                  on_delivery=on_delivery)
                    offsets = [TopicPartition(self.input_topic, self.partition, nxt)]
                    self.stage = f"send_offsets_to_transaction {nxt}"
                    self._retrying(lambda: p.send_offsets_to_transaction(
                        offsets, consumer.consumer_group_metadata(), CALL_TIMEOUT_S), deadline, generation)
                    if not abort:
                        self.stage = f"commit_transaction {nxt}"
                        self._retrying(lambda: p.commit_transaction(CALL_TIMEOUT_S), deadline, generation)
                except KafkaException as e:
                    if not e.args[0].txn_requires_abort():
                        raise
                    self.abort_reasons.append(str(e.args[0]))
                    abort = True
                if abort:
                    self.stage = "abort_transaction"
                    self._retrying(lambda: p.abort_transaction(CALL_TIMEOUT_S), deadline, generation)
                    self.aborts += 1
                    p.poll(0)  # the purged messages' delivery reports
                    if delivered[0] < len(batch):
                        # librdkafka (2.16) purges the unacknowledged messages
                        # on abort and gives their sequence numbers to the next
                        # ones (rd_kafka_purge_queues' "advancing epoch base
                        # msgid"), trusting they were never written. A batch
                        # that was written (e.g. answered NOT_LEADER_OR_FOLLOWER
                        # after its append, Kafka's answer to a parked acks=all
                        # produce whose leadership moved, which librdkafka
                        # takes for "not persisted") then makes the next
                        # transaction's batch, same epoch and sequences, a
                        # duplicate of the aborted one: acknowledged with the
                        # aborted offsets, never written, committed empty (a
                        # bounce run lost one partition's input 120-129 so:
                        # ABORT then an empty COMMIT, next batch at sequence
                        # 130). A new producer bumps the epoch: a fresh
                        # sequence space, as Kafka's producer bumps it after
                        # an abort it cannot account for.
                        self.renewed += 1
                        p = transactional_producer()
                    self.stage = "committed after abort"
                    position = self.position = self._committed(consumer, deadline, generation)
                    consumer.assign([TopicPartition(self.input_topic, self.partition, position)])
                    continue
                self.commits += 1
                position = self.position = nxt
            self._finish(generation, None)
        except _Replaced:
            pass
        except BaseException as e:  # reported through ``error``; the test asserts on it
            self._finish(generation, e)
        finally:
            consumer.close()
