"""Prometheus metrics, scraped by a real Prometheus server (Debian's ``prometheus``).

The test starts a broker with ``prometheus.port`` set, starts Prometheus on a
free 127.0.0.1 port with a generated config (scrape every 1 s, tsdb in a temp
dir), drives the broker with confluent-kafka, then asks Prometheus' HTTP API
whether the counters moved by exactly what was done.

Bounds: every wait polls at most ``WAIT_S`` (metrics are published at most
0.5 s late, scraped every 1 s: 20 s leaves room for a loaded CI box).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from support.broker import free_port

PROMETHEUS = shutil.which("prometheus")
WAIT_S = 20.0

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus package is not installed")


class Prometheus:
    def __init__(self, work_dir, target: str):
        self.port = free_port()
        self.dir = work_dir
        config = work_dir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
            "scrape_configs:\n  - job_name: kafkapy\n    static_configs:\n"
            f"      - targets: ['{target}']\n")
        self.log = open(work_dir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={work_dir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log_tail()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("prometheus not ready\n" + self.log_tail())

    def log_tail(self) -> str:
        self.log.flush()
        return (self.dir / "prometheus.log").read_text(errors="replace")[-3000:]

    def query(self, expr: str) -> list:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, expr: str):
        result = self.query(expr)
        if not result:
            return None
        assert len(result) == 1, result
        return float(result[0]["value"][1])

    def wait_value(self, expr: str, expected: float) -> None:
        """Poll until ``expr`` equals ``expected`` (bounded by WAIT_S)."""
        deadline = time.monotonic() + WAIT_S
        seen = None
        while time.monotonic() < deadline:
            seen = self.value(expr)
            if seen == expected:
                return
            time.sleep(0.5)
        raise AssertionError(f"{expr} = {seen}, expected {expected}")

    def wait_at_least(self, expr: str, minimum: float) -> float:
        deadline = time.monotonic() + WAIT_S
        seen = None
        while time.monotonic() < deadline:
            seen = self.value(expr)
            if seen is not None and seen >= minimum:
                return seen
            time.sleep(0.5)
        raise AssertionError(f"{expr} = {seen}, expected >= {minimum}")

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


@pytest.fixture
def metrics_broker(broker_factory):
    port = free_port()
    broker = broker_factory({"prometheus.port": port, "num.io.threads": 2, "num.network.threads": 2,
                             "auto.create.topics.enable": False})
    broker.metrics_port = port
    return broker


@pytest.fixture
def prometheus(tmp_path, metrics_broker):
    prom = Prometheus(tmp_path, f"127.0.0.1:{metrics_broker.metrics_port}")
    yield prom
    prom.close()


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def test_counters_move_by_what_was_produced_and_consumed(metrics_broker, prometheus):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "metrics-t"
    admin = AdminClient({"bootstrap.servers": metrics_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)

    # One Produce request per record: flush() after each produce.
    n_records = 25
    value = b"v" * 1024
    producer = Producer({"bootstrap.servers": metrics_broker.bootstrap, "linger.ms": 0, "acks": 1,
                         "enable.idempotence": False})
    for _ in range(n_records):
        producer.produce(topic, value)
        assert producer.flush(30) == 0
    sel = f'{{topic="{topic}"}}'
    prometheus.wait_value(f"kafka_server_brokertopicmetrics_messages_in_total{sel}", n_records)
    prometheus.wait_value('kafka_network_requestmetrics_requests_total{request="Produce"}', n_records)
    prometheus.wait_value('kafka_network_requestmetrics_errors_total{request="Produce",error="NONE"}', n_records)
    for hist in ("local_time", "request_queue_time", "total_time", "response_send_time"):
        prometheus.wait_value(f'kafka_network_requestmetrics_{hist}_seconds_count{{request="Produce"}}', n_records)
    prometheus.wait_value(f"kafka_log_log_log_end_offset{{topic=\"{topic}\",partition=\"0\"}}", n_records)
    # Bytes in = the batches as stored: the partition's size (one segment).
    log_size = prometheus.wait_at_least(f'kafka_log_log_size{{topic="{topic}",partition="0"}}', n_records * 1024)
    prometheus.wait_value(f"kafka_server_brokertopicmetrics_bytes_in_total{sel}", log_size)
    assert prometheus.value(f'kafka_log_log_num_log_segments{{topic="{topic}",partition="0"}}') == 1

    consumer = Consumer({"bootstrap.servers": metrics_broker.bootstrap, "group.id": "metrics-test",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + 30
    while got < n_records and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    consumer.close()
    assert got == n_records
    # Every stored byte went out at least once.
    prometheus.wait_at_least(f"kafka_server_brokertopicmetrics_bytes_out_total{sel}", log_size)

    # A Fetch v3 (message format v1) down-converts every record once.
    from support.raw_api import call

    fetched = call(metrics_broker.bootstrap, 1, 3, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    assert fetched.responses[0].partitions[0].error_code == 0
    prometheus.wait_value(f"kafka_server_brokertopicmetrics_fetch_message_conversions_total{sel}", n_records)
    prometheus.wait_value('kafka_network_requestmetrics_message_conversions_time_seconds_count{request="Fetch"}', 1)

    # An error code is counted by name: Metadata for a topic that does not exist.
    missing = admin.list_topics(topic="no-such-topic", timeout=10).topics["no-such-topic"]
    assert missing.error is not None
    prometheus.wait_at_least(
        'kafka_network_requestmetrics_errors_total{request="Metadata",error="UNKNOWN_TOPIC_OR_PARTITION"}', 1)

    # Connections per listener, idle ratios, zero gauges of the single-replica broker.
    assert prometheus.wait_at_least(
        'sum(kafka_server_socketservermetrics_connection_creation_total{listener="PLAINTEXT"})', 3) >= 3
    ratios = prometheus.query("kafka_network_socketserver_network_processor_idle_ratio")
    assert len(ratios) == 2 and all(0.0 <= float(r["value"][1]) <= 1.0 for r in ratios)
    ratios = prometheus.query("kafka_server_kafkarequesthandlerpool_request_handler_idle_ratio")
    assert len(ratios) == 2 and all(0.0 <= float(r["value"][1]) <= 1.0 for r in ratios)
    assert prometheus.value("kafka_server_replicamanager_under_replicated_partitions") == 0
    assert prometheus.value("kafka_controller_kafkacontroller_offline_partitions_count") == 0
    assert prometheus.value("kafka_network_requestchannel_request_queue_size") is not None


def test_every_declared_metric_is_exposed(metrics_broker):
    from kafkapy.metrics.names import exposed_sample_names

    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": metrics_broker.bootstrap, "linger.ms": 0})
    producer.produce("metrics-auto", b"x")  # auto-creation is off: an error, still a request
    producer.flush(5)
    deadline = time.monotonic() + WAIT_S
    missing = None
    while time.monotonic() < deadline:
        text = _scrape(metrics_broker.metrics_port)
        seen = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
        # Series that exist only once something happened: appends, fetches, flushes.
        optional = {n for n in exposed_sample_names()
                    if n.startswith(("kafka_server_brokertopicmetrics_", "kafka_log_log_",
                                     "kafka_network_requestmetrics_message_conversions_"))}  # Fetch v0-v3
        missing = exposed_sample_names() - seen - optional
        if not missing:
            break
        time.sleep(0.5)
    assert not missing, f"declared but not exposed: {sorted(missing)}"

