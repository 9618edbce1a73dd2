"""What one request costs the handler, in-process: CPU time and Python calls.

Run:  .venv/bin/python perf/request_cost.py [--rev A --rev B ...] [--repeat 3] [--number 5000]

A standalone ``Broker`` is built in this process (no sockets, no other
processes) on a fresh log directory, and ``worker.handle_request`` is called
on a frame as a processor would call it:

* ``produce``: a Produce v8 of one batch of one 100-byte record, acks=1 (the
  suite's small request);
* ``fetch``: a consumer's sessionless Fetch v11 of 64 KiB from offset 1,000 of
  that partition, whose batches are the produce's (one record each).

For each it reports the CPU time per request (``time.process_time``, best of
``--repeat`` runs of ``--number`` requests) and the Python function calls per
request (``cProfile``'s count over one run: exact, so it tells two trees
apart on a machine too loaded for timings). With ``--rev`` the trees are
snapshots of those revisions (``_brokers.snapshot_source``), each measured in
a child process, alternating ``--repeat`` times; the compiled ``_core``
modules are this tree's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _measure(number: int, repeat: int) -> dict:
    """In this process: ``{"produce": {...}, "fetch": {...}}`` for the kafkapy
    on ``sys.path``."""
    import cProfile
    import pstats
    import timeit

    from kafkapy.protocol.api import API_TABLE
    from kafkapy.protocol.codec import encode_to_bytes
    from kafkapy.protocol.entities import construct
    from kafkapy.server import config as c
    from kafkapy.server.broker import Broker
    from kafkapy.server.config import BrokerConfig
    from kafkapy.server.reactor.worker import handle_request
    from kafkapy.storage.log_manager import LogManager
    from kafkapy.storage.shared import SharedPartitionTable

    sys.path.insert(0, str(HERE))
    from _loadgens import produce_request

    tmp = Path(tempfile.mkdtemp(prefix="request-cost-"))
    try:
        config = BrokerConfig.from_props({"log.dirs": str(tmp / "logs"), "broker.id": "0",
                                          "listeners": "PLAINTEXT://127.0.0.1:9092"})
        table = SharedPartitionTable(capacity=64, lock_path=str(tmp / "locks"))
        broker = Broker(config, table, LogManager(config.log_dirs, c.log_config_for(config, {}), 0))
        broker.admin.create_topic("t", 1, {})
        produce = produce_request("t", 0, 100)[4:]
        for _ in range(3000):  # the fetch's records, and warm caches
            handle_request(broker, memoryview(bytearray(produce)))
        fetch_cls = API_TABLE[1].request_class(11)
        body = encode_to_bytes(construct(fetch_cls, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                       "fetch_offset": 1000, "log_start_offset": -1,
                                                       "partition_max_bytes": 65536}]}]}))
        fetch = struct.pack(">hhih", 1, 11, 7, 1) + b"c" + body
        kind, _parts = handle_request(broker, memoryview(bytearray(fetch)))
        if kind != 0:
            raise RuntimeError(f"the fetch was answered with kind {kind}")
        out = {}
        for name, frame in (("produce", produce), ("fetch", fetch)):
            def run(frame=frame):
                handle_request(broker, memoryview(bytearray(frame)))

            best = min(timeit.Timer(run, timer=time.process_time).repeat(number=number, repeat=repeat))
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(number):
                run()
            profile.disable()
            calls = pstats.Stats(profile).total_calls
            out[name] = {"cpu_us": round(best / number * 1e6, 2), "python_calls": round(calls / number, 1)}
        broker.close()
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _child(tree: str, number: int, repeat: int) -> dict:
    env = {**os.environ, "PYTHONPATH": tree}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run([sys.executable, __file__, "--child", "--number", str(number), "--repeat", str(repeat)],
                          env=env, capture_output=True, text=True, timeout=600, cwd=tree)
    if proc.returncode != 0:
        raise RuntimeError(f"{tree}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rev", action="append", default=[], help="a revision to measure (repeatable; default: this tree)")
    p.add_argument("--repeat", type=int, default=3, help="timing runs (best of) and, with --rev, alternations")
    p.add_argument("--number", type=int, default=5000, help="requests per timing run")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(_measure(args.number, args.repeat)))
        return 0
    if not args.rev:
        print(json.dumps(_measure(args.number, args.repeat), indent=1))
        return 0
    sys.path.insert(0, str(HERE))
    import _brokers

    work = Path(tempfile.mkdtemp(prefix="request-cost-trees-"))
    try:
        trees = {}
        for rev in args.rev:
            tree = _brokers.snapshot_source(str(ROOT), str(work / rev.replace("/", "_")), rev)
            for so in (ROOT / "kafkapy" / "_core").glob("*.so"):
                shutil.copy(so, Path(tree) / "kafkapy" / "_core" / so.name)
            trees[rev] = tree
        runs = {rev: [] for rev in args.rev}
        for _ in range(args.repeat):  # alternating: A B A B ...
            for rev, tree in trees.items():
                runs[rev].append(_child(tree, args.number, 1))
        print(f"load average {os.getloadavg()[0]:.1f}; per request, each run's figure (best run first)")
        for name in ("produce", "fetch"):
            for rev in args.rev:
                cpu = sorted(r[name]["cpu_us"] for r in runs[rev])
                calls = runs[rev][0][name]["python_calls"]
                print(f"{name:8s} {rev:12s} cpu us {' / '.join(map(str, cpu))}   python calls {calls}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
