"""``kafkapy-local-cluster`` (``make cluster``): ZooKeeper and three brokers on this machine.

For trying cluster mode, not for production (the README's "A real cluster"
says how to run one across machines). It starts:

* Debian's ZooKeeper (``kafkapy.tools.zookeeper_server``) on
  127.0.0.1:``--zookeeper-port`` with its data in ``<dir>/zookeeper``, or
  with ``--zookeeper-nodes 3`` an ensemble: node ``n`` on
  127.0.0.1:``zookeeper-port + n - 1``, its quorum and election ports 100 and
  200 above that, with its data in ``<dir>/zookeeper-<n>``;
* ``--brokers`` brokers through the real entry point (``python -m kafkapy
  CONFIG --override ...``), broker ``i`` (1-based) listening on
  127.0.0.1:``base-port + i - 1`` with its log dir ``<dir>/broker-<i>``, all
  with ``zookeeper.connect`` naming every ZooKeeper node and the chroot
  ``/kafkapy``;

prints the bootstrap servers, and waits. Ctrl-C (or SIGTERM) stops the
brokers with SIGTERM (each closes its session, so none waits out a session
timeout), then ZooKeeper; a child that exits early stops the rest. Data stay
in ``<dir>`` for the next start (``--clean`` removes them first). It ends only
the processes it started.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from kafkapy.tools import zookeeper_server
from kafkapy.tools._cli import ToolError, parser, run

# ZooKeeper answers a session ~0.5 s after exec here; 30 s bounds a slow box.
ZOOKEEPER_START_TIMEOUT_S = 30.0
# A broker's SIGTERM shutdown flushes and checkpoints every log: seconds at most.
STOP_TIMEOUT_S = 30.0
CHROOT = "/kafkapy"


def _parse(argv):
    p = parser("kafkapy-local-cluster", "Start ZooKeeper and a cluster of kafkapy brokers on 127.0.0.1.")
    p.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    p.add_argument("--dir", default="local-cluster", help="data directory (default ./local-cluster)")
    p.add_argument("--config", default="config/server.properties",
                   help="the properties every broker starts from (default config/server.properties)")
    p.add_argument("--base-port", type=int, default=9092, help="broker i listens on base-port + i - 1")
    p.add_argument("--zookeeper-port", type=int, default=2181)
    p.add_argument("--zookeeper-nodes", type=int, default=1,
                   help="1 (a standalone server, the default) or an odd number up to 7: an ensemble")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker property for every broker (repeatable)")
    p.add_argument("--clean", action="store_true", help="remove the data directory first")
    args = p.parse_args(argv)
    if not 1 <= args.brokers <= 16:
        raise ToolError("--brokers must be between 1 and 16")
    if args.zookeeper_nodes not in (1, 3, 5, 7):
        raise ToolError("--zookeeper-nodes must be 1, 3, 5 or 7 (an ensemble needs a majority)")
    if not os.path.exists(args.config):
        raise ToolError(f"no such config file: {args.config}")
    return args


def _spawn(argv, log_path: Path) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _stop(procs, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM each still-running child, then SIGKILL what is left after ``timeout_s``."""
    for _, proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for name, proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"{name} did not stop within {timeout_s:.0f} s; killing it", file=sys.stderr)
            proc.kill()
            proc.wait(10)


# An ensemble node's quorum and election ports, above its client port.
QUORUM_PORT_OFFSET, ELECTION_PORT_OFFSET = 100, 200


