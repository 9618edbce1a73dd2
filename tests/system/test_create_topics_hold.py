"""A CreateTopics waiting for its leaders holds no worker (Kafka's
DelayedCreatePartitions: the answer waits in a purgatory, the request
handler threads go on).

Three brokers on a real ZooKeeper, each with one handler worker
(``num.io.threads=1``). The controller C is SIGSTOPped, so topics created
through broker B (not C) get their znodes but no leaders. A CreateTopics with
a 3 s timeout answers REQUEST_TIMED_OUT after it (the topic is created all
the same, as in Kafka); meanwhile B's one worker answers Metadata and
ApiVersions within ``BOUND_S`` (before, the worker slept in the handler and
they waited out the timeout). Another CreateTopics with a 30 s timeout,
sent while C is stopped, answers with no error soon after C is continued
and elects its leader. CreatePartitions waits the same way: REQUEST_TIMED_OUT
after its timeout while C is stopped, no error once C is back. DeleteTopics
waits until the topic has left B's metadata (Kafka's DelayedDeleteTopics).
"""

from __future__ import annotations

import time

import pytest

from kafkapy.protocol.errors import ErrorCode
from support.cluster import Frozen, controller_id
from support.wait import wait_for

from support.raw_api import call, leaders_known

pytestmark = pytest.mark.timeout(120)

BOUND_S = 1.0  # each other request on B while a CreateTopics waits (ms; before: the whole timeout)
TIMEOUT_MS = 3000


@pytest.fixture
def cluster(make_cluster):
    # The controller stays stopped past the timeouts below but within its
    # ZooKeeper session: no other broker takes over meanwhile.
    c, _ = make_cluster(**{
        "num.io.threads": 1, "offsets.topic.num.partitions": 1, "zookeeper.session.timeout.ms": 15000})
    return c


def _create(bootstrap: str, name: str, broker_id: int, timeout_ms: int):
    r = call(bootstrap, 19, 5, {"topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                                            "assignments": [{"partition_index": 0, "broker_ids": [broker_id]}],
                                            "configs": []}],
                                "timeout": timeout_ms, "validate_only": False}, timeout_s=60)
    return r.topics[0].error_code


def _grow(bootstrap: str, name: str, broker_id: int, timeout_ms: int):
    r = call(bootstrap, 37, 3, {"topics": [{"name": name, "count": 2, "assignments": [{"broker_ids": [broker_id]}]}],
                                "timeout": timeout_ms, "validate_only": False}, timeout_s=60)
    return r.results[0].error_code


def _delete(bootstrap: str, name: str, timeout_ms: int):
    r = call(bootstrap, 20, 6, {"topics": [{"name": name, "topic_id": None}], "timeout": timeout_ms}, timeout_s=60)
    return r.responses[0].error_code


def test_a_create_topics_waiting_for_leaders_holds_no_worker(cluster):
    controller = controller_id(cluster)
    b = next(i for i in sorted(cluster.brokers) if i != controller)
    at_b = cluster.brokers[b].bootstrap
    metadata = {"topics": None, "allow_auto_topic_creation": False}
    with Frozen(cluster.brokers[controller]) as f:
        f.in_background(_create, at_b, "hold-late", b, TIMEOUT_MS)
        for n in range(3):
            f.timed(f"Metadata {n}", call, at_b, 3, 4, metadata, 10)
            f.timed(f"ApiVersions {n}", call, at_b, 18, 2, {}, 10)
        late = f.join(TIMEOUT_MS / 1000 + 20)
        # Created meanwhile, answered once C is back: its leader is elected then.
        f.in_background(_create, at_b, "hold-soon", b, 30_000, settle_s=1.0)
        soon_waiting = f.still_waiting()
    print(f"controller {controller} stopped, CreateTopics at {b}: {f.report()}; the 3 s one {late}")
    assert max(f.latencies.values()) < BOUND_S, f.latencies
    assert isinstance(late, tuple), late
    code, waited = late
    assert code == ErrorCode.REQUEST_TIMED_OUT and waited >= TIMEOUT_MS / 1000 * 0.9, late
    assert soon_waiting, "the 30 s CreateTopics was answered while the controller was stopped"
    thawed_at = time.monotonic()
    soon = f.join(40)
    assert isinstance(soon, tuple) and soon[0] == ErrorCode.NONE, soon
    print(f"the 30 s one answered {time.monotonic() - thawed_at:.2f} s after the controller continued")
    # Both topics exist; the timed-out one got its leader too once C was back.
    wait_for(lambda: leaders_known(at_b, ["hold-late", "hold-soon"]), 30, "leaders for both topics")

    # CreatePartitions (Kafka's DelayedCreatePartitions too): with C stopped
    # again, its answer waits for the new partition's leader.
    with Frozen(cluster.brokers[controller]) as f:
        f.in_background(_grow, at_b, "hold-late", b, 1500)
        f.timed("Metadata", call, at_b, 3, 4, metadata, 10)
        grown_late = f.join(20)
        f.in_background(_grow, at_b, "hold-soon", b, 30_000, settle_s=1.0)
        grow_waiting = f.still_waiting()
    grown_soon = f.join(40)
    print(f"CreatePartitions with the controller stopped: {grown_late}, {f.report()}; once back: {grown_soon}")
    assert f.latencies["Metadata"] < BOUND_S, f.latencies
    assert isinstance(grown_late, tuple) and grown_late[0] == ErrorCode.REQUEST_TIMED_OUT and grown_late[1] >= 1.3
    assert grow_waiting and isinstance(grown_soon, tuple) and grown_soon[0] == ErrorCode.NONE, grown_soon

    # DeleteTopics (Kafka's DelayedDeleteTopics): with C stopped nothing
    # deletes the topic, so the answer times out (the deletion stays marked);
    # with C back it comes once the topic has left B's metadata.
    with Frozen(cluster.brokers[controller]) as f:
        f.in_background(_delete, at_b, "hold-late", 1500)
        f.timed("Metadata", call, at_b, 3, 4, metadata, 10)
        deleted_late = f.join(20)
    started = time.monotonic()
    deleted_soon = _delete(at_b, "hold-soon", 30_000)
    print(f"DeleteTopics with the controller stopped: {deleted_late}, {f.report()}; once back: {deleted_soon} "
          f"in {time.monotonic() - started:.2f} s")
    assert f.latencies["Metadata"] < BOUND_S, f.latencies
    assert isinstance(deleted_late, tuple) and deleted_late[0] == ErrorCode.REQUEST_TIMED_OUT, deleted_late
    assert deleted_soon == ErrorCode.NONE
    gone = call(at_b, 3, 4, {"topics": [{"name": "hold-soon"}], "allow_auto_topic_creation": False})
    assert gone.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
