"""compression.type on append: batches rewritten in the topic's codec keep
every field but the codec, idempotent retries are still recognised, and
``producer`` keeps the bytes as they arrived."""

import pytest

from kafkapy._core import records_py
from kafkapy._core.records_py import build_batch, decode_records
from kafkapy.storage import recompress
from kafkapy.storage.config import LogConfig
from kafkapy.storage.errors import RecordError

from support.storage import T0, append, batch, open_log, read_bytes

CODECS = ["uncompressed", "gzip", "snappy", "lz4", "zstd"]


def _batch(codec=0, n=4, **kw):
    records = [(b"k%d" % i, b"value-%d" % i * 20, [("h", b"x%d" % i), ("n", None)], T0 + 7 * i)
               for i in range(n)]
    return build_batch(records, compression=codec, **kw)


def _headers(data):
    return batch.scan_batches(data, 0, -1, True, -1)[0]


@pytest.mark.parametrize("target", CODECS)
@pytest.mark.parametrize("source", [0, 1, 3, 4])
def test_recompress_keeps_everything_but_the_codec(source, target):
    original = _batch(source, producer_id=42, producer_epoch=3, base_sequence=17, partition_leader_epoch=5)
    data = original + _batch(source, n=2)
    codec = recompress.target_codec(target)
    headers = _headers(data)
    out = recompress.recompress(memoryview(data), headers, codec)
    new_headers = _headers(bytes(out))
    assert len(new_headers) == 2
    for old, new in zip(headers, new_headers):
        assert new.attributes & 7 == codec
        for field in ("base_offset", "partition_leader_epoch", "last_offset_delta", "base_timestamp",
                      "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "records_count"):
            assert getattr(new, field) == getattr(old, field), field
    assert decode_records(bytes(out)) == decode_records(original)
    # Deterministic: a retry recompresses to the same bytes.
    assert recompress.recompress(memoryview(data), headers, codec) == out


def test_producer_keeps_batches_and_same_codec_is_untouched():
    assert recompress.target_codec("producer") is None
    headers = _headers(_batch(1))
    assert not recompress.needs_recompression(headers, None)
    assert not recompress.needs_recompression(headers, records_py.COMPRESSION_GZIP)
    assert recompress.needs_recompression(headers, records_py.COMPRESSION_ZSTD)


def test_log_appends_in_the_topic_codec_and_recognises_retries(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(compression_type="gzip"))
    first = _batch(3, producer_id=9, producer_epoch=0, base_sequence=0)
    r1 = append(log, first)
    assert (r1.first_offset, r1.last_offset, r1.duplicate) == (0, 3, False)
    again = append(log, first)
    assert again.duplicate and again.first_offset == 0
    append(log, _batch(0, n=2))
    stored = read_bytes(log, 0)
    headers = _headers(stored)
    assert [h.attributes & 7 for h in headers] == [1, 1]
    assert [h.base_offset for h in headers] == [0, 4]
    assert [r[2] for r in decode_records(stored)] == [b"k0", b"k1", b"k2", b"k3"]
    # The config object may change under an open log (AlterConfigs): the next append follows it.
    log.config = log.config.replace(compression_type="producer")
    append(log, _batch(3))
    assert [h.attributes & 7 for h in _headers(read_bytes(log, 0))] == [1, 1, 3]
    log.close()


def test_recompressed_batch_over_max_message_bytes_is_refused(tmp_path):
    import os

    # Incompressible values: gzip makes the batch bigger than the uncompressed one.
    records = [(None, os.urandom(600), [], T0)]
    raw = build_batch(records)
    log = open_log(tmp_path / "t-0", LogConfig(compression_type="gzip", max_message_bytes=len(raw)))
    with pytest.raises(RecordError) as info:
        append(log, raw)
    assert info.value.error_code == 10  # MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0
    log.close()


def test_corrupt_compressed_payload_is_corrupt_message(tmp_path):
    import struct

    import crc32c

    data = bytearray(_batch(1))
    data[70:80] = b"\xff" * 10  # garble the gzip stream, then fix the CRC so only decoding fails
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    log = open_log(tmp_path / "t-0", LogConfig(compression_type="zstd"))
    with pytest.raises(RecordError) as info:
        append(log, bytes(data))
    assert info.value.error_code == 2
    log.close()


@pytest.mark.parametrize("codec,key,low,high", [
    ("gzip", "compression_gzip_level", 1, 9),
    ("lz4", "compression_lz4_level", 1, 17),
    ("zstd", "compression_zstd_level", -50, 19),
])
def test_log_recompresses_at_the_topic_codec_level(tmp_path, codec, key, low, high):
    # KIP-390: compression.<codec>.level applies where the broker recompresses.
    # Repetitive text with some variety, so a higher level finds more matches.
    text = b"".join(b"line %d of %s says %d\n" % (i, b"abcdefgh"[i % 8:], i * i % 97) for i in range(3000))
    raw = build_batch([(None, text, [], T0)])
    sizes = []
    for level in (low, high):
        log = open_log(tmp_path / f"{codec}{level}-0", LogConfig(compression_type=codec, **{key: level}))
        append(log, raw)
        stored = read_bytes(log, 0)
        assert decode_records(stored)[0][3] == text
        # The log stamps its leader epoch (and so the CRC); the payload is recompress's at that level.
        expected = recompress.recompress(memoryview(raw), _headers(raw), recompress.target_codec(codec), level)
        assert bytes(stored)[61:] == bytes(expected)[61:]
        sizes.append(len(stored))
        log.close()
    assert sizes[1] < sizes[0], sizes
