"""What the one-pass readers and writers share (``produce_wire`` for
Produce, ``fetch_request_wire`` for Fetch): reading a count or a string's
length in either encoding (Fetch's reader; Produce's request is read by
``_core.request_read``), the codec's entity class of a nested field, and
putting a one-pass writer in front of the codec's own for one response
version.

A one-pass writer writes what this broker's answers usually hold and raises
``Unusual`` for anything else; the writer installed here then undoes what it
wrote and leaves the whole response to the codec's writer, from the same
start.
"""

from __future__ import annotations

import struct

from kafkapy.protocol import writers
from kafkapy.protocol.api import schema_version
from kafkapy.protocol.codec import read_unsigned_varint, unsigned_varint_bytes
from kafkapy.protocol.entities import _plan  # (field name, (kind, nested class), ...) per field

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")


class Unusual(Exception):
    """A response a one-pass writer leaves to the codec's."""


def element_class(cls, field: str):
    """The codec's entity class of ``cls``'s array field ``field``."""
    return next(n[1] for name, n, _ in _plan(cls) if name == field)


def read_length(buf, off: int, flexible: bool) -> tuple[int, int]:
    """An array's count or a byte string's length: compact (unsigned varint,
    less one) or int32; -1: null."""
    if flexible:
        n, off = read_unsigned_varint(buf, off)
        return n - 1, off
    return I32.unpack_from(buf, off)[0], off + 4


def read_string_length(buf, off: int, flexible: bool) -> tuple[int, int]:
    """A string's length: compact (unsigned varint, less one) or int16; -1: null."""
    if flexible:
        n, off = read_unsigned_varint(buf, off)
        return n - 1, off
    return I16.unpack_from(buf, off)[0], off + 2


def read_name(buf, off: int, flexible: bool, end: int) -> tuple[str | None, int]:
    """A non-null string, or (None, off) for anything else."""
    n, off = read_string_length(buf, off, flexible)
    if n < 0 or off + n > end:
        return None, off
    return str(buf[off:off + n], "utf-8"), off + n


def count_writer(flexible: bool):
    """``count(n)``: an array's count in this version's encoding."""
    pack_i32 = I32.pack
    if flexible:
        return lambda n: unsigned_varint_bytes(n + 1)
    return pack_i32


def install(cls, first_version: int, make) -> None:
    """Put ``make(cls, codec_writer)``, a one-pass writer, in front of the
    codec's writer for ``cls`` (one response version) from ``first_version``
    on; once per class. Called by a handler the first time it answers in a
    version: importing every version's classes up front cost ~0.3 s at each
    broker start."""
    if schema_version(cls) < first_version:
        return
    plan = writers._write_plan(cls)
    if not getattr(plan.writer, "one_pass", False):
        plan.writer = make(cls, plan.writer)
        plan.writer.one_pass = True
