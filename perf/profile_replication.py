"""Where a three-broker cluster's CPU goes while it replicates (issue 15, section 5).

Run:  .venv/bin/python perf/profile_replication.py [--records N] [--partitions 1 16]
      [--acks all] [--repeat N] [--rev A --rev B] [--perf] [--kinds handler ...]
      [--py-spy [--native] [--rate 50]]

Starts ZooKeeper and three kafkapy brokers (bench_cluster.ClusterTarget),
then per shape produces ``--records`` 1 KiB records with the confluent-kafka
producer of bench_broker (RF=3, five requests in flight) and reports the CPU
seconds per GB of the broker processes, summed per process kind (the
proctitle the supervisor sets: ``kafkapy handler-3`` is a worker,
``kafkapy replica-fetcher-0`` a fetcher) and per role (at one partition: the
leader's broker against the two followers'; at more, per broker), with the
voluntary context switches per GB (about one per wait for work: a fetcher's
round, a worker's or processor's wake-up) and the CPU per switch. CPU is read
from /proc (utime + stime) before and after the produce window, so it holds on
a loaded machine where wall-clock rates do not; the record rate does not.

With ``--py-spy`` the processes of ``--kinds`` are sampled with ``py-spy
record --format raw`` at ``--rate`` Hz during the window (``--native``: C
frames and system calls too). Sampling slows the cluster down and makes its
rounds smaller, so compare shares, not the s/GB of a profiled run. py-spy
does not tell idle processes apart here, so samples whose leaf is a wait
(``IDLE_LEAVES``) are left out; per (role, kind) the top frames by self time
and kafkapy's functions by inclusive time are printed as shares of the rest.
py-spy samples wall time: a process inside a system call counts whether the
kernel works for it or it sleeps there (a page-cache write throttled on
dirty pages), so for CPU use ``--perf``: ``perf record`` of the same
processes (on-CPU samples only), reported per (role, kind) as the kernel's
share, the interpreter's and the top symbols. ``--rev A --rev B`` runs
fresh clusters from git snapshots of both revisions in turn (an A/B on the
same machine state).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import _brokers  # noqa: E402
import _profile  # noqa: E402
import bench_broker as bb  # noqa: E402
from bench_cluster import ClusterTarget  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
# Leaf frames of a process waiting for work (py-spy cannot tell idle threads
# apart in this container): left out of the shares.
IDLE_LEAVES = ("epoll_wait", "select", "sem_wait", "sem_timedwait", "futex", "__poll", "poll (",
               "clock_nanosleep", "RequestQueue.get (", "ReplicaFetcher.wait (", "Selector.select (")
# With --native an unnamed libc leaf under one of these is the wait's system call.
IDLE_CALLERS = ("RequestQueue.get (", "ReplicaFetcher.wait (", "Selector.select (")


def is_idle(frames) -> bool:
    leaf = frames[-1]
    if any(m in leaf for m in IDLE_LEAVES):
        return True
    return leaf.startswith("0x") and any(c in f for f in frames for c in IDLE_CALLERS)


def kind_of(pid: int) -> str:
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "gone"
    if not title.startswith("kafkapy "):
        return "supervisor"
    name = title.split()[1]
    return name.rstrip("0123456789").rstrip("-") or name


def cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def switches(pid: int) -> int:
    """Voluntary context switches: about one per wait for work (a round)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def snapshot(cluster) -> dict:
    out = {}
    for broker_id, b in enumerate(cluster.brokers, 1):
        for pid in _brokers.process_tree(b.pid):
            out[pid] = (broker_id, kind_of(pid), cpu_ticks(pid), switches(pid))
    return out


def leaders_of(cluster, topic: str) -> dict:
    md = cluster.admin().list_topics(topic, timeout=10)
    return {p: pm.leader for p, pm in md.topics[topic].partitions.items()}


