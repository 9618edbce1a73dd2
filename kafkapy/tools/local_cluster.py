"""``kafkapy-local-cluster`` (``make cluster``): ZooKeeper and three brokers on this machine.

For trying cluster mode, not for production (the README's "A real cluster"
says how to run one across machines). It starts:

* Debian's ZooKeeper (``kafkapy.tools.zookeeper_server``) on
  127.0.0.1:``--zookeeper-port`` with its data in ``<dir>/zookeeper``;
* ``--brokers`` brokers through the real entry point (``python -m kafkapy
  CONFIG --override ...``), broker ``i`` (1-based) listening on
  127.0.0.1:``base-port + i - 1`` with its log dir ``<dir>/broker-<i>``, all
  with ``zookeeper.connect=127.0.0.1:<port>/kafkapy``;

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
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker property for every broker (repeatable)")
    p.add_argument("--clean", action="store_true", help="remove the data directory first")
    args = p.parse_args(argv)
    if not 1 <= args.brokers <= 16:
        raise ToolError("--brokers must be between 1 and 16")
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


def start_zookeeper(zk_dir: Path, port: int, tick_time_ms: int = 2000) -> subprocess.Popen:
    """Write ``zk_dir/zoo.cfg``, start Debian's ZooKeeper on 127.0.0.1:``port`` and
    wait until it serves (ToolError, with the process ended, if it does not)."""
    zk_dir.mkdir(parents=True, exist_ok=True)
    zookeeper_server.write_config(zk_dir, port, tick_time_ms)
    zk = _spawn(zookeeper_server.argv(zk_dir / "zoo.cfg"), zk_dir / "zookeeper.log")
    deadline = time.monotonic() + ZOOKEEPER_START_TIMEOUT_S
    while not zookeeper_server.serving(port):  # bounded by the deadline
        if zk.poll() is not None or time.monotonic() > deadline:
            _stop([("zookeeper", zk)])
            raise ToolError(f"ZooKeeper did not start on 127.0.0.1:{port}; see {zk_dir / 'zookeeper.log'}")
        time.sleep(0.1)
    return zk


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
    zk_dir = root / "zookeeper"
    stopping = []
    # Ctrl-C and SIGTERM both stop the cluster (SIGINT set explicitly: a shell
    # starts a background job with SIGINT ignored).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))

    zk = start_zookeeper(zk_dir, args.zookeeper_port)
    zk_procs = [("zookeeper", zk)]
    brokers = []
    try:
        connect = f"127.0.0.1:{args.zookeeper_port}{CHROOT}"
        print(f"ZooKeeper on 127.0.0.1:{args.zookeeper_port} (log {zk_dir / 'zookeeper.log'})")
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
