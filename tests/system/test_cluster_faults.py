"""Faults under load on three real brokers and a real ZooKeeper (issue 15).

Kafka's produce-consume-validate shape: a client produces (an idempotent
acks=all producer in the background, or Apache's Java client with its
defaults), a fault is injected into broker processes this test started
(SIGKILL, SIGSTOP/SIGCONT of the broker's process group), and afterwards
every acknowledged record is consumed exactly once in per-partition order:

* the controller's SIGKILL, then a partition leader's: the new controller
  (higher ``/controller_epoch``) elects;
* a follower paused past ``replica.lag.time.max.ms``: the ISR shrinks, acks=all
  with min.insync.replicas=2 keeps being answered, after SIGCONT it catches up
  and rejoins;
* the Java client producing and consuming in a group through a leader's SIGKILL;
* two leaders killed in quick succession (KIP-101's shape): once restarted,
  every replica's log is the same bytes;
* three rounds of a leader's SIGKILL and restart.

Victims are chosen among brokers that are not the controller unless the
controller is the point, so a leadership moves after one session timeout
(``SESSION_TIMEOUT_MS``) rather than after a controller failover too.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from support.cluster import (
    OFFSETS_PARTITIONS,
    SESSION_TIMEOUT_MS,
    BackgroundProducer,
    controller_id,
    create_topic_assigned,
    finish,
    group_coordinated_outside,
    progress,
    wait_full_isr,
    wait_new_leader,
    wait_replicas_identical,
    zk_controller,
    zk_partition_state,
)
from support.wait import wait_for

pytestmark = pytest.mark.timeout(120)

# A leadership moves once the dead broker's session expired and the controller
# acted: the session timeout plus a few seconds on this 2-core machine.
NEW_LEADER_S = SESSION_TIMEOUT_MS / 1000 + 8


def _each_leads_one(first: int, second: int, third: int) -> list:
    """Three partitions, RF 3, led by ``first``, ``second``, ``third``; each
    partition's next replica is the next broker of that order."""
    order = [first, second, third]
    return [order[i:] + order[:i] for i in range(3)]


def test_controller_sigkill_then_a_leader_sigkill(make_cluster):
    c, zk = make_cluster()
    old, epoch = wait_for(lambda: zk_controller(zk), 20, "a controller")
    new_expected = [i for i in (1, 2, 3) if i != old]
    create_topic_assigned(c, "ctl", _each_leads_one(old, *new_expected))
    producer = BackgroundProducer(c.bootstrap, "ctl", 3, rate_per_s=300).start()
    try:
        progress(producer, 200, "200 acknowledged before the faults")
        c.brokers[old].kill()
        new, new_epoch = wait_for(lambda: (z := zk_controller(zk)) and z[0] != old and z, NEW_LEADER_S,
                                  "another controller")
        assert new_epoch > epoch
        wait_for(lambda: controller_id(c) == new, 20, "Metadata to name the new controller")
        assert wait_new_leader(c, "ctl", 0, {old}, NEW_LEADER_S) in new_expected
        # The broker that is neither controller leads its own partition; its
        # death is the new controller's first election of a live partition.
        third = next(i for i in new_expected if i != new)
        partition = next(p for p, (leader, _, _) in c.partitions("ctl").items() if leader == third)
        progress(producer, 100, "progress under the new controller")
        c.brokers[third].kill()
        assert wait_new_leader(c, "ctl", partition, {third}, NEW_LEADER_S) == new
        assert zk_controller(zk) == (new, new_epoch)
        progress(producer, 200, "progress with one broker left")
        c.brokers[old].start()
        c.brokers[third].start()
        wait_full_isr(c, zk, "ctl", 3, 3)
    finally:
        producer.halt()
    finish(c, producer, "ctl", 3)


def test_a_paused_follower_leaves_the_isr_while_acks_all_goes_on(make_cluster):
    # The session (capped at 10 s by the fixture's ZooKeeper) outlives the pause:
    # only the leaders' ISR jobs see the follower stop fetching.
    c, zk = make_cluster(**{"replica.lag.time.max.ms": 1000, "zookeeper.session.timeout.ms": 10000})
    controller, _ = wait_for(lambda: zk_controller(zk), 20, "a controller")
    # The paused broker follows every partition and is not the controller (a
    # paused controller would leave the ISR changes unannounced to Metadata).
    paused = next(i for i in (3, 2, 1) if i != controller)
    a, b = [i for i in (1, 2, 3) if i != paused]
    create_topic_assigned(c, "lag", [[a, b, paused], [b, a, paused], [a, paused, b]],
                          config={"min.insync.replicas": "2"})
    producer = BackgroundProducer(c.bootstrap, "lag", 3, rate_per_s=300).start()
    try:
        progress(producer, 200, "200 acknowledged before the pause")
        broker = c.brokers[paused]
        os.killpg(broker.pgid, signal.SIGSTOP)
        try:
            wait_for(lambda: all(paused not in isr and len(isr) == 2 for _, _, isr in c.partitions("lag").values()),
                     15, "every ISR to shrink to two")
            # acks=all is answered by the two left (min.insync.replicas=2).
            progress(producer, 300, "progress while the follower is paused", timeout_s=15)
            assert broker.running
        finally:
            os.killpg(broker.pgid, signal.SIGCONT)
        wait_full_isr(c, zk, "lag", 3, 3, timeout_s=30)  # caught up and back in every ISR
        progress(producer, 100, "progress after the follower's return")
    finally:
        producer.halt()
    finish(c, producer, "lag", 3)
    for p in range(3):
        wait_replicas_identical(c, "lag", p)


