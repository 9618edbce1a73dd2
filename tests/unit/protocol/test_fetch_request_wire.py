"""The one-pass Fetch request reader (protocol.fetch_request_wire) against
the generic codec: for every version it reads, the same entity from the
same bytes (topic names or ids, several topics and partitions, forgotten
topics, racks, non-ASCII names); a tagged field present (a follower's
replica_state, a cluster id, a replica directory) is left to the codec; on
truncated and mutated bodies it gives None (the codec then reads them) or
exactly the codec's entity, never another one."""

import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import fetch_request_wire
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import DecodeError, Parts, decode, encode
from kafkapy.protocol.entities import construct

FETCH = 1
VERSIONS = range(fetch_request_wire.FIRST_VERSION, API_TABLE[FETCH].max_version + 1)


def _body(version: int, values: dict) -> bytes:
    out = Parts()
    encode(construct(API_TABLE[FETCH].request_class(version), values), out)
    return b"".join(bytes(part) for part in out.parts())


def _values(seed: int, tagged: bool = False) -> dict:
    rng = random.Random(seed)
    topics = []
    for t in range(rng.randrange(0, 4)):
        partitions = [{"partition": rng.randrange(-2, 50), "current_leader_epoch": rng.randrange(-1, 9),
                       "fetch_offset": rng.choice([0, -1, rng.randrange(1 << 50)]),
                       "last_fetched_epoch": rng.randrange(-1, 9), "log_start_offset": rng.choice([-1, 0, 77]),
                       "partition_max_bytes": rng.randrange(0, 1 << 31)}
                      for _ in range(rng.randrange(0, 4))]
        topics.append({"topic": rng.choice(["t", "é" * 40, f"topic-{t}", ""]), "topic_id": uuid.UUID(int=rng.getrandbits(128)),
                       "partitions": partitions})
    forgotten = [{"topic": rng.choice(["gone", "é"]), "topic_id": uuid.UUID(int=rng.getrandbits(128)),
                  "partitions": [rng.randrange(0, 99) for _ in range(rng.randrange(0, 3))]}
                 for _ in range(rng.randrange(0, 3))]
    values = {"replica_id": rng.choice([-1, 2]), "max_wait": rng.randrange(0, 1000), "min_bytes": rng.randrange(0, 9),
              "max_bytes": rng.randrange(0, 1 << 31), "isolation_level": rng.choice([0, 1]),
              "session_id": rng.randrange(0, 99), "session_epoch": rng.randrange(-1, 99),
              "topics": topics, "forgotten_topics_data": forgotten, "rack_id": rng.choice(["", "rack-é"])}
    if tagged:
        values["cluster_id"] = "cluster"
        values["replica_state"] = {"replica_id": 3, "replica_epoch": 9}
    return values


def _both(version: int, buf: bytes):
    cls = API_TABLE[FETCH].request_class(version)
    fast = fetch_request_wire.decode_request(cls, version, memoryview(buf), 0)
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
    assert type(fast.topics) is tuple and all(type(t.partitions) is tuple for t in fast.topics)


@pytest.mark.parametrize("version", [v for v in VERSIONS if API_TABLE[FETCH].is_flexible(v)])
def test_tagged_fields_are_left_to_the_codec(version):
    fast, slow = _both(version, _body(version, _values(3, tagged=True)))
    assert fast is None and slow is not DecodeError and slow.cluster_id == "cluster"


def test_a_replica_directory_is_left_to_the_codec():
    values = _values(5)
    values["topics"] = [{"topic_id": uuid.uuid4(), "partitions": [
        {"partition": 0, "current_leader_epoch": 1, "fetch_offset": 5, "last_fetched_epoch": 1, "log_start_offset": 0,
         "partition_max_bytes": 100, "replica_directory_id": uuid.uuid4()}]}]
    fast, slow = _both(17, _body(17, values))
    assert fast is None and slow.topics[0].partitions[0].replica_directory_id == values["topics"][0]["partitions"][0][
        "replica_directory_id"]


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), seed=st.integers(0, 50), cut=st.integers(0, 600),
       flips=st.lists(st.tuples(st.integers(0, 600), st.integers(0, 255)), max_size=3))
def test_malformed_bodies_are_none_or_the_codecs(version, seed, cut, flips):
    buf = bytearray(_body(version, _values(seed)))
    for at, value in flips:
        if buf:
            buf[at % len(buf)] = value
    buf = bytes(buf[:cut])
    fast, slow = _both(version, buf)
    assert fast is None or fast == slow
