"""Admin APIs and the configuration surface through real clients against a real broker.

confluent-kafka's AdminClient drives DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, CreatePartitions, DeleteRecords and DescribeCluster;
kafka-python's admin drives DescribeLogDirs; DescribeProducers (no client
method) and every advertised version go through a raw connection. Each test
checks effects, not only the responses: segments deleted by a shortened
retention, the codec of the batches on disk, list offsets after a delete,
configs after a restart, changes seen by every handler worker.
"""

from __future__ import annotations

import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    ResourceType,
)

from support.clients import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    Rec,
    admin,
    assert_delivered,
    batch_codecs,
    consume_confluent,
    create_topic,
    module_broker,
    produce_confluent,
    topic_partition_counts,
)

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.server.handlers import construct
from support.rawclient import RawClient, encode_request_header_v1

pytestmark = pytest.mark.timeout(120)

TIMEOUT_S = 30
# Retention runs on the supervisor's tick; 0.5 s keeps the waits short.
RETENTION_CHECK_MS = 500
SETTLE_S = 15.0

INVALID_PARTITIONS = 37
INVALID_CONFIG = 40
INVALID_REQUEST = 42
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    # Two handler workers: a change handled by one must be seen by the other.
    with module_broker(tmp_path_factory, {"num.io.threads": 2, "num.network.threads": 1,
                                          "log.retention.check.interval.ms": RETENTION_CHECK_MS}) as b:
        yield b


# -- helpers ---------------------------------------------------------------------------

def wait_for(predicate, timeout_s: float = SETTLE_S, interval_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval_s)


def describe(bootstrap, resource_type, name) -> dict:
    client = admin(bootstrap)
    resource = ConfigResource(resource_type, name)
    return client.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)


def topic_values(bootstrap, topic) -> dict:
    return {k: e.value for k, e in describe(bootstrap, ResourceType.TOPIC, topic).items()}


def incremental(bootstrap, resource_type, name, ops, validate_only=False):
    """ops: [(name, value, AlterConfigOpType)] -> None or the KafkaError."""
    client = admin(bootstrap)
    resource = ConfigResource(resource_type, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
    future = client.incremental_alter_configs([resource], request_timeout=TIMEOUT_S,
                                              validate_only=validate_only)[resource]
    try:
        return future.result(TIMEOUT_S)
    except KafkaException as exc:
        return exc.args[0]


def raw_call(bootstrap, api_key, version, data: dict):
    """One request of any version (flexible ones with header v2) -> decoded response."""
    spec = API_TABLE[api_key]
    flexible = spec.is_flexible(version)
    request = construct(spec.request_class(version), data)
    payload = encode_request_header_v1(api_key, version, 7) + (b"\x00" if flexible else b"") \
        + encode_to_bytes(request)
    with RawClient.connect(bootstrap, timeout_s=TIMEOUT_S) as client:
        client.send(struct.pack(">i", len(payload)) + payload)
        body = client.recv_response(7, TIMEOUT_S)
    if flexible:
        body = body[1:]  # response header v1: an empty tag buffer
    response, _ = decode(spec.response_class(version), memoryview(body), 0)
    return response


def cluster_default(bootstrap) -> dict:
    """DescribeConfigs of broker resource "" (the cluster default): {name: (value, source)}."""
    response = raw_call(bootstrap, 32, 4, {"resources": [
        {"resource_type": 4, "resource_name": "", "configuration_keys": None}]})
    (result,) = response.results
    assert result.error_code == 0
    return {c.name: (c.value, c.config_source) for c in result.configs}


def watermarks(bootstrap, topic, partition=0):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), TIMEOUT_S)
    finally:
        consumer.close()


def produce_n(bootstrap, topic, n, partition=0, size=100, timestamp_ms=None, **conf):
    records = [Rec(partition, b"k%d" % i, (b"%06d" % i).ljust(size, b"x"), (("h", b"v%d" % i),),
                   timestamp_ms) for i in range(n)]
    assert_delivered(produce_confluent(bootstrap, topic, records, **conf))
    return records


def produce_one_per_batch(bootstrap, topic, n, size, timestamp_ms):
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                                         "batch.num.messages": 1,
                                         "max.in.flight.requests.per.connection": 1})
    acked = []
    for i in range(n):
        producer.produce(topic, value=(b"%06d" % i).ljust(size, b"x"), partition=0,
                         timestamp=timestamp_ms, on_delivery=lambda err, msg: acked.append(err))
        producer.flush(TIMEOUT_S)
    assert acked == [None] * n


def segment_bases(broker, topic, partition=0):
    path = broker.log_dirs[0] / f"{topic}-{partition}"
    return sorted(int(p.name[:20]) for p in path.glob("*.log"))


