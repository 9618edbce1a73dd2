# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled ``request_read``: a request's header and a Produce body, read in
one pass (twin: ``request_read_py``, whose docstring is the contract).

Every index into the buffer is range-checked by hand before the raw pointer
is read, which is why Cython's own bounds checks are off. The buffer is
taken with ``PyObject_GetBuffer(PyBUF_SIMPLE)`` (as ``batch`` does: a typed
memoryview costs ~0.1 us to acquire) and released before returning; the
records handed out are slices of the caller's object, which hold their own
export. Functions hold no state.
"""

cimport cython

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t


cdef extern from "Python.h":
    ctypedef struct PyTypeObject:
        pass
    object PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t nitems)
    bint PyType_Check(object o)
    unsigned long PyType_GetFlags(PyTypeObject* type)
    unsigned long Py_TPFLAGS_TUPLE_SUBCLASS


cdef extern from *:
    """
    /* object.__new__(cls) for a class whose __new__ is object's (kio's
       entities): the same checks and allocation, without the call. */
    static PyObject *kafkapy_bare_instance(PyObject *cls, PyObject *no_args) {
        return PyBaseObject_Type.tp_new((PyTypeObject *)cls, no_args, NULL);
    }
    /* descriptor.__set__(obj, value), as the method-wrapper calls it. */
    static int kafkapy_has_descr_set(PyObject *descriptor) {
        return Py_TYPE(descriptor)->tp_descr_set != NULL;
    }
    static int kafkapy_descr_set(PyObject *descriptor, PyObject *obj, PyObject *value) {
        return Py_TYPE(descriptor)->tp_descr_set(descriptor, obj, value);
    }
    """
    object kafkapy_bare_instance(object cls, object no_args)
    bint kafkapy_has_descr_set(object descriptor)
    int kafkapy_descr_set(object descriptor, object obj, object value) except -1


cdef enum:
    C_HEADER_SIZE = 10  # api_key, api_version, correlation_id, client_id length
    C_HEADER_V0_SIZE = 8
    C_CONTROLLED_SHUTDOWN_KEY = 7
    C_UNUSUAL = -2  # a truncated count or length (see _length): the codec's

cdef tuple _NO_ARGS = ()


cdef inline int32_t _i32(const unsigned char* p) noexcept nogil:
    return <int32_t>(((<uint32_t>p[0]) << 24) | ((<uint32_t>p[1]) << 16) | ((<uint32_t>p[2]) << 8) | (<uint32_t>p[3]))


cdef inline int16_t _i16(const unsigned char* p) noexcept nogil:
    return <int16_t>(((<uint16_t>p[0]) << 8) | (<uint16_t>p[1]))


cdef inline void _set(object t, Py_ssize_t i, object value) noexcept:
    # PyTuple_SET_ITEM steals a reference; Cython does not add one for us.
    Py_INCREF(value)
    PyTuple_SET_ITEM(t, i, value)


def read_request_header(buf, info_cls, error_cls):
    """See request_read_py.read_request_header."""
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef int16_t api_key, api_version, n
    cdef int32_t correlation_id
    cdef Py_ssize_t end
    cdef object client_id = None
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        if view.len < C_HEADER_SIZE:
            raise error_cls(f"request of {view.len} bytes is shorter than a header")
        api_key, api_version, correlation_id, n = _i16(p), _i16(p + 2), _i32(p + 4), _i16(p + 8)
        if api_key == C_CONTROLLED_SHUTDOWN_KEY and api_version == 0:
            return _header(info_cls, api_key, api_version, correlation_id, None, C_HEADER_V0_SIZE)
        end = C_HEADER_SIZE
        if n != -1:
            if n < 0:
                raise error_cls(f"invalid client_id length {n}")
            end += n
            if end > view.len:
                raise error_cls(f"client_id length {n} exceeds remaining bytes")
            try:
                client_id = PyUnicode_DecodeUTF8(<const char*>p + C_HEADER_SIZE, n, NULL)
            except UnicodeDecodeError as e:
                raise error_cls(f"client_id is not UTF-8: {e}") from None
        return _header(info_cls, api_key, api_version, correlation_id, client_id, end)
    finally:
        PyBuffer_Release(&view)


cdef object _header(object info_cls, int api_key, int api_version, int32_t correlation_id, object client_id,
                    Py_ssize_t end):
    # tuple.__new__(info_cls, (...)) without the intermediate tuple, as
    # batch._header_at does.
    if not PyType_Check(info_cls) or not PyType_GetFlags(<PyTypeObject*>info_cls) & Py_TPFLAGS_TUPLE_SUBCLASS:
        raise TypeError(f"{info_cls!r} is not a tuple class")
    cdef object header = PyType_GenericAlloc(<PyTypeObject*>info_cls, 5)
    _set(header, 0, api_key)
    _set(header, 1, api_version)
    _set(header, 2, correlation_id)
    _set(header, 3, client_id)
    _set(header, 4, end)
    return header


cdef inline int64_t _uvarint(const unsigned char* p, Py_ssize_t end, Py_ssize_t* off) noexcept nogil:
    """An unsigned varint of at most 5 bytes (35 bits, as the codec reads
    it) at ``*off``; -1 when truncated or longer."""
    cdef Py_ssize_t at = off[0]
    cdef int64_t value = 0
    cdef int i
    cdef unsigned char b
    for i in range(5):
        if at >= end:
            return -1
        b = p[at]
        at += 1
        value |= (<int64_t>(b & 0x7F)) << (7 * i)
        if b < 0x80:
            off[0] = at
            return value
    return -1


cdef inline int64_t _length(const unsigned char* p, Py_ssize_t end, Py_ssize_t* off, bint flexible,
                            bint string) noexcept nogil:
    """A count or length: compact (varint less one), or int16 (``string``) /
    int32; -1: null; C_UNUSUAL when truncated (every caller refuses any
    negative but -1)."""
    cdef Py_ssize_t at = off[0]
    cdef int64_t value
    if flexible:
        value = _uvarint(p, end, off)
        return C_UNUSUAL if value < 0 else value - 1
    if string:
        if end - at < 2:
            return C_UNUSUAL
        off[0] = at + 2
        return _i16(p + at)
    if end - at < 4:
        return C_UNUSUAL
    off[0] = at + 4
    return _i32(p + at)


cdef inline bint _no_tags(const unsigned char* p, Py_ssize_t end, Py_ssize_t* off) noexcept nogil:
    """An empty tag buffer at ``*off`` (stepped over); False for tags or the end."""
    if off[0] >= end or p[off[0]] != 0:
        return False
    off[0] += 1
    return True


_METHOD_WRAPPER = type(object().__str__)


cdef object _descriptor_of(object setter):
    """The data descriptor whose ``__set__`` ``setter`` is (a slot's
    member descriptor: what the codec's setters are), or None. Setting
    through its ``tp_descr_set`` is what calling ``setter`` does, without
    the call (~60 ns: 8 setters in a one-partition request, 34 in a
    16-partition one)."""
    if type(setter) is _METHOD_WRAPPER and setter.__name__ == "__set__":
        descriptor = setter.__self__
        if kafkapy_has_descr_set(descriptor):
            return descriptor
    return None


@cython.final
cdef class _Setter:
    cdef object setter
    cdef object descriptor

    def __cinit__(self, setter):
        if not callable(setter):
            raise TypeError(f"{setter!r} is not a setter")
        self.setter = setter
        self.descriptor = _descriptor_of(setter)

    cdef inline int set(self, object obj, object value) except -1:
        if self.descriptor is not None:
            return kafkapy_descr_set(self.descriptor, obj, value)
        self.setter(obj, value)
        return 0


@cython.final
cdef class ProduceShape:
    """One ProduceRequest version's entity classes and setters (see
    request_read_py.produce_shape); immutable once made."""
    cdef object cls, topic_cls, part_cls
    cdef bint flexible
    cdef _Setter transactional_id, acks, timeout, topic_data, name, partition_data, index, records


def produce_shape(cls, flexible, setters, topic_cls, topic_setters, part_cls, part_setters):
    """See request_read_py.produce_shape."""
    if (len(setters), len(topic_setters), len(part_setters)) != (4, 2, 2):
        raise TypeError(f"{cls.__qualname__}: not the Produce shape this reader knows")
    if not (PyType_Check(cls) and PyType_Check(topic_cls) and PyType_Check(part_cls)):
        raise TypeError("produce_shape: the entity classes must be classes")
    cdef ProduceShape shape = ProduceShape.__new__(ProduceShape)
    shape.cls, shape.topic_cls, shape.part_cls = cls, topic_cls, part_cls
    shape.flexible = bool(flexible)
    shape.transactional_id, shape.acks, shape.timeout, shape.topic_data = [_Setter(s) for s in setters]
    shape.name, shape.partition_data = [_Setter(s) for s in topic_setters]
    shape.index, shape.records = [_Setter(s) for s in part_setters]
    return shape


def read_produce_request(buf, Py_ssize_t off, ProduceShape shape not None):
    """See request_read_py.read_produce_request."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if off < 0 or off > view.len:
            return None
        return _read_produce(buf, <const unsigned char*>view.buf, view.len, off, shape)
    finally:
        PyBuffer_Release(&view)


