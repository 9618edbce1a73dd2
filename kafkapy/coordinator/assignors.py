"""Server-side partition assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

Pure functions, no state: ``assign(members, topics, previous) -> target``.

* ``members``: ``{member_id: set(subscribed topic names)}`` (already resolved
  from names and regex).
* ``topics``: ``{topic name: (topic_id, num_partitions)}`` for every
  subscribed topic that exists.
* ``previous``: the current target assignment ``{member_id: {topic_id:
  set(partitions)}}`` (stickiness input; may name departed members).
* result: ``{member_id: {topic_id: set(partitions)}}`` with every member
  present (possibly with ``{}``) and every partition of a subscribed topic
  assigned exactly once to a member subscribed to it (rack-unaware).

``uniform`` (Kafka's UniformAssignor): balanced to within one partition
when subscriptions are identical, sticky: a member keeps what it had up to
its share, so a membership change moves only the partitions it must. With
different subscriptions it is balanced greedily among eligible members.

``range`` (Kafka's server-side RangeAssignor): per topic, the subscribed
members in member-id order get consecutive ranges, the first
``num_partitions % n`` of them one extra, so partition i of co-partitioned
topics lands on the same member (what joins need).
"""

from __future__ import annotations

# Kafka accepts its class names for group.consumer.assignors; these map the
# simple class name (any package) onto our short names.
_CLASS_NAMES = {"UniformAssignor": "uniform", "RangeAssignor": "range"}


def normalize_assignor_name(name: str) -> str:
    simple = name.rsplit(".", 1)[-1]
    return _CLASS_NAMES.get(simple, name)


def _empty(members) -> dict:
    return {m: {} for m in members}


def _add(target, member_id, topic_id, partition) -> None:
    target[member_id].setdefault(topic_id, set()).add(partition)


def range_assign(members: dict, topics: dict, previous: dict) -> dict:
    target = _empty(members)
    for name in sorted(topics):
        topic_id, num_partitions = topics[name]
        subscribers = sorted(m for m, subs in members.items() if name in subs)
        if not subscribers or num_partitions <= 0:
            continue
        quota, extra = divmod(num_partitions, len(subscribers))
        start = 0
        for i, member_id in enumerate(subscribers):
            count = quota + (1 if i < extra else 0)
            for p in range(start, start + count):
                _add(target, member_id, topic_id, p)
            start += count
    return target


def uniform_assign(members: dict, topics: dict, previous: dict) -> dict:
    target = _empty(members)
    if not members:
        return target
    # Eligible members per partition (subscribers of its topic).
    all_partitions = []
    eligible_by_topic = {}
    for name in sorted(topics):
        topic_id, num_partitions = topics[name]
        subscribers = sorted(m for m, subs in members.items() if name in subs)
        if not subscribers:
            continue
        eligible_by_topic[topic_id] = subscribers
        all_partitions.extend((topic_id, p) for p in range(num_partitions))
    counts = {m: 0 for m in members}
    owner = {}
    # Quota for the homogeneous case: total/n, the first `extra` keepers may
    # hold one more. With heterogeneous subscriptions the balancing pass
    # below evens things out among eligible members.
    total = len(all_partitions)
    quota, extra = divmod(total, len(members))
    extra_left = extra
    valid = set(all_partitions)
    # 1. Stickiness: keep previous partitions still valid, up to the quota.
    for member_id in sorted(members):
        kept = sorted((tid, p) for tid, parts in previous.get(member_id, {}).items() for p in parts
                      if (tid, p) in valid and member_id in eligible_by_topic.get(tid, ()))
        allowed = quota
        if len(kept) > quota and extra_left > 0:
            allowed = quota + 1
            extra_left -= 1
        for tp in kept[:allowed]:
            if tp not in owner:
                owner[tp] = member_id
                counts[member_id] += 1
    # 2. Unowned partitions go to the least-loaded eligible member.
    for tp in all_partitions:
        if tp in owner:
            continue
        candidates = eligible_by_topic[tp[0]]
        best = min(candidates, key=lambda m: (counts[m], m))
        owner[tp] = best
        counts[best] += 1
    # 3. Balance: move a partition from a member holding two more than an
    # eligible peer. Each move lowers the sum of squared counts, so this
    # ends; the bound is a backstop.
    for _ in range(total * len(members) + 1):
        moved = False
        for tp in all_partitions:
            src = owner[tp]
            candidates = eligible_by_topic[tp[0]]
            dst = min(candidates, key=lambda m: (counts[m], m))
            if counts[src] > counts[dst] + 1:
                owner[tp] = dst
                counts[src] -= 1
                counts[dst] += 1
                moved = True
        if not moved:
            break
    for (tid, p), member_id in owner.items():
        _add(target, member_id, tid, p)
    return target


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
