"""The one-pass Produce request reader (protocol.produce_wire over
_core.request_read, compiled and twin) against the generic codec: for every
version it reads, the same entity from the same bytes (null records and
transactional ids, several topics and partitions, non-ASCII names); on
truncated and mutated bodies it gives None (the codec then reads them) or
exactly the codec's entity, never another one, and the compiled read and its
twin give the same."""

import random
import types
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import produce_wire
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode
from kafkapy.protocol.entities import construct
from support import one_pass
from support.twins import import_core

PRODUCE = 0
VERSIONS = range(produce_wire.FIRST_VERSION, API_TABLE[PRODUCE].max_version + 1)


def _body(version: int, values: dict) -> bytes:
    return one_pass.body(PRODUCE, version, values)


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


def _wire(implementation: str):
    """produce_wire's ``decode_request`` over the compiled read or its twin."""
    return types.SimpleNamespace(decode_request=produce_wire.request_decoder(import_core("request_read", implementation)))


@pytest.fixture(scope="module", params=["compiled", "twin"])
def wire(request):
    return _wire(request.param)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("seed", range(12))
def test_the_entity_is_the_codecs(wire, version, seed):
    fast, slow = one_pass.both(wire, PRODUCE, version, _body(version, _values(seed)))
    assert fast is not None and fast == slow
    assert type(fast) is type(slow)
    assert all(type(t) is type(s) and all(type(p) is type(q) for p, q in zip(t.partition_data, s.partition_data))
               for t, s in zip(fast.topic_data, slow.topic_data))


@pytest.mark.parametrize("version", VERSIONS)
def test_records_are_a_view_of_the_body(wire, version):
    buf = bytearray(_body(version, {"transactional_id": None, "acks": 1, "timeout": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}]}))
    cls = API_TABLE[PRODUCE].request_class(version)
    request = wire.decode_request(cls, version, memoryview(buf), 0)
    records = request.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is buf and bytes(records) == b"abc"


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), seed=st.integers(0, 50), cut=st.integers(0, 2000),
       flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=3))
def test_malformed_bodies_are_none_or_the_codecs(wire, version, seed, cut, flips):
    fast, slow = one_pass.both(wire, PRODUCE, version, one_pass.mutated(_body(version, _values(seed)), cut, flips))
    assert fast is None or fast == slow


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), seed=st.integers(0, 50), cut=st.integers(0, 2000),
       flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=3))
def test_the_compiled_read_and_its_twin_agree(version, seed, cut, flips):
    buf = memoryview(one_pass.mutated(_body(version, _values(seed)), cut, flips))
    cls = API_TABLE[PRODUCE].request_class(version)
    compiled, twin = (_wire(implementation).decode_request(cls, version, buf, 0) for implementation in ("compiled", "twin"))
    assert compiled == twin


