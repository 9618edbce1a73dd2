"""The processes a ``kafkapy-chaos`` run starts, and what the cluster reports.

``ChaosCluster``: ZooKeeper (one server, or an ensemble of ``--zookeeper-nodes``
as ``kafkapy-local-cluster`` starts it) and the brokers, each its own process
group, ended by this run only. The views below read the cluster as a client
does (confluent-kafka's AdminClient, Metadata) and wait, bounded, for it to be
whole again; ``consume_to_end`` reads a topic to its end for validation.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from pathlib import Path

from kafkapy.tools import zookeeper_server
from kafkapy.tools._cli import ToolError
from kafkapy.tools.local_cluster import CHROOT, _spawn, _stop, broker_argv, start_zookeeper

TOPIC = "chaos"
TXN_TOPIC = "chaos-txn"
REPLICATION_FACTOR = 3
# How long recovery may take before the run says so and goes on (several
# session timeouts on a loaded 2-core box).
RECOVERY_TIMEOUT_S = 90.0
CONSUME_TIMEOUT_S = 120.0  # without progress
CONSUME_TIMEOUT_FACTOR = 10  # the whole consume's bound, in CONSUME_TIMEOUT_S
CONSUME_BATCH = 1000  # messages a poll returns at most: positions are read once per batch
# A broker's SIGTERM shutdown (controlled shutdown, then every log flushed);
# past this it is killed and the restart counted unclean.
CLEAN_STOP_TIMEOUT_S = 60.0
# librdkafka's own log lines (connection refused while a broker is down) go to
# clients.log with the Python clients' warnings, not to the terminal.
RDKAFKA_LOG = logging.getLogger("librdkafka")


class ChaosCluster:
    """ZooKeeper and the brokers, as processes this run started (each its own
    process group: signals go to the group, so a broker's children stop too).
    Owned by the runner's main thread; the operations and faults call it from there."""

    def __init__(self, args, root: Path):
        self.args = args
        self.root = root
        nodes = args.zookeeper_nodes
        self.zk_ports = [args.zookeeper_port + n for n in range(nodes)]
        self.connect = ",".join(f"127.0.0.1:{p}" for p in self.zk_ports) + CHROOT
        self.zks: list = []  # [(name, Popen, port)] in node order
        self.procs: dict = {}  # broker id -> Popen
        self.ports = {i: args.base_port + i - 1 for i in range(1, args.brokers + 1)}
        # The internal topics replicated as the client topics are: the transactional
        # workload's coordinator must survive a broker's loss too.
        self.overrides = [f"zookeeper.session.timeout.ms={args.session_timeout_ms}",
                          "replica.lag.time.max.ms=4000", "offsets.topic.num.partitions=6",
                          "offsets.topic.replication.factor=3", "transaction.state.log.num.partitions=6",
                          "transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2",
                          "unclean.leader.election.enable=false", "controlled.shutdown.retry.backoff.ms=200",
                          "auto.create.topics.enable=false"]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def start(self) -> None:
        self.start_zookeeper()
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

    def stop_broker_cleanly(self, broker_id: int) -> tuple:
        """SIGTERM to the broker (it shuts down as Kafka's does: controlled
        shutdown, then its logs); ``(seconds, exit code)``, the code -9 when it
        had to be killed after CLEAN_STOP_TIMEOUT_S."""
        proc = self.procs[broker_id]
        began = time.monotonic()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(CLEAN_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill_broker(broker_id)
            code = -9
        return time.monotonic() - began, code

    def zookeeper_signal(self, sig, node: int | None = None) -> None:
        """``sig`` to one ensemble node (1-based) or, without ``node``, to all."""
        for i, (_name, proc, _port) in enumerate(self.zks, 1):
            if (node is None or node == i) and proc.poll() is None:
                os.killpg(proc.pid, sig)

    def restart_zookeeper(self) -> None:
        """Every node SIGKILLed, then all started again (the ensemble elects anew)."""
        self.zookeeper_signal(signal.SIGKILL)
        for _name, proc, _port in self.zks:
            proc.wait(30)
        self.start_zookeeper()

    def start_zookeeper(self) -> None:
        self.zks = start_zookeeper(self.root, self.args.zookeeper_port, self.args.zookeeper_nodes)

    def zookeeper_mode(self, node: int) -> str:
        """``leader``, ``follower``, ``standalone`` or ``down`` from the node's ``srvr``."""
        try:
            text = zookeeper_server.four_letter_word(self.zk_ports[node - 1], "srvr", timeout_s=1.0)
        except OSError:
            return "down"
        mode = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Mode:")]
        return mode[0] if mode else "down"

    def bounce_zookeeper_node(self, node: int, down_s: float, timeout_s: float = 60.0) -> float | None:
        """SIGTERM ensemble node ``node``, start it again after ``down_s``;
        seconds until it serves again (in the quorum), or None."""
        name, proc, port = self.zks[node - 1]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        time.sleep(down_s)
        zk_dir = self.root / f"zookeeper-{node}"
        began = time.monotonic()
        proc = _spawn(zookeeper_server.argv(zk_dir / "zoo.cfg"), zk_dir / "zookeeper.log")
        self.zks[node - 1] = (name, proc, port)
        while time.monotonic() - began < timeout_s:  # bounded by timeout_s
            if zookeeper_server.serving(port):
                return time.monotonic() - began
            if proc.poll() is not None:
                return None
            time.sleep(0.2)
        return None

    def stop(self) -> None:
        zks = [proc for _name, proc, _port in self.zks]
        for proc in list(self.procs.values()) + zks:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGCONT)  # a paused one must see its SIGTERM
                except ProcessLookupError:
                    pass
        _stop([(f"broker {i}", p) for i, p in self.procs.items()])
        _stop([(name, p) for name, p, _port in self.zks])


# -- what the cluster reports (confluent-kafka's AdminClient) --------------------------------------

def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, "logger": RDKAFKA_LOG})


