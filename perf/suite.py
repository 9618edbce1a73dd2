"""The performance suite: kafkapy against tansu and the machine's limits.

Run:  /tmp/venv/bin/python perf/suite.py [--quick]      (or `make bench`)

Writes perf/results/suite.json (every run), perf/results/suite.md (the
tables) and perf/results/suite_*.png (plots). One run measures, side by side:

1. the machine's limits (perf/_limits.py): loopback TCP, os.sendfile from
   the page cache, sequential write with and without fsync, CRC-32C;
2. tansu (memory storage) and 3. kafkapy (defaults, logs in a temp dir),
   one broker at a time so they never share the 2 cores:
   * produce 100 B and 1 KiB records to 1 and 16 partitions, acks=1 and
     acks=all, with confluent-kafka, kcat (Debian's librdkafka 2.0.2, kafkapy
     only, since it cannot parse tansu's ApiVersions v3) and kcat-newlib (the
     same kcat with confluent-kafka's librdkafka; the like-for-like row), and
     kafkapy's own producer when kafkapy.client.KafkaProducer exists;
   * consume the same topics with the same clients;
   * end-to-end latency (produce timestamp to consume) at 1k, 10k and 100k
     records/s of 1 KiB;
   * small requests: one 100-byte record per Produce request on one
     connection, acks=1, 1 and 5 requests in flight (perf/_loadgens.py);
   * connections: 1, 100 and 1,000 connections with one request each in
     flight;
   * partitions: 1, 100, 1,000 and 10,000 partitions on a fresh broker:
     first fixed total rates (--scaling-rates, 20k and 100k rec/s of 100 B
     for 10 s) spread over the cold topic's partitions by a raw generator
     (achieved rate, due-to-acknowledgement latency, broker CPU), then the
     topic's maximum produce rate with confluent-kafka, broker PSS, and
     (kafkapy) start-up time with data in every partition;
   * broker CPU seconds per GB produced and consumed (every produce/consume
     run);
   * (kafkapy) py-spy profiles of every broker child under produce and
     consume load, aggregated per process kind.

Each workload runs --repeat times (default 3) and reports min/median/max;
the 1-minute load average is kept with every run because other work on the
same 2 cores skews figures. Everything is bounded in records and seconds;
brokers are stopped by PID (perf/_brokers.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(REPO))

import _brokers  # noqa: E402
import _limits  # noqa: E402
import bench_broker as bb  # noqa: E402

LOADGENS = str(HERE / "_loadgens.py")


def log(msg: str) -> None:
    print(f"[suite {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def loadavg() -> float:
    return round(os.getloadavg()[0], 2)


def stats(values: list[float]) -> dict:
    v = sorted(x for x in values if x is not None)
    if not v:
        return {"min": None, "median": None, "max": None}
    return {"min": v[0], "median": v[len(v) // 2], "max": v[-1]}


def kafkapy_client_available() -> str | None:
    """None if kafkapy.client.KafkaProducer imports, else why not."""
    try:
        from kafkapy.client import KafkaProducer  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return f"kafkapy.client.KafkaProducer not available ({type(exc).__name__}: {exc})"
    return None


# ---------------------------------------------------------------- children

class Child:
    """A _loadgens.py child speaking the READY / go / JSON-line protocol."""

    def __init__(self, kind: str, args: dict):
        self.proc = subprocess.Popen(
            [sys.executable, LOADGENS, kind, json.dumps(args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=str(REPO))

    def ready(self, timeout_s: float = 60) -> None:
        line = bb._readline(self.proc, timeout_s)
        if line != "READY":
            raise bb.WorkloadError(f"load generator said {line!r}")

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def result(self, timeout_s: float) -> dict:
        return json.loads(bb._readline(self.proc, timeout_s))

    def kill(self) -> None:
        bb._kill(self.proc)


def run_child(broker, kind: str, args: dict, timeout_s: float) -> tuple[dict, float]:
    child = Child(kind, args)
    try:
        child.ready()
        cpu0 = broker.cpu_seconds()
        child.go()
        res = child.result(timeout_s + 30)
        return res, broker.cpu_seconds() - cpu0
    finally:
        child.kill()


def delete_topics(broker, topics: list[str]) -> None:
    """Drop topics no longer needed (tansu holds them in memory)."""
    if not topics:
        return
    try:
        futures = broker.admin().delete_topics(topics, operation_timeout=30)
        for f in futures.values():
            try:
                f.result(timeout=30)
            except Exception:  # noqa: BLE001 - best effort
                pass
    except Exception:  # noqa: BLE001
        pass


# ---------------------------------------------------------------- produce / consume

def size_label(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size // 1024} KiB"


def kafkapy_produce_workload(broker, record_size, records, acks, topic,
                             timeout_s, partitions) -> dict:
    result = {"kind": "produce", "client": "kafkapy-client", "record_size": record_size,
              "records": records, "acks": acks, "topic": topic, "partitions": partitions}
    bb.create_topic(broker.admin(), topic, partitions=partitions)
    gen, cpu_s = run_child(broker, "kproduce", {
        "bootstrap": broker.bootstrap, "topic": topic, "acks": acks,
        "record_size": record_size, "records": records, "timeout_s": timeout_s,
        "partitions": partitions}, timeout_s)
    result["client_report"] = gen
    if gen["timed_out"]:
        result["error"] = "kafkapy producer timed out"
    bb._finish(result, gen["wall_s"], records, record_size * records, cpu_s)
    if "error" not in result:
        result["verify"] = bb.verify_count(broker.bootstrap, topic, records,
                                           partitions=partitions)
        if not result["verify"]["ok"]:
            result["error"] = f"count mismatch: {result['verify']}"
    return result


def summarize(runs: list[dict], key: str) -> dict:
    ok = [r for r in runs if "error" not in r]
    out = {"repeats": len(runs), "ok_runs": len(ok),
           key: stats([r.get(key) for r in ok]),
           "mb_per_s": stats([r.get("mb_per_s") for r in ok]),
           "cpu_s_per_gb": stats([r.get("cpu_s_per_gb") for r in ok]),
           "loadavg_1m": stats([r.get("loadavg_1m") for r in runs])}
    errs = [r["error"] for r in runs if "error" in r]
    if errs:
        out["error"] = errs[0]
    out["runs"] = [{k: r.get(k) for k in ("topic", "wall_s", "records_per_s", "mb_per_s",
                                          "broker_cpu_s", "cpu_s_per_gb", "loadavg_1m",
                                          "broker_pss_bytes", "error")} for r in runs]
    return out


def throughput_matrix(broker, cfg, kcat_envs, inputs, rows: list) -> dict:
    """Produce then consume every shape; returns {(size, parts): topic} kept."""
    name = broker.name
    # "confluent-kafka x2": two producer processes, one per core, sharing the
    # records (produce only): where one producer process is the bottleneck.
    clients = ["confluent-kafka", "confluent-kafka x2", "kcat-newlib"]
    if name == "kafkapy":
        clients.append("kcat")
    if cfg.kafkapy_client_note is None:
        clients.append("kafkapy-client")
    keep: dict[tuple, str] = {}
    for record_size, records in cfg.shapes:
        for partitions in cfg.partition_counts:
            for acks in ("1", "all"):
                for client in clients:
                    if client.startswith("kcat") and client not in kcat_envs:
                        continue
                    wid = f"produce {size_label(record_size)} x{partitions}p acks={acks}"
                    log(f"[{name}] {wid} ({client})")
                    runs = []
                    for attempt in range(cfg.repeat):
                        topic = (f"p-{client.replace(' ', '')}-{record_size}-{partitions}-"
                                 f"{acks}-{attempt}")
                        try:
                            if client == "kafkapy-client":
                                res = kafkapy_produce_workload(
                                    broker, record_size, records, acks, topic,
                                    cfg.timeout_s, partitions)
                            else:
                                res = bb.produce_workload(
                                    broker, client, kcat_envs.get(client), record_size,
                                    records, acks, topic, inputs[(record_size, records)],
                                    cfg.timeout_s, partitions=partitions,
                                    processes=2 if client == "confluent-kafka x2" else 1)
                        except Exception as exc:  # noqa: BLE001
                            res = {"error": f"{type(exc).__name__}: {exc}", "topic": topic}
                        res["loadavg_1m"] = loadavg()
                        res["broker_pss_bytes"] = broker.pss_bytes() if broker.alive() else None
                        if "error" in res:
                            res["broker_log_tail"] = broker.log_tail(10)
                            log(f"    ERROR {res['error'][:200]}")
                        else:
                            log(f"    {res['records_per_s']:,.0f} rec/s {res['mb_per_s']:.1f} MB/s "
                                f"cpu {res['cpu_s_per_gb']} s/GB load {res['loadavg_1m']}")
                        runs.append(res)
                        if (client == "confluent-kafka" and acks == "1" and "error" not in res
                                and (record_size, partitions) not in keep):
                            keep[(record_size, partitions)] = topic
                        elif "error" not in res:
                            delete_topics(broker, [topic])
                        if "error" in res:
                            break
                    rows.append({"section": "produce", "id": wid, "client": client,
                                 "broker": name, "record_size": record_size,
                                 "partitions": partitions, "acks": acks,
                                 "records": records,
                                 **summarize(runs, "records_per_s")})
    for (record_size, partitions), topic in keep.items():
        records = dict(cfg.shapes)[record_size]
        for client in clients:
            if client in ("kafkapy-client", "confluent-kafka x2"):
                continue   # kafkapy's consumer: not part of this suite yet; x2: produce only
            if client.startswith("kcat") and client not in kcat_envs:
                continue
            wid = f"consume {size_label(record_size)} x{partitions}p"
            log(f"[{name}] {wid} ({client})")
            runs = []
            for _attempt in range(cfg.repeat):
                try:
                    res = bb.consume_workload(broker, client, kcat_envs.get(client),
                                              record_size, records, topic, cfg.timeout_s,
                                              partitions=partitions)
                except Exception as exc:  # noqa: BLE001
                    res = {"error": f"{type(exc).__name__}: {exc}", "topic": topic}
                res["loadavg_1m"] = loadavg()
                if "error" in res:
                    log(f"    ERROR {res['error'][:200]}")
                    runs.append(res)
                    break
                log(f"    {res['records_per_s']:,.0f} rec/s {res['mb_per_s']:.1f} MB/s "
                    f"cpu {res['cpu_s_per_gb']} s/GB load {res['loadavg_1m']}")
                runs.append(res)
            rows.append({"section": "consume", "id": wid, "client": client,
                         "broker": name, "record_size": record_size,
                         "partitions": partitions, "acks": None, "records": records,
                         **summarize(runs, "records_per_s")})
    return keep


# ---------------------------------------------------------------- latency sections

def e2e_latency(broker, cfg, rows: list) -> None:
    for rate in cfg.e2e_rates:
        records = int(rate * cfg.e2e_seconds)
        wid = f"e2e latency 1 KiB @ {rate // 1000}k rec/s"
        log(f"[{broker.name}] {wid}")
        runs = []
        for attempt in range(cfg.repeat):
            topic = f"e2e-{rate}-{attempt}"
            res: dict = {"topic": topic, "rate": rate, "records": records}
            cons = prod = None
            try:
                bb.create_topic(broker.admin(), topic)
                args = {"bootstrap": broker.bootstrap, "topic": topic, "records": records,
                        "record_size": 1024, "rate": rate,
                        "timeout_s": cfg.e2e_seconds * 3 + 10}
                cons = Child("e2e_consume", args)
                cons.ready()
                prod = Child("e2e_produce", args)
                prod.ready()
                cpu0 = broker.cpu_seconds()
                cons.go()
                prod.go()
                res["producer"] = prod.result(args["timeout_s"] + 30)
                res["consumer"] = cons.result(args["timeout_s"] + 30)
                res["broker_cpu_s"] = round(broker.cpu_seconds() - cpu0, 3)
                lat = res["consumer"]["latency"]
                res.update({k: lat.get(k) for k in ("p50_us", "p99_us", "p999_us", "max_us")})
                res["achieved_rate"] = res["producer"]["achieved_rate"]
                # Where the time goes: produce() to acknowledgement (client
                # queue + produce round trip) against the whole path, and the
                # clients' CPU beside the broker's (all share 2 cores).
                delivery = res["producer"].get("delivery", {})
                res["delivery_p50_us"] = delivery.get("p50_us")
                res["delivery_p99_us"] = delivery.get("p99_us")
                res["producer_cpu_s"] = res["producer"].get("cpu_s")
                res["consumer_cpu_s"] = res["consumer"].get("cpu_s")
                if res["consumer"]["timed_out"]:
                    res["error"] = (f"consumed {res['consumer']['records']} of {records}")
            except Exception as exc:  # noqa: BLE001
                res["error"] = f"{type(exc).__name__}: {exc}"
            finally:
                for c in (cons, prod):
                    if c:
                        c.kill()
            res["loadavg_1m"] = loadavg()
            log(f"    p50 {res.get('p50_us')} p99 {res.get('p99_us')} p99.9 "
                f"{res.get('p999_us')} us (produce->ack p50 {res.get('delivery_p50_us')} "
                f"p99 {res.get('delivery_p99_us')}), achieved {res.get('achieved_rate')}, "
                f"cpu s broker {res.get('broker_cpu_s')} producer {res.get('producer_cpu_s')} "
                f"consumer {res.get('consumer_cpu_s')}, load {res['loadavg_1m']} "
                f"{res.get('error', '')}")
            runs.append(res)
            delete_topics(broker, [topic])
            if "error" in res:
                break
        ok = [r for r in runs if "error" not in r]
        rows.append({"section": "e2e", "id": wid, "client": "confluent-kafka",
                     "broker": broker.name, "rate": rate, "repeats": len(runs),
                     "ok_runs": len(ok),
                     "producer_settings": "confluent-kafka linger.ms=1, max.in.flight 5, acks=1",
                     **{k: stats([r.get(k) for r in ok])
                        for k in ("p50_us", "p99_us", "p999_us", "achieved_rate",
                                  "delivery_p99_us", "broker_cpu_s")},
                     "loadavg_1m": stats([r["loadavg_1m"] for r in runs]),
                     **({"error": runs[-1]["error"]} if not ok else {}),
                     "runs": runs})


def small_requests(broker, cfg, rows: list) -> None:
    topic = "small-requests"
    bb.create_topic(broker.admin(), topic)
    for inflight in (1, 5):
        wid = f"small requests 100 B acks=1, 1 conn, {inflight} in flight"
        log(f"[{broker.name}] {wid}")
        runs = []
        for _attempt in range(cfg.repeat):
            try:
                res, cpu_s = run_child(broker, "small", {
                    "bootstrap": broker.bootstrap, "topic": topic, "record_size": 100,
                    "requests": cfg.small_requests, "inflight": inflight,
                    "timeout_s": cfg.timeout_s}, cfg.timeout_s)
                res["broker_cpu_s"] = round(cpu_s, 3)
                res["broker_cpu_us_per_request"] = round(cpu_s / max(1, res["requests"]) * 1e6, 1)
                res.update({k: res["latency"].get(k) for k in ("p50_us", "p99_us", "p999_us")})
                if res["errors"]:
                    res["error"] = f"{res['errors']} error responses"
            except Exception as exc:  # noqa: BLE001
                res = {"error": f"{type(exc).__name__}: {exc}"}
            res["loadavg_1m"] = loadavg()
            log(f"    {res.get('requests_per_s')} req/s p50 {res.get('p50_us')} p99 "
                f"{res.get('p99_us')} us load {res['loadavg_1m']} {res.get('error', '')}")
            runs.append(res)
            if "error" in res:
                break
        ok = [r for r in runs if "error" not in r]
        rows.append({"section": "small", "id": wid, "client": "raw socket",
                     "broker": broker.name, "inflight": inflight, "repeats": len(runs),
                     "ok_runs": len(ok),
                     **{k: stats([r.get(k) for r in ok])
                        for k in ("requests_per_s", "p50_us", "p99_us", "p999_us",
                                  "broker_cpu_us_per_request")},
                     "loadavg_1m": stats([r["loadavg_1m"] for r in runs]),
                     **({"error": runs[-1]["error"]} if not ok else {}),
                     "runs": runs})


def connections(broker, cfg, rows: list) -> None:
    topic = "small-requests"
    for n in cfg.connection_counts:
        wid = f"connections {n:,} (100 B produce, 1 in flight each)"
        log(f"[{broker.name}] {wid}")
        try:
            res, cpu_s = run_child(broker, "conns", {
                "bootstrap": broker.bootstrap, "topic": topic, "record_size": 100,
                "connections": n, "duration_s": cfg.conn_seconds,
                "timeout_s": cfg.conn_seconds}, cfg.conn_seconds + 60)
            res["broker_cpu_s"] = round(cpu_s, 3)
            res.update({k: res["latency"].get(k) for k in ("p50_us", "p99_us", "p999_us")})
            if res["errors"]:
                res["error"] = f"{res['errors']} error responses"
        except Exception as exc:  # noqa: BLE001
            res = {"error": f"{type(exc).__name__}: {exc}"}
        res["loadavg_1m"] = loadavg()
        res["broker_pss_bytes"] = broker.pss_bytes() if broker.alive() else None
        log(f"    {res.get('requests_per_s')} req/s p99 {res.get('p99_us')} us "
            f"{res.get('error', '')}")
        rows.append({"section": "connections", "id": wid, "client": "raw socket",
                     "broker": broker.name, "connections": n, **res})


# ---------------------------------------------------------------- partitions

def _fixed_rate_runs(broker, cfg, topic: str, partitions: int) -> list[dict]:
    """Each of ``cfg.scaling_rates`` records/s of 100 B for
    ``cfg.scaling_seconds``, spread over the topic's partitions by the raw
    ``spread`` generator (perf/_loadgens.py: linger 5 ms, 5 requests in
    flight, acks=1, one batch per partition per request). Achieved rate
    counts until the last acknowledgement."""
    out = []
    for rate in cfg.scaling_rates:
        args = {"bootstrap": broker.bootstrap, "topic": topic, "rate": rate,
                "seconds": cfg.scaling_seconds, "partitions": partitions,
                "record_size": 100, "tick_ms": 5, "inflight": 5,
                "timeout_s": cfg.scaling_seconds * 3 + 10}
        res: dict = {"offered_rate": rate, "records": int(rate * cfg.scaling_seconds)}
        try:
            gen, cpu_s = run_child(broker, "spread", args, args["timeout_s"])
            res.update({"achieved_rate": gen["achieved_rate"], "wall_s": round(gen["wall_s"], 3),
                        "requests": gen["requests"],
                        **{f"due_to_ack_{k}": gen["due_to_ack"].get(k)
                           for k in ("p50_us", "p99_us", "p999_us")},
                        "request_p99_us": gen["request_latency"].get("p99_us"),
                        "broker_cpu_s": round(cpu_s, 3), "generator_cpu_s": gen["cpu_s"]})
            if gen["timed_out"] or gen["partition_errors"]:
                res["error"] = (f"acknowledged {gen['records']} of {res['records']}, "
                                f"partition errors {gen['partition_errors']}")
        except Exception as exc:  # noqa: BLE001
            res["error"] = f"{type(exc).__name__}: {exc}"
        log(f"    {rate:,} rec/s offered: achieved {res.get('achieved_rate')}, due->ack p50 "
            f"{res.get('due_to_ack_p50_us')} p99 {res.get('due_to_ack_p99_us')} us, cpu s "
            f"broker {res.get('broker_cpu_s')} generator {res.get('generator_cpu_s')} "
            f"{res.get('error', '')}")
        out.append(res)
    return out


def partition_scaling(name: str, cfg, base_dir: str, rows: list) -> None:
    workdir = tempfile.mkdtemp(prefix=f"suite-parts-{name}-", dir=base_dir)
    broker = make_broker(name, workdir, cfg)
    record_size, records = 100, cfg.partition_records
    try:
        broker.start()
        broker.wait_ready(120)
        for partitions in cfg.scaling_partitions:
            wid = f"partitions {partitions:,}"
            log(f"[{name}] {wid}")
            res: dict = {"section": "partitions", "id": wid, "broker": name,
                         "partitions": partitions, "client": "confluent-kafka",
                         "records": max(records, partitions)}
            topic = f"scale-{partitions}"
            try:
                # A dedicated admin client: the shared one times requests out
                # after 2 s (socket.timeout.ms), and kafkapy took 19 s to
                # create 1,000 partitions (load average 12) and over 120 s
                # for 10,000.
                from confluent_kafka.admin import AdminClient
                admin = AdminClient({"bootstrap.servers": broker.bootstrap,
                                     "socket.timeout.ms": int(cfg.create_timeout_s * 1000),
                                     "log_level": 2})
                t0 = time.monotonic()
                bb.create_topic(admin, topic, timeout_s=cfg.create_timeout_s,
                                partitions=partitions)
                del admin
                res["create_topic_s"] = round(time.monotonic() - t0, 2)
                # First, on the cold topic, one total rate offered to all its
                # partitions (the target compares 10,000 partitions with one
                # "at the same total rate"); then the topic's maximum rate.
                res["fixed_rates"] = _fixed_rate_runs(broker, cfg, topic, partitions)
                # Verification is skipped here (one ListOffsets per partition would
                # take 10 s at 10,000); the producer's own error count stands in.
                run = bb.run_loadgen(broker, "_produce", {
                    "bootstrap": broker.bootstrap, "topic": topic, "acks": "1",
                    "record_size": record_size, "records": res["records"],
                    "timeout_s": cfg.timeout_s, "partitions": partitions}, cfg.timeout_s)
                gen, cpu_s = run
                if gen["timed_out"] or gen["delivery_errors"]:
                    res["error"] = f"producer: {gen}"
                bb._finish(res, gen["wall_s"], res["records"],
                           res["records"] * record_size, cpu_s)
            except Exception as exc:  # noqa: BLE001
                res["error"] = f"{type(exc).__name__}: {exc}"
            res["loadavg_1m"] = loadavg()
            res["broker_pss_bytes"] = broker.pss_bytes() if broker.alive() else None
            res["total_partitions"] = sum(p for p in cfg.scaling_partitions
                                          if p <= partitions)
            if name == "kafkapy" and broker.alive():
                # Start-up with data in every partition created so far.
                broker.stop()
                restarted = _brokers.BrokerProcess(name, broker.argv, broker.port,
                                                   broker.workdir, env=broker.env)
                t0 = time.monotonic()
                restarted.start()
                try:
                    restarted.wait_ready(cfg.timeout_s)
                    res["startup_s"] = round(time.monotonic() - t0, 2)
                except Exception as exc:  # noqa: BLE001
                    res["startup_error"] = str(exc)[:300]
                broker = restarted
            if "error" in res:
                res["broker_log_tail"] = broker.log_tail(10)
            log(f"    {res.get('records_per_s')} rec/s pss "
                f"{(res['broker_pss_bytes'] or 0) / 1e6:.0f} MB start-up "
                f"{res.get('startup_s')} s {res.get('error', '')[:200]}")
            rows.append(res)
    except Exception as exc:  # noqa: BLE001
        rows.append({"section": "partitions", "id": "partitions", "broker": name,
                     "error": f"{type(exc).__name__}: {exc}"})
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------- per broker

def make_broker(name: str, workdir: str, cfg):
    if name == "kafkapy":
        return _brokers.make_kafkapy(workdir, cfg.kafkapy_config, src=cfg.kafkapy_src)
    return _brokers.BROKER_FACTORIES[name](workdir)


def run_broker(name: str, cfg, kcat_envs, inputs, base_dir: str, rows: list,
               profiles: dict) -> dict:
    workdir = tempfile.mkdtemp(prefix=f"suite-{name}-", dir=base_dir)
    broker = make_broker(name, workdir, cfg)
    info: dict = {"name": name, "argv": broker.argv}
    try:
        t0 = time.monotonic()
        broker.start()
        broker.wait_ready(120)
        info["ready_s"] = round(time.monotonic() - t0, 2)
        info["processes"] = len(broker.remember_tree())
        info["pss_bytes_idle"] = broker.pss_bytes()
        keep = {}
        if "throughput" in cfg.sections:
            keep = throughput_matrix(broker, cfg, kcat_envs, inputs, rows)
        if "e2e" in cfg.sections:
            e2e_latency(broker, cfg, rows)
        if "small" in cfg.sections:
            small_requests(broker, cfg, rows)
            connections(broker, cfg, rows)
        if "profile" in cfg.sections and name == "kafkapy":
            import _profile
            profiles.update(_profile.profile_broker(broker, cfg, kcat_envs, inputs,
                                                    keep, base_dir))
    except Exception as exc:  # noqa: BLE001
        info["error"] = f"{type(exc).__name__}: {exc}"
        log(f"[{name}] ERROR {info['error']}")
    finally:
        info["exit_code"] = broker.stop()
        info["log_tail"] = broker.log_tail(15)
        shutil.rmtree(workdir, ignore_errors=True)
    if "partitions" in cfg.sections:
        partition_scaling(name, cfg, base_dir, rows)
    return info


# ---------------------------------------------------------------- main

class Config:
    def __init__(self, args):
        q = args.quick
        self.quick = q
        self.repeat = args.repeat
        self.timeout_s = args.timeout_s
        self.sections = set(args.sections.split(","))
        # 500k x 100 B (50 MB) and 100k x 1 KiB (102 MB): about 1 s each at
        # the brokers' rates, long enough for 10 ms CPU ticks to give +-2 %.
        self.shapes = [(100, 50_000 if q else 500_000), (1024, 10_000 if q else 100_000)]
        self.partition_counts = [1, 16]
        self.e2e_rates = [1_000, 10_000, 100_000]
        self.e2e_seconds = 3 if q else 10
        self.small_requests = 3_000 if q else 20_000
        self.connection_counts = [1, 100, 1_000]
        self.conn_seconds = 2 if q else 5
        self.scaling_partitions = [1, 100, 1_000, 10_000]
        self.partition_records = 20_000 if q else 200_000
        self.scaling_rates = [int(r) for r in args.scaling_rates.split(",") if r]
        self.scaling_seconds = 3 if q else 10
        self.profile_seconds = 4 if q else 10
        self.create_timeout_s = 300.0
        self.kafkapy_client_note = kafkapy_client_available()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10x fewer records, shorter runs")
    parser.add_argument("--repeat", type=int, default=3, help="runs per workload")
    parser.add_argument("--brokers", default="kafkapy,tansu")
    parser.add_argument("--sections", default="limits,throughput,e2e,small,partitions,profile",
                        help="comma-separated subset")
    parser.add_argument("--scaling-rates", default="20000,100000",
                        help="records/s offered to every partition count in the "
                             "partition-scaling pass (comma-separated)")
    parser.add_argument("--timeout-s", type=float, default=180.0, help="hard limit per run")
    parser.add_argument("--out-dir", default=str(HERE / "results"))
    parser.add_argument("--kafkapy-rev", default="HEAD",
                        help="git revision of kafkapy to run (exported to a temp dir, "
                             "so edits in the working tree do not disturb the run); "
                             "'worktree' runs the installed working tree as is")
    parser.add_argument("--kafkapy-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting for kafkapy (repeatable), e.g. "
                             "socket.send.buffer.bytes=-1; recorded in the report")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _brokers._exit_143)
    cfg = Config(args)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    base_dir = tempfile.mkdtemp(prefix="perf-suite-")
    started = time.monotonic()
    try:
        kcat_envs = bb.kcat_variants(base_dir) if os.access(bb.KCAT, os.X_OK) else {}
        inputs = {}
        for record_size, records in cfg.shapes:
            path = os.path.join(base_dir, f"kcat-{record_size}b.txt")
            bb.make_kcat_input(path, record_size, records)
            inputs[(record_size, records)] = path
        cfg.kafkapy_src = None
        cfg.kafkapy_config = dict(kv.split("=", 1) for kv in args.kafkapy_config)
        if args.kafkapy_rev != "worktree":
            cfg.kafkapy_src = _brokers.snapshot_source(
                str(REPO), os.path.join(base_dir, "kafkapy-src"), args.kafkapy_rev)
        machine = bb.machine_info(kcat_envs)
        machine["kafkapy_rev"] = args.kafkapy_rev
        machine["kafkapy_config"] = args.kafkapy_config
        if args.kafkapy_rev != "worktree":
            machine["kafkapy_commit"] = subprocess.run(
                ["git", "-C", str(REPO), "rev-parse", "--short", args.kafkapy_rev],
                capture_output=True, text=True, timeout=10).stdout.strip()
        machine["loadavg_at_start"] = list(os.getloadavg())
        report: dict = {"machine": machine, "quick": cfg.quick, "repeat": cfg.repeat,
                        "notes": [], "limits": {}, "brokers": {}, "results": [],
                        "profiles": {}}
        if cfg.kafkapy_client_note:
            report["notes"].append(f"kafkapy-client rows skipped: {cfg.kafkapy_client_note}")
        report["notes"].append("kafkapy's consumer is not driven by this suite "
                               "(consume rows use confluent-kafka and kcat)")
        if "limits" in cfg.sections:
            log("machine limits")
            report["limits"] = _limits.measure_all(cfg.quick, base_dir)
            log(json.dumps({k: v.get("mb_per_s") for k, v in report["limits"].items()}))
        for name in [b for b in args.brokers.split(",") if b]:
            report["brokers"][name] = run_broker(name, cfg, kcat_envs, inputs, base_dir,
                                                 report["results"], report["profiles"])
        report["elapsed_s"] = round(time.monotonic() - started, 1)
        report["machine"]["loadavg_at_end"] = list(os.getloadavg())
        import _report
        (out_dir / "suite.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        md = _report.markdown(report)
        (out_dir / "suite.md").write_text(md)
        try:
            pngs = _report.plots(report, out_dir)
            log(f"plots: {', '.join(str(p) for p in pngs)}")
        except ImportError as exc:
            log(f"no plots ({exc}): pip install -e '.[perf]'")
        print(md)
        return 0
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
