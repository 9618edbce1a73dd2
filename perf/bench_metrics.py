"""Cost of Prometheus metrics: the same broker with metrics off and on, one run.

Run:  /tmp/venv/bin/python perf/bench_metrics.py [--quick] [--repeat 3]

Each repeat starts a broker with ``prometheus.port=0`` and one with a free
port, alternately (off, on, off, on, ...), so drift of the machine hits both
alike, and runs two workloads against each in a separate load-generator
process (confluent-kafka):

* ``produce 1 KiB``: N records of 1024 bytes, acks=1, linger.ms=5,
  batch.size=1000000: bytes through the append path (records/s);
* ``small requests``: M records, each followed by ``flush()``: one Produce
  round trip at a time, so per-request costs (the probes' timing, error
  walk, histogram updates) dominate (requests/s).

With metrics on, a scraper thread in the driver fetches /metrics every 1 s,
as Prometheus would, so the scrape-time cost is in the figure too. The
report is the median of each side and the relative cost (1 - on/off); the
budget is 5 %. Beside the rates it reports the broker's CPU time (utime +
stime of the whole process tree) per 1000 records, which other load on the
machine disturbs far less than wall-clock rates.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _brokers  # noqa: E402


def _loadgen(bootstrap: str, workload: str, count: int, topic: str) -> None:
    """Child process: run one workload, print its rate as JSON."""
    from confluent_kafka import Producer

    if workload == "produce":
        p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1000000,
                      "queue.buffering.max.messages": 1000000, "enable.idempotence": False})
        p.list_topics(topic, timeout=10)
        value = b"x" * 1024
        start = time.perf_counter()
        for _ in range(count):
            while True:
                try:
                    p.produce(topic, value)
                    break
                except BufferError:
                    p.poll(0.01)
            p.poll(0)
        assert p.flush(120) == 0
    else:
        p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0, "enable.idempotence": False})
        p.list_topics(topic, timeout=10)
        start = time.perf_counter()
        for _ in range(count):
            p.produce(topic, b"s" * 16)
            assert p.flush(30) == 0
    elapsed = time.perf_counter() - start
    print(json.dumps({"rate": count / elapsed, "elapsed_s": elapsed}))


def _probe_cost(n: int = 200_000) -> None:
    """Child process: CPU per request of every probe call one Produce request makes.

    Runs the same calls the processor, the worker and the log make for one
    request, with real probes writing to a temporary multiprocess directory,
    and with null probes; prints the difference in us per request. Less
    disturbed by other load than the end-to-end rates.
    """
    import os

    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="bench-probes-")
    from kafkapy import metrics
    from kafkapy.metrics import exporter, probes
    from kafkapy.protocol.api import API_TABLE
    from kafkapy.server.handlers import construct

    resp = construct(API_TABLE[0].response_class(9), {"throttle_time": 0, "responses": [
        {"name": "t", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 0,
                                                "log_append_time": -1, "log_start_offset": 0}]}]})

    def one_pass(count: int) -> float:
        net, req, lg = probes.network, probes.request, probes.log
        mono = time.monotonic
        start = time.process_time()
        for _ in range(count):
            t0 = mono()
            net.selected(mono() - t0)            # processor loop
            net.maybe_publish(t0)
            req.waited(mono() - t0)              # worker loop
            req.request_handled(0, 0.0001, 0.0003)
            lg.appended("t", 1100, 1)
            req.response_built(0, resp)
            req.maybe_publish(mono())
            net.request_completed(0, 0.0005, mono() - t0)
        return (time.process_time() - start) / count * 1e6

    metrics._state = {"metrics": exporter.Metrics(), "api_names": {0: "Produce"}, "error_names": {0: "NONE"},
                      "listener_names": ["PLAINTEXT"]}
    on, off = [], []
    for _ in range(5):
        metrics.start_process("handler-0")
        on.append(one_pass(n // 5))
        probes.install()  # null probes, as with prometheus.port=0
        off.append(one_pass(n // 5))
    print(json.dumps({"probe_us_per_request": statistics.median(on) - statistics.median(off)}))


class Scraper(threading.Thread):
    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.scrapes = 0

    def run(self):
        while not self.stop.wait(1.0):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
                    r.read()
                self.scrapes += 1
            except OSError:
                pass


def run_one(metrics_on: bool, workloads: dict[str, int]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as work:
        overrides = {"num.io.threads": "2", "num.network.threads": "2"}
        mport = _brokers.free_port() if metrics_on else 0
        overrides["prometheus.port"] = str(mport)
        broker = _brokers.make_kafkapy(work, overrides)
        with broker:
            broker.start()
            broker.wait_ready()
            scraper = Scraper(mport) if metrics_on else None
            if scraper:
                scraper.start()
            out = {}
            for name, count in workloads.items():
                topic = f"bench-{name}"
                from confluent_kafka.admin import NewTopic

                broker.admin().create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                cpu0 = broker.cpu_seconds()
                r = subprocess.run([sys.executable, __file__, "_loadgen", broker.bootstrap, name, str(count), topic],
                                   capture_output=True, text=True, timeout=600)
                if r.returncode != 0:
                    raise RuntimeError(f"{name} failed: {r.stderr[-2000:]}\n{broker.log_tail()}")
                out[name] = json.loads(r.stdout.strip().splitlines()[-1])["rate"]
                # Broker CPU per 1000 records: robust to other load on the
                # machine, which moves wall-clock rates by tens of percent.
                out[name + "_cpu_ms_per_1k"] = (broker.cpu_seconds() - cpu0) * 1e6 / count
            if scraper:
                scraper.stop.set()
                scraper.join(5)
                out["scrapes"] = scraper.scrapes
            return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="10x fewer records")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "results" / "metrics.json"))
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    workloads = {"produce": 200_000 // scale, "small": 5_000 // scale}
    results = {"off": [], "on": []}
    for i in range(args.repeat):
        for side in ("off", "on"):
            r = run_one(side == "on", workloads)
            results[side].append(r)
            print(f"repeat {i + 1} metrics {side}: " + ", ".join(f"{k}={v:,.0f}" for k, v in r.items()), flush=True)
    summary = {}
    for name in workloads:
        off = statistics.median(r[name] for r in results["off"])
        on = statistics.median(r[name] for r in results["on"])
        cpu_off = statistics.median(r[name + "_cpu_ms_per_1k"] for r in results["off"])
        cpu_on = statistics.median(r[name + "_cpu_ms_per_1k"] for r in results["on"])
        summary[name] = {"off_per_s": off, "on_per_s": on, "cost_pct": 100 * (1 - on / off),
                         "cpu_ms_per_1k_off": cpu_off, "cpu_ms_per_1k_on": cpu_on,
                         "cpu_cost_pct": 100 * (cpu_on / cpu_off - 1)}
    r = subprocess.run([sys.executable, __file__, "_probes"], capture_output=True, text=True, timeout=300)
    probe_us = json.loads(r.stdout.strip().splitlines()[-1])["probe_us_per_request"] if r.returncode == 0 else None
    report = {"probe_us_per_request": probe_us, "workloads": workloads, "runs": results, "summary": summary,
              "machine": _brokers.__dict__.get("machine_info", lambda: {})()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print("\n| workload | metrics off | metrics on | cost | broker CPU ms/1k off | on | CPU cost |\n|---|---|---|---|---|---|---|")
    labels = {"produce": "produce 1 KiB acks=1 (records/s)", "small": "small requests, 1 in flight (requests/s)"}
    for name, s in summary.items():
        print(f"| {labels[name]} | {s['off_per_s']:,.0f} | {s['on_per_s']:,.0f} | {s['cost_pct']:+.1f} % | "
              f"{s['cpu_ms_per_1k_off']:.0f} | {s['cpu_ms_per_1k_on']:.0f} | {s['cpu_cost_pct']:+.1f} % |")
    if probe_us is not None:
        cpu_us = summary["small"]["cpu_ms_per_1k_off"]  # ms per 1000 = us per request
        print(f"\nprobe calls per Produce request: {probe_us:.2f} us of CPU = "
              f"{100 * probe_us / cpu_us:.1f} % of the broker's {cpu_us:.0f} us per small request (metrics off)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_loadgen":
        _loadgen(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) > 1 and sys.argv[1] == "_probes":
        _probe_cost()
    else:
        raise SystemExit(main())
