"""What the oldest versions Kafka 3.9 still serves mean, and client
telemetry, against a real standalone broker through raw frames.

OffsetCommit v1's commit timestamp is the commit time offsets expire from;
v1 group-less commits; OffsetCommit/OffsetFetch v0 kept apart from the
coordinator's offsets (ZooKeeper's /consumers in Kafka 3.9, the embedded
store here) and their errors; DescribeConfigs v0's is_default against v1's sources; CreateTopics
v0/v1 (validate_only) and DeleteTopics v0 effects; OffsetForLeaderEpoch
v0/v1; GetTelemetrySubscriptions/PushTelemetry as Kafka's ClientMetricsManager
with no subscriptions (pacing, subscription id, terminating) and their
absence from ApiVersions.
"""

from __future__ import annotations

import time
import uuid

import pytest

from support.clients import module_broker
from support.raw_api import call

from kafkapy.protocol.errors import ErrorCode as E

pytestmark = pytest.mark.timeout(120)

TOPIC = "old"
ZERO_UUID = uuid.UUID(int=0)
RETENTION_MS = 60_000  # offsets.retention.minutes=1, Kafka's minimum
SETTLE_S = 10.0
DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG = 5, 1


@pytest.fixture(scope="module")
def bs(tmp_path_factory):
    # One handler worker: the telemetry pacing is per worker (see
    # kafkapy.server.client_metrics), so the pacing checks need one.
    with module_broker(tmp_path_factory, {"num.io.threads": 1, "group.initial.rebalance.delay.ms": 0,
                                          "offsets.retention.minutes": 1,
                                          "offsets.retention.check.interval.ms": 300}) as broker:
        created = call(broker.bootstrap, 19, 7, {"topics": [
            {"name": TOPIC, "num_partitions": 2, "replication_factor": 1,
             "configs": [{"name": "retention.ms", "value": "3600000"}]}], "timeout": 10000})
        assert created.topics[0].error_code == E.NONE
        _wait_coordinator(broker.bootstrap)
        yield broker.bootstrap


def _wait_coordinator(bootstrap):
    deadline = time.monotonic() + SETTLE_S
    while True:
        found = call(bootstrap, 10, 0, {"key": "any"})
        if found.error_code == E.NONE:
            return
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def _commit(bs, version, group, offsets, generation=-1, member_id=""):
    """offsets: {partition: (offset, commit_timestamp)} -> {partition: error}."""
    r = call(bs, 8, version, {"group_id": group, "generation_id_or_member_epoch": generation,
                              "member_id": member_id, "topics": [{"name": TOPIC, "partitions": [
                                  {"partition_index": p, "committed_offset": o, "commit_timestamp": ts,
                                   "committed_metadata": f"meta-{o}"} for p, (o, ts) in offsets.items()]}]})
    (t,) = r.topics
    return {p.partition_index: p.error_code for p in t.partitions}


def _fetch(bs, version, group, partitions=(0, 1)):
    """-> {partition: (offset, metadata, error)}"""
    r = call(bs, 9, version, {"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": list(partitions)}]})
    assert getattr(r, "error_code", E.NONE) == E.NONE
    return {p.partition_index: (p.committed_offset, p.metadata, p.error_code) for p in r.topics[0].partitions}


def _wait_for(predicate, timeout_s=SETTLE_S):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


# -- OffsetCommit v0/v1, OffsetFetch v0 ---------------------------------------------------------

