"""A kafkapy cluster for system tests: a real ZooKeeper and N real brokers.

``Cluster`` starts each broker through its real entry point with
``zookeeper.connect`` (its own chroot on the given ZooKeeper), its own port
and log dir, and short session/lag timeouts so faults show within seconds.
Tests get the brokers by id, the bootstrap list, and bounded waits on what
the cluster reports through the Kafka protocol (Metadata via
confluent-kafka's AdminClient), never through broker internals.

``BackgroundProducer`` is the produce side of Kafka's produce-consume-validate
system tests: an idempotent ``acks=all`` producer in a thread sending numbered
values, recording which were acknowledged; ``consume_all`` reads a topic to
its end; ``validate`` checks acknowledged ⊆ consumed, no duplicates and
per-partition order.

Tests get a cluster in one of two forms, never by constructing ``Cluster``:
``make_cluster`` (a fixture: clusters ended after the test, each in a chroot
of its own) and ``running_cluster`` (a context manager a module-scoped
fixture uses to share one cluster among a module's tests).

Namespace mode (opt-in, the ``lab_cluster`` fixture): each broker runs
in its own network namespace that the test made, joined to a bridge in the
root namespace by a veth pair (``NetworkLab`` below); ZooKeeper and the
clients stay in the root namespace and reach the brokers through the bridge,
so a test can cut one broker off from the others and from ZooKeeper while
clients still reach it (``NetworkLab.isolate``), and heal it again.

Ownership: one ``Cluster`` per test (or module), driven by the test's thread; it ends
only the processes it started (each ``BrokerProcess`` by its PID).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Mapping, Optional

import pytest

from .broker import BrokerProcess, server_start_command
from .wait import wait_for
from .zookeeper import chroot_for

# Short enough that a SIGKILLed broker's registration and leaderships move in
# seconds (Kafka's defaults are 18 s and 30 s).
SESSION_TIMEOUT_MS = 4000
REPLICA_LAG_TIME_MAX_MS = 3000
LAB_LOCK_PATH = "/tmp/kafkapy-network-lab.lock"


class NetworkLab:
    """Network namespaces for a cluster's brokers, made and removed by the test.

    In the root namespace a bridge ``kpf<x>br`` holds 10.213.<x>.1/24 (the
    address clients connect from: the first, primary one), 10.213.<x>.2/24
    (ZooKeeper's ``clientPortAddress``) and 10.213.<x>.3/24 (the source address
    of a client on a partition's minority side, ``PinnedClient``); broker ``i`` runs in namespace
    ``kpf<x>-b<i>`` with 10.213.<x>.<10+i>/24 on its end of a veth pair whose
    other end is in the bridge. ``<x>`` is a subnet no interface here uses
    yet. No address outside 127.0.0.0/8 and this /24 is ever used.

    With ``zookeeper_ids``, each ZooKeeper node ``j`` of an ensemble runs in a
    namespace of its own too, ``kpf<x>-z<j>`` with 10.213.<x>.<30+j>/24
    (``zookeeper_node_address``, ``zookeeper_command``), and
    ``cut_zookeeper_node(j)`` cuts it off from the other nodes, the brokers and
    the clients (``zookeeper_lab``).

    Faults: ``cut(i, peers, zookeeper)`` adds blackhole routes in broker
    ``i``'s namespace to the peers' (and ZooKeeper's, and the majority
    clients') addresses, so every packet it sends them is dropped as on a
    partitioned network (nftables, iptables and tc's drop action are not
    available in every container; routes are); a client bound to
    ``minority_client_address`` keeps reaching it. ``link_down(i)`` takes its veth
    down (cut from everything). ``heal`` undoes both. ``close`` removes the
    namespaces and the bridge, whatever state a failed test left them in."""

    def __init__(self, broker_ids=(1, 2, 3), zookeeper_ids=()):
        self.broker_ids = tuple(broker_ids)
        self.zookeeper_ids = tuple(zookeeper_ids)
        self.subnet = None
        self.routes: dict = {}  # broker id -> addresses blackholed in its namespace
        self.zookeeper_routes: dict = {}  # ZooKeeper node id -> addresses blackholed in its namespace
        self.down: set = set()
        self.made: list = []  # ("netns", name) / ("link", name): what close removes

    @staticmethod
    def unavailable() -> Optional[str]:
        """Why network namespaces cannot be made here (not root, no ``ip``), or None."""
        probe = f"kpf-probe-{os.getpid()}"
        try:
            out = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`ip netns add` cannot run: {exc}"
        if out.returncode != 0:
            return f"`ip netns add` is not permitted here: {out.stderr.strip()}"
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
        return None

    @staticmethod
    def _ip(*args, check: bool = True) -> subprocess.CompletedProcess:
        out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
        if check and out.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")
        return out

    def _free_subnet(self) -> int:
        used = self._ip("-o", "addr").stdout + self._ip("-o", "link").stdout
        start = os.getpid() % 200
        for k in range(250):  # bounded: every /24 of 10.213.0.0/16 but a few
            x = 2 + (start + k) % 250
            if f"10.213.{x}." not in used and f"kpf{x}" not in used:
                return x
        raise RuntimeError("no free 10.213.x.0/24 subnet for the network lab")

    def create(self) -> "NetworkLab":
        # Test processes running side by side (pytest-xdist workers) choose
        # and take their subnets one at a time.
        with open(LAB_LOCK_PATH, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._create()

    def _create(self) -> "NetworkLab":
        self._guard_lab_range()
        x = self.subnet = self._free_subnet()
        try:
            bridge = f"kpf{x}br"
            self._ip("link", "add", bridge, "type", "bridge")
            self.made.append(("link", bridge))
            self._ip("addr", "add", f"{self.client_address}/24", "dev", bridge)
            self._ip("addr", "add", f"{self.zookeeper_address}/24", "dev", bridge)
            self._ip("addr", "add", f"{self.minority_client_address}/24", "dev", bridge)
            self._ip("link", "set", bridge, "up")
            hosts = [(self.namespace(i), f"kpf{x}b{i}", self.address(i)) for i in self.broker_ids]
            hosts += [(self.zookeeper_namespace(j), f"kpf{x}z{j}", self.zookeeper_node_address(j))
                      for j in self.zookeeper_ids]
            for ns, veth, address in hosts:
                self._ip("netns", "add", ns)
                self.made.append(("netns", ns))
                self._ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                self.made.append(("link", veth))
                self._ip("link", "set", veth, "master", bridge, "up")
                self._ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
                self._ip("-n", ns, "link", "set", "eth0", "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def _guard_lab_range(self) -> None:
        """A blackhole route for all of 10.213.0.0/16 in the root namespace,
        added once and left in place: a lab's /24 (its bridge's connected
        route) is more specific and wins while the lab exists, and after it
        is gone a client still alive (one kept by a failed test's traceback
        redials its brokers for as long as it lives) has its packets dropped
        here instead of sent out of the default route, off the machine."""
        if "blackhole 10.213.0.0/16" not in self._ip("route", "show", "type", "blackhole").stdout:
            self._ip("route", "add", "blackhole", "10.213.0.0/16", check=False)

    def close(self) -> None:
        """Remove what ``create`` made (a namespace's veth end goes with it). Never raises."""
        for kind, name in reversed(self.made):
            if kind == "netns":
                self._ip("netns", "del", name, check=False)
            else:
                self._ip("link", "del", name, check=False)
        self.made.clear()
        self.routes.clear()
        self.zookeeper_routes.clear()
        self.down.clear()

    # -- addresses --------------------------------------------------------------------
    @property
    def client_address(self) -> str:
        return f"10.213.{self.subnet}.1"

    @property
    def zookeeper_address(self) -> str:
        return f"10.213.{self.subnet}.2"

    @property
    def minority_client_address(self) -> str:
        return f"10.213.{self.subnet}.3"

    def address(self, broker_id: int) -> str:
        return f"10.213.{self.subnet}.{10 + broker_id}"

    def namespace(self, broker_id: int) -> str:
        return f"kpf{self.subnet}-b{broker_id}"

    def zookeeper_node_address(self, node_id: int) -> str:
        return f"10.213.{self.subnet}.{30 + node_id}"

    def zookeeper_namespace(self, node_id: int) -> str:
        return f"kpf{self.subnet}-z{node_id}"

    def zookeeper_command(self, node_id: int) -> list:
        """The argv prefix that runs a ZooKeeper node inside its namespace."""
        return ["ip", "netns", "exec", self.zookeeper_namespace(node_id)]

    def command(self, broker_id: int) -> list:
        """The broker's argv prefix: the real entry point inside its namespace."""
        argv, _env = server_start_command(Path("server.properties"))
        return ["ip", "netns", "exec", self.namespace(broker_id), *argv[:-1]]

    # -- faults -------------------------------------------------------------------------
    def cut(self, broker_id: int, peers=(), zookeeper: bool = False, clients: bool = False) -> None:
        """Drop what ``broker_id`` sends to ``peers`` (and ZooKeeper, and the
        majority's clients): a partition."""
        targets = [self.address(p) for p in peers if p != broker_id]
        if zookeeper:
            targets.append(self.zookeeper_address)
        if clients:
            targets.append(self.client_address)
        self._blackhole(self.namespace(broker_id), self.routes.setdefault(broker_id, set()), targets)

    def _blackhole(self, namespace: str, held: set, targets) -> None:
        """Blackhole routes in ``namespace`` to ``targets`` not in ``held`` (then added to it)."""
        for address in targets:
            if address not in held:
                self._ip("-n", namespace, "route", "add", "blackhole", f"{address}/32")
                held.add(address)

    def isolate(self, broker_id: int) -> None:
        """Cut ``broker_id`` off from every other broker, from ZooKeeper and from
        the majority's clients; a ``PinnedClient`` on the minority side still reaches it."""
        self.cut(broker_id, self.broker_ids, zookeeper=True, clients=True)

    def cut_zookeeper_node(self, node_id: int) -> None:
        """Drop everything ZooKeeper node ``node_id`` sends to the other nodes, the
        brokers and the clients: it is cut off from all of them (their packets
        reach it, its answers and acknowledgements never leave)."""
        targets = [self.zookeeper_node_address(j) for j in self.zookeeper_ids if j != node_id]
        targets += [self.address(i) for i in self.broker_ids]
        targets += [self.client_address, self.zookeeper_address, self.minority_client_address]
        self._blackhole(self.zookeeper_namespace(node_id), self.zookeeper_routes.setdefault(node_id, set()), targets)

    def heal_zookeeper_node(self, node_id: int) -> None:
        for address in sorted(self.zookeeper_routes.pop(node_id, set())):
            self._ip("-n", self.zookeeper_namespace(node_id), "route", "del", "blackhole", f"{address}/32",
                     check=False)

    def link_down(self, broker_id: int) -> None:
        self._ip("link", "set", f"kpf{self.subnet}b{broker_id}", "down")
        self.down.add(broker_id)

    def heal(self, broker_id: Optional[int] = None) -> None:
        """Undo the cuts and downed links of one broker (or all, and every ZooKeeper node's cut)."""
        if broker_id is None:
            for j in list(self.zookeeper_routes):
                self.heal_zookeeper_node(j)
        for i in [broker_id] if broker_id is not None else list(self.broker_ids):
            for address in sorted(self.routes.pop(i, set())):
                self._ip("-n", self.namespace(i), "route", "del", "blackhole", f"{address}/32", check=False)
            if i in self.down:
                self._ip("link", "set", f"kpf{self.subnet}b{i}", "up", check=False)
                self.down.discard(i)


@pytest.fixture(scope="module")
def network_lab(tmp_path_factory):
    """``(NetworkLab, ZooKeeperProcess on its bridge)`` for a module's tests; skips
    with the reason when namespaces cannot be made here. Each test gives its
    ``Cluster(..., lab=lab)`` its own chroot and ``lab.heal()``s at its end."""
    from .zookeeper import ZooKeeperProcess, _skip_if_missing

    reason = NetworkLab.unavailable()
    if reason:
        pytest.skip(f"network-namespace fault tests need `ip netns` (root): {reason}")
    _skip_if_missing()
    lab = NetworkLab().create()
    server = None
    try:
        server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper-netns"), host=lab.zookeeper_address)
        server.start()
        yield lab, server
    finally:
        if server is not None:
            server.close()
        lab.close()


@pytest.fixture(scope="module")
def zookeeper_lab(tmp_path_factory):
    """``(NetworkLab, ZooKeeperEnsemble)`` for a module's tests: three brokers' and
    three ZooKeeper nodes' namespaces, the ensemble's members each listening on
    its own namespace's address; skips with the reason when namespaces cannot be
    made here. Each test puts its cluster on it with ``zookeeper_lab_cluster``."""
    from .zookeeper import ZooKeeperEnsemble, _skip_if_missing

    reason = NetworkLab.unavailable()
    if reason:
        pytest.skip(f"network-namespace fault tests need `ip netns` (root): {reason}")
    _skip_if_missing()
    lab = NetworkLab(zookeeper_ids=(1, 2, 3)).create()
    ensemble = None
    try:
        ensemble = ZooKeeperEnsemble(tmp_path_factory.mktemp("zk-ensemble-netns"),
                                     hosts={j: lab.zookeeper_node_address(j) for j in lab.zookeeper_ids},
                                     command_prefixes={j: lab.zookeeper_command(j) for j in lab.zookeeper_ids})
        yield lab, ensemble.start()
    finally:
        if ensemble is not None:
            ensemble.close()
        lab.close()


@pytest.fixture
def zookeeper_lab_cluster(zookeeper_lab, tmp_path, request):
    """Clusters in the ``zookeeper_lab`` brokers' namespaces on its ensemble."""
    lab, ensemble = zookeeper_lab
    yield from _made_clusters(ensemble, tmp_path, request, lab)


# Fewer __consumer_offsets partitions than Kafka's 50, so the offsets topic is
# created and elected (RF 3) within a test's time.
OFFSETS_PARTITIONS = 6


def _made_clusters(server, tmp_path, request, lab: Optional[NetworkLab] = None):
    """The fixtures' body: ``make(metrics=False, broker_ids=(1, 2, 3), start=True,
    zookeeper=None, **overrides) -> (Cluster, kazoo client on its chroot)``
    (``start=False``: the test edits the brokers' properties, then calls
    ``start()``; ``zookeeper``: a server of the test's own, from
    ``zookeeper_factory``); at teardown every cut is healed, then everything
    made is ended."""
    made = []

    def make(metrics: bool = False, broker_ids=(1, 2, 3), start: bool = True, zookeeper=None, env=None,
             **overrides):
        chroot = chroot_for(request, f"-{len(made)}")
        zk_server = zookeeper or server
        # A second cluster of the same test gets log dirs of its own.
        work_dir = tmp_path if not made else tmp_path / f"cluster-{len(made)}"
        c = Cluster(zk_server, work_dir, chroot, broker_ids=broker_ids, lab=lab, metrics=metrics, env=env,
                    overrides={"offsets.topic.num.partitions": OFFSETS_PARTITIONS, **overrides})
        zk = zk_server.client(chroot)
        made.append((c, zk))
        if start:
            c.start()
        return c, zk

    try:
        yield make
    finally:
        if lab is not None:
            lab.heal()
        for c, zk in made:
            c.close()
            zk.stop()
            zk.close()


@contextlib.contextmanager
def running_cluster(server, work_dir, chroot: str, overrides=None, before_start=None, **kwargs):
    """A cluster shared by one test module (the module-scope form; ``make_cluster``
    is the per-test one): ``with running_cluster(...) as (cluster, zk)`` gives one
    started ``Cluster`` (``kwargs``: ``broker_ids=``, ``metrics=``) and a kazoo
    client on its chroot, ended at exit; ``before_start(cluster)`` runs before it
    starts (e.g. to give each broker a second listener)."""
    c = Cluster(server, work_dir, chroot, overrides=overrides, **kwargs)
    zk = server.client(c.chroot)
    try:
        if before_start is not None:
            before_start(c)
        c.start()
        yield c, zk
    finally:
        c.close()
        zk.stop()
        zk.close()


@pytest.fixture
def make_cluster(zookeeper, tmp_path, request):
    """Clusters on the module's ZooKeeper (``support.zookeeper.zookeeper``), on 127.0.0.1."""
    yield from _made_clusters(zookeeper, tmp_path, request)


@pytest.fixture
def lab_cluster(network_lab, tmp_path, request):
    """Clusters in the module's ``network_lab`` namespaces."""
    lab, server = network_lab
    yield from _made_clusters(server, tmp_path, request, lab)


class Cluster:
    def __init__(self, zookeeper, work_dir: Path, chroot: str, broker_ids=(1, 2, 3),
                 overrides: Optional[Mapping[str, object]] = None, lab: Optional[NetworkLab] = None,
                 metrics: bool = False, env: Optional[Mapping[str, str]] = None):
        self.zookeeper = zookeeper
        self.lab = lab
        self.chroot = chroot
        base = {"zookeeper.connect": zookeeper.connect_string(chroot),
                "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                "replica.lag.time.max.ms": REPLICA_LAG_TIME_MAX_MS,
                "num.partitions": 1,
                "offsets.topic.replication.factor": min(3, len(broker_ids)),
                "default.replication.factor": 1}
        base.update(overrides or {})
        if lab is None:
            self.brokers = {i: BrokerProcess(Path(work_dir) / f"broker-{i}", {**base, "broker.id": i}, env=env)
                            for i in broker_ids}
        else:  # each in its namespace, on its own address (one port for all)
            self.brokers = {i: BrokerProcess(Path(work_dir) / f"broker-{i}", {**base, "broker.id": i}, port=9092,
                                             host=lab.address(i), command=lab.command(i), env=env)
                            for i in broker_ids}
        # metrics: each broker's /metrics on a port of its own (``scrape_metrics``).
        self.metrics_ports: dict = {}
        if metrics:
            from .broker import free_port, write_properties

            for i, b in self.brokers.items():
                self.metrics_ports[i] = int(free_port())
                b.props["prometheus.port"] = str(self.metrics_ports[i])
                write_properties(b.props_path, b.props)

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> "Cluster":
        for b in self.brokers.values():  # all at once: each start is mostly waiting
            b.launch()
        for b in self.brokers.values():
            b.finish_start()
        self.wait_brokers(set(self.brokers))
        return self

    def close(self) -> None:
        for b in self.brokers.values():
            if b.running:  # a broker a test left SIGSTOPped is thawed: a frozen one cannot stop
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(b.proc.pid, signal.SIGCONT)
            b.close()

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.running())

    def running(self) -> list:
        return [b for b in self.brokers.values() if b.running]

    # -- what the cluster reports ---------------------------------------------------
    def admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def metadata(self, topic: Optional[str] = None):
        return self.admin().list_topics(topic=topic, timeout=10)

    def broker_metadata(self, broker: BrokerProcess, topics=None, timeout_s: float = 5.0):
        """Metadata (v4; ``topics`` None: all) as ``broker`` itself answers it,
        on a connection of its own. Brokers learn the cluster from the
        controller's UpdateMetadata one by one, so one broker's answer says
        nothing about the others'. Not an AdminClient bootstrapped to the
        broker alone: librdkafka sends ``list_topics`` to any broker it is
        connected to, and it connects to the brokers it learns of at once (of
        45 such calls, 13 were answered by a learned broker, 8 of them another
        one than the bootstrap)."""
        from .raw_api import call

        return call(broker.bootstrap, 3, 4, {"topics": None if topics is None else [{"name": t} for t in topics],
                                              "allow_auto_topic_creation": False}, timeout_s=timeout_s)

    def broker_partitions(self, broker: BrokerProcess, topic: str) -> dict:
        """``partitions(topic)`` as ``broker`` itself answers it ({} while it does not know the topic)."""
        t = next((t for t in self.broker_metadata(broker, [topic]).topics if t.name == topic), None)
        if t is None or t.error_code != 0:
            return {}
        return {int(p.partition_index): (int(p.leader_id), tuple(map(int, p.replica_nodes)), tuple(map(int, p.isr_nodes)))
                for p in sorted(t.partitions, key=lambda p: p.partition_index)}

    def wait_brokers(self, ids: set, timeout_s: float = 30.0):
        """Until Metadata from every running broker lists exactly ``ids`` and a controller."""
        def ok():
            return all({int(x.node_id) for x in md.brokers} == ids and md.controller_id in ids
                       for md in (self.broker_metadata(b) for b in self.running()))

        return wait_for(ok, timeout_s, f"brokers {sorted(ids)} in every broker's metadata")

    def create_topic(self, name: str, partitions: int, replication_factor: int, config=None,
                     timeout_s: float = 30.0):
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # kept until the future resolves (destroying it fails the future)
        futures = admin.create_topics([NewTopic(name, partitions, replication_factor,
                                                config=dict(config or {}))], operation_timeout=10)
        futures[name].result(timeout=30)
        return self.wait_topic_ready(name, partitions, replication_factor, timeout_s)

    def partitions(self, topic: str) -> dict:
        """``{partition: (leader, replicas, isr)}`` as Metadata answers it."""
        t = self.metadata(topic).topics[topic]
        if t.error is not None:
            return {}
        return {p.id: (p.leader, tuple(p.replicas), tuple(p.isrs)) for p in t.partitions.values()}

    def wait_topic_ready(self, topic: str, partitions: int, replication_factor: int,
                         timeout_s: float = 30.0) -> dict:
        """Until every running broker's own Metadata shows ``topic`` with
        ``partitions`` partitions, each with a leader, ``replication_factor``
        replicas and a full ISR, and they all name the same leaders; returns
        ``partitions()`` as they show it. A client's next request may go to
        any of them: one broker knowing the topic is not enough."""
        seen: dict = {}  # broker id -> its last answer (for the failure message)

        def ok():
            seen.clear()
            for i, b in self.brokers.items():
                if not b.running:
                    continue
                parts = seen[i] = self.broker_partitions(b, topic)
                if len(parts) != partitions or not all(
                        leader >= 0 and len(replicas) == replication_factor and len(isr) == replication_factor
                        for leader, replicas, isr in parts.values()):
                    return None
            leaders = {tuple(leader for _p, (leader, _r, _i) in sorted(parts.items())) for parts in seen.values()}
            return len(leaders) == 1 and next(iter(seen.values()))

        try:
            return wait_for(ok, timeout_s, f"topic {topic} led with full ISRs in every running broker's metadata")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {{broker: {{partition: (leader, replicas, isr)}}}} {seen}") from None

    def leader_of(self, topic: str, partition: int) -> int:
        return self.partitions(topic)[partition][0]


class BackgroundProducer:
    """An idempotent acks=all producer sending ``"<n>"`` values in a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate_per_s: float = 500.0,
                 max_messages: int = 100_000, config: Optional[Mapping[str, object]] = None,
                 first_value: int = 0):
        from confluent_kafka import Producer

        conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                "linger.ms": 5, "message.timeout.ms": 60000, "retry.backoff.ms": 100}
        conf.update(config or {})
        self.producer = Producer(conf)
        self.topic = topic
        self.partitions = partitions
        self.rate_per_s = rate_per_s
        self.max_messages = max_messages
        self.acked: dict[int, list[int]] = {}  # partition -> values in ack order
        self.errors: list[str] = []
        self.sent = 0
        self.first_value = first_value  # values are first_value + n (distinct across producers)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="background-producer", daemon=True)

    def _delivered(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.setdefault(msg.partition(), []).append(int(msg.value()))

    def _run(self):
        interval = 1.0 / self.rate_per_s
        next_at = time.monotonic()
        while not self._stop.is_set() and self.sent < self.max_messages:  # bounded by max_messages
            value = self.first_value + self.sent
            self.producer.produce(self.topic, str(value).encode(), partition=self.sent % self.partitions,
                                  on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def start(self) -> "BackgroundProducer":
        self._thread.start()
        return self

    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def halt(self) -> None:
        """Stop sending at once, without waiting for outstanding acknowledgements
        (a failing test's clean-up; ``stop`` is the checked end)."""
        self._stop.set()

    def stop(self, flush_timeout_s: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(30)
        remaining = self.producer.flush(flush_timeout_s)
        assert remaining == 0, f"{remaining} messages still unacknowledged after {flush_timeout_s} s"

    def close(self) -> None:
        """Drop what is unsent and end librdkafka's threads (its connections with
        them): a namespace test's producer must not outlive the addresses it
        uses. Closing again does nothing."""
        if self.producer is None:
            return
        self.halt()
        self._thread.join(30)
        self.producer.purge()
        self.producer.close()
        self.producer = None


def _high_watermark(consumer, tp, deadline: float) -> int:
    """The partition's high watermark, asked again (until ``deadline``) while
    its leadership is moving: a cluster that has just healed may still move
    leaders (a preferred election, a returning broker), and librdkafka's
    ``get_watermark_offsets`` gives up on the first NOT_LEADER_OR_FOLLOWER."""
    from confluent_kafka import KafkaError, KafkaException

    retriable = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                 KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT)
    while True:  # bounded by the deadline
        try:
            return consumer.get_watermark_offsets(tp, timeout=10)[1]
        except KafkaException as exc:
            if exc.args[0].code() not in retriable or time.monotonic() >= deadline:
                raise
        time.sleep(0.2)


def consume_all(bootstrap: str, topic: str, partitions: int, expected_end: Optional[dict] = None,
                timeout_s: float = 60.0) -> dict:
    """Read every partition of ``topic`` from the beginning to its high
    watermark (no group): ``{partition: [values in offset order]}``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"validate-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    deadline = time.monotonic() + timeout_s
    try:
        ends = {p: _high_watermark(consumer, TopicPartition(topic, p), deadline) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[int]] = {p: [] for p in range(partitions)}
        positions = {p: 0 for p in range(partitions)}
        while any(positions[p] < ends[p] for p in ends):  # bounded by the deadline below
            assert time.monotonic() < deadline, f"consumed {positions} of {ends} in {timeout_s} s"
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            out[msg.partition()].append(int(msg.value()))
            positions[msg.partition()] = msg.offset() + 1
        return out
    finally:
        consumer.close()


def validate(acked: dict, consumed: dict) -> None:
    """Kafka's produce-consume-validate: every acknowledged value was consumed,
    none twice, and in each partition the acknowledged ones in send order."""
    for partition, values in consumed.items():
        assert len(values) == len(set(values)), f"partition {partition}: duplicates"
    for partition, values in acked.items():
        got = consumed.get(partition, [])
        wanted = set(values)
        missing = wanted - set(got)
        assert not missing, f"partition {partition}: {len(missing)} acknowledged values lost, e.g. {sorted(missing)[:5]}"
        order = [v for v in got if v in wanted]
        assert order == sorted(order), f"partition {partition}: out of order"


# -- helpers for the fault and client system tests (tests/system/test_cluster_*.py) --

def controller_id(cluster: Cluster) -> int:
    """The controller as Metadata answers it (-1 while there is none)."""
    return cluster.metadata().controller_id


def scrape_metrics(port: int, host: str = "127.0.0.1") -> dict:
    """``{sample name: value}`` of a broker's /metrics (labelled samples summed)."""
    import re
    import urllib.request

    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)(\{[^}]*\})? ([-+0-9.e]+)$", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


