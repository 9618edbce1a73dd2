"""Message formats v0/v1: up-conversion of a Produce v0-v2 MessageSet to one
v2 batch, and down-conversion of stored v2 batches for Fetch v0-v3.

kafkapy's log holds message format v2 only, as Kafka 3.9's does; Kafka's
LogValidator converts records that arrive as v0/v1 MessageSets on append.
kafkapy converts a partition's MessageSet here, before the normal leader
append (``Partition.append_records_to_leader``), so offsets, acks, the
compression.type rewrite (``recompress``), size checks and metrics stay one
path. The handler that calls this is ``server.handlers.produce``.

A v0/v1 message (Kafka's LegacyRecord), all big-endian:

    offset i64, size i32 (bytes after this field),
    crc u32 (CRC-32 of everything after it), magic i8 (0 or 1),
    attributes i8 (bits 0-2 codec, bit 3 timestamp type from v1),
    timestamp i64 (v1 only), key bytes (i32 length, -1 null),
    value bytes (i32 length, -1 null)

A compressed message (codec != 0) is a wrapper whose value is an inner
MessageSet compressed with the codec; a request carries one wrapper then.
For magic v0 Kafka's LZ4 frames have a wrong header checksum (an old Kafka
bug it keeps for compatibility), so v0 LZ4 frames are read without it.

Kafka's rules kept here: a truncated trailing message is dropped (its log
reader stops there); a bad outer or inner CRC is CORRUPT_MESSAGE; a message
of another magic than the first, a second compressed wrapper, an inner
message of another magic or itself compressed, or a wrapper with no inner
messages is INVALID_RECORD; v0 messages get timestamp -1 (NO_TIMESTAMP) and
v1 messages their own (an inner message its wrapper's when the wrapper says
LogAppendTime); the batch is CreateTime, no producer id (v0/v1 have no
idempotence) and in the source codec (the log's own step applies the topic's
compression.type, as Kafka's targetCompression does).

Down-conversion (``down_convert``, Kafka's RecordsUtil.downConvert as
LazyDownConversionRecords drives it for Fetch v0-v3): magic 0 for Fetch
v0-v1, magic 1 for v2-v3. Control batches are left out; a zstd batch
(no such codec below v2) raises UNSUPPORTED_COMPRESSION_TYPE; an
uncompressed batch becomes one message per record at or past the fetch
offset; a compressed batch becomes one wrapper (offset: its last record's,
magic 1 timestamp: the largest, or the log append time) around all its
records, re-compressed with the same codec (inner offsets relative to the
first record in magic 1, absolute in magic 0; magic 0 LZ4 with Kafka's
broken header checksum). Offsets and timestamps are kept, headers dropped,
the LogAppendTime bit carried in magic 1 attributes. Producer ids and
transaction state have no place in v0/v1: aborted records go out as they
are (a v0-v3 fetch is read_uncommitted).
"""

import os
import struct
import zlib

from kafkapy._core import records_py
from kafkapy._core.batch_py import read_header
from kafkapy.protocol.errors import ErrorCode

LOG_OVERHEAD = 12  # offset i64 + size i32
RECORD_OVERHEAD_V0 = 14  # crc 4 + magic 1 + attributes 1 + key length 4 + value length 4
_MAGIC_OFFSET = 16  # offset 8 + size 4 + crc 4 (the same byte as a v2 batch's magic)
_TIMESTAMP_TYPE_BIT = 0x08
_CODEC_MASK = 0x07
_CODECS = (records_py.COMPRESSION_NONE, records_py.COMPRESSION_GZIP,
           records_py.COMPRESSION_SNAPPY, records_py.COMPRESSION_LZ4)
_SIZE = struct.Struct(">i")
_CRC_MAGIC_ATTRIBUTES = struct.Struct(">Ibb")
_I64 = struct.Struct(">q")
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


class LegacyRecordError(ValueError):
    """A MessageSet Kafka would refuse, with the error code it answers."""

    def __init__(self, error_code: ErrorCode, message: str):
        super().__init__(message)
        self.error_code = error_code


