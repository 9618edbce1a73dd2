"""Helpers shared by the classic and KIP-848 consumer-group tests."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid

import confluent_kafka as ck
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 6
N_RECORDS = 120


def make_topic(broker, prefix: str, partitions=PARTITIONS, n=N_RECORDS) -> str:
    """A fresh topic with ``n`` records spread over its partitions."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(name, value=b"%d" % i, key=b"%d" % i, partition=i % partitions)
    assert p.flush(10) == 0
    return name


def committed(broker, group, topic, partitions=PARTITIONS) -> dict:
    """The group's committed offset per partition (-1001: none)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = admin.list_consumer_group_offsets([req])[group].result(10)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


# A group member in its own process (so a test can SIGKILL it): commits each
# record, prints its assignment whenever it changes, leaves on a stdin line.
MEMBER_SCRIPT = r"""
import json, select, sys, time
import confluent_kafka as ck
bootstrap, group, topic, extra = sys.argv[1:5]
conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False}
conf.update(json.loads(extra))
c = ck.Consumer(conf)
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
    def __init__(self, broker, group, topic, conf: dict):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", MEMBER_SCRIPT, broker.bootstrap, group, topic, json.dumps(conf)],
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


def wait_split(members, timeout_s=20, partitions=PARTITIONS):
    """Wait until the members own every partition exactly once, each some."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        parts = [set(m.assignment) for m in members]
        if set().union(*parts) == set(range(partitions)) and sum(map(len, parts)) == partitions \
                and all(parts):
            return parts
        time.sleep(0.1)
    raise AssertionError(f"group did not settle: {[m.assignment for m in members]}")
