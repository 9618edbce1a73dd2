"""Transactions (issue 11) with real clients against a real standalone broker:
confluent-kafka's transactional producer (init, begin, produce, commit and
abort, send_offsets_to_transaction), read_committed and read_uncommitted
consumers, ListOffsets and OffsetFetch by raw frames, zombie fencing, a
transaction aborted by the coordinator past its timeout, and a
consume-transform-produce loop that is exactly-once.

One broker serves the module (each test its own topics and transactional ids).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from support.clients import create_topic, module_broker
from support.java_client import expected_value
from support.raw_api import call
from support.transactions import TIMEOUT_S, consume, list_offset, producer
from support.wait import wait_for

from kafkapy.protocol.errors import ErrorCode as E

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.timeout(180)

# The coordinator looks for timed-out transactions this often (Kafka's
# transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s default).
ABORT_INTERVAL_MS = 300


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    overrides = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": str(ABORT_INTERVAL_MS)}
    with module_broker(tmp_path_factory, overrides) as broker:
        yield broker


def test_commit_abort_and_open_transactions_by_isolation(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "txn-basic", 2)
    p = producer(bs, "basic")
    p.begin_transaction()
    for i in range(10):
        p.produce("txn-basic", value=b"c%d" % i, partition=i % 2)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(10):
        p.produce("txn-basic", value=b"a%d" % i, partition=i % 2)
    p.flush(TIMEOUT_S)  # sent, so the abort has data in the log to abort
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(4):
        p.produce("txn-basic", value=b"o%d" % i, partition=i % 2)
    p.flush(TIMEOUT_S)

    committed = [b"c%d" % i for i in range(0, 10, 2)] + [b"c%d" % i for i in range(1, 10, 2)]
    everything = consume(bs, "txn-basic", 2, "read_uncommitted", want=24)
    assert sorted(everything) == sorted(committed + [b"a%d" % i for i in range(10)] +
                                        [b"o%d" % i for i in range(4)])
    # read_committed: only the committed transaction, in order; the aborted
    # one dropped by the client (aborted_transactions), the open one not
    # served (the last stable offset stops before it).
    assert consume(bs, "txn-basic", 2, "read_committed", want=10) == committed
    # ListOffsets: LATEST is the high watermark, or the LSO for read_committed
    # (partition 0: 5 committed + marker, 5 aborted + marker, then the open 2).
    assert list_offset(bs, "txn-basic", 0, 0) == 14
    assert list_offset(bs, "txn-basic", 0, 1) == 12

    p.commit_transaction(TIMEOUT_S)
    assert consume(bs, "txn-basic", 2, "read_committed", want=14) == \
        committed[:5] + [b"o0", b"o2"] + committed[5:] + [b"o1", b"o3"]
    assert list_offset(bs, "txn-basic", 0, 1) == list_offset(bs, "txn-basic", 0, 0) == 15


def test_a_second_producer_fences_the_first_and_aborts_its_transaction(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "txn-fence", 1)
    zombie = producer(bs, "fenced")
    zombie.begin_transaction()
    zombie.produce("txn-fence", value=b"zombie")
    zombie.flush(TIMEOUT_S)
    # The same transactional id again: the epoch is bumped and the zombie's
    # open transaction aborted (Kafka's InitProducerId fencing).
    fresh = producer(bs, "fenced")
    fresh.begin_transaction()
    fresh.produce("txn-fence", value=b"fresh")
    fresh.commit_transaction(TIMEOUT_S)
    with pytest.raises(KafkaException) as info:
        zombie.produce("txn-fence", value=b"late")
        zombie.commit_transaction(TIMEOUT_S)
    error = info.value.args[0]
    assert error.fatal() and error.code() in (confluent_kafka.KafkaError._FENCED,
                                               confluent_kafka.KafkaError.PRODUCER_FENCED,
                                               confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH), error
    assert consume(bs, "txn-fence", 1, "read_committed", want=1) == [b"fresh"]
    assert sorted(consume(bs, "txn-fence", 1, "read_uncommitted", want=2)) == [b"fresh", b"zombie"]

    # DescribeTransactions: its transaction complete, at epoch 2 (Kafka's:
    # the fence aborted the zombie's transaction at epoch 1, the retried
    # InitProducerId (CONCURRENT_TRANSACTIONS meanwhile) bumped it again).
    r = call(bs, 65, 0, {"transactional_ids": ["fenced"]})
    (state,) = r.transaction_states
    assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "CompleteCommit", 2)


def test_the_coordinator_aborts_a_transaction_past_its_timeout(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "txn-timeout", 1)
    p = producer(bs, "slow", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce("txn-timeout", value=b"never")
    p.flush(TIMEOUT_S)
    assert list_offset(bs, "txn-timeout", 0, 1) == 0  # open: the LSO waits at its first offset
    # Aborted by the coordinator once past 1 s (checked every ABORT_INTERVAL_MS):
    # the ABORT marker moves the LSO past it.
    deadline = time.monotonic() + 15
    while list_offset(bs, "txn-timeout", 0, 1) != 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list_offset(bs, "txn-timeout", 0, 1) == 2
    assert consume(bs, "txn-timeout", 1, "read_committed", idle_s=1.0) == []
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT_S)


def _input_and_output(bs: str, topic_in: str, topic_out: str, values: list) -> None:
    """Two 2-partition topics; ``values`` written to ``topic_in`` round robin."""
    create_topic(bs, topic_in, 2)
    create_topic(bs, topic_out, 2)
    plain = Producer({"bootstrap.servers": bs})
    for i, value in enumerate(values):
        plain.produce(topic_in, value=value, partition=i % 2)
    plain.flush(TIMEOUT_S)


def test_consume_transform_produce_is_exactly_once(kbroker):
    """Input records uppercased into an output topic, offsets committed in the
    transaction; one round is aborted and redone after seeking back."""
    bs = kbroker.bootstrap
    n = 60
    _input_and_output(bs, "ctp-in", "ctp-out", [b"r%02d" % i for i in range(n)])

    group = "ctp-group"
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe(["ctp-in"])
    p = producer(bs, "ctp")
    done = 0
    aborted_once = False
    deadline = time.monotonic() + 60
    try:
        while done < n and time.monotonic() < deadline:
            msgs = consumer.consume(10, 0.5)
            msgs = [m for m in msgs if m.error() is None]
            if not msgs:
                continue
            p.begin_transaction()
            for m in msgs:
                p.produce("ctp-out", value=m.value().upper(), partition=m.partition())
            p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                          consumer.consumer_group_metadata(), TIMEOUT_S)
            if not aborted_once and done >= n // 3:
                p.flush(TIMEOUT_S)
                # Mid-transaction: the group's offsets are pending (Kafka's
                # UNSTABLE_OFFSET_COMMIT for require_stable readers).
                partition = msgs[0].partition()
                r = call(bs, 9, 7, {"group_id": group, "require_stable": True,
                                    "topics": [{"name": "ctp-in", "partition_indexes": [partition]}]})
                assert r.topics[0].partitions[0].error_code == E.UNSTABLE_OFFSET_COMMIT
                p.abort_transaction(TIMEOUT_S)
                aborted_once = True
                # Redo from the last committed offsets.
                committed = consumer.committed(consumer.assignment(), TIMEOUT_S)
                for tp in committed:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
                continue
            p.commit_transaction(TIMEOUT_S)
            done += len(msgs)
    finally:
        consumer.close()
    assert aborted_once and done == n

    out = consume(bs, "ctp-out", 2, "read_committed", want=n)
    assert sorted(out) == sorted(b"R%02d" % i for i in range(n))  # each exactly once
    r = call(bs, 9, 7, {"group_id": group, "require_stable": True,
                        "topics": [{"name": "ctp-in", "partition_indexes": [0, 1]}]})
    assert [(q.error_code, q.committed_offset) for q in r.topics[0].partitions] == [(0, n // 2), (0, n // 2)]
    # The aborted round's output is in the log, dropped for read_committed.
    assert len(consume(bs, "ctp-out", 2, "read_uncommitted", want=n + 1)) > n


def _produce_raw(bs: str, topic: str, batch: bytes):
    r = call(bs, 0, 9, {"acks": -1, "timeout": 10000, "transactional_id": None, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return r.responses[0].partition_responses[0].error_code


def test_hostile_transaction_requests_get_kafkas_errors(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "txn-hostile", 1)
    assert call(bs, 10, 3, {"key": "hostile", "key_type": 1}).error_code == E.NONE
    # EndTxn for an id the coordinator never saw.
    r = call(bs, 26, 3, {"transactional_id": "never-seen", "producer_id": 7, "producer_epoch": 0, "committed": True})
    assert r.error_code == E.INVALID_PRODUCER_ID_MAPPING
    init = call(bs, 22, 4, {"transactional_id": "hostile", "transaction_timeout": 60000, "producer_id": -1,
                            "producer_epoch": -1})
    assert init.error_code == E.NONE
    pid, epoch = init.producer_id, init.producer_epoch
    # Another producer id, then another epoch, for the id.
    r = call(bs, 26, 3, {"transactional_id": "hostile", "producer_id": pid + 1, "producer_epoch": epoch,
                         "committed": True})
    assert r.error_code == E.INVALID_PRODUCER_ID_MAPPING
    r = call(bs, 26, 3, {"transactional_id": "hostile", "producer_id": pid, "producer_epoch": epoch + 5,
                         "committed": False})
    assert r.error_code == E.PRODUCER_FENCED
    # A partition of a topic that does not exist fails the whole request.
    r = call(bs, 24, 3, {"v3_and_below_transactional_id": "hostile", "v3_and_below_producer_id": pid,
                         "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [
                             {"name": "txn-hostile", "partitions": [0]}, {"name": "no-such-topic", "partitions": [0]}]})
    errors = {(t.name, q.partition_index): q.partition_error_code
              for t in r.results_by_topic_v3_and_below for q in t.results_by_partition}
    assert errors == {("txn-hostile", 0): E.OPERATION_NOT_ATTEMPTED, ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    # Nothing was added: ending it is INVALID_TXN_STATE (still Empty).
    r = call(bs, 26, 3, {"transactional_id": "hostile", "producer_id": pid, "producer_epoch": epoch, "committed": True})
    assert r.error_code == E.INVALID_TXN_STATE
    # A client's control batch (a forged COMMIT marker) is refused, nothing stored.
    from kafkapy.storage.control_records import build_end_txn_marker_batch
    forged = bytes(build_end_txn_marker_batch(pid, epoch, 0, True, int(time.time() * 1000)))
    assert _produce_raw(bs, "txn-hostile", forged) == E.INVALID_RECORD
    assert list_offset(bs, "txn-hostile", 0, 0) == 0
    # ... and the broker keeps serving.
    r = call(bs, 22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                         "producer_epoch": -1})
    assert r.error_code == E.NONE and r.producer_id >= 0


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_transactions_survive_a_broker_restart(broker_factory, how):
    """A committed transaction (with offsets), an aborted one and an open one;
    after a restart (clean or SIGKILL) the coordinator and the groups are
    loaded from their logs: what committed stays committed, the aborted data
    stays hidden, and the open transaction is aborted at its timeout, so
    read_committed readers move on."""
    import signal

    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": str(ABORT_INTERVAL_MS)})
    bs = b.bootstrap
    create_topic(bs, "txn-restart", 1)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "restart-group", "enable.auto.commit": False})
    p = producer(bs, "restart", **{"transaction.timeout.ms": 3000})
    p.begin_transaction()
    p.produce("txn-restart", value=b"committed")
    p.send_offsets_to_transaction([TopicPartition("txn-restart", 0, 42)], consumer.consumer_group_metadata(), TIMEOUT_S)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce("txn-restart", value=b"aborted")
    p.send_offsets_to_transaction([TopicPartition("txn-restart", 0, 99)], consumer.consumer_group_metadata(), TIMEOUT_S)
    p.flush(TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce("txn-restart", value=b"open")
    p.flush(TIMEOUT_S)
    consumer.close()
    # committed + marker, aborted + marker, open: the LSO waits at the open one.
    assert list_offset(bs, "txn-restart", 0, 1) == 4

    b.restart(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
    def fetched():
        # While the restarted coordinator loads its logs it answers
        # COORDINATOR_LOAD_IN_PROGRESS (14) with no topics; a client asks again.
        offsets = call(bs, 9, 7, {"group_id": "restart-group", "require_stable": True,
                                  "topics": [{"name": "txn-restart", "partition_indexes": [0]}]})
        if offsets.error_code in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR):
            return None
        return offsets

    offsets = wait_for(fetched, 30, "the group coordinator's answer after the restart")
    assert offsets.error_code == 0
    assert (offsets.topics[0].partitions[0].error_code, offsets.topics[0].partitions[0].committed_offset) == (0, 42)
    deadline = time.monotonic() + 20
    while list_offset(bs, "txn-restart", 0, 1) != 6 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list_offset(bs, "txn-restart", 0, 1) == 6  # the open one aborted after the restart
    assert consume(bs, "txn-restart", 1, "read_committed", want=1) == [b"committed"]
    # The same id starts again at a new epoch and commits.
    again = producer(bs, "restart")
    again.begin_transaction()
    again.produce("txn-restart", value=b"after")
    again.commit_transaction(TIMEOUT_S)
    assert consume(bs, "txn-restart", 1, "read_committed", want=2) == [b"committed", b"after"]


def test_kafka_python_and_aiokafka_interleaved_transactions(kbroker):
    """kafka-python's and aiokafka's transactional producers interleave
    transactions on the same partition (one commits, the other aborts, then
    the other way round); each client's read_committed consumer reads only
    the committed records, in log order."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from kafka import KafkaConsumer
    from kafka import KafkaProducer
    from kafka import TopicPartition as KafkaPythonTP

    bs = kbroker.bootstrap
    topic = "txn-interleaved"
    create_topic(bs, topic, 1)
    kp = KafkaProducer(bootstrap_servers=bs, transactional_id="interleaved-kafka-python")
    kp.init_transactions()

    async def interleave():
        ap = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="interleaved-aiokafka")
        await ap.start()
        try:
            for round_, (kp_commits, ap_commits) in enumerate(((True, False), (False, True))):
                kp.begin_transaction()
                await ap.begin_transaction()
                for i in range(3):
                    kp.send(topic, b"kp%d-%d" % (round_, i), partition=0).get(TIMEOUT_S)
                    await ap.send_and_wait(topic, b"ap%d-%d" % (round_, i), partition=0)
                kp.commit_transaction() if kp_commits else kp.abort_transaction()
                await (ap.commit_transaction() if ap_commits else ap.abort_transaction())
        finally:
            await ap.stop()

    asyncio.run(interleave())
    kp.close()
    want = [b"kp0-%d" % i for i in range(3)] + [b"ap1-%d" % i for i in range(3)]
    assert consume(bs, topic, 1, "read_committed", want=6) == want
    assert len(consume(bs, topic, 1, "read_uncommitted", want=12)) == 12

    kc = KafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed", consumer_timeout_ms=3000)
    kc.assign([KafkaPythonTP(topic, 0)])
    kc.seek(KafkaPythonTP(topic, 0), 0)
    assert [m.value for m in kc] == want
    kc.close()

    async def aio_read():
        c = AIOKafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed", auto_offset_reset="earliest")
        await c.start()
        try:
            from aiokafka import TopicPartition as AioTP
            c.assign([AioTP(topic, 0)])
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < len(want) and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=300)).values():
                    got += [r.value for r in records]
            extra = await c.getmany(timeout_ms=500)
            return got + [r.value for records in extra.values() for r in records]
        finally:
            await c.stop()

    assert asyncio.run(aio_read()) == want