def is_legacy(records) -> bool:
    """Whether ``records`` starts with a v0/v1 message (else: v2 batches or
    too short to tell, left to the normal append path)."""
    return len(records) > _MAGIC_OFFSET and records[_MAGIC_OFFSET] in (0, 1)


def _messages(buf, inner: bool):
    """``(magic, attributes, timestamp, key, value)`` of each message of a
    MessageSet; a truncated last message is dropped at the outer level (as
    Kafka's ByteBufferLogInputStream) and corrupt inside a wrapper."""
    view = memoryview(buf)
    end = len(view)
    position = 0
    while end - position >= LOG_OVERHEAD:
        (size,) = _SIZE.unpack_from(view, position + 8)
        if size < RECORD_OVERHEAD_V0:
            raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE,
                                    f"Record size {size} is less than the minimum record overhead "
                                    f"({RECORD_OVERHEAD_V0})")
        start = position + LOG_OVERHEAD
        if end - start < size:
            break
        position = start + size
        crc, magic, attributes = _CRC_MAGIC_ATTRIBUTES.unpack_from(view, start)
        if magic not in (0, 1) or (magic == 1 and size < RECORD_OVERHEAD_V0 + 8):
            raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, f"Invalid magic {magic} or size {size}")
        if zlib.crc32(view[start + 4:position]) != crc:
            raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {crc})")
        cursor = start + 6
        timestamp = -1
        if magic == 1:
            (timestamp,) = _I64.unpack_from(view, cursor)
            cursor += 8
        key, cursor = _bytes(view, cursor, position)
        value, cursor = _bytes(view, cursor, position)
        if cursor != position:
            raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, "Record size does not match its fields")
        yield magic, attributes, timestamp, key, value
    if inner and position != end:
        raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, "Truncated message in a compressed wrapper")


def _bytes(view, position, end):
    if end - position < 4:
        raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, "Record size does not match its fields")
    (length,) = _SIZE.unpack_from(view, position)
    position += 4
    if length < 0:
        return None, position
    if length > end - position:
        raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, "Record size does not match its fields")
    return bytes(view[position:position + length]), position + length


def _lz4_v0(data: bytes) -> bytes:
    """An LZ4 frame written for magic v0: Kafka's KafkaLZ4BlockInputStream
    reads it without checking the header checksum (old writers computed it
    over the frame magic too); block and content checksums are skipped, as
    Kafka does."""
    if len(data) < 7 or data[:4] != _LZ4_MAGIC:
        raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, "Invalid LZ4 frame magic")
    flg, bd = data[4], data[5]
    block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x07)
    if flg >> 6 != 1 or block_max is None:
        raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, "Unsupported LZ4 frame descriptor")
    position = 6 + (8 if flg & 0x08 else 0) + 1  # content size, then the header checksum
    block_checksum = 4 if flg & 0x10 else 0
    cramjam = records_py._cramjam()
    out = bytearray()
    scratch = bytearray(block_max)
    while True:
        if len(data) - position < 4:
            raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, "Truncated LZ4 frame")
        (word,) = struct.unpack_from("<I", data, position)
        position += 4
        if word == 0:
            return bytes(out)
        length = word & 0x7FFFFFFF
        block = data[position:position + length]
        if len(block) != length:
            raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, "Truncated LZ4 block")
        position += length + block_checksum
        if word & 0x80000000:
            out += block
        else:
            try:
                written = cramjam.lz4.decompress_block_into(block, scratch, output_len=block_max)
            except Exception as exc:  # cramjam.DecompressionError
                raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, f"Invalid LZ4 block: {exc}") from exc
            out += scratch[:written]


def _decompress(codec: int, magic: int, data: bytes) -> bytes:
    if codec not in _CODECS:
        raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, f"Unknown compression codec {codec} for magic {magic}")
    if codec == records_py.COMPRESSION_LZ4 and magic == 0:
        return _lz4_v0(data)
    try:
        return records_py.decompress(codec, data)
    except records_py.CorruptRecordError as exc:
        raise LegacyRecordError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from exc
    except records_py.UnsupportedCompressionError as exc:
        raise LegacyRecordError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc)) from exc


