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


# -- down-conversion (Fetch v0-v3) ------------------------------------------------

def _v2(records, compression=0, base_offset=0, **kw):
    batch = bytearray(records_py.build_batch(records, compression=compression, **kw))
    struct.pack_into(">q", batch, 0, base_offset)
    return bytes(batch)


def _messages_of(message_set):
    """``(offset, magic, attributes, timestamp, key, value)`` of each top-level message."""
    out = []
    position = 0
    while position < len(message_set):
        offset, size = struct.unpack_from(">qi", message_set, position)
        body = message_set[position + 12:position + 12 + size]
        assert struct.unpack_from(">I", body)[0] == zlib.crc32(body[4:])
        magic, attributes = body[4], body[5]
        timestamp = struct.unpack_from(">q", body, 6)[0] if magic == 1 else -1
        out.append((offset, magic, attributes, timestamp))
        position += 12 + size
    return out


@pytest.mark.parametrize("magic", [0, 1])
def test_down_convert_uncompressed_keeps_offsets_timestamps_and_drops_headers(magic):
    batch = _v2([(b"k%d" % i, b"v%d" % i, [("h", b"x")], 1000 + i) for i in range(4)], base_offset=10)
    converted, count = legacy_records.down_convert(batch, magic, 12, 1 << 20)
    assert count == 2  # records below the fetch offset are left out, as Kafka
    assert [m[:2] + m[3:] for m in _messages_of(converted)] == [
        (12, magic, 1002 if magic else -1), (13, magic, 1003 if magic else -1)]
    assert [(k, v, h) for _o, _t, k, v, h in records_py.decode_records(to_v2_batch(converted))] == [
        (b"k2", b"v2", []), (b"k3", b"v3", [])]


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_down_convert_compressed_is_one_wrapper_in_the_same_codec(codec, magic):
    batch = _v2([(b"k", b"v%d" % i, [], 1000 + i) for i in range(3)], compression=codec, base_offset=7)
    converted, count = legacy_records.down_convert(batch, magic, 8, 1 << 20)
    assert count == 3  # a compressed batch goes whole
    ((offset, got_magic, attributes, timestamp),) = _messages_of(converted)
    assert (offset, got_magic, attributes & 7, timestamp) == (9, magic, codec, 1002 if magic else -1)
    assert [v for _o, _t, _k, v, _h in records_py.decode_records(to_v2_batch(converted))] == [b"v0", b"v1", b"v2"]


def test_down_convert_v0_lz4_has_kafkas_broken_header_checksum():
    batch = _v2([(b"k", b"v", [], 1000)], compression=LZ4)
    converted, _ = legacy_records.down_convert(batch, 0, 0, 1 << 20)
    frame = converted[12 + 4 + 2 + 4 + 4:]  # offset, size, crc, magic/attributes, null key, value length
    # the header checksum hashed over the frame magic too (kafka-python's lz4_decode_old_kafka)
    assert frame[6] == (legacy_records._xxhash32_short(frame[:6]) >> 8) & 0xFF
    assert frame[6] != (legacy_records._xxhash32_short(frame[4:6]) >> 8) & 0xFF


def test_down_convert_leaves_control_batches_out_and_refuses_zstd():
    marker = _v2([(b"\0\0\0\0", b"\0\0\0\0\0\0\0\0", [], 1000)], base_offset=1)
    marker = bytearray(marker)
    attributes = struct.unpack_from(">h", marker, 21)[0] | 0x30  # transactional control batch
    struct.pack_into(">h", marker, 21, attributes)
    data = _v2([(b"k", b"v", [], 1000)]) + bytes(marker) + _v2([(b"k", b"w", [], 1001)], base_offset=2)
    converted, count = legacy_records.down_convert(data, 1, 0, 1 << 20)
    assert (count, [m[0] for m in _messages_of(converted)]) == (2, [0, 2])
    with pytest.raises(LegacyRecordError) as exc:
        legacy_records.down_convert(_v2([(b"k", b"v", [], 1)], compression=4), 1, 0, 1 << 20)
    assert exc.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_down_convert_stops_at_max_bytes_after_the_first_message():
    batch = _v2([(b"k", b"v" * 100, [], 1000 + i) for i in range(10)])
    one, count = legacy_records.down_convert(batch, 1, 0, 1)
    assert (count, len(_messages_of(one))) == (1, 1)
    some, count = legacy_records.down_convert(batch, 1, 0, 3 * len(one))
    assert (count, len(some)) == (3, 3 * len(one))
