"""Fuzzing the request decoder: on any input it must either return or raise
``DecodeError`` -- never another exception, never a large allocation, never a
slow loop -- because request bytes come straight from the network.

Default run: a few seconds in total.  ``KAFKAPY_FUZZ_EXAMPLES`` scales the
number of cases per request class (default 20), e.g.
``KAFKAPY_FUZZ_EXAMPLES=2000`` for a soak.
"""

from __future__ import annotations

import os
import random
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.protocol_schema import APIS, all_classes, class_id, entities, random_entity, top_class, versions
from kafkapy.protocol.codec import DecodeError, decode, encode_to_bytes

EXAMPLES = int(os.environ.get("KAFKAPY_FUZZ_EXAMPLES", "20"))
REQUESTS = all_classes("request")

# A decode of a few hundred bytes takes tens of microseconds of CPU; 50 ms
# leaves room for a loaded 2-core CI machine and tracemalloc's overhead while
# still catching any loop whose length comes from a count on the wire (2**31
# iterations would take minutes) rather than from the bytes present.
MAX_SECONDS_PER_DECODE = 0.05
# Peak allocation allowed while decoding one API's crafted inputs (all of
# them under 1 KiB): a count trusted from the wire would need gigabytes.
MAX_PEAK_BYTES = 4 << 20

HUGE_INT32 = (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\xff\xff\xff")
HUGE_UVARINT = (b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x0f", b"\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x80")


def _timed_decode(cls, data) -> float:
    start = time.process_time()
    try:
        decode(cls, data)
    except DecodeError:
        pass
    return time.process_time() - start


def must_not_crash(cls, data) -> None:
    elapsed = _timed_decode(cls, data)
    if elapsed >= MAX_SECONDS_PER_DECODE:
        # CPU time ignores other processes, but a GC pass or a page-fault
        # storm can still land in one call; slowness caused by the input
        # repeats, a hiccup does not.
        elapsed = min(elapsed, _timed_decode(cls, data))
    assert elapsed < MAX_SECONDS_PER_DECODE, f"{class_id(cls)} took {elapsed:.3f}s on {bytes(data)[:64]!r}"


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(4)
        pos = rng.randint(0, len(b))
        if op == 0 and b:  # flip bits of one byte
            b[min(pos, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:  # truncate
            del b[pos:]
        elif op == 2:  # insert random bytes
            b[pos:pos] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4)))
        else:  # overwrite with an extreme length/count
            b[pos : pos + 4] = rng.choice(HUGE_INT32 + HUGE_UVARINT)
    return bytes(b)


def requests_of(api: str) -> list:
    return [top_class(api, v, "request") for v in versions(api)]


@pytest.mark.parametrize("api", APIS)
def test_random_and_mutated_bytes(api):
    for cls in requests_of(api):
        fuzz_random_and_mutated(cls)


def fuzz_random_and_mutated(cls):
    rng = random.Random(f"{class_id(cls)}")
    for _ in range(EXAMPLES):
        must_not_crash(cls, bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))))
    for _ in range(EXAMPLES):
        valid = encode_to_bytes(random_entity(cls, rng, min_items=1))
        must_not_crash(cls, valid)
        for _ in range(4):
            must_not_crash(cls, mutate(valid, rng))


@pytest.mark.parametrize("api", APIS)
def test_huge_counts_at_every_offset(api):
    tracemalloc.start()
    try:
        for cls in requests_of(api):
            fuzz_huge_counts(cls)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_PEAK_BYTES


def fuzz_huge_counts(cls):
    """Overwrite and insert extreme int32/uvarint values at every offset of a
    valid encoding whose arrays are non-empty, so every length and count
    field on the path is hit."""
    rng = random.Random(f"huge-{class_id(cls)}")
    # One element per array keeps the encoding short (the loop below is
    # quadratic in its length) while still reaching every nested count.
    valid = encode_to_bytes(random_entity(cls, rng, min_items=1, max_items=1))
    if EXAMPLES > 20:
        overwrite, insert = HUGE_INT32 + HUGE_UVARINT, HUGE_INT32 + HUGE_UVARINT
    else:
        # Default run: the shapes that matter -- int32 max / min as legacy
        # lengths and counts, 0xFFFFFFFF and an over-long varint as compact
        # ones -- keep this test to about a second for all classes.
        overwrite = (b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff\x0f")
        insert = (b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80")
    for pos in range(len(valid) + 1):
        for pattern in overwrite:
            must_not_crash(cls, valid[:pos] + pattern + valid[pos + len(pattern) :])
        for pattern in insert:
            must_not_crash(cls, valid[:pos] + pattern + valid[pos:])


def test_tiny_frames_with_huge_counts():
    # Every request class, bodies of 1..9 bytes made of huge counts: the
    # shape of the kio crash (a 9-byte request that allocates tens of GiB).
    for cls in REQUESTS:
        for pattern in HUGE_INT32 + HUGE_UVARINT:
            for pad in range(5):
                must_not_crash(cls, pattern + b"\x00" * pad)
                must_not_crash(cls, b"\x00" * pad + pattern)


@settings(
    max_examples=max(EXAMPLES * 5, 50),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(st.data())
def test_hypothesis_mutations(data):
    cls = data.draw(st.sampled_from(REQUESTS), label="cls")
    valid = encode_to_bytes(data.draw(entities(cls), label="entity"))
    cut = data.draw(st.integers(0, len(valid)), label="cut")
    junk = data.draw(st.binary(max_size=8), label="junk")
    keep = data.draw(st.booleans(), label="keep_tail")
    must_not_crash(cls, valid[:cut] + junk + (valid[cut:] if keep else b""))


@settings(max_examples=max(EXAMPLES * 5, 50), deadline=None, database=None)
@given(st.sampled_from(REQUESTS), st.binary(max_size=200))
def test_hypothesis_random_bytes(cls, data):
    must_not_crash(cls, data)