def zk_controller(zk) -> Optional[tuple]:
    """``(controller broker id, controller epoch)`` from ZooKeeper, or None while there is none."""
    from kafkapy.metadata.zk import data as zk_data

    if zk.exists(zk_data.CONTROLLER_PATH) is None:
        return None
    broker_id = zk_data.decode_controller(zk.get(zk_data.CONTROLLER_PATH)[0]).broker_id
    return broker_id, zk_data.decode_controller_epoch(zk.get(zk_data.CONTROLLER_EPOCH_PATH)[0])


def progress(producer: BackgroundProducer, more: int, what: str, timeout_s: float = 30.0) -> None:
    """Until ``more`` further records are acknowledged, with no delivery error so far."""
    target = producer.acked_count() + more
    wait_for(lambda: producer.errors or producer.acked_count() >= target, timeout_s, what)
    assert producer.errors == [], producer.errors[:5]


def finish(cluster: Cluster, producer: BackgroundProducer, topic: str, partitions: int) -> dict:
    """Stop the producer, consume everything, validate; returns what was
    consumed. The producer is closed whatever happens: one left running
    would go on connecting to a namespace test's addresses after they are gone."""
    try:
        producer.stop()
        assert producer.errors == [], producer.errors[:5]
        consumed = consume_all(cluster.bootstrap, topic, partitions)
        validate(producer.acked, consumed)
        return consumed
    finally:
        producer.close()


