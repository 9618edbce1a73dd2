"""build_batch / decode_records: the v2 record format and every codec."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy._core import batch_py
from kafkapy._core.records_py import (
    CorruptRecordError,
    UnsupportedCompressionError,
    build_batch,
    compress,
    decode_records,
    decompress,
)

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

records_strategy = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=30),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
        st.integers(-(1 << 40), 1 << 42),
    ),
    min_size=1,
    max_size=8,
)


def _expected(records, base_offset):
    return [(base_offset + i, ts, key, value, headers) for i, (key, value, headers, ts) in enumerate(records)]


@pytest.mark.parametrize("codec", list(CODECS))
@settings(max_examples=40, deadline=None)
@given(records=records_strategy, base_offset=st.integers(0, 1 << 50))
def test_round_trip(codec, records, base_offset):
    batch = build_batch(records, base_offset=base_offset, compression=CODECS[codec])
    headers, end_position, error_code = batch_py.scan_batches(batch)
    assert (end_position, error_code) == (len(batch), 0)
    assert headers[0].attributes & 7 == CODECS[codec]
    assert decode_records(batch) == _expected(records, base_offset)


@pytest.mark.parametrize("codec", list(CODECS))
def test_large_batch_round_trip(codec):
    # Over 64 KiB of records: several lz4 blocks and xerial snappy chunks.
    records = [(b"%d" % i, bytes([i % 251]) * 1000, [("i", b"%d" % i)], 1_000 + i) for i in range(200)]
    batch = build_batch(records, compression=CODECS[codec])
    if codec != "none":
        assert len(batch) < 200 * 1000 // 4
    assert decode_records(batch) == _expected(records, 0)


def test_snappy_raw_and_xerial_both_decode():
    import cramjam

    data = b"kafka " * 20_000
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(2, raw) == data
    xerial = compress(2, data)
    assert xerial.startswith(b"\x82SNAPPY\x00")
    assert decompress(2, xerial) == data


def test_lz4_frame_has_independent_blocks():
    frame = compress(3, b"abc" * 1000)
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little-endian
    assert frame[4] & 0x20  # FLG.BlockIndependence: Kafka rejects linked blocks


def test_log_append_time_gives_max_timestamp():
    batch = build_batch([(None, b"a", [], 10), (None, b"b", [], 20)], timestamp_type=1)
    assert batch_py.read_header(batch, 0).attributes & 0x08
    assert [r[1] for r in decode_records(batch)] == [20, 20]


def test_header_defaults_and_flags():
    batch = build_batch(
        [(None, b"a", [], 10), (None, b"b", [], 30), (None, b"c", [], 20)],
        base_timestamp=5,
        is_transactional=True,
        is_control=True,
    )
    header = batch_py.read_header(batch, 0)
    assert header.base_timestamp == 5
    assert header.max_timestamp == 30
    assert header.attributes == 0x30
    assert [r[1] for r in decode_records(batch)] == [10, 30, 20]


def test_empty_batch():
    batch = build_batch([])
    header = batch_py.read_header(batch, 0)
    assert (header.records_count, header.last_offset_delta, len(batch)) == (0, 0, 61)
    assert batch_py.scan_batches(batch)[2] == 0
    assert decode_records(batch) == []


def test_varint_edges():
    # Timestamp deltas near +/- 2**62 need 9-10 byte varlongs.
    records = [(b"k", b"v", [], -(1 << 62)), (b"k", b"v", [], (1 << 62) - 1)]
    assert decode_records(build_batch(records)) == _expected(records, 0)
    with pytest.raises(ValueError):  # a delta of 2**63 does not fit
        build_batch([(b"k", b"v", [], -(1 << 62)), (b"k", b"v", [], 1 << 62)])


def test_corrupt_records_raise():
    batch = bytearray(build_batch([(b"key", b"value", [("h", b"x")], 1)]))
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(batch[:-1]))  # shorter than batchLength says
    broken = bytearray(batch)
    broken[61] = 0x7E  # record length far past the end
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(broken))
    broken = bytearray(batch)
    struct.pack_into(">i", broken, 57, 2)  # one more record than present
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(broken))
    gz = bytearray(build_batch([(b"key", b"value" * 50, [], 1)], compression=1))
    gz[-6] ^= 0xFF  # the gzip trailer CRC-32
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(gz))


def test_unknown_codec():
    with pytest.raises(UnsupportedCompressionError):
        build_batch([(None, b"a", [], 1)], compression=6)
    with pytest.raises(UnsupportedCompressionError):
        decompress(7, b"")


@settings(max_examples=200, deadline=None)
@given(tail=st.binary(max_size=100), codec=st.sampled_from(list(CODECS.values())), count=st.integers(0, 5))
def test_garbage_records_raise_only_corrupt(tail, codec, count):
    header = bytearray(build_batch([]))
    struct.pack_into(">i", header, 8, 49 + len(tail))
    struct.pack_into(">h", header, 21, codec)
    struct.pack_into(">i", header, 57, count)
    try:
        decode_records(bytes(header) + tail)
    except CorruptRecordError:
        pass


@pytest.mark.parametrize("codec", list(CODECS))
def test_interoperates_with_kafka_python(codec):
    default_records = pytest.importorskip("kafka.record.default_records")
    builder = default_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=CODECS[codec], is_transactional=0,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    for i in range(5):
        builder.append(i, timestamp=1000 + i, key=b"k%d" % i, value=b"v" * 200, headers=[("h", b"%d" % i)])
    theirs = bytes(builder.build())
    assert batch_py.scan_batches(theirs)[1:] == (len(theirs), 0)
    assert decode_records(theirs) == [
        (i, 1000 + i, b"k%d" % i, b"v" * 200, [("h", b"%d" % i)]) for i in range(5)
    ]
    ours = build_batch([(b"k%d" % i, b"v" * 200, [("h", None)], 1000 + i) for i in range(5)],
                       base_offset=7, compression=CODECS[codec])
    batch = default_records.DefaultRecordBatch(ours)
    assert batch.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch] == [
        (7 + i, 1000 + i, b"k%d" % i, b"v" * 200, [("h", None)]) for i in range(5)
    ]
