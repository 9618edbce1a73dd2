"""KIP-848 consumer groups (group.protocol=consumer) with librdkafka against the real broker.

Server-side timing is shortened through broker config (session 3 s,
heartbeat 300 ms, the group.consumer.min.* bounds lowered to allow it), so
take-overs happen in seconds; every wait is bounded by a deadline.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from clients_support import module_broker

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import ConsumerGroupTopicPartitions, ConsumerGroupType, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

SESSION_TIMEOUT_MS = 3000
OVERRIDES = {"offsets.topic.num.partitions": 5,
             "group.consumer.session.timeout.ms": SESSION_TIMEOUT_MS,
             "group.consumer.min.session.timeout.ms": 1000,
             "group.consumer.heartbeat.interval.ms": 300,
             "group.consumer.min.heartbeat.interval.ms": 100}
PARTITIONS = 6
N_RECORDS = 120
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


def _topic(broker, partitions=PARTITIONS, n=N_RECORDS):
    name = f"k-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(name, value=b"%d" % i, key=b"%d" % i, partition=i % partitions)
    assert p.flush(10) == 0
    return name


def _committed(broker, group, topic, partitions=PARTITIONS):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = admin.list_consumer_group_offsets([req])[group].result(10)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


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
    topic = _topic(kbroker)
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
            done = sum(_committed(kbroker, group, topic).get(p, 0) for p in range(PARTITIONS)) >= N_RECORDS
            parts = [set(assignments.get(i, ())) for i in range(3)]
            split = split or (all(parts) and _is_split(parts))
            if done and split:
                break
            time.sleep(0.2)
        assert split, f"never every partition owned exactly once: {assignments}"
        assert _committed(kbroker, group, topic) == {p: N_RECORDS // PARTITIONS for p in range(PARTITIONS)}
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


MEMBER_SCRIPT = r"""
import json, select, sys, time
import confluent_kafka as ck
bootstrap, group, topic = sys.argv[1:4]
c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                 "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([topic])
deadline = time.monotonic() + 60
last = None
while time.monotonic() < deadline:
    m = c.poll(0.1)
    if m is not None and not m.error():
        c.commit(m, asynchronous=False)
    a = sorted(tp.partition for tp in c.assignment())
    if a != last:
        print(json.dumps(a), flush=True)
        last = a
    if select.select([sys.stdin], [], [], 0)[0]:
        break
c.close()
"""


class Member:
    def __init__(self, broker, group, topic):
        self.proc = subprocess.Popen([sys.executable, "-c", MEMBER_SCRIPT, broker.bootstrap, group, topic],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.assignment = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.proc.stdout:
            self.assignment = json.loads(line)

    def leave(self):
        self.proc.stdin.write("x\n")
        self.proc.stdin.flush()
        self.proc.wait(20)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _wait_split(members, timeout_s=20):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        parts = [set(m.assignment) for m in members]
        if _is_split(parts) and all(parts):
            return parts
        time.sleep(0.1)
    raise AssertionError(f"group did not settle: {[m.assignment for m in members]}")


def test_member_leaves_and_member_dies(kbroker):
    topic = _topic(kbroker)
    group = f"kdie-{uuid.uuid4().hex[:6]}"
    members = [Member(kbroker, group, topic) for _ in range(3)]
    try:
        _wait_split(members)
        members[0].leave()
        _wait_split(members[1:], timeout_s=10)
        started = time.monotonic()
        members[1].kill()
        _wait_split(members[2:], timeout_s=15)
        # The session timeout (3 s) plus a heartbeat or two.
        assert time.monotonic() - started < SESSION_TIMEOUT_MS / 1000 + 5
    finally:
        for m in members:
            m.stop()
    assert sum(_committed(kbroker, group, topic).values()) == N_RECORDS


def test_committed_offsets_survive_restart(broker_factory):
    broker = broker_factory(dict(OVERRIDES))
    topic = _topic(broker)
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
    assert _committed(broker, group, topic) == {p: half for p in range(PARTITIONS)}
    broker.restart(signal.SIGKILL)
    assert _committed(broker, group, topic) == {p: half for p in range(PARTITIONS)}
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