def test_commit_v1_timestamp_is_the_commit_time_offsets_expire_from(bs):
    now = int(time.time() * 1000)
    # Partition 0 committed "two retention periods ago", partition 1 now
    # (-1): only partition 0 is past offsets.retention.minutes.
    assert _commit(bs, 1, "v1-ts", {0: (5, now - 2 * RETENTION_MS), 1: (6, -1)}) == {0: E.NONE, 1: E.NONE}
    assert _wait_for(lambda: _fetch(bs, 1, "v1-ts")[0] == (-1, "", E.NONE)), _fetch(bs, 1, "v1-ts")
    assert _fetch(bs, 1, "v1-ts")[1] == (6, "meta-6", E.NONE)
    # A timestamp inside the retention period keeps the offset.
    assert _commit(bs, 1, "v1-recent", {0: (7, now - RETENTION_MS // 2)}) == {0: E.NONE}
    time.sleep(1.0)  # > 3 retention checks
    assert _fetch(bs, 1, "v1-recent", (0,)) == {0: (7, "meta-7", E.NONE)}


def test_commit_v0_and_fetch_v0_are_apart_from_the_coordinators_offsets(bs):
    """Kafka 3.9 (ZooKeeper mode) keeps v0 commits in /consumers/..., standalone
    in the embedded store: v1+ never sees them, v0 sees nothing else."""
    assert _commit(bs, 0, "v0-group", {0: (11, -1)}) == {0: E.NONE}
    # v0 answers UNKNOWN_TOPIC_OR_PARTITION for a partition without a v0
    # commit and drops the metadata; v1 sees no commit at all.
    assert _fetch(bs, 0, "v0-group") == {0: (11, "", E.NONE), 1: (-1, "", E.UNKNOWN_TOPIC_OR_PARTITION)}
    assert _fetch(bs, 1, "v0-group") == {0: (-1, "", E.NONE), 1: (-1, "", E.NONE)}
    assert _fetch(bs, 0, "v0-nogroup", (0,)) == {0: (-1, "", E.UNKNOWN_TOPIC_OR_PARTITION)}
    # A v1 commit is not read back by v0, and leaves the v0 offset as it was.
    assert _commit(bs, 1, "v0-group", {0: (12, -1), 1: (13, -1)}) == {0: E.NONE, 1: E.NONE}
    assert _fetch(bs, 0, "v0-group") == {0: (11, "", E.NONE), 1: (-1, "", E.UNKNOWN_TOPIC_OR_PARTITION)}
    assert _fetch(bs, 2, "v0-group") == {0: (12, "meta-12", E.NONE), 1: (13, "meta-13", E.NONE)}
    # A second v0 commit replaces the first.
    assert _commit(bs, 0, "v0-group", {0: (14, -1)}) == {0: E.NONE}
    assert _fetch(bs, 0, "v0-group", (0,)) == {0: (14, "", E.NONE)}


def test_commit_v0_errors(bs):
    r = call(bs, 8, 0, {"group_id": "v0-errors", "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 9, "committed_offset": 1, "committed_metadata": ""},
                                       {"partition_index": 0, "committed_offset": 1,
                                        "committed_metadata": "x" * 5000}]},
        {"name": "v0-no-such-topic", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                     "committed_metadata": ""}]}]})
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics] == [
        (TOPIC, [(9, E.UNKNOWN_TOPIC_OR_PARTITION), (0, E.OFFSET_METADATA_TOO_LARGE)]),
        ("v0-no-such-topic", [(0, E.UNKNOWN_TOPIC_OR_PARTITION)])]
    # ZooKeeper cannot name /consumers//offsets/...: Kafka's UNKNOWN_SERVER_ERROR.
    assert _commit(bs, 0, "", {0: (1, -1)}) == {0: E.UNKNOWN_SERVER_ERROR}
    assert _fetch(bs, 0, "v0-errors", (0, 9)) == {0: (-1, "", E.UNKNOWN_TOPIC_OR_PARTITION),
                                                   9: (-1, "", E.UNKNOWN_TOPIC_OR_PARTITION)}


