"""Where a three-broker cluster's CPU goes while it replicates (issue 15, section 5).

Run:  .venv/bin/python perf/profile_replication.py [--records N] [--partitions 1 16]
      [--acks all] [--repeat N] [--py-spy [--native] [--rate 50] [--kinds handler ...]]

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
"""

from __future__ import annotations

import argparse
import os
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
              kinds=(), native=False) -> None:
    topic = f"prof-{partitions}-{acks}-{tag}-{int(time.time())}"
    bb.create_topic(cluster.admin(), topic, partitions=partitions, replication_factor=3)
    time.sleep(2)
    leaders = leaders_of(cluster, topic)
    before = snapshot(cluster)
    spies = []
    tmp = tempfile.mkdtemp(prefix="kafkapy-prof-")
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
            idle = sum(n for stacks in per_pid.values() for frames, n in stacks
                       if any(m in frames[-1] for m in IDLE_LEAVES))
            busy = samples - idle
            print(f"\n-- {role} {kind}: {samples} samples, {busy} busy (shares below: of busy samples)")
            samples = max(1, busy)
            for stacks in per_pid.values():
                for frames, n in stacks:
                    if any(m in frames[-1] for m in IDLE_LEAVES):
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=600_000)
    p.add_argument("--partitions", type=int, nargs="+", default=[1, 16])
    p.add_argument("--acks", default="all")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--py-spy", action="store_true")
    p.add_argument("--rate", type=int, default=50)
    p.add_argument("--kinds", nargs="*", default=["handler", "processor", "replica-fetcher"],
                   help="the process kinds py-spy samples (fewer: less disturbance)")
    p.add_argument("--native", action="store_true", help="py-spy --native: C frames and syscalls too")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafkapy-prof-cluster-") as tmp:
        cluster = ClusterTarget(os.path.join(tmp, "cluster"), {})
        try:
            cluster.start()
            for i in range(args.repeat):
                for partitions in args.partitions:
                    run_shape(cluster, partitions, args.records, args.acks, args.py_spy, args.rate, str(i),
                              args.kinds, args.native)
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