def _timestamp(attributes: int, timestamp: int) -> int:
    # A producer may not ask for LogAppendTime (Kafka's validateTimestamp:
    # INVALID_TIMESTAMP unless a CreateTime topic gets a real timestamp).
    if attributes & _TIMESTAMP_TYPE_BIT and timestamp == -1:
        raise LegacyRecordError(ErrorCode.INVALID_TIMESTAMP,
                                "Producer should not set timestamp type to LogAppendTime.")
    return timestamp


def to_v2_batch(message_set) -> bytes:
    """One v2 batch (base offset 0, for the log to assign) holding every
    message of a v0/v1 MessageSet; b"" when it holds no complete message
    (Kafka appends nothing then). Raises LegacyRecordError."""
    messages = list(_messages(message_set, inner=False))
    if not messages:
        return b""
    first_magic = messages[0][0]
    if any(magic != first_magic for magic, *_ in messages):
        raise LegacyRecordError(ErrorCode.INVALID_RECORD, "Batch magic is not the same as the first batch's magic")
    codec = next((attributes & _CODEC_MASK for _, attributes, *_ in messages if attributes & _CODEC_MASK), 0)
    if codec == 0:
        records = [(key, value, [], _timestamp(attributes, timestamp))
                   for _magic, attributes, timestamp, key, value in messages]
        return records_py.build_batch(records)
    if len(messages) != 1:
        raise LegacyRecordError(ErrorCode.INVALID_RECORD, "Compressed outer record has more than one batch")
    magic, attributes, wrapper_timestamp, _key, value = messages[0]
    if value is None:
        raise LegacyRecordError(ErrorCode.INVALID_RECORD, "Found invalid compressed record set with null value")
    log_append_time = magic == 1 and bool(attributes & _TIMESTAMP_TYPE_BIT)
    records = []
    for inner_magic, inner_attributes, timestamp, key, inner_value in _messages(
            _decompress(codec, magic, value), inner=True):
        if inner_magic != magic:
            raise LegacyRecordError(ErrorCode.INVALID_RECORD,
                                    f"Record's magic {inner_magic} does not match outer magic {magic}")
        if inner_attributes & _CODEC_MASK:
            raise LegacyRecordError(ErrorCode.INVALID_RECORD,
                                    "Compressed outer record should not have an inner record with a "
                                    "compression attribute set")
        timestamp = (_timestamp(attributes, wrapper_timestamp) if log_append_time
                     else _timestamp(inner_attributes, timestamp))
        records.append((key, inner_value, [], timestamp))
    if not records:
        raise LegacyRecordError(ErrorCode.INVALID_RECORD, "Found invalid compressed record set with no inner records")
    try:
        return records_py.build_batch(records, compression=codec)
    except records_py.UnsupportedCompressionError as exc:
        raise LegacyRecordError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc)) from exc


# -- down-conversion (Fetch v0-v3) ---------------------------------------------------

_ATTRIBUTE_CONTROL = 0x20
_MESSAGE_HEADER = struct.Struct(">qiI")  # offset, size, crc
_MAGIC_ATTRIBUTES = struct.Struct(">bb")
_XXH_PRIMES = (2654435761, 2246822519, 3266489917, 668265263, 374761393)
_U32 = 0xFFFFFFFF


def _message(offset: int, magic: int, attributes: int, timestamp: int, key, value) -> bytes:
    body = bytearray(_MAGIC_ATTRIBUTES.pack(magic, attributes))
    if magic == 1:
        body += _I64.pack(timestamp)
    for data in (key, value):
        if data is None:
            body += _SIZE.pack(-1)
        else:
            body += _SIZE.pack(len(data))
            body += data
    return _MESSAGE_HEADER.pack(offset, len(body) + 4, zlib.crc32(body)) + body


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _U32


def _xxhash32_short(data: bytes) -> int:
    """XXH32 (seed 0) of fewer than 16 bytes: an LZ4 frame header's checksum."""
    p1, p2, p3, p4, p5 = _XXH_PRIMES
    h = (p5 + len(data)) & _U32
    position = 0
    while len(data) - position >= 4:
        (word,) = struct.unpack_from("<I", data, position)
        h = (_rotl((h + word * p3) & _U32, 17) * p4) & _U32
        position += 4
    for byte in data[position:]:
        h = (_rotl((h + byte * p5) & _U32, 11) * p1) & _U32
    h = ((h ^ (h >> 15)) * p2) & _U32
    h = ((h ^ (h >> 13)) * p3) & _U32
    return h ^ (h >> 16)


