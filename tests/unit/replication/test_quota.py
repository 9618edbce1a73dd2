"""Replication throttles (replication/quota.py): Kafka's throttled-replica lists
and the shared leaky bucket standing in for its SimpleRate."""

import contextlib

import pytest

from kafkapy.replication.quota import ALL, UNBOUNDED, ReplicationQuota, Throttle, parse_throttled_replicas
from kafkapy.server.config import TOPIC_CONFIGS, ConfigException


class Counters:
    """The shared table's named counters (``counter``, ``set_counter``, ``lock_all``)."""

    def __init__(self):
        self.words = {}

    def counter(self, name):
        return self.words.get(name, 0)

    def set_counter(self, name, value):
        self.words[name] = value

    def lock_all(self):
        return contextlib.nullcontext()


def test_throttled_replica_lists_as_kafka():
    assert parse_throttled_replicas("*", 1) is ALL
    assert parse_throttled_replicas(" 0:1, 1:2 ,3:1", 1) == {0, 3}
    assert parse_throttled_replicas("", 1) == frozenset()
    for bad in ("0-1", "a:1", "0:", "*,0:1"):
        with pytest.raises(ValueError):
            parse_throttled_replicas(bad, 1)
    key = TOPIC_CONFIGS["follower.replication.throttled.replicas"]
    assert key.parse("0:1,1:2") == ["0:1", "1:2"]
    with pytest.raises(ConfigException, match="must be the literal"):
        key.parse("0-1")


def test_the_bucket_lets_one_window_through_then_holds_the_rate():
    now = [100.0]
    quota = ReplicationQuota(Counters(), "leader", clock=lambda: now[0])
    rate = 1000
    assert not quota.exceeded(rate)
    quota.record(900, rate)
    assert not quota.exceeded(rate)  # within one window's worth
    quota.record(600, rate)
    assert quota.exceeded(rate)  # 1,500 waiting > 1,000
    now[0] += 0.4
    assert quota.exceeded(rate)  # 1,100 left
    now[0] += 0.2
    assert not quota.exceeded(rate)  # 900 left: drained at the rate
    assert not quota.exceeded(UNBOUNDED)
    quota.record(10**9, UNBOUNDED)  # nothing counted without a bound
    assert not quota.exceeded(rate)


def test_a_throttle_reads_each_topics_list_once():
    class Info:
        def __init__(self, configs):
            self.configs = configs

    class Md:
        topics = {"a": Info({"leader.replication.throttled.replicas": "0:1,2:2"}),
                  "b": Info({"leader.replication.throttled.replicas": "*"}), "c": Info({})}

    t = Throttle(ReplicationQuota(Counters(), "leader"), 1000, Md(), 1, "leader.replication.throttled.replicas")
    assert [t.is_throttled("a", p) for p in range(3)] == [True, False, False]
    assert t.is_throttled("b", 7) and not t.is_throttled("c", 0) and not t.is_throttled("gone", 0)
