"""__consumer_offsets key/value formats and the group -> partition mapping."""

import struct

from hypothesis import given, strategies as st

from kafkapy.coordinator.records import (
    EMPTY_CONSUMER_ASSIGNMENT, GroupKey, GroupRecord, MemberRecord, OffsetAndMetadata, OffsetKey,
    consumer_subscription_topics, decode_group_value, decode_key, decode_offset_value, encode_group_key,
    encode_group_value, encode_offset_key, encode_offset_value, partition_for)
from kafkapy.protocol.coordinator_records import java_string_hashcode


def test_java_string_hashcode_matches_java():
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("hello") == 99162322
    # Java's famous string whose hashCode is Integer.MIN_VALUE: Utils.abs gives 0.
    assert java_string_hashcode("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    # Non-BMP characters count as two UTF-16 code units, as in Java.
    assert java_string_hashcode("\U0001F600") == 0xD83D * 31 + 0xDE00


def test_partition_for_is_cached_per_id_and_partition_count():
    # 99162322 is "hello".hashCode(): 99162322 % 50 == 22, % 13 == 12. The
    # cache must key on the partition count too, asked in both orders.
    assert partition_for("hello", 50) == 22
    assert partition_for("hello", 13) == 12
    assert partition_for("hello", 50) == 22
    hits = partition_for.cache_info().hits
    assert partition_for("hello", 13) == 12
    assert partition_for.cache_info().hits == hits + 1
    assert partition_for.cache_info().maxsize is not None  # bounded


def test_offset_key_layout_is_kafkas():
    key = encode_offset_key("g", "t", 3)
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 3)
    assert decode_key(key) == OffsetKey("g", "t", 3)
    assert decode_key(encode_group_key("grp")) == GroupKey("grp")
    assert encode_group_key("grp") == struct.pack(">hh3s", 2, 3, b"grp")
    # Key versions past KIP-848's 3-8 (share groups) are skipped.
    assert decode_key(struct.pack(">h", 9) + b"xx") is None


def test_offset_value_v3_and_v1():
    v3 = encode_offset_value(OffsetAndMetadata(42, 7, "meta", 1000))
    assert v3 == struct.pack(">hqih4sq", 3, 42, 7, 4, b"meta", 1000)
    assert decode_offset_value(v3) == OffsetAndMetadata(42, 7, "meta", 1000, -1)
    v1 = encode_offset_value(OffsetAndMetadata(5, -1, "", 10, 99))
    assert v1 == struct.pack(">hqhqq", 1, 5, 0, 10, 99)
    assert decode_offset_value(v1).expire_timestamp_ms == 99
    # v0: no leader epoch, no expire timestamp.
    v0 = struct.pack(">hqh1sq", 0, 8, 1, b"m", 3)
    assert decode_offset_value(v0) == OffsetAndMetadata(8, -1, "m", 3, -1)


def test_offset_value_v4_flexible():
    v4 = struct.pack(">hqi", 4, 11, 2) + bytes([3]) + b"ab" + struct.pack(">q", 77) + bytes([0])
    assert decode_offset_value(v4) == OffsetAndMetadata(11, 2, "ab", 77, -1)