# Three partitions, each replicated on all three brokers, each led by another.
SPREAD_3 = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]


def start_load(cluster: Cluster, topic: str, assignment=SPREAD_3, rate_per_s: float = 200.0) -> BackgroundProducer:
    """The produce side of a fault test: ``topic`` on ``assignment`` with
    min.insync.replicas=2, an idempotent acks=all ``BackgroundProducer`` on it,
    200 records acknowledged before returning. librdkafka's ``socket.timeout.ms``
    (its client-side bound on a request, 60 s by default) short, so a request
    lost with a broker or a cut is retried within seconds."""
    create_topic_assigned(cluster, topic, assignment, config={"min.insync.replicas": "2"})
    producer = BackgroundProducer(cluster.bootstrap, topic, len(assignment), rate_per_s=rate_per_s,
                                  config={"request.timeout.ms": 5000, "socket.timeout.ms": 6000}).start()
    try:
        progress(producer, 200, "200 acknowledged before the fault")
    except BaseException:
        producer.close()
        raise
    return producer


def wait_new_leader(cluster: Cluster, topic: str, partition: int, not_in, timeout_s: float = 30.0) -> int:
    """Until Metadata names a leader of ``topic-partition`` outside ``not_in`` (dead or old leaders)."""
    excluded = set(not_in) | {-1}
    return wait_for(lambda: (leader := cluster.leader_of(topic, partition)) not in excluded and leader,
                    timeout_s, f"a leader of {topic}-{partition} other than {sorted(excluded)}")


