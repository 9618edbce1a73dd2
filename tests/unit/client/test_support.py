"""Errors, settings and the request builder."""

import pytest

from kafkapy.client import config, errors
from kafkapy.client._schema import build
from kafkapy.client.conn import CLIENT_APIS, parse_bootstrap
from kafkapy.protocol.codec import decode, encode_to_bytes


def test_error_classes_carry_kafka_code_and_name():
    error = errors.for_code(6, "moved")
    assert isinstance(error, errors.NotLeaderOrFollowerError)  # noqa
    assert isinstance(error, errors.KafkaError)
    assert (error.errno, error.name, error.retriable) == (6, "NOT_LEADER_OR_FOLLOWER", True)
    assert not errors.for_code(87).retriable
    assert errors.KafkaTimeoutError("x").errno == 7
    assert errors.for_code(9999).errno == 9999
    with pytest.raises(errors.TopicAlreadyExistsError):  # noqa
        errors.raise_for_code(36)
    errors.raise_for_code(0)


def test_settings_accept_dotted_and_snake_case():
    cfg = config.resolve(config.PRODUCER, {"linger_ms": "7", "batch.size": 10, "enable_idempotence": "false",
                                           "no.such.setting": 1}, "test")
    assert (cfg["linger.ms"], cfg["batch.size"], cfg["enable.idempotence"]) == (7, 10, False)
    assert config.compression_code("zstd") == 4
    with pytest.raises(ValueError):
        config.compression_code("brotli")


def test_bootstrap_parsing():
    assert parse_bootstrap("a:1, b:2,PLAINTEXT://c:3") == [("a", 1), ("b", 2), ("c", 3)]
    assert parse_bootstrap(["h"]) == [("h", 9092)]


@pytest.mark.parametrize("version", range(1, 13))
def test_metadata_request_every_version(version):
    from kafkapy.client.conn import metadata_request

    spec = CLIENT_APIS[3]
    cls = spec.request_class(version)
    entity = build(cls, metadata_request(["a", "b"])(version))
    decoded, _ = decode(cls, encode_to_bytes(entity))
    assert [t.name for t in decoded.topics] == ["a", "b"]


def test_build_reports_missing_required_field():
    cls = CLIENT_APIS[22].request_class(4)
    with pytest.raises(KeyError, match="transaction_timeout"):
        build(cls, {"transactional_id": None})
