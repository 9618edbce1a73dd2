"""Run a real ZooKeeper (Debian's ``zookeeper`` package, 3.8) for tests.

``ZooKeeperProcess`` runs Debian's ZooKeeper as ``kafkapy.tools.zookeeper_server``
does for ``make cluster`` (its ``zoo.cfg``, JVM flags and classpath), with a
500 ms tick and no fsync per transaction.

Ready means ``srvr`` reports a mode and a kazoo client connected and read ``/``.  Teardown ends only the
PID this object started: SIGTERM, then SIGKILL after a bound.  ``pause`` /
``resume`` (SIGSTOP / SIGCONT) and ``restart`` / ``kill`` are there for fault
tests: a paused server keeps its sockets open but answers nothing, so clients
see their session time out, as with a stalled or partitioned ZooKeeper.

Fixtures (tests/conftest.py offers them to every test):
``zookeeper`` (session scope: one server for the whole run, or for each
pytest-xdist worker; every test works in a chroot of its own, named after
the test by ``chroot_for(request)``, so tests never see each other's
znodes) and ``zookeeper_factory`` (function scope: ``make(**kwargs) ->
ZooKeeperProcess``, for tests that stop, pause or restart the server).

Ownership: one ``ZooKeeperProcess`` per server, driven by one test thread.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import zlib
from pathlib import Path
from typing import Mapping, Optional

import pytest

from kafkapy.tools import zookeeper_server
from kafkapy.tools.zookeeper_server import four_letter_word  # noqa: F401  (tests use it from here)

from .broker import ProcessWithLog, dies_with_the_tests, free_port

# Measured on this 2-core machine class: the JVM binds the client port ~0.3 s
# after exec and answers a session ~0.5 s after exec.  30 s is the bound for a
# loaded CI box, not the expectation.
DEFAULT_START_TIMEOUT_S = 30.0
# ZooKeeper's SIGTERM shutdown closes sessions and syncs the log: well under
# a second; 10 s before SIGKILL.
STOP_TIMEOUT_S = 10.0
# tickTime 500 ms instead of ZooKeeper's 2000: sessions may then be as short as
# 2 ticks (1 s) and as long as 20 ticks (10 s), so an expiry test waits about a
# second, not six.  Kafka's zookeeper.session.timeout.ms (18 s) is capped to
# 10 s by such a server; tests that need longer pass tick_time_ms.
DEFAULT_TICK_TIME_MS = 500


class ZooKeeperStartError(RuntimeError):
    pass


def zookeeper_missing() -> Optional[str]:
    """Why a ZooKeeper cannot be started here, or None if it can."""
    reason = zookeeper_server.zookeeper_missing()
    if reason:
        return reason
    try:
        import kazoo  # noqa: F401
    except ImportError:
        return "kazoo is not installed (pip install -e '.[test]')"
    return None


class ZooKeeperProcess(ProcessWithLog):
    """One standalone ZooKeeper server with its own port, data dir and log."""

    def __init__(self, work_dir: Path, port: Optional[int] = None,
                 tick_time_ms: int = DEFAULT_TICK_TIME_MS,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
                 extra_config: Optional[Mapping[str, object]] = None, host: str = "127.0.0.1",
                 ensemble: Optional[dict] = None, my_id: Optional[int] = None,
                 sasl_users: Optional[Mapping[str, str]] = None, tls=None,
                 command_prefix: Optional[list] = None):
        """``sasl_users`` ({user: password}): SASL DIGEST-MD5 as ZooKeeper's docs
        set it up (``authProvider.1`` SASLAuthenticationProvider, a server JAAS
        ``Server`` section with ``user_<name>`` entries); anonymous sessions are
        still accepted, as there. ``tls`` (``support.certs.Certs``): the port is
        ZooKeeper's ``secureClientPort`` (Netty) and there is no plaintext port;
        clients need a certificate of the CA (``client_kwargs``). ``command_prefix``:
        e.g. ``ip netns exec <ns>`` (a node in a network namespace)."""
        self.work_dir = Path(work_dir)
        # clientPortAddress: 127.0.0.1, or an address a network-namespace test made.
        self.host = host
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.work_dir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.port = port if port is not None else free_port()
        self.tick_time_ms = tick_time_ms
        self.start_timeout_s = start_timeout_s
        self.config_path = self.work_dir / "zoo.cfg"
        self.log_path = self.work_dir / "zookeeper.log"
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0
        # Seconds from exec to the first answered session, per start.
        self.start_durations_s: list[float] = []
        self.paused = False
        # No fsync per transaction: test data need not survive a power cut,
        # and an fsync per znode write costs milliseconds on a shared disk.
        self.my_id = my_id
        self.command_prefix = list(command_prefix or [])
        self.jvm_flags: list = []
        # What a kazoo client of this server needs (TLS) and the 4lw probe's TLS context.
        self.client_kwargs: dict = {}
        self.ssl_context = None
        extra = {"forceSync": "no", "clientPortAddress": host}
        if sasl_users:
            jaas = self.work_dir / "zookeeper_server_jaas.conf"
            users = "".join(f'\n  user_{u}="{pw}"' for u, pw in sasl_users.items())
            jaas.write_text(f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required{users};\n}};\n")
            self.jvm_flags.append(f"-Djava.security.auth.login.config={jaas}")
            extra["authProvider.1"] = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
        if tls is not None:
            import ssl

            extra.update({"clientPort": None, "clientPortAddress": None, "secureClientPort": self.port,
                          "secureClientPortAddress": host,
                          "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
                          "ssl.keyStore.location": tls.server_keystore, "ssl.keyStore.type": "PEM",
                          "ssl.trustStore.location": tls.ca_cert, "ssl.trustStore.type": "PEM"})
            cert, key = tls.client("zookeeper-client", "/CN=kafkapy-zookeeper-client")
            self.client_kwargs = {"use_ssl": True, "ca": str(tls.ca_cert), "certfile": str(cert),
                                  "keyfile": str(key), "check_hostname": True}
            self.ssl_context = ssl.create_default_context(cafile=str(tls.ca_cert))
            self.ssl_context.load_cert_chain(str(cert), str(key))
        self.config = zookeeper_server.write_config(self.work_dir, self.port, tick_time_ms,
                                                    {**extra, **(extra_config or {})}, ensemble, my_id)

    # -- facts -------------------------------------------------------------------

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        """Kafka's ``zookeeper.connect`` form: ``127.0.0.1:PORT[/chroot]``."""
        if chroot and not chroot.startswith("/"):
            chroot = "/" + chroot
        return self.hosts + chroot

    def client(self, chroot: str = "", timeout_s: float = 10.0, **kwargs):
        """A started ``kazoo.client.KazooClient``; the caller stops and closes it.
        A ``chroot`` is created first if missing (kazoo warns on a missing one)."""
        from kazoo.client import KazooClient

        if chroot.strip("/"):
            root = KazooClient(hosts=self.hosts, timeout=timeout_s, **self.client_kwargs)
            root.start(timeout=timeout_s)
            try:
                root.ensure_path(self.connect_string(chroot)[len(self.hosts):])
            finally:
                root.stop()
                root.close()
        zk = KazooClient(hosts=self.connect_string(chroot), timeout=timeout_s, **{**self.client_kwargs, **kwargs})
        zk.start(timeout=timeout_s)
        return zk

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> "ZooKeeperProcess":
        began = time.monotonic()
        self.launch()
        self.wait_ready()
        self.start_durations_s.append(time.monotonic() - began)
        return self

    def launch(self) -> None:
        """Start the JVM without waiting for it (``wait_ready`` waits): the
        members of an ensemble serve only once a quorum of them runs."""
        if self.running:
            raise RuntimeError("zookeeper already running")
        argv = self.command_prefix + zookeeper_server.argv(self.config_path, self.jvm_flags)
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"===== start {self.starts}: {' '.join(argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(dies_with_the_tests(argv), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=str(self.work_dir), start_new_session=True)
        self.paused = False

    def mode(self) -> Optional[str]:
        """``leader``, ``follower`` or ``standalone`` as ``srvr`` says, or None
        while it does not serve."""
        try:
            text = four_letter_word(self.port, "srvr", timeout_s=1.0, host=self.host, ssl_context=self.ssl_context)
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("Mode: "):
                return line[len("Mode: "):].strip()
        return None

    def wait_ready(self, timeout_s: Optional[float] = None) -> None:
        """Wait until a kazoo session is established and ``/`` is read; fail
        with the log tail if the JVM exits first or the deadline passes."""
        from kazoo.client import KazooClient
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError

        assert self.proc is not None
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        last_error = "port never opened"
        while True:
            code = self.proc.poll()
            if code is not None:
                raise ZooKeeperStartError(f"zookeeper exited with code {code} before it was ready; "
                                          f"log tail:\n{self.log_tail()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise ZooKeeperStartError(f"zookeeper not ready on {self.hosts} within {timeout_s} s "
                                          f"({last_error}); log tail:\n{self.log_tail()}")
            # srvr first: ZooKeeper binds its port before it loads its
            # database and drops sessions until then ("ZooKeeperServer not
            # running"), which would leave kazoo waiting out its timeout.
            if not zookeeper_server.serving(self.port, self.host, self.ssl_context):
                last_error = "srvr: not serving"
                time.sleep(0.05)
                continue
            zk = KazooClient(hosts=self.hosts, timeout=min(5.0, max(remaining, 1.0)), **self.client_kwargs)
            try:
                zk.start(timeout=min(5.0, max(remaining, 0.5)))
                zk.get("/")
                return
            except (KazooTimeoutError, KazooException, OSError) as e:
                last_error = f"{type(e).__name__}: {e}"
                time.sleep(0.1)
            finally:
                try:
                    zk.stop()
                    zk.close()
                except Exception:
                    pass

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> Optional[int]:
        """SIGTERM (after SIGCONT if paused), then SIGKILL after ``timeout_s``;
        returns the exit code.  Signals only the PID this object started."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            if self.paused:
                self.resume()
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self.paused = False
        return self.proc.returncode

    def kill(self) -> Optional[int]:
        """SIGKILL (a crash); returns the exit code (-9)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self.paused = False
        return self.proc.returncode

    def restart(self, kill: bool = False) -> "ZooKeeperProcess":
        """Stop (SIGTERM, or SIGKILL with ``kill=True``) and start again on the
        same port and data dir: znodes survive, sessions may expire."""
        if self.running:
            self.kill() if kill else self.stop()
        return self.start()

    def pause(self) -> None:
        """SIGSTOP: the server holds its sockets but answers nothing."""
        assert self.running, "zookeeper is not running"
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def close(self) -> None:
        """Teardown: end the server whatever its state; never raises."""
        try:
            self.stop()
        except Exception:
            self.kill()

    def __enter__(self) -> "ZooKeeperProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ZooKeeperProcess(hosts={self.hosts!r}, pid={self.pid}, running={self.running})"


