"""Network partitions (issue 14): three brokers, each in a network namespace
this module made (``support.cluster.NetworkLab``), ZooKeeper and the clients
in the root namespace reaching them through a bridge.

A partition leader is cut off from the other brokers, from ZooKeeper and
from the majority's clients (every packet it sends them dropped) while a
client on the minority side (its own address, ``PinnedClient``) still
reaches it, as on a real partition:

* acks=all writes sent to it (min.insync.replicas=2) are never acknowledged:
  it cannot shrink its ISR (a ZooKeeper write) and its followers stop
  fetching, so its high watermark stands still and they time out;
* what it serves to readers meanwhile is what was committed before the cut
  (a prefix of the final log, at the same offsets), never its own unreplicated
  writes;
* the majority elects a new leader after the session timeout and the
  idempotent producer goes on there;
* healed, it rejoins (its expired session replaced, Kafka's re-registration),
  truncates what it wrote alone, and every replica is the same bytes.

The produce side is Kafka's produce-consume-validate (``support.cluster``).
"""

from __future__ import annotations

import time

import pytest

from support.cluster import (
    SESSION_TIMEOUT_MS,
    BackgroundProducer,
    PinnedClient,
    consume_all,
    create_topic_assigned,
    progress,
    validate,
    wait_full_isr,
    wait_replicas_identical,
    zk_controller,
    zk_partition_state,
)
from support.wait import wait_for

pytestmark = pytest.mark.timeout(180)

# Values the minority client writes: never sent by the background producer.
MINORITY_BASE = 10_000_000
NEW_LEADER_S = SESSION_TIMEOUT_MS / 1000 + 10


@pytest.mark.parametrize("victim", ["leader", pytest.param("controller", marks=pytest.mark.long)])
def test_isolated_leader_stops_acking_serves_only_committed_and_truncates(lab_cluster, network_lab,
                                                                          victim):
    """``victim``: a partition leader that is not the controller, or the controller
    leading the partition (its session expires too: a new controller elects)."""
    lab, _server = network_lab
    c, zk = lab_cluster()
    controller, controller_epoch = wait_for(lambda: zk_controller(zk), 20, "a controller")
    a, b = [i for i in (1, 2, 3) if i != controller]
    leader, other, third = (a, b, controller) if victim == "leader" else (controller, a, b)
    create_topic_assigned(c, "cut", [[leader, other, third]], config={"min.insync.replicas": "2"})
    # socket.timeout.ms (librdkafka's client-side bound on a request; request.timeout.ms
    # is the broker's) short: a request in flight to the cut-off leader, whose
    # answers are dropped, times out and is retried on the new leader within
    # seconds rather than after 60.
    producer = BackgroundProducer(c.bootstrap, "cut", 1, rate_per_s=200,
                                  config={"request.timeout.ms": 5000, "socket.timeout.ms": 6000}).start()
    minority = PinnedClient(c.brokers[leader], source_address=lab.minority_client_address)
    try:
        progress(producer, 200, "200 acknowledged before the partition")
        epoch_before = zk_partition_state(zk, "cut", 0)["leader_epoch"]
        lab.isolate(leader)
        cut_at = time.monotonic()
        answers, served, n = [], [], 0
        # The minority side: acks=all writes and reads on the cut-off leader,
        # until the majority has elected a new one (bounded by NEW_LEADER_S).
        while zk_partition_state(zk, "cut", 0)["leader"] in (leader, -1):
            assert time.monotonic() - cut_at < NEW_LEADER_S, "no new leader on the majority side"
            answers.append(minority.produce("cut", 0, [MINORITY_BASE + n, MINORITY_BASE + n + 1], timeout_ms=1500))
            n += 2
            served.append(minority.fetch("cut", 0, 0))
        new_leader = zk_partition_state(zk, "cut", 0)["leader"]
        assert new_leader in (other, third)
        if victim == "controller":
            _new_controller, epoch = wait_for(lambda: (z := zk_controller(zk)) and z[0] != leader and z, 20,
                                             "another controller")
            assert epoch > controller_epoch
        assert zk_partition_state(zk, "cut", 0)["leader_epoch"] > epoch_before
        # Still cut off after the election: the zombie answers no write either.
        for _ in range(2):  # bounded: two more rounds
            answers.append(minority.produce("cut", 0, [MINORITY_BASE + n], timeout_ms=1500))
            n += 1
            served.append(minority.fetch("cut", 0, 0))
        progress(producer, 200, "progress on the majority side", timeout_s=40)
        # REQUEST_TIMED_OUT (its followers never fetch the records), or NOT_ENOUGH_REPLICAS,
        # NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER: never an acknowledgement.
        assert answers and all(code in (7, 19, 20, 6) for code, _ in answers), \
            f"the cut-off leader acknowledged: {answers}"
        lab.heal(leader)
        wait_full_isr(c, zk, "cut", 1, 3, timeout_s=60)  # it rejoined as a follower
        progress(producer, 100, "progress after the heal")
    except BaseException:
        producer.close()
        raise
    finally:
        minority.close()
    producer.stop()
    assert producer.errors == [], producer.errors[:5]
    consumed = consume_all(c.bootstrap, "cut", 1)
    validate(producer.acked, consumed)
    final = consumed[0]  # offsets start at 0 and have no gaps (no control records)
    assert not [v for v in final if v >= MINORITY_BASE], "a write of the minority side survived"
    # What the minority leader served was committed: the final log at those offsets.
    reads = [(o, v) for _code, _hw, records in served for o, v in records]
    assert reads, "the cut-off leader served nothing"
    assert all(v < MINORITY_BASE and final[o] == v for o, v in reads), \
        f"stale or uncommitted reads on the minority side: {[r for r in reads if final[r[0]] != r[1]][:5]}"
    assert max(hw for _code, hw, _records in served) <= len(final)
    # Its own writes were truncated: every replica is the same bytes.
    wait_replicas_identical(c, "cut", 0)
    assert "truncating to" in c.brokers[leader].log_text()
    producer.close()
