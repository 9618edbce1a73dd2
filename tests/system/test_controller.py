"""The elected controller acting (issue 15): three real brokers and a real
ZooKeeper. Topics are created and deleted by writing Kafka's znodes directly
(``zk_data`` encoders), as Kafka's own admin tools would, so only the
controller turns them into partition states and requests:

* a new topic gets ``/brokers/topics/<t>/partitions/<p>/state`` in Kafka's JSON
  (first live replica leads, ISR = the live replicas, leader epoch 0, this
  controller's epoch) and every broker's Metadata answers those leaders and
  the controller;
* SIGKILL of a partition leader's broker: the controller elects the next
  in-sync replica at leader epoch + 1 and drops the dead broker from the
  ISR; after a restart the leader's ISR job puts it back (an ISR change
  notification the controller consumes and announces);
* ``/admin/delete_topics/<t>``: StopReplica(delete) on every replica, the
  topic's znodes and its logs go;
* a deposed controller's writes fail (the ``/controller_epoch`` version check).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from kafkapy.metadata.zk import data as zk_data
from support.cluster import SESSION_TIMEOUT_MS
from support.wait import wait_for


@pytest.fixture
def cluster(make_cluster):
    return make_cluster()


def _create_topic(zk, name, assignment) -> uuid.UUID:
    """Kafka's AdminZkClient.createTopicWithAssignment, by hand: config, then the topic znode."""
    topic_id = uuid.uuid4()
    zk.create(zk_data.topic_config_path(name), zk_data.encode_config({}), makepath=True)
    zk.create(zk_data.topic_path(name), zk_data.encode_topic(topic_id, assignment), makepath=True)
    return topic_id


def _state(zk, topic, partition):
    """``(raw JSON dict, znode version)`` of the partition's state znode, or None."""
    if zk.exists(zk_data.partition_state_path(topic, partition)) is None:
        return None
    data, stat = zk.get(zk_data.partition_state_path(topic, partition))
    return json.loads(data), stat.version, data


def _controller(zk):
    data, _ = zk.get(zk_data.CONTROLLER_PATH)
    return zk_data.decode_controller(data).broker_id


def _epoch(zk):
    return zk_data.decode_controller_epoch(zk.get(zk_data.CONTROLLER_EPOCH_PATH)[0])


ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}


def test_new_topic_gets_leaders_isr_and_metadata(cluster):
    c, zk = cluster
    wait_for(lambda: zk.exists(zk_data.CONTROLLER_PATH), 20, "a controller")
    _create_topic(zk, "made", ASSIGNMENT)
    states = wait_for(lambda: all(_state(zk, "made", p) for p in ASSIGNMENT) and
                      {p: _state(zk, "made", p) for p in ASSIGNMENT}, 20, "partition states")
    epoch = _epoch(zk)
    for p, replicas in ASSIGNMENT.items():
        obj, version, raw = states[p]
        assert obj == {"controller_epoch": epoch, "leader": replicas[0], "version": 1, "leader_epoch": 0,
                       "isr": replicas}
        assert version == 0
        # Kafka's own bytes (key order included).
        from kafkapy.metadata.model import PartitionState

        assert raw == zk_data.encode_partition_state(PartitionState(tuple(replicas), replicas[0], 0,
                                                                    tuple(replicas)), epoch)
    # UpdateMetadata reached every broker: each one's Metadata answers the leaders.
    for b in c.brokers.values():
        from confluent_kafka.admin import AdminClient

        def answered(b=b):
            md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics("made", timeout=5)
            t = md.topics["made"]
            return (md.controller_id == _controller(zk) and t.error is None and
                    {p.id: p.leader for p in t.partitions.values()} == {p: r[0] for p, r in ASSIGNMENT.items()})

        wait_for(answered, 20, f"broker {b} to answer the leaders")
    # Partitions added (CreatePartitions' write): the topic znode's data watch.
    data, stat = zk.get(zk_data.topic_path("made"))
    topic = zk_data.decode_topic("made", data)
    zk.set(zk_data.topic_path("made"), zk_data.encode_topic(topic.topic_id, {**ASSIGNMENT, 3: [2, 1]}),
           version=stat.version)
    added = wait_for(lambda: _state(zk, "made", 3), 20, "the added partition's state")
    assert (added[0]["leader"], added[0]["isr"]) == (2, [2, 1])
    wait_for(lambda: c.partitions("made").get(3, (None,))[0] == 2, 20, "Metadata to show partition 3")
    # A topic znode of an older tool (no topic id) is given one, then elected.
    zk.create(zk_data.topic_path("old"), b'{"version":1,"partitions":{"0":[3,1]}}')
    wait_for(lambda: _state(zk, "old", 0), 20, "the old-format topic's state")
    assert zk_data.decode_topic("old", zk.get(zk_data.topic_path("old"))[0]).topic_id is not None
    wait_for(lambda: c.partitions("old").get(0, (None,))[0] == 3, 20, "Metadata to show the old-format topic")


