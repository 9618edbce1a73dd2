# cython: language_level=3, boundscheck=False, wraparound=False
"""The log cleaner's offset map, compiled: the same API and answers as
``offset_map_py`` (read it for the contract), in Kafka's SkimpyOffsetMap
layout: one table of 24-byte slots (the key's 16-byte MD5 digest, then its
offset), open addressing with linear probing from the digest's first 8 bytes.
A slot whose digest bytes are all zero is empty (an MD5 of zero bytes: one
chance in 2**128; such a key would be answered -1, so its records are kept).

The table starts at 1,024 slots (or fewer, when the memory holds fewer) and
doubles whenever it would pass three quarters full, up to the slots the
memory holds, then fills to ``capacity``: a small log's pass costs little
memory, and no pass more than ``memory_bytes``. About 27 bytes a key at the
default load factor of 0.9, against ~140 for a dict of digests.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcmp, memcpy

from kafkapy._core.offset_map_py import slots_and_capacity

cdef enum:
    _ENTRY = 24  # offset_map_py.ENTRY_BYTES
    _DIGEST = 16
    _FIRST_SLOTS = 1024


cdef inline bint _empty(const unsigned char *p) noexcept nogil:
    cdef int i
    for i in range(_DIGEST):
        if p[i]:
            return False
    return True


cdef Py_ssize_t _find(const unsigned char *table, Py_ssize_t slots, const unsigned char *digest) noexcept nogil:
    """The slot holding ``digest``, or the empty one where it would go; -1
    when every slot holds another digest."""
    cdef uint64_t h
    memcpy(&h, digest, 8)
    cdef Py_ssize_t i = <Py_ssize_t>(h % <uint64_t>slots)
    cdef Py_ssize_t n
    cdef const unsigned char *p
    for n in range(slots):
        p = table + i * _ENTRY
        if _empty(p) or memcmp(p, digest, _DIGEST) == 0:
            return i
        i += 1
        if i == slots:
            i = 0
    return -1


cdef class OffsetMap:
    cdef unsigned char *table
    cdef Py_ssize_t slots, max_slots, size
    cdef readonly Py_ssize_t capacity

    def __cinit__(self, memory_bytes, double load_factor):
        self.max_slots, self.capacity = slots_and_capacity(memory_bytes, load_factor)
        self.slots = min(_FIRST_SLOTS, self.max_slots)
        self.size = 0
        self.table = <unsigned char *>calloc(self.slots, _ENTRY)
        if self.table == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.table)

    def __len__(self):
        return self.size

    cdef void _grow(self) except *:
        cdef Py_ssize_t slots = min(self.slots * 2, self.max_slots)
        cdef unsigned char *table = <unsigned char *>calloc(slots, _ENTRY)
        cdef Py_ssize_t i, j
        if table == NULL:
            raise MemoryError()
        for i in range(self.slots):
            if not _empty(self.table + i * _ENTRY):
                j = _find(table, slots, self.table + i * _ENTRY)
                memcpy(table + j * _ENTRY, self.table + i * _ENTRY, _ENTRY)
        free(self.table)
        self.table = table
        self.slots = slots

    def put(self, bytes digest not None, int64_t offset):
        if PyBytes_GET_SIZE(digest) != _DIGEST:
            raise ValueError(f"a digest is 16 bytes, not {len(digest)}")
        cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(digest)
        cdef Py_ssize_t i = _find(self.table, self.slots, d)
        if i < 0 or _empty(self.table + i * _ENTRY):
            if self.size >= self.capacity:
                raise OverflowError(f"the offset map is full ({self.capacity} keys)")
            if self.slots < self.max_slots and (self.size + 1) * 4 > self.slots * 3:
                self._grow()
                i = _find(self.table, self.slots, d)
            memcpy(self.table + i * _ENTRY, d, _DIGEST)
            self.size += 1
        memcpy(self.table + i * _ENTRY + _DIGEST, &offset, 8)

    def get(self, bytes digest not None):
        if PyBytes_GET_SIZE(digest) != _DIGEST:
            raise ValueError(f"a digest is 16 bytes, not {len(digest)}")
        cdef Py_ssize_t i = _find(self.table, self.slots, <const unsigned char *>PyBytes_AS_STRING(digest))
        cdef int64_t offset
        if i < 0 or _empty(self.table + i * _ENTRY):
            return -1
        memcpy(&offset, self.table + i * _ENTRY + _DIGEST, 8)
        return offset