def _compress(codec: int, magic: int, data: bytes) -> bytes:
    out = records_py.compress(codec, data)
    if codec == records_py.COMPRESSION_LZ4 and magic == 0:
        # Kafka's KafkaLZ4BlockOutputStream for magic 0 hashes the frame
        # magic too (the old bug _lz4_v0 reads past); old clients expect it.
        checksum_at = 6 + (8 if out[4] & 0x08 else 0)
        out = bytearray(out)
        out[checksum_at] = (_xxhash32_short(bytes(out[:checksum_at])) >> 8) & 0xFF
        out = bytes(out)
    return out


def down_convert(batches, to_magic: int, fetch_offset: int, max_bytes: int) -> tuple[bytes, int]:
    """The v2 ``batches`` (whole batches, as a log read returns them) as a
    magic ``to_magic`` MessageSet (the module docstring), and the number of
    records converted (Kafka's FetchMessageConversionsPerSec counts them).
    Converts no more than ``max_bytes`` of output, except that the first
    message (a compressed batch's wrapper: all its records) always goes out
    (KIP-74; Kafka's lazy down-conversion sends at least one). Raises
    LegacyRecordError(UNSUPPORTED_COMPRESSION_TYPE) for a zstd batch."""
    view = memoryview(batches)
    out = bytearray()
    converted_records = 0
    position = 0
    while len(view) - position >= LOG_OVERHEAD + 49:
        header = read_header(view, position)
        end = position + LOG_OVERHEAD + header.batch_length
        if end > len(view):
            break
        batch, position = view[position:end], end
        if header.attributes & _ATTRIBUTE_CONTROL:
            continue
        codec = header.attributes & _CODEC_MASK
        if codec == records_py.COMPRESSION_ZSTD:
            raise LegacyRecordError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                    "Down-conversion of zstandard-compressed batches is not supported")
        log_append_time = to_magic == 1 and bool(header.attributes & _TIMESTAMP_TYPE_BIT)
        attributes = _TIMESTAMP_TYPE_BIT if log_append_time else 0
        records = records_py.decode_records(batch)
        if codec == records_py.COMPRESSION_NONE:
            converted = bytearray()
            for offset, timestamp, key, value, _headers in records:
                if offset < fetch_offset:
                    continue
                message = _message(offset, to_magic, attributes, timestamp, key, value)
                if (out or converted) and len(out) + len(converted) + len(message) > max_bytes:
                    return bytes(out + converted), converted_records
                converted += message
                converted_records += 1
        else:
            if not records:
                continue
            first = records[0][0] if to_magic == 1 else 0
            inner = b"".join(_message(offset - first, to_magic, attributes, timestamp, key, value)
                             for offset, timestamp, key, value, _headers in records)
            wrapper_timestamp = header.max_timestamp if log_append_time else max(r[1] for r in records)
            converted = _message(records[-1][0], to_magic, attributes | codec, wrapper_timestamp, None,
                                 _compress(codec, to_magic, inner))
            if out and len(out) + len(converted) > max_bytes:
                break
            converted_records += len(records)
        out += converted
        if len(out) >= max_bytes:
            break
    return bytes(out), converted_records


def region_bytes(parts) -> bytes:
    """The bytes of a log read's regions (FileRegions, or bytes), for the one
    reader that must look inside them: down-conversion. A segment retention
    renamed to .deleted meanwhile is read there; one replaced since the read
    (another inode) ends the bytes, as the processor's sendfile path does."""
    out = bytearray()
    for part in parts:
        if not hasattr(part, "inode"):
            out += part
            continue
        try:
            fd = os.open(part.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            try:
                fd = os.open(part.path + ".deleted", os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                break
        try:
            if os.fstat(fd).st_ino != part.inode:
                break
            out += os.pread(fd, part.length, part.position)
        finally:
            os.close(fd)
    return bytes(out)