def test_java_transactional_producer_and_read_committed_consumer(kbroker, java_client):
    """Apache's Java client 3.9: a transaction of 20 records committed, then
    one of 20 aborted, with the same transactional.id; the Java consumer
    (isolation.level=read_committed) and confluent-kafka read the 20
    committed ones only."""
    bs = kbroker.bootstrap
    topic = "txn-java"
    create_topic(bs, topic, 2)
    conf = {"transactional.id": "java-txn"}
    committed = java_client.produce(bs, topic, 20, key_prefix="c", transaction="commit", configs=conf)
    assert committed.returncode == 0 and len(committed.acks) == 20, committed.describe()
    aborted = java_client.produce(bs, topic, 20, key_prefix="a", transaction="abort", configs=conf)
    assert aborted.returncode == 0 and len(aborted.acks) == 20, aborted.describe()
    # It asks for 40 and reads to the end of its window, so that an aborted
    # record would show. The window holds the JVM's start, the new group's
    # join (group.initial.rebalance.delay.ms, 3 s) and the fetches: 4 s left
    # one for the fetches, and on a loaded machine it read nothing (1 of 4
    # runs, with or without this session's changes).
    consumed = java_client.consume(bs, topic, "java-txn-group", 40, timeout_ms=9000,
                                   configs={"isolation.level": "read_committed"})
    assert sorted(r.key for r in consumed.records) == sorted(b"c-%d" % i for i in range(20)), consumed.describe()
    assert sorted(consume(bs, topic, 2, "read_committed", want=20)) == sorted(expected_value(i) for i in range(20))


