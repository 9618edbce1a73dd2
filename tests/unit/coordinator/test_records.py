"""__consumer_offsets key/value formats and the group -> partition mapping."""

import struct

from hypothesis import given, strategies as st

from kafkapy.coordinator.records import (
    EMPTY_CONSUMER_ASSIGNMENT, GroupKey, GroupRecord, MemberRecord, OffsetAndMetadata, OffsetKey,
    consumer_subscription_topics, decode_group_value, decode_key, decode_offset_value, encode_group_key,
    encode_group_value, encode_offset_key, encode_offset_value, java_string_hashcode, partition_for)


def test_java_string_hashcode_matches_java():
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("hello") == 99162322
    # Java's famous string whose hashCode is Integer.MIN_VALUE: Utils.abs gives 0.
    assert java_string_hashcode("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    # Non-BMP characters count as two UTF-16 code units, as in Java.
    assert java_string_hashcode("\U0001F600") == 0xD83D * 31 + 0xDE00


def test_offset_key_layout_is_kafkas():
    key = encode_offset_key("g", "t", 3)
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 3)
    assert decode_key(key) == OffsetKey("g", "t", 3)
    assert decode_key(encode_group_key("grp")) == GroupKey("grp")
    assert encode_group_key("grp") == struct.pack(">hh3s", 2, 3, b"grp")
    # KIP-848: ConsumerGroupMetadataKey (3) is read; the member/assignment
    # record types (4-8) are skipped.
    assert decode_key(struct.pack(">h", 4) + b"xx") is None


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
