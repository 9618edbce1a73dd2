"""Build and decode v2 record batches (records inside the batch).

The broker never looks at records on its hot paths (batches stay opaque),
so this serves tests, tools and the client; the client's per-record work
(``BatchBuilder``, ``decode_records``, ``decode_consumer_records``) has a
compiled twin, records.pyx.  The producer's send path that appends here is
``producer``/``producer_py``.

A v2 record (Kafka's DefaultRecord), all lengths zigzag varints:

    length varint            bytes after this field
    attributes i8            unused, 0
    timestampDelta varlong   from the batch's baseTimestamp
    offsetDelta varint       from the batch's baseOffset
    keyLength varint, key    -1: null
    valueLength varint, value
    headerCount varint, then per header:
        keyLength varint, key (UTF-8), valueLength varint (-1: null), value

With compression (attributes & 7) everything after the 61-byte header is one
compressed stream of the concatenated records; the header stays plain.
Codecs other than gzip need ``cramjam``; it is imported lazily so the broker
itself does not depend on it.
"""

import struct
import zlib

import crc32c

from kafkapy._core.batch_py import BATCH_HEADER_SIZE, LOG_OVERHEAD, read_header

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

ATTRIBUTE_TIMESTAMP_TYPE = 0x08
ATTRIBUTE_TRANSACTIONAL = 0x10
ATTRIBUTE_CONTROL = 0x20

# Header fields after the CRC, i.e. the CRC-covered part of the header:
# attributes i16, lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64,
# producerId i64, producerEpoch i16, baseSequence i32, recordsCount i32.
_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")
_HEADER_BEFORE_CRC = struct.Struct(">qiib")

# Java's xerial SnappyOutputStream, which the Java producer uses: an 8-byte
# magic, version and compatible-version i32s, then chunks of (i32 length, raw
# snappy block).  librdkafka and others write raw snappy; Kafka reads both.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# The xerial stream's default block size, 32 KiB of uncompressed input.
_XERIAL_BLOCK_BYTES = 32 * 1024
_I32 = struct.Struct(">i")


class CorruptRecordError(ValueError):
    """The records of a batch cannot be decoded (Kafka's CORRUPT_MESSAGE)."""


class UnsupportedCompressionError(ValueError):
    """The codec is unknown, or its library (cramjam) is not installed."""


# ---------------------------------------------------------------- varints


def _zigzag(value):
    return (value << 1) ^ (value >> 63)


