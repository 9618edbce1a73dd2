"""Transactional copiers while brokers are bounced (issue 27 §3), in the shape of
Kafka's own system test (tests/kafkatest/tests/core/transactions_test.py).

An input topic (RF 3, min.insync.replicas 2) is filled with unique values
before the copy. One copier per input partition, each with its own
``transactional.id`` and all in one consumer group (manually assigned, as
Kafka's copier is without ``--group-mode``), reads its partition with
read_committed and writes each poll to the same partition of the output topic
in one transaction with the consumer's position (send offsets to the
transaction, then commit); every few transactions one is aborted on purpose,
as Kafka's copier does at random. Copier 0 is Apache's Java client
(kafka-clients 3.9, ``KafkaClientTool copy``); the others are confluent-kafka
(librdkafka). While they copy, the three brokers are bounced in turn, clean
(SIGTERM, restart, full ISRs again) or hard (SIGKILL, its ZooKeeper
registration gone, restart): first the broker leading the Java copier's
``__transaction_state`` partition (its transaction coordinator), then the one
leading the group's ``__consumer_offsets`` partition (the group coordinator),
then the last one; each copier commits more after each restart.

What it checks: every copier reaches the end of its input partition; a
read_committed consumer reading the output during the bounces and another
reading it at the end each see every input value exactly once, partition by
partition in input order (no loss, no duplicate, no aborted record), and the
group's committed offsets are the input's end offsets.
"""

from __future__ import annotations

import threading
import time

import pytest

from kafkapy.coordinator.records import partition_for
from kafkapy.metadata.zk import data as zk_data
from support.cluster import wait_full_isr
from support.raw_api import call, transaction_states
from support.transactions import Copier, list_offset
from support.wait import wait_for

pytestmark = pytest.mark.timeout(540)

INPUT, OUTPUT = "input-topic", "output-topic"
PARTITIONS = 4
GROUP = "transactions-test-consumer-group"
INTERNAL_PARTITIONS = 3
TRANSACTION_SIZE = 10
ABORT_EVERY = 7
# Paced while the brokers are bounced: one transaction (10 records) per
# copier every 0.3 s or so is ~33 records/s per partition, so 1,500 records
# last at least 45 s, longer than three bounces take here (8-15 s each on a
# loaded 2-core machine); released, a copier finishes the rest within seconds.
PAUSE_S = 0.3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
OVERRIDES = {"offsets.topic.num.partitions": INTERNAL_PARTITIONS,
             "transaction.state.log.num.partitions": INTERNAL_PARTITIONS,
             "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
             # Leaderships stay where the bounces moved them: the next victim
             # is chosen by who leads now.
             "auto.leader.rebalance.enable": False, "controlled.shutdown.retry.backoff.ms": 500}


