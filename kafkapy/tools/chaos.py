"""``kafkapy-chaos``: faults against a local cluster under load, and a report.

Starts ZooKeeper and ``--brokers`` brokers as ``kafkapy-local-cluster`` does
(its ``start_zookeeper`` and ``broker_argv``), creates one topic (RF 3,
``min.insync.replicas=2``), and runs one idempotent ``acks=all`` producer per
``--clients`` entry (confluent-kafka, kafka-python, kafkapy's own client), each
sending numbered values ``<client>:<n>`` to partition ``n % partitions`` at
``--rate`` records/s. Every ``--interval`` seconds it injects the next fault of
``--faults`` (a seeded shuffle, repeated), waits for the cluster to recover
(every broker in Metadata, every ISR full; bounded), and records what it did:

* ``leader-kill``: SIGKILL a partition leader's process group, restart it after
  the session timeout;
* ``leader-pause`` / ``follower-pause`` / ``controller-pause``: SIGSTOP the
  broker past the session timeout and ``replica.lag.time.max.ms``, then SIGCONT;
* ``double-kill``: SIGKILL a leader, then the leader elected after it, restart
  both (two failures in quick succession; unclean election stays off);
* ``zookeeper-restart``: SIGKILL ZooKeeper and start it again at once;
* ``zookeeper-pause``: SIGSTOP ZooKeeper past the session timeout (every
  session expires), then SIGCONT.

A monitor samples Metadata every second (leaders, ISR sizes). At the end the
producers flush, a consumer reads every partition to its high watermark and
the run is validated as Kafka's system tests do: acknowledged ⊆ consumed, no
value twice, each client's values in send order within a partition. The
report (``report.md``, ``timeline.png`` with matplotlib, ``run.json``) gives
the verdict, the fault table and a timeline of throughput, errors and
leadership changes. Exit code 0 when the verdict is PASS, 1 otherwise.

Needs the ``chaos`` extra (confluent-kafka for the monitor and the validating
consumer, kafka-python if chosen, matplotlib for the plot) and Debian's
ZooKeeper. Ends only the processes it started, by their process groups.
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
from kafkapy.tools.local_cluster import CHROOT, _spawn, _stop, broker_argv, start_zookeeper

TOPIC = "chaos"
FAULTS = ("leader-kill", "leader-pause", "follower-pause", "controller-pause", "double-kill",
          "zookeeper-restart", "zookeeper-pause")
CLIENTS = ("confluent", "kafka-python", "kafkapy")
# How long recovery may take before the run says so and goes on (several
# session timeouts on a loaded 2-core box).
RECOVERY_TIMEOUT_S = 90.0
FLUSH_TIMEOUT_S = 90.0
CONSUME_TIMEOUT_S = 120.0
# librdkafka's own log lines (connection refused while a broker is down) go to
# clients.log with the Python clients' warnings, not to the terminal.
_RDKAFKA_LOG = logging.getLogger("librdkafka")


def _parse(argv):
    p = parser("kafkapy-chaos", "Run faults against a local kafkapy cluster under load and write a report.")
    p.add_argument("--duration", type=float, default=180.0, help="seconds of load (default 180)")
    p.add_argument("--clients", default="confluent,kafka-python,kafkapy",
                   help=f"comma-separated producers, each idempotent acks=all: {', '.join(CLIENTS)}")
    p.add_argument("--rate", type=float, default=200.0, help="records/s per client (default 200)")
    p.add_argument("--faults", default=",".join(FAULTS), help="comma-separated faults (default: all)")
    p.add_argument("--interval", type=float, default=20.0, help="seconds between fault starts (default 20)")
    p.add_argument("--seed", type=int, default=None, help="seed of the fault order (default: random)")
    p.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--dir", default="chaos-run", help="cluster data and the report (default ./chaos-run)")
    p.add_argument("--config", default="config/server.properties")
    p.add_argument("--base-port", type=int, default=19092)
    p.add_argument("--zookeeper-port", type=int, default=12181)
    p.add_argument("--session-timeout-ms", type=int, default=6000,
                   help="zookeeper.session.timeout.ms of the brokers (default 6000)")
    args = p.parse_args(argv)
    args.client_list = [c.strip() for c in args.clients.split(",") if c.strip()]
    args.fault_list = [f.strip() for f in args.faults.split(",") if f.strip()]
    for c in args.client_list:
        if c not in CLIENTS:
            raise ToolError(f"unknown client {c!r} (one of {', '.join(CLIENTS)})")
    for f in args.fault_list:
        if f not in FAULTS:
            raise ToolError(f"unknown fault {f!r} (one of {', '.join(FAULTS)})")
    if not 3 <= args.brokers <= 9:
        raise ToolError("--brokers must be between 3 and 9 (RF 3 topic)")
    if args.duration < 30 or args.interval < 5:
        raise ToolError("--duration must be at least 30 s and --interval at least 5 s")
    if not os.path.exists(args.config):
        raise ToolError(f"no such config file: {args.config}")
    return args


# -- the cluster ----------------------------------------------------------------------------------

class ChaosCluster:
    """ZooKeeper and the brokers, as processes this run started (each its own
    process group: signals go to the group, so a broker's children stop too)."""

    def __init__(self, args, root: Path):
        self.args = args
        self.root = root
        self.connect = f"127.0.0.1:{args.zookeeper_port}{CHROOT}"
        self.zk = None
        self.procs: dict = {}  # broker id -> Popen
        self.ports = {i: args.base_port + i - 1 for i in range(1, args.brokers + 1)}
        self.overrides = [f"zookeeper.session.timeout.ms={args.session_timeout_ms}",
                          "replica.lag.time.max.ms=4000", "offsets.topic.num.partitions=6",
                          "unclean.leader.election.enable=false", "controlled.shutdown.retry.backoff.ms=200"]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def start(self) -> None:
        self.zk = self._start_zookeeper()
        for i in self.ports:
            self.start_broker(i)

    def start_broker(self, broker_id: int) -> None:
        log_dir = self.root / f"broker-{broker_id}"
        log_dir.mkdir(parents=True, exist_ok=True)
        argv = broker_argv(self.args.config, broker_id, self.ports[broker_id], log_dir, self.connect,
                           self.overrides)
        self.procs[broker_id] = _spawn(argv, log_dir / "server.log")

    def signal_broker(self, broker_id: int, sig) -> None:
        proc = self.procs[broker_id]
        if proc.poll() is None:
            os.killpg(proc.pid, sig)

    def kill_broker(self, broker_id: int) -> None:
        self.signal_broker(broker_id, signal.SIGKILL)
        self.procs[broker_id].wait(30)

    def zookeeper_signal(self, sig) -> None:
        if self.zk is not None and self.zk.poll() is None:
            os.killpg(self.zk.pid, sig)

    def restart_zookeeper(self) -> None:
        self.zookeeper_signal(signal.SIGKILL)
        self.zk.wait(30)
        self.zk = self._start_zookeeper()

    def _start_zookeeper(self):
        """The one standalone ZooKeeper (in ``<dir>/zookeeper``) this run bounces."""
        ((_name, proc, _port),) = start_zookeeper(self.root, self.args.zookeeper_port)
        return proc

    def stop(self) -> None:
        for proc in list(self.procs.values()) + ([self.zk] if self.zk else []):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGCONT)  # a paused one must see its SIGTERM
                except ProcessLookupError:
                    pass
        _stop([(f"broker {i}", p) for i, p in self.procs.items()])
        if self.zk is not None:
            _stop([("zookeeper", self.zk)])