cdef object _string(const unsigned char* p, Py_ssize_t n):
    """UTF-8 text, or None when it is not UTF-8 (the codec's to refuse)."""
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    except UnicodeDecodeError:
        return None


cdef object _read_produce(object buf, const unsigned char* p, Py_ssize_t end, Py_ssize_t off,
                          ProduceShape shape):
    cdef int64_t n, count, pcount, t, i
    cdef int16_t acks
    cdef int32_t timeout, index
    cdef object transactional_id = None, name, records, part, topic, request
    cdef tuple topics, partitions
    cdef bint flexible = shape.flexible
    # The fewest bytes a topic and a partition take (an empty name and no
    # partitions; an index and null records), so that no tuple is allocated
    # for more entries than the body can hold.
    cdef Py_ssize_t min_topic = 3 if flexible else 6
    cdef Py_ssize_t min_part = 6 if flexible else 8
    n = _length(p, end, &off, flexible, True)
    if n >= 0:
        if n > end - off:
            return None
        transactional_id = _string(p + off, n)
        if transactional_id is None:
            return None
        off += n
    elif n != -1:
        return None
    if end - off < 6:
        return None
    acks = _i16(p + off)
    timeout = _i32(p + off + 2)
    off += 6
    count = _length(p, end, &off, flexible, False)
    if count < 0 or count > (end - off) // min_topic:
        return None
    topics = PyTuple_New(count)
    for t in range(count):
        n = _length(p, end, &off, flexible, True)
        if n < 0 or n > end - off:
            return None
        name = _string(p + off, n)
        if name is None:
            return None
        off += n
        pcount = _length(p, end, &off, flexible, False)
        if pcount < 0 or pcount > (end - off) // min_part:
            return None
        partitions = PyTuple_New(pcount)
        for i in range(pcount):
            if end - off < 4:
                return None
            index = _i32(p + off)
            off += 4
            n = _length(p, end, &off, flexible, False)
            if n >= 0:
                if n > end - off:
                    return None
                records = buf[off:off + n]
                off += n
            elif n == -1:
                records = None
            else:
                return None
            if flexible and not _no_tags(p, end, &off):
                return None  # a tagged field: the codec's
            part = kafkapy_bare_instance(shape.part_cls, _NO_ARGS)
            shape.index.set(part, index)
            shape.records.set(part, records)
            _set(partitions, i, part)
        if flexible and not _no_tags(p, end, &off):
            return None
        topic = kafkapy_bare_instance(shape.topic_cls, _NO_ARGS)
        shape.name.set(topic, name)
        shape.partition_data.set(topic, partitions)
        _set(topics, t, topic)
    if flexible and (off >= end or p[off] != 0):
        return None
    request = kafkapy_bare_instance(shape.cls, _NO_ARGS)
    shape.transactional_id.set(request, transactional_id)
    shape.acks.set(request, acks)
    shape.timeout.set(request, timeout)
    shape.topic_data.set(request, topics)
    return request