def log_batches(broker: BrokerProcess, topic: str, partition: int) -> list[bytes]:
    """Every batch of one replica's log as its bytes on disk, in offset order, read
    straight from the segment files (v2 framing: baseOffset i64, batchLength i32);
    a segment's preallocated or half-written tail is left out, and batches are
    compared across segments so where each replica rolled does not matter."""
    import struct

    directory = broker.log_dirs[0] / f"{topic}-{partition}"
    batches = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + 12 <= len(data):  # bounded by the file's size
            (batch_length,) = struct.unpack_from(">i", data, position + 8)
            if batch_length <= 0 or position + 12 + batch_length > len(data):
                break
            batches.append(data[position:position + 12 + batch_length])
            position += 12 + batch_length
    return batches


def wait_replicas_identical(cluster: Cluster, topic: str, partition: int, timeout_s: float = 30.0) -> list[bytes]:
    """Until every broker's replica of ``topic-partition`` holds the same batches
    (byte for byte); returns them."""
    def same():
        logs = [log_batches(b, topic, partition) for b in cluster.brokers.values()]
        return logs[0] if all(log == logs[0] for log in logs) and logs[0] else None

    try:
        return wait_for(same, timeout_s, f"identical replicas of {topic}-{partition}")
    except AssertionError:
        summary = {i: (len(bs := log_batches(b, topic, partition)),
                       [int.from_bytes(x[:8], "big") for x in bs[-3:]]) for i, b in cluster.brokers.items()}
        raise AssertionError(f"replicas of {topic}-{partition} differ: {{broker: (batches, last base offsets)}} "
                             f"{summary}") from None


