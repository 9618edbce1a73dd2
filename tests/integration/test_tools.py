"""The command-line tools as an operator runs them: subprocesses against a real broker.

One broker serves the whole module (start-up is the slow part; every test
uses its own topics and groups).  Each tool runs as ``python -m
kafkapy.tools.<module>`` so the tests do not depend on the console scripts
being installed.  Group, config and delete-records tests skip, with the
reason, when the broker does not advertise the APIs they need.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from support.clients import module_broker
from support.rawclient import RawClient

pytestmark = pytest.mark.timeout(120)

REPO_ROOT = Path(__file__).resolve().parents[2]
# Bound on one tool run: the tools answer in about a second against a local
# broker; 60 s only keeps a hung tool from stalling the suite.
TOOL_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with module_broker(tmp_path_factory, {"num.partitions": 1}, name="tools-broker") as proc:
        yield proc


@pytest.fixture(scope="module")
def apis(broker):
    with RawClient.connect(broker.bootstrap) as client:
        _error, ranges = client.api_versions()
    return {key: (low, high) for key, low, high in ranges}


def need(apis, *keys_and_names):
    missing = [name for key, name in keys_and_names if key not in apis]
    if missing:
        pytest.skip(f"broker does not advertise {', '.join(missing)} in ApiVersions")


def tool(name, *args, stdin=None, check=True, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", f"kafkapy.tools.{name}", *args], input=stdin,
                          capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    if check:
        assert proc.returncode == 0, f"{name} {args} exited {proc.returncode}: {proc.stderr}"
    return proc


def topic_name(prefix="t"):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(broker, topic, partitions=1, *extra):
    out = tool("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic,
               "--partitions", str(partitions), *extra).stdout
    assert out.strip() == f"Created topic {topic}."


def produce(broker, topic, lines, *extra):
    tool("console_producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, *extra,
         stdin="".join(line + "\n" for line in lines))


# ---------------------------------------------------------------- topics


def test_topics_lifecycle(broker):
    b = broker.bootstrap
    topic = topic_name()
    create(broker, topic, 2, "--replication-factor", "1", "--config", "retention.ms=123456")
    assert topic in tool("topics", "--bootstrap-server", b, "--list").stdout.splitlines()

    again = tool("topics", "--bootstrap-server", b, "--create", "--topic", topic, check=False)
    assert again.returncode == 1
    assert again.stderr.strip() == f"Error while executing topic command : Topic '{topic}' already exists."
    assert tool("topics", "--bootstrap-server", b, "--create", "--topic", topic, "--if-not-exists").stdout == ""

    lines = tool("topics", "--bootstrap-server", b, "--describe", "--topic", topic).stdout.splitlines()
    assert re.fullmatch(rf"Topic: {topic}\tTopicId: [A-Za-z0-9_-]{{22}}\tPartitionCount: 2\tReplicationFactor: 1"
                        r"\tConfigs: .*", lines[0]), lines[0]
    assert lines[1:] == [f"\tTopic: {topic}\tPartition: {p}\tLeader: {lines[1].split()[5]}\t"
                         f"Replicas: {lines[1].split()[5]}\tIsr: {lines[1].split()[5]}\tElr: N/A\tLastKnownElr: N/A"
                         for p in (0, 1)]
    under = tool("topics", "--bootstrap-server", b, "--describe", "--topic", topic, "--under-replicated-partitions")
    assert under.stdout == ""

    tool("topics", "--bootstrap-server", b, "--alter", "--topic", topic, "--partitions", "3")
    described = tool("topics", "--bootstrap-server", b, "--describe", "--topic", topic).stdout
    assert "PartitionCount: 3" in described

    tool("topics", "--bootstrap-server", b, "--delete", "--topic", topic)
    missing = tool("topics", "--bootstrap-server", b, "--describe", "--topic", topic, check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"Error while executing topic command : Topic '{topic}' does not exist as expected"
    assert tool("topics", "--bootstrap-server", b, "--delete", "--topic", topic, "--if-exists").returncode == 0


def test_topics_regex_and_describe_config_overrides(broker, apis):
    b = broker.bootstrap
    prefix = topic_name("rx")
    for suffix in ("a", "b"):
        create(broker, f"{prefix}-{suffix}")
    listed = tool("topics", "--bootstrap-server", b, "--list", "--topic", f"{prefix}-.*").stdout.splitlines()
    assert listed == [f"{prefix}-a", f"{prefix}-b"]
    if 32 in apis:
        topic = topic_name()
        create(broker, topic, 1, "--config", "retention.ms=98765")
        first = tool("topics", "--bootstrap-server", b, "--describe", "--topic", topic).stdout.splitlines()[0]
        assert "retention.ms=98765" in first.split("Configs: ", 1)[1].split(",")


def test_topics_usage_errors_are_one_line(broker):
    for args in (["--list"], ["--bootstrap-server", broker.bootstrap],
                 ["--bootstrap-server", broker.bootstrap, "--create"],
                 ["--bootstrap-server", broker.bootstrap, "--create", "--topic", "x", "--partitions", "0"]):
        proc = tool("topics", *args, check=False)
        assert proc.returncode == 1
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# ---------------------------------------------------------------- console producer / consumer


def test_console_round_trip_with_keys_and_properties(broker):
    b = broker.bootstrap
    topic = topic_name()
    create(broker, topic, 1)
    produce(broker, topic, ["k1:v1", "k2:v2", "k3:v:3"], "--property", "parse.key=true",
            "--property", "key.separator=:")
    out = tool("console_consumer", "--bootstrap-server", b, "--topic", topic, "--from-beginning",
               "--max-messages", "3", "--property", "print.key=true", "--property", "print.offset=true",
               "--property", "print.partition=true", "--property", "print.timestamp=true")
    lines = out.stdout.splitlines()
    assert len(lines) == 3
    for i, line in enumerate(lines):
        ts, partition, offset, key, value = line.split("\t")
        assert re.fullmatch(r"CreateTime:\d{13}", ts)
        assert (partition, offset, key) == ("Partition:0", f"Offset:{i}", f"k{i + 1}")
    assert [line.split("\t")[4] for line in lines] == ["v1", "v2", "v:3"]
    assert out.stderr.strip().endswith("Processed a total of 3 messages")

    # --partition/--offset, a custom separator, and --timeout-ms ending an idle read with exit 0.
    out = tool("console_consumer", "--bootstrap-server", b, "--topic", topic, "--partition", "0", "--offset", "1",
               "--timeout-ms", "1500", "--property", "print.key=true", "--property", "key.separator=|")
    assert out.stdout.splitlines() == ["k2|v2", "k3|v:3"]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_console_producer_compression(broker, codec):
    topic = topic_name(codec)
    create(broker, topic)
    produce(broker, topic, [f"line {i}" for i in range(20)], "--compression-codec", codec)
    out = tool("console_consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning",
               "--max-messages", "20")
    assert out.stdout.splitlines() == [f"line {i}" for i in range(20)]
    log = broker.log_dirs[0] / f"{topic}-0" / f"{0:020d}.log"
    dump = tool("dump_log", "--files", str(log)).stdout
    assert f"compresscodec: {codec}" in dump


def test_console_producer_missing_key_separator_fails(broker):
    topic = topic_name()
    create(broker, topic)
    proc = tool("console_producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--property",
                "parse.key=true", stdin="no separator here\n", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "No key separator found on line number 1: 'no separator here'"


def test_console_consumer_unknown_topic(broker):
    proc = tool("console_consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic_name("none"),
                "--timeout-ms", "500", check=False)
    assert proc.returncode == 1
    assert "does not exist" in proc.stderr


# ---------------------------------------------------------------- offsets, perf, dump-log


def test_get_offsets(broker):
    b = broker.bootstrap
    topic = topic_name()
    create(broker, topic, 2)
    produce(broker, topic, ["a:1", "b:2", "c:3", "d:4"], "--property", "parse.key=true",
            "--property", "key.separator=:")
    latest = tool("get_offsets", "--bootstrap-server", b, "--topic", topic).stdout.splitlines()
    assert [line.rsplit(":", 1)[0] for line in latest] == [f"{topic}:0", f"{topic}:1"]
    assert sum(int(line.rsplit(":", 1)[1]) for line in latest) == 4
    earliest = tool("get_offsets", "--bootstrap-server", b, "--topic", topic, "--time", "-2").stdout.splitlines()
    assert earliest == [f"{topic}:0:0", f"{topic}:1:0"]
    one = tool("get_offsets", "--bootstrap-server", b, "--topic", topic, "--partitions", "1", "--time", "earliest")
    assert one.stdout.splitlines() == [f"{topic}:1:0"]
    future = tool("get_offsets", "--bootstrap-server", b, "--topic-partitions", f"{topic}:0", "--time",
                  str(2**62)).stdout.splitlines()
    assert future == [f"{topic}:0:"]
    bad = tool("get_offsets", "--bootstrap-server", b, "--topic", topic, "--time", "yesterday", check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("Malformed time argument yesterday")


def test_producer_and_consumer_perf_tests(broker):
    topic = topic_name("perf")
    create(broker, topic, 2)
    out = tool("producer_perf_test", "--topic", topic, "--num-records", "3000", "--record-size", "100",
               "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}", "acks=1",
               "--reporting-interval", "100").stdout.splitlines()
    final = re.compile(r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                       r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.")
    assert final.fullmatch(out[-1]), out[-1]
    progress = re.compile(r"\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                          r"[\d.]+ ms max latency\.")
    assert all(progress.fullmatch(line) for line in out[:-1]), out

    out = tool("consumer_perf_test", "--bootstrap-server", broker.bootstrap, "--topic", topic,
               "--messages", "3000", "--timeout", "5000").stdout.splitlines()
    assert out[0] == ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                      "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    fields = out[1].split(", ")
    assert len(fields) == 10
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", fields[0])
    assert float(fields[2]) == pytest.approx(3000 * 100 / 1024 / 1024, abs=1e-4)
    assert fields[4] == "3000"


def test_dump_log_on_broker_segments(broker):
    topic = topic_name("dump")
    create(broker, topic)
    produce(broker, topic, ["k:hello", "k2:world"], "--property", "parse.key=true", "--property",
            "key.separator=:", "--sync")
    produce(broker, topic, [f"x{i}" for i in range(50)])
    directory = broker.log_dirs[0] / f"{topic}-0"
    log = directory / f"{0:020d}.log"
    out = tool("dump_log", "--files", str(log), "--print-data-log").stdout.splitlines()
    assert out[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = [line for line in out if line.startswith("baseOffset: ")]
    assert len(batches) >= 3 and all(line.endswith("isvalid: true") for line in batches)
    records = [line for line in out if line.startswith("| offset: ")]
    assert len(records) == 52
    assert records[0].endswith("key: k payload: hello")
    assert records[51].endswith("payload: x49")
    index = tool("dump_log", "--files", f"{directory / (f'{0:020d}.index')},{directory / (f'{0:020d}.timeindex')}",
                 "--verify-index-only")
    assert index.stderr == ""
    sanity = tool("dump_log", "--files", str(directory / f"{0:020d}.index"), "--index-sanity-check").stdout
    assert "passed sanity check" in sanity or "is empty" in sanity


# ---------------------------------------------------------------- configs, delete-records, groups


def test_configs_describe_and_alter(broker, apis):
    need(apis, (32, "DescribeConfigs"), (44, "IncrementalAlterConfigs"))
    b = broker.bootstrap
    topic = topic_name()
    create(broker, topic)
    out = tool("configs", "--bootstrap-server", b, "--describe", "--topic", topic).stdout
    assert out.splitlines() == [f"Dynamic configs for topic {topic} are:"]
    done = tool("configs", "--bootstrap-server", b, "--alter", "--entity-type", "topics", "--entity-name", topic,
                "--add-config", "retention.ms=5000,cleanup.policy=[delete]").stdout
    assert done.strip() == f"Completed updating config for topic {topic}."
    lines = tool("configs", "--bootstrap-server", b, "--describe", "--topic", topic).stdout.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert any(line.startswith("  retention.ms=5000 sensitive=false synonyms={")
               for line in lines), lines
    tool("configs", "--bootstrap-server", b, "--alter", "--topic", topic, "--delete-config", "retention.ms")
    lines = tool("configs", "--bootstrap-server", b, "--describe", "--topic", topic).stdout.splitlines()
    assert not any(line.startswith("  retention.ms=") for line in lines)
    bad = tool("configs", "--bootstrap-server", b, "--alter", "--topic", topic, "--delete-config", "nope",
               check=False)
    assert bad.returncode == 1 and bad.stderr.strip() == "Invalid config(s): nope"
    every = tool("configs", "--bootstrap-server", b, "--describe", "--topic", topic, "--all").stdout
    assert every.startswith(f"All configs for topic {topic} are:\n") and "  segment.bytes=" in every


def test_delete_records(broker, apis, tmp_path):
    need(apis, (21, "DeleteRecords"))
    topic = topic_name()
    create(broker, topic)
    produce(broker, topic, [str(i) for i in range(10)])
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 4}], "version": 1}))
    out = tool("delete_records", "--bootstrap-server", broker.bootstrap, "--offset-json-file", str(spec)).stdout
    assert out.splitlines() == ["Executing records delete operation", "Records delete operation completed:",
                                f"partition: {topic}-0\tlow_watermark: 4"]
    earliest = tool("get_offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", "-2").stdout
    assert earliest.strip() == f"{topic}:0:4"
    spec.write_text("{\"partitions\": [{\"topic\": \"a\", \"partition\": 0, \"offset\": 1},"
                    " {\"topic\": \"a\", \"partition\": 0, \"offset\": 2}]}")
    dup = tool("delete_records", "--bootstrap-server", broker.bootstrap, "--offset-json-file", str(spec), check=False)
    assert dup.returncode == 1 and dup.stderr.strip() == "Offset json file contains duplicate topic partitions: a-0"


def test_consumer_groups(broker, apis):
    need(apis, (11, "JoinGroup"), (14, "SyncGroup"), (15, "DescribeGroups"), (16, "ListGroups"),
         (8, "OffsetCommit"), (9, "OffsetFetch"), (42, "DeleteGroups"))
    b = broker.bootstrap
    topic = topic_name()
    group = topic_name("group")
    create(broker, topic, 2)
    produce(broker, topic, [f"k{i}:v{i}" for i in range(10)], "--property", "parse.key=true",
            "--property", "key.separator=:")
    consumed = tool("console_consumer", "--bootstrap-server", b, "--topic", topic, "--group", group,
                    "--from-beginning", "--max-messages", "10", check=False)
    if "UNSUPPORTED_FEATURE" in consumed.stderr:
        pytest.skip(f"the client cannot use the broker's group APIs yet: {consumed.stderr.strip()}")
    assert consumed.returncode == 0, consumed.stderr
    assert group in tool("consumer_groups", "--bootstrap-server", b, "--list").stdout.splitlines()

    out = tool("consumer_groups", "--bootstrap-server", b, "--describe", "--group", group).stdout
    assert f"Consumer group '{group}' has no active members." in out
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    header = [line.split() for line in out.splitlines() if line.startswith("GROUP")][0]
    assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                      "HOST", "CLIENT-ID"]
    assert sum(int(r[3]) for r in rows) == 10 and all(r[5] == "0" for r in rows)

    dry = tool("consumer_groups", "--bootstrap-server", b, "--reset-offsets", "--group", group, "--topic", topic,
               "--to-earliest", "--dry-run").stdout
    assert [line.split() for line in dry.splitlines() if line.startswith(group)] == \
        [[group, topic, "0", "0"], [group, topic, "1", "0"]]
    tool("consumer_groups", "--bootstrap-server", b, "--reset-offsets", "--group", group, "--topic", f"{topic}:0",
         "--shift-by", "-1", "--execute")
    tool("consumer_groups", "--bootstrap-server", b, "--reset-offsets", "--group", group, "--topic", f"{topic}:1",
         "--to-offset", "0", "--execute")
    out = tool("consumer_groups", "--bootstrap-server", b, "--describe", "--group", group).stdout
    rows = {r[2]: r for r in (line.split() for line in out.splitlines() if line.startswith(group))}
    assert rows["1"][3] == "0" and rows["1"][5] == rows["1"][4]
    assert int(rows["0"][5]) == 1

    deleted = tool("consumer_groups", "--bootstrap-server", b, "--delete", "--group", group).stdout
    assert deleted.strip() == f"Deletion of requested consumer groups ('{group}') was successful."


def test_tools_on_librdkafka_answer_as_on_kafkapys_client(broker, apis, tmp_path):
    """KAFKAPY_TOOLS_CLIENT=confluent puts the tools on confluent-kafka
    (tools/_client_confluent.py) instead of kafkapy.client: topics, the console
    producer and consumer with a group, offsets, configs, groups and
    delete-records work on it, and what both backends describe prints the same."""
    pytest.importorskip("confluent_kafka")
    need(apis, (32, "DescribeConfigs"), (44, "IncrementalAlterConfigs"), (21, "DeleteRecords"), (11, "JoinGroup"),
         (14, "SyncGroup"), (15, "DescribeGroups"), (16, "ListGroups"), (8, "OffsetCommit"), (9, "OffsetFetch"))
    b = broker.bootstrap
    rdkafka = {"KAFKAPY_TOOLS_CLIENT": "confluent"}
    topic, group = topic_name("rdkafka"), topic_name("group")
    created = tool("topics", "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", "2",
                   env_extra=rdkafka).stdout
    assert created.strip() == f"Created topic {topic}."
    tool("console_producer", "--bootstrap-server", b, "--topic", topic, "--property", "parse.key=true",
         "--property", "key.separator=:", stdin="".join(f"k{i}:v{i}\n" for i in range(6)), env_extra=rdkafka)
    consumed = tool("console_consumer", "--bootstrap-server", b, "--topic", topic, "--group", group,
                    "--from-beginning", "--max-messages", "6", "--property", "print.key=true", env_extra=rdkafka)
    assert sorted(consumed.stdout.splitlines()) == [f"k{i}\tv{i}" for i in range(6)]
    assert group in tool("consumer_groups", "--bootstrap-server", b, "--list", env_extra=rdkafka).stdout.split()

    done = tool("configs", "--bootstrap-server", b, "--alter", "--entity-type", "topics", "--entity-name", topic,
                "--add-config", "retention.ms=5000", env_extra=rdkafka).stdout
    assert done.strip() == f"Completed updating config for topic {topic}."
    for args in (("topics", "--describe", "--topic", topic), ("get_offsets", "--topic", topic),
                 ("get_offsets", "--topic", topic, "--time", "-2"), ("consumer_groups", "--describe", "--group", group)):
        ours = tool(args[0], "--bootstrap-server", b, *args[1:]).stdout
        assert tool(args[0], "--bootstrap-server", b, *args[1:], env_extra=rdkafka).stdout == ours, args
    # Kafka's line, synonyms included (kafkapy.client's ConfigEntry has no synonyms: that backend prints {}).
    described = tool("configs", "--bootstrap-server", b, "--describe", "--topic", topic, env_extra=rdkafka).stdout
    assert described.splitlines() == [f"Dynamic configs for topic {topic} are:",
                                      "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms"
                                      "=5000, DEFAULT_CONFIG:log.retention.hours=168}"]

    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 1}], "version": 1}))
    out = tool("delete_records", "--bootstrap-server", b, "--offset-json-file", str(spec), env_extra=rdkafka).stdout
    assert out.splitlines()[-1] == f"partition: {topic}-0\tlow_watermark: 1"
    tool("topics", "--bootstrap-server", b, "--delete", "--topic", topic, env_extra=rdkafka)
    missing = tool("topics", "--bootstrap-server", b, "--describe", "--topic", topic, check=False, env_extra=rdkafka)
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"Error while executing topic command : Topic '{topic}' does not exist as expected"