def _write_varint(out, value):
    """Append ``value`` (signed, up to 64 bits) as a zigzag varint."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"{value} does not fit a varlong")
    unsigned = _zigzag(value) & 0xFFFFFFFFFFFFFFFF
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)


def _read_varint(buf, position, end):
    """Decode a zigzag varint at ``position``; return (value, new_position)."""
    result = 0
    shift = 0
    # A varlong takes at most 10 bytes (64 bits / 7 per byte, rounded up).
    while True:
        if position >= end:
            raise CorruptRecordError("truncated varint")
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift >= 70:
            raise CorruptRecordError("varint longer than 10 bytes")
    result &= 0xFFFFFFFFFFFFFFFF
    return (result >> 1) ^ -(result & 1), position


def _write_bytes(out, data):
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


def _read_bytes(buf, position, end):
    length, position = _read_varint(buf, position, end)
    if length < 0:
        return None, position
    if length > end - position:
        raise CorruptRecordError(f"field of {length} bytes overruns the record")
    return bytes(buf[position : position + length]), position + length


# ---------------------------------------------------------------- codecs


def _cramjam():
    try:
        import cramjam
    except ImportError:  # pragma: no cover - cramjam is in the test extra
        raise UnsupportedCompressionError("snappy, lz4 and zstd need the cramjam package") from None
    return cramjam


def compress(codec, data, level=None):
    """Compress a records section the way the Java producer does.

    ``level``: the codec's level (compression.gzip/lz4/zstd.level), None for
    its default; snappy has none."""
    if codec == COMPRESSION_NONE:
        return bytes(data)
    if codec == COMPRESSION_GZIP:
        compressor = zlib.compressobj(-1 if level is None else level, wbits=31)  # 31: gzip container
        return compressor.compress(data) + compressor.flush()
    cramjam = _cramjam()
    if codec == COMPRESSION_SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK_BYTES):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES]))
            out += _I32.pack(len(block))
            out += block
        return bytes(out)
    if codec == COMPRESSION_LZ4:
        # LZ4 frame with independent blocks and no content checksum, which
        # Kafka's KafkaLZ4BlockOutputStream also writes (it rejects linked
        # blocks on read).
        compressor = cramjam.lz4.Compressor(level, False, False)
        compressor.compress(bytes(data))
        return bytes(compressor.finish())
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(bytes(data), level))
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def decompress(codec, data):
    """Inverse of ``compress``; snappy accepts xerial framing and raw blocks."""
    if codec == COMPRESSION_NONE:
        return bytes(data)
    try:
        if codec == COMPRESSION_GZIP:
            # 47 = 32 + 15: accept a gzip or zlib header, 32 KiB window.
            return zlib.decompress(data, wbits=47)
        cramjam = _cramjam()
        if codec == COMPRESSION_SNAPPY:
            data = bytes(data)
            if data.startswith(_XERIAL_MAGIC) and len(data) >= len(_XERIAL_HEADER):
                out = bytearray()
                position = len(_XERIAL_HEADER)
                while position < len(data):
                    if len(data) - position < 4:
                        raise CorruptRecordError("truncated xerial snappy chunk length")
                    (length,) = _I32.unpack_from(data, position)
                    position += 4
                    if length < 0 or length > len(data) - position:
                        raise CorruptRecordError("xerial snappy chunk overruns the batch")
                    out += cramjam.snappy.decompress_raw(data[position : position + length])
                    position += length
                return bytes(out)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == COMPRESSION_LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == COMPRESSION_ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except CorruptRecordError:
        raise
    except UnsupportedCompressionError:
        raise
    except Exception as exc:  # zlib.error, cramjam.DecompressionError
        raise CorruptRecordError(f"cannot decompress codec {codec}: {exc}") from exc
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


# ---------------------------------------------------------------- batches


def _encode_record(out, offset_delta, timestamp_delta, key, value, headers):
    body = bytearray(b"\x00")  # record attributes: unused, always 0
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    _write_bytes(body, key)
    _write_bytes(body, value)
    _write_varint(body, len(headers))
    for header_key, header_value in headers:
        _write_bytes(body, header_key.encode("utf-8"))
        _write_bytes(body, header_value)
    _write_varint(out, len(body))
    out += body


def build_batch(
    records,
    base_offset=0,
    partition_leader_epoch=-1,
    base_timestamp=None,
    producer_id=-1,
    producer_epoch=-1,
    base_sequence=-1,
    compression=COMPRESSION_NONE,
    timestamp_type=TIMESTAMP_CREATE_TIME,
    is_transactional=False,
    is_control=False,
    compression_level=None,
):
    """Encode one v2 batch with a valid CRC.

    ``records``: list of ``(key, value, headers, timestamp_ms)`` with
    ``headers`` a list of ``(str, bytes | None)``.  ``base_timestamp``
    defaults to the first record's timestamp, as the Java producer does.
    An empty list gives an empty batch (recordsCount 0, lastOffsetDelta 0).
    """
    if base_timestamp is None:
        base_timestamp = records[0][3] if records else -1
    max_timestamp = max((record[3] for record in records), default=base_timestamp)
    body = bytearray()
    for offset_delta, (key, value, headers, timestamp_ms) in enumerate(records):
        _encode_record(body, offset_delta, timestamp_ms - base_timestamp, key, value, headers)
    payload = compress(compression, body, compression_level)

    attributes = compression & 0x07
    if timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        attributes |= ATTRIBUTE_TIMESTAMP_TYPE
    if is_transactional:
        attributes |= ATTRIBUTE_TRANSACTIONAL
    if is_control:
        attributes |= ATTRIBUTE_CONTROL
    covered = (
        _HEADER_AFTER_CRC.pack(
            attributes,
            max(len(records) - 1, 0),
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + payload
    )
    # batchLength counts everything after itself: leader epoch 4 + magic 1 +
    # crc 4 + the CRC-covered bytes.
    batch_length = 4 + 1 + 4 + len(covered)
    return (
        _HEADER_BEFORE_CRC.pack(base_offset, batch_length, partition_leader_epoch, 2)
        + struct.pack(">I", crc32c.crc32c(covered))
        + covered
    )


def decode_records(batch):
    """Decode the records of the batch at the start of ``batch``.

    Returns a list of ``(offset, timestamp_ms, key, value, headers)``.  Under
    LogAppendTime every record carries the batch's maxTimestamp, as in Kafka.
    Raises ``CorruptRecordError`` on malformed input (the CRC is not checked
    here: scan_batches does that).
    """
    header = read_header(batch, 0)
    end = header.batch_length + LOG_OVERHEAD
    if header.magic != 2 or header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or end > len(batch):
        raise CorruptRecordError("not a whole v2 batch")
    with memoryview(batch) as view:
        data = decompress(header.attributes & 0x07, view[BATCH_HEADER_SIZE:end])
    log_append_time = bool(header.attributes & ATTRIBUTE_TIMESTAMP_TYPE)
    records = []
    position = 0
    size = len(data)
    for _ in range(header.records_count):
        length, position = _read_varint(data, position, size)
        if length < 0 or length > size - position:
            raise CorruptRecordError(f"record of {length} bytes overruns the batch")
        record_end = position + length
        position += 1  # record attributes
        timestamp_delta, position = _read_varint(data, position, record_end)
        offset_delta, position = _read_varint(data, position, record_end)
        key, position = _read_bytes(data, position, record_end)
        value, position = _read_bytes(data, position, record_end)
        header_count, position = _read_varint(data, position, record_end)
        if header_count < 0 or header_count > record_end - position:
            raise CorruptRecordError(f"bad header count {header_count}")
        headers = []
        for _ in range(header_count):
            header_key, position = _read_bytes(data, position, record_end)
            if header_key is None:
                raise CorruptRecordError("null header key")
            header_value, position = _read_bytes(data, position, record_end)
            try:
                headers.append((header_key.decode("utf-8"), header_value))
            except UnicodeDecodeError as exc:
                raise CorruptRecordError("header key is not UTF-8") from exc
        if position != record_end:
            raise CorruptRecordError("record length does not match its fields")
        timestamp_ms = header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
        records.append((header.base_offset + offset_delta, timestamp_ms, key, value, headers))
    if position != size:
        raise CorruptRecordError("bytes left after the last record")
    return records


# ---------------------------------------------------------------- producer side


class BatchBuilder:
    """Accumulate records for one v2 batch; ``build`` seals it.

    The producer's ``ProducerBatch``/``MemoryRecordsBuilder``: records are
    encoded as they are appended (into ``_body``, uncompressed), so sealing a
    batch costs one compression pass and one CRC.  ``batch_size`` bounds the
    *uncompressed* records section, like Java's builder before it learns the
    compression ratio; a first record larger than ``batch_size`` is always
    accepted (Java gives an oversized record its own batch).

    Ownership: one builder belongs to one producer batch; the accumulator
    appends under its lock and the sender thread builds it once it is closed.
    """

    __slots__ = ("compression", "batch_size", "base_timestamp", "max_timestamp", "records_count", "_body")

    def __init__(self, compression=COMPRESSION_NONE, batch_size=16384):
        if compression not in (0, 1, 2, 3, 4):
            raise UnsupportedCompressionError(f"unknown compression codec {compression}")
        self.compression = compression
        self.batch_size = batch_size
        self.base_timestamp = -1
        self.max_timestamp = -1
        self.records_count = 0
        self._body = bytearray()

    @property
    def size_bytes(self):
        """Bytes the batch would take uncompressed (header included)."""
        return BATCH_HEADER_SIZE + len(self._body)

    def append(self, timestamp_ms, key, value, headers=None):
        """Append one record; return its offset delta, or -1 when it does not fit.

        ``headers``: None or a sequence of ``(str, bytes | None)``.
        """
        if self.records_count == 0:
            self.base_timestamp = timestamp_ms
            self.max_timestamp = timestamp_ms
        record = bytearray()
        _encode_record(record, self.records_count, timestamp_ms - self.base_timestamp, key, value, headers or ())
        if self.records_count and len(self._body) + len(record) > self.batch_size - BATCH_HEADER_SIZE:
            return -1
        self._body += record
        if timestamp_ms > self.max_timestamp:
            self.max_timestamp = timestamp_ms
        delta = self.records_count
        self.records_count += 1
        return delta

    def build(self, producer_id=-1, producer_epoch=-1, base_sequence=-1, is_transactional=False):
        """The sealed batch (base offset 0, leader epoch -1) with its CRC."""
        payload = compress(self.compression, self._body)
        attributes = self.compression
        if is_transactional:
            attributes |= ATTRIBUTE_TRANSACTIONAL
        covered = (
            _HEADER_AFTER_CRC.pack(
                attributes,
                max(self.records_count - 1, 0),
                self.base_timestamp,
                self.max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                self.records_count,
            )
            + payload
        )
        return (
            _HEADER_BEFORE_CRC.pack(0, 4 + 1 + 4 + len(covered), -1, 2)
            + struct.pack(">I", crc32c.crc32c(covered))
            + covered
        )


# ---------------------------------------------------------------- consumer side


def decode_consumer_records(batch, topic, partition, min_offset, record_cls):
    """Records of the batch at the start of ``batch`` with offset >= ``min_offset``.

    Each is ``record_cls(topic, partition, offset, timestamp_ms,
    timestamp_type, key, value, headers)`` (the client's ConsumerRecord).  A
    fetch may start mid-batch (a compressed batch is returned whole), so the
    records before the fetch offset are skipped here, as Java's Fetcher does.
    """
    timestamp_type = 1 if read_header(batch, 0).attributes & ATTRIBUTE_TIMESTAMP_TYPE else 0
    return [
        record_cls(topic, partition, offset, timestamp_ms, timestamp_type, key, value, headers)
        for offset, timestamp_ms, key, value, headers in decode_records(batch)
        if offset >= min_offset
    ]
