"""Replication throttles (Kafka's ReplicationQuotaManager, KIP-73).

Two quotas per broker, each a byte rate set as a dynamic broker config:
``leader.replication.throttled.rate`` (bytes this broker sends, as leader,
for throttled partitions) and ``follower.replication.throttled.rate`` (bytes
its replica fetchers take in for them). Which partitions are throttled is a
topic config read per broker, Kafka's ``parseThrottledPartitions``:
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``
are ``*`` (every partition) or ``partition:broker,...``; a broker throttles
the partitions listed with its own id.

Kafka's rules, kept:
* leader (``ReplicaManager.shouldLeaderThrottle``): a follower's fetch of a
  throttled partition gets no records while the quota is exceeded, unless
  the follower is in the ISR; the bytes of throttled partitions sent to any
  follower (in sync or not) count toward the rate. A throttled partition is
  not what a parked follower fetch waits for (Kafka's DelayedFetch counts
  only unthrottled bytes), so it waits out ``replica.fetch.wait.max.ms``;
* follower (``RemoteLeaderEndPoint.shouldFollowerThrottle``): a throttled
  partition that is not caught up (its lag behind the leader's high
  watermark, from the last answer, is not 0, or unknown) is left out of the
  fetch while the quota is exceeded; every byte appended to a throttled
  partition counts;
* an ISR member is never held back, so throttling cannot cost a replica its
  ISR place; a replica being added joins the ISR only once it caught up,
  slower under a throttle.

The rate: Kafka keeps a SimpleRate over ``replication.quota.window.num`` (11)
windows of ``replication.quota.window.size.seconds`` (1 s) and calls the
quota exceeded when the bytes in them over the time they span pass the
bound. Here a leaky bucket stands in for it: ``level`` bytes drain at the
configured rate and the quota is exceeded while more than one window's worth
(rate x 1 s) is waiting, which holds the long-run rate at the bound and lets
one window's burst through, as Kafka's first window does. Two words per
quota, shared by every process of the broker (handler workers serve the
leader side, each replica fetcher the follower side) as named counters of
the shared partition table, updated under its table lock: a per-process
bucket would let ``num.io.threads`` times the rate through.
"""

from __future__ import annotations

import time

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
UNBOUNDED = (1 << 63) - 1  # Kafka's default rate: Long.MAX_VALUE, no throttle
WINDOW_S = 1.0  # Kafka's replication.quota.window.size.seconds default
ALL = "*"


def parse_throttled_replicas(value, broker_id: int):
    """Kafka's parseThrottledPartitions: ``ALL`` for ``*``, else the frozenset of
    partitions listed with ``broker_id`` (``"0:1,1:2"``; blanks ignored).
    Raises ValueError on a malformed list (Kafka's ThrottledReplicaListValidator)."""
    text = (value or "").strip()
    if text == ALL:
        return ALL
    out = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        partition, sep, broker = item.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            raise ValueError(f"{value!r} must be the literal '*' or a list of replicas in the following format: "
                             "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
        if int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuota:
    """One direction's shared bucket (module docstring). ``clock`` in seconds,
    the same for every process (CLOCK_MONOTONIC is system-wide)."""

    def __init__(self, table, name: str, clock=time.monotonic):
        self.table = table
        self._level = f"quota.{name}.level"
        self._last = f"quota.{name}.last_ms"
        self.clock = clock

    def _drained(self, rate: int, now_ms: int) -> int:
        level, last = self.table.counter(self._level), self.table.counter(self._last)
        return max(0, level - (rate * max(0, now_ms - last)) // 1000) if last else level

    def exceeded(self, rate: int) -> bool:
        """Kafka's isQuotaExceeded (read without the lock: a decision, not a change)."""
        if rate >= UNBOUNDED:
            return False
        return self._drained(rate, int(self.clock() * 1000)) > rate * WINDOW_S

    def record(self, nbytes: int, rate: int) -> None:
        """Kafka's record: counts even past the bound."""
        if nbytes <= 0 or rate >= UNBOUNDED:
            return
        now_ms = int(self.clock() * 1000)
        with self.table.lock_all():
            level = self._drained(rate, now_ms)
            self.table.set_counter(self._level, level + nbytes)
            self.table.set_counter(self._last, now_ms)


class Throttle:
    """One request's (or one fetch round's) view of a quota: the rate now in the
    broker's config and which partitions the topics' configs throttle here."""

    __slots__ = ("quota", "rate", "md", "broker_id", "key", "_parsed", "recorded")

    def __init__(self, quota: ReplicationQuota, rate: int, md, broker_id: int, key: str):
        self.quota = quota
        self.rate = rate
        self.md = md
        self.broker_id = broker_id
        self.key = key  # LEADER_REPLICAS or FOLLOWER_REPLICAS
        self._parsed: dict = {}
        self.recorded = 0

    def is_throttled(self, topic: str, partition: int) -> bool:
        """Kafka's ReplicationQuotaManager.isThrottled."""
        parsed = self._parsed.get(topic)
        if parsed is None:
            info = self.md.topics.get(topic)
            try:
                parsed = parse_throttled_replicas(info.configs.get(self.key) if info is not None else None,
                                                  self.broker_id)
            except ValueError:
                parsed = frozenset()
            self._parsed[topic] = parsed
        return parsed is ALL or partition in parsed

    def exceeded(self) -> bool:
        return self.quota.exceeded(self.rate)

    def record(self, nbytes: int) -> None:
        self.quota.record(nbytes, self.rate)


_QUOTAS: dict = {}  # (id(table), name) -> ReplicationQuota, per process


def throttle_for(broker, leader: bool):
    """The leader's or the follower's ``Throttle`` of ``broker`` (a Broker of this
    process), or None when its rate is unbounded (the default: nothing to do)."""
    config = getattr(broker, "config", None)  # None: a test double without configs
    rate = config[LEADER_RATE if leader else FOLLOWER_RATE] if config is not None else None
    if rate is None or rate >= UNBOUNDED:
        return None
    name = "leader" if leader else "follower"
    quota = _QUOTAS.get((id(broker.table), name))
    if quota is None:
        quota = _QUOTAS[(id(broker.table), name)] = ReplicationQuota(broker.table, name)
    return Throttle(quota, rate, broker.metadata(), broker.broker_id,
                    LEADER_REPLICAS if leader else FOLLOWER_REPLICAS)
