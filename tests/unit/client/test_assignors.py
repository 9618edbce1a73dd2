"""Range and round-robin assignors and the consumer protocol byte formats."""

from kafkapy.client.assignors import (
    RangeAssignor,
    RoundRobinAssignor,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    lookup,
)
from kafkapy.client.structs import TopicPartition as TP


def test_range_gives_extra_partitions_to_first_members():
    result = RangeAssignor().assign({"t0": 3, "t1": 3}, {"c0": {"t0", "t1"}, "c1": {"t0", "t1"}})
    # Java's RangeAssignorTest: 3 partitions over 2 consumers -> [0,1] and [2] per topic.
    assert result == {"c0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)],
                      "c1": [TP("t0", 2), TP("t1", 2)]}


def test_range_only_subscribed_members():
    result = RangeAssignor().assign({"a": 2, "b": 1}, {"c0": {"a"}, "c1": {"a", "b"}})
    assert result == {"c0": [TP("a", 0)], "c1": [TP("a", 1), TP("b", 0)]}


def test_roundrobin_deals_in_turn():
    result = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, {"c0": {"t0", "t1"}, "c1": {"t0", "t1"}})
    # Java's RoundRobinAssignorTest: t0p0 c0, t0p1 c1, t0p2 c0, t1p0 c1, t1p1 c0, t1p2 c1.
    assert result == {"c0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)],
                      "c1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)]}


def test_roundrobin_skips_unsubscribed():
    result = RoundRobinAssignor().assign({"a": 2, "b": 2}, {"c0": {"a"}, "c1": {"a", "b"}})
    assigned = sorted(tp for parts in result.values() for tp in parts)
    assert assigned == [TP("a", 0), TP("a", 1), TP("b", 0), TP("b", 1)]
    assert all(tp.topic == "a" for tp in result["c0"])


def test_protocol_round_trips():
    assert decode_subscription(encode_subscription(["b", "a"])) == ["a", "b"]
    parts = [TP("x", 2), TP("x", 0), TP("y", 1)]
    assert sorted(decode_assignment(encode_assignment(parts))) == sorted(parts)
    assert decode_assignment(b"") == []  # an empty assignment may arrive as zero bytes
    # Subscription v0 bytes exactly as Java's ConsumerProtocol writes them.
    assert encode_subscription(["t"]) == b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"


def test_lookup_by_kafka_class_name():
    assert lookup("org.apache.kafka.clients.consumer.RangeAssignor").name == "range"
    assert lookup("roundrobin").name == "roundrobin"