# -- what the cluster reports (confluent-kafka's AdminClient) --------------------------------------

def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, "logger": _RDKAFKA_LOG})


def cluster_view(bootstrap: str) -> dict:
    """``{"brokers": set, "controller": id, "leaders": {p: id}, "isr": {p: n}}`` from Metadata."""
    md = _admin(bootstrap).list_topics(timeout=5)
    t = md.topics.get(TOPIC)
    parts = t.partitions.values() if t is not None and t.error is None else ()
    return {"brokers": set(md.brokers), "controller": md.controller_id,
            "leaders": {p.id: p.leader for p in parts}, "isr": {p.id: len(p.isrs) for p in parts}}


def wait_recovered(cluster: ChaosCluster, timeout_s: float = RECOVERY_TIMEOUT_S):
    """Seconds until every broker is in Metadata and every ISR is full, or None."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:  # bounded by timeout_s
        try:
            v = cluster_view(cluster.bootstrap)
            if (v["brokers"] == set(cluster.ports) and v["controller"] in v["brokers"] and v["isr"]
                    and all(n == 3 for n in v["isr"].values()) and all(x >= 0 for x in v["leaders"].values())):
                return time.monotonic() - began
        except Exception:  # a broker restarting: look again
            pass
        time.sleep(0.5)
    return None


def wait_leader_other_than(cluster: ChaosCluster, partition: int, excluded, timeout_s: float):
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:  # bounded by timeout_s
        try:
            leader = cluster_view(cluster.bootstrap)["leaders"].get(partition, -1)
            if leader not in excluded and leader >= 0:
                return leader
        except Exception:
            pass
        time.sleep(0.3)
    return None


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
                      "socket.timeout.ms": 8000, "client.id": "chaos-confluent", "logger": _RDKAFKA_LOG})

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

@dataclass
class FaultRecord:
    kind: str
    target: str
    started: float  # seconds since the load started
    ended: float = 0.0
    recovered_s: float | None = None
    note: str = ""


def _pause_s(args) -> float:
    """Past the session timeout and replica.lag.time.max.ms (4 s), with a margin."""
    return max(args.session_timeout_ms / 1000, 4.0) * 1.5 + 2


def inject(kind: str, cluster: ChaosCluster, rng: random.Random, t0: float) -> FaultRecord:
    args = cluster.args
    view = cluster_view(cluster.bootstrap)
    leaders = view["leaders"]
    partition = rng.choice(sorted(leaders)) if leaders else 0
    rec = FaultRecord(kind, "", time.monotonic() - t0)
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
        rec.target = "ZooKeeper (SIGKILL, start)"
        cluster.restart_zookeeper()
    elif kind == "zookeeper-pause":
        rec.target = "ZooKeeper (SIGSTOP)"
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

def consume_all(bootstrap: str, partitions: int, timeout_s: float = CONSUME_TIMEOUT_S) -> dict:
    """``{partition: [(client, n), ...] in offset order}`` up to each high watermark."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-validate-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "logger": _RDKAFKA_LOG})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=15)[1] for p in range(partitions)}
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        out = {p: [] for p in range(partitions)}
        pos = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        while any(pos[p] < ends[p] for p in ends) and time.monotonic() < deadline:  # bounded
            msg = c.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            name, _, n = msg.value().decode().rpartition(":")
            out[msg.partition()].append((name, int(n)))
            pos[msg.partition()] = msg.offset() + 1
        if any(pos[p] < ends[p] for p in ends):
            raise ToolError(f"could not consume to the end in {timeout_s:.0f} s: {pos} of {ends}")
        return out
    finally:
        c.close()


