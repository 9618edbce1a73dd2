"""Plain-Python twin of ``kafkapy._core.batch``: v2 record-batch headers.

Layout of a v2 batch header (all big-endian, offsets from the batch start):

    baseOffset i64 @0, batchLength i32 @8, partitionLeaderEpoch i32 @12,
    magic i8 @16, crc u32 @17, attributes i16 @21, lastOffsetDelta i32 @23,
    baseTimestamp i64 @27, maxTimestamp i64 @35, producerId i64 @43,
    producerEpoch i16 @51, baseSequence i32 @53, recordsCount i32 @57,
    records from @61.

``batchLength`` counts the bytes after itself, so a batch occupies
``batchLength + 12`` bytes (``LOG_OVERHEAD`` = offset + length).  The CRC-32C
covers @21 to the end of the batch: baseOffset and partitionLeaderEpoch sit
before it precisely so that a broker can assign them without recomputing it.

This module and the compiled one must behave identically (same results, same
exceptions); the tests run both through one fixture.  Functions hold no
state; buffers belong to the caller, and no memoryview of them outlives a call
(an ``mmap`` with a live export cannot be resized or closed).
"""

import struct

import crc32c

from kafkapy._core.types import AppendCheckError, BatchHeader

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12

# Error codes (Kafka's Errors enum).
NONE = 0
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_TIMESTAMP = 32
INVALID_RECORD = 87

# Smallest legal batchLength: a header with zero records is 61 bytes, of
# which the first 12 (baseOffset + batchLength) are not counted: 61 - 12 = 49.
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

MAGIC_V2 = 2
COMPRESSION_MASK = 0x07
# Codecs 0..4: none, gzip, snappy, lz4, zstd.  5..7 are undefined.
MAX_COMPRESSION_CODEC = 4
TIMESTAMP_TYPE_MASK = 0x08

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")

# Offsets of the fields assign_offsets rewrites.
_PLE_AT = 12
_CRC_AT = 17
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35
_LAST_OFFSET_DELTA_AT = 23
_RECORDS_COUNT_AT = 57

_tuple_new = tuple.__new__

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _check_range(value, low, high):
    # The compiled twin takes these as C integers and raises OverflowError.
    if not low <= value <= high:
        raise OverflowError(f"{value} does not fit the field")


def read_header(buf, position):
    """Decode the 61-byte header at ``position``; no validation at all."""
    if position < 0 or len(buf) - position < BATCH_HEADER_SIZE:
        raise ValueError(
            f"need {BATCH_HEADER_SIZE} bytes at position {position}, buffer has {len(buf)}"
        )
    return _tuple_new(BatchHeader, (position,) + _HEADER.unpack_from(buf, position))


def scan_batches(buf, position=0, end=-1, verify_crc=True, max_batch_size=-1):
    """Walk consecutive batches in ``buf[position:end]``.

    Returns ``(headers, end_position, error_code)``; ``end_position`` is where
    the valid prefix ends and ``error_code`` is 0 only if everything up to
    ``end`` was whole, valid batches.  Checks run in Kafka's order
    (ByteBufferLogInputStream, then LogValidator): length, size limit,
    truncation, magic, CRC, codec, offset delta / count.
    """
    size_of_buf = len(buf)
    if end < 0:
        end = size_of_buf
    if end > size_of_buf or position < 0 or position > end:
        raise ValueError(f"bad range position={position} end={end} for {size_of_buf} bytes")
    headers = []
    with memoryview(buf) as view:
        while position < end:
            remaining = end - position
            if remaining < LOG_OVERHEAD:
                return headers, position, CORRUPT_MESSAGE
            batch_length = _I32.unpack_from(buf, position + 8)[0]
            if batch_length < MIN_BATCH_LENGTH:
                return headers, position, CORRUPT_MESSAGE
            size = batch_length + LOG_OVERHEAD
            if max_batch_size >= 0 and size > max_batch_size:
                return headers, position, MESSAGE_TOO_LARGE
            if size > remaining:
                return headers, position, CORRUPT_MESSAGE
            header = _tuple_new(BatchHeader, (position,) + _HEADER.unpack_from(buf, position))
            if header.magic != MAGIC_V2:
                return headers, position, INVALID_RECORD
            if verify_crc and crc32c.crc32c(view[position + _ATTRIBUTES_AT : position + size]) != header.crc:
                return headers, position, CORRUPT_MESSAGE
            if header.attributes & COMPRESSION_MASK > MAX_COMPRESSION_CODEC:
                return headers, position, CORRUPT_MESSAGE
            # An empty batch (recordsCount 0, left by compaction) keeps the
            # lastOffsetDelta of the records it once held, so only a negative
            # delta is wrong there; a non-empty one must span exactly its records.
            records_count = header.records_count
            last_offset_delta = header.last_offset_delta
            if records_count < 0 or last_offset_delta < 0 or (
                records_count > 0 and last_offset_delta != records_count - 1
            ):
                return headers, position, INVALID_RECORD
            headers.append(header)
            position += size
    return headers, position, NONE


