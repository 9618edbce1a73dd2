"""Topic administration through real clients against a real kafkapy broker:
CreateTopics (configs, validate_only, every per-topic error), Metadata
(list_topics, auto-creation on and off), DeleteTopics and re-creation.

Two brokers serve the module: one with Kafka's default
auto.create.topics.enable=true (num.partitions=2, so an auto-created topic is
recognisable) and one with auto-creation off.
"""

from __future__ import annotations

import pytest

from support.clients import (
    Rec,
    admin,
    assert_delivered,
    check_consumed,
    consume_confluent,
    create_topic,
    module_broker,
    produce_confluent,
    topic_partition_counts,
)

pytestmark = pytest.mark.timeout(120)

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def auto_broker(tmp_path_factory):
    with module_broker(tmp_path_factory, {"auto.create.topics.enable": True, "num.partitions": 2}) as b:
        yield b


@pytest.fixture(scope="module")
def manual_broker(tmp_path_factory):
    with module_broker(tmp_path_factory, {"auto.create.topics.enable": False}) as b:
        yield b


def _create(bootstrap, new_topics, **kwargs):
    """create_topics -> {name: None | KafkaError}."""
    client = admin(bootstrap)
    futures = client.create_topics(new_topics, request_timeout=TIMEOUT_S, **kwargs)
    out = {}
    for name, future in futures.items():
        try:
            out[name] = future.result(TIMEOUT_S)
        except Exception as exc:  # KafkaException(KafkaError)
            out[name] = exc.args[0]
    return out


def _delete(bootstrap, names):
    client = admin(bootstrap)
    futures = client.delete_topics(names, request_timeout=TIMEOUT_S)
    out = {}
    for name, future in futures.items():
        try:
            out[name] = future.result(TIMEOUT_S)
        except Exception as exc:
            out[name] = exc.args[0]
    return out


def _watermarks(bootstrap, topic, partition):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkapy-itest-wm",
                         "enable.auto.commit": False})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S)
    finally:
        consumer.close()


# -- CreateTopics -------------------------------------------------------------------------

def test_create_with_partitions_and_configs_listed(manual_broker):
    from confluent_kafka.admin import NewTopic

    bs = manual_broker.bootstrap
    result = _create(bs, [NewTopic("adm-configs", 5, 1, config={"retention.ms": "3600000",
                                                                "cleanup.policy": "delete",
                                                                "max.message.bytes": "20000"}),
                          NewTopic("adm-one", 1, 1)])
    assert result == {"adm-configs": None, "adm-one": None}
    topics = topic_partition_counts(bs)
    assert topics["adm-configs"] == 5 and topics["adm-one"] == 1, topics
    # Every partition is usable and led by our one broker.
    md = admin(bs).list_topics(topic="adm-configs", timeout=TIMEOUT_S)
    assert sorted(md.topics["adm-configs"].partitions) == [0, 1, 2, 3, 4]
    assert {p.leader for p in md.topics["adm-configs"].partitions.values()} == {0}
    # The config took effect: max.message.bytes=20000 refuses a 50 KB record.
    reports = produce_confluent(bs, "adm-configs", [Rec(4, None, b"q" * 50_000)],
                                message_max_bytes=2_000_000, retries=0)
    assert reports[0][0] is not None and reports[0][0].name() == "MSG_SIZE_TOO_LARGE", reports


def test_create_topics_response_configs_kafka_python(manual_broker):
    """CreateTopics v5+ answers with the topic's configs, values as Kafka prints them."""
    from kafka.admin import KafkaAdminClient, NewTopic

    client = KafkaAdminClient(bootstrap_servers=manual_broker.bootstrap)
    try:
        response = client.create_topics([NewTopic("adm-kp-configs", 2, 1, topic_configs={
            "retention.ms": "3600000", "cleanup.policy": "compact"})])
    finally:
        client.close()
    topic = response["topics"][0] if isinstance(response, dict) else response.topics[0]
    assert topic["error_code"] == 0 and topic["num_partitions"] == 2
    configs = {k: v["value"] for k, v in topic["configs"].items()}
    assert configs["retention.ms"] == "3600000"
    assert configs["cleanup.policy"] == "compact"
    assert configs["max.message.bytes"] == "1048588"
    # Kafka prints booleans in lower case (Java's Boolean.toString).
    assert configs["preallocate"] == "false"
    assert configs["message.timestamp.type"] == "CreateTime"


