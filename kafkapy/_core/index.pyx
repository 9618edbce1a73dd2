# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled ``index``: search in an index buffer (twin: ``index_py``).

Same API and behaviour as ``kafkapy._core.index_py``, whose docstring explains
the entry layouts and the 8192-byte warm section.  The buffer extent is
checked once up front; every slot read is inside it.
"""

from libc.stdint cimport int64_t, uint32_t, uint64_t

WARM_SECTION_BYTES = 8192

cdef enum:
    C_WARM_SECTION_BYTES = 8192


cdef inline uint32_t _u32(const unsigned char* p) noexcept nogil:
    return ((<uint32_t>p[0]) << 24) | ((<uint32_t>p[1]) << 16) | ((<uint32_t>p[2]) << 8) | (<uint32_t>p[3])


cdef inline int64_t _key(const unsigned char* base, Py_ssize_t slot, Py_ssize_t entry_size) noexcept nogil:
    cdef const unsigned char* p = base + slot * entry_size
    if entry_size == 8:
        return <int64_t><int>_u32(p)
    return <int64_t>(((<uint64_t>_u32(p)) << 32) | (<uint64_t>_u32(p + 4)))


def index_lookup(buf, Py_ssize_t entries, Py_ssize_t entry_size, int64_t target):
    """Largest slot in ``[0, entries)`` whose key is ``<= target``, else -1."""
    cdef const unsigned char[::1] view = buf
    cdef const unsigned char* base
    cdef Py_ssize_t size_of_buf = view.shape[0]
    cdef Py_ssize_t first_warm, low, high, middle
    if entry_size != 8 and entry_size != 12:
        raise ValueError(f"entry_size must be 8 or 12, not {entry_size}")
    if entries < 0 or entries > size_of_buf // entry_size:
        raise ValueError(f"{entries} entries of {entry_size} bytes do not fit {size_of_buf} bytes")
    if entries == 0:
        return -1
    base = &view[0]
    first_warm = entries - 1 - C_WARM_SECTION_BYTES // entry_size
    if first_warm < 0:
        first_warm = 0
    # "<=" and no early exit on equality: see index_py.
    if _key(base, first_warm, entry_size) <= target:
        low = first_warm
        high = entries - 1
    elif _key(base, 0, entry_size) > target:
        low = -1
        high = -1
    else:
        low = 0
        high = first_warm - 1
    while low < high:
        middle = (low + high + 1) >> 1
        if _key(base, middle, entry_size) <= target:
            low = middle
        else:
            high = middle - 1
    return low