def test_commits_v0_v1_against_a_live_group(bs):
    group = "v1-live"
    joined = call(bs, 11, 0, {"group_id": group, "session_timeout": 30000, "member_id": "",
                              "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
    assert joined.error_code == E.NONE and joined.leader == joined.member_id
    member, generation = joined.member_id, joined.generation_id
    synced = call(bs, 14, 0, {"group_id": group, "generation_id": generation, "member_id": member,
                              "assignments": [{"member_id": member, "assignment": b""}]})
    assert synced.error_code == E.NONE
    # v0 never meets the coordinator: a group with members does not refuse
    # it; v1 with the member's generation commits, another is refused.
    assert _commit(bs, 0, group, {0: (1, -1)}) == {0: E.NONE}
    assert _commit(bs, 1, group, {0: (2, -1)}, generation, member) == {0: E.NONE}
    assert _commit(bs, 1, group, {0: (3, -1)}, generation + 1, member) == {0: E.ILLEGAL_GENERATION}
    assert _commit(bs, 1, group, {0: (3, -1)}, generation, "stranger") == {0: E.UNKNOWN_MEMBER_ID}
    assert _fetch(bs, 0, group, (0,)) == {0: (1, "", E.NONE)}
    assert _fetch(bs, 1, group, (0,)) == {0: (2, "meta-2", E.NONE)}
    left = call(bs, 13, 0, {"group_id": group, "member_id": member})
    assert left.error_code == E.NONE


def test_commit_v1_unknown_partition(bs):
    r = call(bs, 8, 1, {"group_id": "v1-unknown", "generation_id_or_member_epoch": -1, "member_id": "",
                        "topics": [{"name": TOPIC, "partitions": [
                            {"partition_index": 9, "committed_offset": 1, "committed_metadata": None}]}]})
    assert [(p.partition_index, p.error_code) for p in r.topics[0].partitions] \
        == [(9, E.UNKNOWN_TOPIC_OR_PARTITION)]


# -- DescribeConfigs v0 --------------------------------------------------------------------------

@pytest.mark.parametrize("resource_type,name", [(2, TOPIC), (4, "0")])
def test_describe_configs_v0_is_default(bs, resource_type, name):
    def describe(version):
        r = call(bs, 32, version, {"resources": [{"resource_type": resource_type, "resource_name": name,
                                                  "configuration_keys": None}]})
        (res,) = r.results
        assert res.error_code == E.NONE
        return {c.name: c for c in res.configs}

    v0, v1 = describe(0), describe(1)
    assert v0.keys() == v1.keys() and len(v0) > 10
    for key, entry in v0.items():
        source = v1[key].config_source
        # Not set on the resource itself: Kafka's default, or for a topic
        # anything but its own override.
        expected = source == DEFAULT_CONFIG or (resource_type == 2 and source != DYNAMIC_TOPIC_CONFIG)
        assert (entry.value, entry.is_default) == (v1[key].value, expected), key
    if resource_type == 2:
        assert v0["retention.ms"].is_default is False and v0["cleanup.policy"].is_default is True
    else:
        assert v0["log.dirs"].is_default is False  # set in server.properties


# -- CreateTopics v0/v1, DeleteTopics v0 ---------------------------------------------------------

def _topic_error(bs, name):
    r = call(bs, 3, 4, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
    return r.topics[0].error_code, len(r.topics[0].partitions)


def test_create_topics_v0_v1_and_delete_topics_v0(bs):
    r = call(bs, 19, 1, {"topics": [{"name": "ct-validate", "num_partitions": 3, "replication_factor": 1}],
                         "timeout": 10000, "validate_only": True})
    assert [(t.name, t.error_code, t.error_message) for t in r.topics] == [("ct-validate", E.NONE, None)]
    assert _topic_error(bs, "ct-validate") == (E.UNKNOWN_TOPIC_OR_PARTITION, 0)
    r = call(bs, 19, 0, {"topics": [{"name": "ct-v0", "num_partitions": 3, "replication_factor": 1}],
                         "timeout": 10000})
    assert [(t.name, t.error_code) for t in r.topics] == [("ct-v0", E.NONE)]
    assert _topic_error(bs, "ct-v0") == (E.NONE, 3)
    r = call(bs, 19, 1, {"topics": [{"name": "ct-v0", "num_partitions": 3, "replication_factor": 1}],
                         "timeout": 10000})
    (t,) = r.topics
    assert t.error_code == E.TOPIC_ALREADY_EXISTS and "ct-v0" in t.error_message
    r = call(bs, 20, 0, {"topic_names": ["ct-v0", "ct-missing"], "timeout": 10000})
    assert [(t.name, t.error_code) for t in r.responses] \
        == [("ct-v0", E.NONE), ("ct-missing", E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert _topic_error(bs, "ct-v0") == (E.UNKNOWN_TOPIC_OR_PARTITION, 0)


# -- OffsetForLeaderEpoch v0/v1 ------------------------------------------------------------------

def test_offset_for_leader_epoch_v0_v1(bs):
    from kafkapy._core.records_py import build_batch

    batch = bytes(build_batch([(None, b"x", [], int(time.time() * 1000))] * 4))
    produced = call(bs, 0, 3, {"acks": 1, "timeout": 10000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 1, "records": batch}]}]})
    assert produced.responses[0].partition_responses[0].error_code == E.NONE
    log_end = call(bs, 2, 1, {"replica_id": -1, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 1, "timestamp": -1}]}]}).topics[0].partitions[0].offset
    assert log_end >= 4
    for version in (0, 1):
        r = call(bs, 23, version, {"topics": [{"topic": TOPIC, "partitions": [
            {"partition": 1, "leader_epoch": 0}, {"partition": 1, "leader_epoch": 7},
            {"partition": 5, "leader_epoch": 0}]}]})
        got = [(p.partition, p.error_code, p.end_offset, getattr(p, "leader_epoch", None))
               for p in r.topics[0].partitions]
        epoch = (lambda e: e) if version == 1 else (lambda e: None)
        # Epoch 0 is the latest: it ends at the log end. An epoch above the
        # latest is undefined (-1, -1); an unknown partition is refused.
        assert got == [(1, E.NONE, log_end, epoch(0)), (1, E.NONE, -1, epoch(-1)),
                       (5, E.UNKNOWN_TOPIC_OR_PARTITION, -1, epoch(-1))]