def create_topic_assigned(cluster: Cluster, name: str, assignment: list, config=None,
                          timeout_s: float = 30.0) -> dict:
    """CreateTopics with a manual replica assignment (``[[leader, ...], ...]``: the
    first replica of each partition leads); returns ``partitions()`` once every
    partition has a leader and a full ISR."""
    from confluent_kafka.admin import NewTopic

    admin = cluster.admin()  # kept until the future resolves
    admin.create_topics([NewTopic(name, len(assignment), -1, replica_assignment=assignment, config=dict(config or {}))],
                        operation_timeout=10)[name].result(timeout=30)
    return cluster.wait_topic_ready(name, len(assignment), len(assignment[0]), timeout_s)


def zk_partition_state(zk, topic: str, partition: int) -> Optional[dict]:
    """The partition's state znode (Kafka's JSON: leader, leader_epoch, isr,
    controller_epoch) through a kazoo client on the cluster's chroot, or None."""
    import json

    from kafkapy.metadata.zk import data as zk_data

    path = zk_data.partition_state_path(topic, partition)
    if zk.exists(path) is None:
        return None
    return json.loads(zk.get(path)[0])


def wait_full_isr(cluster: Cluster, zk, topic: str, partitions: int, replication_factor: int,
                  timeout_s: float = 60.0) -> dict:
    """Until every partition's ISR is full in ZooKeeper (the controller's and the
    leaders' ISR jobs' writes) and then in Metadata. ZooKeeper first: a broker
    just restarted answers Metadata from the image it had before it died until
    the controller's UpdateMetadata reaches it (~50 ms), which may show the
    ISR it left."""
    wait_for(lambda: all((s := zk_partition_state(zk, topic, p)) and len(s["isr"]) == replication_factor
                         for p in range(partitions)),
             timeout_s, f"{topic}'s ISRs full in ZooKeeper")
    return cluster.wait_topic_ready(topic, partitions, replication_factor, timeout_s)


