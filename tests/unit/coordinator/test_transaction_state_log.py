"""__transaction_state key/value formats (Kafka's TransactionLogKey v0 / TransactionLogValue v0, v1)."""

import pytest
from hypothesis import given, strategies as st

from kafkapy.protocol.transaction_log import (
    RecordFormatError, TxnLogValue, decode_key, decode_value, encode_key, encode_value, partition_for)


def test_key_bytes_are_kafkas():
    # version 0, int16 length 5, "txn-1"
    assert encode_key("txn-1") == bytes.fromhex("0000" "0005") + b"txn-1"
    assert decode_key(encode_key("txn-1")) == "txn-1"
    # A key version this code does not know is skipped (Kafka's UnknownKey), not an error.
    assert decode_key(bytes.fromhex("0001" "0001") + b"x") is None


def test_value_v0_ongoing_bytes_hand_checked():
    value = TxnLogValue(producer_id=1000, producer_epoch=3, transaction_timeout_ms=60000, status=1,
                        partitions=frozenset({("b", 2), ("a", 7), ("a", 1)}),
                        last_update_timestamp_ms=1700000000123, start_timestamp_ms=1700000000000)
    expected = bytes.fromhex(
        "0000"                 # version 0
        "00000000000003e8"     # producer id 1000
        "0003"                 # epoch 3
        "0000ea60"             # timeout 60000
        "01"                   # status Ongoing
        "00000002"             # 2 topics
        "0001" "61" "00000002" "00000001" "00000007"   # "a": [1, 7]
        "0001" "62" "00000001" "00000002"              # "b": [2]
        "0000018bcfe5687b"     # last update 1700000000123
        "0000018bcfe56800")    # start 1700000000000
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_value_v0_empty_has_null_partitions():
    value = TxnLogValue(5, 0, 100, 0, frozenset(), 10, -1)
    data = encode_value(value)
    assert data == bytes.fromhex("0000" "0000000000000005" "0000" "00000064" "00"
                                 "ffffffff" "000000000000000a" "ffffffffffffffff")
    assert decode_value(data) == value
    with pytest.raises(ValueError):
        encode_value(TxnLogValue(5, 0, 100, 0, frozenset({("t", 0)}), 10, -1))


def test_value_v1_flexible_bytes_hand_checked():
    value = TxnLogValue(7, 1, 1000, 2, frozenset({("t", 0)}), 20, 10)
    data = encode_value(value, version=1)
    assert data == bytes.fromhex(
        "0001" "0000000000000007" "0001" "000003e8" "02"
        "02"              # compact array: 1 entry
        "02" "74"         # compact string "t"
        "02" "00000000"   # compact [int32]: [0]
        "00"              # partition entry's tagged fields
        "0000000000000014" "000000000000000a"
        "00")             # top-level tagged fields
    assert decode_value(data) == value
    # Empty in v1: null compact array (0).
    empty = encode_value(TxnLogValue(7, 2, 1000, 0, frozenset(), 30, -1), version=1)
    assert empty[17] == 0
    assert decode_value(empty).partitions == frozenset()


def test_value_v1_skips_unknown_tagged_fields():
    value = TxnLogValue(7, 1, 1000, 4, frozenset({("t", 3)}), 20, 10)
    data = bytearray(encode_value(value, version=1))
    # Replace the final empty tag section by one tag (id 5, 2 bytes), as a newer writer might.
    data[-1:] = bytes([1, 5, 2, 0xAB, 0xCD])
    assert decode_value(bytes(data)) == value


def test_tombstone_and_bad_values():
    assert decode_value(None) is None
    with pytest.raises(RecordFormatError):
        decode_value(bytes.fromhex("0002") + bytes(40))  # unknown version
    with pytest.raises(RecordFormatError):
        decode_value(encode_value(TxnLogValue(1, 1, 1, 1, frozenset({("t", 0)}), 1, 1))[:-3])


def test_partition_for_is_kafkas_hash():
    # Java: "hello".hashCode() == 99162322; 99162322 % 50 == 22
    assert partition_for("hello", 50) == 22
    assert partition_for("polygenelubricants", 50) == 0  # hashCode == Integer.MIN_VALUE


_names = st.text(min_size=1, max_size=20)


@given(st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1), st.integers(1, 2**31 - 1),
       st.integers(1, 5), st.frozensets(st.tuples(_names, st.integers(0, 2**31 - 1)), min_size=1, max_size=8),
       st.integers(-1, 2**62), st.integers(-1, 2**62), st.sampled_from([0, 1]))
def test_value_round_trip(pid, epoch, timeout, status, partitions, last, start, version):
    value = TxnLogValue(pid, epoch, timeout, status, partitions, last, start)
    assert decode_value(encode_value(value, version)) == value


@given(_names)
def test_key_round_trip(txn_id):
    assert decode_key(encode_key(txn_id)) == txn_id
