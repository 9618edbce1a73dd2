"""Kafka's record formats in ``__consumer_offsets``, and which partition a group uses.

Sans-IO codecs (over ``kafkapy.protocol.coordinator_records``, the codec
``__transaction_state`` shares, with ``partition_for``); everything big-endian, strings int16-length-prefixed (non
flexible versions) or unsigned-varint length+1 (flexible versions), exactly as
Kafka's generated ``OffsetCommitKey/Value`` and ``GroupMetadataKey/Value``
classes write them, so Kafka's own tools (kafka-console-consumer with the
offsets formatter, kafka-dump-log --offsets-decoder) read this topic.

Keys start with an int16 version that says which record it is:

* 0, 1 — offset commit: ``group string, topic string, partition int32``
  (same layout in both; Kafka writes 1).
* 2 — group metadata: ``group string``.
* 3-8 — a KIP-848 consumer group (Kafka 3.9's group-coordinator records;
  keys not flexible, values flexible version 0, every value ends in tagged
  fields; uuids are 16 raw bytes):

  - 3 ConsumerGroupMetadata ``group`` -> ``epoch i32`` (the group epoch);
  - 4 ConsumerGroupPartitionMetadata ``group`` -> ``topics[topic_id uuid,
    topic_name, num_partitions i32, partition_metadata[partition i32,
    racks[string]]]`` (what the subscriptions resolved to);
  - 5 ConsumerGroupMemberMetadata ``group, member`` -> ``instance_id?,
    rack_id?, client_id, client_host, subscribed_topic_names[string],
    subscribed_topic_regex?, rebalance_timeout_ms i32, server_assignor?``
    (tag 0: classic member metadata, never written here);
  - 6 ConsumerGroupTargetAssignmentMetadata ``group`` -> ``assignment_epoch i32``;
  - 7 ConsumerGroupTargetAssignmentMember ``group, member`` ->
    ``topic_partitions[topic_id uuid, partitions[i32]]``;
  - 8 ConsumerGroupCurrentMemberAssignment ``group, member`` ->
    ``member_epoch i32, previous_member_epoch i32, state i8,
    assigned_partitions[..], partitions_pending_revocation[..]`` (the same
    topic/partitions shape as 7; state: Kafka's MemberState 0 stable,
    1 unrevoked, 2 unreleased).

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

from dataclasses import dataclass, field

from kafkapy.protocol.coordinator_records import (  # noqa: F401  (partition_for: which partition a group uses)
    _I16,
    _I32,
    RecordFormatError,
    _Reader,
    _Writer,
    partition_for,
)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2

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


# Keys 4-8 of a KIP-848 group (Kafka's CoordinatorRecordHelpers versions).
PARTITION_METADATA_KEY_VERSION = 4
MEMBER_METADATA_KEY_VERSION = 5
TARGET_ASSIGNMENT_METADATA_KEY_VERSION = 6
TARGET_ASSIGNMENT_MEMBER_KEY_VERSION = 7
CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION = 8


@dataclass(frozen=True)
class ConsumerRecordKey:
    """Keys 4-8: ``version`` says which record; ``member_id`` only for 5, 7, 8."""
    version: int
    group: str
    member_id: str | None = None


def encode_consumer_record_key(version: int, group: str, member_id: str | None = None) -> bytes:
    w = _Writer()
    w.i16(version)
    w.string(group)
    if version in (MEMBER_METADATA_KEY_VERSION, TARGET_ASSIGNMENT_MEMBER_KEY_VERSION,
                   CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION):
        w.string(member_id)
    return bytes(w.out)


def _value_reader(buf, name: str) -> _Reader:
    """A reader past a version-0 flexible value's version (later versions
    only add tagged fields, which ``skip_tags`` passes)."""
    version = _Reader(buf).i16()
    if version < 0:
        raise RecordFormatError(f"unknown {name} version {version}")
    return _Reader(buf, 2, flexible=True)


def _flexible_value() -> _Writer:
    w = _Writer(flexible=True)
    w.i16(0)
    return w


def encode_epoch_value(epoch: int) -> bytes:
    """ConsumerGroupTargetAssignmentMetadataValue (and ...MetadataValue: the
    same layout, one int32 and tagged fields)."""
    w = _flexible_value()
    w.i32(epoch)
    w.tags()
    return bytes(w.out)


def decode_epoch_value(buf) -> int:
    r = _value_reader(buf, "epoch value")
    epoch = r.i32()
    r.skip_tags()
    return epoch


@dataclass
class ConsumerMemberRecord:
    """ConsumerGroupMemberMetadataValue v0."""
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


def encode_member_metadata_value(m: ConsumerMemberRecord) -> bytes:
    w = _flexible_value()
    w.string(m.instance_id)
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    w.array_len(len(m.subscribed_topic_names))
    for name in m.subscribed_topic_names:  # Kafka writes them sorted
        w.string(name)
    w.string(m.subscribed_topic_regex)
    w.i32(m.rebalance_timeout_ms)
    w.string(m.server_assignor)
    w.tags()
    return bytes(w.out)


def decode_member_metadata_value(buf) -> ConsumerMemberRecord:
    r = _value_reader(buf, "ConsumerGroupMemberMetadataValue")
    m = ConsumerMemberRecord(r.string(nullable=True), r.string(nullable=True), r.string(), r.string(),
                             [r.string() for _ in range(r.array_len())], r.string(nullable=True),
                             r.i32(), r.string(nullable=True))
    r.skip_tags()  # tag 0: ClassicMemberMetadata (members of the classic protocol)
    return m


def encode_partition_metadata_value(topics: dict) -> bytes:
    """ConsumerGroupPartitionMetadataValue v0 of ``{name: (topic_id, num_partitions)}``
    (no rack information: each topic's partition_metadata is empty, as Kafka
    stores it when no partition has racks). Topics in name order."""
    w = _flexible_value()
    w.array_len(len(topics))
    for name in sorted(topics):
        topic_id, num_partitions = topics[name]
        w.uuid(topic_id)
        w.string(name)
        w.i32(num_partitions)
        w.array_len(0)
        w.tags()
    w.tags()
    return bytes(w.out)


def decode_partition_metadata_value(buf) -> dict:
    r = _value_reader(buf, "ConsumerGroupPartitionMetadataValue")
    topics = {}
    for _ in range(r.array_len()):
        topic_id, name, num_partitions = r.uuid(), r.string(), r.i32()
        for _ in range(r.array_len()):
            r.i32()
            for _ in range(r.array_len()):
                r.string()
            r.skip_tags()
        r.skip_tags()
        topics[name] = (topic_id, num_partitions)
    r.skip_tags()
    return topics


def _write_topic_partitions(w: _Writer, assignment: dict) -> None:
    """``{topic_id: set(partition)}`` as ``[topic_id uuid, partitions[i32]]``,
    topics by id, partitions ascending, empty topics left out."""
    items = sorted(((tid, ps) for tid, ps in assignment.items() if ps), key=lambda kv: str(kv[0]))
    w.array_len(len(items))
    for tid, ps in items:
        w.uuid(tid)
        w.array_len(len(ps))
        for p in sorted(ps):
            w.i32(p)
        w.tags()


def _read_topic_partitions(r: _Reader) -> dict:
    out: dict = {}
    for _ in range(r.array_len()):
        tid = r.uuid()
        out.setdefault(tid, set()).update(r.i32() for _ in range(r.array_len()))
        r.skip_tags()
    return out


def encode_target_assignment_member_value(assignment: dict) -> bytes:
    w = _flexible_value()
    _write_topic_partitions(w, assignment)
    w.tags()
    return bytes(w.out)


def decode_target_assignment_member_value(buf) -> dict:
    r = _value_reader(buf, "ConsumerGroupTargetAssignmentMemberValue")
    out = _read_topic_partitions(r)
    r.skip_tags()
    return out


# Kafka's MemberState values (ConsumerGroupCurrentMemberAssignmentValue.State).
MEMBER_STATE_STABLE = 0
MEMBER_STATE_UNREVOKED_PARTITIONS = 1
MEMBER_STATE_UNRELEASED_PARTITIONS = 2


@dataclass
class CurrentAssignmentRecord:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: dict
    pending_revocation: dict


def encode_current_assignment_value(c: CurrentAssignmentRecord) -> bytes:
    w = _flexible_value()
    w.i32(c.member_epoch)
    w.i32(c.previous_member_epoch)
    w.i8(c.state)
    _write_topic_partitions(w, c.assigned)
    _write_topic_partitions(w, c.pending_revocation)
    w.tags()
    return bytes(w.out)


def decode_current_assignment_value(buf) -> CurrentAssignmentRecord:
    r = _value_reader(buf, "ConsumerGroupCurrentMemberAssignmentValue")
    c = CurrentAssignmentRecord(r.i32(), r.i32(), r.i8(), _read_topic_partitions(r), _read_topic_partitions(r))
    r.skip_tags()
    return c


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
    """``OffsetKey``, ``GroupKey``, ``ConsumerGroupKey`` (3),
    ``ConsumerRecordKey`` (4-8), or None for record types we do not use
    (share groups and later)."""
    r = _Reader(buf)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    if version == CONSUMER_GROUP_METADATA_KEY_VERSION:
        return ConsumerGroupKey(r.string())
    if version in (PARTITION_METADATA_KEY_VERSION, TARGET_ASSIGNMENT_METADATA_KEY_VERSION):
        return ConsumerRecordKey(version, r.string())
    if version in (MEMBER_METADATA_KEY_VERSION, TARGET_ASSIGNMENT_MEMBER_KEY_VERSION,
                   CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION):
        return ConsumerRecordKey(version, r.string(), r.string())
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