def test_leader_sigkill_moves_leadership_and_the_isr_expands_again(cluster):
    c, zk = cluster
    wait_for(lambda: zk.exists(zk_data.CONTROLLER_PATH), 20, "a controller")
    controller = _controller(zk)
    _create_topic(zk, "moves", ASSIGNMENT)
    c.wait_topic_ready("moves", 3, 3)
    # The victim: a broker that leads a partition and is not the controller.
    partition, victim = next((p, r[0]) for p, r in ASSIGNMENT.items() if r[0] != controller)
    before, version, _ = _state(zk, "moves", partition)
    c.brokers[victim].kill()
    expected_leader = next(r for r in ASSIGNMENT[partition] if r != victim)

    def moved():
        obj, v, _ = _state(zk, "moves", partition)
        return obj["leader"] != victim and (obj, v)

    after, new_version = wait_for(moved, SESSION_TIMEOUT_MS / 1000 + 20, "a new leader")
    assert after["leader"] == expected_leader
    assert after["leader_epoch"] == before["leader_epoch"] + 1
    assert victim not in after["isr"] and new_version > version
    wait_for(lambda: c.leader_of("moves", partition) == expected_leader, 20, "Metadata to show the new leader")
    # The dead broker stays out of every ISR (no leader's ISR job takes back a
    # replica that does not fetch, however caught up it was).
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:  # bounded: 2 s
        assert all(victim not in _state(zk, "moves", p)[0]["isr"] for p in ASSIGNMENT)
        time.sleep(0.2)
    # The restarted broker catches up; the leader's ISR job adds it back and the
    # controller consumes the notification (UpdateMetadata: Metadata shows it).
    c.brokers[victim].start()
    wait_for(lambda: victim in _state(zk, "moves", partition)[0]["isr"], 40, "the ISR to expand in ZooKeeper")
    c.wait_topic_ready("moves", 3, 3, timeout_s=40)
    wait_for(lambda: zk.get_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH) == [], 20,
             "the ISR change notifications to be consumed")


def test_topic_deletion_removes_znodes_and_logs(cluster):
    c, zk = cluster
    wait_for(lambda: zk.exists(zk_data.CONTROLLER_PATH), 20, "a controller")
    _create_topic(zk, "doomed", {0: [1, 2, 3], 1: [2, 3, 1]})
    c.wait_topic_ready("doomed", 2, 3)
    # Metadata shows the ISR from the state znode at once; each broker creates its log on its LeaderAndIsr.
    wait_for(lambda: all((b.log_dirs[0] / "doomed-0").is_dir() for b in c.brokers.values()), 20, "the logs")
    zk.create(zk_data.delete_topic_path("doomed"), zk_data.DELETE_TOPIC_DATA, makepath=True)
    wait_for(lambda: zk.exists(zk_data.topic_path("doomed")) is None, 30, "the topic znode to go")
    assert zk.exists(zk_data.topic_config_path("doomed")) is None
    wait_for(lambda: zk.exists(zk_data.delete_topic_path("doomed")) is None, 10, "the marker to go")
    for b in c.brokers.values():
        # Kafka's way: renamed to <topic>-<p>.<uuid>-delete, removed after file.delete.delay.ms
        wait_for(lambda b=b: not any(p for p in b.log_dirs[0].glob("doomed-*") if not p.name.endswith("-delete")),
                 20, f"{b}'s logs to go")
    wait_for(lambda: "doomed" not in c.metadata().topics, 20, "Metadata to forget the topic")


