"""The codec under Kafka's coordinator records: the version-prefixed keys and
values of ``__consumer_offsets`` (``kafkapy.coordinator.records``) and
``__transaction_state`` (``transaction_log``), as Kafka's generated classes
write them with ``MessageUtil.toVersionPrefixedBytes``; and which partition of
such a topic a group or transactional id uses (Java's ``String.hashCode``).

Sans-IO and stateless: ``_Writer`` appends to its own buffer, ``_Reader``
reads a caller's buffer and raises ``RecordFormatError`` on bytes that do not
decode.
"""

from __future__ import annotations

import functools
import struct
import uuid

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value in __consumer_offsets does not decode."""


# ---------------------------------------------------------------- partitioning


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


# The transaction coordinator asks for the partition of the same transactional
# id on every InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
# (and the group coordinator for a group id on every offset commit); in Python
# the hash costs 2.4 us for a 5-character id and 7 us for 24 characters (py-spy:
# ~3 % of the coordinator process per 1-record transaction), a hit 0.2 us.  Java caches
# String.hashCode in the string; this cache is bounded instead: 8192 ids of
# ~50 bytes are well under a megabyte per process, and a producer fleet larger
# than that only pays the hash again, as before.  The partition count is part
# of the key, so a config change cannot return a stale partition.
@functools.lru_cache(maxsize=8192)
def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``.

    ``Utils.abs`` maps Integer.MIN_VALUE to 0 (``n & 0x7fffffff``), unlike
    Math.abs which would leave it negative.  Cached (bounded) per
    ``(id, num_partitions)``: a pure function of its arguments.
    """
    return (java_string_hashcode(group_id) & 0x7FFFFFFF) % num_partitions


# ---------------------------------------------------------------- primitives


class _Writer:
    __slots__ = ("out", "flexible")

    def __init__(self, flexible=False):
        self.out = bytearray()
        self.flexible = flexible

    def i16(self, v):
        self.out += _I16.pack(v)

    def i32(self, v):
        self.out += _I32.pack(v)

    def i64(self, v):
        self.out += _I64.pack(v)

    def i8(self, v):
        self.out += _I8.pack(v)

    def uuid(self, v):
        self.out += v.bytes

    def _uvarint(self, v):
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def string(self, s):
        if s is None:
            if self.flexible:
                self._uvarint(0)
            else:
                self.i16(-1)
            return
        data = s.encode("utf-8")
        if self.flexible:
            self._uvarint(len(data) + 1)
        else:
            self.i16(len(data))
        self.out += data

    def bytes_(self, b):
        if self.flexible:
            self._uvarint(len(b) + 1)
        else:
            self.i32(len(b))
        self.out += b

    def array_len(self, n):
        if self.flexible:
            self._uvarint(n + 1)
        else:
            self.i32(n)

    def tags(self):
        if self.flexible:
            self._uvarint(0)


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf, pos=0, flexible=False):
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _need(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError(f"need {n} bytes at {self.pos} of {len(self.buf)}")

    def i16(self):
        self._need(2)
        v = _I16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def i32(self):
        self._need(4)
        v = _I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def i64(self):
        self._need(8)
        v = _I64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def i8(self):
        self._need(1)
        v = _I8.unpack_from(self.buf, self.pos)[0]
        self.pos += 1
        return v

    def uuid(self):
        self._need(16)
        v = uuid.UUID(bytes=bytes(self.buf[self.pos:self.pos + 16]))
        self.pos += 16
        return v

    def _uvarint(self):
        result = shift = 0
        while True:
            self._need(1)
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def string(self, nullable=False):
        n = self._uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            if nullable:
                return None
            raise RecordFormatError("null string where one is required")
        self._need(n)
        try:
            s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(str(exc)) from None
        self.pos += n
        return s

    def bytes_(self):
        n = self._uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return b""
        self._need(n)
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def array_len(self):
        n = self._uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return 0
        # An entry takes at least one byte: a bogus count cannot allocate.
        self._need(n)
        return n

    def skip_tags(self):
        if not self.flexible:
            return
        for _ in range(self._uvarint()):
            self._uvarint()
            size = self._uvarint()
            self._need(size)
            self.pos += size
