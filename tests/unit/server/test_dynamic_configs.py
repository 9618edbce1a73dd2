"""Dynamic configs: the describe entries (values, sources, synonyms), validation
of dynamic broker keys, precedence, the Broker's propagation of changes to open
logs in other processes (two Broker objects on one shared table stand in for
two workers), CreatePartitions checks, and the logging configuration loader."""

import logging
import os

import pytest

from kafkapy.server import config as c
from kafkapy.server.broker import Broker
from kafkapy.server.config import BrokerConfig, InvalidConfigError, NonDynamicConfigError
from kafkapy.protocol.topics import TopicError
from kafkapy.storage.log_manager import LogManager
from kafkapy.storage.shared import SharedPartitionTable


def _static(tmp_path, **extra):
    props = {"log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:9092",
             "broker.id": "0", "log.retention.hours": "100"}
    props.update(extra)
    return BrokerConfig.from_props(props)


def _by_name(entries):
    return {e.name: e for e in entries}


def test_dynamic_keys_are_the_broker_synonyms_of_topic_keys():
    assert {"log.retention.ms", "log.segment.bytes", "message.max.bytes", "compression.type",
            "log.cleanup.policy", "min.insync.replicas"} <= c.DYNAMIC_BROKER_CONFIGS
    assert not {"log.retention.hours", "num.io.threads", "listeners", "log.dirs"} & c.DYNAMIC_BROKER_CONFIGS


def test_validate_dynamic_broker_configs():
    assert c.validate_dynamic_broker_configs({"log.retention.ms": " 5000 "}) == {"log.retention.ms": "5000"}
    with pytest.raises(NonDynamicConfigError) as info:
        c.validate_dynamic_broker_configs({"num.io.threads": "2", "listeners": "x"})
    assert info.value.message == "Cannot update these configs dynamically: Set(listeners, num.io.threads)"
    with pytest.raises(InvalidConfigError):
        c.validate_dynamic_broker_configs({"log.segment.bytes": "1"})
    with pytest.raises(InvalidConfigError):
        c.validate_dynamic_broker_configs({"compression.type": "brotli"})


def test_precedence_and_sources(tmp_path):
    static = _static(tmp_path)
    cluster = {"log.retention.ms": "1000", "log.segment.bytes": "100000"}
    broker = {"log.retention.ms": "2000"}
    effective = c.effective_broker_config(static, cluster, broker)
    assert effective.log_retention_ms == 2000 and effective["log.segment.bytes"] == 100000
    entries = _by_name(c.broker_config_entries(static, cluster, broker))
    retention = entries["log.retention.ms"]
    assert retention.value == "2000" and retention.source == c.SOURCE_DYNAMIC_BROKER
    assert retention.synonyms == [("log.retention.ms", "2000", 2), ("log.retention.ms", "1000", 3),
                                  ("log.retention.hours", "100", 4), ("log.retention.hours", "168", 5)]
    assert not retention.read_only
    assert entries["log.segment.bytes"].source == c.SOURCE_DYNAMIC_DEFAULT_BROKER
    assert entries["log.retention.hours"].source == c.SOURCE_STATIC_BROKER
    assert entries["log.retention.hours"].read_only
    assert entries["num.io.threads"].source == c.SOURCE_DEFAULT and entries["num.io.threads"].value == "8"
    assert entries["log.segment.bytes"].config_type == 3  # INT
    topic = _by_name(c.topic_config_entries(effective, static, cluster, broker, {"segment.bytes": "50000"}))
    assert topic["retention.ms"].value == "2000" and topic["retention.ms"].source == c.SOURCE_DYNAMIC_BROKER
    assert topic["segment.bytes"].value == "50000" and topic["segment.bytes"].source == c.SOURCE_DYNAMIC_TOPIC
    assert topic["segment.bytes"].synonyms[:2] == [("segment.bytes", "50000", 1),
                                                   ("log.segment.bytes", "100000", 3)]
    assert topic["cleanup.policy"].source == c.SOURCE_DEFAULT and topic["cleanup.policy"].value == "delete"
    cluster_entries = c.cluster_default_entries(cluster)
    assert [(e.name, e.value, e.source) for e in cluster_entries] == [
        ("log.retention.ms", "1000", 3), ("log.segment.bytes", "100000", 3)]


def test_layered_result_must_validate(tmp_path):
    with pytest.raises(InvalidConfigError):
        c.effective_broker_config(_static(tmp_path), {}, {"log.retention.ms": "0"})


@pytest.fixture
def two_workers(tmp_path):
    config = _static(tmp_path)
    table = SharedPartitionTable(capacity=16, lock_path=str(tmp_path / "locks"))
    manager = LogManager(config.log_dirs, c.log_config_for(config, {}), 0)
    a = Broker(config, table, manager)
    b = Broker(config, table, LogManager(config.log_dirs, c.log_config_for(config, {}), 0))
    yield a, b
    a.close()
    b.close()
    table.close()