# -- DescribeConfigs ---------------------------------------------------------------------

def test_describe_topic_configs_defaults_overrides_and_synonyms(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "dc-topic", 1, {"retention.ms": "123456", "cleanup.policy": "compact"})
    configs = describe(bs, ResourceType.TOPIC, "dc-topic")
    # Every topic key is listed, overrides as DYNAMIC_TOPIC_CONFIG.
    for key in ("retention.ms", "segment.bytes", "cleanup.policy", "compression.type",
                "max.message.bytes", "min.insync.replicas", "message.timestamp.type",
                "file.delete.delay.ms", "flush.messages", "index.interval.bytes"):
        assert key in configs, key
    retention = configs["retention.ms"]
    assert retention.value == "123456"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_read_only and not retention.is_sensitive
    # The override first, then the broker synonym it shadows.
    assert list(retention.synonyms)[0] == "retention.ms"
    assert configs["cleanup.policy"].value == "compact"
    # Defaults come from the broker: config/server.properties sets log.segment.bytes statically.
    segment = configs["segment.bytes"]
    assert segment.source in (ConfigSource.STATIC_BROKER_CONFIG.value, ConfigSource.DEFAULT_CONFIG.value)
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["compression.type"].value == "producer"


def test_describe_broker_configs(kbroker):
    configs = describe(kbroker.bootstrap, ResourceType.BROKER, "0")
    assert configs["log.dirs"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["log.dirs"].value == str(kbroker.log_dirs[0])
    assert configs["log.dirs"].is_read_only
    assert not configs["log.retention.ms"].is_read_only  # dynamic in Kafka and here
    assert configs["num.io.threads"].value == "2" and configs["num.io.threads"].is_read_only
    default_only = configs["log.cleaner.min.cleanable.ratio"]
    assert default_only.source == ConfigSource.DEFAULT_CONFIG.value and default_only.value == "0.5"


def test_describe_configs_errors(kbroker):
    client = admin(kbroker.bootstrap)
    resource = ConfigResource(ResourceType.TOPIC, "no-such-topic")
    future = client.describe_configs([resource], request_timeout=TIMEOUT_S)[resource]
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT_S)
    assert info.value.args[0].code() == UNKNOWN_TOPIC_OR_PARTITION
    # librdkafka sends a broker resource to that broker, so another id goes raw.
    response = raw_call(kbroker.bootstrap, 32, 4, {"resources": [
        {"resource_type": 4, "resource_name": "7", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "zero", "configuration_keys": None},
        {"resource_type": 2, "resource_name": "bad/name", "configuration_keys": None},
        {"resource_type": 9, "resource_name": "x", "configuration_keys": None}]})
    assert [r.error_code for r in response.results] == [INVALID_REQUEST, INVALID_REQUEST, 17, INVALID_REQUEST]


# Kafka 3.9's topic configs (LogConfig's ConfigDef), every one listed by DescribeConfigs.
KAFKA_3_9_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
    "message.format.version", "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable"}
INVALID_TIMESTAMP = 32


def test_topic_configs_are_kafka_3_9s(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "dc-all", 1)
    configs = describe(bs, ResourceType.TOPIC, "dc-all")
    assert set(configs) == KAFKA_3_9_TOPIC_CONFIGS
    defaults = {"message.timestamp.before.max.ms": str(2**63 - 1), "message.timestamp.after.max.ms":
                str(2**63 - 1), "compression.gzip.level": "-1", "compression.lz4.level": "9",
                "compression.zstd.level": "3", "local.retention.ms": "-2", "local.retention.bytes": "-2",
                "remote.storage.enable": "false", "message.format.version": "3.0-IV1"}
    for name, value in defaults.items():
        assert configs[name].value == value, name
        assert not configs[name].is_read_only
    assert configs["message.timestamp.before.max.ms"].synonyms["log.message.timestamp.before.max.ms"]
    # Kafka's validators: ranges, the deprecated version strings, tiered storage off.
    ok = [("compression.zstd.level", "-7"), ("compression.gzip.level", "9"), ("local.retention.ms", "-2"),
          ("message.format.version", "2.8"), ("message.timestamp.before.max.ms", "0")]
    for name, value in ok:
        assert incremental(bs, ResourceType.TOPIC, "dc-all", [(name, value, AlterConfigOpType.SET)],
                           validate_only=True) is None, name
    bad = [("compression.gzip.level", "0"), ("compression.lz4.level", "18"), ("compression.zstd.level", "23"),
           ("local.retention.bytes", "-3"), ("message.format.version", "9.9"),
           ("message.timestamp.after.max.ms", "-1"), ("remote.storage.enable", "true"),
           ("remote.log.copy.disable", "true")]
    for name, value in bad:
        err = incremental(bs, ResourceType.TOPIC, "dc-all", [(name, value, AlterConfigOpType.SET)])
        assert err is not None and err.code() == INVALID_CONFIG, (name, err)
    err = incremental(bs, ResourceType.TOPIC, "dc-all", [("remote.storage.enable", "true", AlterConfigOpType.SET)])
    assert "Tiered Storage functionality is disabled" in err.str()


