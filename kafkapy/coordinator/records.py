"""Kafka's record formats in ``__consumer_offsets``, and which partition a group uses.

Sans-IO codecs; everything big-endian, strings int16-length-prefixed (non
flexible versions) or unsigned-varint length+1 (flexible versions), exactly as
Kafka's generated ``OffsetCommitKey/Value`` and ``GroupMetadataKey/Value``
classes write them, so Kafka's own tools (kafka-console-consumer with the
offsets formatter, kafka-dump-log --offsets-decoder) read this topic.

Keys start with an int16 version that says which record it is:

* 0, 1 — offset commit: ``group string, topic string, partition int32``
  (same layout in both; Kafka writes 1).
* 2 — group metadata: ``group string``.
* 3 — ConsumerGroupMetadataKey (KIP-848): ``group string``; its value
  (flexible, version 0) is ``epoch int32`` then tagged fields: the group
  epoch of a consumer group.
* 4-8 — the other KIP-848 records (partition metadata, member metadata,
  target assignment, current member assignment); we do not write them and
  skip them on load.

Values (a null value is a tombstone: the offset or the group was deleted):

* OffsetCommitValue v0 ``offset i64, metadata string, commit_ts i64``;
  v1 adds ``expire_ts i64`` (written only when a v2-v4 OffsetCommit gave a
  retention time); v2 drops it; v3 adds ``leader_epoch i32`` after the offset;
  v4 is v3 flexible. We write v3, or v1 when there is an expire timestamp
  (Kafka's choice).
* GroupMetadataValue v0 ``protocol_type string, generation i32, protocol
  nullable string, leader nullable string, members[member_id, client_id,
  client_host, session_timeout i32, subscription bytes, assignment bytes]``;
  v1 adds ``rebalance_timeout i32`` before the session timeout; v2 adds
  ``current_state_timestamp i64`` after the leader; v3 adds the member's
  ``group_instance_id nullable string`` after its id; v4 is v3 flexible. We
  write v3 (Kafka's choice since 2.3).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value in __consumer_offsets does not decode."""


# ---------------------------------------------------------------- partitioning


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``.

    ``Utils.abs`` maps Integer.MIN_VALUE to 0 (``n & 0x7fffffff``), unlike
    Math.abs which would leave it negative.
    """
    return (java_string_hashcode(group_id) & 0x7FFFFFFF) % num_partitions


# ---------------------------------------------------------------- primitives


class _Writer:
    __slots__ = ("out", "flexible")

    def __init__(self, flexible=False):
        self.out = bytearray()
        self.flexible = flexible

    def i16(self, v):
        self.out += _I16.pack(v)

    def i32(self, v):
        self.out += _I32.pack(v)

    def i64(self, v):
        self.out += _I64.pack(v)

    def _uvarint(self, v):
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def string(self, s):
        if s is None:
            if self.flexible:
                self._uvarint(0)
            else:
                self.i16(-1)
            return
        data = s.encode("utf-8")
        if self.flexible:
            self._uvarint(len(data) + 1)
        else:
            self.i16(len(data))
        self.out += data

    def bytes_(self, b):
        if self.flexible:
            self._uvarint(len(b) + 1)
        else:
            self.i32(len(b))
        self.out += b

    def array_len(self, n):
        if self.flexible:
            self._uvarint(n + 1)
        else:
            self.i32(n)

    def tags(self):
        if self.flexible:
            self._uvarint(0)


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf, pos=0, flexible=False):
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _need(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError(f"need {n} bytes at {self.pos} of {len(self.buf)}")

    def i16(self):
        self._need(2)
        v = _I16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def i32(self):
        self._need(4)
        v = _I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def i64(self):
        self._need(8)
        v = _I64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def _uvarint(self):
        result = shift = 0
        while True:
            self._need(1)
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def string(self, nullable=False):
        n = self._uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            if nullable:
                return None
            raise RecordFormatError("null string where one is required")
        self._need(n)
        try:
            s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(str(exc)) from None
        self.pos += n
        return s

    def bytes_(self):
        n = self._uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return b""
        self._need(n)
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def array_len(self):
        n = self._uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return 0
        # An entry takes at least one byte: a bogus count cannot allocate.
        self._need(n)
        return n

    def skip_tags(self):
        if not self.flexible:
            return
        for _ in range(self._uvarint()):
            self._uvarint()
            size = self._uvarint()
            self._need(size)
            self.pos += size


# ---------------------------------------------------------------- keys


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class ConsumerGroupKey:
    group: str


CONSUMER_GROUP_METADATA_KEY_VERSION = 3


def encode_consumer_group_metadata_key(group: str) -> bytes:
    w = _Writer()
    w.i16(CONSUMER_GROUP_METADATA_KEY_VERSION)
    w.string(group)
    return bytes(w.out)


def encode_consumer_group_metadata_value(epoch: int) -> bytes:
    w = _Writer(flexible=True)
    w.i16(0)
    w.i32(epoch)
    w.tags()
    return bytes(w.out)


def decode_consumer_group_metadata_value(buf) -> int:
    version = _Reader(buf).i16()
    if version < 0:
        raise RecordFormatError(f"unknown ConsumerGroupMetadataValue version {version}")
    # Later versions only add tagged fields (flexible from v0): the epoch is
    # always first.
    return _Reader(buf, 2, flexible=True).i32()


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer()
    w.i16(OFFSET_COMMIT_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.i32(partition)
    return bytes(w.out)


def encode_group_key(group: str) -> bytes:
    w = _Writer()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(group)
    return bytes(w.out)


def decode_key(buf):
    """``OffsetKey``, ``GroupKey``, ``ConsumerGroupKey``, or None for record
    types we do not use (KIP-848's member and assignment records)."""
    r = _Reader(buf)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    if version == CONSUMER_GROUP_METADATA_KEY_VERSION:
        return ConsumerGroupKey(r.string())
    if version < 0:
        raise RecordFormatError(f"negative key version {version}")
    return None


# ---------------------------------------------------------------- offset values


@dataclass
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int = -1  # only from OffsetCommit v2-v4 with a retention time


def encode_offset_value(om: OffsetAndMetadata) -> bytes:
    w = _Writer()
    if om.expire_timestamp_ms >= 0:
        w.i16(1)
        w.i64(om.offset)
        w.string(om.metadata or "")
        w.i64(om.commit_timestamp_ms)
        w.i64(om.expire_timestamp_ms)
    else:
        w.i16(3)
        w.i64(om.offset)
        w.i32(om.leader_epoch)
        w.string(om.metadata or "")
        w.i64(om.commit_timestamp_ms)
    return bytes(w.out)


def decode_offset_value(buf) -> OffsetAndMetadata:
    version = _Reader(buf).i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    r = _Reader(buf, 2, flexible=version >= 4)
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.skip_tags()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_ts, expire_ts)


