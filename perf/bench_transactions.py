"""Transactions benchmark (issue 11): transactional against idempotent produce
throughput with the same confluent-kafka producer settings and records, in
one run on one standalone kafkapy broker.

Figures per mode, median over ``--repeat`` rounds (every mode runs once per
round, so the machine's load drifts over all of them alike):

* ``idempotent``: ``--records`` records of ``--size`` bytes to one partition,
  streamed (the reference, 100 %);
* ``idem+flush-N``: the same idempotent producer calling ``flush()`` after
  every N records: the part of a commit that is not about transactions
  (``commit_transaction`` flushes first), i.e. the ceiling any transaction
  of N records can reach with this client (``vs flush``: the ratio to it;
  on a loaded machine the streamed reference swings more than this one);
* ``txn-N``: transactions of 100, 1,000 and 10,000 records.

Columns: records/s, the ratio to ``idempotent``, commit_transaction (or
flush) latency p50/p99 in ms, broker CPU (whole process tree) per
transaction, and librdkafka's own round-trip times (its statistics, average
over the run): ``coord rtt`` of the transaction coordinator's connection
(AddPartitionsToTxn and EndTxn) and ``produce rtt`` of the leader's.

``--rev A --rev B`` runs the same rounds against brokers built from those
git revisions (``tree`` = the working tree), interleaved in one run: an A/B
on a shared machine. ``--rev stub`` is no broker but perf/txn_stub_broker.py,
which answers every request at once from memory: the client's own floor
(what the modes reach when the broker costs next to nothing). The issue's target: with 1,000-record transactions, at
least 80 % of the idempotent rate (see perf/README.md, "Transactions", for
what bounds it with a client this fast).

Every loop is bounded in count and time. Run:
``.venv/bin/python perf/bench_transactions.py [--records N] [--size B] [--repeat R] [--rev REV ...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _brokers import free_port, make_kafkapy, snapshot_source, tree_cpu_seconds  # noqa: E402

import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

TXN_SIZES = (100, 1000, 10000)
FLUSH_EVERY = 1000
TIMEOUT_S = 60.0
QUIET = {"log_level": 0, "logger": lambda *a: None}
# queue.buffering.max.messages above --records: the streamed reference never
# waits on a full queue (BufferError + poll, which made it swing 120k-1.3M
# rec/s on a loaded machine even against the stub); every mode has it.
PRODUCER = {"linger.ms": 5, "batch.size": 1_000_000, "enable.idempotence": True, "acks": "all",
            "queue.buffering.max.messages": 2_000_000}
STATS_INTERVAL_MS = 200
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKER_CONFIG = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                 "offsets.topic.replication.factor": "1"}


def _percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


class RttStats:
    """librdkafka's per-connection round-trip times, summed over the
    statistics windows of a run (``avg`` x ``cnt`` per window, in us)."""

    def __init__(self):
        self.sums: dict[str, list] = {}

    def __call__(self, raw: str) -> None:
        for name, b in json.loads(raw).get("brokers", {}).items():
            rtt = b.get("rtt") or {}
            if rtt.get("cnt"):
                kind = "coord" if name.startswith("TxnCoordinator") else "leader"
                if b.get("source") == "learned" or kind == "coord":
                    s = self.sums.setdefault(kind, [0.0, 0])
                    s[0] += rtt["avg"] * rtt["cnt"]
                    s[1] += rtt["cnt"]

    def avg_ms(self, kind: str) -> float:
        s = self.sums.get(kind)
        return s[0] / s[1] / 1000 if s and s[1] else float("nan")


def run_mode(broker, topic: str, records: int, value: bytes, mode: str, tag: str) -> dict:
    txn_size = int(mode.split("-")[1]) if mode.startswith("txn-") else None
    flush_every = int(mode.split("-")[1]) if mode.startswith("idem+flush-") else None
    rtt = RttStats()
    conf = {"bootstrap.servers": broker.bootstrap, **PRODUCER, **QUIET,
            "statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": rtt}
    if txn_size is not None:
        conf["transactional.id"] = f"bench-{tag}"
    p = ck.Producer(conf)
    # Warm-up outside the timing, the same for every mode: connection,
    # metadata, producer id, and (transactional) the first AddPartitionsToTxn.
    if txn_size is not None:
        p.init_transactions(TIMEOUT_S)
        p.begin_transaction()
    p.produce(topic, value, partition=0)
    if txn_size is not None:
        p.commit_transaction(TIMEOUT_S)
    assert p.flush(TIMEOUT_S) == 0
    p.poll(STATS_INTERVAL_MS / 1000 * 1.5)
    rtt.sums.clear()
    cpu0 = tree_cpu_seconds(broker.pid)
    commits = []
    start = time.perf_counter()
    deadline = start + 600
    sent = 0
    while sent < records and time.perf_counter() < deadline:
        n = min(txn_size or flush_every or records, records - sent)
        if txn_size is not None:
            p.begin_transaction()
        for _ in range(n):
            while True:
                try:
                    p.produce(topic, value, partition=0)
                    break
                except BufferError:
                    p.poll(0.01)
        if txn_size is not None or flush_every is not None:
            t0 = time.perf_counter()
            if txn_size is not None:
                p.commit_transaction(TIMEOUT_S)  # flushes, then EndTxn
            else:
                assert p.flush(TIMEOUT_S) == 0
            commits.append((time.perf_counter() - t0) * 1000)
        sent += n
    assert p.flush(TIMEOUT_S) == 0
    elapsed = time.perf_counter() - start
    cpu = tree_cpu_seconds(broker.pid) - cpu0
    p.poll(STATS_INTERVAL_MS / 1000 * 1.5)  # the last statistics window
    out = {"mode": mode, "records": sent, "rec_per_s": sent / elapsed, "broker_cpu_s": cpu,
           "coord_rtt_ms": rtt.avg_ms("coord"), "produce_rtt_ms": rtt.avg_ms("leader")}
    if commits:
        out.update(transactions=len(commits), commit_p50_ms=_percentile(commits, 0.5),
                   commit_p99_ms=_percentile(commits, 0.99), cpu_ms_per_txn=cpu * 1000 / len(commits))
    return out


class StubBroker:
    """perf/txn_stub_broker.py in a child process (``--rev stub``)."""

    def __init__(self):
        port = free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        self.proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                   "txn_stub_broker.py"), str(port)])
        self.pid = self.proc.pid
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # bounded: until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)

    def create_topic(self, topic: str) -> None:
        pass  # every topic exists, with one partition

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


def create_topic(broker, topic: str) -> None:
    if isinstance(broker, StubBroker):
        return broker.create_topic(topic)
    broker.admin().create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def start_broker(work: str, rev: str):
    if rev == "stub":
        return StubBroker()
    src = None
    if rev != "tree":
        src = snapshot_source(REPO, os.path.join(work, "src"), rev)
    broker = make_kafkapy(work, BROKER_CONFIG, src=src)
    broker.start()
    broker.wait_ready()
    return broker


def print_table(rows, modes) -> None:
    idem = statistics.median(r["rec_per_s"] for r in rows if r["mode"] == "idempotent")
    flushed = statistics.median(r["rec_per_s"] for r in rows if r["mode"] == modes[1])
    print(f"{'mode':<16} {'rec/s':>10} {'vs idem':>8} {'vs flush':>9} {'commit p50':>11} {'p99':>8}"
          f" {'cpu ms/txn':>11} {'coord rtt':>10} {'produce rtt':>12}")
    for mode in modes:
        sel = [r for r in rows if r["mode"] == mode]
        rate = statistics.median(r["rec_per_s"] for r in sel)
        produce_rtt = statistics.median(r["produce_rtt_ms"] for r in sel)
        line = f"{mode:<16} {rate:>10,.0f} {rate / idem:>7.0%} {rate / flushed:>8.0%}"
        if mode == "idempotent":
            print(f"{line} {'':>11} {'':>8} {'':>11} {'':>10} {produce_rtt:>10.2f}ms")
            continue
        p50 = statistics.median(r["commit_p50_ms"] for r in sel)
        p99 = statistics.median(r["commit_p99_ms"] for r in sel)
        cpu = statistics.median(r["cpu_ms_per_txn"] for r in sel)
        coord = statistics.median(r["coord_rtt_ms"] for r in sel)
        coord_text = f"{coord:>8.2f}ms" if coord == coord else f"{'':>10}"
        print(f"{line} {p50:>9.2f}ms {p99:>6.1f}ms {cpu:>11.2f} {coord_text} {produce_rtt:>10.2f}ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rev", action="append",
                    help="git revision to run ('tree': the working tree, 'stub': the client's floor); repeatable")
    args = ap.parse_args()
    revs = args.rev or ["tree"]
    value = b"x" * args.size
    modes = ["idempotent", f"idem+flush-{FLUSH_EVERY}"] + [f"txn-{s}" for s in TXN_SIZES]
    rows: dict[str, list] = {rev: [] for rev in revs}
    with tempfile.TemporaryDirectory() as work:
        brokers = {}
        try:
            for i, rev in enumerate(revs):
                brokers[rev] = start_broker(os.path.join(work, f"b{i}"), rev)
            for r in range(args.repeat):
                for mode in modes:
                    for rev in (revs if r % 2 == 0 else revs[::-1]):
                        topic = f"bench-{r}-{mode}".replace("+", "-")
                        create_topic(brokers[rev], topic)
                        row = run_mode(brokers[rev], topic, args.records, value, mode, f"{r}-{mode}")
                        row["rev"] = rev
                        rows[rev].append(row)
                        print(json.dumps(row), flush=True)
        finally:
            for broker in brokers.values():
                broker.stop()
    print(f"\n{args.records:,} records of {args.size} B per mode, median of {args.repeat} round(s), "
          f"load average {os.getloadavg()[0]:.1f}")
    for rev in revs:
        print(f"\nbroker: {rev}")
        print_table(rows[rev], modes)


if __name__ == "__main__":
    main()
