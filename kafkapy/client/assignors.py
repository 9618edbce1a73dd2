"""Classic consumer-group assignors and the consumer protocol's byte formats.

The group leader runs the assignor chosen by the coordinator over every
member's subscription and sends the result in SyncGroup.  Byte formats are
Kafka's ConsumerProtocol (big-endian, legacy strings):

    Subscription v0: version i16, topics [i32 count, i16-length strings], user_data bytes (i32 length, -1 null)
    Assignment v0:   version i16, [i32 count of (topic string, [i32 count, i32 partition])], user_data bytes

Both assignors are deterministic given the same inputs, as Java's are:
members and topics are sorted, so every leader computes the same answer.
"""

from __future__ import annotations

import struct

from .structs import TopicPartition

_H = struct.Struct(">h")
_I = struct.Struct(">i")


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _H.pack(len(raw)) + raw


def encode_subscription(topics, user_data: bytes | None = None) -> bytes:
    out = bytearray(_H.pack(0))
    topics = sorted(topics)
    out += _I.pack(len(topics))
    for topic in topics:
        out += _string(topic)
    out += _I.pack(-1) if user_data is None else _I.pack(len(user_data)) + user_data
    return bytes(out)


class _Reader:
    def __init__(self, data):
        self.data = bytes(data or b"")
        self.pos = 0

    def i16(self):
        (v,) = _H.unpack_from(self.data, self.pos)
        self.pos += 2
        return v

    def i32(self):
        (v,) = _I.unpack_from(self.data, self.pos)
        self.pos += 4
        return v

    def string(self):
        n = self.i16()
        v = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return v

    def remaining(self):
        return len(self.data) - self.pos


def decode_subscription(data) -> list[str]:
    reader = _Reader(data)
    if reader.remaining() < 6:
        return []
    reader.i16()  # version: v1+ append owned partitions etc., which we ignore
    return [reader.string() for _ in range(reader.i32())]


def encode_assignment(partitions) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_H.pack(0))
    out += _I.pack(len(by_topic))
    for topic in sorted(by_topic):
        out += _string(topic)
        parts = sorted(by_topic[topic])
        out += _I.pack(len(parts))
        for p in parts:
            out += _I.pack(p)
    out += _I.pack(-1)
    return bytes(out)


def decode_assignment(data) -> list[TopicPartition]:
    """An empty or absent assignment (some brokers send zero bytes) is no partitions."""
    reader = _Reader(data)
    if reader.remaining() < 6:
        return []
    reader.i16()
    out = []
    for _ in range(reader.i32()):
        topic = reader.string()
        for _ in range(reader.i32()):
            out.append(TopicPartition(topic, reader.i32()))
    return out


class RangeAssignor:
    """Per topic: consecutive ranges of partitions to members in sorted order;
    the first ``partitions % members`` members get one extra (Java's RangeAssignor)."""

    name = "range"

    def assign(self, partitions_per_topic: dict, subscriptions: dict) -> dict:
        result = {member: [] for member in subscriptions}
        for topic in sorted(partitions_per_topic):
            members = sorted(m for m, topics in subscriptions.items() if topic in topics)
            if not members:
                continue
            count = partitions_per_topic[topic]
            per_member, extra = divmod(count, len(members))
            start = 0
            for i, member in enumerate(members):
                n = per_member + (1 if i < extra else 0)
                result[member].extend(TopicPartition(topic, p) for p in range(start, start + n))
                start += n
        return result


class RoundRobinAssignor:
    """All partitions of all topics, sorted, dealt in turn to the sorted members
    subscribed to each partition's topic (Java's RoundRobinAssignor)."""

    name = "roundrobin"

    def assign(self, partitions_per_topic: dict, subscriptions: dict) -> dict:
        result = {member: [] for member in subscriptions}
        members = sorted(subscriptions)
        if not members:
            return result
        index = 0
        for topic in sorted(partitions_per_topic):
            for partition in range(partitions_per_topic[topic]):
                # Advance to the next member subscribed to this topic.
                for _ in range(len(members)):
                    member = members[index % len(members)]
                    index += 1
                    if topic in subscriptions[member]:
                        result[member].append(TopicPartition(topic, partition))
                        break
        return result


ASSIGNORS = {"range": RangeAssignor, "roundrobin": RoundRobinAssignor}


def lookup(name):
    if not isinstance(name, str):
        return name  # an assignor object
    key = name.rsplit(".", 1)[-1].lower().replace("assignor", "")
    return ASSIGNORS[key]()
