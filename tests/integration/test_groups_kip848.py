"""KIP-848 consumer groups (group.protocol=consumer) with librdkafka against the real broker.

Server-side timing is shortened through broker config (session 3 s,
heartbeat 300 ms, the group.consumer.min.* bounds lowered to allow it), so
take-overs happen in seconds; every wait is bounded by a deadline.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid

import pytest

from clients_support import module_broker
from groups_support import N_RECORDS, PARTITIONS, Member, committed, make_topic, wait_split

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import ConsumerGroupType  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

SESSION_TIMEOUT_MS = 3000
OVERRIDES = {"offsets.topic.num.partitions": 5,
             "group.consumer.session.timeout.ms": SESSION_TIMEOUT_MS,
             "group.consumer.min.session.timeout.ms": 1000,
             "group.consumer.heartbeat.interval.ms": 300,
             "group.consumer.min.heartbeat.interval.ms": 100}
DEADLINE_S = 30


def consumer_conf(broker, group, **extra):
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    conf.update(extra)
    return conf


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    with module_broker(tmp_path_factory, OVERRIDES) as b:
        yield b


def _is_split(parts: list[set]) -> bool:
    return set().union(*parts) == set(range(PARTITIONS)) and sum(map(len, parts)) == PARTITIONS


def _member(broker, group, topic, idx, assignments, seen, stop):
    c = ck.Consumer(consumer_conf(broker, group))
    c.subscribe([topic])
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            m = c.poll(0.1)
            assignments[idx] = {tp.partition for tp in c.assignment()}
            if m is None or m.error():
                continue
            seen.append((m.partition(), m.offset()))
            c.commit(m, asynchronous=False)
    finally:
        c.close()


def test_three_members_share_partitions_and_describe(kbroker):
    topic = make_topic(kbroker, "k")
    group = f"k-{uuid.uuid4().hex[:6]}"
    assignments, seen, stop = {}, [], threading.Event()
    threads = [threading.Thread(target=_member, args=(kbroker, group, topic, i, assignments, seen, stop))
               for i in range(3)]
    for t in threads:
        t.start()
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    try:
        deadline = time.monotonic() + DEADLINE_S
        split = False
        while time.monotonic() < deadline:
            done = sum(committed(kbroker, group, topic).get(p, 0) for p in range(PARTITIONS)) >= N_RECORDS
            parts = [set(assignments.get(i, ())) for i in range(3)]
            split = split or (all(parts) and _is_split(parts))
            if done and split:
                break
            time.sleep(0.2)
        assert split, f"never every partition owned exactly once: {assignments}"
        assert committed(kbroker, group, topic) == {p: N_RECORDS // PARTITIONS for p in range(PARTITIONS)}
        assert len(set(seen)) == N_RECORDS
        # ConsumerGroupDescribe through the AdminClient, once stable.
        desc = None
        for _ in range(50):
            desc = admin.describe_consumer_groups([group])[group].result(10)
            owned = [{tp.partition for tp in m.assignment.topic_partitions} for m in desc.members]
            if len(desc.members) == 3 and _is_split(owned) and str(desc.state).endswith("STABLE"):
                break
            time.sleep(0.2)
        assert desc.type == ConsumerGroupType.CONSUMER
        assert len(desc.members) == 3 and desc.partition_assignor == "uniform"
        assert _is_split([{tp.partition for tp in m.assignment.topic_partitions} for m in desc.members])
        assert all(tp.topic == topic for m in desc.members for tp in m.assignment.topic_partitions)
        assert str(desc.state).endswith("STABLE"), desc.state
    finally:
        stop.set()
        for t in threads:
            t.join(DEADLINE_S)


def test_member_leaves_and_member_dies(kbroker):
    topic = make_topic(kbroker, "k")
    group = f"kdie-{uuid.uuid4().hex[:6]}"
    members = [Member(kbroker, group, topic, {"group.protocol": "consumer"}) for _ in range(3)]
    try:
        wait_split(members)
        members[0].leave()
        wait_split(members[1:], timeout_s=10)
        started = time.monotonic()
        members[1].kill()
        wait_split(members[2:], timeout_s=15)
        # The session timeout (3 s) plus a heartbeat or two.
        assert time.monotonic() - started < SESSION_TIMEOUT_MS / 1000 + 5
    finally:
        for m in members:
            m.stop()
    assert sum(committed(kbroker, group, topic).values()) == N_RECORDS


def test_committed_offsets_survive_restart(broker_factory):
    broker = broker_factory(dict(OVERRIDES))
    topic = make_topic(broker, "k")
    group = "krestart"
    c = ck.Consumer(consumer_conf(broker, group))
    c.subscribe([topic])
    consumed = 0
    deadline = time.monotonic() + DEADLINE_S
    try:
        # Consume and commit half of each partition.
        while consumed < N_RECORDS // 2 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None or m.error() or m.offset() >= N_RECORDS // PARTITIONS // 2:
                continue
            c.commit(m, asynchronous=False)
            consumed += 1
    finally:
        c.close()
    assert consumed == N_RECORDS // 2
    half = N_RECORDS // PARTITIONS // 2
    assert committed(broker, group, topic) == {p: half for p in range(PARTITIONS)}
    broker.restart(signal.SIGKILL)
    assert committed(broker, group, topic) == {p: half for p in range(PARTITIONS)}
    c = ck.Consumer(consumer_conf(broker, group))
    c.subscribe([topic])
    first = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                first.setdefault(m.partition(), m.offset())
    finally:
        c.close()
    assert first == {p: half for p in range(PARTITIONS)}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept alive until the result is in
    desc = admin.describe_consumer_groups([group])[group].result(10)
    assert desc.type == ConsumerGroupType.CONSUMER