def group_coordinated_outside(cluster: Cluster, avoid, offsets_partitions: int, prefix: str = "group",
                              timeout_s: float = 30.0) -> tuple:
    """``(group id, coordinator id)`` for a group whose coordinator, the leader of
    its ``__consumer_offsets`` partition (Kafka's ``abs(hashCode) % partitions``),
    is not in ``avoid``. The offsets topic is created first by a FindCoordinator
    (DescribeGroups of any group) and waited for with full ISRs."""
    from kafkapy.coordinator.records import partition_for

    admin = cluster.admin()  # kept while its futures are pending
    wait_for(lambda: admin.describe_consumer_groups(["probe"])["probe"].result(timeout=10), timeout_s,
             "a first FindCoordinator")
    offsets = cluster.wait_topic_ready("__consumer_offsets", offsets_partitions, len(cluster.brokers), timeout_s)
    for group in (f"{prefix}-{i}" for i in range(1000)):  # bounded: 1000 candidates
        coordinator = offsets[partition_for(group, offsets_partitions)][0]
        if coordinator not in avoid:
            return group, coordinator
    raise AssertionError(f"no group id coordinated outside {sorted(avoid)}")


class PinnedClient:
    """Produce and Fetch to one broker only, whatever the cluster's metadata says:
    the client on a partition's minority side (Jepsen's), which real clients
    cannot be pinned to (they follow the leader in any broker's Metadata).
    Raw frames through ``support.fetch.Conn``; one test thread."""

    PRODUCE, FETCH = 0, 1

    def __init__(self, broker: BrokerProcess, timeout_s: float = 30.0, source_address: Optional[str] = None):
        from .fetch import Conn
        from .rawclient import RawClient

        self.conn = Conn(broker.bootstrap)
        if source_address is not None:  # the minority side's own address (NetworkLab)
            self.conn.client.close()
            self.conn.client = RawClient(broker.host, broker.port, timeout_s, source_address=(source_address, 0))
        self.timeout_s = timeout_s

    def close(self) -> None:
        self.conn.close()

    def produce(self, topic: str, partition: int, values, acks: int = -1, timeout_ms: int = 2000) -> tuple:
        """``(error code, base offset)`` of one batch of ``values`` (ints, written as text)."""
        from kafkapy._core.records_py import build_batch

        now = int(time.time() * 1000)
        batch = bytes(build_batch([(None, str(v).encode(), [], now) for v in values]))
        response = self.conn.call(self.PRODUCE, 9, {
            "transactional_id": None, "acks": acks, "timeout": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]},
            timeout_s=timeout_ms / 1000 + self.timeout_s)
        p = response.responses[0].partition_responses[0]
        return p.error_code, p.base_offset

    def fetch(self, topic: str, partition: int, offset: int = 0) -> tuple:
        """``(error code, high watermark, [(offset, int value), ...])`` as this broker answers."""
        from kafkapy._core.records_py import decode_records

        from .fetch import fetch_request

        response = self.conn.call(self.FETCH, 12, fetch_request(12, [(topic, [(partition, offset)])]),
                                  timeout_s=self.timeout_s)
        p = response.responses[0].partitions[0]
        records, data, position = [], bytes(p.records or b""), 0
        while position + 12 <= len(data):  # bounded by the response's size
            length = int.from_bytes(data[position + 8:position + 12], "big")
            if position + 12 + length > len(data):
                break  # a partial batch at the end of the response
            records += [(o, int(v)) for o, _t, _k, v, _h in decode_records(data[position:position + 12 + length])
                        if o >= offset]
            position += 12 + length
        return p.error_code, p.high_watermark, records

    def round_trips(self, topic: str, until: float, latencies: list, errors: list, acks: int = -1) -> None:
        """Produce one record to ``topic``-0 then fetch it from offset 0, on
        and on until ``until`` (at most 5,000 rounds): each request's seconds
        into ``latencies``; the first failure (an error code, no records, the
        client's own timeout) into ``errors``, and it stops there. The other
        client beside a stalled operation: it must not wait for it."""
        for n in range(5000):
            if time.monotonic() >= until:
                return
            try:
                started = time.monotonic()
                code, _ = self.produce(topic, 0, [n], acks=acks)
                latencies.append(time.monotonic() - started)
                started = time.monotonic()
                fetched, _hw, records = self.fetch(topic, 0)
                latencies.append(time.monotonic() - started)
            except Exception as exc:  # a timeout of the raw client: what the test reports
                errors.append(repr(exc))
                return
            if code or fetched or not records:
                errors.append(f"round {n}: produce {code}, fetch {fetched}, {len(records)} records")
                return
            time.sleep(0.02)