def start_zookeeper(root: Path, port: int, nodes: int = 1, tick_time_ms: int = 2000) -> list:
    """Write each node's ``zoo.cfg``, start Debian's ZooKeeper (one standalone
    server in ``root/zookeeper``, or an ensemble of ``nodes`` in
    ``root/zookeeper-<n>``) and wait until every node serves; returns
    ``[(name, process, port)]``. ToolError, with every process ended, if one
    does not serve in time."""
    if nodes == 1:
        dirs = {1: root / "zookeeper"}
        ensemble = None
    else:
        dirs = {n: root / f"zookeeper-{n}" for n in range(1, nodes + 1)}
        ensemble = {n: ("127.0.0.1", port + n - 1 + QUORUM_PORT_OFFSET, port + n - 1 + ELECTION_PORT_OFFSET)
                    for n in dirs}
    started = []
    for n, zk_dir in dirs.items():
        zk_dir.mkdir(parents=True, exist_ok=True)
        zookeeper_server.write_config(zk_dir, port + n - 1, tick_time_ms, ensemble=ensemble, my_id=n)
        name = "zookeeper" if nodes == 1 else f"zookeeper {n}"
        started.append((name, _spawn(zookeeper_server.argv(zk_dir / "zoo.cfg"), zk_dir / "zookeeper.log"),
                        port + n - 1))
    deadline = time.monotonic() + ZOOKEEPER_START_TIMEOUT_S
    for name, zk, zk_port in started:  # an ensemble's nodes serve once a majority runs
        while not zookeeper_server.serving(zk_port):  # bounded by the deadline
            if zk.poll() is not None or time.monotonic() > deadline:
                _stop([(n, p) for n, p, _ in started])
                raise ToolError(f"{name} did not start on 127.0.0.1:{zk_port}; see its zookeeper.log in {root}")
            time.sleep(0.1)
    return started


def broker_argv(config: str, broker_id: int, port: int, log_dir: Path, connect: str, overrides=()) -> list:
    """The real entry point for broker ``broker_id`` on 127.0.0.1:``port`` (data in ``log_dir/data``)."""
    props = [f"broker.id={broker_id}", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
             f"log.dirs={log_dir / 'data'}", f"zookeeper.connect={connect}", *overrides]
    argv = [sys.executable, "-m", "kafkapy", config]
    for o in props:
        argv += ["--override", o]
    return argv


def _main(argv) -> int:
    args = _parse(argv)
    missing = zookeeper_server.zookeeper_missing()
    if missing:
        raise ToolError(f"ZooKeeper cannot run here: {missing}")
    root = Path(args.dir).resolve()
    if args.clean and root.exists():
        shutil.rmtree(root)
    stopping = []
    # Ctrl-C and SIGTERM both stop the cluster (SIGINT set explicitly: a shell
    # starts a background job with SIGINT ignored).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))

    zookeepers = start_zookeeper(root, args.zookeeper_port, args.zookeeper_nodes)
    zk_procs = [(name, proc) for name, proc, _ in zookeepers]
    brokers = []
    try:
        hosts = ",".join(f"127.0.0.1:{zk_port}" for _, _, zk_port in zookeepers)
        connect = f"{hosts}{CHROOT}"
        for name, _, zk_port in zookeepers:
            print(f"{name} on 127.0.0.1:{zk_port}")
        for i in range(1, args.brokers + 1):
            port = args.base_port + i - 1
            log_dir = root / f"broker-{i}"
            log_dir.mkdir(parents=True, exist_ok=True)
            argv_ = broker_argv(args.config, i, port, log_dir, connect, args.override)
            brokers.append((f"broker {i}", _spawn(argv_, log_dir / "server.log")))
            print(f"broker {i} on 127.0.0.1:{port} (log {log_dir / 'server.log'})")
        bootstrap = ",".join(f"127.0.0.1:{args.base_port + i}" for i in range(args.brokers))
        print(f"bootstrap.servers={bootstrap}\nCtrl-C stops the cluster.", flush=True)
        while not stopping:  # until Ctrl-C / SIGTERM or a child's exit
            for name, proc in brokers + zk_procs:
                if proc.poll() is not None:
                    print(f"{name} exited with code {proc.returncode}; stopping the cluster",
                          file=sys.stderr)
                    stopping.append(True)
                    break
            time.sleep(0.5)
    finally:
        print("stopping the brokers, then ZooKeeper", file=sys.stderr)
        _stop(brokers)
        _stop(zk_procs)
    return 0


def main(argv=None) -> int:
    return run(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
