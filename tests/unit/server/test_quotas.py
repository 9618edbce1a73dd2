"""Client quota rules without a broker: Kafka's AlterClientQuotas / DescribeClientQuotas
checks and matching, value formats, the resolution order of quota entities, the
shared sensors (token bucket throttle, Kafka's Rate) and the connection counts."""

import pytest

from kafkapy.metadata.model import client_entity, user_client_entity, user_entity
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError
from kafkapy.server.quotas import entities
from kafkapy.server.quotas.connections import ConnectionQuotas, parse_overrides
from kafkapy.server.quotas.manager import PRODUCE, REQUEST, Quotas
from kafkapy.server.quotas.table import QuotaTable, sensor_key
from kafkapy.server.quotas.throttle import client_throttles


def test_alteration_entities_and_ops_as_kafka():
    assert entities.alteration_entity([("user", "a b"), ("client-id", None)]) == ("users", "a%20b/clients/<default>")
    assert entities.alteration_entity([("client-id", "c")]) == client_entity("c")
    assert entities.alteration_entity([("ip", "::1")]) == ("ips", "%3A%3A1")
    assert entities.alteration_ops([("connection_creation_rate", 3.0, False)], ("ips", "1.2.3.4")) == (
        {"connection_creation_rate": "3"}, [])
    for entity, message in (([], "Invalid empty client quota entity"),
                            ([("user", "")], "Empty user not supported"),
                            ([("group", "g")], "Unhandled client quota entity type: group"),
                            ([("ip", "1.2.3.4"), ("user", "u")], "Invalid quota entity combination, IP entity "
                                                                 "should not be used with user/client ID entity.")):
        with pytest.raises(TopicError) as exc:
            entities.alteration_entity(entity)
        assert (exc.value.error_code, exc.value.message) == (ErrorCode.INVALID_REQUEST, message)
    assert entities.alteration_ops([("producer_byte_rate", 1024.0000001, False), ("request_percentage", 1e7, False),
                                    ("consumer_byte_rate", 0, True)]) == (
        {"producer_byte_rate": "1024", "request_percentage": "1.0E7"}, ["consumer_byte_rate"])
    with pytest.raises(TopicError, match="must be a LONG value"):
        entities.alteration_ops([("consumer_byte_rate", 1.5, False)])
    with pytest.raises(TopicError) as exc:
        entities.alteration_ops([("SCRAM-SHA-256", 1.0, False)])
    assert exc.value.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert [entities.java_double(v) for v in (50.0, 0.5, 1e-4, 123456.25, 1e7, 2.5e10)] == [
        "50.0", "0.5", "1.0E-4", "123456.25", "1.0E7", "2.5E10"]


def test_describe_matching():
    configs = {user_entity("u"): {"producer_byte_rate": "1", "SCRAM-SHA-256": "salt=..."},
               user_client_entity("u", "c"): {"consumer_byte_rate": "2"},
               user_client_entity(None, None): {"request_percentage": "3.0"},
               client_entity(None): {"producer_byte_rate": "4"},
               user_entity("only-scram"): {"SCRAM-SHA-512": "x"}}

    def run(components, strict):
        found = entities.describe(configs, entities.describe_filter(components), strict)
        return {tuple(e): v for e, v in found}
    assert run([("user", 0, "u")], True) == {(("user", "u"),): {"producer_byte_rate": 1.0}}  # no SCRAM key
    assert set(run([("user", 0, "u")], False)) == {(("user", "u"),), (("user", "u"), ("client-id", "c"))}
    assert set(run([("client-id", 1, None)], False)) == {(("client-id", None),), (("user", None), ("client-id", None))}
    assert set(run([("client-id", 2, None)], True)) == {(("client-id", None),)}
    assert len(run([], False)) == 4 and run([], True) == {}
    with pytest.raises(TopicError) as exc:
        entities.describe_filter([("other", 2, None)])
    assert exc.value.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_resolution_order_of_kafka():
    def resolve(*entries):
        q = Quotas({k: {"producer_byte_rate": str(i + 1)} for i, k in enumerate(entries)})
        return q.resolve(PRODUCE, "alice", "c1")
    assert resolve(client_entity(None), client_entity("c1")) == ("", "c1", 2.0)
    assert resolve(client_entity("c1"), user_entity(None)) == ("alice", "", 2.0)  # any user quota first
    assert resolve(user_entity(None), user_client_entity(None, None)) == ("alice", "c1", 2.0)
    assert resolve(user_client_entity(None, "c1"), user_entity("alice")) == ("alice", "", 2.0)
    assert resolve(user_entity("alice"), user_client_entity("alice", None)) == ("alice", "c1", 2.0)
    assert resolve(user_client_entity("alice", None), user_client_entity("alice", "c1")) == ("alice", "c1", 2.0)
    assert resolve(user_entity("bob")) is None
    assert not Quotas({user_entity("x"): {"producer_byte_rate": "1"}}).enabled(REQUEST)
    assert not Quotas({user_entity("x"): {"request_percentage": "NaN"}}).enabled(REQUEST)  # bounds nothing


def test_sensor_bucket_and_rate():
    table = QuotaTable(11, capacity=8)
    key = sensor_key(PRODUCE, "", "c")
    # a new client may burst (samples - 1) windows of its quota, then is throttled
    assert table.record(key, 10_000, 1_000_000, 1000.0, 11, 1000)[1] == 0
    rate, throttle = table.record(key, 2_000, 1_000_000, 1000.0, 11, 1000)
    assert throttle == 2000 and rate == pytest.approx(1200.0)  # -tokens / quota; 12,000 over 10 s
    assert table.record(key, 0, 1_002_000, 1000.0, 11, 1000)[1] == 0  # refilled by then
    table.record(key, -500, 1_002_000, None, 11, 1000)  # unrecord: tokens back, no check
    assert table.rate(key, 1_002_000, 11, 1000) == pytest.approx(1150.0)
    # a sensor unused for samples x window is expired and its slot reused
    assert table.rate(key, 1_020_000, 11, 1000) == 0.0
    assert table.record(sensor_key(PRODUCE, "", "other"), 1, 1_020_000, 1000.0, 11, 1000)[1] == 0


def test_connection_counts_and_overrides():
    quotas = ConnectionQuotas()
    assert quotas.inc(0, "127.0.0.1", 2) and quotas.inc(0, "127.0.0.1", 2)
    assert not quotas.inc(0, "127.0.0.1", 2)  # over its IP's limit: not counted
    assert quotas.inc(1, "::1", 2)
    assert (quotas.total(), quotas.listener_count(0), quotas.ip_count("127.0.0.1")) == (3, 2, 2)
    assert quotas.slot_available(0, 3, 4, False) and not quotas.slot_available(0, 2, 4, False)
    assert not quotas.slot_available(1, 10, 3, False) and quotas.slot_available(1, 10, 3, True)
    quotas.dec(0, "127.0.0.1")
    assert (quotas.total(), quotas.ip_count("127.0.0.1")) == (2, 1)
    assert parse_overrides(" 127.0.0.3:8, [::1]:2 ") == {"127.0.0.3": 8, "::1": 2}
    with pytest.raises(ValueError):
        parse_overrides("nocount")
    assert client_throttles(0, 6) and not client_throttles(0, 5) and not client_throttles(48, 1)