@pytest.mark.parametrize("version", [3, 9])  # the last non-flexible version and the first flexible one
def test_counts_past_what_the_body_holds_are_the_codecs(wire, version):
    # A count the body's bytes cannot hold is refused before anything is
    # allocated for it; a valid body is not (its count is at most what it holds).
    cls = API_TABLE[PRODUCE].request_class(version)
    one_topic = _body(version, {"transactional_id": None, "acks": 1, "timeout": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": None}]}]})
    assert wire.decode_request(cls, version, memoryview(one_topic), 0) is not None
    flexible = bool(cls.__flexible__)
    count_at = 1 if flexible else 2  # after the null transactional id
    count_at += 6  # acks, timeout
    bad = bytearray(one_topic)
    if flexible:
        bad[count_at] = 3  # two topics (compact: count + 1) where one is
    else:
        bad[count_at:count_at + 4] = (2).to_bytes(4, "big")
    assert wire.decode_request(cls, version, memoryview(bytes(bad)), 0) is None
    with pytest.raises(Exception):
        decode(cls, memoryview(bytes(bad)), 0)


@pytest.mark.parametrize("implementation", ["compiled", "twin"])
def test_setters_that_are_not_slot_descriptors(implementation):
    # The compiled read sets a slot through its descriptor when the codec's
    # setter is ``descriptor.__set__``; any other callable it calls, once
    # per field of each entity, as the twin does.
    read = import_core("request_read", implementation)
    version = 9
    cls = API_TABLE[PRODUCE].request_class(version)
    body = memoryview(_body(version, _values(3)))
    setters, topic_cls, topic_setters, part_cls, part_setters = produce_wire._entities(cls)
    assert all(type(s).__name__ == "method-wrapper" for s in setters + topic_setters + part_setters)
    calls = []

    def wrapped(setter):
        def set_value(obj, value):
            calls.append(type(obj))
            setter(obj, value)
        return set_value

    shape = read.produce_shape(cls, True, tuple(map(wrapped, setters)), topic_cls, tuple(map(wrapped, topic_setters)),
                               part_cls, tuple(map(wrapped, part_setters)))
    request = read.read_produce_request(body, 0, shape)
    assert request == decode(cls, body, 0)[0]
    parts = [p for t in request.topic_data for p in t.partition_data]
    assert parts, "a body with partitions"
    assert Counter(calls) == {cls: 4, topic_cls: 2 * len(request.topic_data), part_cls: 2 * len(parts)}
    with pytest.raises(TypeError):
        read.produce_shape(cls, True, setters[:3], topic_cls, topic_setters, part_cls, part_setters)


# -- the response ------------------------------------------------------------

_NO_LEADER = (-1, -1)


def _leader(partition):
    leader = getattr(partition, "current_leader", None)
    return None if leader is None else (leader.leader_id, leader.leader_epoch)

RESPONSE_VERSIONS = range(produce_wire.FIRST_VERSION, API_TABLE[PRODUCE].max_version + 1)


def _response_values(cls, seed: int) -> dict:
    """A ProduceResponse of ``cls``'s version: what this broker answers
    (integers, no record errors, tagged fields at their defaults) and, now
    and then, what only the codec's writer writes."""
    import dataclasses
    import datetime

    rng = random.Random(seed)
    unusual = rng.random() < 0.4
    fields = {f.name for f in dataclasses.fields(cls)}
    topics = []
    for t in range(rng.randrange(0, 4)):
        partitions = []
        for _ in range(rng.randrange(0, 4)):
            p = {"index": rng.randrange(-1, 100), "error_code": rng.choice([0, 0, 3, 6, 19, 47]),
                 "base_offset": rng.choice([-1, 0, rng.randrange(1 << 40)]),
                 "log_append_time": rng.choice([-1, rng.randrange(1 << 41)]),
                 "log_start_offset": rng.choice([-1, 0, rng.randrange(1 << 40)]),
                 "record_errors": (), "error_message": rng.choice([None, "", "not the leader é"])}
            if unusual and rng.random() < 0.5:
                p["record_errors"] = ({"batch_index": 0, "batch_index_error_message": rng.choice([None, "x"])},)
                p["current_leader"] = {"leader_id": 2, "leader_epoch": 7}
            partitions.append(p)
        topics.append({"name": rng.choice(["t", "é" * 40, f"topic-{t}", ""]), "partition_responses": partitions})
    values = {"responses": topics, "throttle_time": rng.choice([0, 0, 250])}
    if unusual and rng.random() < 0.5:
        values["throttle_time"] = datetime.timedelta(milliseconds=rng.randrange(100))
    if unusual and "node_endpoints" in fields and rng.random() < 0.5:
        values["node_endpoints"] = ({"node_id": 2, "host": "127.0.0.1", "port": 9092, "rack": None},)
    return values


@pytest.mark.parametrize("version", RESPONSE_VERSIONS)
@pytest.mark.parametrize("seed", range(16))
def test_the_response_bytes_are_the_codecs(version, seed):
    from kafkapy.server.handlers import produce

    cls = API_TABLE[PRODUCE].response_class(version)
    response = construct(cls, _response_values(cls, seed))  # fields a version lacks are left out
    fast, slow, fallbacks = one_pass.both_responses(produce, produce_wire, cls, response)
    assert bytes(fast.buf) == bytes(slow.buf)
    # What this version holds of the unusual values decides (v3 has no record errors, v9 no leader).
    partitions = [p for t in response.responses for p in t.partition_responses]
    usual = (type(response.throttle_time) is int and not getattr(response, "node_endpoints", ())
             and not any(getattr(p, "record_errors", ()) for p in partitions)
             and all(_leader(p) in (None, _NO_LEADER) for p in partitions))
    assert fallbacks == ([] if usual else [response])
    decoded, end = decode(cls, memoryview(bytes(fast.buf)), len(b"prefix"))
    assert end == len(fast.buf) and len(decoded.responses) == len(response.responses)


def test_older_versions_keep_the_codecs_writer():
    from kafkapy.server.handlers import produce

    one_pass.assert_older_versions_keep_the_codecs_writer(PRODUCE, produce, produce_wire.FIRST_VERSION)
