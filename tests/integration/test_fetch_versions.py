"""Fetch v4-v17 and ListOffsets v1-v10 through raw frames, one request per
version, against a real broker: what each version's answer holds and means
(topic names up to v12, topic ids from v13, ``replica_state`` from v15,
KIP-951's current leader from v16, Kafka's special ListOffsets timestamps
each from its own version). Fetch v0-v3 and ListOffsets v0, for old
clients, are tested in test_fetch_old_versions.py."""

from __future__ import annotations

import time
import uuid

import pytest

from support.clients import Rec, create_topic, module_broker, produce_confluent
from support.fetch import (
    FETCH,
    LIST_OFFSETS,
    Conn,
    fetch_request,
    partitions_of,
    record_count,
    topic_id,
)

from support.rawclient import RawClient

pytestmark = pytest.mark.timeout(120)

TOPIC = "versions"
RECORDS = 7
UNSUPPORTED_VERSION = 35
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNKNOWN_TOPIC_ID = 100
INVALID_REQUEST = 42


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    with module_broker(tmp_path_factory) as b:
        create_topic(b.bootstrap, TOPIC, 2)
        first = int(time.time() * 1000) - 60_000
        reports = produce_confluent(b.bootstrap, TOPIC, [
            Rec(0, b"k", b"v%d" % i, timestamp_ms=first + 1000 * i) for i in range(RECORDS)])
        assert all(err is None for err, _, _ in reports)
        b.first_timestamp = first
        yield b


def test_advertised_ranges(kbroker):
    with RawClient.connect(kbroker.bootstrap) as client:
        code, apis = client.api_versions()
    ranges = {key: (lo, hi) for key, lo, hi in apis}
    assert code == 0 and ranges[FETCH] == (0, 17) and ranges[LIST_OFFSETS] == (0, 9)


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_each_version(kbroker, version):
    with Conn(kbroker.bootstrap) as c:
        key = topic_id(c, TOPIC) if version >= 13 else TOPIC
        r = c.call(FETCH, version, fetch_request(version, [(key, [(0, 2), (1, 0)])]))
        if version >= 7:
            assert (r.error_code, r.session_id) == (0, 0)
        (topic,) = r.responses
        # v13+ answers name the topic by id only.
        assert (getattr(topic, "topic_id", None) if version >= 13 else topic.topic) == key
        p0, p1 = topic.partitions
        assert (p0.partition_index, p0.error_code, p0.high_watermark) == (0, 0, RECORDS)
        # Fetching from offset 2 of one batch returns the whole batch (clients skip).
        assert record_count(p0.records) == RECORDS
        assert (p1.error_code, p1.high_watermark, record_count(p1.records)) == (0, 0, 0)
        if version >= 5:
            assert p0.log_start_offset == 0


@pytest.mark.parametrize("version", [13, 17])
def test_unknown_topic_id(kbroker, version):
    missing = uuid.uuid4()
    with Conn(kbroker.bootstrap) as c:
        started = time.monotonic()
        r = c.call(FETCH, version, fetch_request(version, [(missing, [(0, 0), (3, 0)])], max_wait_ms=5000))
        assert time.monotonic() - started < 2  # nothing readable: answered at once
        parts = partitions_of(r)
        assert {k: p.error_code for k, p in parts.items()} == {(missing, 0): UNKNOWN_TOPIC_ID,
                                                               (missing, 3): UNKNOWN_TOPIC_ID}


def test_an_unknown_topic_does_not_end_a_long_poll(kbroker):
    """Kafka never reads its "erroneous" partitions, so they do not answer a
    long poll early while another partition is readable."""
    with Conn(kbroker.bootstrap) as c:
        tid = topic_id(c, TOPIC)
        started = time.monotonic()
        r = c.call(FETCH, 17, fetch_request(17, [(tid, [(1, 0)]), (uuid.uuid4(), [(0, 0)])],
                                             max_wait_ms=800))
        waited = time.monotonic() - started
        assert 0.7 <= waited < 5
        assert sorted(p.error_code for p in partitions_of(r).values()) == [0, UNKNOWN_TOPIC_ID]


