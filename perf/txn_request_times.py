"""Where a transaction's requests spend their time in the broker (issue 11).

Starts one standalone kafkapy broker with its Prometheus endpoint, runs one
producer of perf/bench_transactions.py's modes (``--client java``: Apache's
Java producer, warmed up; ``confluent``: confluent-kafka) and reads the
broker's own RequestMetrics (``kafka_network_requestmetrics_*_seconds``)
before and after the timed part: per request type, how many and their mean
total time (received to answer sent), queue, local (handler) and response
send times. The coordinator process's requests report total and send
times only. Processes publish their metrics periodically, so counts near
the end of the run can be short by a few.

Run: ``.venv/bin/python perf/txn_request_times.py [--mode txn-1000] [--records 200000] [--client java]``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_transactions as bt  # noqa: E402
from _brokers import free_port, make_kafkapy  # noqa: E402

PARTS = ("total_time", "request_queue_time", "local_time", "response_send_time")
_SERIES = re.compile(r'kafka_network_requestmetrics_(\w+)_seconds_(sum|count)\{request="(\w+)"\} (\S+)')


def scrape(port: int) -> dict:
    """{(request, part, "sum" | "count"): value} from the broker's /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict = collections.defaultdict(float)
    for line in text.splitlines():
        m = _SERIES.match(line)
        if m:
            out[(m.group(3), m.group(1), m.group(2))] += float(m.group(4))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="txn-1000")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--client", choices=("confluent", "java"), default="java")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        metrics_port = free_port()
        broker = make_kafkapy(os.path.join(work, "b"), {**bt.BROKER_CONFIG, "prometheus.port": str(metrics_port)})
        broker.start()
        broker.wait_ready()
        try:
            bt.create_topic(broker, "t", 1)
            if args.client == "java":
                from _java import JavaProducerRun, java_tool

                java_tool()
                run = JavaProducerRun(broker.bootstrap, "t", args.records, args.size, args.mode, warmup=50_000)
                try:
                    run.wait_ready()
                    before = scrape(metrics_port)
                    run.go()
                    result = run.result()
                finally:
                    run.close()
                rate, commits = result.acked / result.elapsed_s, result.commits_ms
            else:
                p = bt._producer(broker, args.mode, "times")
                value = b"x" * args.size
                bt._warm_up(p, "t", 0, value, args.mode)
                before = scrape(metrics_port)
                start = time.perf_counter()
                sent, commits = bt._produce_loop(p, "t", 0, args.records, value, args.mode, start + 600)
                rate = sent / (time.perf_counter() - start)
            time.sleep(1.5)  # the processes' next metrics publication
            after = scrape(metrics_port)
        finally:
            broker.stop()
    p50 = sorted(commits)[len(commits) // 2] if commits else float("nan")
    print(f"{args.client} {args.mode}, {args.records:,} x {args.size} B: {rate:,.0f} rec/s, commit p50 {p50:.2f} ms")
    for request in sorted({k[0] for k in after}):
        n = after[(request, "total_time", "count")] - before.get((request, "total_time", "count"), 0.0)
        if n <= 0:
            continue
        cells = [f"{request:<22} {int(n):>7}"]
        for part in PARTS:
            spent = after[(request, part, "sum")] - before.get((request, part, "sum"), 0.0)
            cells.append(f"{part[:-5]} {spent / n * 1e6:>6.0f} us")
        print("  ".join(cells))


if __name__ == "__main__":
    main()
