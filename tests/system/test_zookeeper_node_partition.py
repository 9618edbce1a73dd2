"""One ZooKeeper node cut off from everything by the network (issue 27, section 2).

Three brokers and a three-node ensemble, each broker and each ZooKeeper node
in a network namespace of its own that this module made
(``support.cluster.zookeeper_lab``: ZooKeeper members listen on their
namespace's address, and the quorum runs across the bridge). A ZooKeeper
node is cut off (``NetworkLab.cut_zookeeper_node``: everything it sends to
the other nodes, the brokers and the clients is dropped) under an idempotent
acks=all producer, as in Kafka's produce-consume-validate system tests:

* the ZooKeeper leader: the two others elect a leader; the brokers whose
  sessions were on it move them to the others (or, past the session
  timeout, register again);
* a follower: the quorum is untouched; its clients move.

During the cut a topic is created and served (the controller writes through
the two nodes left); healed, the node rejoins the quorum, every ISR is full,
and everything acknowledged is read back once and in order.
"""

from __future__ import annotations

import pytest

from support.cluster import finish, progress, start_load, wait_full_isr, zk_controller
from support.wait import wait_for

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("victim", ["leader", "follower"])
def test_zookeeper_node_cut_off(zookeeper_lab, zookeeper_lab_cluster, victim):
    lab, ensemble = zookeeper_lab
    c, zk = zookeeper_lab_cluster(**{"offsets.topic.num.partitions": 3})
    controller_before = wait_for(lambda: zk_controller(zk), 20, "a controller")
    topic = f"zk-cut-{victim}"
    producer = start_load(c, topic)
    node = None
    try:
        leader = ensemble.leader()
        node = leader if victim == "leader" else ensemble.followers()[0]
        others = [j for j in ensemble.nodes if j != node]
        lab.cut_zookeeper_node(node)
        # The two left hold (or elect) the quorum; the cut node, unable to
        # reach either, serves no one.
        new_leader = ensemble.wait_quorum(among=others)
        assert new_leader != node
        if victim == "follower":
            assert new_leader == leader
        wait_for(lambda: ensemble.nodes[node].mode() is None, 30, f"ZooKeeper node {node} unreachable")
        progress(producer, 200, f"progress with ZooKeeper node {node} cut off")
        made = f"made-while-{victim}-cut"
        c.create_topic(made, partitions=3, replication_factor=3)
        wait_full_isr(c, zk, made, 3, 3)
        lab.heal_zookeeper_node(node)
        node = None
        ensemble.wait_quorum(timeout_s=60)  # all three again, the healed one following
        controller_after = wait_for(lambda: zk_controller(zk), 20, "a controller after the heal")
        if victim == "follower":
            # The quorum never moved: every session on the cut node moved to
            # another within the session timeout (each connection attempt to
            # the silent node bounded as the Java client bounds it), so no
            # registration was lost and the controller stayed.
            assert controller_after == controller_before
        progress(producer, 200, "progress with the ensemble whole again")
        wait_full_isr(c, zk, topic, 3, 3)
        wait_full_isr(c, zk, made, 3, 3)
    except BaseException:
        if node is not None:
            lab.heal_zookeeper_node(node)
        producer.close()
        raise
    finish(c, producer, topic, 3)
