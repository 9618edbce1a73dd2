"""Run a real kafkapy broker process for integration tests.

``BrokerProcess`` writes a ``server.properties`` (config/server.properties with
a free port, a private log dir and per-test overrides), starts the real entry
point (``kafkapy-server-start``) in its own session, and waits until an
ApiVersions v0 request is answered.  Teardown always ends what it started:
SIGTERM, then SIGKILL after a bounded wait, and finally SIGKILL to the
broker's process group if any child outlived the supervisor (recorded in
``leaked`` so the fixture can fail the test).

Only processes this object started are ever signalled, always by PID or by
the process group its own ``start_new_session=True`` created.

Ownership: one ``BrokerProcess`` per broker, driven by one test thread.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Mapping, Optional

from .rawclient import probe_api_versions

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_CONFIG = REPO_ROOT / "config" / "server.properties"

# Start-up bound: a cold start recovers empty logs and forks a handful of
# children, which takes well under a second on this 2-core machine class; 30 s
# leaves room for a loaded CI box without letting a hung broker stall the run.
DEFAULT_START_TIMEOUT_S = 30.0
# Bound on a SIGTERM shutdown: the broker's own bound (kafkapy.shutdown.timeout.ms,
# 30 s by default) plus this margin, so the broker's "did not stop in time"
# handling runs and shows in its log before the harness gives up on it.
STOP_MARGIN_S = 15.0
# After the supervisor is gone, how long its children get to notice and exit.
CHILD_EXIT_GRACE_S = 10.0
# Lines of the broker log shown when it fails to start.
LOG_TAIL_LINES = 60
# At most this many lines of a broker's errors go into a failed test's report.
ERROR_REPORT_LINES = 80
# Every BrokerProcess made in this test process, while it is referenced (conftest
# reports the errors of those a failed test used: ``errors_since``).
_MADE: "weakref.WeakSet[BrokerProcess]" = weakref.WeakSet()



def dies_with_the_tests(argv: list) -> list:
    """``argv`` run so that the process gets SIGKILL when the test process dies
    (``setpriv --pdeathsig``): a pytest killed or crashed mid-test (a client
    library that aborts, a SIGKILLed run) leaves no broker or ZooKeeper behind.
    The signal follows the *thread* that started the child, so only children
    started from the main thread get it (a helper thread ending must not kill
    its broker)."""
    if threading.current_thread() is threading.main_thread() and shutil.which("setpriv"):
        return ["setpriv", "--pdeathsig", "KILL", "--", *argv]
    return argv

class BrokerStartError(RuntimeError):
    pass


# Listening ports are taken below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range), so that no outgoing connection of another
# test can take one between the check and the broker's bind: port 0 would
# hand out a port from that very range.
LISTEN_PORT_RANGE = (10000, 32768)
# A broker whose first start finds its free-a-moment-ago port taken starts again
# on another one, this many times.
BIND_RETRIES = 3


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return LISTEN_PORT_RANGE[1]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago: a random one below the kernel's
    ephemeral range (see ``LISTEN_PORT_RANGE``), else one the kernel picks."""
    low, high = LISTEN_PORT_RANGE[0], min(LISTEN_PORT_RANGE[1], _ephemeral_low())
    for _ in range(50 if high > low else 0):
        port = random.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def server_start_command(props_path: Path) -> tuple[list[str], dict[str, str]]:
    """The entry point next to the running interpreter, or ``python -m kafkapy``.

    Returns the argv and extra environment (the fallback needs the repo on
    PYTHONPATH when kafkapy is not installed)."""
    script = Path(sys.executable).parent / "kafkapy-server-start"
    if script.exists() and os.access(script, os.X_OK):
        return [str(script), str(props_path)], {}
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return [sys.executable, "-m", "kafkapy", str(props_path)], {"PYTHONPATH": pythonpath}


def _escape_value(text: str) -> str:
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == " " and i == 0:
            out.append("\\ ")
        else:
            out.append(c)
    return "".join(out)


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    lines = ["# written by tests/support/broker.py"]
    lines += [f"{key}={_escape_value(value)}" for key, value in props.items()]
    path.write_text("\n".join(lines) + "\n")


def _load_base_properties() -> dict[str, str]:
    from kafkapy.server.config import load_properties

    return load_properties(str(BASE_CONFIG))


