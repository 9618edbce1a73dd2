"""Process pauses longer than every timeout (issue 14): SIGSTOP of a broker's
whole process group (its ZooKeeper session child included) past
``zookeeper.session.timeout.ms`` and ``replica.lag.time.max.ms``, then SIGCONT,
under an idempotent acks=all producer (min.insync.replicas=2):

* the leader: the controller elects another (higher leader epoch); a Produce
  the paused leader had in its socket when it stopped is answered after
  SIGCONT with an error, never acknowledged (it cannot grow its high
  watermark: its followers fetch from the new leader, and its ISR write is
  fenced by the partition epoch), and it rejoins as a follower (zombie
  fencing by leader epoch);
* the controller: a new one is elected (higher controller epoch); the paused
  one resigns when it finds its session lost and rejoins;
* a follower: it leaves every ISR and comes back.

Nothing acknowledged is lost, nothing is written twice, order is kept in
each partition (produce-consume-validate), and every replica ends the same
bytes. Victims are signalled by the process group this test started.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from support.cluster import (
    REPLICA_LAG_TIME_MAX_MS,
    SESSION_TIMEOUT_MS,
    BackgroundProducer,
    PinnedClient,
    create_topic_assigned,
    finish,
    progress,
    wait_full_isr,
    wait_replicas_identical,
    zk_controller,
    zk_partition_state,
)
from support.wait import wait_for

pytestmark = pytest.mark.timeout(180)

NEW_LEADER_S = SESSION_TIMEOUT_MS / 1000 + 10
ZOMBIE_VALUE = 10_000_000  # never sent by the background producer


def _load(c, topic: str, assignment) -> BackgroundProducer:
    create_topic_assigned(c, topic, assignment, config={"min.insync.replicas": "2"})
    # socket.timeout.ms: requests stuck on the paused broker time out in seconds.
    producer = BackgroundProducer(c.bootstrap, topic, len(assignment), rate_per_s=200,
                                  config={"request.timeout.ms": 5000, "socket.timeout.ms": 6000}).start()
    progress(producer, 200, "200 acknowledged before the pause")
    return producer


def _pause(broker) -> None:
    os.killpg(broker.pgid, signal.SIGSTOP)


def _resume(broker) -> None:
    os.killpg(broker.pgid, signal.SIGCONT)


def test_paused_leader_resumes_as_a_fenced_zombie(make_cluster):
    c, zk = make_cluster()
    controller, _ = wait_for(lambda: zk_controller(zk), 20, "a controller")
    leader, other = [i for i in (1, 2, 3) if i != controller]
    producer = _load(c, "zombie", [[leader, other, controller], [other, controller, leader]])
    zombie = PinnedClient(c.brokers[leader])
    pool = ThreadPoolExecutor(1)
    try:
        epoch = zk_partition_state(zk, "zombie", 0)["leader_epoch"]
        _pause(c.brokers[leader])
        paused_at = time.monotonic()
        try:
            # Sent while it is stopped: the kernel queues it; the broker reads it on SIGCONT.
            pending = pool.submit(zombie.produce, "zombie", 0, [ZOMBIE_VALUE], -1, 3000)
            state = wait_for(lambda: (s := zk_partition_state(zk, "zombie", 0))["leader"] not in (leader, -1)
                             and s, NEW_LEADER_S, "a new leader while the old one is paused")
            assert state["leader_epoch"] > epoch and leader not in state["isr"]
            progress(producer, 200, "progress while the leader is paused", timeout_s=40)
            # The new leader proves its session expired; ZooKeeper counts from the
            # session's last ping, up to a third of the timeout before the SIGSTOP,
            # so that can come sooner than the timeout. Keep it stopped past every
            # timeout before it resumes, measured from the pause.
            time.sleep(max(0.0, paused_at + max(SESSION_TIMEOUT_MS, REPLICA_LAG_TIME_MAX_MS) / 1000
                           + 0.5 - time.monotonic()))
        finally:
            _resume(c.brokers[leader])
        code, _offset = pending.result(timeout=60)
        # NOT_LEADER_OR_FOLLOWER once it learned, or REQUEST_TIMED_OUT: never acknowledged.
        assert code in (6, 7, 19, 20), f"the resumed zombie answered {code}"
        again, _ = zombie.produce("zombie", 0, [ZOMBIE_VALUE + 1], -1, 3000)
        assert again in (6, 7, 19, 20), f"the resumed zombie answered {again}"
        wait_full_isr(c, zk, "zombie", 2, 3, timeout_s=60)
        progress(producer, 100, "progress after the zombie rejoined")
    except BaseException:
        producer.close()
        raise
    finally:
        pool.shutdown(wait=False)
        zombie.close()
    consumed = finish(c, producer, "zombie", 2)
    producer.close()
    assert not [v for vs in consumed.values() for v in vs if v >= ZOMBIE_VALUE], "a zombie write survived"
    for p in range(2):
        wait_replicas_identical(c, "zombie", p)


def test_paused_controller_is_replaced_and_rejoins(make_cluster):
    c, zk = make_cluster()
    controller, epoch = wait_for(lambda: zk_controller(zk), 20, "a controller")
    a, b = [i for i in (1, 2, 3) if i != controller]
    producer = _load(c, "ctlpause", [[controller, a, b], [a, b, controller]])
    try:
        _pause(c.brokers[controller])
        try:
            new, new_epoch = wait_for(lambda: (z := zk_controller(zk)) and z[0] != controller and z,
                                      NEW_LEADER_S, "another controller")
            assert new_epoch > epoch
            wait_for(lambda: zk_partition_state(zk, "ctlpause", 0)["leader"] in (a, b), 20,
                     "the paused controller's partition led elsewhere")
            progress(producer, 200, "progress while the controller is paused", timeout_s=40)
        finally:
            _resume(c.brokers[controller])
        wait_for(lambda: "resigns as controller" in c.brokers[controller].log_text(), 30,
                 "the old controller to resign")
        assert zk_controller(zk) == (new, new_epoch)
        wait_full_isr(c, zk, "ctlpause", 2, 3, timeout_s=60)
        progress(producer, 100, "progress after the old controller rejoined")
    except BaseException:
        producer.close()
        raise
    finish(c, producer, "ctlpause", 2)
    producer.close()
    for p in range(2):
        wait_replicas_identical(c, "ctlpause", p)


@pytest.mark.long
def test_paused_follower_past_the_session_timeout_rejoins(make_cluster):
    c, zk = make_cluster()
    controller, _ = wait_for(lambda: zk_controller(zk), 20, "a controller")
    a, follower = [i for i in (1, 2, 3) if i != controller]
    producer = _load(c, "fpause", [[a, controller, follower], [controller, a, follower]])
    try:
        _pause(c.brokers[follower])
        try:
            wait_for(lambda: all(follower not in zk_partition_state(zk, "fpause", p)["isr"] for p in range(2)),
                     NEW_LEADER_S, "the paused follower out of every ISR")
            time.sleep(SESSION_TIMEOUT_MS / 1000)  # its session has expired by now too
            progress(producer, 200, "progress while the follower is paused", timeout_s=40)
        finally:
            _resume(c.brokers[follower])
        wait_full_isr(c, zk, "fpause", 2, 3, timeout_s=60)
        progress(producer, 100, "progress after the follower rejoined")
    except BaseException:
        producer.close()
        raise
    finish(c, producer, "fpause", 2)
    producer.close()
    for p in range(2):
        wait_replicas_identical(c, "fpause", p)
