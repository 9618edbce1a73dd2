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

from support.clients import module_broker
from support.groups import N_RECORDS, PARTITIONS, Member, committed, make_topic, wait_split

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
        # The last member consumes and commits what it took over (it may
        # still be doing so when its assignment shows).
        deadline = time.monotonic() + DEADLINE_S
        while sum(committed(kbroker, group, topic).values()) != N_RECORDS and time.monotonic() < deadline:
            time.sleep(0.2)
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


# ---------------------------------------------------------------- restart with members (raw frames)

HEARTBEAT, DESCRIBE = 68, 69
CLIENT_ADDRESS = "127.0.0.2"  # loopback too: the host the broker must report


def _conn(broker):
    from support.fetch import Conn
    from support.rawclient import RawClient

    conn = Conn(broker.bootstrap)
    conn.client.close()
    host, _, port = broker.bootstrap.rpartition(":")
    conn.client = RawClient(host, int(port), 10.0, source_address=(CLIENT_ADDRESS, 0))
    return conn


def _heartbeat(conn, group, member_id, epoch, owned, topic=None):
    """One ConsumerGroupHeartbeat v1 (epoch 0 joins), retried while the
    coordinator loads; bounded."""
    data = {"group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout": 10000 if epoch == 0 else -1,
            "subscribed_topic_names": None, "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": [{"topic_id": tid, "partitions": sorted(ps)} for tid, ps in owned.items()]}
    if epoch == 0:
        data["subscribed_topic_names"] = [topic]
    for _ in range(100):
        r = conn.call(HEARTBEAT, 1, data)
        if r.error_code not in (14, 15, 16):  # loading, not available, not coordinator
            return r
        time.sleep(0.1)
    return r


def _owned(r, before):
    if r.assignment is None:
        return before
    return {tp.topic_id: set(tp.partitions) for tp in r.assignment.topic_partitions}


def _describe(conn, group):
    return conn.call(DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False}).groups[0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_members_keep_epochs_across_restart(broker_factory, sig):
    """Members, their epochs and partitions, the group and assignment epochs
    come back from __consumer_offsets after a restart: the members heartbeat
    on at their epochs, and a new member continues the group epoch."""
    broker = broker_factory(dict(OVERRIDES, **{"group.consumer.session.timeout.ms": 20000}))
    group = f"kep-{sig}"
    topic = make_topic(broker, "kep", n=0)
    conn = _conn(broker)
    try:
        a = _heartbeat(conn, group, "member-a", 0, {}, topic)
        assert a.error_code == 0, a
        owned_a = _owned(a, {})
        b = _heartbeat(conn, group, "member-b", 0, {}, topic)
        owned_b = _owned(b, {})
        # Reconcile until both are stable (a revokes half, b then gets it).
        for _ in range(20):
            a = _heartbeat(conn, group, "member-a", a.member_epoch, owned_a)
            owned_a = _owned(a, owned_a)
            b = _heartbeat(conn, group, "member-b", b.member_epoch, owned_b)
            owned_b = _owned(b, owned_b)
            d = _describe(conn, group)
            if d.group_state == "Stable":
                epochs = {m.member_id: m.member_epoch for m in d.members}
                break
        assert d.group_state == "Stable" and len(d.members) == 2, d
        assert all(p for p in owned_a.values()) and all(p for p in owned_b.values())
        assert {m.client_host for m in d.members} == {"/" + CLIENT_ADDRESS}
        group_epoch = d.group_epoch
    finally:
        conn.close()
    broker.restart(sig)
    conn = _conn(broker)
    try:
        # Both carry on at their epochs with their partitions: no rejoin.
        a2 = _heartbeat(conn, group, "member-a", a.member_epoch, owned_a)
        b2 = _heartbeat(conn, group, "member-b", b.member_epoch, owned_b)
        assert (a2.error_code, a2.member_epoch) == (0, a.member_epoch), a2
        assert (b2.error_code, b2.member_epoch) == (0, b.member_epoch), b2
        assert _owned(a2, owned_a) == owned_a and _owned(b2, owned_b) == owned_b
        d = _describe(conn, group)
        assert d.group_state == "Stable" and d.group_epoch == d.assignment_epoch == group_epoch
        assert {m.member_id: m.member_epoch for m in d.members} == epochs
        assert {m.client_host for m in d.members} == {"/" + CLIENT_ADDRESS}
        # A third member continues the group epoch.
        c = _heartbeat(conn, group, "member-c", 0, {}, topic)
        assert c.error_code == 0 and c.member_epoch == group_epoch + 1
        for member_id in ("member-a", "member-b", "member-c"):
            assert _heartbeat(conn, group, member_id, -1, {}).error_code == 0
    finally:
        conn.close()


def test_describe_groups_reports_client_host(kbroker):
    """DescribeGroups (classic) reports the address a member joined from, as
    Kafka formats it."""
    conn = _conn(kbroker)
    group = f"host-{uuid.uuid4().hex[:6]}"
    join = {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}
    try:
        r = None
        for _ in range(100):  # bounded: the coordinator may still be loading
            r = conn.call(11, 5, join)
            if r.error_code not in (14, 15, 16):
                break
            time.sleep(0.1)
        assert r.error_code == 79 and r.member_id  # MEMBER_ID_REQUIRED (v4+)
        r = conn.call(11, 5, dict(join, member_id=r.member_id))
        assert r.error_code == 0
        d = conn.call(15, 5, {"groups": [group], "include_authorized_operations": False}).groups[0]
        assert [(m.member_id, m.client_host) for m in d.members] == [(r.member_id, "/" + CLIENT_ADDRESS)]
    finally:
        conn.close()


def test_confluent_member_keeps_its_epoch_across_restart(broker_factory):
    """A librdkafka consumer (group.protocol=consumer) stays in its group
    through a SIGKILL of the broker: same member id, member epoch and group
    epoch afterwards, and it goes on consuming what is produced after."""
    broker = broker_factory(dict(OVERRIDES, **{"group.consumer.session.timeout.ms": 20000}))
    topic = make_topic(broker, "kck")
    group = f"kck-{uuid.uuid4().hex[:6]}"
    seen, stop = [], threading.Event()

    def consume():
        c = ck.Consumer(consumer_conf(broker, group, **{"reconnect.backoff.max.ms": 500}))
        c.subscribe([topic])
        deadline = time.monotonic() + 3 * DEADLINE_S
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                m = c.poll(0.1)
                if m is not None and not m.error():
                    seen.append(m.offset())
        finally:
            c.close()

    def stable(conn):
        for _ in range(100):
            d = _describe(conn, group)
            if d.group_state == "Stable" and len(d.members) == 1 and d.members[0].assignment.topic_partitions:
                return d
            time.sleep(0.2)
        raise AssertionError(f"group never stable: {d}")

    t = threading.Thread(target=consume)
    t.start()
    try:
        conn = _conn(broker)
        before = stable(conn)
        conn.close()
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < N_RECORDS and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(seen) == N_RECORDS
        broker.restart(signal.SIGKILL)
        p = ck.Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(PARTITIONS):
            p.produce(topic, value=b"after", partition=i)
        assert p.flush(10) == 0
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < N_RECORDS + PARTITIONS and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(seen) == N_RECORDS + PARTITIONS
        conn = _conn(broker)
        after = stable(conn)
        conn.close()
        m0, m1 = before.members[0], after.members[0]
        assert (m1.member_id, m1.member_epoch) == (m0.member_id, m0.member_epoch)
        assert after.group_epoch == before.group_epoch
    finally:
        stop.set()
        t.join(DEADLINE_S)
