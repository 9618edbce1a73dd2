"""Bounds-checked Kafka message codec driven by kio's schema dataclasses.

kio (``kio.schema.<api>.v<N>``) is used only as the *schema*: one frozen
dataclass per message and version, whose fields carry
``metadata={"kafka_type": ..., "tag": ...}`` and whose class says
``__flexible__``.  From ``dataclasses.fields(cls)`` we compile, once per
class, a list of read steps and a list of write steps (cached in
``readers._READ_PLANS`` / ``writers._WRITE_PLANS``).  No code is generated at
run time.

This module is the codec's front: its docstring is the contract, and it
re-exports the names other code imports (``__all__``). The codec itself is
three modules: ``fields`` (what both sides share: field specs from kio's
dataclasses, the primitives' struct codes, varints, ``DecodeError``),
``readers`` (readers, read plans, ``decode``) and ``writers`` (writers, write
plans, ``Parts``, ``RecordsRegions``, ``encode``); ``readers`` imports
``writers`` (an absent tagged field's default is decoded from its encoding),
never the other way round.

Why not kio's own codec: its native reader trusts array counts from the wire
(a 9-byte request whose compact-array count is near 2**32 makes it allocate
tens of GiB and abort the process), raises ``KeyError`` on unknown tagged
fields (KIP-482 says skip them), and its writer is several times slower than
this one (see ``tests/unit/protocol/bench_codec.py``).

Value domain (what ``decode`` returns and what ``encode`` expects):

* all integers, ``error_code``, ``timedelta_i32/_i64`` and ``datetime_i64``
  are plain ``int`` (durations and timestamps in milliseconds; a null
  ``datetime_i64`` is -1, as on the wire);
* ``string`` -> ``str`` (strict UTF-8), ``bytes`` -> ``bytes``;
* ``records`` -> a ``memoryview`` slice of the input buffer (no copy) or None;
* ``uuid`` -> ``uuid.UUID`` (the zero UUID is ``ZERO_UUID``, never None);
* ``bool`` -> ``bool``; arrays -> ``tuple``; nested structs -> kio instances.

``encode`` also accepts kio's own value types (``timedelta``, ``datetime``,
``ErrorCode``, None for a uuid or a nullable timestamp), so entities built
with kio's defaults still encode, and any object with the right attribute
names may stand in for a kio instance.

Decoding never raises anything but ``DecodeError``: every length and count
read from the wire is checked against the bytes remaining before anything is
allocated, and recursion depth is bounded by the schema (kio's schemas have
no recursive structs).

Thread-safety: the plan caches are filled lazily and idempotently (building
the same plan twice is harmless), so concurrent use is safe; ``Parts`` is
owned by the single caller that builds one response.
"""
from __future__ import annotations

from kafkapy.protocol.fields import ZERO_UUID, DecodeError, read_unsigned_varint, unsigned_varint_bytes
from kafkapy.protocol.readers import decode
from kafkapy.protocol.writers import Parts, RecordsRegions, encode, encode_to_bytes

__all__ = (
    "DecodeError",
    "Parts",
    "RecordsRegions",
    "ZERO_UUID",
    "decode",
    "encode",
    "encode_to_bytes",
    "read_unsigned_varint",
    "unsigned_varint_bytes",
)
