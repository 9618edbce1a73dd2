"""A transactional producer and a reader by isolation level over confluent-kafka,
and the last offset by isolation level over a raw ListOffsets: what the
transaction tests share (integration and system alike).

Each helper bounds its wait by ``TIMEOUT_S`` and closes the clients it made,
except ``producer``, whose transactional producer the caller owns.
"""

from __future__ import annotations

import time

import pytest

from .raw_api import call

# A module that imports these helpers is skipped, as a module that imports
# confluent-kafka itself is, where it is not installed.
pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

TIMEOUT_S = 30


def producer(bootstrap: str, txn_id: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **conf})
    p.init_transactions(TIMEOUT_S)
    return p


def consume(bootstrap: str, topic: str, partitions: int, isolation: str, want: int | None = None,
            idle_s: float = 2.0) -> list[bytes]:
    """Values read from offset 0 of every partition, in partition then offset
    order: until ``want`` records came (then one more idle poll shows no
    extra), or, without ``want``, nothing new for ``idle_s`` (short of
    ``want`` it waits to the deadline: a loaded machine's first fetch can come
    later than any quiet spell)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list] = {}
    count = 0
    deadline = time.monotonic() + TIMEOUT_S
    last_new = time.monotonic()
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                if want is not None and count < want:
                    continue
                if time.monotonic() - last_new > (0.5 if want is not None else idle_s):
                    break
                continue
            assert m.error() is None, m.error()
            got.setdefault(m.partition(), []).append((m.offset(), m.value()))
            count += 1
            last_new = time.monotonic()
    finally:
        c.close()
    out = []
    for p in sorted(got):
        offsets = [o for o, _ in got[p]]
        assert offsets == sorted(offsets), f"partition {p} out of order: {offsets}"
        out += [v for _, v in got[p]]
    return out


def list_offset(bootstrap: str, topic: str, partition: int, isolation_level: int) -> int:
    r = call(bootstrap, 2, 7, {"replica_id": -1, "isolation_level": isolation_level, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": -1}]}]})
    (p,) = r.topics[0].partitions
    assert p.error_code == 0
    return p.offset