def test_timestamp_before_and_after_max_ms(kbroker):
    """KIP-937: each bound alone answers INVALID_TIMESTAMP to a real producer's explicit timestamp."""
    bs = kbroker.bootstrap
    create_topic(bs, "ts-bounds", 1, {"message.timestamp.before.max.ms": "3600000",
                                      "message.timestamp.after.max.ms": "60000"})
    now_ms = int(time.time() * 1000)
    day_ms = 86_400_000
    reports = produce_confluent(bs, "ts-bounds", [
        Rec(0, b"k", b"now", timestamp_ms=now_ms),
        Rec(0, b"k", b"half an hour ago", timestamp_ms=now_ms - 1_800_000)], linger_ms=0)
    assert_delivered(reports)
    (err, _p, _o), = produce_confluent(bs, "ts-bounds", [Rec(0, b"k", b"old", timestamp_ms=now_ms - day_ms)])
    assert err is not None and err.code() == INVALID_TIMESTAMP
    (err, _p, _o), = produce_confluent(bs, "ts-bounds", [Rec(0, b"k", b"ahead", timestamp_ms=now_ms + 600_000)])
    assert err is not None and err.code() == INVALID_TIMESTAMP
    # Unset sides fall back to message.timestamp.difference.max.ms, as in Kafka.
    assert incremental(bs, ResourceType.TOPIC, "ts-bounds", [
        ("message.timestamp.before.max.ms", None, AlterConfigOpType.DELETE),
        ("message.timestamp.difference.max.ms", str(2 * day_ms), AlterConfigOpType.SET)]) is None
    assert wait_for(lambda: produce_confluent(bs, "ts-bounds", [
        Rec(0, b"k", b"old", timestamp_ms=int(time.time() * 1000) - day_ms)])[0][0] is None)
    (err, _p, _o), = produce_confluent(bs, "ts-bounds", [
        Rec(0, b"k", b"ahead", timestamp_ms=int(time.time() * 1000) + 600_000)])
    assert err is not None and err.code() == INVALID_TIMESTAMP  # after.max.ms still set


def test_log_cleaner_threads_is_dynamic(kbroker):
    bs = kbroker.bootstrap
    before = describe(bs, ResourceType.BROKER, "0")["log.cleaner.threads"]
    assert before.value == "1" and not before.is_read_only
    assert before.source == ConfigSource.DEFAULT_CONFIG.value
    configs = describe(bs, ResourceType.BROKER, "0")
    assert configs["log.message.format.version"].is_read_only
    # LogCleaner's other reconfigurable keys, with Java's rendering of Double.MAX_VALUE.
    throttle = configs["log.cleaner.io.max.bytes.per.second"]
    assert throttle.value == "1.7976931348623157E308" and not throttle.is_read_only
    assert configs["log.cleaner.dedupe.buffer.size"].value == "134217728"
    err = incremental(bs, ResourceType.BROKER, "0", [("log.cleaner.threads", "-1", AlterConfigOpType.SET)])
    assert err.code() == INVALID_CONFIG
    # Kafka's LogCleaner bounds on a change: at least 1, at most double the current count.
    err = incremental(bs, ResourceType.BROKER, "0", [("log.cleaner.threads", "0", AlterConfigOpType.SET)])
    assert err.code() == INVALID_CONFIG and "at least 1" in err.str()
    err = incremental(bs, ResourceType.BROKER, "0", [("log.cleaner.threads", "3", AlterConfigOpType.SET)])
    assert err.code() == INVALID_CONFIG and "more than double the current value 1" in err.str()
    try:
        assert incremental(bs, ResourceType.BROKER, "0",
                           [("log.cleaner.threads", "2", AlterConfigOpType.SET)]) is None
        after = describe(bs, ResourceType.BROKER, "0")["log.cleaner.threads"]
        assert after.value == "2" and after.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    finally:
        incremental(bs, ResourceType.BROKER, "0", [("log.cleaner.threads", None, AlterConfigOpType.DELETE)])
    assert describe(bs, ResourceType.BROKER, "0")["log.cleaner.threads"].value == "1"


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_configs_every_version(kbroker, version):
    bs = kbroker.bootstrap
    name = f"dc-v{version}"
    create_topic(bs, name, 1, {"segment.ms": "3600000"})
    response = raw_call(bs, 32, version, {
        "resources": [{"resource_type": 2, "resource_name": name,
                       "configuration_keys": ["segment.ms", "retention.bytes", "unknown.key"]}],
        "include_synonyms": True, "include_documentation": True})
    (result,) = response.results
    assert result.error_code == 0
    by_name = {c.name: c for c in result.configs}
    assert set(by_name) == {"segment.ms", "retention.bytes"}
    seg = by_name["segment.ms"]
    assert seg.value == "3600000" and seg.config_source == 1
    assert seg.synonyms[0].name == "segment.ms" and seg.synonyms[0].source == 1
    assert [s.name for s in seg.synonyms[1:]][-1] == "log.roll.hours"
    if version >= 3:
        assert seg.config_type == 5  # LONG
        assert seg.documentation
        assert by_name["retention.bytes"].config_type == 5
    # configuration_keys null: every key.
    response = raw_call(bs, 32, version, {"resources": [{"resource_type": 2, "resource_name": name,
                                                          "configuration_keys": None}]})
    assert len(response.results[0].configs) >= 15
    assert all(not c.synonyms for c in response.results[0].configs)


