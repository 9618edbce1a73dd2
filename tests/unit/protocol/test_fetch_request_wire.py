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
from kafkapy.protocol.codec import DecodeError
from kafkapy.protocol.entities import construct
from support import one_pass

FETCH = 1
VERSIONS = range(fetch_request_wire.FIRST_VERSION, API_TABLE[FETCH].max_version + 1)


def _body(version: int, values: dict) -> bytes:
    return one_pass.body(FETCH, version, values)


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
    return one_pass.both(fetch_request_wire, FETCH, version, buf)


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
    fast, slow = _both(version, one_pass.mutated(_body(version, _values(seed)), cut, flips))
    assert fast is None or fast == slow


# -- the response ------------------------------------------------------------

RESPONSE_VERSIONS = range(fetch_request_wire.FIRST_VERSION, API_TABLE[FETCH].max_version + 1)


def _response_values(seed: int, region_file) -> tuple[dict, bool]:
    """A FetchResponse's values (what this broker answers: records as
    bytes, RecordsRegions of file regions, None; aborted transactions or
    None) and whether it holds something only the codec's writer writes."""
    import datetime

    from kafkapy._core.types import FileRegion
    from kafkapy.protocol.writers import RecordsRegions

    rng = random.Random(seed)
    unusual = rng.random() < 0.4
    odd = False
    topics = []
    for t in range(rng.randrange(0, 4)):
        partitions = []
        for _ in range(rng.randrange(0, 4)):
            kind = rng.randrange(4)
            if kind == 0:
                records = None
            elif kind == 1:
                records = rng.randbytes(rng.randrange(0, 50))
            else:
                regions = [FileRegion(region_file, 7, rng.randrange(0, 100), rng.randrange(1, 60))
                           for _ in range(rng.randrange(1, 3))]
                records = RecordsRegions(regions, sum(r.length for r in regions))
            p = {"partition_index": rng.randrange(0, 99), "error_code": rng.choice([0, 0, 1, 6]),
                 "high_watermark": rng.randrange(-1, 1 << 40), "last_stable_offset": rng.randrange(-1, 1 << 40),
                 "log_start_offset": rng.choice([-1, 0, 5]),
                 "aborted_transactions": rng.choice([None, (), [{"producer_id": 7, "first_offset": 3}]]),
                 "preferred_read_replica": -1, "records": records}
            if unusual and rng.random() < 0.5:
                p["diverging_epoch"] = {"epoch": 3, "end_offset": 40}
                p["current_leader"] = {"leader_id": 2, "leader_epoch": 5}
                odd = True
            partitions.append(p)
        topics.append({"topic": rng.choice(["t", "é" * 40, ""]), "topic_id": uuid.UUID(int=rng.getrandbits(128)),
                       "partitions": partitions})
    values = {"throttle_time": rng.choice([0, 250]), "error_code": 0, "session_id": rng.randrange(0, 9),
              "responses": topics}
    if unusual and rng.random() < 0.5:
        values["throttle_time"] = datetime.timedelta(milliseconds=rng.randrange(100))
        odd = True
    if unusual and rng.random() < 0.5:
        values["node_endpoints"] = ({"node_id": 2, "host": "127.0.0.1", "port": 9092, "rack": None},)
        odd = True
    return values, odd


@pytest.mark.parametrize("version", RESPONSE_VERSIONS)
@pytest.mark.parametrize("seed", range(16))
def test_the_response_parts_are_the_codecs(version, seed, tmp_path):
    from kafkapy.server.handlers import fetch

    cls = API_TABLE[FETCH].response_class(version)
    values, odd = _response_values(seed, str(tmp_path / "segment.log"))
    response = construct(cls, values)  # fields a version lacks are left out
    fast, slow, fallbacks = one_pass.both_responses(fetch, fetch_request_wire, cls, response)
    assert fast.parts() == slow.parts() and fast.size == slow.size
    partitions = [p for t in response.responses for p in t.partitions]
    # What this version holds of the odd values decides (v11 has no tagged fields, v15 no node endpoints).
    holds_odd = (type(response.throttle_time) is not int or getattr(response, "node_endpoints", ())
                 or any(getattr(p, "diverging_epoch", None) is not None
                        and p.diverging_epoch.epoch == 3 for p in partitions))
    assert fallbacks == ([response] if holds_odd else [])
    assert odd or not holds_odd


def test_older_versions_keep_the_codecs_writer():
    from kafkapy.server.handlers import fetch

    one_pass.assert_older_versions_keep_the_codecs_writer(FETCH, fetch, fetch_request_wire.FIRST_VERSION)