def test_validate_only_creates_nothing(manual_broker):
    from confluent_kafka.admin import NewTopic

    bs = manual_broker.bootstrap
    assert _create(bs, [NewTopic("adm-validate", 3, 1)], validate_only=True) == {"adm-validate": None}
    assert "adm-validate" not in topic_partition_counts(bs)
    # validate_only still runs every check.
    err = _create(bs, [NewTopic("adm-validate", 1, 3)], validate_only=True)["adm-validate"]
    assert err.name() == "INVALID_REPLICATION_FACTOR"
    assert "adm-validate" not in topic_partition_counts(bs)
    # ... and did not reserve the name.
    assert _create(bs, [NewTopic("adm-validate", 3, 1)]) == {"adm-validate": None}
    assert topic_partition_counts(bs)["adm-validate"] == 3


@pytest.mark.parametrize("name, partitions, rf, config, error", [
    ("adm-dup", 1, 1, {}, "TOPIC_ALREADY_EXISTS"),
    ("bad name!", 1, 1, {}, "TOPIC_EXCEPTION"),              # INVALID_TOPIC_EXCEPTION (17)
    ("x" * 250, 1, 1, {}, "TOPIC_EXCEPTION"),                # longer than 249
    ("..", 1, 1, {}, "TOPIC_EXCEPTION"),
    ("adm-rf3", 1, 3, {}, "INVALID_REPLICATION_FACTOR"),
    ("adm-badcfg", 1, 1, {"retention.ms": "soon"}, "INVALID_CONFIG"),
    ("adm-badpolicy", 1, 1, {"cleanup.policy": "shred"}, "INVALID_CONFIG"),
    ("adm-unknowncfg", 1, 1, {"no.such.config": "1"}, "INVALID_CONFIG"),
    ("adm-tstype", 1, 1, {"message.timestamp.type": "WallClock"}, "INVALID_CONFIG"),
])
def test_create_errors(manual_broker, name, partitions, rf, config, error):
    from confluent_kafka.admin import NewTopic

    bs = manual_broker.bootstrap
    if error == "TOPIC_ALREADY_EXISTS":
        create_topic(bs, name, 2)
    before = topic_partition_counts(bs)
    err = _create(bs, [NewTopic(name, partitions, rf, config=config)])[name]
    assert err is not None and err.name() == error, f"{name}: {err}"
    after = topic_partition_counts(bs)
    assert after == before, "a failed CreateTopics changed the topic list"


def test_create_error_is_per_topic(manual_broker):
    from confluent_kafka.admin import NewTopic

    bs = manual_broker.bootstrap
    result = _create(bs, [NewTopic("adm-ok-in-batch", 2, 1), NewTopic("adm-bad-in-batch", 1, 3)])
    assert result["adm-ok-in-batch"] is None
    assert result["adm-bad-in-batch"].name() == "INVALID_REPLICATION_FACTOR"
    topics = topic_partition_counts(bs)
    assert topics.get("adm-ok-in-batch") == 2 and "adm-bad-in-batch" not in topics


# -- DeleteTopics ---------------------------------------------------------------------------