# -- AlterConfigs / IncrementalAlterConfigs on topics ------------------------------------

def test_incremental_alter_topic_set_delete_append_subtract(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "iac", 1, {"retention.ms": "100000"})
    assert incremental(bs, ResourceType.TOPIC, "iac", [
        ("segment.bytes", "1048576", AlterConfigOpType.SET),
        ("retention.ms", None, AlterConfigOpType.DELETE),
        ("cleanup.policy", "compact", AlterConfigOpType.APPEND)]) is None
    values = topic_values(bs, "iac")
    assert values["segment.bytes"] == "1048576"
    assert values["retention.ms"] == "604800000"  # back to the broker default
    assert values["cleanup.policy"] == "delete,compact"
    assert incremental(bs, ResourceType.TOPIC, "iac",
                       [("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)]) is None
    assert topic_values(bs, "iac")["cleanup.policy"] == "compact"
    # APPEND of an element already there adds nothing.
    assert incremental(bs, ResourceType.TOPIC, "iac",
                       [("cleanup.policy", "compact", AlterConfigOpType.APPEND)]) is None
    assert topic_values(bs, "iac")["cleanup.policy"] == "compact"


def test_incremental_alter_topic_errors_and_validate_only(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "iac-err", 1)
    err = incremental(bs, ResourceType.TOPIC, "iac-err", [("retention.ms", "5", AlterConfigOpType.APPEND)])
    assert err.code() == INVALID_CONFIG and "append is not allowed" in err.str()
    err = incremental(bs, ResourceType.TOPIC, "iac-err", [("no.such.config", "1", AlterConfigOpType.SET)])
    assert err.code() == INVALID_CONFIG
    err = incremental(bs, ResourceType.TOPIC, "iac-err", [("segment.bytes", "1", AlterConfigOpType.SET)])
    assert err.code() == INVALID_CONFIG
    err = incremental(bs, ResourceType.TOPIC, "iac-missing", [("segment.bytes", "100000", AlterConfigOpType.SET)])
    assert err.code() == UNKNOWN_TOPIC_OR_PARTITION
    assert incremental(bs, ResourceType.TOPIC, "iac-err", [("segment.bytes", "100000", AlterConfigOpType.SET)],
                       validate_only=True) is None
    values = topic_values(bs, "iac-err")
    assert values["segment.bytes"] != "100000"


def test_legacy_alter_configs_replaces_the_whole_set(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "legacy", 1, {"retention.ms": "100000", "segment.bytes": "200000"})
    client = admin(bs)
    resource = ConfigResource(ResourceType.TOPIC, "legacy", set_config={"max.message.bytes": "5000"})
    with pytest.warns(DeprecationWarning):
        futures = client.alter_configs([resource], request_timeout=TIMEOUT_S)
    futures[resource].result(TIMEOUT_S)
    configs = describe(bs, ResourceType.TOPIC, "legacy")
    overridden = {k for k, e in configs.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    assert overridden == {"max.message.bytes"}
    assert configs["retention.ms"].value == "604800000"
    # The new max.message.bytes is enforced by every worker at once.
    big = [Rec(0, None, b"x" * 8000)]
    for _ in range(2):  # two connections: likely both workers
        reports = produce_confluent(bs, "legacy", big, message_max_bytes=100000, retries=0)
        assert reports[0][0] is not None and reports[0][0].code() == 10  # MSG_SIZE_TOO_LARGE


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_every_version(kbroker, version):
    bs = kbroker.bootstrap
    name = f"ac-v{version}"
    create_topic(bs, name, 1)
    response = raw_call(bs, 33, version, {"resources": [
        {"resource_type": 2, "resource_name": name, "configs": [{"name": "flush.messages", "value": "10"}]},
        {"resource_type": 2, "resource_name": name + "-x", "configs": []},
        {"resource_type": 4, "resource_name": "0", "configs": [{"name": "num.io.threads", "value": "3"}]},
    ], "validate_only": False})
    assert [r.error_code for r in response.responses] == [0, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST]
    assert "Cannot update these configs dynamically" in response.responses[2].error_message
    assert topic_values(bs, name)["flush.messages"] == "10"


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs_every_version(kbroker, version):
    bs = kbroker.bootstrap
    name = f"iac-v{version}"
    create_topic(bs, name, 1)
    response = raw_call(bs, 44, version, {"resources": [
        {"resource_type": 2, "resource_name": name, "configs": [
            {"name": "flush.ms", "config_operation": 0, "value": "1000"},
            {"name": "flush.ms", "config_operation": 1, "value": None}]},
        {"resource_type": 2, "resource_name": name, "configs": []},
    ], "validate_only": False})
    # The same resource twice: both refused.
    assert [r.error_code for r in response.responses] == [INVALID_REQUEST, INVALID_REQUEST]
    response = raw_call(bs, 44, version, {"resources": [
        {"resource_type": 2, "resource_name": name, "configs": [
            {"name": "flush.ms", "config_operation": 0, "value": "1000"},
            {"name": "index.interval.bytes", "config_operation": 9, "value": "1"}]}],
        "validate_only": False})
    assert response.responses[0].error_code == INVALID_REQUEST
    response = raw_call(bs, 44, version, {"resources": [
        {"resource_type": 2, "resource_name": name, "configs": [
            {"name": "flush.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": False})
    assert response.responses[0].error_code == 0
    assert topic_values(bs, name)["flush.ms"] == "1000"


# -- effects of topic configs --------------------------------------------------------------

def test_shorter_retention_ms_deletes_old_segments(kbroker):
    bs = kbroker.bootstrap
    topic = "retention-alter"
    create_topic(bs, topic, 1, {"segment.bytes": "1024", "file.delete.delay.ms": "0"})
    hour_ago_ms = int(time.time() * 1000) - 3600_000
    produce_one_per_batch(bs, topic, 20, 200, hour_ago_ms)
    produce_one_per_batch(bs, topic, 5, 200, 0)
    time.sleep(3 * RETENTION_CHECK_MS / 1000)
    assert segment_bases(kbroker, topic)[0] == 0, "deleted under the 7-day default"
    assert incremental(bs, ResourceType.TOPIC, topic, [("retention.ms", "600000", AlterConfigOpType.SET)]) is None
    assert wait_for(lambda: watermarks(bs, topic)[0] > 0), kbroker.log_tail()
    low, high = watermarks(bs, topic)
    assert 0 < low <= 20 and high == 25
    assert wait_for(lambda: segment_bases(kbroker, topic)[0] == low), segment_bases(kbroker, topic)


def test_altered_timestamp_type_and_retention_bytes_take_effect(kbroker):
    bs = kbroker.bootstrap
    topic = "alter-effects"
    create_topic(bs, topic, 1, {"segment.bytes": "1024", "file.delete.delay.ms": "0"})
    produce_n(bs, topic, 2, timestamp_ms=1_000_000)
    assert incremental(bs, ResourceType.TOPIC, topic,
                       [("message.timestamp.type", "LogAppendTime", AlterConfigOpType.SET)]) is None
    before_ms = int(time.time() * 1000)
    produce_n(bs, topic, 2, timestamp_ms=1_000_000)
    got = consume_confluent(bs, topic, {0: 4})
    assert [g.timestamp_type for g in got] == [CREATE_TIME] * 2 + [LOG_APPEND_TIME] * 2
    assert got[0].timestamp_ms == 1_000_000
    assert all(g.timestamp_ms >= before_ms for g in got[2:]), got
    # retention.bytes: the partition is trimmed to whole segments within the limit.
    produce_one_per_batch(bs, topic, 20, 200, 0)
    assert incremental(bs, ResourceType.TOPIC, topic,
                       [("retention.bytes", "2048", AlterConfigOpType.SET)]) is None
    path = kbroker.log_dirs[0] / f"{topic}-0"

    def size(segment):
        try:
            return segment.stat().st_size
        except FileNotFoundError:  # deleted by retention between the glob and the stat
            return 0

    def trimmed():
        total = sum(size(p) for p in path.glob("*.log"))
        return total <= 2048 + 1024 and watermarks(bs, topic)[0] > 0

    assert wait_for(trimmed), segment_bases(kbroker, topic)


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_topic_compression_type_recompresses_on_append(kbroker, codec):
    bs = kbroker.bootstrap
    topic = f"recompress-{codec}"
    create_topic(bs, topic, 1, {"compression.type": codec})
    ids = {"gzip": 1, "zstd": 4}
    sent = produce_n(bs, topic, 20, compression_type="lz4", enable_idempotence=True)
    sent += produce_n(bs, topic, 5, compression_type="none")
    assert set(batch_codecs(kbroker, topic, 0)) == {ids[codec]}
    got = consume_confluent(bs, topic, {0: 25})
    assert [(g.key, g.value, g.headers) for g in got] == [(r.key, r.value, r.headers) for r in sent]
    # producer: batches stay as the producer sent them.
    assert incremental(bs, ResourceType.TOPIC, topic,
                       [("compression.type", "producer", AlterConfigOpType.SET)]) is None
    produce_n(bs, topic, 5, compression_type="lz4")
    assert batch_codecs(kbroker, topic, 0)[-1] == 3


# -- CreatePartitions ----------------------------------------------------------------------

def test_create_partitions(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "grow", 2)
    client = admin(bs)
    client.create_partitions([NewPartitions("grow", 5)], validate_only=True,
                             request_timeout=TIMEOUT_S)["grow"].result(TIMEOUT_S)
    assert topic_partition_counts(bs)["grow"] == 2
    client.create_partitions([NewPartitions("grow", 5)], request_timeout=TIMEOUT_S)["grow"].result(TIMEOUT_S)
    assert topic_partition_counts(bs)["grow"] == 5
    for count, code in ((5, INVALID_PARTITIONS), (3, INVALID_PARTITIONS)):
        with pytest.raises(KafkaException) as info:
            client.create_partitions([NewPartitions("grow", count)],
                                     request_timeout=TIMEOUT_S)["grow"].result(TIMEOUT_S)
        assert info.value.args[0].code() == code
    with pytest.raises(KafkaException) as info:
        client.create_partitions([NewPartitions("grow", 7, replica_assignment=[[0], [3]])],
                                 request_timeout=TIMEOUT_S)["grow"].result(TIMEOUT_S)
    assert info.value.args[0].code() == 39  # INVALID_REPLICA_ASSIGNMENT
    client.create_partitions([NewPartitions("grow", 7, replica_assignment=[[0], [0]])],
                             request_timeout=TIMEOUT_S)["grow"].result(TIMEOUT_S)
    assert topic_partition_counts(bs)["grow"] == 7
    # The new partitions take records.
    records = [Rec(p, None, b"p%d" % p) for p in range(7)]
    assert_delivered(produce_confluent(bs, "grow", records))
    assert (kbroker.log_dirs[0] / "grow-6").is_dir()
    assert watermarks(bs, "grow", 6) == (0, 1)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_create_partitions_every_version(kbroker, version):
    bs = kbroker.bootstrap
    name = f"cp-v{version}"
    create_topic(bs, name, 1)
    response = raw_call(bs, 37, version, {"topics": [
        {"name": name, "count": 2, "assignments": None},
        {"name": name + "-missing", "count": 2, "assignments": None}],
        "timeout": 10000, "validate_only": False})
    assert [r.error_code for r in response.results] == [0, UNKNOWN_TOPIC_OR_PARTITION]
    assert topic_partition_counts(bs)[name] == 2


# -- DeleteRecords ----------------------------------------------------------------------------

def test_delete_records(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "trim", 2)
    produce_n(bs, "trim", 10, partition=0)
    produce_n(bs, "trim", 6, partition=1)
    client = admin(bs)
    tp0 = TopicPartition("trim", 0, 4)
    result = client.delete_records([tp0], request_timeout=TIMEOUT_S)[tp0].result(TIMEOUT_S)
    assert result.low_watermark == 4
    assert watermarks(bs, "trim", 0) == (4, 10)
    # It never moves back.
    tp0 = TopicPartition("trim", 0, 2)
    assert client.delete_records([tp0], request_timeout=TIMEOUT_S)[tp0].result(TIMEOUT_S).low_watermark == 4
    # -1 (OFFSET_END): up to the high watermark.
    tp1 = TopicPartition("trim", 1, -1)
    assert client.delete_records([tp1], request_timeout=TIMEOUT_S)[tp1].result(TIMEOUT_S).low_watermark == 6
    assert watermarks(bs, "trim", 1) == (6, 6)
    tp0 = TopicPartition("trim", 0, 11)
    with pytest.raises(KafkaException) as info:
        client.delete_records([tp0], request_timeout=TIMEOUT_S)[tp0].result(TIMEOUT_S)
    assert info.value.args[0].code() == OFFSET_OUT_OF_RANGE
    got = consume_confluent(bs, "trim", {0: 6}, start_offset=4)
    assert [g.offset for g in got] == list(range(4, 10))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records_every_version(kbroker, version):
    bs = kbroker.bootstrap
    name = f"dr-v{version}"
    create_topic(bs, name, 1)
    produce_n(bs, name, 3)
    response = raw_call(bs, 21, version, {"topics": [{"name": name, "partitions": [
        {"partition_index": 0, "offset": 2}, {"partition_index": 5, "offset": 0}]}], "timeout": 5000})
    parts = response.topics[0].partitions
    assert [(p.error_code, p.low_watermark) for p in parts] == [(0, 2), (UNKNOWN_TOPIC_OR_PARTITION, -1)]


# -- DescribeCluster, DescribeLogDirs, DescribeProducers ----------------------------------------

def test_describe_cluster(kbroker):
    client = admin(kbroker.bootstrap)
    cluster = client.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    props = (kbroker.log_dirs[0] / "meta.properties").read_text()
    assert f"cluster.id={cluster.cluster_id}" in props
    assert cluster.controller.id == 0
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, "127.0.0.1", kbroker.port)]
    for version in (0, 1):
        response = raw_call(kbroker.bootstrap, 60, version, {"include_cluster_authorized_operations": False})
        assert response.error_code == 0 and response.cluster_authorized_operations == -(2**31)
    response = raw_call(kbroker.bootstrap, 60, 1, {"include_cluster_authorized_operations": False,
                                                   "endpoint_type": 2})
    assert response.error_code == 115  # UNSUPPORTED_ENDPOINT_TYPE


def test_describe_log_dirs(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "dirs", 2)
    produce_n(bs, "dirs", 10, partition=1, size=500)
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        response = client.describe_log_dirs()
    finally:
        client.close()
    # kafka-python answers one entry per broker, each with its log dirs.
    (per_broker,) = response
    assert per_broker["broker"] == 0
    (result,) = per_broker["log_dirs"]
    assert result["log_dir"] == str(kbroker.log_dirs[0])
    topics = {t["name"]: {p["partition_index"]: p["partition_size"] for p in t["partitions"]}
              for t in result["topics"]}
    on_disk = sum(p.stat().st_size for p in (kbroker.log_dirs[0] / "dirs-1").glob("*.log"))
    assert topics["dirs"] == {0: 0, 1: on_disk} and on_disk > 5000
    for version in (1, 2, 3, 4):
        response = raw_call(bs, 35, version, {"topics": [{"topic": "dirs", "partitions": [1, 9]}]})
        (result,) = response.results
        assert result.error_code == 0 and result.log_dir == str(kbroker.log_dirs[0])
        assert [(p.partition_index, p.partition_size, p.offset_lag) for p in result.topics[0].partitions] \
            == [(1, on_disk, 0)]
        if version >= 4:
            assert result.total_bytes > result.usable_bytes > 0


def test_describe_producers(kbroker):
    bs = kbroker.bootstrap
    create_topic(bs, "producers", 1)
    produce_n(bs, "producers", 7, enable_idempotence=True, linger_ms=0, batch_num_messages=1,
              max_in_flight_requests_per_connection=1)
    response = raw_call(bs, 61, 0, {"topics": [{"name": "producers", "partition_indexes": [0, 3]}]})
    ok, missing = response.topics[0].partitions
    assert missing.error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert ok.error_code == 0
    (state,) = ok.active_producers
    assert state.producer_id >= 0 and state.producer_epoch == 0
    assert state.last_sequence == 6
    assert abs(state.last_timestamp - time.time() * 1000) < 60_000
    assert state.coordinator_epoch == -1 and state.current_txn_start_offset == -1


# -- dynamic broker configs ------------------------------------------------------------------

def test_dynamic_broker_configs_apply_and_survive_restart(broker_factory):
    b = broker_factory({"num.io.threads": 2, "num.network.threads": 1,
                        "log.retention.check.interval.ms": RETENTION_CHECK_MS,
                        "log.segment.delete.delay.ms": 0})
    bs = b.bootstrap
    create_topic(bs, "plain", 1, {"segment.bytes": "1024"})
    create_topic(bs, "kept", 1, {"segment.bytes": "1024", "retention.ms": "-1"})
    hour_ago_ms = int(time.time() * 1000) - 3600_000
    for topic in ("plain", "kept"):
        produce_one_per_batch(bs, topic, 15, 200, hour_ago_ms)
        produce_one_per_batch(bs, topic, 3, 200, 0)

    # Read-only keys and other brokers are refused; bad values are INVALID_CONFIG.
    err = incremental(bs, ResourceType.BROKER, "0", [("num.io.threads", "4", AlterConfigOpType.SET)])
    assert err.code() == INVALID_REQUEST and "Cannot update these configs dynamically" in err.str()
    # (another broker id goes raw: librdkafka would send it to that broker)
    response = raw_call(bs, 44, 1, {"resources": [{"resource_type": 4, "resource_name": "3", "configs": [
        {"name": "log.retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": False})
    assert response.responses[0].error_code == INVALID_REQUEST
    err = incremental(bs, ResourceType.BROKER, "0", [("log.retention.ms", "abc", AlterConfigOpType.SET)])
    assert err.code() == INVALID_CONFIG
    err = incremental(bs, ResourceType.BROKER, "0", [("log.retention.ms", "0", AlterConfigOpType.SET)])
    assert err.code() == INVALID_CONFIG

    # Per-broker log.retention.ms: topics without an override follow it.
    assert incremental(bs, ResourceType.BROKER, "0", [("log.retention.ms", "600000", AlterConfigOpType.SET)]) is None
    configs = describe(bs, ResourceType.BROKER, "0")
    assert configs["log.retention.ms"].value == "600000"
    assert configs["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    topic_retention = describe(bs, ResourceType.TOPIC, "plain")["retention.ms"]
    assert topic_retention.value == "600000"
    assert topic_retention.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert wait_for(lambda: watermarks(bs, "plain")[0] > 0), b.log_tail()
    assert watermarks(bs, "kept")[0] == 0  # its own retention.ms=-1 wins

    # Cluster-wide default (resource name "", which confluent-kafka cannot
    # name: raw requests): compression.type for topics without an override.
    response = raw_call(bs, 44, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
        {"name": "compression.type", "config_operation": 0, "value": "gzip"},
        {"name": "message.max.bytes", "config_operation": 0, "value": "300000"}]}], "validate_only": False})
    assert response.responses[0].error_code == 0
    default = cluster_default(bs)
    assert {k: v for k, (v, _src) in default.items()} == {"compression.type": "gzip", "message.max.bytes": "300000"}
    assert default["compression.type"][1] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    create_topic(bs, "fresh", 1)
    produce_n(bs, "fresh", 5, compression_type="snappy")
    assert set(batch_codecs(b, "fresh", 0)) == {1}
    assert describe(bs, ResourceType.TOPIC, "fresh")["max.message.bytes"].value == "300000"

    # A per-broker value beats the cluster default.
    assert incremental(bs, ResourceType.BROKER, "0", [("compression.type", "zstd", AlterConfigOpType.SET)]) is None
    assert describe(bs, ResourceType.BROKER, "0")["compression.type"].source == \
        ConfigSource.DYNAMIC_BROKER_CONFIG.value

    assert incremental(bs, ResourceType.TOPIC, "kept", [("max.message.bytes", "4000", AlterConfigOpType.SET)]) is None

    # Everything survives a restart.
    assert b.stop() == 0
    b.start()
    configs = describe(bs, ResourceType.BROKER, "0")
    assert configs["log.retention.ms"].value == "600000"
    assert configs["compression.type"].value == "zstd"
    assert cluster_default(bs)["compression.type"][0] == "gzip"
    assert describe(bs, ResourceType.TOPIC, "kept")["retention.ms"].value == "-1"
    assert describe(bs, ResourceType.TOPIC, "kept")["max.message.bytes"].value == "4000"
    reports = produce_confluent(bs, "kept", [Rec(0, None, b"x" * 6000)], message_max_bytes=100000, retries=0)
    assert reports[0][0] is not None and reports[0][0].code() == 10
    produce_n(bs, "fresh", 3, compression_type="none")
    assert batch_codecs(b, "fresh", 0)[-1] == 4

    # DELETE returns to the static/default value.
    assert incremental(bs, ResourceType.BROKER, "0", [("log.retention.ms", None, AlterConfigOpType.DELETE),
                                                      ("compression.type", None, AlterConfigOpType.DELETE)]) is None
    configs = describe(bs, ResourceType.BROKER, "0")
    assert configs["log.retention.ms"].source != ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert configs["compression.type"].value == "gzip"  # the cluster default again


def test_min_insync_replicas_is_capped_at_the_replication_factor(broker):
    """min.insync.replicas=2 on a one-replica topic: Kafka 3.9 caps it at the
    replica count (effectiveMinIsr), so acks=all and acks=1 both succeed
    while the one replica is in sync (tests/system/test_replication.py has
    the refusal with three replicas and two brokers down)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("minisr", 1, 1, config={"min.insync.replicas": "2"})])["minisr"].result(30)
    results = {}
    for acks in ("all", "1"):
        errors = []
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "retries": 0,
                      "message.timeout.ms": 5000})
        p.produce("minisr", b"v", on_delivery=lambda err, msg: errors.append(err))
        p.flush(15)
        results[acks] = errors
    assert results["all"] == [None]
    assert results["1"] == [None]
