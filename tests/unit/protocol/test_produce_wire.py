"""The one-pass Produce request reader (protocol.produce_wire) against the
generic codec: for every version it reads, the same entity from the same
bytes (null records and transactional ids, several topics and partitions,
non-ASCII names); on truncated and mutated bodies it gives None (the codec
then reads them) or exactly the codec's entity, never another one."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import produce_wire
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import DecodeError, Parts, decode, encode
from kafkapy.protocol.entities import construct

PRODUCE = 0
VERSIONS = range(produce_wire.FIRST_VERSION, API_TABLE[PRODUCE].max_version + 1)


def _body(version: int, values: dict) -> bytes:
    out = Parts()
    encode(construct(API_TABLE[PRODUCE].request_class(version), values), out)
    return b"".join(bytes(part) for part in out.parts())


def _values(seed: int) -> dict:
    rng = random.Random(seed)
    topics = []
    for t in range(rng.randrange(0, 4)):
        partitions = [{"index": rng.randrange(-2, 50),
                       "records": None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 300))}
                      for _ in range(rng.randrange(0, 4))]
        topics.append({"name": rng.choice(["t", "é" * 40, f"topic-{t}", ""]), "partition_data": partitions})
    return {"transactional_id": rng.choice([None, "", "txn-é"]), "acks": rng.choice([-1, 0, 1, 7]),
            "timeout": rng.randrange(-1, 1 << 31), "topic_data": topics}


def _both(version: int, buf: bytes):
    cls = API_TABLE[PRODUCE].request_class(version)
    flexible = API_TABLE[PRODUCE].is_flexible(version)
    fast = produce_wire.decode_request(cls, memoryview(buf), 0, flexible)
    try:
        slow, _ = decode(cls, memoryview(buf), 0)
    except DecodeError:
        slow = DecodeError
    return fast, slow


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("seed", range(12))
def test_the_entity_is_the_codecs(version, seed):
    fast, slow = _both(version, _body(version, _values(seed)))
    assert fast is not None and fast == slow
    assert type(fast) is type(slow)


@pytest.mark.parametrize("version", VERSIONS)
def test_records_are_a_view_of_the_body(version):
    buf = bytearray(_body(version, {"transactional_id": None, "acks": 1, "timeout": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}]}))
    cls = API_TABLE[PRODUCE].request_class(version)
    request = produce_wire.decode_request(cls, memoryview(buf), 0, API_TABLE[PRODUCE].is_flexible(version))
    records = request.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is buf and bytes(records) == b"abc"


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), seed=st.integers(0, 50), cut=st.integers(0, 2000),
       flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=3))
def test_malformed_bodies_are_none_or_the_codecs(version, seed, cut, flips):
    buf = bytearray(_body(version, _values(seed)))
    for at, value in flips:
        if buf:
            buf[at % len(buf)] = value
    buf = bytes(buf[:cut])
    fast, slow = _both(version, buf)
    assert fast is None or fast == slow