def assign_offsets(buf, headers, base_offset, partition_leader_epoch, log_append_time_ms=-1):
    """Stamp offsets (and optionally LogAppendTime) into ``buf`` in place.

    ``headers`` are those scan_batches returned for this buffer.  Batch i gets
    ``baseOffset`` = ``base_offset`` plus the record spans of batches 0..i-1,
    and ``partitionLeaderEpoch``; neither is CRC-covered.  With
    ``log_append_time_ms >= 0`` the timestamp-type bit and ``maxTimestamp``
    change, so the CRC is recomputed.  Returns the next offset to assign.
    """
    _check_range(base_offset, _INT64_MIN, _INT64_MAX)
    _check_range(partition_leader_epoch, _INT32_MIN, _INT32_MAX)
    _check_range(log_append_time_ms, _INT64_MIN, _INT64_MAX)
    with memoryview(buf) as view:
        if view.readonly:
            raise TypeError("assign_offsets needs a writable buffer")
        size_of_buf = len(view)
        next_offset = base_offset
        for header in headers:
            # Indexing, not attribute access: the fields are position @0,
            # batch_length @2 and last_offset_delta @7 of a BatchHeader.
            position = header[0]
            batch_length = header[2]
            size = batch_length + LOG_OVERHEAD
            if position < 0 or batch_length < MIN_BATCH_LENGTH or position + size > size_of_buf:
                raise ValueError(f"batch at {position} of {size} bytes is outside the buffer")
            _I64.pack_into(buf, position, next_offset)
            _I32.pack_into(buf, position + _PLE_AT, partition_leader_epoch)
            if log_append_time_ms >= 0:
                attributes = _I16.unpack_from(buf, position + _ATTRIBUTES_AT)[0]
                _I16.pack_into(buf, position + _ATTRIBUTES_AT, attributes | TIMESTAMP_TYPE_MASK)
                _I64.pack_into(buf, position + _MAX_TIMESTAMP_AT, log_append_time_ms)
                crc = crc32c.crc32c(view[position + _ATTRIBUTES_AT : position + size])
                _U32.pack_into(buf, position + _CRC_AT, crc)
            next_offset += header[7] + 1
    return next_offset


_TRANSACTIONAL = 0x10
_CONTROL = 0x20  # control batches are written by the broker only (transaction markers)


def check_append(buf, max_batch_size=-1, now_ms=0, timestamp_before_max_ms=-1, timestamp_after_max_ms=-1):
    """Validate a produce request's batches for a leader append in one call.

    ``scan_batches`` (CRC verified) plus the checks ``Log.append_as_leader``
    makes on every batch: no control batch (markers are the broker's), one
    producer id (and, for idempotent producers, one epoch) and one
    transactional flag for all of them, transactional ones with a producer
    id (Kafka's LogValidator / ProduceRequest checks), and base and max
    timestamps of non-empty batches at most ``timestamp_before_max_ms``
    before and ``timestamp_after_max_ms`` after ``now_ms`` (KIP-937's
    message.timestamp.before/after.max.ms; -1: no bound on that side;
    records are opaque: the two bound every record's timestamp).  Returns ``(headers, record_count,
    offset_count, max_timestamp)`` — offset_count is the sum of
    ``lastOffsetDelta + 1``, max_timestamp the largest batch maxTimestamp (-1
    if none is larger).  Raises ``AppendCheckError`` with Kafka's error code:
    the scan's (2, 10, 87), 87 for the batch checks, 32 INVALID_TIMESTAMP.
    """
    headers, _end, error = scan_batches(buf, 0, -1, True, max_batch_size)
    if error:
        raise AppendCheckError(error, f"invalid record batch (error {error})")
    record_count = 0
    offset_count = 0
    max_timestamp = -1
    if not headers:
        return headers, 0, 0, -1
    first = headers[0]
    producer_id = first.producer_id
    for h in headers:
        if h.attributes & _CONTROL:
            raise AppendCheckError(INVALID_RECORD, "control batches are written by the broker only")
        if h.producer_id != producer_id or (producer_id >= 0 and h.producer_epoch != first.producer_epoch) \
                or (h.attributes ^ first.attributes) & _TRANSACTIONAL:
            raise AppendCheckError(INVALID_RECORD, "batches of one produce request must share one producer")
        if h.attributes & _TRANSACTIONAL and producer_id < 0:
            raise AppendCheckError(INVALID_RECORD, "a transactional batch needs a producer id")
        if (timestamp_before_max_ms >= 0 or timestamp_after_max_ms >= 0) and h.records_count != 0:
            for ts in (h.base_timestamp, h.max_timestamp):
                # NO_TIMESTAMP (-1, e.g. up-converted v0 messages) is not checked, as in Kafka.
                if ts == -1:
                    continue
                if 0 <= timestamp_before_max_ms < now_ms - ts:
                    raise AppendCheckError(
                        INVALID_TIMESTAMP, f"timestamp {ts} is more than {timestamp_before_max_ms} ms "
                                           f"before the broker's time {now_ms}")
                if 0 <= timestamp_after_max_ms < ts - now_ms:
                    raise AppendCheckError(
                        INVALID_TIMESTAMP, f"timestamp {ts} is more than {timestamp_after_max_ms} ms "
                                           f"after the broker's time {now_ms}")
        record_count += h.records_count
        offset_count += h.last_offset_delta + 1
        if h.max_timestamp > max_timestamp:
            max_timestamp = h.max_timestamp
    return headers, record_count, offset_count, max_timestamp
