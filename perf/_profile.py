"""py-spy profiles of kafkapy's processes under produce and consume load.

``py-spy record --format raw`` runs against every process of the broker tree
at once while a load loop (kcat-newlib, else Debian kcat) keeps the broker
busy for ``cfg.profile_seconds``. py-spy leaves out idle threads (blocked in
a syscall), so the samples are where CPU goes. kafkapy's children all carry
the supervisor's command line, so each profile is assigned to a process kind
from its own frames (a frame in ``reactor/worker.py`` makes a worker, and so
on). Per kind the report keeps the top frames by self time and, for kafkapy's
own functions, by inclusive time, as shares of that kind's samples.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections import Counter

import bench_broker as bb
import _brokers

KINDS = (("worker", "reactor/worker.py"), ("processor", "reactor/processor.py"),
         ("acceptor", "reactor/acceptor.py"), ("coordinator", "coordinator/"),
         ("supervisor", "server/supervisor.py"))
_LINE = re.compile(r"^(.*) (\d+)$")
_FRAME = re.compile(r"^(.*) \((.*?)(?::\d+)?\)$")


def _short(frame: str) -> str:
    """'append (/x/kafkapy/storage/log.py:120)' -> 'append (kafkapy/storage/log.py)'."""
    m = _FRAME.match(frame)
    if not m:
        return frame
    func, path = m.groups()
    for marker in ("kafkapy/", "site-packages/", "lib/python3.11/"):
        i = path.rfind(marker)
        if i >= 0:
            path = path[i:] if marker == "kafkapy/" else path[i + len(marker):]
            break
    return f"{func} ({path})"


def parse_raw(text: str) -> list[tuple[list[str], int]]:
    stacks = []
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m:
            stacks.append(([_short(f) for f in m.group(1).split(";")], int(m.group(2))))
    return stacks


def classify(stacks) -> str:
    seen = Counter()
    for frames, n in stacks:
        joined = ";".join(frames)
        for kind, marker in KINDS:
            if marker in joined:
                seen[kind] += n
                break
    return seen.most_common(1)[0][0] if seen else "other"


def aggregate(per_pid: dict[int, list], top: int = 10) -> dict:
    by_kind: dict[str, dict] = {}
    for pid, stacks in per_pid.items():
        kind = classify(stacks)
        k = by_kind.setdefault(kind, {"pids": [], "samples": 0, "self": Counter(),
                                      "incl": Counter()})
        k["pids"].append(pid)
        for frames, n in stacks:
            k["samples"] += n
            # The first frame is the thread/process header in py-spy's raw
            # output only with --threads; without it the leaf is the last one.
            k["self"][frames[-1]] += n
            for f in set(frames):
                if "kafkapy/" in f:
                    k["incl"][f] += n
    out = {}
    for kind, k in by_kind.items():
        total = max(1, k["samples"])
        out[kind] = {
            "processes": len(k["pids"]), "samples": k["samples"],
            "top_self": [[f, round(n / total, 3)] for f, n in k["self"].most_common(top)],
            "top_inclusive_kafkapy": [[f, round(n / total, 3)]
                                      for f, n in k["incl"].most_common(top)],
        }
    return out


def _load_loop(broker, argv_fn, env, stdin_path, seconds: float, timeout_s: float) -> int:
    """Run kcat back to back for `seconds` (at most 100 runs); returns runs."""
    end = time.monotonic() + seconds
    runs = 0
    while time.monotonic() < end and runs < 100:
        bb.run_kcat(broker, argv_fn(runs), env, stdin_path, timeout_s,
                    count_newlines=stdin_path is None)
        runs += 1
    return runs


def record(broker, seconds: int, out_dir: str, tag: str, load_fn) -> dict:
    pyspy = shutil.which("py-spy") or os.path.join(os.path.dirname(os.sys.executable), "py-spy")
    if not os.access(pyspy, os.X_OK):
        return {"error": "py-spy not found (pip install -e '.[perf]')"}
    pids = _brokers.process_tree(broker.pid)
    procs = {}
    for pid in pids:
        path = os.path.join(out_dir, f"{tag}-{pid}.txt")
        procs[pid] = (subprocess.Popen(
            [pyspy, "record", "--pid", str(pid), "--duration", str(seconds),
             "--rate", "100", "--format", "raw", "--nonblocking", "--full-filenames",
             "--output", path],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), path)
    time.sleep(1.0)   # attach before the load starts
    loops = load_fn(seconds)
    per_pid = {}
    for pid, (proc, path) in procs.items():
        try:
            proc.wait(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        try:
            with open(path) as f:
                per_pid[pid] = parse_raw(f.read())
        except OSError:
            continue
    result = aggregate(per_pid)
    result["_load_runs"] = loops
    return result


def profile_broker(broker, cfg, kcat_envs, inputs, keep, base_dir) -> dict:
    client = "kcat-newlib" if "kcat-newlib" in kcat_envs else "kcat"
    if client not in kcat_envs:
        return {"error": "no kcat for the profile load"}
    env = kcat_envs[client]
    record_size, records = cfg.shapes[0]
    topic = "profile-produce"
    bb.create_topic(broker.admin(), topic)
    out_dir = os.path.join(base_dir, "pyspy")
    os.makedirs(out_dir, exist_ok=True)
    seconds = cfg.profile_seconds
    produce_argv = lambda _i: [bb.KCAT, "-P", "-b", broker.bootstrap, "-t", topic,  # noqa: E731
                               "-p", "0", "-X", "acks=1", "-X", "linger.ms=5",
                               "-X", "batch.size=1000000", "-X", "compression.codec=none"]
    profiles = {}
    profiles["produce"] = record(
        broker, seconds, out_dir, "produce",
        lambda s: _load_loop(broker, produce_argv, env, inputs[(record_size, records)],
                             s, cfg.timeout_s))
    profiles["produce"]["_load"] = f"{client} -P {records:,} x {record_size} B acks=1, back to back"
    consume_argv = lambda _i: [bb.KCAT, "-C", "-e", "-o", "beginning", "-b",  # noqa: E731
                               broker.bootstrap, "-t", topic, "-p", "0", "-f", "\\n"
                               ] + (["-X", "fetch.queue.backoff.ms=10"]
                                    if client == "kcat-newlib" else [])
    profiles["consume"] = record(
        broker, seconds, out_dir, "consume",
        lambda s: _load_loop(broker, consume_argv, env, None, s, cfg.timeout_s))
    profiles["consume"]["_load"] = f"{client} -C of the profile topic from the beginning, back to back"
    return profiles