def _group():
    return GroupRecord("consumer", 4, "range", "m1", 1234, [
        MemberRecord("m1", "inst-1", "client", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
        MemberRecord("m2", None, "client", "/127.0.0.1", 30000, 10000, b"", b"")])


def test_group_value_round_trips_in_every_version():
    for version in range(5):
        data = encode_group_value(_group(), version)
        back = decode_group_value(data)
        assert back.protocol_type == "consumer" and back.generation == 4 and back.leader == "m1"
        assert [m.member_id for m in back.members] == ["m1", "m2"]
        assert back.members[0].assignment == b"asg"
        assert back.members[0].group_instance_id == ("inst-1" if version >= 3 else None)
        assert back.current_state_timestamp_ms == (1234 if version >= 2 else -1)


def test_group_value_v3_layout():
    g = GroupRecord("consumer", 1, None, None, -1, [])
    assert encode_group_value(g) == struct.pack(">hh8sihhqi", 3, 8, b"consumer", 1, -1, -1, -1, 0)


@given(st.binary(max_size=64))
def test_garbage_never_crashes_decoders(data):
    for fn in (decode_key, decode_offset_value, decode_group_value):
        try:
            fn(data)
        except ValueError:
            pass


def test_consumer_protocol_helpers():
    sub = struct.pack(">hih1sh2s", 1, 2, 1, b"a", 2, b"bb") + struct.pack(">i", -1)
    assert consumer_subscription_topics(sub) == {"a", "bb"}
    assert consumer_subscription_topics(b"\x00") is None
    assert EMPTY_CONSUMER_ASSIGNMENT == struct.pack(">hii", 0, 0, -1)


# ---------------------------------------------------------------- KIP-848 records (key versions 3-8)

from uuid import UUID  # noqa: E402

from kafkapy.coordinator import records as rec  # noqa: E402

TID = UUID("00010203-0405-0607-0809-0a0b0c0d0e0f")


def test_consumer_group_keys_are_kafkas():
    # Non-flexible keys: int16 version, int16-length strings.
    assert rec.encode_consumer_group_metadata_key("g") == bytes.fromhex("0003 0001") + b"g"
    assert rec.encode_consumer_record_key(4, "g") == bytes.fromhex("0004 0001") + b"g"
    assert rec.encode_consumer_record_key(6, "g") == bytes.fromhex("0006 0001") + b"g"
    for version in (5, 7, 8):
        key = rec.encode_consumer_record_key(version, "g", "m1")
        assert key == struct.pack(">hh1sh2s", version, 1, b"g", 2, b"m1")
        assert decode_key(key) == rec.ConsumerRecordKey(version, "g", "m1")
    assert decode_key(rec.encode_consumer_record_key(4, "grp")) == rec.ConsumerRecordKey(4, "grp")


def test_epoch_values():
    # ConsumerGroupMetadataValue / TargetAssignmentMetadataValue v0: version,
    # int32, empty tagged fields.
    assert rec.encode_epoch_value(7) == bytes.fromhex("0000 00000007 00")
    assert rec.encode_consumer_group_metadata_value(7) == rec.encode_epoch_value(7)
    assert rec.decode_epoch_value(bytes.fromhex("0000 00000007 00")) == 7


def test_member_metadata_value_bytes():
    m = rec.ConsumerMemberRecord(None, "r1", "c", "/127.0.0.1", ["t", "u"], None, 5000, "uniform")
    value = rec.encode_member_metadata_value(m)
    assert value == (bytes.fromhex("0000")  # version 0
                     + b"\x00"  # instance id: null (compact, 0)
                     + b"\x03r1" + b"\x02c" + b"\x0b/127.0.0.1"
                     + b"\x03" + b"\x02t" + b"\x02u"  # 2 topic names (compact array, n+1)
                     + b"\x00"  # regex: null
                     + bytes.fromhex("00001388")  # rebalance timeout 5000
                     + b"\x08uniform" + b"\x00")  # server assignor, no tagged fields
    assert rec.decode_member_metadata_value(value) == m
    # Kafka's tag 0 (ClassicMemberMetadata) is skipped.
    tagged = value[:-1] + b"\x01" + b"\x00" + b"\x03" + b"abc"
    assert rec.decode_member_metadata_value(tagged) == m


def test_partition_metadata_value_bytes():
    value = rec.encode_partition_metadata_value({"t": (TID, 6)})
    assert value == (bytes.fromhex("0000") + b"\x02" + TID.bytes + b"\x02t" + bytes.fromhex("00000006")
                     + b"\x01" + b"\x00" + b"\x00")  # no partition racks, topic tags, value tags
    assert rec.decode_partition_metadata_value(value) == {"t": (TID, 6)}
    # Rack information (which Kafka writes when brokers have racks) is read past.
    racked = (bytes.fromhex("0000") + b"\x02" + TID.bytes + b"\x02t" + bytes.fromhex("00000001")
              + b"\x02" + bytes.fromhex("00000000") + b"\x02" + b"\x03r1" + b"\x00" + b"\x00" + b"\x00")
    assert rec.decode_partition_metadata_value(racked) == {"t": (TID, 1)}


def test_assignment_values_bytes():
    target = rec.encode_target_assignment_member_value({TID: {5, 1}, UUID(int=9): set()})
    assert target == (bytes.fromhex("0000") + b"\x02" + TID.bytes + b"\x03" + bytes.fromhex("00000001 00000005")
                      + b"\x00" + b"\x00")
    assert rec.decode_target_assignment_member_value(target) == {TID: {1, 5}}
    current = rec.CurrentAssignmentRecord(3, 2, rec.MEMBER_STATE_UNREVOKED_PARTITIONS, {TID: {0}}, {TID: {4}})
    value = rec.encode_current_assignment_value(current)
    assert value == (bytes.fromhex("0000 00000003 00000002 01")
                     + b"\x02" + TID.bytes + b"\x02" + bytes.fromhex("00000000") + b"\x00"
                     + b"\x02" + TID.bytes + b"\x02" + bytes.fromhex("00000004") + b"\x00" + b"\x00")
    assert rec.decode_current_assignment_value(value) == current