def _seed(bootstrap: str, per_partition: int) -> dict:
    """Values ``0..n-1`` (``n = PARTITIONS * per_partition``) into the input,
    value ``i`` into partition ``i % PARTITIONS``, idempotent and acks=all;
    returns ``{partition: [values in offset order]}``."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    failed = []
    for i in range(PARTITIONS * per_partition):
        p.produce(INPUT, value=b"%d" % i, partition=i % PARTITIONS,
                  on_delivery=lambda err, _msg: err is not None and failed.append(err))
        p.poll(0)
    assert p.flush(60) == 0 and failed == [], failed[:3]
    return {q: list(range(q, PARTITIONS * per_partition, PARTITIONS)) for q in range(PARTITIONS)}


class CommittedReader:
    """A read_committed consumer of the whole output (no group), in a thread
    while the copy runs or at the end: ``{partition: [values in offset
    order]}``. It reads until it holds ``want`` values, then for ``linger_s``
    more, so a duplicate past the ``want``-th value is seen too."""

    def __init__(self, bootstrap: str, want: int, timeout_s: float, linger_s: float = 2.0):
        self.bootstrap, self.want, self.timeout_s, self.linger_s = bootstrap, want, timeout_s, linger_s
        self.got: dict[int, list[int]] = {q: [] for q in range(PARTITIONS)}
        self.error = None
        self.errors: list[tuple] = []  # (when, partition, error) of the first 20 the consumer handed over
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="committed-reader", daemon=True)

    def count(self) -> int:
        return sum(map(len, self.got.values()))

    def _run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        # auto.offset.reset "error": a position out of range (a new leader
        # short of what the old one served) is reported among ``errors``;
        # librdkafka's default ("latest") would skip to the log end silently.
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "error", "fetch.wait.max.ms": 100})
        try:
            c.assign([TopicPartition(OUTPUT, q, 0) for q in range(PARTITIONS)])
            deadline = time.monotonic() + self.timeout_s
            full_at = None
            while time.monotonic() < deadline and not self._stop.is_set():  # bounded by the deadline
                if full_at is None and self.count() >= self.want:
                    full_at = time.monotonic()
                if full_at is not None and time.monotonic() - full_at >= self.linger_s:
                    return
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error() is None:
                    self.got[m.partition()].append(int(m.value()))
                elif len(self.errors) < 20:
                    self.errors.append((time.strftime("%H:%M:%S"), m.partition(), str(m.error())))
            positions = [(tp.partition, tp.offset) for tp in c.position(
                [TopicPartition(OUTPUT, q) for q in range(PARTITIONS)])]
            self.error = AssertionError(f"read {self.count()} of {self.want} committed values "
                                        f"({[len(self.got[q]) for q in range(PARTITIONS)]} by partition; "
                                        f"positions {positions}; errors {self.errors})")
        except BaseException as e:  # reported through ``error``
            self.error = e
        finally:
            c.close()

    def start(self) -> "CommittedReader":
        self._thread.start()
        return self

    def join(self, timeout_s: float) -> dict:
        self._thread.join(timeout_s)
        if self._thread.is_alive():  # stopped: its error says how far it read
            self._stop.set()
            self._thread.join(30)
            assert not self._thread.is_alive(), "the read_committed reader did not stop"
        if self.error is not None:
            raise self.error
        return self.got


def _exactly_once(expected: dict, got: dict, who: str) -> None:
    for q, values in expected.items():
        out = got.get(q, [])
        assert len(out) == len(set(out)), f"{who}: output-{q} has {len(out) - len(set(out))} duplicates"
        missing = set(values) - set(out)
        assert not missing, f"{who}: output-{q} lost {len(missing)} values, e.g. {sorted(missing)[:5]}"
        extra = set(out) - set(values)
        assert not extra, f"{who}: output-{q} has values of no input-{q} record: {sorted(extra)[:5]}"
        assert out == values, f"{who}: output-{q} out of input order"


def _output_state(cluster, txn_ids) -> str:
    """What a reader falling short needs to be told from: per output
    partition its leader's last stable offset and high watermark
    (ListOffsets read_committed and read_uncommitted) and the open
    transactions its producer state holds (DescribeProducers), and each
    copier's transaction state at its coordinator."""
    out = []
    for q in range(PARTITIONS):
        try:
            leader = cluster.brokers[cluster.leader_of(OUTPUT, q)].bootstrap
            lso, hw = (list_offset(leader, OUTPUT, q, level) for level in (1, 0))
            r = call(leader, 61, 0, {"topics": [{"name": OUTPUT, "partition_indexes": [q]}]}, timeout_s=5)
            open_txns = [(a.producer_id, a.producer_epoch, a.current_txn_start_offset)
                         for a in r.topics[0].partitions[0].active_producers if a.current_txn_start_offset >= 0]
            out.append(f"output-{q}: lso {lso} hw {hw} open {open_txns}")
        except Exception as e:  # (a diagnostic: what it could not read is said)
            out.append(f"output-{q}: {e!r}")
    states = dict.fromkeys(txn_ids, "?")
    for broker in cluster.brokers.values():  # each id answered by its coordinator
        try:
            for txn_id, state in zip(txn_ids, transaction_states(broker.bootstrap, txn_ids)):
                if not state.startswith("error"):
                    states[txn_id] = state
        except Exception:  # (a broker down: another answers)
            pass
    out.append(f"transactions {states}")
    return "; ".join(out)


