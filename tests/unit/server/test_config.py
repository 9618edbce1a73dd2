"""The broker config table, config/server.properties, the .properties parser,
Kafka's derivation rules, validation messages and topic configs."""

import dataclasses
import logging
import re
from pathlib import Path

import pytest

from kafkapy.server import config as C
from kafkapy.server.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigException,
    Endpoint,
    InvalidConfigError,
    load_properties,
    parse_overrides,
    parse_properties,
    render_properties,
    topic_config_values,
    validate_topic_configs,
)

REPO = Path(__file__).resolve().parents[3]
SERVER_PROPERTIES = REPO / "config" / "server.properties"

# Keys config/server.properties deliberately sets away from Kafka's default.
INTENTIONAL_DEVIATIONS = {"broker.id", "listeners", "advertised.listeners", "log.dirs",
                          # as in Kafka's own config/server.properties (single-broker development)
                          "offsets.topic.replication.factor", "group.initial.rebalance.delay.ms",
                          "transaction.state.log.replication.factor", "transaction.state.log.min.isr"}


def cfg(**props):
    return BrokerConfig.from_props({k.replace("_", "."): v for k, v in props.items()})


def make(props):
    return BrokerConfig.from_props(props)


# ---------------------------------------------------------------- server.properties


def _commented_settings(text):
    """``#key=value`` lines (a commented-out setting, not prose)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"#([a-z][A-Za-z0-9._-]*)=(.*)$", line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def test_server_properties_keys_are_in_table_and_parse():
    props = load_properties(str(SERVER_PROPERTIES))
    assert props, "config/server.properties sets nothing"
    for key, value in props.items():
        assert key in BROKER_CONFIGS, f"{key} is not in BROKER_CONFIGS"
        BROKER_CONFIGS[key].parse(value)
    BrokerConfig.from_props(props)  # and the whole file validates


def test_server_properties_commented_settings_are_in_table_and_parse():
    commented = _commented_settings(SERVER_PROPERTIES.read_text())
    assert {"log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes"} <= set(commented)
    for key, value in commented.items():
        assert key in BROKER_CONFIGS, f"commented {key} is not in BROKER_CONFIGS"
        BROKER_CONFIGS[key].parse(value)


def test_server_properties_values_equal_kafka_defaults():
    props = load_properties(str(SERVER_PROPERTIES))
    for key, value in props.items():
        if key in INTENTIONAL_DEVIATIONS:
            continue
        table = BROKER_CONFIGS[key]
        assert table.parse(value) == table.default, f"{key}={value} differs from the table default {table.default}"


def test_server_properties_has_required_settings():
    props = load_properties(str(SERVER_PROPERTIES))
    assert props["broker.id"] == "0"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert props["log.dirs"] == "/tmp/kafkapy-logs"
    for key in ("num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
                "socket.receive.buffer.bytes", "socket.request.max.bytes", "queued.max.requests",
                "num.partitions", "num.recovery.threads.per.data.dir", "message.max.bytes",
                "auto.create.topics.enable", "log.retention.hours", "log.segment.bytes", "log.roll.hours",
                "log.index.interval.bytes", "log.index.size.max.bytes", "log.retention.check.interval.ms"):
        assert key in props, key
    text = SERVER_PROPERTIES.read_text()
    for section in ("Server Basics", "Socket Server Settings", "Log Basics", "Log Flush Policy",
                    "Log Retention Policy"):
        assert f"# {section} #" in text


# ---------------------------------------------------------------- the table


@pytest.mark.parametrize("name,default", [
    ("broker.id", -1), ("log.dir", ["/tmp/kafka-logs"]), ("log.dirs", None),
    ("num.network.threads", 3), ("num.io.threads", 8), ("queued.max.requests", 500),
    ("socket.send.buffer.bytes", 102400), ("socket.receive.buffer.bytes", 102400),
    ("socket.request.max.bytes", 104857600), ("socket.listen.backlog.size", 50),
    ("connections.max.idle.ms", 600000), ("message.max.bytes", 1048588), ("num.partitions", 1),
    ("default.replication.factor", 1), ("auto.create.topics.enable", True), ("delete.topic.enable", True),
    ("log.segment.bytes", 1073741824), ("log.roll.hours", 168), ("log.roll.ms", None),
    ("log.roll.jitter.hours", 0), ("log.roll.jitter.ms", None), ("log.index.interval.bytes", 4096),
    ("log.index.size.max.bytes", 10485760), ("log.retention.hours", 168), ("log.retention.minutes", None),
    ("log.retention.ms", None), ("log.retention.bytes", -1), ("log.retention.check.interval.ms", 300000),
    ("log.cleanup.policy", ["delete"]), ("log.segment.delete.delay.ms", 60000),
    ("log.flush.interval.messages", 2**63 - 1), ("log.flush.interval.ms", None),
    ("log.flush.scheduler.interval.ms", 2**63 - 1), ("log.flush.offset.checkpoint.interval.ms", 60000),
    ("log.flush.start.offset.checkpoint.interval.ms", 60000), ("log.message.timestamp.type", "CreateTime"),
    ("log.preallocate", False), ("num.recovery.threads.per.data.dir", 1), ("compression.type", "producer"),
    ("min.insync.replicas", 1), ("zookeeper.connect", None), ("zookeeper.session.timeout.ms", 18000),
    ("zookeeper.connection.timeout.ms", None), ("offsets.topic.num.partitions", 50),
    ("offsets.topic.replication.factor", 3), ("group.initial.rebalance.delay.ms", 3000),
    ("group.min.session.timeout.ms", 6000), ("group.max.session.timeout.ms", 1800000),
    ("transactional.id.expiration.ms", 604800000), ("producer.id.expiration.ms", 86400000),
    ("max.connections", 2**31 - 1), ("max.connections.per.ip", 2**31 - 1), ("broker.rack", None),
    ("controlled.shutdown.enable", True), ("request.timeout.ms", 30000),
    ("prometheus.host", "127.0.0.1"), ("prometheus.port", 0), ("kafkapy.shutdown.timeout.ms", 30000),
])
def test_kafka_defaults(name, default):
    assert BROKER_CONFIGS[name].default == default


def test_every_key_is_documented_and_typed():
    for name, key in BROKER_CONFIGS.items():
        assert key.name == name
        assert key.type in (C.BOOLEAN, C.INT, C.SHORT, C.LONG, C.DOUBLE, C.STRING, C.LIST, C.PASSWORD, C.CLASS)
        assert key.importance in (C.HIGH, C.MEDIUM, C.LOW)
        assert key.doc and "\n" not in key.doc
        assert key.group in C.GROUP_ORDER


def test_every_topic_synonym_is_a_broker_key():
    for name, key in TOPIC_CONFIGS.items():
        assert key.synonym is None or key.synonym in BROKER_CONFIGS, name


# ---------------------------------------------------------------- type parsing


@pytest.mark.parametrize("raw,expected", [("true", True), (" TRUE ", True), ("False", False)])
def test_boolean_parse(raw, expected):
    assert make({"log.preallocate": raw})["log.preallocate"] is expected


@pytest.mark.parametrize("raw", ["yes", "1", "", "tru"])
def test_boolean_rejects(raw):
    with pytest.raises(ConfigException, match="Invalid value .* for configuration log.preallocate: "
                                              "Expected value to be either true or false"):
        make({"log.preallocate": raw})


def test_int_range_vs_long():
    assert make({"log.retention.bytes": "9223372036854775807"})["log.retention.bytes"] == 2**63 - 1
    with pytest.raises(ConfigException, match="configuration log.segment.bytes: Not a number of type INT"):
        make({"log.segment.bytes": "2147483648"})
    with pytest.raises(ConfigException, match="Not a number of type LONG"):
        make({"log.retention.bytes": "9223372036854775808"})
    with pytest.raises(ConfigException, match="Not a number of type SHORT"):
        make({"offsets.topic.replication.factor": "32768"})
    assert make({"num.partitions": " +7 "})["num.partitions"] == 7


@pytest.mark.parametrize("raw", ["1_000", "0x10", "1.0", "", "12abc", "\u0661"])
def test_int_rejects_non_java_integers(raw):
    with pytest.raises(ConfigException, match="num.partitions"):
        make({"num.partitions": raw})


def test_list_parse_trims_and_splits():
    c = make({"log.dirs": " /a , /b,/c "})
    assert c["log.dirs"] == ["/a", "/b", "/c"]
    assert c.log_dirs == ["/a", "/b", "/c"]


def test_double_parse():
    assert make({"log.cleaner.min.cleanable.ratio": "0.25"})["log.cleaner.min.cleanable.ratio"] == 0.25
    with pytest.raises(ConfigException, match="Value must be no more than 1.0"):
        make({"log.cleaner.min.cleanable.ratio": "1.5"})


def test_string_trimmed():
    assert make({"compression.type": " lz4 "})["compression.type"] == "lz4"


def test_password_repr_hides_value():
    p = C.parse_typed("x", C.PASSWORD, " s3cret ")
    assert p.value == "s3cret" and "s3cret" not in repr(p)


# ---------------------------------------------------------------- validation messages


def test_range_error_names_key_and_value():
    with pytest.raises(ConfigException) as exc:
        make({"log.segment.bytes": "13"})
    assert str(exc.value) == "Invalid value 13 for configuration log.segment.bytes: Value must be at least 14"
    assert exc.value.name == "log.segment.bytes"


def test_valid_string_error():
    with pytest.raises(ConfigException, match="Invalid value brotli for configuration compression.type: "
                                              "String must be one of: uncompressed, zstd"):
        make({"compression.type": "brotli"})


def test_valid_list_error():
    with pytest.raises(ConfigException, match="Invalid value compcat for configuration log.cleanup.policy"):
        make({"log.cleanup.policy": "delete,compcat"})
    assert make({"log.cleanup.policy": "compact, delete"})["log.cleanup.policy"] == ["compact", "delete"]


def test_missing_required(monkeypatch):
    required = C.ConfigKey("x.required", C.INT, C.NO_DEFAULT, None, C.HIGH, "doc")
    monkeypatch.setitem(BROKER_CONFIGS, "x.required", required)
    with pytest.raises(ConfigException, match='Missing required configuration "x.required" which has no default'):
        make({})
    assert make({"x.required": "5"})["x.required"] == 5


def test_unknown_keys_warn_and_are_kept(caplog):
    with caplog.at_level(logging.WARNING, logger="kafkapy.config"):
        c = make({"some.future.setting": "42", "num.partitions": "3"})
    assert c["some.future.setting"] == "42"
    assert c.unknown == {"some.future.setting": "42"}
    assert any("some.future.setting" in r.getMessage() for r in caplog.records)
    assert not any("num.partitions" in r.getMessage() for r in caplog.records)


def test_broker_id_range():
    with pytest.raises(ConfigException, match="broker.id"):
        make({"broker.id": "-2"})
    with pytest.raises(ConfigException, match="broker.id"):
        make({"broker.id": "1001"})
    assert make({"broker.id": "1001", "reserved.broker.max.id": "2000"}).broker_id == 1001


# ---------------------------------------------------------------- derivation rules


def test_retention_precedence():
    assert make({}).log_retention_ms == 168 * 3600 * 1000
    assert make({"log.retention.hours": "1"}).log_retention_ms == 3600 * 1000
    assert make({"log.retention.hours": "1", "log.retention.minutes": "2"}).log_retention_ms == 120000
    assert make({"log.retention.hours": "1", "log.retention.minutes": "2",
                 "log.retention.ms": "5"}).log_retention_ms == 5
    assert make({"log.retention.ms": "-1"}).log_retention_ms == -1
    assert make({"log.retention.hours": "-5"}).log_retention_ms == -1
    with pytest.raises(ConfigException, match="log.retention.ms must be unlimited"):
        make({"log.retention.ms": "0"})


def test_roll_and_jitter_precedence():
    c = make({})
    assert c.log_roll_ms == 168 * 3600 * 1000 and c.log_roll_jitter_ms == 0
    c = make({"log.roll.hours": "2", "log.roll.jitter.hours": "1"})
    assert c.log_roll_ms == 7200000 and c.log_roll_jitter_ms == 3600000
    c = make({"log.roll.hours": "2", "log.roll.ms": "1000", "log.roll.jitter.ms": "10"})
    assert c.log_roll_ms == 1000 and c.log_roll_jitter_ms == 10
    with pytest.raises(ConfigException, match="log.roll.ms"):
        make({"log.roll.ms": "0"})


def test_flush_interval_falls_back_to_scheduler_interval():
    assert make({}).log_flush_interval_ms == 2**63 - 1
    assert make({"log.flush.scheduler.interval.ms": "3000"}).log_flush_interval_ms == 3000
    assert make({"log.flush.scheduler.interval.ms": "3000",
                 "log.flush.interval.ms": "50"}).log_flush_interval_ms == 50


def test_log_dirs_precedence():
    assert make({}).log_dirs == ["/tmp/kafka-logs"]
    assert make({"log.dir": "/x"}).log_dirs == ["/x"]
    assert make({"log.dir": "/x", "log.dirs": "/y,/z"}).log_dirs == ["/y", "/z"]
    with pytest.raises(ConfigException, match="At least one log directory"):
        make({"log.dirs": " "})
    with pytest.raises(ConfigException, match="log.dirs"):
        make({"log.dirs": "/a,/a"})


def test_listeners():
    c = make({})
    assert c.listeners == [("PLAINTEXT", "", 9092, "PLAINTEXT")]
    assert c.advertised_listeners == c.listeners
    c = make({"listeners": "plaintext://127.0.0.1:9093, INTERNAL://[::1]:9094",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
              "advertised.listeners": "PLAINTEXT://broker1:19093"})
    assert c.listeners == [Endpoint("PLAINTEXT", "127.0.0.1", 9093), Endpoint("INTERNAL", "::1", 9094)]
    assert c.advertised_listeners == [("PLAINTEXT", "broker1", 19093, "PLAINTEXT")]
    c = make({"listeners": "PLAINTEXT://:9092,SSL://:9093,SASL_SSL://:9094,CLIENT://:9095",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,"
                                                "CLIENT:SASL_PLAINTEXT"})
    assert [ep.security_protocol for ep in c.listeners] == ["PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT"]


@pytest.mark.parametrize("value,pattern", [
    ("FOO://:9093", "No security protocol defined for listener FOO"),
    ("PLAINTEXT://:9093,PLAINTEXT://:9094", "different name"),
    ("PLAINTEXT://:9093,OTHER://:9093", ""),
    ("PLAINTEXT:/host:9093", "Unable to parse"),
    ("PLAINTEXT://:70000", "out of range"),
    ("", "At least one listener"),
])
def test_bad_listeners(value, pattern):
    props = {"listeners": value,
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT,SSL:SSL,"
                                               "SASL_PLAINTEXT:SASL_PLAINTEXT"}
    with pytest.raises(ConfigException, match="configuration listeners") as exc:
        make(props)
    assert re.search(pattern, str(exc.value))


def test_advertised_rejects_meta_address():
    with pytest.raises(ConfigException, match="advertised.listeners.*0.0.0.0"):
        make({"listeners": "PLAINTEXT://0.0.0.0:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"})


def test_with_overrides():
    c = make({"num.partitions": "3", "broker.id": "4"})
    d = c.with_overrides({"num.partitions": "6"})
    assert (d["num.partitions"], d.broker_id, c["num.partitions"]) == (6, 4, 3)
    assert d.is_set("broker.id") and not d.is_set("num.io.threads")


# ---------------------------------------------------------------- properties parser


def test_properties_syntax():
    text = (
        "# comment\n"
        "! also a comment\n"
        "   \n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "d = spaced value  \n"
        "  e\t=\tx\n"
        "f=long \\\n"
        "    continued \\\n"
        "   end\n"
        "g=with\\:colon\\=eq\\\\back\n"
        "h\\ key=v\n"
        "i=\\u0041\\u00e9\\t\n"
        "j\n"
        "k=\n"
        "a=override\n"
        "l=x\\\n"
        "#not a comment here\n"
    )
    props = parse_properties(text)
    assert props == {
        "a": "override", "b": "2", "c": "3", "d": "spaced value  ", "e": "x",
        "f": "long continued end", "g": "with:colon=eq\\back", "h key": "v",
        "i": "A\u00e9\t", "j": "", "k": "", "l": "x#not a comment here",
    }


def test_properties_comment_not_continued():
    assert parse_properties("# comment \\\nkey=v\n") == {"key": "v"}


def test_properties_trailing_backslash_at_eof():
    assert parse_properties("a=b\\") == {"a": "b"}


def test_properties_crlf_and_cr():
    assert parse_properties("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_properties_bad_unicode_escape():
    with pytest.raises(ConfigException, match="Malformed"):
        parse_properties("a=\\u12G4\n")


def test_load_properties_latin1_fallback(tmp_path):
    p = tmp_path / "x.properties"
    p.write_bytes(b"name=caf\xe9\n")
    assert load_properties(str(p)) == {"name": "caf\u00e9"}


def test_parse_overrides():
    assert parse_overrides(["a=1", "b=x=y", "c=", "a=2"]) == {"a": "2", "b": "x=y", "c": ""}
    with pytest.raises(ConfigException, match="nokey"):
        parse_overrides(["nokey"])


def test_overrides_apply_over_file(tmp_path):
    p = tmp_path / "s.properties"
    p.write_text("num.partitions=2\nbroker.id=1\n")
    c = BrokerConfig.from_file(str(p), parse_overrides(["num.partitions=5"]))
    assert c["num.partitions"] == 5 and c.broker_id == 1


# ---------------------------------------------------------------- rendering


def test_render_round_trip():
    text = render_properties()
    assert parse_properties(text) == {}  # every default commented out
    assert _commented_settings(text).keys() == BROKER_CONFIGS.keys()
    for key, value in _commented_settings(text).items():
        if BROKER_CONFIGS[key].default is not None:
            assert BROKER_CONFIGS[key].parse(value) == BROKER_CONFIGS[key].default, key
    values = {"broker.id": "3", "log.dirs": "/a,/b", "listeners": "PLAINTEXT://:1234", "log.preallocate": True}
    parsed = parse_properties(render_properties(values))
    assert parsed == {"broker.id": "3", "log.dirs": "/a,/b", "listeners": "PLAINTEXT://:1234",
                      "log.preallocate": "true"}
    for section in ("Server Basics", "Socket Server Settings", "Log Basics", "Log Flush Policy",
                    "Log Retention Policy"):
        assert f"# {section} #" in text


def test_render_rejects_unknown():
    with pytest.raises(ConfigException):
        render_properties({"no.such.key": "1"})


# ---------------------------------------------------------------- topic configs


def test_validate_topic_configs_ok():
    assert validate_topic_configs({"retention.ms": " 1000 ", "cleanup.policy": "compact,delete"}) == {
        "retention.ms": "1000", "cleanup.policy": "compact,delete"}


@pytest.mark.parametrize("configs,key,pattern", [
    ({"no.such": "1"}, "no.such", "Unknown topic config name: no.such"),
    ({"retention.ms": "abc"}, "retention.ms", "Invalid value abc for configuration retention.ms"),
    ({"segment.bytes": "10"}, "segment.bytes", "Value must be at least 14"),
    ({"cleanup.policy": "sometimes"}, "cleanup.policy", "String must be one of"),
    ({"message.timestamp.type": "Now"}, "message.timestamp.type", "String must be one of"),
    ({"retention.ms": None}, "retention.ms", "Null value not supported for topic configs: retention.ms"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms", "conflict"),
])
def test_validate_topic_configs_errors(configs, key, pattern):
    with pytest.raises(InvalidConfigError) as exc:
        validate_topic_configs(configs)
    assert exc.value.key == key
    assert exc.value.error_code == 40
    assert re.search(pattern, exc.value.message)


def test_topic_defaults_follow_broker_synonyms():
    broker = make({"log.retention.minutes": "5", "log.roll.hours": "2", "log.segment.bytes": "1000",
                   "log.flush.interval.messages": "1", "log.flush.scheduler.interval.ms": "100",
                   "log.cleanup.policy": "compact", "message.max.bytes": "500",
                   "log.message.timestamp.type": "LogAppendTime", "log.roll.jitter.ms": "7"})
    values = topic_config_values(broker, {})
    assert values["retention.ms"] == 300000
    assert values["segment.ms"] == 7200000
    assert values["segment.jitter.ms"] == 7
    assert values["segment.bytes"] == 1000
    assert values["flush.messages"] == 1
    assert values["flush.ms"] == 100
    assert values["cleanup.policy"] == ["compact"]
    assert values["max.message.bytes"] == 500
    assert values["message.timestamp.type"] == "LogAppendTime"
    assert values["segment.index.bytes"] == 10485760
    assert values["file.delete.delay.ms"] == 60000


def test_topic_overrides_win():
    values = topic_config_values(make({}), {"retention.ms": "-1", "segment.bytes": "4096", "preallocate": "true"})
    assert values["retention.ms"] == -1 and values["segment.bytes"] == 4096 and values["preallocate"] is True


def test_log_config_for(monkeypatch):
    storage_config = pytest.importorskip("kafkapy.storage.config")
    lc = C.log_config_for(make({"log.segment.bytes": "2048"}), {"retention.ms": "1234"})
    assert isinstance(lc, storage_config.LogConfig)
    assert lc.segment_bytes == 2048 and lc.retention_ms == 1234


def test_log_config_for_with_stub(monkeypatch):
    import sys
    import types

    @dataclasses.dataclass
    class LogConfig:
        segment_bytes: int = 0
        retention_ms: int = 0
        cleanup_policy: str = "delete"
        flush_messages: int = 0

    module = types.ModuleType("kafkapy.storage.config")
    module.LogConfig = LogConfig
    monkeypatch.setitem(sys.modules, "kafkapy.storage.config", module)
    lc = C.log_config_for(make({"log.flush.interval.messages": "1"}), {"cleanup.policy": "compact,delete"})
    assert lc == LogConfig(segment_bytes=1073741824, retention_ms=604800000,
                           cleanup_policy="compact,delete", flush_messages=1)


def test_keys_not_in_effect_are_known_and_documented():
    """Every accepted-but-ignored key is a real key of the table and is listed,
    with its reason, in the README."""
    from pathlib import Path

    from kafkapy.server.config import BROKER_CONFIGS, NOT_IN_EFFECT

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme[readme.index("### Accepted but not in effect"):]
    section = section[:section.index("\n### ", 5)]
    for key, reason in NOT_IN_EFFECT.items():
        assert key in BROKER_CONFIGS, key
        assert f"`{key}`" in section, f"{key} missing from the README"
        assert reason in section, f"reason for {key} missing from the README"


# ---------------------------------------------------------------- Kafka 3.9's later topic keys


@pytest.mark.parametrize("value", ["3.0-IV1", "3.0", "2.8", "0.10.0", "0.10.0.1", "0.8.2", "3.9", "3.9.1",
                                   "4.0-IV1", "3.7-IV4", "1.0-IV0"])
def test_message_format_version_accepts_kafkas_versions(value):
    assert validate_topic_configs({"message.format.version": value}) == {"message.format.version": value}


@pytest.mark.parametrize("value", ["4.0", "3.7-IV5", "0.10", "9.9", "x", ""])
def test_message_format_version_refuses_others(value):
    with pytest.raises(InvalidConfigError, match=f"Version {re.escape(value)} is not a valid version"):
        validate_topic_configs({"message.format.version": value})


@pytest.mark.parametrize("name,good,bad", [
    ("compression.gzip.level", ["-1", "1", "9"], ["0", "-2", "10"]),
    ("compression.lz4.level", ["1", "17"], ["0", "18"]),
    ("compression.zstd.level", ["-131072", "22"], ["-131073", "23"]),
    ("local.retention.ms", ["-2", "-1", "0"], ["-3"]),
    ("message.timestamp.after.max.ms", ["0"], ["-1"]),
])
def test_level_and_retention_validators(name, good, bad):
    for value in good:
        validate_topic_configs({name: value})
    for value in bad:
        with pytest.raises(InvalidConfigError, match=f"Invalid value {value} for configuration {name}"):
            validate_topic_configs({name: value})


def test_tiered_storage_is_off():
    validate_topic_configs({"remote.storage.enable": "false", "remote.log.copy.disable": "false"})
    with pytest.raises(InvalidConfigError, match="Tiered Storage functionality is disabled in the broker"):
        validate_topic_configs({"remote.storage.enable": "true"})
    with pytest.raises(InvalidConfigError, match="under Zookeeper's mode"):
        validate_topic_configs({"remote.log.delete.on.disable": "true"})


def test_timestamp_bounds_fall_back_to_difference_max_ms():
    broker = make({"log.message.timestamp.difference.max.ms": "5000",
                   "log.message.timestamp.after.max.ms": "100"})
    config = C.log_config_for(broker, {})
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (2**63 - 1, 100)
    from kafkapy.storage.log import _append_settings
    assert _append_settings(config)[2:4] == (5000, 100)
    assert _append_settings(config.replace(message_timestamp_type="LogAppendTime"))[2:4] == (-1, -1)


def test_log_cleaner_threads_reconfiguration_bounds():
    current = make({"log.cleaner.threads": "4"})
    for ok in ("2", "8", "4"):
        C.check_reconfiguration(current, current.with_overrides({"log.cleaner.threads": ok}))
    for bad, reason in (("1", "less than half the current value 4"), ("9", "more than double"),
                        ("0", "at least 1")):
        with pytest.raises(InvalidConfigError, match=reason):
            C.check_reconfiguration(current, current.with_overrides({"log.cleaner.threads": bad}))
    no_cleaner = make({"log.cleaner.threads": "4", "log.cleaner.enable": "false"})
    C.check_reconfiguration(no_cleaner, no_cleaner.with_overrides({"log.cleaner.threads": "0"}))
    assert "log.cleaner.threads" in C.DYNAMIC_BROKER_CONFIGS
    assert "log.message.format.version" not in C.DYNAMIC_BROKER_CONFIGS


@pytest.mark.parametrize("value,text", [
    (1.7976931348623157e308, "1.7976931348623157E308"), (0.9, "0.9"), (0.5, "0.5"), (100.0, "100.0"),
    (1e7, "1.0E7"), (12345678.5, "1.23456785E7"), (1e-4, "1.0E-4"), (0.001, "0.001"), (0.0, "0.0"),
    (-2.5e-5, "-2.5E-5"), (float("inf"), "Infinity")])
def test_doubles_are_shown_as_java_does(value, text):
    assert C.format_value(C.DOUBLE, value) == text
    assert C.parse_typed("x", C.DOUBLE, text) == value