def test_consume_transform_produce_survives_sigkill_of_the_client(kbroker):
    """The loop of txn_ctp_child.py SIGKILLed at several points and restarted
    with the same transactional.id (which fences and aborts the dead
    instance's open transaction): the output holds every input record
    exactly once, and the group's offsets reach the input's end."""
    import random
    import signal
    import subprocess

    bs = kbroker.bootstrap
    n = 1000
    _input_and_output(bs, "kill-in", "kill-out", [b"r%03d" % i for i in range(n)])
    child = [sys.executable, str(Path(__file__).with_name("txn_ctp_child.py")), bs, "kill-in", "kill-out",
             "kill-group", "kill-txn", str(n), "2"]
    rng = random.Random(11)
    kills = 0
    for _ in range(4):
        proc = subprocess.Popen(child, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            # Kill once it has committed something, at a random point after.
            line = proc.stdout.readline()
            if not line.startswith("COMMITTED"):
                break  # finished (or failed) before committing anything: the final run says which
            time.sleep(rng.uniform(0.0, 0.1))
            proc.send_signal(signal.SIGKILL)
            kills += 1
        finally:
            proc.kill()
            proc.wait(TIMEOUT_S)
    final = subprocess.run(child, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=150)
    assert final.returncode == 0, final.stderr[-2000:]
    assert kills >= 2
    out = consume(bs, "kill-out", 2, "read_committed", want=n)
    assert sorted(out) == sorted(b"R%03d" % i for i in range(n))


def test_a_stopped_consume_transform_produce_zombie_is_fenced(kbroker):
    """The loop of txn_ctp_child.py frozen (SIGSTOP) mid-stream while a new
    instance with the same transactional.id takes over and finishes; more
    input arrives, the frozen one resumes (SIGCONT) and reads it: its late
    transaction is fenced (it dies on the fatal error), and the output holds
    every input record exactly once after a third instance finishes."""
    import signal
    import subprocess

    bs = kbroker.bootstrap
    n, extra = 300, 40
    _input_and_output(bs, "zombie-in", "zombie-out", [b"z%03d" % i for i in range(n)])

    def child(total):
        return [sys.executable, str(Path(__file__).with_name("txn_ctp_child.py")), bs, "zombie-in", "zombie-out",
                "zombie-group", "zombie-txn", str(total), "2"]

    zombie = subprocess.Popen(child(n + extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert zombie.stdout.readline().startswith("COMMITTED")
        zombie.send_signal(signal.SIGSTOP)
        taker = subprocess.run(child(n), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=150)
        assert taker.returncode == 0, taker.stderr[-2000:]
        p = Producer({"bootstrap.servers": bs})
        for i in range(extra):
            p.produce("zombie-in", value=b"z%03d" % (n + i), partition=i % 2)
        assert p.flush(TIMEOUT_S) == 0
        zombie.send_signal(signal.SIGCONT)
        _out, err = zombie.communicate(timeout=150)
        assert zombie.returncode != 0 and "fenced" in err.lower(), (zombie.returncode, err[-2000:])
    finally:
        zombie.kill()
        zombie.wait(TIMEOUT_S)
    last = subprocess.run(child(n + extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=150)
    assert last.returncode == 0, last.stderr[-2000:]
    out = consume(bs, "zombie-out", 2, "read_committed", want=n + extra)
    assert sorted(out) == sorted(b"Z%03d" % i for i in range(n + extra))


def test_confluent_producers_interleave_transactions_on_the_same_partitions(kbroker):
    """Two confluent-kafka transactional producers with transactions open at
    once on the same two partitions, committing and aborting in turn; read
    back by confluent-kafka, kafka-python and aiokafka: read_committed gives
    the committed records only, in log order; read_uncommitted everything,
    each client skipping the control records itself."""
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTP
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPythonTP

    bs = kbroker.bootstrap
    topic = "txn-interleave-ck"
    create_topic(bs, topic, 2)
    a, b = producer(bs, "interleave-a"), producer(bs, "interleave-b")
    outcomes = [(True, False), (False, True), (True, True)]
    for round_, (a_commits, b_commits) in enumerate(outcomes):
        a.begin_transaction()
        b.begin_transaction()
        for i in range(4):
            for who, p in ((b"a", a), (b"b", b)):
                p.produce(topic, value=b"%s%d-%d" % (who, round_, i), partition=i % 2)
                p.flush(TIMEOUT_S)  # in the log in this order: the two transactions interleave
        (a.commit_transaction if a_commits else a.abort_transaction)(TIMEOUT_S)
        (b.commit_transaction if b_commits else b.abort_transaction)(TIMEOUT_S)

    def by_partition(values):
        return {q: [v for v in values if int(v.split(b"-")[1]) % 2 == q] for q in (0, 1)}

    written = [b"%s%d-%d" % (who, r, i) for r in range(len(outcomes)) for i in range(4) for who in (b"a", b"b")]
    committed = [v for v in written if outcomes[int(v[1:2])][0 if v[:1] == b"a" else 1]]
    expect_committed = by_partition(committed)[0] + by_partition(committed)[1]
    expect_all = by_partition(written)[0] + by_partition(written)[1]
    assert consume(bs, topic, 2, "read_committed", want=len(committed)) == expect_committed
    assert consume(bs, topic, 2, "read_uncommitted", want=len(written)) == expect_all

    def kafka_python(isolation):
        kc = KafkaConsumer(bootstrap_servers=bs, isolation_level=isolation, consumer_timeout_ms=3000)
        tps = [KafkaPythonTP(topic, q) for q in (0, 1)]
        kc.assign(tps)
        for tp in tps:
            kc.seek(tp, 0)
        got = {0: [], 1: []}
        for m in kc:
            got[m.partition].append(m.value)
        kc.close()
        return got[0] + got[1]

    async def aiokafka(isolation, want):
        c = AIOKafkaConsumer(bootstrap_servers=bs, isolation_level=isolation, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([AioTP(topic, 0), AioTP(topic, 1)])
            got = {0: [], 1: []}
            deadline = time.monotonic() + TIMEOUT_S
            while sum(map(len, got.values())) < want and time.monotonic() < deadline:
                for tp, records in (await c.getmany(timeout_ms=300)).items():
                    got[tp.partition] += [r.value for r in records]
            for tp, records in (await c.getmany(timeout_ms=500)).items():
                got[tp.partition] += [r.value for r in records]
            return got[0] + got[1]
        finally:
            await c.stop()

    assert kafka_python("read_committed") == expect_committed
    assert kafka_python("read_uncommitted") == expect_all
    assert asyncio.run(aiokafka("read_committed", len(committed))) == expect_committed
    assert asyncio.run(aiokafka("read_uncommitted", len(written))) == expect_all


def test_hostile_markers_and_settings_change_nothing(kbroker):
    """A client's WriteTxnMarkers with a stale producer epoch, an older
    coordinator epoch or a partition that does not exist, and InitProducerId /
    AddOffsetsToTxn out of bounds: Kafka's error codes, the log untouched."""
    from kafkapy._core.records_py import build_batch

    bs = kbroker.bootstrap
    topic = "txn-hostile-markers"
    create_topic(bs, topic, 1)
    assert call(bs, 10, 3, {"key": "hostile-m", "key_type": 1}).error_code == E.NONE  # creates __transaction_state
    for timeout_ms in (0, 900_001):  # above transaction.max.timeout.ms (Kafka's 15 min default)
        r = call(bs, 22, 4, {"transactional_id": "hostile-m", "transaction_timeout": timeout_ms, "producer_id": -1,
                             "producer_epoch": -1})
        assert r.error_code == E.INVALID_TRANSACTION_TIMEOUT
    for _ in range(2):  # epoch 1: the stale epoch 0 below is a real, older one
        init = call(bs, 22, 4, {"transactional_id": "hostile-m", "transaction_timeout": 60000, "producer_id": -1,
                                "producer_epoch": -1})
    pid, epoch = init.producer_id, init.producer_epoch
    assert init.error_code == E.NONE and epoch == 1
    r = call(bs, 25, 3, {"transactional_id": "hostile-m", "producer_id": pid, "producer_epoch": epoch - 1,
                         "group_id": "hostile-m-group"})
    assert r.error_code == E.PRODUCER_FENCED
    r = call(bs, 24, 3, {"v3_and_below_transactional_id": "hostile-m", "v3_and_below_producer_id": pid,
                         "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [
                             {"name": topic, "partitions": [0]}]})
    assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == E.NONE
    batch = build_batch([(None, b"open", [], int(time.time() * 1000))], producer_id=pid, producer_epoch=epoch,
                        base_sequence=0, is_transactional=True)
    r = call(bs, 0, 9, {"acks": -1, "timeout": 10000, "transactional_id": "hostile-m", "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}]})
    assert r.responses[0].partition_responses[0].error_code == E.NONE
    r = call(bs, 26, 3, {"transactional_id": "hostile-m", "producer_id": pid, "producer_epoch": epoch,
                         "committed": True})
    assert r.error_code == E.NONE
    deadline = time.monotonic() + 10
    while list_offset(bs, topic, 0, 1) != 2 and time.monotonic() < deadline:  # the coordinator's marker
        time.sleep(0.1)
    assert list_offset(bs, topic, 0, 0) == list_offset(bs, topic, 0, 1) == 2

    def forged(producer_epoch, coordinator_epoch, partition=0):
        r = call(bs, 27, 1, {"markers": [{"producer_id": pid, "producer_epoch": producer_epoch,
                                          "transaction_result": False, "coordinator_epoch": coordinator_epoch,
                                          "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
        return r.markers[0].topics[0].partitions[0].error_code

    assert forged(epoch - 1, 0) == E.INVALID_PRODUCER_EPOCH
    assert forged(epoch, -1) == E.TRANSACTION_COORDINATOR_FENCED
    assert forged(epoch, 0, partition=7) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert list_offset(bs, topic, 0, 0) == list_offset(bs, topic, 0, 1) == 2  # nothing written
    assert consume(bs, topic, 1, "read_committed", want=1) == [b"open"]
