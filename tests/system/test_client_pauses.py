"""kafkapy's own client (kafkapy.client.KafkaProducer, idempotent, acks=all)
through a partition leader's SIGSTOP past the ZooKeeper session timeout and
its SIGCONT (test_pauses.py's scenario, which runs it for librdkafka): the
chaos run's duplicate (a value written by producer id 2000 sequence 5038 and
again by 2001 sequence 0) came from this client re-sequencing batches of
unknown outcome after the resumed zombie answered
OUT_OF_ORDER_SEQUENCE_NUMBER.  metadata.max.age.ms is short so the client
also asks the resumed broker for metadata while it still believes it leads.

Checked: nothing consumed twice, every acknowledged value consumed, in send
order per partition; a delivery failure may only be a batch reported with an
unknown outcome (OUT_OF_ORDER_SEQUENCE_NUMBER after an epoch bump, or a
timeout), never a silent re-send."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from support.cluster import (
    SESSION_TIMEOUT_MS,
    consume_all,
    create_topic_assigned,
    validate,
    zk_controller,
    zk_partition_state,
)
from support.wait import wait_for

pytestmark = pytest.mark.timeout(180)

NEW_LEADER_S = SESSION_TIMEOUT_MS / 1000 + 10
# What a batch of unknown outcome may be failed with (never a duplicate instead).
ALLOWED_FAILURES = ("OutOfOrderSequenceNumberError", "KafkaTimeoutError", "RequestTimedOutError")


class ClientProducer:
    """support.cluster.BackgroundProducer's checks with kafkapy.client's producer:
    values ``"<n>"`` round-robin over the partitions at ``rate_per_s``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate_per_s: float = 200.0,
                 max_messages: int = 20_000):
        from kafkapy.client import KafkaProducer

        self.producer = KafkaProducer(bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                                      retry_backoff_ms=100, request_timeout_ms=3000,
                                      delivery_timeout_ms=60000, metadata_max_age_ms=500)
        self.topic, self.partitions = topic, partitions
        self.rate_per_s, self.max_messages = rate_per_s, max_messages
        self.acked: dict[int, list[int]] = {}
        self.errors: list[str] = []
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="client-producer", daemon=True)

    def _ok(self, value, metadata):
        with self._lock:
            self.acked.setdefault(metadata.partition, []).append(value)

    def _failed(self, exc):
        with self._lock:
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _run(self):
        next_at = time.monotonic()
        while not self._stop.is_set() and self.sent < self.max_messages:  # bounded by max_messages
            value = self.sent
            future = self.producer.send(self.topic, str(value).encode(), partition=value % self.partitions)
            future.add_callback(self._ok, value).add_errback(self._failed)
            self.sent += 1
            next_at += 1.0 / self.rate_per_s
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def start(self) -> "ClientProducer":
        self._thread.start()
        return self

    def acked_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acked.values())

    def progress(self, more: int, what: str, timeout_s: float = 40.0) -> None:
        target = self.acked_count() + more
        wait_for(lambda: self.acked_count() >= target, timeout_s, what)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.producer.flush(60)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.producer.close(5)


def test_client_producer_through_a_paused_leader_writes_nothing_twice(make_cluster):
    c, zk = make_cluster()
    controller, _ = wait_for(lambda: zk_controller(zk), 20, "a controller")
    leader, other = [i for i in (1, 2, 3) if i != controller]
    create_topic_assigned(c, "cpause", [[leader, other, controller], [other, controller, leader]],
                          config={"min.insync.replicas": "2"})
    producer = ClientProducer(c.bootstrap, "cpause", 2).start()
    try:
        producer.progress(200, "200 acknowledged before the pause")
        epoch = zk_partition_state(zk, "cpause", 0)["leader_epoch"]
        os.killpg(c.brokers[leader].pgid, signal.SIGSTOP)
        paused_at = time.monotonic()
        try:
            state = wait_for(lambda: (s := zk_partition_state(zk, "cpause", 0))["leader"] not in (leader, -1)
                             and s, NEW_LEADER_S, "a new leader while the old one is paused")
            assert state["leader_epoch"] > epoch
            producer.progress(200, "progress while the leader is paused")
            # The old leader stayed paused past its ZooKeeper session (the
            # controller moved the partition). Not "> session timeout" from
            # the pause: ZooKeeper counts from the session's last ping, which
            # came up to a third of the timeout before the SIGSTOP.
            assert time.monotonic() - paused_at > SESSION_TIMEOUT_MS / 1000 * 2 / 3
        finally:
            os.killpg(c.brokers[leader].pgid, signal.SIGCONT)
        producer.progress(300, "progress after the leader resumed")
        producer.stop()
    finally:
        producer.close()
    assert all(e.startswith(ALLOWED_FAILURES) for e in producer.errors), producer.errors[:5]
    consumed = consume_all(c.bootstrap, "cpause", 2)
    validate(producer.acked, consumed)
    assert sum(len(v) for v in consumed.values()) >= producer.acked_count() >= 700
