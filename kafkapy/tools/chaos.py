"""``kafkapy-chaos``: faults and operations against a local cluster under load, and a report.

Starts a ZooKeeper ensemble (``--zookeeper-nodes``, 3 by default; 1 for a
standalone server) and ``--brokers`` brokers (4 by default) as
``kafkapy-local-cluster`` does (its ``start_zookeeper`` and ``broker_argv``;
``chaos_cluster.ChaosCluster``), creates the topic ``chaos`` (RF 3,
``min.insync.replicas=2``), and runs one idempotent ``acks=all`` producer per
``--clients`` entry (confluent-kafka, kafka-python, kafkapy's own client), each
sending numbered values ``<client>:<n>`` to partition ``n % partitions`` at
``--rate`` records/s, and a transactional producer on ``chaos-txn``
(``--transactional-rate``; ``chaos_transactions``). Every ``--interval``
seconds it starts the next event of a seeded shuffle of ``--faults`` and
``--operations`` (repeated; ``--rounds`` bounds it), waits for the cluster
to recover (every broker in Metadata, every ISR full; bounded), and records
what it did. The faults:

* ``leader-kill``: SIGKILL a partition leader's process group, restart it after
  the session timeout;
* ``leader-pause`` / ``follower-pause`` / ``controller-pause``: SIGSTOP the
  broker past the session timeout and ``replica.lag.time.max.ms``, then SIGCONT;
* ``double-kill``: SIGKILL a leader, then the leader elected after it, restart
  both (two failures in quick succession; unclean election stays off);
* ``zookeeper-restart``: SIGKILL every ZooKeeper node and start them again at once;
* ``zookeeper-pause``: SIGSTOP every ZooKeeper node past the session timeout
  (every session expires), then SIGCONT.

The operations (``chaos_operations``): a rolling restart (the controller
last), a partition reassignment, a preferred leader election, a topic created,
written, read and deleted under its producer, a ZooKeeper node bounce.

A monitor samples Metadata every second (leaders, ISR sizes). At the end the
producers flush, a consumer reads every partition to its high watermark and
the run is validated as Kafka's system tests do: acknowledged ⊆ consumed, no
value twice, each client's values in send order within a partition; under
read_committed every committed transaction's records once, no aborted one.
The report (``report.md``, ``timeline.png`` with matplotlib, ``run.json``)
opens with the verdict and its reasons, then what each client saw
(acknowledged, consumed, lost, duplicated, longest stall, errors by kind) and
the timeline of every event with its outcome. Exit code 0 when the verdict is
PASS, 1 otherwise.

Needs the ``chaos`` extra (confluent-kafka for the monitor, the operations and
the validating consumer, kafka-python if chosen, matplotlib for the plot) and
Debian's ZooKeeper. Ends only the processes it started, by their process groups.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkapy.tools import zookeeper_server
from kafkapy.tools._cli import ToolError, parser, run
from kafkapy.tools.chaos_cluster import (RDKAFKA_LOG, RECOVERY_TIMEOUT_S, TOPIC, TXN_TOPIC, ChaosCluster,
                                         answered_view, cluster_view, consume_to_end, create_topic,
                                         wait_leader_other_than,
                                         wait_recovered, wait_recovered_brokers)
from kafkapy.tools.chaos_operations import OPERATIONS, Event, operate
from kafkapy.tools.chaos_transactions import TransactionalThread, validate_transactions

FAULTS = ("leader-kill", "leader-pause", "follower-pause", "controller-pause", "double-kill",
          "zookeeper-restart", "zookeeper-pause")
CLIENTS = ("confluent", "kafka-python", "kafkapy")
FLUSH_TIMEOUT_S = 90.0


def _parse(argv):
    p = parser("kafkapy-chaos", "Run faults and operations against a local kafkapy cluster under load "
                                "and write a report.")
    p.add_argument("--duration", type=float, default=180.0, help="seconds of load (default 180)")
    p.add_argument("--clients", default="confluent,kafka-python,kafkapy",
                   help=f"comma-separated producers, each idempotent acks=all: {', '.join(CLIENTS)}")
    p.add_argument("--rate", type=float, default=200.0, help="records/s per client (default 200)")
    p.add_argument("--faults", default=",".join(FAULTS),
                   help=f"comma-separated faults, or none (default: all: {', '.join(FAULTS)})")
    p.add_argument("--operations", default=None,
                   help=f"comma-separated operations, or none (default: all: {', '.join(OPERATIONS)}; "
                        "zookeeper-node-bounce only with an ensemble)")
    p.add_argument("--transactional-rate", type=float, default=50.0,
                   help=f"records/s of the transactional producer on {TXN_TOPIC} (default 50; 0: none)")
    p.add_argument("--interval", type=float, default=20.0,
                   help="seconds between the starts of faults and operations (default 20)")
    p.add_argument("--rounds", type=int, default=0,
                   help="inject this many rounds of the mix (every chosen kind once a round) and no more; "
                        "the load then runs to --duration or 10 s past the last event, whichever is later "
                        "(default 0: as many as fit in --duration)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the event order, the targets and the aborted transactions (default: random)")
    p.add_argument("--brokers", type=int, default=4,
                   help="number of brokers (default 4: one more than the RF, so a reassignment moves data)")
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--dir", default="chaos-run", help="cluster data and the report (default ./chaos-run)")
    p.add_argument("--config", default="config/server.properties")
    p.add_argument("--base-port", type=int, default=19092)
    p.add_argument("--zookeeper-port", type=int, default=12181,
                   help="ZooKeeper's client port; an ensemble's node n on this + n - 1 (default 12181)")
    p.add_argument("--zookeeper-nodes", type=int, default=3, help="1 or 3 (an ensemble, the default)")
    p.add_argument("--session-timeout-ms", type=int, default=6000,
                   help="zookeeper.session.timeout.ms of the brokers (default 6000)")
    args = p.parse_args(argv)
    args.client_list = [c.strip() for c in args.clients.split(",") if c.strip()]
    args.fault_list = [f.strip() for f in args.faults.split(",") if f.strip() and f.strip() != "none"]
    if args.zookeeper_nodes not in (1, 3):
        raise ToolError("--zookeeper-nodes must be 1 or 3")
    if args.operations is None:
        args.operation_list = [o for o in OPERATIONS if args.zookeeper_nodes > 1 or o != "zookeeper-node-bounce"]
    else:
        args.operation_list = [o.strip() for o in args.operations.split(",") if o.strip() and o.strip() != "none"]
    for o in args.operation_list:
        if o not in OPERATIONS:
            raise ToolError(f"unknown operation {o!r} (one of {', '.join(OPERATIONS)})")
    if "zookeeper-node-bounce" in args.operation_list and args.zookeeper_nodes == 1:
        raise ToolError("zookeeper-node-bounce needs an ensemble: --zookeeper-nodes 3")
    for c in args.client_list:
        if c not in CLIENTS:
            raise ToolError(f"unknown client {c!r} (one of {', '.join(CLIENTS)})")
    for f in args.fault_list:
        if f not in FAULTS:
            raise ToolError(f"unknown fault {f!r} (one of {', '.join(FAULTS)})")
    if not 3 <= args.brokers <= 9:
        raise ToolError("--brokers must be between 3 and 9 (RF 3 topic)")
    if args.duration < 30 or args.interval < 2 or args.rounds < 0:
        raise ToolError("--duration must be at least 30 s, --interval at least 2 s, --rounds not negative")
    if not os.path.exists(args.config):
        raise ToolError(f"no such config file: {args.config}")
    return args


# -- the producers --------------------------------------------------------------------------------

@dataclass
class ClientRun:
    """One producer's record: owned by its thread until ``join``; the callbacks
    (librdkafka's poll, kafka-python's and kafkapy's sender threads) append
    under ``lock``."""

    name: str
    sent: int = 0
    acked: dict = field(default_factory=dict)  # partition -> [n in ack order]
    ack_times: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # (time, message)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ok(self, partition: int, n: int) -> None:
        with self.lock:
            self.acked.setdefault(partition, []).append(n)
            self.ack_times.append(time.monotonic())

    def failed(self, message: str) -> None:
        with self.lock:
            self.errors.append((time.monotonic(), message[:200]))


def _make_producer(kind: str, bootstrap: str, run_: ClientRun):
    """``(send(partition, n), flush(timeout_s) -> unacknowledged, close())`` for one client kind."""
    topic = TOPIC
    if kind == "confluent":
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120000, "request.timeout.ms": 5000,
                      "socket.timeout.ms": 8000, "client.id": "chaos-confluent", "logger": RDKAFKA_LOG})

        def send(partition, n):
            def done(err, msg, n=n, partition=partition):
                run_.ok(partition, n) if err is None else run_.failed(str(err))
            p.produce(topic, f"{run_.name}:{n}".encode(), partition=partition, on_delivery=done)
            p.poll(0)

        return send, lambda t: p.flush(t), lambda: (p.purge(), p.close())
    if kind == "kafka-python":
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                          request_timeout_ms=8000, delivery_timeout_ms=120000, client_id="chaos-kafka-python")

        def send(partition, n):
            future = p.send(topic, f"{run_.name}:{n}".encode(), partition=partition)
            future.add_callback(lambda _md, n=n, partition=partition: run_.ok(partition, n))
            future.add_errback(lambda exc: run_.failed(repr(exc)))

        def flush(t):
            p.flush(timeout=t)
            return run_.sent - sum(len(v) for v in run_.acked.values()) - len(run_.errors)

        return send, flush, lambda: p.close(timeout=5)
    from kafkapy.client import KafkaProducer as OwnProducer

    p = OwnProducer(bootstrap, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                  "request.timeout.ms": 8000, "delivery.timeout.ms": 120000,
                                  "client.id": "chaos-kafkapy"})

    def send(partition, n):
        def done(_md, exc, n=n, partition=partition):
            run_.ok(partition, n) if exc is None else run_.failed(repr(exc))
        p.send(topic, f"{run_.name}:{n}".encode(), partition=partition, callback=done)

    def flush(t):
        p.flush(timeout=t)
        return run_.sent - sum(len(v) for v in run_.acked.values()) - len(run_.errors)

    return send, flush, lambda: p.close(timeout=5)


class ProducerThread(threading.Thread):
    def __init__(self, kind: str, bootstrap: str, rate: float, partitions: int, stop: threading.Event):
        super().__init__(name=f"chaos-{kind}", daemon=True)
        self.run_ = ClientRun(kind)
        self.send, self.flush, self.close = _make_producer(kind, bootstrap, self.run_)
        self.rate, self.partitions, self.stop_event = rate, partitions, stop

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop_event.is_set():  # bounded by the run's duration (the stop event)
            n = self.run_.sent
            try:
                self.send(n % self.partitions, n)
                self.run_.sent += 1
            except Exception as exc:  # a full queue or a fatal client error: counted, paced
                self.run_.failed(f"send: {exc!r}")
                self.stop_event.wait(0.5)
            next_at += 1.0 / self.rate
            delay = next_at - time.monotonic()
            if delay > 0:
                self.stop_event.wait(delay)


# -- faults ---------------------------------------------------------------------------------------

def _pause_s(args) -> float:
    """Past the session timeout and replica.lag.time.max.ms (4 s), with a margin."""
    return max(args.session_timeout_ms / 1000, 4.0) * 1.5 + 2


def inject(kind: str, cluster: ChaosCluster, rng: random.Random, t0: float) -> Event:
    args = cluster.args
    view = answered_view(cluster.bootstrap)
    leaders = view["leaders"]
    partition = rng.choice(sorted(leaders)) if leaders else 0
    rec = Event(kind, "fault", time.monotonic() - t0)
    if kind == "leader-kill":
        victim = leaders.get(partition, 1)
        rec.target = f"broker {victim} (leader of {TOPIC}-{partition})"
        cluster.kill_broker(victim)
        time.sleep(args.session_timeout_ms / 1000 + 2)
        cluster.start_broker(victim)
    elif kind in ("leader-pause", "follower-pause", "controller-pause"):
        if kind == "leader-pause":
            victim = leaders.get(partition, 1)
        elif kind == "controller-pause":
            victim = view["controller"]
        else:  # the broker leading the fewest partitions, not the controller
            counts = {i: sum(1 for x in leaders.values() if x == i) for i in cluster.ports if i != view["controller"]}
            victim = min(counts, key=lambda i: (counts[i], i))
        rec.target = f"broker {victim}"
        cluster.signal_broker(victim, signal.SIGSTOP)
        try:
            time.sleep(_pause_s(args))
        finally:
            cluster.signal_broker(victim, signal.SIGCONT)
    elif kind == "double-kill":
        first = leaders.get(partition, 1)
        cluster.kill_broker(first)
        second = wait_leader_other_than(cluster, partition, {first}, args.session_timeout_ms / 1000 + 20)
        if second is not None:
            cluster.kill_broker(second)
            rec.target = f"brokers {first} then {second} (leaders of {TOPIC}-{partition})"
            time.sleep(3)
            cluster.start_broker(second)
        else:
            rec.target = f"broker {first}"
            rec.note = "no second leader was elected in time"
        cluster.start_broker(first)
    elif kind == "zookeeper-restart":
        rec.target = "ZooKeeper, every node (SIGKILL, start)"
        cluster.restart_zookeeper()
    elif kind == "zookeeper-pause":
        rec.target = "ZooKeeper, every node (SIGSTOP)"
        cluster.zookeeper_signal(signal.SIGSTOP)
        try:
            time.sleep(_pause_s(args))
        finally:
            cluster.zookeeper_signal(signal.SIGCONT)
    rec.ended = time.monotonic() - t0
    return rec


class Monitor(threading.Thread):
    """Samples Metadata once a second: ``(t, leaders, isr sizes)``; owned by its thread."""

    def __init__(self, bootstrap: str, t0: float, stop: threading.Event):
        super().__init__(name="chaos-monitor", daemon=True)
        self.bootstrap, self.t0, self.stop_event = bootstrap, t0, stop
        self.samples: list = []

    def run(self) -> None:
        while not self.stop_event.wait(1.0):  # bounded by the stop event
            try:
                v = cluster_view(self.bootstrap)
                self.samples.append((time.monotonic() - self.t0, v["leaders"], v["isr"]))
            except Exception:
                self.samples.append((time.monotonic() - self.t0, None, None))


# -- validation -----------------------------------------------------------------------------------

def validate(runs, consumed: dict) -> dict:
    """Per client: acknowledged, lost (acknowledged, not consumed), duplicates, out of order."""
    result = {}
    for r in runs:
        lost = dup = disorder = 0
        lost_values = []  # (partition, n): where to look in the logs
        total = sum(1 for values in consumed.values() for name, _n in values if name == r.name)
        for p, acked in r.acked.items():
            got = [n for name, n in consumed.get(p, []) if name == r.name]
            seen = set(got)
            dup += len(got) - len(seen)
            missing = sorted(set(acked) - seen)
            lost += len(missing)
            lost_values += [(p, n) for n in missing]
            wanted = set(acked)
            order = [n for n in got if n in wanted]
            disorder += sum(1 for a, b in zip(order, order[1:]) if b < a)
        result[r.name] = {"sent": r.sent, "acknowledged": sum(len(v) for v in r.acked.values()),
                          "consumed": total, "errors": len(r.errors), "errors_by_kind": errors_by_kind(r.errors),
                          "lost": lost, "duplicates": dup, "out_of_order": disorder,
                          "lost_values": sorted(lost_values, key=lambda pn: pn[1])[:20]}
    return result


def error_kind(message: str) -> str:
    """The error's name: librdkafka's ``KafkaError{code=NAME,...}``, a Python
    exception's class, or the error name before a colon."""
    message = message.removeprefix("send: ")
    if "code=" in message:
        return message.split("code=", 1)[1].split(",", 1)[0]
    head = message.split("(", 1)[0].split(":", 1)[0].strip()
    return head or "?"


def errors_by_kind(errors) -> dict:
    out: dict = {}
    for _t, message in errors:
        kind = error_kind(message)
        out[kind] = out.get(kind, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def max_stall(times, start: float, end: float) -> float:
    """The longest time in [start, end] without an acknowledgement (or a commit)."""
    points = [start] + sorted(t for t in times if start <= t <= end) + [end]
    return max(b - a for a, b in zip(points, points[1:]))


def verdict_reasons(verdicts: dict, txn: dict | None, events) -> list:
    """Why the run fails; empty when it passes."""
    reasons = []
    for name, v in verdicts.items():
        for key, what in (("lost", "lost"), ("duplicates", "duplicated"), ("out_of_order", "out of order")):
            if v[key]:
                reasons.append(f"{name}: {v[key]} acknowledged records {what}")
    if txn is not None:
        for key, what in (("committed_lost", "committed records not read under read_committed"),
                          ("duplicates", "records read twice under read_committed"),
                          ("aborted_seen", "aborted records read under read_committed"),
                          ("unknown_partial", "transactions of unknown outcome read in part")):
            if txn[key]:
                reasons.append(f"transactional: {txn[key]} {what}")
    for ev in events:
        if ev.failed:
            reasons.append(f"{ev.kind} at {ev.started:.0f} s failed: {ev.failed}")
        if ev.recovered_s is None:
            reasons.append(f"ISRs not full within {RECOVERY_TIMEOUT_S:.0f} s after {ev.kind} at {ev.started:.0f} s")
    return reasons


# -- the report -----------------------------------------------------------------------------------

def _per_second(times, t0: float, seconds: int) -> list:
    out = [0] * seconds
    for t in times:
        i = int(t - t0)
        if 0 <= i < seconds:
            out[i] += 1
    return out


def leadership_changes(samples) -> list:
    """``[(t, number of partitions whose leader changed since the previous sample)]``."""
    out, prev = [], None
    for t, leaders, _isr in samples:
        if leaders is None:
            continue
        if prev is not None:
            out.append((t, sum(1 for p, x in leaders.items() if prev.get(p) != x)))
        prev = leaders
    return out


def plot(path: Path, runs, events, samples, t0: float, seconds: int) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(12, 8), sharex=True)
    for r in runs:
        ax1.plot(range(seconds), _per_second(r.ack_times, t0, seconds), label=r.name)
        ax2.plot(range(seconds), _per_second([t for t, _ in r.errors], t0, seconds), label=r.name)
    changes = leadership_changes(samples)
    ax3.bar([t for t, _ in changes], [n for _, n in changes], width=0.9, color="tab:red")
    for f in events:
        for ax in (ax1, ax2, ax3):
            ax.axvspan(f.started, max(f.ended, f.started + 0.5),
                       color="orange" if f.category == "fault" else "tab:blue", alpha=0.2)
        ax1.annotate(f.kind, (f.started, 0), xytext=(2, 2), textcoords="offset points", rotation=90,
                     fontsize=7, va="bottom")
    ax1.set_ylabel("acks/s")
    ax2.set_ylabel("errors/s")
    ax3.set_ylabel("leader changes")
    ax3.set_xlabel("seconds since the load started (orange: a fault, blue: an operation)")
    ax1.legend(loc="upper right", fontsize=8)
    ax1.set_title("kafkapy-chaos timeline")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def _cells(kinds: dict, limit: int = 3) -> str:
    text = ", ".join(f"{k} ×{n}" for k, n in list(kinds.items())[:limit])
    return text + (", …" if len(kinds) > limit else "") if text else "-"


def write_report(out: Path, args, runs, events, samples, verdicts, t0: float, seconds: int,
                 txn_run=None, txn: dict | None = None) -> str:
    """``report.md`` (readable in a terminal), ``run.json`` and ``timeline.png``; PASS or FAIL."""
    reasons = verdict_reasons(verdicts, txn, events)
    verdict = "FAIL" if reasons else "PASS"
    plotted = plot(out / "timeline.png", runs, events, samples, t0, seconds)
    changes = sum(n for _, n in leadership_changes(samples))
    end = t0 + seconds
    stalls = {r.name: max_stall(r.ack_times, t0, end) for r in runs}
    faults = [e for e in events if e.category == "fault"]
    ops = [e for e in events if e.category == "operation"]
    acked = sum(v["acknowledged"] for v in verdicts.values())
    summary = (f"{acked} acknowledged records of {len(runs)} idempotent clients read back once and in order"
               + (f", {txn['committed']} committed transactions read once and {txn['aborted']} aborted ones "
                  "never (read_committed)" if txn else "")
               + f"; {len(faults)} faults and {len(ops)} operations, every operation done and every ISR full again.")
    lines = [f"# kafkapy-chaos report: {verdict}", "",
             f"**{verdict}**: " + ("; ".join(reasons) if reasons else summary), "",
             f"{args.brokers} brokers, ZooKeeper {'ensemble of %d' % args.zookeeper_nodes if args.zookeeper_nodes > 1 else 'standalone'}, "
             f"topic `{TOPIC}` ({args.partitions} partitions, RF 3, min.insync.replicas=2), {seconds} s of load, "
             f"clients {', '.join(args.client_list)} (idempotent, acks=all, {args.rate:g} records/s each)"
             + (f", a transactional producer on `{TXN_TOPIC}` ({args.transactional_rate:g} records/s)" if txn else "")
             + f", session timeout {args.session_timeout_ms} ms, seed {args.seed}.", "",
             "## What the clients saw", "",
             "| client | sent | acknowledged | consumed | lost | duplicated | out of order | max stall s | errors by kind |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, v in verdicts.items():
        lines.append(f"| {name} | {v['sent']} | {v['acknowledged']} | {v['consumed']} | {v['lost']} | "
                     f"{v['duplicates']} | {v['out_of_order']} | {stalls[name]:.1f} | {_cells(v['errors_by_kind'])} |")
    if txn is not None:
        stall = max_stall(txn_run.commit_times, t0, end)
        lines += ["", "| transactional | transactions | committed | aborted | outcome unknown | committed records "
                  "| consumed | committed not read | read twice | aborted read | max commit stall s | errors by kind |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
                  f"| {TXN_TOPIC} | {txn['transactions']} | {txn['committed']} | {txn['aborted']} | {txn['unknown']}"
                  f" ({txn['unknown_landed']} landed) | {txn['committed_records']} | {txn['consumed_records']} | "
                  f"{txn['committed_lost']} | {txn['duplicates']} | {txn['aborted_seen']} | {stall:.1f} | "
                  f"{_cells(errors_by_kind(txn_run.errors))} |"]
    counts: dict = {}
    for e in events:
        counts[e.kind] = counts.get(e.kind, 0) + 1
    lines += ["", f"Injected: {len(faults)} faults and {len(ops)} operations ("
              + ", ".join(f"{k} ×{n}" for k, n in sorted(counts.items())) + f"); leadership changes seen: {changes}.",
              "", "![timeline](timeline.png)" if plotted else "(no plot: install matplotlib, `pip install kafkapy[chaos]`)",
              "", "## Timeline", "", "| start s | end s | | event | target | ISR full after s | outcome |",
              "|---:|---:|---|---|---|---:|---|"]
    for e in events:
        rec = "not within %d s" % RECOVERY_TIMEOUT_S if e.recovered_s is None else f"{e.recovered_s:.1f}"
        outcome = f"FAILED: {e.failed}" + (f" ({e.note})" if e.note else "") if e.failed else e.note
        lines.append(f"| {e.started:.1f} | {e.ended:.1f} | {'op' if e.category == 'operation' else 'fault'} | "
                     f"{e.kind} | {e.target} | {rec} | {outcome} |")
    lost = [(name, v["lost_values"]) for name, v in verdicts.items() if v["lost_values"]]
    if lost:
        lines += ["", "## Lost (acknowledged, not read back; first 20 per client as partition:value)", ""]
        lines += [f"- {name}: " + ", ".join(f"{TOPIC}-{p}:{n}" for p, n in values) for name, values in lost]
    errors = [(r.name, t - t0, m) for r in runs for t, m in r.errors]
    if txn_run is not None:
        errors += [(txn_run.name, t - t0, m) for t, m in txn_run.errors]
    if errors:
        lines += ["", "## First client errors", ""]
        lines += [f"- {t:.1f} s {name}: {m}" for name, t, m in sorted(errors, key=lambda e: e[1])[:10]]
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    (out / "run.json").write_text(json.dumps({
        "verdict": verdict, "reasons": reasons, "clients": verdicts,
        "max_stall_s": {k: round(v, 2) for k, v in stalls.items()}, "transactional": txn, "seconds": seconds,
        "seed": args.seed, "events": [e.__dict__ for e in events], "leadership_changes": changes}, indent=2))
    return verdict


# -- the run --------------------------------------------------------------------------------------

def _next_event(order: list, args, rng: random.Random) -> str:
    """The next kind from a seeded shuffle of every chosen fault and operation, repeated."""
    if not order:
        order.extend(args.fault_list + args.operation_list)
        rng.shuffle(order)
    return order.pop()


def _main(argv) -> int:
    args = _parse(argv)
    missing = zookeeper_server.zookeeper_missing()
    if missing:
        raise ToolError(f"ZooKeeper cannot run here: {missing}")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        raise ToolError("kafkapy-chaos needs confluent-kafka: pip install 'kafkapy[chaos]'") from None
    args.seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(args.seed)
    root = Path(args.dir).resolve()
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    # The clients' own warnings (reconnects while a broker is down) go to a file, not the terminal.
    logging.basicConfig(level=logging.WARNING, filename=str(root / "clients.log"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cluster = ChaosCluster(args, root)
    stop = threading.Event()
    producers, events, txn_thread = [], [], None
    topics = (TOPIC, TXN_TOPIC) if args.transactional_rate > 0 else (TOPIC,)
    try:
        print(f"starting ZooKeeper ({args.zookeeper_nodes} node(s)) and {args.brokers} brokers in {root}",
              flush=True)
        cluster.start()
        if wait_recovered_brokers(cluster) is None:
            raise ToolError(f"the cluster did not come up; see {root}/broker-*/server.log")
        for topic in topics:
            create_topic(cluster.bootstrap, topic, args.partitions)
        if wait_recovered(cluster, topics=topics) is None:
            raise ToolError("the topics' partitions were not led with full ISRs in time")
        producers = [ProducerThread(kind, cluster.bootstrap, args.rate, args.partitions, stop)
                     for kind in args.client_list]
        if args.transactional_rate > 0:
            txn_thread = TransactionalThread(cluster.bootstrap, args.transactional_rate, args.partitions, stop,
                                             rng.randrange(1 << 30))
        t0 = time.monotonic()
        monitor = Monitor(cluster.bootstrap, t0, stop)
        for t in producers + [monitor] + ([txn_thread] if txn_thread else []):
            t.start()
        order: list = []
        next_event = t0 + min(10.0, args.interval)  # a calm start, then an event every interval
        end = t0 + args.duration
        mix = len(args.fault_list) + len(args.operation_list)
        wanted = args.rounds * mix
        # Bounded by the duration, or with --rounds by the number of events (each bounded).
        while mix and (time.monotonic() < end if not wanted else len(events) < wanted):
            if time.monotonic() >= next_event and (wanted or end - time.monotonic() > 10):
                kind = _next_event(order, args, rng)
                print(f"{time.monotonic() - t0:6.1f} s  {kind}", flush=True)
                started = time.monotonic() - t0
                try:
                    ev = inject(kind, cluster, rng, t0) if kind in FAULTS else operate(kind, cluster, rng, t0)
                except Exception as exc:  # Metadata unanswered for 30 s: said in the report, the run goes on
                    ev = Event(kind, "fault" if kind in FAULTS else "operation", started, ended=time.monotonic() - t0,
                               failed=f"not injected: {type(exc).__name__}: {exc}"[:300])
                ev.recovered_s = wait_recovered(cluster, topics=topics)
                events.append(ev)
                print(f"{time.monotonic() - t0:6.1f} s  {kind} on {ev.target}: "
                      + (f"FAILED: {ev.failed}; " if ev.failed else "")
                      + f"ISRs full after {'-' if ev.recovered_s is None else f'{ev.recovered_s:.1f} s'}", flush=True)
                next_event = max(next_event + args.interval, time.monotonic() + min(5.0, args.interval))
            time.sleep(0.2)
        end = max(end, time.monotonic() + 10) if wanted else end
        while time.monotonic() < end:  # the rest of the load, bounded by the duration
            time.sleep(0.2)
        stop.set()
        seconds = int(time.monotonic() - t0) + 1
        for t in producers:
            t.join(10)
        for t in producers:
            t.flush(FLUSH_TIMEOUT_S)
        if txn_thread is not None:
            txn_thread.join(150)  # its last transaction: at most a commit's attempts
            txn_thread.close()
        monitor.join(5)
        wait_recovered(cluster, 30, topics=topics)
        consumed = {p: [(name, int(n)) for name, _, n in (v.rpartition(":") for v in values)]
                    for p, values in consume_to_end(cluster.bootstrap, TOPIC, args.partitions).items()}
        verdicts = validate([t.run_ for t in producers], consumed)
        txn = None
        if txn_thread is not None:
            txn = validate_transactions(txn_thread.run_, consume_to_end(cluster.bootstrap, TXN_TOPIC, args.partitions,
                                                                         read_committed=True))
        verdict = write_report(root, args, [t.run_ for t in producers], events, monitor.samples, verdicts, t0,
                               seconds, txn_thread.run_ if txn_thread else None, txn)
        print((root / "report.md").read_text())
        print(f"report: {root / 'report.md'}")
        return 0 if verdict == "PASS" else 1
    finally:
        stop.set()
        if txn_thread is not None and txn_thread.is_alive():
            txn_thread.join(150)  # its transaction ends before its producer is closed under it
        for t in producers + ([txn_thread] if txn_thread else []):
            try:
                t.close()
            except Exception:
                pass
        cluster.stop()


def main(argv=None) -> int:
    return run(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())