def test_delete_then_produce_fails_without_auto_create(manual_broker):
    from confluent_kafka import KafkaError

    bs = manual_broker.bootstrap
    create_topic(bs, "adm-del", 3)
    assert_delivered(produce_confluent(bs, "adm-del", [Rec(p, b"k", b"old") for p in range(3)]))
    assert _delete(bs, ["adm-del"]) == {"adm-del": None}
    assert "adm-del" not in topic_partition_counts(bs)

    md = admin(bs).list_topics(topic="adm-del", timeout=TIMEOUT_S)
    assert md.topics["adm-del"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # A fresh producer learns from Metadata that the topic is gone and fails
    # the record (librdkafka reports the broker's UNKNOWN_TOPIC_OR_PARTITION).
    reports = produce_confluent(bs, "adm-del", [Rec(0, b"k", b"new")], message_timeout_ms=10_000,
                                topic_metadata_propagation_max_ms=1000)
    err = reports[0][0]
    assert err is not None and err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC), err
    assert "adm-del" not in topic_partition_counts(bs)
    # Deleting it again: UNKNOWN_TOPIC_OR_PARTITION.
    assert _delete(bs, ["adm-del"])["adm-del"].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_recreate_after_delete_is_fresh(manual_broker):
    bs = manual_broker.bootstrap
    create_topic(bs, "adm-recreate", 2)
    old = [Rec(p, b"k", f"old-{i}".encode()) for i in range(20) for p in range(2)]
    assert_delivered(produce_confluent(bs, "adm-recreate", old))
    assert _watermarks(bs, "adm-recreate", 0) == (0, 20)
    assert _delete(bs, ["adm-recreate"]) == {"adm-recreate": None}

    create_topic(bs, "adm-recreate", 3)
    assert topic_partition_counts(bs)["adm-recreate"] == 3
    for p in range(3):
        assert _watermarks(bs, "adm-recreate", p) == (0, 0), f"partition {p} not empty after re-create"
    new = [Rec(p, b"k2", b"new") for p in range(3)]
    reports = produce_confluent(bs, "adm-recreate", new)
    assert_delivered(reports)
    assert [r[2] for r in reports] == [0, 0, 0]
    check_consumed(new, consume_confluent(bs, "adm-recreate", {0: 1, 1: 1, 2: 1}))


# -- Metadata auto-creation ------------------------------------------------------------------

def test_auto_create_on_produce(auto_broker):
    bs = auto_broker.bootstrap
    assert "adm-auto" not in topic_partition_counts(bs)
    recs = [Rec(1, b"k", b"auto")]
    reports = produce_confluent(bs, "adm-auto", recs)
    assert_delivered(reports)
    # num.partitions=2 on this broker.
    assert topic_partition_counts(bs)["adm-auto"] == 2
    check_consumed(recs, consume_confluent(bs, "adm-auto", {1: 1}))


def test_auto_create_kafka_python_producer(auto_broker):
    from support.clients import produce_kafka_python

    # kafka-python's producer asks Metadata for the topic with
    # allow_auto_topic_creation=true; the broker creates it with num.partitions.
    recs = [Rec(1, b"k", b"auto-kp")]
    metadata = produce_kafka_python(auto_broker.bootstrap, "adm-auto-kp", recs)
    assert [(m.partition, m.offset) for m in metadata] == [(1, 0)]
    assert topic_partition_counts(auto_broker.bootstrap)["adm-auto-kp"] == 2


def test_no_auto_create_when_disabled(manual_broker):
    from confluent_kafka import KafkaError

    bs = manual_broker.bootstrap
    reports = produce_confluent(bs, "adm-never", [Rec(0, None, b"x")], message_timeout_ms=10_000,
                                topic_metadata_propagation_max_ms=1000)
    err = reports[0][0]
    assert err is not None and err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC), err
    assert "adm-never" not in topic_partition_counts(bs)


def test_delete_then_produce_auto_creates_fresh(auto_broker):
    bs = auto_broker.bootstrap
    create_topic(bs, "adm-del-auto", 4)
    assert_delivered(produce_confluent(bs, "adm-del-auto", [Rec(3, b"k", b"old")] * 5))
    assert _delete(bs, ["adm-del-auto"]) == {"adm-del-auto": None}
    assert "adm-del-auto" not in topic_partition_counts(bs)
    # With auto-creation on, a new producer's Metadata request re-creates it
    # with num.partitions (2), empty.
    recs = [Rec(0, b"k", b"new")]
    reports = produce_confluent(bs, "adm-del-auto", recs)
    assert_delivered(reports)
    assert reports[0][2] == 0
    assert topic_partition_counts(bs)["adm-del-auto"] == 2
    check_consumed(recs, consume_confluent(bs, "adm-del-auto", {0: 1}))