def test_delete_topics_and_create_again_through_the_admin_api(cluster):
    """DeleteTopics and CreateTopics from a Kafka client (the admin path writes the
    znodes; the controller acts): the name is free again once the deletion finished."""
    from confluent_kafka.admin import NewTopic

    c, zk = cluster
    admin = c.admin()  # held while its futures are pending
    admin.create_topics([NewTopic("again", 2, 3)])["again"].result(30)
    first = c.wait_topic_ready("again", 2, 3)
    admin.delete_topics(["again"])["again"].result(30)
    wait_for(lambda: "again" not in c.metadata().topics and zk.exists(zk_data.topic_path("again")) is None, 30,
             "the deletion to finish")
    admin.create_topics([NewTopic("again", 3, 2)])["again"].result(30)
    second = c.wait_topic_ready("again", 3, 2)
    assert len(first) == 2 and len(second) == 3
    assert all(_state(zk, "again", p)[1] == 0 for p in range(3))  # new state znodes, not the old ones


def test_controller_sigkill_fails_over(cluster):
    """The new controller reads the cluster from ZooKeeper and elects a leader for
    the partitions the dead controller's broker led."""
    c, zk = cluster
    old = wait_for(lambda: zk.exists(zk_data.CONTROLLER_PATH) and _controller(zk), 20, "a controller")
    epoch = _epoch(zk)
    _create_topic(zk, "failover", ASSIGNMENT)
    c.wait_topic_ready("failover", 3, 3)
    partition = next(p for p, r in ASSIGNMENT.items() if r[0] == old)
    before, _, _ = _state(zk, "failover", partition)
    c.brokers[old].kill()
    new = wait_for(lambda: zk.exists(zk_data.CONTROLLER_PATH) and _controller(zk) != old and _controller(zk),
                   SESSION_TIMEOUT_MS / 1000 + 20, "a new controller")
    assert _epoch(zk) > epoch
    after = wait_for(lambda: (s := _state(zk, "failover", partition)[0])["leader"] != old and s,
                     20, "a new leader elected by the new controller")
    assert after["leader_epoch"] == before["leader_epoch"] + 1 and old not in after["isr"]
    assert after["controller_epoch"] == _epoch(zk)

    def metadata_ok():
        md = c.metadata("failover")
        return md.controller_id == new and md.topics["failover"].partitions[partition].leader == after["leader"]

    wait_for(metadata_ok, 20, "Metadata to show the new controller and leader")
    # Leadership changes keep working under the new controller: a new topic is elected.
    _create_topic(zk, "after", {0: [old, new]})
    state = wait_for(lambda: _state(zk, "after", 0), 20, "a state under the new controller")
    assert state[0]["leader"] == new and state[0]["isr"] == [new]


