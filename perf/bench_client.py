"""Client throughput: kafkapy.client vs kafka-python vs confluent-kafka, one broker, one run.

Usage: python perf/bench_client.py [--records N] [--runs R] [--bootstrap host:port] [--broker kafkapy|tansu]

Starts one broker (kafkapy by default, via perf/_brokers.py; or uses
--bootstrap), then for each client: produces N records of 100 bytes with
acks=1 to a fresh 1-partition topic and times send-all + flush; then consumes
N records from the beginning of a topic filled beforehand, timing until the
N-th record is in hand.  Each client keeps its own defaults apart from acks=1
(kafka-python: linger_ms=5 and batch_size=16384 to match the Java defaults of
the other two).  Targets (issue 4): kafkapy >= 1.5x kafka-python and >= 0.5x
confluent-kafka, for the producer and the consumer.

All clients run in this process one after another, so they share the machine
with the broker exactly the same way; the broker's CPU seconds per workload
are reported too, because on 2 cores a busy broker caps every client.  With
``--runs R`` the whole sequence repeats R times against the same broker and
the medians are reported (ratios are computed within each run, then their
median taken, since other load on the machine moves all clients together);
the 1-minute load average before each run is printed beside it.  For kafkapy
the producer's own counters (Produce requests, records per request, bytes per
batch) are printed too: small batches make the broker do more work per
record, so they explain a low figure.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _brokers import BROKER_FACTORIES  # noqa: E402

VALUE = b"x" * 100
# Per-workload bound: 200k records take a few seconds; a stuck client fails
# the run instead of hanging it.
DEADLINE_S = 120
# kafkapy producer metrics() of each produce_kafkapy call (request and batch counters).
KAFKAPY_PRODUCER_METRICS: list = []


def _topic(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap, topic):
    from kafkapy.client import KafkaAdminClient, NewTopic

    with KafkaAdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        for _ in range(100):
            if admin.describe_topics([topic])[0]["partitions"]:
                return
            time.sleep(0.05)


# ---------------------------------------------------------------- producers

# batch.size for kafkapy and kafka-python (confluent keeps librdkafka's 1 MB);
# set from --batch-size.
BATCH_SETTINGS: dict = {}


def produce_kafkapy(bootstrap, topic, n):
    from kafkapy.client import KafkaProducer

    producer = KafkaProducer(bootstrap, acks=1, **BATCH_SETTINGS)
    producer.send(topic, VALUE).get(30)
    start = time.perf_counter()
    send = producer.send
    for _ in range(n):
        send(topic, VALUE)
    producer.flush(DEADLINE_S)
    elapsed = time.perf_counter() - start
    metrics = producer.metrics()
    producer.close()
    KAFKAPY_PRODUCER_METRICS.append(metrics)
    return elapsed


def produce_kafka_python(bootstrap, topic, n):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5,
                             batch_size=BATCH_SETTINGS.get("batch_size", 16384))
    producer.send(topic, VALUE).get(30)
    start = time.perf_counter()
    send = producer.send
    for _ in range(n):
        send(topic, VALUE)
    producer.flush(DEADLINE_S)
    elapsed = time.perf_counter() - start
    producer.close()
    return elapsed


def produce_confluent(bootstrap, topic, n):
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "log_level": 3})
    producer.produce(topic, VALUE)
    producer.flush(30)
    start = time.perf_counter()
    produce = producer.produce
    poll = producer.poll
    for i in range(n):
        while True:
            try:
                produce(topic, VALUE)
                break
            except BufferError:  # librdkafka's queue is full: let it drain
                poll(0.005)
        if i % 10000 == 0:
            poll(0)
    producer.flush(DEADLINE_S)
    return time.perf_counter() - start


# ---------------------------------------------------------------- consumers


def consume_kafkapy(bootstrap, topic, n):
    from kafkapy.client import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + DEADLINE_S
    while got < n and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            got += len(records)
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed if got >= n else None


def consume_kafka_python(bootstrap, topic, n):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + DEADLINE_S
    while got < n and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            got += len(records)
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed if got >= n else None


def consume_confluent(bootstrap, topic, n):
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                                         "enable.auto.commit": False, "log_level": 3,
                                         "fetch.queue.backoff.ms": 10})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + DEADLINE_S
    while got < n and time.monotonic() < deadline:
        for message in consumer.consume(10000, 0.5):
            if not message.error():
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed if got >= n else None


CLIENTS = {
    "kafkapy": (produce_kafkapy, consume_kafkapy),
    "kafka-python": (produce_kafka_python, consume_kafka_python),
    "confluent-kafka": (produce_confluent, consume_confluent),
}


def run(bootstrap, n, broker=None):
    results = {}
    fill = _topic("fill")
    create_topic(bootstrap, fill)
    produce_confluent(bootstrap, fill, n)
    for name, (produce, consume) in CLIENTS.items():
        topic = _topic(name)
        create_topic(bootstrap, topic)
        cpu0 = broker.cpu_seconds() if broker else None
        elapsed = produce(bootstrap, topic, n)
        cpu1 = broker.cpu_seconds() if broker else None
        results[(name, "produce")] = (elapsed, None if cpu0 is None else cpu1 - cpu0)
        cpu0 = broker.cpu_seconds() if broker else None
        elapsed = consume(bootstrap, fill, n)
        cpu1 = broker.cpu_seconds() if broker else None
        results[(name, "consume")] = (elapsed, None if cpu0 is None else cpu1 - cpu0)
    return results


def report(results, n, load_avg=None):
    rows = {}
    load_text = f", load average {load_avg:.1f} on {os.cpu_count()} cores" if load_avg is not None else ""
    print(f"\n{n} records of {len(VALUE)} bytes, acks=1, 1 partition{load_text}")
    print(f"{'client':<16} {'workload':<8} {'records/s':>11} {'MB/s':>7} {'broker cpu s':>13}")
    for (name, workload), (elapsed, cpu) in results.items():
        rate = n / elapsed if elapsed else 0.0
        rows[(name, workload)] = rate
        cpu_text = f"{cpu:.2f}" if cpu is not None else "-"
        print(f"{name:<16} {workload:<8} {rate:>11,.0f} {rate * len(VALUE) / 1e6:>7.1f} {cpu_text:>13}")
        if (name, workload) == ("kafkapy", "produce") and KAFKAPY_PRODUCER_METRICS:
            m = KAFKAPY_PRODUCER_METRICS[-1]
            print(f"{'':<16} {'':<8} {m['request-total']} Produce requests, "
                  f"{m['records-per-request-avg']:.1f} records/request, {m['batch-size-avg']:.0f} B/batch")
    print()
    out = {}
    for workload in ("produce", "consume"):
        ours = rows[("kafkapy", workload)]
        vs_kp = ours / rows[("kafka-python", workload)] if rows[("kafka-python", workload)] else float("inf")
        vs_cf = ours / rows[("confluent-kafka", workload)] if rows[("confluent-kafka", workload)] else float("inf")
        ok = vs_kp >= 1.5 and vs_cf >= 0.5
        print(f"{workload}: kafkapy = {vs_kp:.2f}x kafka-python (target 1.5x), "
              f"{vs_cf:.2f}x confluent-kafka (target 0.5x) -> {'MET' if ok else 'NOT MET'}")
        out[workload] = {"kafkapy": ours, "kafka-python": rows[("kafka-python", workload)],
                         "confluent-kafka": rows[("confluent-kafka", workload)],
                         "vs_kafka_python": vs_kp, "vs_confluent": vs_cf, "met": ok}
    return out


def summarize(runs, n):
    """Medians over runs of each rate and of the within-run ratios."""
    print(f"\nmedian of {len(runs)} runs (load averages: {', '.join(f'{r[2]:.1f}' for r in runs)})")
    out = {}
    for workload in ("produce", "consume"):
        rates = {name: statistics.median(r[1][workload][name] for r in runs)
                 for name in ("kafkapy", "kafka-python", "confluent-kafka")}
        vs_kp = statistics.median(r[1][workload]["vs_kafka_python"] for r in runs)
        vs_cf = statistics.median(r[1][workload]["vs_confluent"] for r in runs)
        ok = vs_kp >= 1.5 and vs_cf >= 0.5
        print(f"{workload}: " + ", ".join(f"{k} {v:,.0f}/s" for k, v in rates.items())
              + f"; kafkapy = {vs_kp:.2f}x kafka-python, {vs_cf:.2f}x confluent-kafka -> {'MET' if ok else 'NOT MET'}")
        out[workload] = dict(rates, vs_kafka_python=vs_kp, vs_confluent=vs_cf, met=ok)
    out["runs"] = [{"load_average": r[2], "figures": r[1]} for r in runs]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="batch.size for the kafkapy and kafka-python producers (default: Java's "
                             "16384); 1000000 is librdkafka's default, for a same-batch comparison")
    parser.add_argument("--runs", type=int, default=1, help="repeat and report medians")
    parser.add_argument("--bootstrap", default=None, help="use a running broker instead of starting one")
    parser.add_argument("--broker", default="kafkapy", choices=sorted(BROKER_FACTORIES))
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.batch_size:
        BATCH_SETTINGS["batch_size"] = args.batch_size
    logging.basicConfig(level=logging.ERROR)
    runs = []

    def run_all(bootstrap, broker=None):
        for _ in range(max(1, args.runs)):
            load_avg = os.getloadavg()[0]
            results = run(bootstrap, args.records, broker)
            runs.append((results, report(results, args.records, load_avg), load_avg))

    if args.bootstrap:
        run_all(args.bootstrap)
    else:
        with tempfile.TemporaryDirectory() as workdir:
            broker = BROKER_FACTORIES[args.broker](workdir)
            broker.start()
            try:
                broker.wait_ready()
                print(f"broker: {args.broker} at {broker.bootstrap}")
                run_all(broker.bootstrap, broker)
            finally:
                broker.stop()
    figures = runs[0][1] if len(runs) == 1 else summarize(runs, args.records)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