def leader_of_two_followers(cluster: Cluster, topic: str, partitions: int) -> tuple:
    """``(C, P1, F, P2, G)`` for a coordinator topic of replication factor 2:
    broker C leads P1 (follower F, not the controller: a test freezes it) and
    P2 (follower G, not F), once every partition has its full ISR."""
    parts = cluster.wait_topic_ready(topic, partitions, 2, 30)
    controller = controller_id(cluster)
    for c in sorted(cluster.brokers):
        led = {p: next(r for r in replicas if r != leader) for p, (leader, replicas, _isr) in sorted(parts.items())
               if leader == c}
        for p1, f in led.items():
            for p2, g in led.items():
                if f != g and f != controller:
                    return c, p1, f, p2, g
    pytest.fail(f"no broker leads two differently followed partitions of {topic}: {parts}")


class Frozen:
    """``with Frozen(broker) as f:`` the broker's whole process group is
    SIGSTOPped for the block and SIGCONTed when it ends, however it ends.
    Inside, ``f.in_background(fn)`` starts the one call expected to wait for
    the frozen broker (on a daemon thread, given ``settle_s`` to reach it),
    ``f.timed(what, fn)`` runs another call and keeps how long it took,
    ``f.still_waiting()`` says the background call has not returned, and
    ``f.join(timeout_s)`` gives its outcome: ``(result, seconds)`` or the
    exception it raised (None if it is still running)."""

    def __init__(self, broker):
        self.broker = broker
        self.latencies: dict[str, float] = {}
        self.outcome = None
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> "Frozen":
        os.killpg(self.broker.pgid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc) -> None:
        os.killpg(self.broker.pgid, signal.SIGCONT)

    def in_background(self, fn, *args, settle_s: float = 0.5, **kw) -> None:
        def run():
            started = time.monotonic()
            try:
                self.outcome = (fn(*args, **kw), time.monotonic() - started)
            except Exception as exc:  # noqa: BLE001 - the test asserts on it
                self.outcome = exc

        self.outcome = None
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        time.sleep(settle_s)

    def still_waiting(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self.outcome is None

    def join(self, timeout_s: float):
        self._thread.join(timeout_s)
        return self.outcome

    def timed(self, what: str, fn, *args, **kw):
        """``fn``'s result; failing, the test fails saying what did not finish."""
        started = time.monotonic()
        try:
            result = fn(*args, **kw)
        except Exception as exc:  # noqa: BLE001 - reported as the test's failure
            pytest.fail(f"{what} failed after {time.monotonic() - started:.1f} s while broker "
                        f"{self.broker.props.get('broker.id')} was frozen: {exc!r}")
        self.latencies[what] = time.monotonic() - started
        return result

    def report(self) -> str:
        return ", ".join(f"{what} {s:.3f} s" for what, s in self.latencies.items())