def cluster_view(bootstrap: str, topic: str = TOPIC) -> dict:
    """``{"brokers": set, "controller": id, "leaders": {p: id}, "isr": {p: n},
    "replicas": {p: [ids]}, "topics": set}`` from Metadata."""
    md = admin(bootstrap).list_topics(timeout=5)
    t = md.topics.get(topic)
    parts = t.partitions.values() if t is not None and t.error is None else ()
    return {"brokers": set(md.brokers), "controller": md.controller_id, "topics": set(md.topics),
            "leaders": {p.id: p.leader for p in parts}, "isr": {p.id: len(p.isrs) for p in parts},
            "replicas": {p.id: list(p.replicas) for p in parts}}


def answered_view(bootstrap: str, topic: str = TOPIC, timeout_s: float = 30.0) -> dict:
    """``cluster_view`` once Metadata answers (a loaded box may miss one 5 s
    call right after a fault); the last error after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:  # bounded by the deadline
        try:
            return cluster_view(bootstrap, topic)
        except Exception:
            if time.monotonic() >= deadline:
                raise
        time.sleep(1.0)


def wait_recovered(cluster: ChaosCluster, timeout_s: float = RECOVERY_TIMEOUT_S, topics=(TOPIC,)):
    """Seconds until every broker is in Metadata and every ISR of ``topics`` is full, or None."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:  # bounded by timeout_s
        try:
            if all(_whole(cluster, cluster_view(cluster.bootstrap, t)) for t in topics):
                return time.monotonic() - began
        except Exception:  # a broker restarting: look again
            pass
        time.sleep(0.5)
    return None


def _whole(cluster: ChaosCluster, v: dict) -> bool:
    return (v["brokers"] == set(cluster.ports) and v["controller"] in v["brokers"] and bool(v["isr"])
            and all(n == REPLICATION_FACTOR for n in v["isr"].values())
            and all(x >= 0 for x in v["leaders"].values()))


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


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)  # held until the result: a destroyed client fails its futures (_DESTROY)
    client.create_topics([NewTopic(name, partitions, REPLICATION_FACTOR, config={"min.insync.replicas": "2"})],
                         operation_timeout=30)[name].result(timeout=60)


def consume_to_end(bootstrap: str, topic: str, partitions: int, read_committed: bool = False,
                   timeout_s: float = CONSUME_TIMEOUT_S) -> dict:
    """``{partition: [value, ...] in offset order}`` up to each high watermark.

    Done when the consumer's position (which steps over transaction markers and
    aborted records under read_committed) reaches the high watermark read first.
    Fails when no partition's position moves for ``timeout_s`` (stuck, not
    slow: a 30-minute run's million records took longer than a fixed 120 s
    at a load average of 40), or past ``CONSUME_TIMEOUT_FACTOR`` times it."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-validate-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "logger": RDKAFKA_LOG,
                  "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(partitions)}
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        c.assign(tps)
        out = {p: [] for p in range(partitions)}
        pos = {p: 0 for p in range(partitions)}
        started = moved_at = time.monotonic()
        while any(pos[p] < ends[p] for p in ends):  # bounded: by progress, and in all
            now = time.monotonic()
            if now - moved_at > timeout_s or now - started > CONSUME_TIMEOUT_FACTOR * timeout_s:
                break
            for msg in c.consume(CONSUME_BATCH, 0.5):
                if msg.error() is None:
                    out[msg.partition()].append(msg.value().decode())
            for tp in c.position([TopicPartition(topic, p) for p in range(partitions)]):
                if tp.offset > pos[tp.partition]:
                    pos[tp.partition] = tp.offset
                    moved_at = time.monotonic()
        if any(pos[p] < ends[p] for p in ends):
            raise ToolError(f"could not consume {topic} to the end (no progress for {timeout_s:.0f} s, or "
                            f"{CONSUME_TIMEOUT_FACTOR * timeout_s:.0f} s in all): {pos} of {ends}")
        return out
    finally:
        c.close()
