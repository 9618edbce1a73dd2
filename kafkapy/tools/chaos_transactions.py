"""``kafkapy-chaos``'s transactional workload and its read_committed check.

One confluent-kafka transactional producer (``transactional.id``
``chaos-txn``) writes transactions of ``RECORDS_PER_TXN`` numbered values
``txn:<n>`` across the partitions of ``chaos-txn``; a seeded share of them is
aborted on purpose. Each transaction's outcome is what the client was told:

* committed: ``commit_transaction`` returned;
* aborted: ``abort_transaction`` returned (on purpose, or after an error that
  required an abort);
* unknown: a fatal error (or a commit/abort that kept failing) left the
  outcome unsaid; the producer is made again, and its ``init_transactions``
  completes or aborts what the old one left.

A read_committed consumer then reads the topic to its end: every committed
value exactly once, no aborted value, an unknown transaction all or nothing
and at most once. Owned by its thread until ``join``.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

from kafkapy.tools.chaos_cluster import RDKAFKA_LOG, TXN_TOPIC

RECORDS_PER_TXN = 10
ABORT_SHARE = 0.2  # of the transactions aborted on purpose
TXN_CALL_TIMEOUT_S = 60.0
COMMIT_ATTEMPTS = 5


@dataclass
class TxnRun:
    name: str = "transactional"
    committed: list = field(default_factory=list)  # [[n, ...]] one list per transaction
    aborted: list = field(default_factory=list)
    unknown: list = field(default_factory=list)
    commit_times: list = field(default_factory=list)  # monotonic, one per commit
    errors: list = field(default_factory=list)  # (time, message)
    producers_made: int = 0

    def failed(self, message: str) -> None:
        self.errors.append((time.monotonic(), message[:200]))


class TransactionalThread(threading.Thread):
    """Transactions at ``rate`` records/s until the stop event."""

    def __init__(self, bootstrap: str, rate: float, partitions: int, stop: threading.Event, seed: int):
        super().__init__(name="chaos-transactional", daemon=True)
        self.bootstrap, self.rate, self.partitions, self.stop_event = bootstrap, rate, partitions, stop
        self.rng = random.Random(seed)
        self.run_ = TxnRun()
        self.producer = None

    def _make(self):
        from confluent_kafka import Producer

        if self.producer is not None:
            self.close()
        self.producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "chaos-txn",
                                  "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                  "transaction.timeout.ms": 60000, "message.timeout.ms": 55000,
                                  "socket.timeout.ms": 8000, "client.id": "chaos-transactional",
                                  "logger": RDKAFKA_LOG})
        self.run_.producers_made += 1
        self.producer.init_transactions(TXN_CALL_TIMEOUT_S)

    def close(self) -> None:
        p, self.producer = self.producer, None
        if p is not None:
            try:
                p.purge()
                p.flush(1)
            except Exception:
                pass

    def run(self) -> None:
        n = 0
        pace = RECORDS_PER_TXN / self.rate
        while not self.stop_event.is_set():  # bounded by the run's duration (the stop event)
            values = list(range(n, n + RECORDS_PER_TXN))
            n += RECORDS_PER_TXN
            try:
                if self.producer is None:
                    self._make()
            except Exception as exc:  # the coordinator not reachable yet: later
                self.run_.failed(f"init_transactions: {_describe(exc)}")
                self.close()
                self.stop_event.wait(1.0)
                continue
            getattr(self.run_, self._one(values)).append(values)
            self.stop_event.wait(pace)

    def _one(self, values) -> str:
        """Run one transaction; ``committed``, ``aborted`` or ``unknown``."""
        from confluent_kafka import KafkaException

        p = self.producer
        abort = self.rng.random() < ABORT_SHARE
        try:
            p.begin_transaction()
            for v in values:
                p.produce(TXN_TOPIC, f"txn:{v}".encode(), partition=v % self.partitions)
                p.poll(0)
            if abort:
                p.abort_transaction(TXN_CALL_TIMEOUT_S)
                return "aborted"
        except KafkaException as exc:
            self.run_.failed(_describe(exc))
            return self._after_error(exc.args[0])
        except Exception as exc:  # BufferError and the like: the transaction cannot go on
            self.run_.failed(_describe(exc))
            return self._abort_or_unknown()
        for _ in range(COMMIT_ATTEMPTS):  # bounded; a retriable commit error may be retried as is
            try:
                p.commit_transaction(TXN_CALL_TIMEOUT_S)
                self.run_.commit_times.append(time.monotonic())
                return "committed"
            except KafkaException as exc:
                self.run_.failed(_describe(exc))
                err = exc.args[0]
                if err.retriable() and not err.txn_requires_abort() and not err.fatal():
                    continue
                return self._after_error(err)
        return self._restart()

    def _after_error(self, err) -> str:
        if err.fatal():
            return self._restart()
        return self._abort_or_unknown()

    def _abort_or_unknown(self) -> str:
        from confluent_kafka import KafkaException

        for _ in range(COMMIT_ATTEMPTS):  # bounded
            if self.producer is None:  # closed meanwhile: the outcome stays unsaid
                break
            try:
                self.producer.abort_transaction(TXN_CALL_TIMEOUT_S)
                return "aborted"
            except KafkaException as exc:
                self.run_.failed(f"abort: {_describe(exc)}")
                if exc.args[0].fatal() or not exc.args[0].retriable():
                    break
        return self._restart()

    def _restart(self) -> str:
        self.close()
        return "unknown"


def _describe(exc) -> str:
    err = exc.args[0] if exc.args else None
    if hasattr(err, "name"):
        return f"{err.name()}: {err.str()}"
    return repr(exc)


def validate_transactions(run_: TxnRun, consumed: dict) -> dict:
    """Counts, and the broken promises: committed values missing or repeated,
    aborted values seen, unknown transactions seen partly or twice."""
    seen: dict = {}
    for values in consumed.values():
        for v in values:
            n = int(v.rpartition(":")[2])
            seen[n] = seen.get(n, 0) + 1
    committed = [n for t in run_.committed for n in t]
    aborted = [n for t in run_.aborted for n in t]
    partial_unknown = sum(1 for t in run_.unknown if 0 < sum(1 for n in t if n in seen) < len(t))
    return {"transactions": len(run_.committed) + len(run_.aborted) + len(run_.unknown),
            "committed": len(run_.committed), "aborted": len(run_.aborted), "unknown": len(run_.unknown),
            "committed_records": len(committed), "consumed_records": sum(seen.values()),
            "committed_lost": sum(1 for n in committed if n not in seen),
            "duplicates": sum(c - 1 for c in seen.values() if c > 1),
            "aborted_seen": sum(1 for n in aborted if n in seen),
            "unknown_partial": partial_unknown,
            "unknown_landed": sum(1 for t in run_.unknown if t and t[0] in seen),
            "errors": len(run_.errors), "producers": run_.producers_made}