def _leader(cluster, topic: str, partition: int) -> int:
    return wait_for(lambda: (leader := cluster.leader_of(topic, partition)) >= 0 and leader, 30,
                    f"a leader of {topic}-{partition}")


def _wait_all_isrs(cluster, zk) -> None:
    for topic, partitions in ((INPUT, PARTITIONS), (OUTPUT, PARTITIONS), ("__transaction_state", INTERNAL_PARTITIONS),
                              ("__consumer_offsets", INTERNAL_PARTITIONS)):
        wait_full_isr(cluster, zk, topic, partitions, 3, timeout_s=90)


def _bounce(cluster, zk, victim: int, clean: bool) -> None:
    broker = cluster.brokers[victim]
    if clean:
        assert broker.stop() == 0, broker.log_tail(40)
    else:
        broker.kill()
        # As Kafka's test: restarted once ZooKeeper dropped its registration
        # (the session of the process that died).
        wait_for(lambda: zk.exists(f"{zk_data.BROKER_IDS_PATH}/{victim}") is None, 30,
                 f"broker {victim}'s registration to go", interval_s=0.1)
    broker.start()
    _wait_all_isrs(cluster, zk)


def _copy_under_bounces(make_cluster, java_client, clean: bool, per_partition: int, rounds: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    cluster, zk = make_cluster(**OVERRIDES)
    bs = cluster.bootstrap
    for topic in (INPUT, OUTPUT):
        cluster.create_topic(topic, PARTITIONS, 3, config=TOPIC_CONFIG)
    expected = _seed(bs, per_partition)
    total = PARTITIONS * per_partition
    txn_ids = [f"copier-{q}" for q in range(PARTITIONS)]
    # Only a bound on the copiers, a little under the test's timeout: with
    # the machine's load average at 35 (other sessions' tests), three bounces
    # took 40-60 s and the released copiers ~10 transactions/s.
    budget_s = 420 if rounds == 1 else 1100
    java = java_client.copy(bs, INPUT, OUTPUT, 0, GROUP, txn_ids[0], transaction_size=TRANSACTION_SIZE,
                            pause_ms=int(PAUSE_S * 1000), abort_every=ABORT_EVERY, timeout_ms=budget_s * 1000,
                            configs={"transaction.timeout.ms": 40000})
    copiers = [Copier(bs, INPUT, OUTPUT, q, per_partition, GROUP, txn_ids[q], transaction_size=TRANSACTION_SIZE,
                      pause_s=PAUSE_S, abort_every=ABORT_EVERY, timeout_s=budget_s).start()
               for q in range(1, PARTITIONS)]
    reader = CommittedReader(bs, total, timeout_s=budget_s + 40).start()
    progress = Consumer({"bootstrap.servers": bs, "group.id": GROUP, "enable.auto.commit": False})
    finished = False
    try:
        def committed() -> list:
            got = progress.committed([TopicPartition(INPUT, q) for q in range(PARTITIONS)], timeout=5)
            return [max(tp.offset, 0) for tp in got]

        def committed_now() -> list:
            # (asked again while the group's coordinator moves)
            return wait_for(lambda: committed() or None, 30, "the group's committed offsets")

        def advanced(since: list) -> bool:
            failed = [(c.transactional_id, c.error) for c in copiers if c.error is not None]
            if failed or java.proc.poll() not in (None, 0):
                return True  # (the failure is reported below)
            now = committed()
            return all(n > s or n == per_partition for n, s in zip(now, since))

        def copiers_alive() -> None:
            failed = [(c.transactional_id, c.failed_at, c.error) for c in copiers if c.error is not None]
            assert not failed, failed
            assert java.proc.poll() in (None, 0), java.wait(5).describe()

        wait_for(lambda: advanced([0] * PARTITIONS), 60, "every copier's first commit")
        copiers_alive()
        _wait_all_isrs(cluster, zk)
        bounced = []
        for _round in range(rounds):
            done = set()
            for step in range(len(cluster.brokers)):
                txn_coordinator = _leader(cluster, "__transaction_state",
                                          partition_for(txn_ids[0], INTERNAL_PARTITIONS))
                group_coordinator = _leader(cluster, "__consumer_offsets", partition_for(GROUP, INTERNAL_PARTITIONS))
                if step == 0:
                    victim, role = txn_coordinator, "transaction coordinator of copier-0 (Java)"
                elif step == 1 and group_coordinator not in done:
                    victim, role = group_coordinator, "group coordinator"
                else:
                    victim = min(set(cluster.brokers) - done)
                    role = ("group coordinator" if victim == group_coordinator else
                            "transaction coordinator" if victim == txn_coordinator else "other")
                before = committed_now()
                assert min(before) < per_partition, f"copiers done before bouncing {victim} ({role}): {before}"
                started = time.monotonic()
                _bounce(cluster, zk, victim, clean)
                print(f"bounced broker {victim} ({role}, {'clean' if clean else 'hard'}) in "
                      f"{time.monotonic() - started:.1f} s; committed before {before}")
                bounced.append((victim, role))
                done.add(victim)
                try:
                    wait_for(lambda: advanced(before), 90, f"every copier committing after broker {victim}'s bounce")
                except AssertionError as e:
                    now = [(tp.offset, str(tp.error)) for tp in progress.committed(
                        [TopicPartition(INPUT, q) for q in range(PARTITIONS)], timeout=10)]
                    raise AssertionError(f"{e}: from {before} to {now}; librdkafka copiers (stage, empty polls, "
                                         f"replaced, last error) "
                                         f"{[(c.stage, c.empty_polls, c.replaced, c.last_error) for c in copiers]}"
                                         ) from None
                copiers_alive()
        assert {v for v, _r in bounced} == set(cluster.brokers)
        assert any(r.startswith("transaction coordinator") for _v, r in bounced)
        assert any(r == "group coordinator" for _v, r in bounced), bounced
        assert min(committed_now()) < per_partition, "copiers done before the last bounce ended"
        finished = True
    finally:
        # Released to copy the rest at full speed, or ended if the test failed.
        for c in copiers:
            if finished:
                c.release()
            else:
                c.stop()
        if finished:
            java.release()
        else:
            java.kill()
    try:
        result = java.wait(budget_s)
        for c in copiers:
            c.join(budget_s)
    except BaseException:  # (pytest-timeout's too) the JVM is ours to end
        java.kill()
        for c in copiers:
            c.stop()
        raise
    print(f"java copier: {result.done}; aborts {[line for line in result.lines if line[0] == 'ABORT'][:8]}; "
          f"librdkafka copiers (commits, aborts, replaced, renewed after an abort): "
          f"{[(c.commits, c.aborts, c.replaced, c.renewed) for c in copiers]}; "
          f"stalls {[c.stalls for c in copiers]}")
    assert result.returncode == 0, result.describe()
    assert result.done[3] == result.done[4] == str(per_partition), result.done
    for c in copiers:
        assert c.error is None, (c.transactional_id, c.error)
        assert c.position == per_partition and c.aborts >= 1, (c.transactional_id, c.position, c.aborts)
    try:
        assert wait_for(lambda: committed() == [per_partition] * PARTITIONS, 30, "the group's final offsets")
    finally:
        progress.close()
    # The final reader starts before the concurrent one is judged: if that one
    # falls short, the final one tells whether the records are there to read.
    final = CommittedReader(bs, total, timeout_s=60).start()
    try:
        _exactly_once(expected, reader.join(60), "the concurrent read_committed reader")
    except AssertionError as e:
        state = _output_state(cluster, txn_ids)
        try:
            final.join(90)
            also = f"a new read_committed reader read all {total}"
        except AssertionError as f:
            also = f"the final reader: {f}"
        raise AssertionError(f"{e}; {also}; {state}") from None
    _exactly_once(expected, final.join(90), "the final read_committed reader")


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "hard"])
def test_copiers_exactly_once_while_brokers_bounce(make_cluster, java_client, clean):
    _copy_under_bounces(make_cluster, java_client, clean, per_partition=1500, rounds=1)


@pytest.mark.long
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "hard"])
def test_copiers_exactly_once_while_brokers_bounce_twice(make_cluster, java_client, clean):
    _copy_under_bounces(make_cluster, java_client, clean, per_partition=5000, rounds=2)