def run_shape(cluster, partitions: int, records: int, acks: str, spy: bool, rate: int, tag: str,
              kinds=(), native=False, use_perf=False) -> None:
    topic = f"prof-{partitions}-{acks}-{tag}-{int(time.time())}"
    bb.create_topic(cluster.admin(), topic, partitions=partitions, replication_factor=3)
    time.sleep(2)
    leaders = leaders_of(cluster, topic)
    before = snapshot(cluster)
    spies = []
    tmp = tempfile.mkdtemp(prefix="kafkapy-prof-")
    perf_proc = None
    perf_out = os.path.join(tmp, "perf.data")
    if use_perf:
        pids = [pid for pid, (_b, kind, *_r) in before.items() if not kinds or kind in kinds]
        perf_proc = subprocess.Popen(["perf", "record", "-F", "499", "-o", perf_out, "-p",
                                      ",".join(map(str, pids))], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    if spy:
        for pid, (broker_id, kind, *_rest) in before.items():
            if kinds and kind not in kinds:
                continue
            out = os.path.join(tmp, f"{broker_id}-{kind}-{pid}.txt")
            spies.append((pid, out, subprocess.Popen(
                [str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw", "--rate", str(rate), *(["--native"] if native else []), "--pid", str(pid),
                 "--output", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        time.sleep(1.5)
    gen, _client_cpu = bb.run_loadgens(cluster, "_produce", [{
        "bootstrap": cluster.bootstrap, "topic": topic, "acks": acks, "record_size": 1024, "records": records,
        "timeout_s": 300, "partitions": partitions,
        "producer_conf": {"max.in.flight.requests.per.connection": 5}}], 300)
    after = snapshot(cluster)
    if perf_proc is not None:
        perf_proc.send_signal(2)
        perf_proc.wait(60)
    for _pid, _out, proc in spies:
        proc.send_signal(2)
    for _pid, _out, proc in spies:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    gb = records * 1024 / 1e9
    wall = gen[0]["wall_s"]
    lead_brokers = Counter(leaders.values())
    print(f"\n== 1 KiB x {partitions}p acks={acks}: {records / wall:,.0f} rec/s, leaders {dict(lead_brokers)}")
    per = defaultdict(float)
    waits = defaultdict(int)
    total = 0.0
    for pid, (broker_id, kind, t0, s0) in before.items():
        if pid not in after:
            continue
        d = (after[pid][2] - t0) / TICK
        role = "leader" if partitions == 1 and broker_id == leaders[0] else (
            "follower" if partitions == 1 else f"b{broker_id}")
        per[(role, kind)] += d
        waits[(role, kind)] += after[pid][3] - s0
        total += d
    print(f"total {total / gb:.2f} CPU s/GB")
    for (role, kind), d in sorted(per.items(), key=lambda kv: -kv[1]):
        if d > 0.005 * total:
            print(f"  {role:9s} {kind:18s} {d / gb:6.2f} s/GB  {100 * d / total:5.1f} %  "
                  f"{waits[(role, kind)] / gb:8,.0f} waits/GB  {1e6 * d / max(1, waits[(role, kind)]):6.0f} us/wait")
    if perf_proc is not None:
        perf_report(perf_out, {pid: (("leader" if partitions == 1 and b == leaders[0] else
                                       "follower" if partitions == 1 else f"b{b}"), kind)
                               for pid, (b, kind, *_r) in before.items()})
    if spy:
        grouped = defaultdict(dict)
        for pid, out, _proc in spies:
            broker_id, kind = before[pid][:2]
            role = "leader" if partitions == 1 and broker_id == leaders[0] else "follower"
            try:
                grouped[(role, kind)][pid] = _profile.parse_raw(Path(out).read_text())
            except OSError:
                pass
        for (role, kind), per_pid in sorted(grouped.items()):
            samples = sum(n for stacks in per_pid.values() for _f, n in stacks)
            if samples < 20:
                continue
            selfc, incl = Counter(), Counter()
            idle = sum(n for stacks in per_pid.values() for frames, n in stacks if is_idle(frames))
            busy = samples - idle
            print(f"\n-- {role} {kind}: {samples} samples, {busy} busy (shares below: of busy samples)")
            samples = max(1, busy)
            for stacks in per_pid.values():
                for frames, n in stacks:
                    if is_idle(frames):
                        continue
                    selfc[frames[-1]] += n
                    for f in set(frames):
                        incl[f] += n
            print("   self:")
            for f, n in selfc.most_common(14):
                print(f"     {100 * n / samples:5.1f} %  {f}")
            print("   inclusive (kafkapy):")
            for f, n in [x for x in incl.most_common(80) if "kafkapy/" in x[0]][:22]:
                print(f"     {100 * n / samples:5.1f} %  {f}")


def perf_report(path: str, roles: dict) -> None:
    """On-CPU samples (``perf record``) per (role, kind): the kernel's share
    (``[k]`` symbols), the interpreter's (``_Py``/``Py`` symbols) and the top
    symbols."""
    text = subprocess.run(["perf", "report", "-i", path, "--sort", "pid,sym", "--stdio", "-F", "period,pid,sym"],
                          capture_output=True, text=True, timeout=300).stdout
    per = defaultdict(Counter)
    for line in text.splitlines():
        parts = line.split()
        if not parts or line.startswith("#") or not parts[0].isdigit():
            continue
        marks = [i for i, x in enumerate(parts) if x in ("[k]", "[.]")]
        if not marks:
            continue
        try:
            pid = int(parts[1].split(":")[0])
        except ValueError:
            continue
        i = marks[0]
        per[roles.get(pid, ("?", "?"))][f"{parts[i]} {' '.join(parts[i + 1:])}"] += int(parts[0])
    for key in sorted(per, key=lambda k: -sum(per[k].values())):
        total = sum(per[key].values()) or 1
        kernel = sum(v for sym, v in per[key].items() if sym.startswith("[k]"))
        interp = sum(v for sym, v in per[key].items() if sym.startswith("[.] _Py") or sym.startswith("[.] Py"))
        print(f"\n-- perf {key[0]} {key[1]}: kernel {100 * kernel / total:.0f} %, "
              f"interpreter (_Py*/Py*) {100 * interp / total:.0f} %, other user {100 * (total - kernel - interp) / total:.0f} %")
        for sym, v in per[key].most_common(12):
            print(f"     {100 * v / total:5.1f} %  {sym}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=600_000)
    p.add_argument("--partitions", type=int, nargs="+", default=[1, 16])
    p.add_argument("--acks", default="all")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--py-spy", action="store_true")
    p.add_argument("--rate", type=int, default=50)
    p.add_argument("--kinds", nargs="*", default=["handler", "processor", "replica-fetcher"],
                   help="the process kinds py-spy or perf samples (fewer: less disturbance)")
    p.add_argument("--native", action="store_true", help="py-spy --native: C frames and syscalls too")
    p.add_argument("--perf", action="store_true",
                   help="perf record the --kinds processes (on-CPU samples only, kernel included)")
    p.add_argument("--rev", action="append", default=[],
                   help="run the brokers from a snapshot of this git revision (repeatable: the revisions "
                        "take turns, a fresh cluster each, for an A/B of CPU per GB); default: the tree")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafkapy-prof-cluster-") as tmp:
        sources = {rev: _brokers.snapshot_source(str(HERE.parent), os.path.join(tmp, f"src-{n}"), rev)
                   for n, rev in enumerate(args.rev)} or {None: None}
        for i in range(args.repeat):
            for n, (rev, src) in enumerate(sources.items()):
                if rev is not None:
                    print(f"\n#### revision {rev} (round {i + 1})")
                workdir = os.path.join(tmp, f"cluster-{i}-{n}")
                cluster = ClusterTarget(workdir, {}, src=src)
                try:
                    cluster.start()
                    for partitions in args.partitions:
                        run_shape(cluster, partitions, args.records, args.acks, args.py_spy, args.rate, str(i),
                                  args.kinds, args.native, args.perf)
                finally:
                    cluster.stop()
                    # Gigabytes of logs left behind would make the next
                    # cluster's page-cache writes pay for reclaim.
                    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