def test_config_changes_reach_open_logs_of_other_processes(two_workers):
    a, b = two_workers
    a.admin.create_topic("t", 2, {"retention.ms": "5000"})
    log_b = b.replica_manager.get_partition("t", 0).log
    assert log_b.config.retention_ms == 5000
    a.admin.alter_topic_configs("t", lambda current: {**current, "compression.type": "zstd"})
    b.replica_manager.get_partition("t", 0)  # any request notices the new generation
    assert log_b.config.compression_type == "zstd" and log_b.config.retention_ms == 5000
    # Broker defaults reach topics without an override of that key.
    a.admin.alter_broker_configs("", lambda current: {"log.segment.bytes": "123456", "log.retention.ms": "9"})
    b.replica_manager.get_partition("t", 0)
    assert log_b.config.segment_bytes == 123456 and log_b.config.retention_ms == 5000
    assert b.config["log.segment.bytes"] == 123456
    a.admin.alter_broker_configs("0", lambda current: {"log.segment.bytes": "654321"})
    assert b.config["log.segment.bytes"] == 654321
    # validate_only changes nothing.
    a.admin.alter_broker_configs("0", lambda current: {}, validate_only=True)
    assert b.config["log.segment.bytes"] == 654321
    with pytest.raises(TopicError) as info:
        a.admin.alter_broker_configs("1", lambda current: {"log.segment.bytes": "654321"})
    assert info.value.error_code == 42
    with pytest.raises(TopicError) as info:
        a.admin.alter_topic_configs("t", lambda current: {"retention.ms": "x"})
    assert info.value.error_code == 40


def test_create_partitions_checks(two_workers):
    a, b = two_workers
    a.admin.create_topic("g", 2)
    with pytest.raises(TopicError) as info:
        a.admin.create_partitions("g", 2)
    assert (info.value.error_code, info.value.message) == (37, "Topic already has 2 partitions.")
    with pytest.raises(TopicError) as info:
        a.admin.create_partitions("g", 1)
    assert info.value.error_code == 37
    with pytest.raises(TopicError) as info:
        a.admin.create_partitions("g", 4, [[0]])
    assert info.value.error_code == 39
    with pytest.raises(TopicError) as info:
        a.admin.create_partitions("g", 3, [[0, 0]])
    assert info.value.error_code == 39
    with pytest.raises(TopicError) as info:
        a.admin.create_partitions("nope", 3)
    assert info.value.error_code == 3
    a.admin.create_partitions("g", 4, validate_only=True)
    assert b.metadata().topics["g"].num_partitions == 2
    a.admin.create_partitions("g", 4)
    assert b.metadata().topics["g"].num_partitions == 4
    log_b = b.replica_manager.get_partition("g", 3).log
    assert log_b.log_end_offset == 0 and all(b.table.slot_for(b.metadata().topics["g"].topic_id, p) is not None for p in range(4))


# -- logging -------------------------------------------------------------------------------

@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("kafkapy.request").level,
             logging.getLogger("kafkapy.storage").level)
    yield
    root.handlers[:], root.level = saved[0], saved[1]
    logging.getLogger("kafkapy.request").setLevel(saved[2])
    logging.getLogger("kafkapy.storage").setLevel(saved[3])


def test_repo_logging_ini_loads_with_request_logging_off(tmp_path, monkeypatch, restore_logging):
    from kafkapy.server import main

    repo_ini = os.path.join(os.path.dirname(__file__), "..", "..", "..", "config", "logging.ini")
    monkeypatch.setenv(main.LOG_CONFIG_ENV, repo_ini)
    assert main.setup_logging() == repo_ini
    assert not logging.getLogger("kafkapy.request").isEnabledFor(logging.INFO)
    assert logging.getLogger("kafkapy.storage").isEnabledFor(logging.INFO)
    assert isinstance(logging.getLogger().handlers[0].formatter, main.KafkaFormatter)


def test_logging_ini_next_to_server_properties(tmp_path, monkeypatch, restore_logging):
    from kafkapy.server import main

    monkeypatch.delenv(main.LOG_CONFIG_ENV, raising=False)
    props = tmp_path / "server.properties"
    props.write_text("")
    assert main.log_config_path(str(props)) is None
    (tmp_path / "logging.ini").write_text(
        "[loggers]\nkeys=root,storage\n[handlers]\nkeys=h\n[formatters]\nkeys=f\n"
        "[logger_root]\nlevel=WARNING\nhandlers=h\n"
        "[logger_storage]\nlevel=DEBUG\nhandlers=\nqualname=kafkapy.storage\n"
        "[handler_h]\nclass=StreamHandler\nformatter=f\nargs=(sys.stderr,)\n"
        "[formatter_f]\nclass=kafkapy.server.main.KafkaFormatter\n")
    assert main.setup_logging(properties_path=str(props)) == str(tmp_path / "logging.ini")
    assert logging.getLogger("kafkapy.storage").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("kafkapy.unconfigured").isEnabledFor(logging.INFO)


def test_broken_logging_config_falls_back_to_defaults(tmp_path, monkeypatch, restore_logging):
    from kafkapy.server import main

    bad = tmp_path / "bad.ini"
    bad.write_text("[loggers]\nkeys=root\n")
    monkeypatch.setenv(main.LOG_CONFIG_ENV, str(bad))
    assert main.setup_logging() is None
    assert logging.getLogger().isEnabledFor(logging.INFO)