def test_java_client_through_a_leader_sigkill(make_cluster, java_client):
    """kafka-clients 3.9 with its defaults (idempotent, acks=all) producing, and
    consuming in a group, while a partition leader is SIGKILLed."""
    c, zk = make_cluster()
    controller, _ = wait_for(lambda: zk_controller(zk), 20, "a controller")
    victim, other = [i for i in (1, 2, 3) if i != controller]
    topic, count = "java-fault", 20000
    create_topic_assigned(c, topic, _each_leads_one(victim, other, controller))
    # The group's coordinator outlives the fault: the consumer's group then
    # never rebalances, so any duplicate it reads is in the log.
    group, _ = group_coordinated_outside(c, {victim}, OFFSETS_PARTITIONS, prefix="java-group")
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "hw-probe"})
    with ThreadPoolExecutor(2) as pool:
        # Small batches, so the run lasts a few seconds of acks=all round trips.
        produced = pool.submit(java_client.produce, c.bootstrap, topic, count, value_size=100,
                               configs={"batch.size": 2048}, timeout_s=100)
        consumed = pool.submit(java_client.consume, c.bootstrap, topic, group, count, timeout_ms=70000,
                               timeout_s=100)
        try:
            high_at_kill = wait_for(
                lambda: (h := probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1]) >= 300 and h,
                40, "300 records on the victim's partition")
        finally:
            probe.close()
        assert not produced.done(), "the producer finished before the fault: nothing was tested"
        c.brokers[victim].kill()
        assert wait_new_leader(c, topic, 0, {victim}, NEW_LEADER_S) == other
        produced, consumed = produced.result(), consumed.result()
    assert produced.returncode == 0 and not produced.errors, produced.describe()
    assert len(produced.acks) == count
    assert consumed.returncode == 0, consumed.describe()
    # Acknowledged after the fault on the victim's partition: the failover was exercised.
    assert max(a.offset for a in produced.acks if a.partition == 0) >= high_at_kill
    records = {(r.partition, r.offset): r.key for r in consumed.records}
    assert len(records) == len(consumed.records), "a record consumed twice"
    keys = [r.key for r in consumed.records]
    assert len(keys) == len(set(keys)), "a record in the log twice"
    missing = [a for a in produced.acks if records.get((a.partition, a.offset)) != a.key]
    assert not missing, f"{len(missing)} acknowledged records not consumed, e.g. {missing[:3]}"
    for p in range(3):
        offsets_read = [r.offset for r in consumed.records if r.partition == p]
        assert offsets_read == sorted(offsets_read), f"partition {p} out of order"


def test_two_leaders_killed_in_quick_succession_leave_identical_replicas(make_cluster):
    """KIP-101's shape: the first leader may hold records past the high watermark
    that the second never had; both come back and truncate by leader epoch."""
    c, zk = make_cluster()
    controller, _ = wait_for(lambda: zk_controller(zk), 20, "a controller")
    first, second = [i for i in (1, 2, 3) if i != controller]
    create_topic_assigned(c, "kip101", _each_leads_one(first, second, controller))
    producer = BackgroundProducer(c.bootstrap, "kip101", 3, rate_per_s=500).start()
    try:
        progress(producer, 300, "300 acknowledged before the faults")
        c.brokers[first].kill()
        assert wait_new_leader(c, "kip101", 0, {first}, NEW_LEADER_S) == second
        c.brokers[second].kill()
        assert wait_new_leader(c, "kip101", 0, {first, second}, NEW_LEADER_S) == controller
        progress(producer, 300, "progress on the last broker")
        c.brokers[first].start()
        c.brokers[second].start()
        wait_full_isr(c, zk, "kip101", 3, 3)
        progress(producer, 100, "progress with every replica back")
    finally:
        producer.halt()
    consumed = finish(c, producer, "kip101", 3)
    for p in range(3):
        batches = wait_replicas_identical(c, "kip101", p)
        assert batches, f"kip101-{p} is empty"
    assert sum(len(v) for v in consumed.values()) >= 700


def test_repeated_leader_sigkill_and_restart_under_load(make_cluster):
    c, zk = make_cluster()
    controller, _ = wait_for(lambda: zk_controller(zk), 20, "a controller")
    others = [i for i in (1, 2, 3) if i != controller]
    create_topic_assigned(c, "rounds", _each_leads_one(*others, controller))
    producer = BackgroundProducer(c.bootstrap, "rounds", 3, rate_per_s=300).start()
    try:
        progress(producer, 200, "200 acknowledged before the faults")
        for round_ in range(3):  # bounded: three rounds
            # Whoever leads partition round_ now (ZooKeeper's word), the controller included.
            partition = round_
            victim = zk_partition_state(zk, "rounds", partition)["leader"]
            killed_at = time.monotonic()
            c.brokers[victim].kill()
            wait_new_leader(c, "rounds", partition, {victim}, NEW_LEADER_S)
            elected_after = time.monotonic() - killed_at
            assert elected_after < NEW_LEADER_S, f"round {round_}: a new leader after {elected_after:.1f} s"
            assert zk_partition_state(zk, "rounds", partition)["leader"] not in (victim, -1)
            progress(producer, 150, f"round {round_}: progress without broker {victim}")
            c.brokers[victim].start()
            wait_full_isr(c, zk, "rounds", 3, 3, timeout_s=40)  # the restarted broker rejoined every ISR
    finally:
        producer.halt()
    finish(c, producer, "rounds", 3)
