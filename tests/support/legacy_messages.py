"""Message format v0/v1 MessageSets built by hand for tests (Produce v0-v2).

Kafka's LegacyRecord layout: offset i64, size i32, crc u32 (CRC-32 of the
rest), magic i8, attributes i8 (codec bits 0-2, timestamp type bit 3),
[timestamp i64 for v1], key bytes, value bytes (i32 length, -1 null). A
compressed message is a wrapper whose value is a compressed inner MessageSet.
"""

import gzip
import struct
import zlib

import cramjam

from kafkapy._core import records_py

NONE, GZIP, SNAPPY, LZ4 = 0, 1, 2, 3


def message(magic, key, value, timestamp=-1, attributes=0, offset=0, crc=None):
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body) if crc is None else crc
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def message_set(magic, pairs, timestamps=None):
    """Inner offsets as the clients write them (0..n-1; the broker ignores them)."""
    timestamps = timestamps or [-1] * len(pairs)
    return b"".join(message(magic, k, v, t, offset=i) for i, ((k, v), t) in enumerate(zip(pairs, timestamps)))


def compress_legacy(codec, magic, data):
    if codec == GZIP:
        return gzip.compress(data)
    if codec == SNAPPY:
        return records_py.compress(SNAPPY, data)  # xerial framing, as the Java client wrote
    compressed = bytes(cramjam.lz4.compress(data))
    if magic == 0:
        # Kafka's v0 LZ4 bug: the header checksum byte was computed over the
        # frame magic too, i.e. wrong; the broker must not check it.
        hc = 6 + (8 if compressed[4] & 0x08 else 0)
        compressed = compressed[:hc] + bytes([compressed[hc] ^ 0x5A]) + compressed[hc + 1:]
    return compressed


def wrapper(codec, magic, inner, timestamp=-1, timestamp_type_bit=0):
    return message(magic, None, compress_legacy(codec, magic, inner), timestamp,
                   attributes=codec | timestamp_type_bit)