def validate(runs, consumed: dict) -> dict:
    """Per client: acknowledged, lost (acknowledged, not consumed), duplicates, out of order."""
    result = {}
    for r in runs:
        lost = dup = disorder = 0
        for p, acked in r.acked.items():
            got = [n for name, n in consumed.get(p, []) if name == r.name]
            seen = set(got)
            dup += len(got) - len(seen)
            lost += len(set(acked) - seen)
            wanted = set(acked)
            order = [n for n in got if n in wanted]
            disorder += sum(1 for a, b in zip(order, order[1:]) if b < a)
        result[r.name] = {"sent": r.sent, "acknowledged": sum(len(v) for v in r.acked.values()),
                          "errors": len(r.errors), "lost": lost, "duplicates": dup, "out_of_order": disorder}
    return result


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


def plot(path: Path, runs, faults, samples, t0: float, seconds: int) -> bool:
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
    for f in faults:
        for ax in (ax1, ax2, ax3):
            ax.axvspan(f.started, max(f.ended, f.started + 0.5), color="orange", alpha=0.25)
        ax1.annotate(f.kind, (f.started, 0), xytext=(2, 2), textcoords="offset points", rotation=90,
                     fontsize=7, va="bottom")
    ax1.set_ylabel("acks/s")
    ax2.set_ylabel("errors/s")
    ax3.set_ylabel("leader changes")
    ax3.set_xlabel("seconds since the load started (orange: a fault being injected)")
    ax1.legend(loc="upper right", fontsize=8)
    ax1.set_title("kafkapy-chaos timeline")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def write_report(out: Path, args, runs, faults, samples, verdicts, t0: float, seconds: int) -> str:
    ok = all(v["lost"] == 0 and v["duplicates"] == 0 and v["out_of_order"] == 0 for v in verdicts.values())
    plotted = plot(out / "timeline.png", runs, faults, samples, t0, seconds)
    changes = sum(n for _, n in leadership_changes(samples))
    counts: dict = {}
    for f in faults:
        counts[f.kind] = counts.get(f.kind, 0) + 1
    lines = [f"# kafkapy-chaos report: {'PASS' if ok else 'FAIL'}", "",
             f"{args.brokers} brokers, topic `{TOPIC}` ({args.partitions} partitions, RF 3, "
             f"min.insync.replicas=2), {seconds} s of load, clients {', '.join(args.client_list)} "
             f"(idempotent, acks=all, {args.rate:g} records/s each), session timeout {args.session_timeout_ms} ms, "
             f"seed {args.seed}.", "",
             "## Verdict (acknowledged ⊆ consumed, no duplicates, per-partition order)", "",
             "| client | sent | acknowledged | delivery errors | lost | duplicates | out of order |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, v in verdicts.items():
        lines.append(f"| {name} | {v['sent']} | {v['acknowledged']} | {v['errors']} | {v['lost']} | "
                     f"{v['duplicates']} | {v['out_of_order']} |")
    lines += ["", f"Faults injected: {len(faults)} ("
              + ", ".join(f"{k} ×{n}" for k, n in sorted(counts.items())) + f"); leadership changes seen: {changes}.",
              "", "![timeline](timeline.png)" if plotted else "(no plot: install matplotlib, `pip install kafkapy[chaos]`)",
              "", "## Faults", "", "| start s | end s | fault | target | recovered after s | note |",
              "|---:|---:|---|---|---:|---|"]
    for f in faults:
        rec = "not within %d s" % RECOVERY_TIMEOUT_S if f.recovered_s is None else f"{f.recovered_s:.1f}"
        lines.append(f"| {f.started:.1f} | {f.ended:.1f} | {f.kind} | {f.target} | {rec} | {f.note} |")
    errors = [(r.name, t - t0, m) for r in runs for t, m in r.errors]
    if errors:
        lines += ["", "## First delivery errors", ""]
        lines += [f"- {t:.1f} s {name}: {m}" for name, t, m in sorted(errors, key=lambda e: e[1])[:10]]
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    (out / "run.json").write_text(json.dumps({
        "verdict": "PASS" if ok else "FAIL", "clients": verdicts, "seconds": seconds,
        "faults": [f.__dict__ for f in faults], "leadership_changes": changes}, indent=2))
    return "PASS" if ok else "FAIL"


# -- the run --------------------------------------------------------------------------------------

def _create_topic(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    admin.create_topics([NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[TOPIC].result(timeout=60)


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
    producers, faults = [], []
    try:
        print(f"starting ZooKeeper and {args.brokers} brokers in {root}", flush=True)
        cluster.start()
        if wait_recovered_brokers(cluster) is None:
            raise ToolError(f"the cluster did not come up; see {root}/broker-*/server.log")
        _create_topic(cluster.bootstrap, args.partitions)
        if wait_recovered(cluster) is None:
            raise ToolError("the topic's partitions were not led with full ISRs in time")
        producers = [ProducerThread(kind, cluster.bootstrap, args.rate, args.partitions, stop)
                     for kind in args.client_list]
        t0 = time.monotonic()
        monitor = Monitor(cluster.bootstrap, t0, stop)
        for t in producers + [monitor]:
            t.start()
        order: list = []
        next_fault = t0 + min(10.0, args.interval)  # a calm start, then a fault every interval
        end = t0 + args.duration
        while time.monotonic() < end:  # bounded by the duration
            if time.monotonic() >= next_fault and end - time.monotonic() > 10:
                if not order:
                    order = list(args.fault_list)
                    rng.shuffle(order)
                kind = order.pop()
                print(f"{time.monotonic() - t0:6.1f} s  injecting {kind}", flush=True)
                rec = inject(kind, cluster, rng, t0)
                rec.recovered_s = wait_recovered(cluster)
                faults.append(rec)
                print(f"{time.monotonic() - t0:6.1f} s  {kind} on {rec.target}: recovered after "
                      f"{'-' if rec.recovered_s is None else f'{rec.recovered_s:.1f} s'}", flush=True)
                next_fault = max(next_fault + args.interval, time.monotonic() + 5)
            time.sleep(0.2)
        stop.set()
        seconds = int(time.monotonic() - t0) + 1
        for t in producers:
            t.join(10)
        for t in producers:
            t.flush(FLUSH_TIMEOUT_S)
        monitor.join(5)
        wait_recovered(cluster, 30)
        consumed = consume_all(cluster.bootstrap, args.partitions)
        verdicts = validate([t.run_ for t in producers], consumed)
        verdict = write_report(root, args, [t.run_ for t in producers], faults, monitor.samples, verdicts, t0,
                               seconds)
        print((root / "report.md").read_text())
        print(f"report: {root / 'report.md'}")
        return 0 if verdict == "PASS" else 1
    finally:
        stop.set()
        for t in producers:
            try:
                t.close()
            except Exception:
                pass
        cluster.stop()


def wait_recovered_brokers(cluster: ChaosCluster, timeout_s: float = 60.0):
    """Seconds until every broker is in Metadata with a controller, or None."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:  # bounded by timeout_s
        try:
            v = cluster_view(cluster.bootstrap)
            if v["brokers"] == set(cluster.ports) and v["controller"] in v["brokers"]:
                return time.monotonic() - began
        except Exception:
            pass
        if any(p.poll() is not None for p in cluster.procs.values()):
            return None
        time.sleep(0.5)
    return None


def main(argv=None) -> int:
    return run(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())

