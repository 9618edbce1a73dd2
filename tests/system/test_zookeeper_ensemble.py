"""A three-node ZooKeeper ensemble under a serving cluster (issue 27, section 2).

Operators run ZooKeeper as an ensemble, and ``zookeeper.connect`` names every
member and a chroot. Three brokers on a three-node ensemble
(``support.zookeeper.ZooKeeperEnsemble``: Debian's ZooKeeper, three
``QuorumPeerMain`` processes on loopback ports), each fault under an
idempotent acks=all producer, in the shape of Kafka's system tests:

* the ZooKeeper leader SIGKILLed: the other two elect a leader and the
  brokers' sessions move to them; with two nodes a topic is created and a
  partition leader broker SIGKILLed (the controller elects a new leader
  through the two-node ensemble); both come back and rejoin;
* a follower SIGKILLed, a topic created meanwhile, the follower back;
* the whole ensemble restarted one node at a time (SIGTERM, start, quorum
  again before the next), as a ZooKeeper upgrade does.

Produce and fetch go on throughout; afterwards every ISR is full, the
topics made during the fault are served, and everything acknowledged is
read back once and in order.
"""

from __future__ import annotations

import pytest

from support.cluster import (
    finish,
    progress,
    start_load,
    wait_full_isr,
    wait_new_leader,
    zk_controller,
)
from support.wait import wait_for

pytestmark = pytest.mark.timeout(240)



@pytest.fixture
def ensemble_cluster(zookeeper_ensemble, make_cluster):
    """``(cluster, kazoo client on its chroot, ensemble)``; the cluster's
    zookeeper.connect names all three members and the test's chroot."""
    c, zk = make_cluster(zookeeper=zookeeper_ensemble, **{"offsets.topic.num.partitions": 3})
    try:
        yield c, zk, zookeeper_ensemble
    finally:
        for node in zookeeper_ensemble.nodes.values():  # a test's fault undone for the next
            if not node.running:
                node.start()
        zookeeper_ensemble.wait_quorum()


def _topic_served(c, zk, name: str) -> None:
    """A topic created on the ensemble now: led with full ISRs, as the
    controller wrote it through whichever members serve."""
    c.create_topic(name, partitions=3, replication_factor=3)
    wait_full_isr(c, zk, name, 3, 3)


def test_zookeeper_leader_killed_then_a_leader_broker_on_the_two_nodes_left(ensemble_cluster):
    c, zk, ensemble = ensemble_cluster
    wait_for(lambda: zk_controller(zk), 20, "a controller")
    producer = start_load(c, "zk-leader")
    try:
        zk_leader = ensemble.leader()
        ensemble.nodes[zk_leader].kill()
        new_zk_leader = ensemble.wait_quorum()
        assert new_zk_leader != zk_leader
        progress(producer, 200, "progress with the ZooKeeper leader dead")
        _topic_served(c, zk, "made-on-two-nodes")
        # A partition leader broker SIGKILLed: its leadership moves through the two nodes.
        victim = c.leader_of("zk-leader", 0)
        c.brokers[victim].kill()
        wait_new_leader(c, "zk-leader", 0, [victim])
        progress(producer, 200, "progress after the broker's leadership moved")
        ensemble.nodes[zk_leader].start()
        ensemble.wait_quorum()
        c.brokers[victim].start()
        wait_full_isr(c, zk, "zk-leader", 3, 3)
        wait_full_isr(c, zk, "made-on-two-nodes", 3, 3)
        progress(producer, 200, "progress with the ensemble and the cluster whole again")
    except BaseException:
        producer.close()
        raise
    finish(c, producer, "zk-leader", 3)


def test_zookeeper_follower_killed_and_back(ensemble_cluster):
    c, zk, ensemble = ensemble_cluster
    wait_for(lambda: zk_controller(zk), 20, "a controller")
    producer = start_load(c, "zk-follower")
    try:
        follower = ensemble.followers()[0]
        ensemble.nodes[follower].kill()
        progress(producer, 200, "progress with a ZooKeeper follower dead")
        _topic_served(c, zk, "made-without-a-follower")
        ensemble.nodes[follower].start()
        assert ensemble.nodes[follower].mode() in ("leader", "follower")
        ensemble.wait_quorum()
        progress(producer, 200, "progress with the follower back")
        wait_full_isr(c, zk, "zk-follower", 3, 3)
    except BaseException:
        producer.close()
        raise
    finish(c, producer, "zk-follower", 3)


def test_ensemble_restarted_one_node_at_a_time(ensemble_cluster):
    c, zk, ensemble = ensemble_cluster
    old_controller, _ = wait_for(lambda: zk_controller(zk), 20, "a controller")
    producer = start_load(c, "zk-rolling")
    try:
        # Followers first and the leader last, as a ZooKeeper upgrade goes.
        order = ensemble.followers() + [ensemble.leader()]
        for node_id in order:
            ensemble.nodes[node_id].stop()
            ensemble.wait_quorum()
            progress(producer, 100, f"progress with ZooKeeper node {node_id} down")
            ensemble.nodes[node_id].start()
            ensemble.wait_quorum()
            progress(producer, 100, f"progress with ZooKeeper node {node_id} back")
        _topic_served(c, zk, "made-after-the-roll")
        controller, _ = wait_for(lambda: zk_controller(zk), 20, "a controller after the roll")
        wait_full_isr(c, zk, "zk-rolling", 3, 3)
        # The sessions outlived the roll: no broker lost its registration, so
        # the controller did not move (a controller election would say otherwise).
        assert controller == old_controller
    except BaseException:
        producer.close()
        raise
    finish(c, producer, "zk-rolling", 3)
