"""py-spy profile of a kafkapy broker under transactional load (issue 11).

Starts one standalone broker (perf/bench_transactions.py's settings), then
``--producers`` producer processes run back-to-back ``txn-N`` transactions
(``--txn``, 1,000 records of ``--size`` bytes by default) for ``--seconds``
while ``py-spy record`` samples every process of the broker's tree
(perf/_profile.py: coordinator, workers, processors, each classified by its
own frames). Prints, per process kind, the top frames by self time and
kafkapy's functions by inclusive time (shares of that kind's samples), and
the broker CPU per transaction over the window, and that CPU per process
kind from /proc (user + system: py-spy's wall-clock samples count a process
preempted in a system call as busy, /proc does not). ``--mode idempotent``
runs the same load without transactions (per 1,000 records), for
comparison. Every loop is bounded.

Run: ``.venv/bin/python perf/txn_profile.py [--seconds 20] [--producers 1] [--txn 1000]``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _profile  # noqa: E402
from _brokers import _read_stat, process_tree, tree_cpu_seconds, CLK_TCK  # noqa: E402

import bench_transactions as bt  # noqa: E402


def _cpu_by_pid(root_pid: int) -> dict[int, tuple[float, float]]:
    """(utime, stime) in seconds of every process of the broker's tree."""
    out = {}
    for pid in process_tree(root_pid):
        fields = _read_stat(pid)
        if fields is not None:
            out[pid] = (int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK)
    return out


def _cpu_by_kind(before: dict, after: dict, out_dir: str, tag: str) -> dict[str, list]:
    """[user, system] CPU seconds per process kind over the window (kinds
    from each process's own py-spy frames, as perf/_profile.py classifies them)."""
    kinds: dict[str, list] = {}
    for path in glob.glob(os.path.join(out_dir, f"{tag}-*.txt")):
        pid = int(path.rsplit("-", 1)[1][:-4])
        with open(path) as f:
            kind = _profile.classify(_profile.parse_raw(f.read()))
        used = kinds.setdefault(kind, [0.0, 0.0])
        for i in (0, 1):
            used[i] += after.get(pid, (0.0, 0.0))[i] - before.get(pid, (0.0, 0.0))[i]
    return kinds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--producers", type=int, default=1)
    ap.add_argument("--txn", type=int, default=1000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--mode", choices=("txn", "idempotent"), default="txn")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--out", help="keep py-spy's raw profiles in this folder")
    ap.add_argument("--client", choices=("confluent", "java"), default="confluent",
                    help="java: Apache's Java producers (one JVM each, one long round, warmed up first)")
    args = ap.parse_args()
    java = bt.JavaLoad(20_000, {}) if args.client == "java" else None
    mode = f"txn-{args.txn}" if args.mode == "txn" else "idempotent"
    value = b"x" * args.size
    with tempfile.TemporaryDirectory() as work:
        broker = bt.start_broker(os.path.join(work, "b"), "tree")
        try:
            topic = "profile"
            bt.create_topic(broker, topic, args.producers)
            done = {}

            cpu = {}

            def load(seconds):
                cpu["before"] = _cpu_by_pid(broker.pid)
                # Enough records that the fleet outlasts the recording; the
                # fleet's own 600 s bound caps it.
                deadline = time.monotonic() + seconds
                rounds = 0
                while time.monotonic() < deadline and rounds < 50:
                    cpu0 = tree_cpu_seconds(broker.pid)
                    if java is not None:  # one JVM per producer for the whole window: its JIT stays warm
                        records = args.producers * args.txn * max(50, int(seconds * 400))
                        row = java.run(broker, topic, records, args.size, mode, args.producers)
                    else:
                        row = bt.run_fleet(broker, topic, args.producers * args.txn * 50, value, mode,
                                           f"p{rounds}", args.producers)
                    row["broker_cpu_s"] = tree_cpu_seconds(broker.pid) - cpu0
                    for k in ("records", "transactions", "broker_cpu_s"):
                        done[k] = done.get(k, 0) + row.get(k, 0)
                    done.setdefault("rec_per_s", []).append(row["rec_per_s"])
                    rounds += 1
                cpu["after"] = _cpu_by_pid(broker.pid)
                return rounds

            out_dir = args.out or os.path.join(work, "profiles")
            os.makedirs(out_dir, exist_ok=True)
            result = _profile.record(broker, args.seconds, out_dir, mode, load)
            by_kind = _cpu_by_kind(cpu["before"], cpu["after"], out_dir, mode)
        finally:
            broker.stop()
    rates = done.pop("rec_per_s", [])
    if done.get("transactions"):
        done["broker_cpu_ms_per_txn"] = round(done["broker_cpu_s"] * 1000 / done["transactions"], 2)
    done["rec_per_s_median"] = round(sorted(rates)[len(rates) // 2]) if rates else None
    per = done.get("transactions") or done.get("records", 0) / 1000 or 1
    unit = "ms per transaction" if done.get("transactions") else "ms per 1,000 records"
    print(json.dumps(done))
    print(f"broker CPU by process kind (/proc), {unit}, user + system: "
          + ", ".join(f"{k} {u * 1000 / per:.2f} + {s * 1000 / per:.2f}" for k, (u, s) in sorted(by_kind.items())
                      if u + s > 0))
    for kind, k in sorted(result.items()):
        if kind.startswith("_"):
            continue
        print(f"\n== {kind}: {k['processes']} process(es), {k['samples']} samples")
        print("  self:")
        for f, share in k["top_self"][:args.top]:
            print(f"    {share:6.1%}  {f}")
        print("  inclusive (kafkapy):")
        for f, share in k["top_inclusive_kafkapy"][:args.top]:
            print(f"    {share:6.1%}  {f}")


if __name__ == "__main__":
    main()
