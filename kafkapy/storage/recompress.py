"""compression.type: rewrite a produce request's batches in the topic's codec.

Kafka's LogValidator keeps batches as they arrived when compression.type is
``producer`` or already matches the batch's codec, and otherwise decompresses
and recompresses them on append. kafkapy does the same, batch by batch: each
batch keeps its base offset, partition leader epoch, base timestamp, timestamp
type, producer id/epoch, base sequence, transactional flag, record offset
deltas, timestamps, keys, values and headers; only the codec bits and the
compressed payload (so the length and CRC) change. One batch in gives one
batch out (Kafka merges a request's batches into one; producers with
idempotence send one batch per partition anyway, so sequence numbers mean
the same either way).

Deterministic output matters: an idempotent retry is recognised by its
batch length among other fields, and a retry recompressed with the same
codec produces the same bytes (zlib writes mtime 0 in its gzip header).

This is the only place the broker looks inside batches on the produce path,
and only when a conversion is asked for (docs/architecture.md, "records stay
opaque above _core": the work is done by ``_core.records_py``).
"""

from kafkapy._core import records_py

CODECS = {
    "uncompressed": records_py.COMPRESSION_NONE,
    "gzip": records_py.COMPRESSION_GZIP,
    "snappy": records_py.COMPRESSION_SNAPPY,
    "lz4": records_py.COMPRESSION_LZ4,
    "zstd": records_py.COMPRESSION_ZSTD,
}
_CODEC_MASK = 0x07


def target_codec(compression_type: str):
    """The codec id to store batches in, or None for ``producer`` (keep as received)."""
    return CODECS.get(compression_type)


# The topic key holding each codec's level (KIP-390); snappy has none.
LEVEL_KEYS = {
    records_py.COMPRESSION_GZIP: "compression_gzip_level",
    records_py.COMPRESSION_LZ4: "compression_lz4_level",
    records_py.COMPRESSION_ZSTD: "compression_zstd_level",
}


def needs_recompression(headers, codec) -> bool:
    return codec is not None and any(
        (h.attributes & _CODEC_MASK) != codec and h.records_count > 0 for h in headers)


def recompress(records, headers, codec, level=None) -> bytearray:
    """New bytes holding every batch of ``records`` in ``codec``, at ``level``
    (compression.gzip/lz4/zstd.level; None: the codec's default).

    Raises ``records_py.CorruptRecordError`` when a batch's records do not
    decode (Kafka answers CORRUPT_MESSAGE) and
    ``records_py.UnsupportedCompressionError`` if a codec library is missing.
    """
    out = bytearray()
    for h in headers:
        size = h.batch_length + records_py.LOG_OVERHEAD
        raw = records[h.position:h.position + size]
        if (h.attributes & _CODEC_MASK) == codec or h.records_count == 0:
            out += raw
            continue
        decoded = records_py.decode_records(raw)
        log_append_time = bool(h.attributes & records_py.ATTRIBUTE_TIMESTAMP_TYPE)
        out += records_py.build_batch(
            [(key, value, rec_headers, timestamp_ms)
             for _offset, timestamp_ms, key, value, rec_headers in decoded],
            base_offset=h.base_offset,
            partition_leader_epoch=h.partition_leader_epoch,
            base_timestamp=h.base_timestamp,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            compression=codec,
            timestamp_type=records_py.TIMESTAMP_LOG_APPEND_TIME if log_append_time
            else records_py.TIMESTAMP_CREATE_TIME,
            is_transactional=bool(h.attributes & records_py.ATTRIBUTE_TRANSACTIONAL),
            is_control=bool(h.attributes & records_py.ATTRIBUTE_CONTROL),
            compression_level=level,
        )
    return out