class ZooKeeperEnsemble:
    """Three (or ``size``) ZooKeeper servers in one ensemble on loopback ports,
    as operators run ZooKeeper: it serves while a majority runs. Offers what
    ``Cluster`` and the tests use of a ``ZooKeeperProcess`` (``hosts``,
    ``connect_string``, ``client``) with every member in the connect string,
    and the members themselves (``nodes``, ``leader``, ``followers``) for
    faults."""

    def __init__(self, work_dir: Path, size: int = 3, tick_time_ms: int = DEFAULT_TICK_TIME_MS,
                 hosts: Optional[dict] = None, command_prefixes: Optional[dict] = None):
        """``hosts`` ({id: address}, 127.0.0.1 for all by default) and
        ``command_prefixes`` ({id: argv prefix}): members in network namespaces
        (``support.cluster.zookeeper_lab``)."""
        work_dir = Path(work_dir)
        ids = range(1, size + 1)
        hosts = hosts or {}
        members = {i: (hosts.get(i, "127.0.0.1"), free_port(), free_port()) for i in ids}
        self.nodes = {i: ZooKeeperProcess(work_dir / f"zookeeper-{i}", tick_time_ms=tick_time_ms,
                                          ensemble=members, my_id=i, host=members[i][0],
                                          command_prefix=(command_prefixes or {}).get(i)) for i in ids}
        self.host = "127.0.0.1"
        self.client_kwargs: dict = {}  # plaintext members

    @property
    def hosts(self) -> str:
        return ",".join(n.hosts for n in self.nodes.values())

    def connect_string(self, chroot: str = "") -> str:
        if chroot and not chroot.startswith("/"):
            chroot = "/" + chroot
        return self.hosts + chroot

    def client(self, chroot: str = "", timeout_s: float = 10.0, **kwargs):
        """A started kazoo client on the whole ensemble (a chroot made first if missing)."""
        return ZooKeeperProcess.client(self, chroot, timeout_s, **kwargs)

    def start(self) -> "ZooKeeperEnsemble":
        for node in self.nodes.values():
            node.launch()
        for node in self.nodes.values():
            node.wait_ready()
        self.wait_quorum()
        return self

    def wait_quorum(self, timeout_s: float = 30.0, among=None) -> int:
        """Until one running member is the leader and every other running one
        follows it (of ``among`` only, e.g. the nodes a cut one is not among);
        returns the leader's id."""
        from .wait import wait_for

        def settled():
            modes = {i: n.mode() for i, n in self.nodes.items() if n.running and (among is None or i in among)}
            leaders = [i for i, m in modes.items() if m == "leader"]
            if len(leaders) == 1 and all(m in ("leader", "follower") for m in modes.values()):
                return leaders[0]
            return None

        return wait_for(settled, timeout_s, "a ZooKeeper leader and its followers")

    def leader(self) -> int:
        return self.wait_quorum()

    def followers(self) -> list:
        leader = self.leader()
        return [i for i, n in self.nodes.items() if n.running and i != leader]

    def close(self) -> None:
        for node in self.nodes.values():
            node.close()

    def __repr__(self) -> str:
        return f"ZooKeeperEnsemble(hosts={self.hosts!r})"


