"""Transactions benchmark (issue 11): transactional against idempotent produce
throughput with the same confluent-kafka producer settings and records, in
one run on one standalone kafkapy broker.

Figures per mode (idempotent, then transactions of 100, 1,000 and 10,000
records): records/s over ``--records`` records of ``--size`` bytes to one
partition, the ratio to the idempotent rate, commit_transaction latency
p50/p99 (ms), and broker CPU (whole process tree) per transaction (ms).
The issue's target: with 1,000-record transactions, at least 80 % of the
idempotent rate.

Every loop is bounded in count and time. Run:
``.venv/bin/python perf/bench_transactions.py [--records N] [--size B] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _brokers import make_kafkapy, tree_cpu_seconds  # noqa: E402

import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

TXN_SIZES = (100, 1000, 10000)
TIMEOUT_S = 60.0
QUIET = {"log_level": 0, "logger": lambda *a: None}
PRODUCER = {"linger.ms": 5, "batch.size": 1_000_000, "enable.idempotence": True, "acks": "all"}


def _percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def run_mode(broker, topic: str, records: int, value: bytes, txn_size: int | None, tag: str) -> dict:
    conf = {"bootstrap.servers": broker.bootstrap, **PRODUCER, **QUIET}
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
    cpu0 = tree_cpu_seconds(broker.pid)
    commits = []
    start = time.perf_counter()
    deadline = start + 600
    sent = 0
    while sent < records and time.perf_counter() < deadline:
        n = min(txn_size or records, records - sent)
        if txn_size is not None:
            p.begin_transaction()
        for _ in range(n):
            while True:
                try:
                    p.produce(topic, value, partition=0)
                    break
                except BufferError:
                    p.poll(0.01)
        if txn_size is not None:
            t0 = time.perf_counter()
            p.commit_transaction(TIMEOUT_S)  # flushes, then EndTxn
            commits.append((time.perf_counter() - t0) * 1000)
        sent += n
    assert p.flush(TIMEOUT_S) == 0
    elapsed = time.perf_counter() - start
    cpu = tree_cpu_seconds(broker.pid) - cpu0
    out = {"mode": "idempotent" if txn_size is None else f"txn-{txn_size}", "records": sent,
           "rec_per_s": sent / elapsed, "broker_cpu_s": cpu}
    if txn_size is not None:
        out.update(transactions=len(commits), commit_p50_ms=_percentile(commits, 0.5),
                   commit_p99_ms=_percentile(commits, 0.99), cpu_ms_per_txn=cpu * 1000 / max(1, len(commits)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    value = b"x" * args.size
    with tempfile.TemporaryDirectory() as work:
        broker = make_kafkapy(work, {"transaction.state.log.replication.factor": "1",
                                     "transaction.state.log.min.isr": "1",
                                     "offsets.topic.replication.factor": "1"})
        broker.start()
        try:
            broker.wait_ready() if hasattr(broker, "wait_ready") else time.sleep(2)
            rows = []
            for r in range(args.repeat):
                for txn_size in (None,) + TXN_SIZES:
                    topic = f"bench-{r}-{txn_size or 'idem'}"
                    broker.admin().create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    rows.append(run_mode(broker, topic, args.records, value, txn_size, f"{r}-{txn_size}"))
                    print(json.dumps(rows[-1]), flush=True)
        finally:
            broker.stop()
    idem = statistics.median(r["rec_per_s"] for r in rows if r["mode"] == "idempotent")
    print(f"\n{'mode':<12} {'rec/s':>10} {'vs idem':>8} {'commit p50':>11} {'p99':>8} {'cpu ms/txn':>11}")
    for mode in ["idempotent"] + [f"txn-{s}" for s in TXN_SIZES]:
        sel = [r for r in rows if r["mode"] == mode]
        rate = statistics.median(r["rec_per_s"] for r in sel)
        if mode == "idempotent":
            print(f"{mode:<12} {rate:>10,.0f} {'100 %':>8}")
            continue
        p50 = statistics.median(r["commit_p50_ms"] for r in sel)
        p99 = statistics.median(r["commit_p99_ms"] for r in sel)
        cpu = statistics.median(r["cpu_ms_per_txn"] for r in sel)
        print(f"{mode:<12} {rate:>10,.0f} {rate / idem:>7.0%} {p50:>9.1f}ms {p99:>6.1f}ms {cpu:>10.1f}")


if __name__ == "__main__":
    main()