def test_a_paused_controller_is_deposed_and_resigns(cluster):
    """SIGSTOP of the controller's broker past its session: another broker is elected;
    after SIGCONT the old one finds its session gone and resigns, and its broker
    follows the new controller (it rejoins the ISRs)."""
    import os
    import signal

    c, zk = cluster
    old = wait_for(lambda: zk.exists(zk_data.CONTROLLER_PATH) and _controller(zk), 20, "a controller")
    _create_topic(zk, "paused", ASSIGNMENT)
    c.wait_topic_ready("paused", 3, 3)
    broker = c.brokers[old]
    os.killpg(broker.pgid, signal.SIGSTOP)
    try:
        wait_for(lambda: zk.exists(zk_data.CONTROLLER_PATH) and _controller(zk) != old,
                 SESSION_TIMEOUT_MS / 1000 + 20, "a new controller")
        new = _controller(zk)
        partition = next(p for p, r in ASSIGNMENT.items() if r[0] == old)
        wait_for(lambda: _state(zk, "paused", partition)[0]["leader"] != old, 20, "leadership to move")
    finally:
        os.killpg(broker.pgid, signal.SIGCONT)
    wait_for(lambda: "resigns as controller" in broker.log_text(), 30, "the old controller to resign")
    assert _controller(zk) == new
    wait_for(lambda: old in {int(i) for i in zk.get_children(zk_data.BROKER_IDS_PATH)}, 20, "re-registration")
    c.wait_topic_ready("paused", 3, 3, timeout_s=60)


def test_a_paused_follower_leaves_the_isr_and_rejoins(make_cluster):
    """The leader's ISR job alone (the follower's session stays): SIGSTOP of a
    follower, then a record on the leader: the follower behind the log end
    offset for longer than replica.lag.time.max.ms leaves the ISR in
    ZooKeeper (leader and leader epoch kept, a new znode version), SIGCONT lets
    it catch up and the ISR expands; both reach Metadata through the
    controller's ISR change notifications. (As in Kafka, a follower at the
    leader's log end offset stays in sync however long it is silent: without
    the record an idle partition keeps a stopped follower.)"""
    import os
    import signal

    from support.cluster import PinnedClient

    c, zk = make_cluster(**{"replica.lag.time.max.ms": 1000, "zookeeper.session.timeout.ms": 15000})
    _create_topic(zk, "lag", {0: [1, 2, 3]})
    c.wait_topic_ready("lag", 1, 3)
    before, version, _ = _state(zk, "lag", 0)
    follower = c.brokers[3]
    os.killpg(follower.pgid, signal.SIGSTOP)
    try:
        leader = PinnedClient(c.brokers[before["leader"]])
        try:
            assert leader.produce("lag", 0, [1], acks=1) == (0, 0)
        finally:
            leader.close()
        shrunk = wait_for(lambda: (s := _state(zk, "lag", 0)) and 3 not in s[0]["isr"] and s, 10,
                          "the ISR to shrink")
        assert (shrunk[0]["leader"], shrunk[0]["leader_epoch"], shrunk[0]["controller_epoch"]) == (
            before["leader"], before["leader_epoch"], before["controller_epoch"])
        assert shrunk[0]["isr"] == [1, 2] and shrunk[1] == version + 1
        wait_for(lambda: c.partitions("lag")[0][2] == (1, 2), 10, "Metadata to show the shrunk ISR")
    finally:
        os.killpg(follower.pgid, signal.SIGCONT)
    expanded = wait_for(lambda: (s := _state(zk, "lag", 0)) and 3 in s[0]["isr"] and s, 20, "the ISR to expand")
    assert expanded[0]["isr"] == [1, 2, 3] and expanded[0]["leader_epoch"] == before["leader_epoch"]
    c.wait_topic_ready("lag", 1, 3, timeout_s=20)
    wait_for(lambda: zk.get_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH) == [], 20,
             "the notifications to be consumed")