@pytest.fixture(scope="module")
def zookeeper_ensemble(tmp_path_factory):
    """A three-node ensemble for a module's tests (each test in its own chroot)."""
    _skip_if_missing()
    ensemble = ZooKeeperEnsemble(tmp_path_factory.mktemp("zk-ensemble"))
    try:
        yield ensemble.start()
    finally:
        ensemble.close()


def _skip_if_missing() -> None:
    """Skip on a developer machine without ZooKeeper; under CI (``CI`` set,
    where `make test` installs it) a missing ZooKeeper fails the test."""
    reason = zookeeper_missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"ZooKeeper cannot run here: {reason}")
        pytest.skip(f"ZooKeeper cannot run here: {reason}")


def chroot_for(request, suffix: str = "") -> str:
    """A chroot no other test of the run uses: the test's name, cut, and a
    hash of its whole node id (module included; parametrized names share
    their start)."""
    node = request.node
    return f"/{node.name[:40]}-{zlib.crc32(node.nodeid.encode()):08x}{suffix}"


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """One ZooKeeper for the session's tests (each test in a chroot of its own)."""
    _skip_if_missing()
    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def zookeeper_factory(tmp_path_factory):
    """``make(**kwargs) -> ZooKeeperProcess`` (started unless ``start=False``);
    every server made is ended after the test."""
    _skip_if_missing()
    made: list[ZooKeeperProcess] = []

    def make(start: bool = True, **kwargs) -> ZooKeeperProcess:
        server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"), **kwargs)
        made.append(server)
        if start:
            server.start()
        return server

    yield make
    for server in made:
        server.close()
