"""kafkapy's own client library with transactions (issue 11), against a real
standalone broker: the transactional ``KafkaProducer`` (init, begin, send,
send_offsets_to_transaction, commit, abort, fencing of a zombie), read back by
confluent-kafka's read_committed / read_uncommitted consumers and by kafkapy's
own ``KafkaConsumer`` with ``isolation_level``.

One broker serves the module (each test its own topics and transactional ids).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from support.clients import create_topic, module_broker

from kafkapy.client import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition, errors

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(180)

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    with module_broker(tmp_path_factory) as broker:
        yield broker


def txn_producer(bootstrap, txn_id, **conf):
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=5, **conf)
    p.init_transactions(TIMEOUT_S)
    return p


def _drain(poll, want, idle_s) -> list:
    """Values from ``poll()`` (an iterable of (partition, value) per call), in
    partition then offset order: until ``want`` came (then 0.5 s more shows no
    extra), without ``want`` nothing new for ``idle_s``, or TIMEOUT_S."""
    got: dict[int, list] = {}
    deadline = time.monotonic() + TIMEOUT_S
    last_new = time.monotonic()
    count = 0
    for _ in range(10_000):
        if time.monotonic() > deadline or (want is None and time.monotonic() - last_new > idle_s):
            break
        if want is not None and count >= want and time.monotonic() - last_new > 0.5:
            break
        for partition, value in poll():
            got.setdefault(partition, []).append(value)
            count += 1
            last_new = time.monotonic()
    return [v for p in sorted(got) for v in got[p]]


def consume_confluent(bootstrap, topic, partitions, isolation, want=None, idle_s=2.0):
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{topic}-{isolation}",
                                  "isolation.level": isolation, "enable.auto.commit": False,
                                  "fetch.wait.max.ms": 100})
    c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])

    def poll():
        msg = c.poll(0.2)
        return [] if msg is None or msg.error() else [(msg.partition(), msg.value())]

    try:
        return _drain(poll, want, idle_s)
    finally:
        c.close()


def consume_kafkapy(bootstrap, topic, partitions, isolation, want=None, idle_s=2.0):
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=100)
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    c.seek_to_beginning()
    try:
        return _drain(lambda: [(tp.partition, r.value) for tp, rs in c.poll(200).items() for r in rs],
                      want, idle_s)
    finally:
        c.close(autocommit=False)


def test_commit_and_abort_read_committed(kbroker):
    topic = "kc-txn-basic"
    create_topic(kbroker.bootstrap, topic, partitions=2)
    p = txn_producer(kbroker.bootstrap, "kc-basic")
    try:
        p.begin_transaction()
        for i in range(10):
            p.send(topic, f"c1-{i}".encode(), partition=i % 2)
        p.commit_transaction(TIMEOUT_S)
        p.begin_transaction()
        futures = [p.send(topic, f"a-{i}".encode(), partition=i % 2) for i in range(10)]
        p.flush(TIMEOUT_S)
        assert all(f.succeeded() for f in futures)
        p.abort_transaction(TIMEOUT_S)
        p.begin_transaction()
        for i in range(10):
            p.send(topic, f"c2-{i}".encode(), partition=i % 2)
        p.commit_transaction(TIMEOUT_S)
        assert p.metrics()["transaction-state"] == "READY"
    finally:
        p.close()
    committed = ([f"c1-{i}".encode() for i in range(0, 10, 2)] + [f"c2-{i}".encode() for i in range(0, 10, 2)]
                 + [f"c1-{i}".encode() for i in range(1, 10, 2)] + [f"c2-{i}".encode() for i in range(1, 10, 2)])
    assert consume_confluent(kbroker.bootstrap, topic, 2, "read_committed", want=20) == committed
    assert consume_kafkapy(kbroker.bootstrap, topic, 2, "read_committed", want=20) == committed
    everything = consume_kafkapy(kbroker.bootstrap, topic, 2, "read_uncommitted", want=30)
    assert len(everything) == 30 and set(committed) < set(everything)
    assert sum(v.startswith(b"a-") for v in everything) == 10


def test_open_transaction_not_visible_then_committed(kbroker):
    topic = "kc-txn-open"
    create_topic(kbroker.bootstrap, topic)
    p = txn_producer(kbroker.bootstrap, "kc-open")
    try:
        p.begin_transaction()
        for i in range(5):
            p.send(topic, f"o-{i}".encode(), partition=0)
        p.flush(TIMEOUT_S)
        # Written but not committed: read_committed stops at the LSO.
        assert consume_kafkapy(kbroker.bootstrap, topic, 1, "read_committed", idle_s=1.0) == []
        assert len(consume_kafkapy(kbroker.bootstrap, topic, 1, "read_uncommitted", want=5)) == 5
        p.commit_transaction(TIMEOUT_S)
    finally:
        p.close()
    assert consume_kafkapy(kbroker.bootstrap, topic, 1, "read_committed", want=5) == [
        f"o-{i}".encode() for i in range(5)]


def test_send_outside_transaction_and_fencing(kbroker):
    topic = "kc-txn-fence"
    create_topic(kbroker.bootstrap, topic)
    p = KafkaProducer(bootstrap_servers=kbroker.bootstrap, transactional_id="kc-fence")
    with pytest.raises(errors.IllegalStateError):
        p.send(topic, b"x")  # before init_transactions
    p.init_transactions(TIMEOUT_S)
    with pytest.raises(errors.IllegalStateError):
        p.send(topic, b"x")  # outside a transaction
    p.begin_transaction()
    p.send(topic, b"zombie-0", partition=0)
    p.flush(TIMEOUT_S)
    # A second producer with the same id fences the first and aborts its
    # open transaction.
    p2 = txn_producer(kbroker.bootstrap, "kc-fence")
    try:
        assert p2._txn.producer_epoch > p._txn.producer_epoch
        with pytest.raises(errors.KafkaError) as info:
            p.send(topic, b"zombie-1", partition=0)
            p.commit_transaction(TIMEOUT_S)
        assert info.value.error_code in (47, 90) or "fenced" in str(info.value).lower() or \
            "epoch" in str(info.value).lower(), info.value
        p2.begin_transaction()
        p2.send(topic, b"new-0", partition=0)
        p2.commit_transaction(TIMEOUT_S)
    finally:
        p.close(0)
        p2.close()
    assert consume_confluent(kbroker.bootstrap, topic, 1, "read_committed", want=1) == [b"new-0"]


def test_consume_transform_produce_with_offsets(kbroker):
    src, dst, group = "kc-ctp-in", "kc-ctp-out", "kc-ctp-group"
    create_topic(kbroker.bootstrap, src)
    create_topic(kbroker.bootstrap, dst)
    with KafkaProducer(bootstrap_servers=kbroker.bootstrap) as plain:
        for i in range(20):
            plain.send(src, f"in-{i}".encode(), partition=0)
        plain.flush(TIMEOUT_S)
    p = txn_producer(kbroker.bootstrap, "kc-ctp")
    c = KafkaConsumer(src, bootstrap_servers=kbroker.bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", isolation_level="read_committed")
    try:
        done = 0
        deadline = time.monotonic() + TIMEOUT_S
        aborted_once = False
        while done < 20 and time.monotonic() < deadline:
            batch = c.poll(500, max_records=7)
            records = [r for rs in batch.values() for r in rs]
            if not records:
                continue
            p.begin_transaction()
            for r in records:
                p.send(dst, r.value.replace(b"in-", b"out-"), partition=0)
            last = records[-1]
            p.send_offsets_to_transaction({TopicPartition(src, 0): OffsetAndMetadata(last.offset + 1, "")},
                                          c.group_metadata())
            if not aborted_once:
                # The first transaction is aborted: its output never shows,
                # its offsets are not committed, so the records come again.
                aborted_once = True
                p.abort_transaction(TIMEOUT_S)
                c.seek(TopicPartition(src, 0), records[0].offset)
                continue
            p.commit_transaction(TIMEOUT_S)
            done = last.offset + 1
        assert done == 20
    finally:
        c.close(autocommit=False)
        p.close()
    assert consume_kafkapy(kbroker.bootstrap, dst, 1, "read_committed", want=20) == [
        f"out-{i}".encode() for i in range(20)]
    check = KafkaConsumer(bootstrap_servers=kbroker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        assert check.committed(TopicPartition(src, 0)) == 20
    finally:
        check.close(autocommit=False)


# -- tools ---------------------------------------------------------------------------

def tool(name, *args, check=True):
    proc = subprocess.run([sys.executable, "-m", f"kafkapy.tools.{name}", *args], capture_output=True, text=True,
                          timeout=60)
    if check:
        assert proc.returncode == 0, f"{name} {args}: exit {proc.returncode}\n{proc.stderr}"
    return proc


def table(text):
    lines = text.splitlines()
    headers = lines[0].split()
    return [dict(zip(headers, line.split("\t"))) for line in lines[1:]] if lines else []


def test_tools_show_and_abort_a_hanging_transaction(kbroker):
    topic, txn_id = "kc-tool-hang", "kc-tool"
    create_topic(kbroker.bootstrap, topic)
    p = txn_producer(kbroker.bootstrap, txn_id)
    try:
        p.begin_transaction()
        for i in range(3):
            p.send(topic, f"h-{i}".encode(), partition=0)
        p.flush(TIMEOUT_S)
        listed = [{k: v.strip() for k, v in row.items()}
                  for row in table(tool("transactions", "--bootstrap-server", kbroker.bootstrap, "list").stdout)]
        assert {"TransactionalId": txn_id, "Coordinator": listed[0]["Coordinator"],
                "ProducerId": str(p._txn.producer_id), "TransactionState": "Ongoing"} in listed
        described = table(tool("transactions", "--bootstrap-server", kbroker.bootstrap, "describe",
                               "--transactional-id", txn_id).stdout)
        row = {k: v.strip() for k, v in described[0].items()}
        assert (row["TransactionalId"], row["TransactionState"], row["TopicPartitions"]) == (
            txn_id, "Ongoing", f"{topic}-0")
        assert int(row["TransactionDurationMs"]) >= 0 and row["ProducerEpoch"] == str(p._txn.producer_epoch)
        producers = table(tool("transactions", "--bootstrap-server", kbroker.bootstrap, "describe-producers",
                               "--topic", topic, "--partition", "0").stdout)
        assert [r["CurrentTransactionStartOffset"].strip() for r in producers] == ["0"]
        # The open transaction holds the LSO at 0 until it is aborted by hand.
        assert consume_kafkapy(kbroker.bootstrap, topic, 1, "read_committed", idle_s=1.0) == []
        missing = tool("transactions", "--bootstrap-server", kbroker.bootstrap, "abort", "--topic", topic,
                       "--partition", "0", "--start-offset", "1", check=False)
        assert missing.returncode == 1 and "Could not find any open transactions starting at offset 1" in \
            missing.stderr
        tool("transactions", "--bootstrap-server", kbroker.bootstrap, "abort", "--topic", topic,
             "--partition", "0", "--start-offset", "0")
        producers = table(tool("transactions", "--bootstrap-server", kbroker.bootstrap, "describe-producers",
                               "--topic", topic, "--partition", "0").stdout)
        assert [r["CurrentTransactionStartOffset"].strip() for r in producers] == ["None"]
    finally:
        p.close(0)
    with KafkaProducer(bootstrap_servers=kbroker.bootstrap) as plain:
        plain.send(topic, b"after", partition=0).get(TIMEOUT_S)
    # The aborted records stay hidden; the LSO moved past them.
    assert consume_kafkapy(kbroker.bootstrap, topic, 1, "read_committed", want=1) == [b"after"]

    segment = kbroker.log_dirs[0] / f"{topic}-0" / f"{0:020d}.log"
    dump = tool("dump_log", "--files", str(segment), "--print-data-log").stdout
    assert "isTransactional: true isControl: true" in dump
    assert re.search(r"\| offset: 3 .* endTxnMarker: ABORT coordinatorEpoch: \d+", dump), dump
    assert " payload: h-0" in dump and "payload: after" in dump
    state_partition = kbroker.log_dirs[0].glob("__transaction_state-*")
    segments = [d / f"{0:020d}.log" for d in state_partition if (d / f"{0:020d}.log").stat().st_size]
    decoded = tool("dump_log", "--files", ",".join(map(str, segments)), "--transaction-log-decoder").stdout
    assert f"key: transaction_metadata::transactionalId={txn_id} payload: producerId:" in decoded
    assert re.search(rf"transactionalId={txn_id} payload: producerId:\d+,producerEpoch:\d+,state=Ongoing,"
                     rf"partitions=\[{topic}-0\],txnLastUpdateTimestamp=\d+,txnTimeoutMs=60000$", decoded, re.M), decoded

    out = tool("console_consumer", "--bootstrap-server", kbroker.bootstrap, "--topic", "__transaction_state",
               "--from-beginning", "--timeout-ms", "2000", "--formatter",
               "org.apache.kafka.tools.consumer.TransactionLogMessageFormatter").stdout
    records = [json.loads(line) for line in out.splitlines()]
    ongoing = [r for r in records if r["key"]["data"] == {"transactionalId": txn_id}
               and r["value"]["data"]["transactionStatus"] == 1]
    assert ongoing and ongoing[0]["value"]["data"]["transactionPartitions"] == [
        {"topic": topic, "partitionIds": [0]}]
    assert ongoing[0]["key"]["version"] == 0 and ongoing[0]["value"]["version"] in (0, 1)


def _raw_transactional_batch(bootstrap, topic, partition, producer_id, epoch, txn_id, value):
    """A transactional batch written as a client that skipped AddPartitionsToTxn would."""
    from support.raw_api import call

    from kafkapy._core.records_py import build_batch

    batch = build_batch([(None, value, [], int(time.time() * 1000))], producer_id=producer_id,
                        producer_epoch=epoch, base_sequence=0, is_transactional=True)
    r = call(bootstrap, 0, 9, {"acks": -1, "timeout": 10000, "transactional_id": txn_id, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": bytes(batch)}]}]})
    assert r.responses[0].partition_responses[0].error_code == 0


def test_find_hanging_reports_only_transactions_no_coordinator_will_end(broker_factory):
    """KIP-664's find-hanging: an open transaction is hanging when no
    coordinator lists its producer id, or the id's coordinator does not have
    the partition in its transaction; a live transaction is not. Its own
    broker runs without KIP-890's verification: with it (the default) the
    raw writes below are refused and leave nothing hanging
    (tests/integration/test_txn_verification.py)."""
    from support.raw_api import call

    kbroker = broker_factory({"transaction.partition.verification.enable": "false"})
    bs, topic = kbroker.bootstrap, "kc-find-hanging"
    create_topic(bs, topic, 3)
    p = txn_producer(bs, "kc-hang-live")
    try:
        p.begin_transaction()
        p.send(topic, b"live", partition=0)
        p.flush(TIMEOUT_S)
        pid, epoch = p._txn.producer_id, p._txn.producer_epoch
        # The live producer's id writes to partition 1 outside its transaction's partitions.
        _raw_transactional_batch(bs, topic, 1, pid, epoch, "kc-hang-live", b"stray")
        # A producer id that no transactional id owns opens a transaction on partition 2.
        orphan = call(bs, 22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                                  "producer_epoch": -1}).producer_id
        _raw_transactional_batch(bs, topic, 2, orphan, 0, None, b"orphan")
        time.sleep(0.05)  # older than a 0-minute timeout

        def hanging(*args):
            rows = table(tool("transactions", "--bootstrap-server", bs, "find-hanging", *args).stdout)
            return sorted((r["Topic"].strip(), int(r["Partition"]), int(r["ProducerId"]), int(r["StartOffset"]),
                           int(r["CoordinatorEpoch"]), int(r["Duration(min)"])) for r in rows)

        expected = [(topic, 1, pid, 0, -1, 0), (topic, 2, orphan, 0, -1, 0)]
        assert hanging("--topic", topic, "--max-transaction-timeout", "0") == expected
        assert hanging("--broker-id", "0", "--max-transaction-timeout", "0") == expected
        assert hanging("--topic", topic, "--partition", "0", "--max-transaction-timeout", "0") == []
        # The default 15 minutes: nothing this young is a candidate.
        assert hanging("--topic", topic) == []
        empty = tool("transactions", "--bootstrap-server", bs, "find-hanging", "--topic", topic, "--partition", "2")
        assert empty.stdout.split() == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                                        "StartOffset", "LastTimestamp", "Duration(min)"]
        for args, message in [((), "requires either --topic or --broker-id"),
                              (("--broker-id", "0", "--partition", "1"), "The --partition argument requires --topic")]:
            bad = tool("transactions", "--bootstrap-server", bs, "find-hanging", *args, check=False)
            assert bad.returncode == 1 and message in bad.stderr, bad.stderr
        # Aborting what it found by hand ends them; the live transaction commits.
        for partition in (1, 2):
            tool("transactions", "--bootstrap-server", bs, "abort", "--topic", topic, "--partition",
                 str(partition), "--start-offset", "0")
        assert hanging("--topic", topic, "--max-transaction-timeout", "0") == []
        p.commit_transaction(TIMEOUT_S)
    finally:
        p.close(0)
    assert consume_confluent(bs, topic, 3, "read_committed", want=1) == [b"live"]
