"""Consumer-group benchmark: kafkapy beside tansu in the same run.

Figures per broker:
* ``stable_s`` — time from 10 confluent-kafka consumers subscribing (cold:
  new group, coordinator topic not yet used for it) until every one has a
  non-empty assignment covering the topic's 10 partitions exactly once.
  Clients use default settings; the broker's initial rebalance delay is 0
  (kafkapy: ``group.initial.rebalance.delay.ms=0``; tansu has none).
* ``commits_per_s`` — synchronous ``commit(asynchronous=False)`` calls per
  second from one member of a stable group, each committing one partition.
* ``cpu_ms_per_commit`` — broker CPU (whole process tree) per commit.

Every loop is bounded in count and time. Run:
``/tmp/venv/bin/python perf/bench_groups.py [--commits N] [--brokers kafkapy,tansu]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _brokers import make_kafkapy, make_tansu  # noqa: E402

import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

MEMBERS = 10
PARTITIONS = 10
STABLE_TIMEOUT_S = 60.0
QUIET = {"log_level": 0, "logger": lambda *a: None}


def _create_topic(broker, name):
    fs = broker.admin().create_topics([NewTopic(name, PARTITIONS, 1)])
    fs[name].result(30)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(PARTITIONS):
        p.produce(name, value=b"x", partition=i)
    p.flush(10)


def time_to_stable(broker) -> float:
    topic = f"bg-{uuid.uuid4().hex[:6]}"
    _create_topic(broker, topic)
    group = f"stable-{uuid.uuid4().hex[:6]}"
    consumers = [ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "auto.offset.reset": "earliest"}) for _ in range(MEMBERS)]
    stop = threading.Event()
    started = time.monotonic()
    for c in consumers:
        c.subscribe([topic])

    # Each consumer is touched only by its own thread (librdkafka's
    # assignment() from another thread while poll() runs can block), which
    # publishes its current assignment for the main thread to check.
    owned = [set() for _ in consumers]

    def poll(i, c):
        while not stop.is_set():
            c.poll(0.05)
            owned[i] = {tp.partition for tp in c.assignment()}

    threads = [threading.Thread(target=poll, args=(i, c)) for i, c in enumerate(consumers)]
    for t in threads:
        t.start()
    stable_s = float("nan")
    try:
        deadline = started + STABLE_TIMEOUT_S
        while time.monotonic() < deadline:
            parts = list(owned)
            if all(parts) and sum(map(len, parts)) == PARTITIONS and set().union(*parts) == set(range(PARTITIONS)):
                stable_s = time.monotonic() - started
                break
            time.sleep(0.01)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for c in consumers:
            c.close()
    return stable_s


def commit_rate(broker, commits: int) -> tuple[float, float]:
    topic = f"bc-{uuid.uuid4().hex[:6]}"
    _create_topic(broker, topic)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"commit-{uuid.uuid4().hex[:6]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    deadline = time.monotonic() + STABLE_TIMEOUT_S
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.05)
    tps = list(c.assignment())
    cpu0 = broker.cpu_seconds()
    started = time.monotonic()
    done = 0
    for i in range(commits):
        tp = tps[i % len(tps)]
        c.commit(offsets=[ck.TopicPartition(tp.topic, tp.partition, i + 1)], asynchronous=False)
        done += 1
        if time.monotonic() - started > 60:
            break
    elapsed = time.monotonic() - started
    cpu = broker.cpu_seconds() - cpu0
    c.close()
    return done / elapsed, cpu * 1000 / done


def run(name, commits):
    with tempfile.TemporaryDirectory(prefix=f"bench-groups-{name}-") as work:
        if name == "kafkapy":
            broker = make_kafkapy(work, {"offsets.topic.replication.factor": "1",
                                         "group.initial.rebalance.delay.ms": "0"})
        else:
            broker = make_tansu(work)
        with broker:
            broker.start()
            broker.wait_ready()
            broker.remember_tree()
            stable = time_to_stable(broker)
            rate, cpu_ms = commit_rate(broker, commits)
            return {"broker": name, "stable_s": round(stable, 3), "commits_per_s": round(rate, 1),
                    "cpu_ms_per_commit": round(cpu_ms, 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=2000)
    ap.add_argument("--brokers", default="kafkapy,tansu")
    args = ap.parse_args()
    rows = []
    for name in args.brokers.split(","):
        try:
            rows.append(run(name, args.commits))
        except Exception as exc:  # one broker failing must not hide the other's figures
            rows.append({"broker": name, "error": repr(exc)})
        print(json.dumps(rows[-1]), flush=True)
    print(f"{'broker':8} {'stable_s':>9} {'commits/s':>10} {'cpu ms/commit':>14}")
    for r in rows:
        if "error" in r:
            print(f"{r['broker']:8} error: {r['error']}")
        else:
            print(f"{r['broker']:8} {r['stable_s']:9.3f} {r['commits_per_s']:10.1f} {r['cpu_ms_per_commit']:14.3f}")


if __name__ == "__main__":
    main()