# -- client telemetry ----------------------------------------------------------------------------

def _get(bs, instance_id=ZERO_UUID):
    return call(bs, 71, 0, {"client_instance_id": instance_id})


def _push(bs, instance_id, subscription_id, terminating=False, compression_type=0, metrics=b""):
    return call(bs, 72, 0, {"client_instance_id": instance_id, "subscription_id": subscription_id,
                            "terminating": terminating, "compression_type": compression_type,
                            "metrics": metrics}).error_code


def test_telemetry_is_not_advertised(bs):
    r = call(bs, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
    keys = {a.api_key for a in r.api_keys}
    assert 71 not in keys and 72 not in keys and {8, 9, 32} <= keys


def test_get_telemetry_subscriptions_without_subscriptions(bs):
    first = _get(bs)
    assert first.error_code == E.NONE and first.client_instance_id not in (ZERO_UUID, uuid.UUID(int=1))
    assert (list(first.requested_metrics), first.push_interval, first.telemetry_max_bytes,
            first.delta_temporality, list(first.accepted_compression_types)) == ([], 300000, 1 << 20, True,
                                                                                 [4, 3, 1, 2])
    other = _get(bs)
    assert other.client_instance_id != first.client_instance_id
    # Sooner than the push interval after the last Get: throttled, nothing else set.
    again = _get(bs, first.client_instance_id)
    assert (again.error_code, again.client_instance_id, again.subscription_id) \
        == (E.THROTTLING_QUOTA_EXCEEDED, ZERO_UUID, 0)
    # A client's own id (one this broker never gave) is kept.
    own = uuid.uuid4()
    mine = _get(bs, own)
    assert (mine.error_code, mine.client_instance_id) == (E.NONE, own)


def test_push_telemetry(bs):
    got = _get(bs)
    instance, sub = got.client_instance_id, got.subscription_id
    assert _push(bs, ZERO_UUID, sub) == E.INVALID_REQUEST
    assert _push(bs, instance, sub + 1) == E.UNKNOWN_SUBSCRIPTION_ID
    # That push counted: the next one inside the interval is throttled.
    assert _push(bs, instance, sub, metrics=b"m") == E.THROTTLING_QUOTA_EXCEEDED
    got = _get(bs)
    instance, sub = got.client_instance_id, got.subscription_id
    assert _push(bs, instance, sub, compression_type=9) == E.UNSUPPORTED_COMPRESSION_TYPE
    got = _get(bs)
    instance, sub = got.client_instance_id, got.subscription_id
    assert _push(bs, instance, sub, metrics=b"x" * ((1 << 20) + 1)) == E.TELEMETRY_TOO_LARGE
    got = _get(bs)
    instance, sub = got.client_instance_id, got.subscription_id
    assert _push(bs, instance, sub, metrics=b"otlp bytes", compression_type=1) == E.NONE
    # The terminating push is taken inside the interval; nothing after it.
    assert _push(bs, instance, sub, terminating=True) == E.NONE
    assert _push(bs, instance, sub, terminating=True) == E.INVALID_REQUEST
