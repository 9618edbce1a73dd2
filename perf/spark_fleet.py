"""PySpark producer fleet: many producers as Spark tasks, results aggregated with Spark SQL.

Runs anywhere PySpark runs::

    python perf/spark_fleet.py --quick                 # local[*], starts its own kafkapy broker
    python perf/spark_fleet.py --compare               # kafkapy and tansu in one run (+ 1 GB read)
    spark-submit perf/spark_fleet.py --bootstrap-servers host:9092 --tasks 64
    python perf/spark_fleet.py --master spark://head:7077 --bootstrap-servers host:9092

Stages, per broker:

1. **fleet**: ``--tasks`` Spark tasks, each one producer (``--client kafkapy``:
   ``kafkapy.client.KafkaProducer`` when it imports, else confluent-kafka with
   a message saying so; ``--client confluent``) sending ``--records`` records
   of ``--record-size`` bytes to ``--topic``.  Every key is
   ``<run_id>:<task>:<seq>`` and the value starts with the key, so each record
   says who sent it.  A task returns records sent/acknowledged, value bytes,
   wall time, errors and a sample of delivery latencies (send -> delivery
   report), ~2,000 per task.
2. **aggregate** (Spark SQL over the task rows): fleet throughput over the
   union of task windows, per-task spread (min/median/max records/s),
   latency percentiles with ``percentile_approx``.
3. **verify**: read the topic back through the ``kafkapy`` data source and
   check per task that every seq in [0, records) arrived: exactly once when
   the producers were idempotent (``--idempotent``, the default), at least
   once otherwise.  Loss and duplicates are reported per task.
4. **read** (``--read-mb``, 1000 in a full run): write that much to a fresh
   topic with the fleet, then time a Spark aggregation that touches every
   value through the data source.

Transactional mode (``--transactional``, kafkapy's client): each task is a
transactional producer (``transactional.id`` ``fleet-<run_id>-<task>``)
committing every ``--txn-records`` records, and with each transaction it
commits its progress (the next seq) as the offset of partition ``<task>`` of
``<topic>-progress`` for group ``fleet-<run_id>`` (send_offsets_to_transaction,
so records and progress commit or abort together).  A task attempt first
calls init_transactions (fencing the previous attempt and aborting its open
transaction), then reads its committed progress and resumes there.
``--fail-after N`` makes every task's first attempt raise after N records
(its last transaction open, flushed), so Spark retries every task
(``local[*,4]``; on a cluster ``spark.task.maxFailures``, default 4).
Verification then reads read_committed and checks exactly-once across those
retries: every seq once, none lost, none twice; the read_uncommitted
duplicates (the aborted attempts' records) are reported beside it.

Brokers: with ``--bootstrap-servers`` the fleet uses that cluster; otherwise
it starts kafkapy (and tansu with ``--compare``) through ``perf/_brokers.py``,
one at a time, and stops each before the next.

Outputs: ``perf/results/spark_fleet.{json,md,png}`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (str(REPO), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

# Delivery-latency samples kept per task: 2,000 samples put the p99 on ~20
# samples per task, enough for percentile_approx over a fleet of >= 2 tasks
# without shipping every record's latency back to the driver.
LATENCY_SAMPLES_PER_TASK = 2000
# Bound on a task's final flush: 1M records at the slowest rate seen here
# (~100 k/s) drain in 10 s; 120 s means the broker is stuck.
FLUSH_TIMEOUT_S = 120.0


# ------------------------------------------------------------ executor side

def _record(prefix: bytes, pad: bytes, size: int) -> bytes:
    return prefix + pad[: max(0, size - len(prefix))]


def producer_task(task_id: int, cfg: dict) -> dict:
    """One fleet member: produce cfg['records'] records and report what happened.

    Runs inside a Spark Python worker; everything it uses is created here and
    closed before it returns.
    """
    client = cfg["client"]
    note = ""
    if cfg.get("transactional"):
        return _kafkapy_txn_task(task_id, cfg)
    if client == "kafkapy":
        try:
            return _kafkapy_task(task_id, cfg)
        except ImportError as exc:
            note = f"kafkapy.client not importable ({exc}); used confluent-kafka"
    out = _confluent_task(task_id, cfg)
    out["note"] = note
    return out


def _kafkapy_txn_task(task_id: int, cfg: dict) -> dict:
    """A transactional fleet member that resumes where its committed output ends
    (see the module docstring, transactional mode)."""
    from pyspark import TaskContext

    from kafkapy.client import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    n, size, topic, run_id = cfg["records"], cfg["record_size"], cfg["topic"], cfg["run_id"]
    group = f"fleet-{run_id}"
    progress = TopicPartition(cfg["progress_topic"], task_id)
    producer = KafkaProducer(bootstrap_servers=cfg["bootstrap"], transactional_id=f"fleet-{run_id}-{task_id}",
                             linger_ms=cfg["linger_ms"], batch_size=1_000_000)
    state = {"acked": 0, "errors": 0, "first_error": ""}

    def on_completion(_metadata, exc):
        if exc is None:
            state["acked"] += 1
        else:
            state["errors"] += 1
            state["first_error"] = state["first_error"] or repr(exc)

    pad = b"x" * size
    value_bytes = 0
    t0 = time.time()
    try:
        # First fence the previous attempt (its open transaction is aborted,
        # with the progress offset it carried), then read the progress.
        producer.init_transactions()
        consumer = KafkaConsumer(bootstrap_servers=cfg["bootstrap"], group_id=group, enable_auto_commit=False)
        try:
            start = consumer.committed(progress) or 0
        finally:
            consumer.close(autocommit=False)
        fail_at = cfg["fail_after"] if attempt == 0 and cfg["fail_after"] > 0 else None
        seq = start
        while seq < n:
            end = min(n, seq + cfg["txn_records"])
            producer.begin_transaction()
            for s in range(seq, end):
                key = b"%s:%d:%d" % (run_id.encode(), task_id, s)
                value = _record(key + b"|", pad, size)
                producer.send(topic, value, key=key, callback=on_completion)
                value_bytes += len(value)
                if fail_at is not None and s + 1 - start >= fail_at:
                    producer.flush()
                    raise RuntimeError(f"injected failure of task {task_id} attempt {attempt} at seq {s}")
            producer.send_offsets_to_transaction({progress: OffsetAndMetadata(end, "")}, group)
            producer.commit_transaction()
            seq = end
    finally:
        t1 = time.time()
        producer.close(0)
    out = _task_result(task_id, cfg, "kafkapy-transactional", n - start, state["acked"], value_bytes, t0, t1,
                       state["errors"], state["first_error"], [])
    out["note"] = f"task {task_id}: attempt {attempt} resumed at seq {start}" if attempt else ""
    return out


def _task_result(task_id, cfg, client, sent, acked, value_bytes, t0, t1, errors, first_error, lat):
    return {"task_id": task_id, "host": socket.gethostname(), "client": client,
            "records_sent": sent, "records_acked": acked, "value_bytes": value_bytes,
            "start_s": t0, "end_s": t1, "wall_s": t1 - t0, "errors": errors,
            "first_error": first_error, "latencies_ms": lat, "note": ""}


def _confluent_task(task_id: int, cfg: dict) -> dict:
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": cfg["bootstrap"], "acks": cfg["acks"],
            "linger.ms": cfg["linger_ms"], "batch.size": 1_000_000,
            "enable.idempotence": cfg["idempotent"], "compression.type": "none",
            "log_level": 3}
    producer = Producer(conf)
    n, size, topic, run_id = cfg["records"], cfg["record_size"], cfg["topic"], cfg["run_id"]
    sample_every = max(1, n // LATENCY_SAMPLES_PER_TASK)
    pad = b"x" * size
    state = {"acked": 0, "errors": 0, "first_error": ""}
    latencies: list[float] = []
    clock = time.perf_counter

    def on_delivery(err, _msg):
        if err is None:
            state["acked"] += 1
        else:
            state["errors"] += 1
            state["first_error"] = state["first_error"] or str(err)

    def sampled(sent_at):
        def cb(err, msg):
            on_delivery(err, msg)
            if err is None:
                latencies.append((clock() - sent_at) * 1000.0)
        return cb

    value_bytes = 0
    t0 = time.time()
    for seq in range(n):
        key = b"%s:%d:%d" % (run_id.encode(), task_id, seq)
        value = _record(key + b"|", pad, size)
        cb = sampled(clock()) if seq % sample_every == 0 else on_delivery
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=cb)
                break
            except BufferError:
                producer.poll(0.05)
        value_bytes += len(value)
        if seq % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    t1 = time.time()
    if remaining:
        state["errors"] += remaining
        state["first_error"] = state["first_error"] or f"{remaining} records unacknowledged after flush"
    return _task_result(task_id, cfg, "confluent-kafka", n, state["acked"], value_bytes, t0, t1,
                        state["errors"], state["first_error"], latencies)


def _kafkapy_task(task_id: int, cfg: dict) -> dict:
    """The same loop through kafkapy's own producer (issue 4's KafkaProducer).

    KafkaProducer(bootstrap_servers, **Kafka-named settings); send(topic,
    value, key=..., callback=on_completion(metadata, exception)); flush();
    close().  Dotted setting names are tried first, then kafka-python style
    underscores.
    """
    from kafkapy.client import KafkaProducer  # ImportError -> caller falls back
    # Same batching as the confluent-kafka task (1 MB batches, linger.ms), so
    # the two clients are compared on their code, not their defaults.
    settings = {"acks": cfg["acks"], "linger.ms": cfg["linger_ms"], "batch.size": 1_000_000,
                "enable.idempotence": cfg["idempotent"]}
    try:
        producer = KafkaProducer(bootstrap_servers=cfg["bootstrap"], **settings)
    except TypeError:
        producer = KafkaProducer(bootstrap_servers=cfg["bootstrap"],
                                 **{k.replace(".", "_"): v for k, v in settings.items()})
    n, size, topic, run_id = cfg["records"], cfg["record_size"], cfg["topic"], cfg["run_id"]
    sample_every = max(1, n // LATENCY_SAMPLES_PER_TASK)
    pad = b"x" * size
    state = {"acked": 0, "errors": 0, "first_error": ""}
    latencies: list[float] = []
    clock = time.perf_counter

    def on_completion(_metadata, exc, sent_at=None):
        # Java's onCompletion(metadata, exception), called on the sender thread
        # (the only thread touching state/latencies while sending).
        if exc is None:
            state["acked"] += 1
            if sent_at is not None:
                latencies.append((clock() - sent_at) * 1000.0)
        else:
            state["errors"] += 1
            state["first_error"] = state["first_error"] or repr(exc)

    value_bytes = 0
    t0 = time.time()
    try:
        for seq in range(n):
            key = b"%s:%d:%d" % (run_id.encode(), task_id, seq)
            value = _record(key + b"|", pad, size)
            if seq % sample_every == 0:
                sent_at = clock()
                producer.send(topic, value, key=key,
                              callback=lambda md, exc, s=sent_at: on_completion(md, exc, s))
            else:
                producer.send(topic, value, key=key, callback=on_completion)
            value_bytes += len(value)
        producer.flush()
    finally:
        t1 = time.time()
        producer.close()
    return _task_result(task_id, cfg, "kafkapy", n, state["acked"], value_bytes, t0, t1,
                        state["errors"], state["first_error"], latencies)


# --------------------------------------------------------------- driver side

def fleet_schema():
    from pyspark.sql.types import (ArrayType, DoubleType, LongType, StringType, StructField,
                                   StructType, IntegerType)
    return StructType([
        StructField("task_id", IntegerType()), StructField("host", StringType()),
        StructField("client", StringType()), StructField("records_sent", LongType()),
        StructField("records_acked", LongType()), StructField("value_bytes", LongType()),
        StructField("start_s", DoubleType()), StructField("end_s", DoubleType()),
        StructField("wall_s", DoubleType()), StructField("errors", LongType()),
        StructField("first_error", StringType()), StructField("latencies_ms", ArrayType(DoubleType())),
        StructField("note", StringType())])


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor)], operation_timeout=10)
    futures[topic].result(timeout=30)
    # Wait until metadata shows every partition with a leader (bounded).
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        time.sleep(0.2)
    raise TimeoutError(f"topic {topic} not ready")


def run_fleet(spark, bootstrap: str, topic: str, *, tasks: int, records: int, record_size: int,
              client: str = "kafkapy", acks: str = "all", idempotent: bool = True,
              linger_ms: int = 5, run_id: str | None = None, transactional: bool = False,
              txn_records: int = 1000, fail_after: int = 0, replication_factor: int = 1) -> dict:
    """Stage 1 + 2: run the producers as Spark tasks and aggregate with Spark SQL."""
    run_id = run_id or uuid.uuid4().hex[:8]
    if client == "kafkapy":
        try:
            import kafkapy.client as _c  # noqa: F401
            getattr(_c, "KafkaProducer")
        except (ImportError, AttributeError) as exc:
            print(f"spark_fleet: kafkapy.client.KafkaProducer is not available ({exc}); "
                  "falling back to confluent-kafka", file=sys.stderr)
            client = "confluent"
    cfg = {"bootstrap": bootstrap, "topic": topic, "records": records, "record_size": record_size,
           "client": client, "acks": acks, "idempotent": idempotent, "linger_ms": linger_ms,
           "run_id": run_id, "transactional": transactional, "txn_records": txn_records,
           "fail_after": fail_after, "progress_topic": f"{topic}-progress"}
    if transactional:
        if client != "kafkapy":
            raise ValueError("--transactional runs kafkapy's client")
        # One partition per task for the tasks' committed progress.
        create_topic(bootstrap, cfg["progress_topic"], tasks, replication_factor)
    if __name__ != "__main__":
        # Imported (tests, notebooks): executors cannot import this file by
        # name, so cloudpickle must ship producer_task by value, as it does
        # for a script run by spark-submit.
        from pyspark import cloudpickle
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    sc = spark.sparkContext
    t0 = time.time()
    rows = sc.parallelize(range(tasks), tasks).map(lambda i: producer_task(i, cfg)).collect()
    driver_wall_s = time.time() - t0
    df = spark.createDataFrame(rows, fleet_schema())
    view = f"fleet_{run_id}"
    df.createOrReplaceTempView(view)
    agg = spark.sql(f"""
        SELECT count(*) AS tasks, sum(records_acked) AS records_acked, sum(records_sent) AS records_sent,
               sum(value_bytes) AS value_bytes, sum(errors) AS errors,
               max(end_s) - min(start_s) AS window_s,
               sum(records_acked) / (max(end_s) - min(start_s)) AS records_per_s,
               sum(value_bytes) / (max(end_s) - min(start_s)) / 1e6 AS mb_per_s,
               min(records_acked / wall_s) AS task_min_records_per_s,
               percentile_approx(records_acked / wall_s, 0.5) AS task_median_records_per_s,
               max(records_acked / wall_s) AS task_max_records_per_s,
               stddev_pop(records_acked / wall_s) AS task_stddev_records_per_s,
               first(client) AS client
        FROM {view}""").first().asDict()
    lat = spark.sql(f"""
        SELECT percentile_approx(l, 0.5, 10000) AS p50, percentile_approx(l, 0.99, 10000) AS p99,
               percentile_approx(l, 0.999, 10000) AS p999, max(l) AS max, count(*) AS samples
        FROM (SELECT explode(latencies_ms) AS l FROM {view})""").first().asDict()
    notes = sorted({r["note"] for r in rows if r["note"]} | {r["first_error"] for r in rows if r["first_error"]})
    return {"run_id": run_id, "topic": topic, "config": {k: v for k, v in cfg.items() if k != "bootstrap"},
            "tasks": [{k: v for k, v in r.items() if k != "latencies_ms"} for r in rows],
            "aggregate": agg, "latency_ms": lat, "driver_wall_s": driver_wall_s, "notes": notes}


def verify(spark, bootstrap: str, topic: str, run_id: str, tasks: int, records: int,
           exactly_once: bool, isolation_level: str = "read_uncommitted") -> dict:
    """Stage 3: read the topic back through the kafkapy data source and check each task's seqs
    (``isolation_level`` read_committed for a transactional fleet)."""
    t0 = time.time()
    df = (spark.read.format("kafkapy").option("bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .option("kafka.isolation.level", isolation_level)
          .option("failOnDataLoss", "false").option("kafkaConsumer.pollTimeoutMs", "10000").load())
    view = f"verify_{run_id}_{isolation_level}"
    df.selectExpr("split(cast(key AS STRING), ':') AS k").where(f"k[0] = '{run_id}'").selectExpr(
        "CAST(k[1] AS INT) AS task_id", "CAST(k[2] AS BIGINT) AS seq").createOrReplaceTempView(view)
    per_task = {r["task_id"]: r.asDict() for r in spark.sql(f"""
        SELECT task_id, count(*) AS received, count(DISTINCT seq) AS distinct_seqs,
               min(seq) AS min_seq, max(seq) AS max_seq
        FROM {view} WHERE seq >= 0 AND seq < {records} GROUP BY task_id""").collect()}
    report, lost_total, dup_total = [], 0, 0
    for task_id in range(tasks):
        row = per_task.get(task_id, {"received": 0, "distinct_seqs": 0})
        lost = records - row["distinct_seqs"]
        dups = row["received"] - row["distinct_seqs"]
        ok = lost == 0 and (dups == 0 or not exactly_once)
        lost_total += lost
        dup_total += dups
        report.append({"task_id": task_id, "expected": records, "received": row["received"],
                       "distinct": row["distinct_seqs"], "lost": lost, "duplicates": dups, "ok": ok})
    # The reader stops at each partition's high watermark (ListOffsets
    # latest), as Spark's Kafka source does; report their sum so a broker
    # whose ListOffsets under-reports (tansu 0.6.0, see perf/README.md) is
    # told apart from one that lost acknowledged records.
    from kafkapy.spark._kafka import Planner
    planner = Planner({"bootstrap.servers": bootstrap, "subscribe": topic})
    try:
        high_watermark_total = sum(h for _l, h in planner.watermarks(planner.partitions()).values())
    finally:
        planner.close()
    return {"mode": ("exactly-once" if exactly_once else "at-least-once")
            + (" (read_committed)" if isolation_level == "read_committed" else ""),
            "ok": all(r["ok"] for r in report), "lost": lost_total, "duplicates": dup_total,
            "high_watermark_total": high_watermark_total, "expected_total": tasks * records,
            "read_s": time.time() - t0, "tasks": report}


def read_benchmark(spark, bootstrap: str, topic: str) -> dict:
    """Stage 4: Spark read throughput of a whole topic through the data source.

    sum(length(value)) forces every value through the Python reader and Arrow
    into the JVM (a count(*) alone could be answered without the columns).
    minPartitions = default parallelism, so a one-partition topic still keeps
    every core busy.
    """
    par = spark.sparkContext.defaultParallelism
    df = (spark.read.format("kafkapy").option("bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("minPartitions", str(par)).load())
    t0 = time.perf_counter()
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS value_bytes",
                        "sum(length(key)) AS key_bytes").first()
    elapsed = time.perf_counter() - t0
    return {"records": row["n"], "value_bytes": row["value_bytes"], "seconds": elapsed,
            "records_per_s": row["n"] / elapsed, "mb_per_s": row["value_bytes"] / elapsed / 1e6,
            "input_partitions": par}


# --------------------------------------------------------------- reporting

def _fmt(x, nd=1):
    return "—" if x is None else f"{x:,.{nd}f}"


def write_outputs(results: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    lines = [f"# Spark producer fleet ({results['started']})", "",
             f"master `{results['master']}`, {results['tasks']} tasks x {results['records']:,} records x "
             f"{results['record_size']} B, acks={results['acks']}, idempotent={results['idempotent']}, "
             f"replication factor {results.get('replication_factor', 1)}, "
             f"requested client {results['client']}", "",
             "| broker | client | records/s | MB/s | per-task records/s min / median / max | "
             "latency p50 / p99 / p99.9 ms | errors | verification |",
             "|---|---|---|---|---|---|---|---|"]
    for name, b in results["brokers"].items():
        if "error" in b:
            lines.append(f"| {name} | — | failed: {b['error']} | | | | | |")
            continue
        a, lat, v = b["fleet"]["aggregate"], b["fleet"]["latency_ms"], b.get("verify", {})
        vtext = ("—" if not v else f"{v['mode']}: {'ok' if v['ok'] else 'FAILED'} "
                 f"(lost {v['lost']}, duplicates {v['duplicates']}; high watermarks sum to "
                 f"{v.get('high_watermark_total', 0):,} for {v.get('expected_total', 0):,} records)")
        lines.append(
            f"| {name} | {a['client']} | {_fmt(a['records_per_s'], 0)} | {_fmt(a['mb_per_s'])} | "
            f"{_fmt(a['task_min_records_per_s'], 0)} / {_fmt(a['task_median_records_per_s'], 0)} / "
            f"{_fmt(a['task_max_records_per_s'], 0)} | {_fmt(lat['p50'], 2)} / {_fmt(lat['p99'], 2)} / "
            f"{_fmt(lat['p999'], 2)} | {a['errors']} | {vtext} |")
    names = [n for n, b in results["brokers"].items() if "fleet" in b]
    if len(names) == 2:
        x, y = (results["brokers"][n]["fleet"]["aggregate"]["records_per_s"] for n in names)
        lines += ["", f"Fleet throughput ratio {names[0]}/{names[1]}: {x / y:.2f}"]
    reads = [(n, b["read"]) for n, b in results["brokers"].items() if b.get("read")]
    if reads:
        lines += ["", "| broker | Spark read through the data source | records | MB of values | s | records/s | MB/s |",
                  "|---|---|---|---|---|---|---|"]
        for n, r in reads:
            lines.append(f"| {n} | {r['input_partitions']} input partitions | {r['records']:,} | "
                         f"{r['value_bytes'] / 1e6:,.0f} | {r['seconds']:.1f} | {r['records_per_s']:,.0f} | "
                         f"{r['mb_per_s']:.1f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    _plot(results, out.with_suffix(".png"))


def _plot(results: dict, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        # matplotlib comes with the perf extra, not the spark one.
        print("spark_fleet: matplotlib not installed (pip install '.[perf]'); no plot", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    brokers = [(n, b) for n, b in results["brokers"].items() if "fleet" in b]
    if not brokers:
        return
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    names = [n for n, _ in brokers]
    colors = ["tab:blue", "tab:orange", "tab:green"][: len(names)]
    # 1: fleet throughput with per-task spread
    ax = axes[0]
    mbs = [b["fleet"]["aggregate"]["mb_per_s"] for _, b in brokers]
    ax.bar(names, mbs, color=colors)
    for i, (_, b) in enumerate(brokers):
        per_task = [t["value_bytes"] / t["wall_s"] / 1e6 for t in b["fleet"]["tasks"] if t["wall_s"] > 0]
        ax.scatter([i] * len(per_task), per_task, color="black", s=12, zorder=3,
                   label="per task" if i == 0 else None)
        ax.annotate(f"{mbs[i]:.0f}", (i, mbs[i]), ha="center", va="bottom")
    ax.set_ylim(top=max(mbs) * 1.2)   # room for the labels under the title
    ax.set_ylabel("MB/s of record values")
    ax.set_title(f"fleet produce: {results['tasks']} tasks x {results['record_size']} B, "
                 f"acks={results['acks']}, RF {results.get('replication_factor', 1)}")
    ax.legend(loc="lower right")
    # 2: delivery latency percentiles
    ax = axes[1]
    pcts = ["p50", "p99", "p999"]
    width = 0.8 / len(brokers)
    for i, (n, b) in enumerate(brokers):
        vals = [b["fleet"]["latency_ms"][p] or 0 for p in pcts]
        ax.bar([j + i * width for j in range(3)], vals, width, label=n, color=colors[i])
    ax.set_xticks([j + width * (len(brokers) - 1) / 2 for j in range(3)], ["p50", "p99", "p99.9"])
    ax.set_ylabel("ms, send -> delivery report")
    ax.set_yscale("log")
    ax.set_title("delivery latency")
    ax.legend()
    # 3: read throughput through the data source
    ax = axes[2]
    reads = [(n, b["read"]) for n, b in brokers if b.get("read")]
    if reads:
        ax.bar([n for n, _ in reads], [r["mb_per_s"] for _, r in reads], color=colors[: len(reads)])
        for i, (_, r) in enumerate(reads):
            ax.annotate(f"{r['mb_per_s']:.0f} MB/s\n{r['value_bytes'] / 1e6:,.0f} MB",
                        (i, r["mb_per_s"]), ha="center", va="bottom")
        ax.set_ylim(top=max(r["mb_per_s"] for _, r in reads) * 1.3)
        ax.set_ylabel("MB/s of record values")
        ax.set_title("Spark read via format('kafkapy')")
    else:
        ax.set_axis_off()
    fig.suptitle(f"kafkapy Spark fleet, {results['started']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ------------------------------------------------------------------- main

def _session(master: str | None, app: str):
    """local[*] (loopback only) unless spark-submit or --master says otherwise."""
    if master is None:
        # Under spark-submit the JVM is already up and holds --master (its
        # own default is local[*]); read it so a local run still gets the
        # loopback-only settings.
        master = "local[*]"
        if "PYSPARK_GATEWAY_PORT" in os.environ:
            from pyspark import SparkConf
            master = SparkConf().get("spark.master", "local[*]")
    if master is not None and master.startswith("local"):
        from kafkapy.spark import local_session
        return local_session(app, master=master)
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    # Executors on a real cluster need kafkapy.spark for the verification
    # read: ship the pure-Python package (kafkapy/__init__.py + kafkapy/spark).
    zpath = os.path.join(tempfile.mkdtemp(), "kafkapy_spark.zip")
    with zipfile.ZipFile(zpath, "w") as z:
        z.write(REPO / "kafkapy" / "__init__.py", "kafkapy/__init__.py")
        for f in (REPO / "kafkapy" / "spark").glob("*.py"):
            z.write(f, f"kafkapy/spark/{f.name}")
    spark.sparkContext.addPyFile(zpath)
    from kafkapy.spark import register
    register(spark)
    return spark


def run_against(spark, name: str, bootstrap: str, args, results: dict) -> None:
    entry: dict = {"bootstrap": bootstrap}
    results["brokers"][name] = entry
    try:
        topic = f"{args.topic}-{uuid.uuid4().hex[:6]}" if args.fresh_topic else args.topic
        partitions = args.partitions or args.tasks
        if args.create_topic:
            create_topic(bootstrap, topic, partitions, args.replication_factor)
        fleet = run_fleet(spark, bootstrap, topic, tasks=args.tasks, records=args.records,
                          record_size=args.record_size, client=args.client, acks=args.acks,
                          idempotent=args.idempotent, linger_ms=args.linger_ms,
                          transactional=args.transactional, txn_records=args.txn_records,
                          fail_after=args.fail_after, replication_factor=args.replication_factor)
        entry["fleet"] = fleet
        a = fleet["aggregate"]
        print(f"[{name}] fleet: {a['records_per_s']:,.0f} records/s, {a['mb_per_s']:.1f} MB/s, "
              f"p99 {fleet['latency_ms']['p99']} ms, errors {a['errors']}", flush=True)
        if not args.no_verify:
            if args.transactional:
                v = verify(spark, bootstrap, topic, fleet["run_id"], args.tasks, args.records, True,
                           "read_committed")
                # The aborted attempts' records, still in the log.
                v["read_uncommitted_duplicates"] = verify(
                    spark, bootstrap, topic, fleet["run_id"], args.tasks, args.records, False)["duplicates"]
            else:
                v = verify(spark, bootstrap, topic, fleet["run_id"], args.tasks, args.records, args.idempotent)
            entry["verify"] = v
            print(f"[{name}] verify ({v['mode']}): {'ok' if v['ok'] else 'FAILED'}, lost {v['lost']}, "
                  f"duplicates {v['duplicates']}, high watermarks {v['high_watermark_total']:,} "
                  f"for {v['expected_total']:,} records", flush=True)
        if args.read_mb > 0:
            rtopic = f"{args.topic}-read-{uuid.uuid4().hex[:6]}"
            per_task = int(args.read_mb * 1e6 / args.read_record_size / args.tasks)
            create_topic(bootstrap, rtopic, partitions, args.replication_factor)
            load = run_fleet(spark, bootstrap, rtopic, tasks=args.tasks, records=per_task,
                             record_size=args.read_record_size, client="confluent", acks="1",
                             idempotent=False, linger_ms=args.linger_ms)
            entry["read_load"] = load["aggregate"]
            entry["read"] = read_benchmark(spark, bootstrap, rtopic)
            r = entry["read"]
            print(f"[{name}] read: {r['records']:,} records, {r['value_bytes'] / 1e6:,.0f} MB in "
                  f"{r['seconds']:.1f} s = {r['mb_per_s']:.1f} MB/s", flush=True)
    except Exception as exc:  # noqa: BLE001 - one broker failing must not hide the other's figures
        entry["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        print(f"[{name}] failed: {entry['error']}", file=sys.stderr, flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--master", default=None, help="Spark master (default local[*]; spark-submit's own)")
    p.add_argument("--bootstrap-servers", default=None,
                   help="use this cluster instead of starting brokers locally")
    p.add_argument("--compare", action="store_true", help="run against kafkapy and tansu (started locally)")
    p.add_argument("--quick", action="store_true", help="smaller run (~1 min of work)")
    p.add_argument("--client", choices=("kafkapy", "confluent"), default="kafkapy")
    p.add_argument("--topic", default="spark-fleet")
    p.add_argument("--fresh-topic", action=argparse.BooleanOptionalAction, default=True,
                   help="append a random suffix to --topic (default on)")
    p.add_argument("--create-topic", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--partitions", type=int, default=0, help="partitions of created topics (default: tasks)")
    p.add_argument("--replication-factor", type=int, default=1,
                   help="replicas of created topics (3 against make cluster, with --acks all)")
    p.add_argument("--tasks", type=int, default=0, help="producer tasks (default: Spark default parallelism)")
    p.add_argument("--records", type=int, default=0, help="records per task (default 500k, quick 50k)")
    p.add_argument("--record-size", type=int, default=100, help="value bytes per record")
    p.add_argument("--acks", default="all", choices=("0", "1", "all"))
    p.add_argument("--idempotent", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--transactional", action="store_true",
                   help="transactional producers (kafkapy's client) that resume from their committed progress; "
                        "verified read_committed")
    p.add_argument("--txn-records", type=int, default=1000, help="records per transaction (--transactional)")
    p.add_argument("--fail-after", type=int, default=0,
                   help="--transactional: every task's first attempt fails after this many records, so Spark "
                        "retries it (0: no failure)")
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--read-mb", type=float, default=-1, help="MB for the read benchmark (default 1000, quick 100; 0 skips)")
    p.add_argument("--read-record-size", type=int, default=1024)
    p.add_argument("--out", default=str(HERE / "results" / "spark_fleet.json"))
    args = p.parse_args(argv)
    if args.records <= 0:
        args.records = 50_000 if args.quick else 500_000
    if args.read_mb < 0:
        args.read_mb = 100 if args.quick else 1000
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    master = args.master
    if args.fail_after and master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = "local[*,4]"  # local mode retries a failed task only with maxFailures in the master
    spark = _session(master, "kafkapy-spark-fleet")
    if args.tasks <= 0:
        args.tasks = spark.sparkContext.defaultParallelism
    results = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "master": spark.sparkContext.master,
               "spark": spark.version, "tasks": args.tasks, "records": args.records,
               "record_size": args.record_size, "acks": args.acks, "idempotent": args.idempotent,
               "replication_factor": args.replication_factor,
               "client": args.client, "brokers": {}}
    try:
        if args.bootstrap_servers:
            run_against(spark, "cluster", args.bootstrap_servers, args, results)
        else:
            import _brokers
            for name in (("kafkapy", "tansu") if args.compare else ("kafkapy",)):
                workdir = tempfile.mkdtemp(prefix=f"spark-fleet-{name}-")
                if name == "kafkapy":
                    # One broker: internal topics with one replica, as Kafka's
                    # single-node config/server.properties sets them (the
                    # default 3 makes FindCoordinator answer
                    # COORDINATOR_NOT_AVAILABLE, as Kafka's does).
                    broker = _brokers.make_kafkapy(workdir, {"offsets.topic.replication.factor": "1",
                                                             "transaction.state.log.replication.factor": "1",
                                                             "transaction.state.log.min.isr": "1"})
                else:
                    broker = _brokers.BROKER_FACTORIES[name](workdir)
                try:
                    broker.start()
                    broker.wait_ready()
                    run_against(spark, name, broker.bootstrap, args, results)
                finally:
                    broker.stop()
        out = Path(args.out)
        write_outputs(results, out)
        print(out.with_suffix(".md").read_text())
    finally:
        spark.stop()
    failed = [n for n, b in results["brokers"].items()
              if "error" in b or not b.get("verify", {"ok": True})["ok"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
