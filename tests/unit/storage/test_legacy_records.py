"""storage.legacy_records: v0/v1 MessageSets (Produce v0-v2) to one v2 batch.

The message sets are built by hand (``support.legacy_messages``); the results are read back
with ``records_py`` (kafkapy's v2 decoder, which checks the CRC-32C).
"""

import struct
import zlib

import cramjam
import pytest
from support.legacy_messages import GZIP, LZ4, SNAPPY, message, message_set, wrapper

from kafkapy._core import batch_py, records_py
from kafkapy.protocol.errors import ErrorCode
from kafkapy.storage import legacy_records
from kafkapy.storage.legacy_records import LegacyRecordError, to_v2_batch


def decoded(v2):
    (header,), end, error = batch_py.scan_batches(v2)  # one batch, its CRC-32C checked
    assert (end, error) == (len(v2), 0)
    return header, [(ts, k, v, h) for _off, ts, k, v, h in records_py.decode_records(v2)]


PAIRS = [(b"k0", b"v0"), (None, b"v1"), (b"k2", None)]


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_keys_values_timestamps(magic):
    timestamps = [1_700_000_000_000, 1_700_000_000_005, 1_699_999_999_990]
    v2 = to_v2_batch(message_set(magic, PAIRS, timestamps))
    header, records = decoded(v2)
    expected_ts = timestamps if magic == 1 else [-1, -1, -1]
    assert records == [(t, k, v, []) for (k, v), t in zip(PAIRS, expected_ts)]
    assert (header.records_count, header.producer_id, header.attributes & 0x0F) == (3, -1, 0)
    assert header.max_timestamp == max(expected_ts)
    assert len(v2) == header.batch_length + 12


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_compressed_wrapper_each_codec(codec, magic):
    timestamps = [1_700_000_000_000 + i for i in range(3)]
    inner = message_set(magic, PAIRS, timestamps)
    header, records = decoded(to_v2_batch(wrapper(codec, magic, inner, timestamp=timestamps[-1])))
    expected_ts = timestamps if magic == 1 else [-1, -1, -1]
    assert records == [(t, k, v, []) for (k, v), t in zip(PAIRS, expected_ts)]
    # The source codec is kept; the log applies the topic's compression.type.
    assert header.attributes & 0x07 == codec


def test_v0_lz4_frame_with_a_correct_header_checksum_reads_too():
    inner = message_set(0, PAIRS)
    outer = message(0, None, bytes(cramjam.lz4.compress(inner)), attributes=LZ4)
    assert [r[1:3] for r in decoded(to_v2_batch(outer))[1]] == PAIRS


def test_v1_wrapper_log_append_time_gives_inner_records_its_timestamp():
    inner = message_set(1, PAIRS, [1, 2, 3])
    _, records = decoded(to_v2_batch(wrapper(GZIP, 1, inner, timestamp=1_700_000_000_000,
                                             timestamp_type_bit=0x08)))
    assert [r[0] for r in records] == [1_700_000_000_000] * 3


def error_of(data):
    with pytest.raises(LegacyRecordError) as info:
        to_v2_batch(data)
    return info.value.error_code


def test_bad_crc_is_corrupt_message():
    good = message(1, b"k", b"v", 5)
    assert error_of(message(1, b"k", b"v", 5, crc=zlib.crc32(good[16:]) ^ 1)) == ErrorCode.CORRUPT_MESSAGE
    # A flipped value byte after a correct header.
    assert error_of(good[:-1] + bytes([good[-1] ^ 0xFF])) == ErrorCode.CORRUPT_MESSAGE
    # An inner message's CRC inside a compressed wrapper.
    inner = message(1, b"k", b"v", 5, crc=1)
    assert error_of(wrapper(GZIP, 1, inner, 5)) == ErrorCode.CORRUPT_MESSAGE


def test_truncated_set():
    whole = message_set(1, PAIRS, [7, 8, 9])
    # A truncated last message is dropped, as Kafka's log reader stops there.
    _, records = decoded(to_v2_batch(whole[:-3]))
    assert [r[1:3] for r in records] == PAIRS[:2]
    # Nothing complete: nothing to append.
    assert to_v2_batch(whole[:20]) == b""
    assert to_v2_batch(b"") == b""
    # Inside a compressed wrapper a truncation is corrupt.
    assert error_of(wrapper(GZIP, 1, whole[:-3], 9)) == ErrorCode.CORRUPT_MESSAGE
    # A size below the v0 overhead is corrupt.
    assert error_of(struct.pack(">qi", 0, 5) + b"\x00" * 5) == ErrorCode.CORRUPT_MESSAGE
    # Fields overrunning the size.
    bad = bytearray(message(0, b"key", b"v"))
    struct.pack_into(">i", bad, 18, 100)
    struct.pack_into(">I", bad, 12, zlib.crc32(bad[16:]))
    assert error_of(bytes(bad)) == ErrorCode.CORRUPT_MESSAGE


def test_invalid_record_cases():
    # Mixed magic in one set.
    assert error_of(message(0, b"a", b"b") + message(1, b"a", b"b", 1)) == ErrorCode.INVALID_RECORD
    # Two compressed wrappers.
    one = wrapper(GZIP, 1, message_set(1, PAIRS, [1, 2, 3]), 3)
    assert error_of(one + one) == ErrorCode.INVALID_RECORD
    # Inner magic differs from the wrapper's; inner message compressed; empty wrapper.
    assert error_of(wrapper(GZIP, 1, message_set(0, PAIRS), 3)) == ErrorCode.INVALID_RECORD
    assert error_of(wrapper(GZIP, 1, one, 3)) == ErrorCode.INVALID_RECORD
    assert error_of(wrapper(GZIP, 1, b"", 3)) == ErrorCode.INVALID_RECORD
    # A producer asking for LogAppendTime without a timestamp.
    assert error_of(message(1, b"k", b"v", -1, attributes=0x08)) == ErrorCode.INVALID_TIMESTAMP
    # Undecodable payload, unknown codec.
    assert error_of(message(1, None, b"not gzip", 1, attributes=GZIP)) == ErrorCode.CORRUPT_MESSAGE
    assert error_of(message(1, None, b"x", 1, attributes=5)) == ErrorCode.CORRUPT_MESSAGE


def test_is_legacy_tells_v2_batches_apart():
    assert legacy_records.is_legacy(message(0, b"k", b"v"))
    assert legacy_records.is_legacy(message(1, b"k", b"v", 1))
    assert not legacy_records.is_legacy(records_py.build_batch([(b"k", b"v", [], 1)]))
    assert not legacy_records.is_legacy(b"\x00" * 10)