def test_the_controller_keeps_acting_after_zookeeper_restarts(zookeeper_factory, make_cluster):
    """Connections drop, the sessions outlive the restart: every broker stays up,
    the same controller keeps its watches and elects a topic created afterwards."""
    server = zookeeper_factory()
    # Sessions must outlive the restart: a loaded machine took 4.4 s to bring
    # ZooKeeper back, past the harness's 4 s sessions (two brokers expired and
    # the new topic's leader was the third). 10 s is the most this server allows.
    c, client = make_cluster(zookeeper=server, **{"zookeeper.session.timeout.ms": 10000})
    zk = None
    try:
        old = wait_for(lambda: client.exists(zk_data.CONTROLLER_PATH) and _controller(client), 20, "a controller")
        client.stop()
        client.close()
        server.restart(kill=True)
        zk = server.client(c.chroot)
        _create_topic(zk, "restarted", {0: [1, 2, 3]})
        state = wait_for(lambda: _state(zk, "restarted", 0), 30, "a state after the restart")
        # (what a failure needs to be read: which brokers kept their sessions)
        seen = (state, _controller(zk), old, sorted(zk.get_children(zk_data.BROKER_IDS_PATH)),
                {i: b.running for i, b in c.brokers.items()})
        assert all(b.running for b in c.brokers.values()), seen
        c.wait_topic_ready("restarted", 1, 3)
        wait_for(lambda: sorted(zk.get_children(zk_data.BROKER_IDS_PATH)) == ["1", "2", "3"], 30,
                 "every broker registered")
        # A broker whose reconnect reached ZooKeeper between its bind and its
        # serving waits out the handshake (the session timeout, as Kafka's
        # client does) and finds its session expired: it registers again and
        # a controller it held moves. Only then may the controller change.
        # Read once every broker is registered again: the expiry is logged only
        # when that handshake ends, which may be after the topic was elected
        # (a run saw broker 1's registration gone and its log not yet saying so).
        expired = [i for i, b in c.brokers.items() if "Session has expired" in b.log_text()]
        if not expired:
            assert state[0]["leader"] == 1 and _controller(zk) == old, seen
        else:
            print(f"sessions of brokers {expired} expired across the restart: {seen}")
    finally:
        if zk is not None:
            zk.stop()
            zk.close()


def test_a_deposed_controller_cannot_write(zookeeper):
    """Two ZkControllers as two terms: the old one's write fails on the epoch check."""
    from kafkapy.controller.effects import WritePartitionState
    from kafkapy.metadata.model import PartitionState
    from kafkapy.metadata.zk.controller import ControllerMoved, ZkController
    from kafkapy.metadata.zk.client import ZkClient

    with ZkClient(zookeeper.connect_string("/deposed"), 4000) as old, \
            ZkClient(zookeeper.connect_string("/deposed"), 4000) as new:
        assert old.try_elect_controller(1).elected
        old_term = ZkController(old, ZkController.epoch_version(old)[1])
        old.zk.create(zk_data.topic_path("t"), zk_data.encode_topic(uuid.uuid4(), {0: [1, 2]}), makepath=True)
        write = WritePartitionState("t", 0, PartitionState((1, 2), 1, 0, (1, 2)), 1, None)
        assert old_term.write_partition_states([write]) == set()
        # The old controller's session ends; another broker is elected.
        old.zk.delete(zk_data.CONTROLLER_PATH)
        election = new.try_elect_controller(2)
        assert election.elected and election.controller_epoch == 2
        new_term = ZkController(new, ZkController.epoch_version(new)[1])
        stale = WritePartitionState("t", 0, PartitionState((1, 2), 1, 1, (1,)), 1, 0)
        with pytest.raises(ControllerMoved):
            old_term.write_partition_states([stale])
        with pytest.raises(ControllerMoved):
            old_term.delete_topic("t")
        data, stat = new.zk.get(zk_data.partition_state_path("t", 0))
        assert json.loads(data)["isr"] == [1, 2] and stat.version == 0
        # The new term writes; a lost version is reported, not written.
        fresh = WritePartitionState("t", 0, PartitionState((1, 2), 2, 1, (2,)), 2, 0)
        assert new_term.write_partition_states([fresh]) == set()
        assert new_term.write_partition_states([fresh]) == {("t", 0)}  # version 0 is gone
        assert json.loads(new.zk.get(zk_data.partition_state_path("t", 0))[0])["leader"] == 2