# ---------------------------------------------------------------- group values


@dataclass
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1
    members: list = field(default_factory=list)


GROUP_VALUE_VERSION = 3


def encode_group_value(g: GroupRecord, version: int = GROUP_VALUE_VERSION) -> bytes:
    w = _Writer(flexible=version >= 4)
    w.out += _I16.pack(version)
    w.string(g.protocol_type)
    w.i32(g.generation)
    w.string(g.protocol)
    w.string(g.leader)
    if version >= 2:
        w.i64(g.current_state_timestamp_ms)
    w.array_len(len(g.members))
    for m in g.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout_ms)
        w.i32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return bytes(w.out)


def decode_group_value(buf) -> GroupRecord:
    version = _Reader(buf).i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    r = _Reader(buf, 2, flexible=version >= 4)
    g = GroupRecord(r.string(), r.i32(), r.string(nullable=True), r.string(nullable=True))
    if version >= 2:
        g.current_state_timestamp_ms = r.i64()
    for _ in range(r.array_len()):
        member_id = r.string()
        instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if version == 0:
            rebalance_timeout = session_timeout
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tags()
        g.members.append(MemberRecord(member_id, instance_id, client_id, client_host,
                                      rebalance_timeout, session_timeout, subscription, assignment))
    r.skip_tags()
    return g


# ---------------------------------------------------------------- consumer protocol


def consumer_subscription_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ``consumer`` protocol subscription (ConsumerProtocolSubscription
    v0-v3: int16 version, then an array of topic strings first), or None if
    it does not decode. Used by OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC)."""
    try:
        r = _Reader(metadata)
        version = r.i16()
        if version < 0:
            return None
        return {r.string() for _ in range(r.array_len())}
    except RecordFormatError:
        return None


# ConsumerProtocolAssignment v0 with no partitions: version 0, an empty
# topic array, null user data. Sent to members of a "consumer" group the
# leader assigned nothing (see GroupCoordinator.sync_group for why).
EMPTY_CONSUMER_ASSIGNMENT = _I16.pack(0) + _I32.pack(0) + _I32.pack(-1)
