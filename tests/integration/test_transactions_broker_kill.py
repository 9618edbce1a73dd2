"""The broker SIGKILLed in the middle of transactions (issue 11).

Two kinds of crash, on one standalone broker (its own, restarted in place):

* before the commit decision is logged: a transaction with records on four
  partitions is open (Ongoing in ``__transaction_state``) when the broker's
  process group is SIGKILLed.  After restart the coordinator aborts it when
  its ``transaction.timeout.ms`` passes; its records are never visible to
  read_committed readers and the last stable offset moves past them.
* after the decision is logged, before all markers are written: EndTxn
  (commit) is sent from a thread while the test watches the size of the
  transactional id's ``__transaction_state`` segment and SIGKILLs the broker
  the moment it grows (the PrepareCommit record appended).  Which side of the
  decision a kill lands on is only known afterwards, so the test reads
  ``__transaction_state`` from the dead broker's segments
  (``kafkapy-dump-log --transaction-log-decoder``) to learn what the
  coordinator had logged, and repeats (a bounded number of attempts) until
  one kill left the transaction in PrepareCommit.  After each restart
  the transaction must end as logged: PrepareCommit or CompleteCommit ->
  committed on every partition, Ongoing -> aborted on every partition.

In every case the read_committed end offset (the LSO) reaches the high
watermark within a bound, so read_committed consumers are never blocked, and
DescribeTransactions (``kafkapy-transactions describe``) shows a completed state.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from support.clients import create_topic, module_broker

from kafkapy.client import KafkaProducer, errors
from kafkapy.protocol.transaction_log import partition_for

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 4
RECORDS_PER_PARTITION = 3
TXN_TIMEOUT_MS = 2000
# Seen: PrepareCommit on the 1st to 3rd attempt (the coordinator writes the
# local markers and CompleteCommit within a fraction of a millisecond).
MAX_COMMIT_KILL_ATTEMPTS = 12
TIMEOUT_S = 30
STATES = {"Ongoing": "abort", "PrepareCommit": "commit", "CompleteCommit": "commit",
          "PrepareAbort": "abort", "CompleteAbort": "abort"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with module_broker(tmp_path_factory, {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"}) \
            as b:
        yield b


def crash(broker) -> None:
    """SIGKILL the broker's whole process group at once (every process of the
    broker dies at the same instant, as in a power cut), then reap it."""
    os.killpg(broker.pgid, signal.SIGKILL)
    broker.kill()


def tool(name, *args):
    proc = subprocess.run([sys.executable, "-m", f"kafkapy.tools.{name}", *args], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, f"{name} {args}: exit {proc.returncode}\n{proc.stderr}"
    return proc.stdout


def logged_state(broker, txn_id) -> str | None:
    """The last state ``__transaction_state`` holds for ``txn_id`` (read from
    the segment files, the broker dead or alive)."""
    segments = [str(p) for p in sorted(broker.log_dirs[0].glob("__transaction_state-*/*.log")) if p.stat().st_size]
    if not segments:
        return None
    out = tool("dump_log", "--files", ",".join(segments), "--transaction-log-decoder")
    states = re.findall(rf"transactionalId={re.escape(txn_id)} payload: producerId:\d+,producerEpoch:\d+,"
                        r"state=(\w+),", out)
    return states[-1] if states else None


def open_transaction(broker, topic, txn_id, tag):
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=txn_id,
                      transaction_timeout_ms=TXN_TIMEOUT_MS, linger_ms=0, request_timeout_ms=3000,
                      delivery_timeout_ms=5000, max_block_ms=5000)
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for partition in range(PARTITIONS):
        for k in range(RECORDS_PER_PARTITION):
            p.send(topic, f"{tag}-{partition}-{k}".encode(), partition=partition)
    p.flush(TIMEOUT_S)
    return p


def check_after_restart(broker, topic, txn_id, tag, expected):
    """The transaction ended as ``expected`` on every partition, the LSO reached
    the high watermark, DescribeTransactions shows it completed."""
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"check-{tag}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + TIMEOUT_S
        for partition in range(PARTITIONS):
            tp = confluent_kafka.TopicPartition(topic, partition)
            while True:
                # read_committed consumers are not blocked: the LSO gets to the HW.
                _low, high = c.get_watermark_offsets(tp, timeout=5, cached=False)
                committed_end = c.offsets_for_times([confluent_kafka.TopicPartition(topic, partition, -1)],
                                                    timeout=5)[0].offset
                if committed_end == high:
                    break
                assert time.monotonic() < deadline, f"{topic}-{partition}: LSO {committed_end} stuck below HW {high}"
                time.sleep(0.2)
        c.assign([confluent_kafka.TopicPartition(topic, partition, 0) for partition in range(PARTITIONS)])
        seen = set()
        idle_until = time.monotonic() + 2.0
        for _ in range(2000):
            if time.monotonic() > idle_until:
                break
            msg = c.poll(0.1)
            if msg is None or msg.error():
                continue
            seen.add(msg.value().decode())
            idle_until = time.monotonic() + 1.0
    finally:
        c.close()
    mine = {v for v in seen if v.startswith(f"{tag}-")}
    everything = {f"{tag}-{p}-{k}" for p in range(PARTITIONS) for k in range(RECORDS_PER_PARTITION)}
    assert mine == (everything if expected == "commit" else set()), (tag, expected, sorted(mine))
    described = tool("transactions", "--bootstrap-server", broker.bootstrap, "describe", "--transactional-id",
                     txn_id).splitlines()
    state = described[1].split("\t")[4].strip()
    assert state == ("CompleteCommit" if expected == "commit" else "CompleteAbort"), described


def test_kill_before_the_commit_decision(broker):
    topic, txn_id, tag = "kill-open", "kill-open-txn", "open"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    p = open_transaction(broker, topic, txn_id, tag)
    crash(broker)
    p.close(0)
    assert logged_state(broker, txn_id) == "Ongoing"
    broker.start()
    # The coordinator aborts it once transaction.timeout.ms passed (loaded Ongoing).
    check_after_restart(broker, topic, txn_id, tag, "abort")


def test_kill_between_the_commit_decision_and_its_markers(broker):
    topic = "kill-commit"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    outcomes = []
    for attempt in range(MAX_COMMIT_KILL_ATTEMPTS):
        txn_id, tag = f"kill-commit-{attempt}", f"c{attempt}"
        p = open_transaction(broker, topic, txn_id, tag)
        segment = broker.log_dirs[0] / f"__transaction_state-{partition_for(txn_id, 50)}" / f"{0:020d}.log"
        before = segment.stat().st_size
        result = []

        def commit(p=p, result=result):
            try:
                p.commit_transaction(5)
                result.append("ok")
            except errors.KafkaError as exc:
                result.append(exc)

        thread = threading.Thread(target=commit, daemon=True)
        thread.start()
        deadline = time.monotonic() + 5
        while segment.stat().st_size == before and time.monotonic() < deadline:
            pass  # the commit decision is being logged: kill as soon as it lands
        crash(broker)
        thread.join(15)
        p.close(0)
        state = logged_state(broker, txn_id)
        outcomes.append(state)
        assert state in STATES, (attempt, state)
        if result == ["ok"]:
            # A commit the client saw succeed was logged as a commit decision.
            assert STATES[state] == "commit", (attempt, state)
        broker.start()
        check_after_restart(broker, topic, txn_id, tag, STATES[state])
        if state == "PrepareCommit":
            break
    assert "PrepareCommit" in outcomes, \
        f"no kill landed between the commit decision and its markers in {len(outcomes)} attempts: {outcomes}"