def process_group_members(pgid: int) -> list[tuple[int, str, str]]:
    """Live (non-zombie) processes in a process group: ``(pid, state, cmdline)``.

    Read from /proc: field 3 of /proc/PID/stat is the state, field 5 the
    process group (counted after the parenthesised command name, which may
    itself contain spaces or parentheses)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
            fields = stat[stat.rindex(")") + 2:].split()
            state, pgrp = fields[0], int(fields[2])
            if pgrp != pgid or state in ("Z", "X"):
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, ValueError, IndexError):
            continue  # exited while we looked
        members.append((int(entry), state, cmdline))
    return members


class ProcessWithLog:
    """What the test harness's process wrappers share: ``proc`` (the Popen, or
    None) and ``log_path`` (where its output goes)."""

    proc: Optional[subprocess.Popen]
    log_path: Path

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def error_lines(text: str, limit: int = ERROR_REPORT_LINES) -> str:
    """The ERROR and CRITICAL records of a broker log (Kafka's layout, a
    traceback's lines following its record), the last ``limit`` lines."""
    kept: list[str] = []
    keeping = False
    for line in text.splitlines():
        if line.startswith("["):
            keeping = " ERROR " in line or " CRITICAL " in line
        if keeping:
            kept.append(line)
    return "\n".join(kept[-limit:])


def errors_since(started_at: float) -> list[tuple[str, str]]:
    """``(broker, its error lines)`` for each broker whose log was written at or
    after ``started_at`` (time.time()) and holds an error: what a failed test's
    report shows, so a CI failure carries the brokers' side of it."""
    found = []
    for broker in sorted(_MADE, key=lambda b: str(b.work_dir)):
        try:
            # a second's margin: file times come from the kernel's coarse clock
            if broker.log_path.stat().st_mtime < started_at - 1:
                continue
        except FileNotFoundError:
            continue
        errors = error_lines(broker.log_text())
        if errors:
            found.append((f"{broker.work_dir.name} {broker.bootstrap}", errors))
    return found


class BrokerProcess(ProcessWithLog):
    """One kafkapy broker process with its own port, log dirs and log file."""

    def __init__(self, work_dir: Path, overrides: Optional[Mapping[str, object]] = None,
                 port: Optional[int] = None, start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
                 env: Optional[Mapping[str, str]] = None, command: Optional[list[str]] = None,
                 host: str = "127.0.0.1"):
        self.work_dir = Path(work_dir)
        # The listener's address: 127.0.0.1, or one a network-namespace test made.
        self.host = host
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port = port if port is not None else free_port()
        # Only a port the harness chose may be changed when it turns out taken.
        self._port_chosen = port is None
        self.start_timeout_s = start_timeout_s
        self.props_path = self.work_dir / "server.properties"
        self.log_path = self.work_dir / "broker.log"
        self.extra_env = dict(env or {})
        # argv prefix to run instead of the real entry point (the props path
        # is appended); for testing the harness itself.
        self.command = list(command) if command else None
        self.proc: Optional[subprocess.Popen] = None
        self.pgid: Optional[int] = None
        self.starts = 0
        self.child_exit_grace_s = CHILD_EXIT_GRACE_S
        # Descriptions of processes found alive after their broker was ended.
        self.leaked: list[str] = []
        _MADE.add(self)

        props = _load_base_properties()
        # A cluster-mode broker that cannot hand its leaderships over (the last one
        # up, RF 1 partitions) asks the controller max.retries times, Kafka's 5 s
        # apart: 0.2 s keeps test teardowns short.
        props.setdefault("controlled.shutdown.retry.backoff.ms", "200")
        address = f"PLAINTEXT://{host}:{self.port}"
        props["listeners"] = address
        props["advertised.listeners"] = address
        self._listener = address
        props["log.dirs"] = str(self.work_dir / "logs")
        for key, value in (overrides or {}).items():
            if value is None:
                props.pop(key, None)
            elif isinstance(value, bool):
                props[key] = "true" if value else "false"
            else:
                props[key] = str(value)
        self.props: dict[str, str] = props
        write_properties(self.props_path, props)

    # -- facts -------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(d) for d in self.props["log.dirs"].split(",") if d.strip()]

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> "BrokerProcess":
        """Start the broker and wait until it answers. On its first start, a
        listener port the harness chose that another process took in the
        meantime (the broker logs EADDRINUSE and exits) is replaced by a new
        one, up to ``BIND_RETRIES`` times; later starts keep their port, as
        clients and the cluster know the broker by it."""
        self.launch()
        return self.finish_start()

    def finish_start(self) -> "BrokerProcess":
        """Wait until the ``launch``ed broker answers (``start``'s second half,
        so that several brokers can start at once), moving it to another port
        as ``start`` says."""
        for attempt in range(BIND_RETRIES + 1):
            try:
                self.wait_ready()
                return self
            except BrokerStartError as exc:
                if not (self._port_chosen and self.starts == 1 and attempt < BIND_RETRIES
                        and self._listener in self.props.get("listeners", "")
                        and "Address already in use" in str(exc)):
                    raise
                self._move_to_port(free_port(self.host))
                self.starts = 0
                self.launch()
        raise AssertionError("unreachable")

    def _move_to_port(self, port: int) -> None:
        address = f"PLAINTEXT://{self.host}:{port}"
        for key in ("listeners", "advertised.listeners"):
            self.props[key] = self.props[key].replace(self._listener, address)
        self._listener, self.port = address, port
        write_properties(self.props_path, self.props)

    def launch(self) -> None:
        """Start the broker's process without waiting for it (``finish_start`` waits)."""
        if self.running:
            raise RuntimeError("broker already running")
        if self.command is not None:
            argv, extra = self.command + [str(self.props_path)], {}
        else:
            argv, extra = server_start_command(self.props_path)
        env = dict(os.environ)
        env.update(extra)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(self.extra_env)
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"===== start {self.starts}: {' '.join(argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(dies_with_the_tests(argv), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=str(self.work_dir), env=env,
                                         start_new_session=True)
        # start_new_session makes the child a session and group leader: pgid == pid.
        self.pgid = self.proc.pid

    def wait_ready(self, timeout_s: Optional[float] = None) -> None:
        """Wait until ApiVersions v0 is answered; fail with the log tail if the
        process exits first or the deadline passes."""
        assert self.proc is not None
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        correlation_id = 0x6b61
        while True:
            code = self.proc.poll()
            if code is not None:
                self._reap_group()
                raise BrokerStartError(f"broker exited with code {code} before it was ready; "
                                       f"log tail:\n{self.log_tail()}")
            if probe_api_versions(self.host, self.port, correlation_id, timeout_s=2.0):
                return
            correlation_id += 1
            if time.monotonic() >= deadline:
                self.kill()
                raise BrokerStartError(f"broker not ready on port {self.port} within {timeout_s} s; "
                                       f"log tail:\n{self.log_tail()}")
            time.sleep(0.05)

    @property
    def stop_timeout_s(self) -> float:
        """The broker's shutdown bound (kafkapy.shutdown.timeout.ms) plus a margin."""
        try:
            shutdown_ms = int(self.props.get("kafkapy.shutdown.timeout.ms", "30000"))
        except ValueError:
            shutdown_ms = 30000
        return shutdown_ms / 1000 + STOP_MARGIN_S

    def stop(self, sig: int = signal.SIGTERM, timeout: Optional[float] = None) -> Optional[int]:
        """Send ``sig`` to the broker and wait for it; returns its exit code.

        If it is still running after ``timeout`` seconds (default
        ``stop_timeout_s``) it is SIGKILLed and AssertionError is raised: a
        broker must shut down within its bound."""
        if self.proc is None:
            return None
        if timeout is None:
            timeout = self.stop_timeout_s
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_and_reap()
                raise AssertionError(f"broker did not exit within {timeout} s of signal {sig}; "
                                     f"log tail:\n{self.log_tail()}") from None
        self._reap_group()
        return self.proc.returncode

    def kill(self) -> Optional[int]:
        """SIGKILL the broker process (a crash); returns its exit code (-9)."""
        if self.proc is None:
            return None
        self._kill_and_reap()
        self._reap_group()
        return self.proc.returncode

    def restart(self, sig: int = signal.SIGTERM) -> "BrokerProcess":
        """Stop (if running) and start again on the same port and log dirs."""
        if self.running:
            self.stop(sig)
        return self.start()

    def close(self) -> None:
        """Teardown: end the broker whatever its state (a test's SIGSTOP
        included: its group is continued first, to see the SIGTERM); never raises."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.pgid, signal.SIGCONT)
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(self.stop_timeout_s)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                self.leaked.append(f"broker pid {self.proc.pid} ignored SIGTERM for {self.stop_timeout_s} s")
                self._kill_and_reap()
        self._reap_group()

    # -- internals -----------------------------------------------------------------

    def _kill_and_reap(self) -> None:
        assert self.proc is not None
        try:
            os.kill(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.leaked.append(f"broker pid {self.proc.pid} survived SIGKILL for 10 s")

    def _reap_group(self) -> None:
        """After the supervisor exited: give its children a bounded grace period
        to exit, then SIGKILL whatever is left of the group and record it."""
        if self.pgid is None:
            return
        deadline = time.monotonic() + self.child_exit_grace_s
        members = process_group_members(self.pgid)
        while members and time.monotonic() < deadline:
            time.sleep(0.05)
            members = process_group_members(self.pgid)
        if not members:
            return
        self.leaked.extend(f"pid {pid} ({state}) {cmd}" for pid, state, cmd in members)
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 5.0
        while process_group_members(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def __repr__(self) -> str:
        return f"BrokerProcess(bootstrap={self.bootstrap!r}, pid={self.pid}, running={self.running})"
