"""ZooKeeper faults under load (issue 14): three brokers in network namespaces
(``support.cluster.NetworkLab``) so ZooKeeper can be made unreachable from
one broker or from all of them while they still reach each other and the
clients reach them.

* One broker's session expires: its link to ZooKeeper is cut for longer than
  ``zookeeper.session.timeout.ms``. ZooKeeper drops its registration, the
  controller moves its leaderships and ISR places away; healed, the broker
  finds its session lost, registers again (Kafka's re-registration after an
  expiry), the controller treats it as bounced and it rejoins every ISR.
* ZooKeeper unreachable from every broker for longer than the session
  timeout: every session expires, the controller's too. Leaders keep
  serving meanwhile (no ISR change can be written, so none is made); healed,
  every broker registers again, one is elected controller, every ISR is full.
* ZooKeeper SIGKILLed and restarted (sessions outlive it): nothing moves.

Each is produce-consume-validate with an idempotent acks=all producer: the
cluster converges without a manual step and nothing acknowledged is lost.
"""

from __future__ import annotations

import time

import pytest

from kafkapy.metadata.zk import data as zk_data
from support.cluster import (
    SESSION_TIMEOUT_MS,
    create_topic_assigned,
    finish,
    progress,
    start_load,
    wait_full_isr,
    zk_controller,
    zk_partition_state,
)
from support.wait import wait_for

pytestmark = pytest.mark.timeout(180)

EXPIRED_S = SESSION_TIMEOUT_MS / 1000 + 3  # past the session timeout, with a margin


def _registered(zk) -> set:
    return {int(b) for b in zk.get_children(zk_data.BROKER_IDS_PATH)}


def test_one_brokers_session_expires_and_it_rejoins(lab_cluster, network_lab):
    lab, _server = network_lab
    c, zk = lab_cluster()
    controller, _ = wait_for(lambda: zk_controller(zk), 20, "a controller")
    victim = next(i for i in (1, 2, 3) if i != controller)
    producer = start_load(c, "expiry")
    try:
        epoch_before = zk_partition_state(zk, "expiry", victim - 1)["leader_epoch"]
        lab.cut(victim, zookeeper=True)  # its peers and the clients still reach it
        wait_for(lambda: victim not in _registered(zk), EXPIRED_S + 10, "the victim's registration to expire")
        # The controller moved its leadership (partition victim-1 was led by it).
        wait_for(lambda: zk_partition_state(zk, "expiry", victim - 1)["leader"] not in (victim, -1), 20,
                 "its leadership moved")
        assert zk_partition_state(zk, "expiry", victim - 1)["leader_epoch"] > epoch_before
        progress(producer, 200, "progress while its session is gone", timeout_s=40)
        lab.heal(victim)
        wait_for(lambda: victim in _registered(zk), 30, "the victim registered again")
        wait_full_isr(c, zk, "expiry", 3, 3, timeout_s=60)
        progress(producer, 100, "progress after it rejoined")
    except BaseException:
        producer.close()
        raise
    finish(c, producer, "expiry", 3)
    producer.close()
    assert "ZooKeeper session was lost; registering again" in c.brokers[victim].log_text()


def test_zookeeper_unreachable_from_every_broker_past_the_session_timeout(lab_cluster, network_lab):
    lab, _server = network_lab
    c, zk = lab_cluster()
    old_controller, old_epoch = wait_for(lambda: zk_controller(zk), 20, "a controller")
    producer = start_load(c, "nozk")
    try:
        for i in c.brokers:
            lab.cut(i, zookeeper=True)
        wait_for(lambda: not _registered(zk), EXPIRED_S + 10, "every registration to expire")
        cut_at = time.monotonic()
        # Leaders go on serving acks=all (their ISRs stay full: nobody fell behind).
        progress(producer, 200, "progress without ZooKeeper", timeout_s=30)
        assert time.monotonic() - cut_at < 30
        for i in c.brokers:
            lab.heal(i)
        wait_for(lambda: _registered(zk) == {1, 2, 3}, 40, "every broker registered again")
        controller, epoch = wait_for(lambda: zk_controller(zk), 30, "a controller again")
        assert epoch > old_epoch
        wait_full_isr(c, zk, "nozk", 3, 3, timeout_s=60)
        progress(producer, 200, "progress after ZooKeeper came back")
    except BaseException:
        producer.close()
        raise
    finish(c, producer, "nozk", 3)
    producer.close()
    lost = [i for i, b in c.brokers.items() if "ZooKeeper session was lost; registering again" in b.log_text()]
    assert lost == [1, 2, 3], f"brokers that saw their session expire: {lost}"


def test_zookeeper_sigkilled_and_restarted_under_load(lab_cluster, network_lab):
    _lab, server = network_lab
    c, zk = lab_cluster()
    before = zk_controller(zk)
    producer = start_load(c, "zkrestart")
    try:
        server.restart(kill=True)  # back within the session timeout: the sessions outlive it
        progress(producer, 300, "progress after ZooKeeper's restart")
        wait_for(lambda: _registered(zk) == {1, 2, 3}, 30, "every broker still registered")
        assert zk_controller(zk) == before  # nothing moved
        # The cluster still acts: a new topic is created and led.
        create_topic_assigned(c, "after-restart", [[1, 2, 3]])
        wait_full_isr(c, zk, "zkrestart", 3, 3)
    except BaseException:
        producer.close()
        raise
    finish(c, producer, "zkrestart", 3)
    producer.close()