@pytest.mark.parametrize("version", [15, 16, 17])
def test_current_leader_from_v16(kbroker, version):
    """An epoch older than the leader's (-2 < 0) is fenced; from v16 the
    answer says who leads, at which epoch, and where (KIP-951)."""
    with Conn(kbroker.bootstrap) as c:
        tid = topic_id(c, TOPIC)
        r = c.call(FETCH, version, fetch_request(version, [(tid, [(0, 0, -2), (1, 0, 5)])]))
        fenced, unknown = (partitions_of(r)[(tid, p)] for p in (0, 1))
        assert (fenced.error_code, unknown.error_code) == (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH)
        assert (unknown.current_leader.leader_id, unknown.current_leader.leader_epoch) == (-1, -1)
        if version < 16:
            assert (fenced.current_leader.leader_id, fenced.current_leader.leader_epoch) == (-1, -1)
            assert not hasattr(r, "node_endpoints")
            return
        assert (fenced.current_leader.leader_id, fenced.current_leader.leader_epoch) == (0, 0)
        host, _, port = kbroker.bootstrap.rpartition(":")
        assert [(n.node_id, n.host, n.port) for n in r.node_endpoints] == [(0, host, int(port))]


def test_replica_state_carries_the_replica_id_from_v15(kbroker):
    """A follower id in replica_state (v15+) is a follower's fetch: standalone
    this broker's partition has no replica 7, so Kafka answers
    NOT_LEADER_OR_FOLLOWER; the old field is ignored from v15."""
    with Conn(kbroker.bootstrap) as c:
        tid = topic_id(c, TOPIC)
        r = c.call(FETCH, 15, fetch_request(15, [(tid, [(0, 0)])], replica_id=7))
        assert partitions_of(r)[(tid, 0)].error_code == 6
        consumer = fetch_request(15, [(tid, [(0, 0)])])
        consumer["replica_id"] = 7  # not on the wire from v15
        r = c.call(FETCH, 15, consumer)
        assert partitions_of(r)[(tid, 0)].error_code == 0


def _list_offsets(c, version, timestamps, partition=0):
    r = c.call(LIST_OFFSETS, version, {
        "replica_id": -1, "isolation_level": 0, "timeout": 1000,
        "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": partition, "timestamp": t, "current_leader_epoch": -1}]}
            for t in timestamps]})
    return [(p.error_code, p.offset, getattr(p, "timestamp", -1), getattr(p, "leader_epoch", -1))
            for t in r.topics for p in t.partitions]


@pytest.mark.parametrize("version", range(1, 10))  # v0: test_fetch_old_versions; v10 is Kafka 4.0's
def test_list_offsets_each_version(kbroker, version):
    """-1 latest, -2 earliest, -3 max timestamp (v7+), -4 earliest local
    (v8+), -5 latest tiered (v9+); below its version, or unknown (-6):
    UNSUPPORTED_VERSION, as Kafka's timestampMinSupportedVersion."""
    first = kbroker.first_timestamp
    epoch = 0 if version >= 4 else -1  # leader_epoch from v4
    with Conn(kbroker.bootstrap) as c:
        assert _list_offsets(c, version, [-1]) == [(0, RECORDS, -1, epoch)]
        assert _list_offsets(c, version, [-2]) == [(0, 0, -1, epoch)]
        assert _list_offsets(c, version, [first + 2500]) == [(0, 3, first + 3000, epoch)]
        unsupported = (UNSUPPORTED_VERSION, -1, -1, -1)
        assert _list_offsets(c, version, [-3]) == (
            [(0, RECORDS - 1, first + 1000 * (RECORDS - 1), epoch)] if version >= 7 else [unsupported])
        assert _list_offsets(c, version, [-4]) == ([(0, 0, -1, epoch)] if version >= 8 else [unsupported])
        assert _list_offsets(c, version, [-5]) == ([(0, -1, -1, -1)] if version >= 9 else [unsupported])
        assert _list_offsets(c, version, [-6]) == [unsupported]


def test_list_offsets_duplicate_partition_is_invalid(kbroker):
    with Conn(kbroker.bootstrap) as c:
        r = c.call(LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1},
                                           {"partition_index": 0, "timestamp": -2},
                                           {"partition_index": 1, "timestamp": -1}]}]})
        codes = [p.error_code for p in r.topics[0].partitions]
        assert codes == [INVALID_REQUEST, INVALID_REQUEST, 0]
