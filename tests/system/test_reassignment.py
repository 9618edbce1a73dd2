"""Partition reassignment and replication throttles on three real brokers and a
real ZooKeeper (issue 14).

* A partition's replicas move from {1,2} to {2,3} under an idempotent acks=all
  producer (kafka-python's AlterPartitionReassignments): broker 1's replica
  is deleted, ZooKeeper's topic znode ends with no adding/removing replicas,
  and everything acknowledged is consumed once, in order.
* The replication factor goes up ({1} -> {1,2,3}) and down (-> {3}, the
  leader moving off broker 1).
* A reassignment held back by a throttle is listed in progress
  (ListPartitionReassignments, with adding/removing replicas) and cancelled:
  the partition goes back to {1,2}, the added replica is deleted.
* ``kafkapy-reassign-partitions`` --generate / --execute --throttle /
  --verify (which removes the throttles, as Kafka's tool does).
* A throttled reassignment is measurably slower than the same unthrottled.
* The controller is SIGKILLed mid-reassignment; the next controller resumes
  it from the topic znode and it completes, under load.
* ``/admin/reassign_partitions`` (Kafka's ZooKeeper-written reassignment)
  is acted on and deleted when done.
* Apache's Java AdminClient 3.9 reassigns (and gets NO_REASSIGNMENT_IN_PROGRESS
  for a cancel with nothing to cancel) and lists.
* A topic deleted while one of its partitions is being reassigned is
  deleted only once the reassignment ends (here: is cancelled).

One three-broker cluster serves the module (auto leader rebalance off).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafkapy.metadata.zk import data as zk_data
from kafkapy.metadata.zk.controller import REASSIGN_PARTITIONS_PATH
from support.cluster import (
    BackgroundProducer,
    Cluster,
    consume_all,
    controller_id,
    create_topic_assigned,
    running_cluster,
    validate,
    zk_partition_state,
)
from support.wait import wait_for

pytestmark = pytest.mark.timeout(240)

# Smaller follower fetches than Kafka's 1 MB, so a throttle acts within a few MB of data.
OVERRIDES = {"offsets.topic.num.partitions": 3, "auto.leader.rebalance.enable": False,
             "replica.fetch.max.bytes": 262144}


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    with running_cluster(zookeeper, tmp_path_factory.mktemp("reassign"), "/reassignment", OVERRIDES) as made:
        yield made


def _admin(c: Cluster):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=30000)


def _topic_znode(zk, topic: str):
    return zk_data.decode_topic(topic, zk.get(zk_data.topic_path(topic))[0])


def _reassign(c: Cluster, moves: dict) -> dict:
    """AlterPartitionReassignments through kafka-python: ``{(topic, p): replicas or None}``
    -> the partitions that failed, with their error classes."""
    from kafka.structs import TopicPartition

    admin = _admin(c)
    try:
        answered = admin.alter_partition_reassignments({TopicPartition(t, p): r for (t, p), r in moves.items()})
        assert set(answered) == {TopicPartition(t, p) for t, p in moves}, answered
        return {tp: e for tp, e in answered.items() if e is not None}
    finally:
        admin.close()


def _ongoing(c: Cluster) -> dict:
    admin = _admin(c)
    try:
        return admin.list_partition_reassignments()
    finally:
        admin.close()


def _wait_done(c: Cluster, zk, topic: str, partition: int, replicas, timeout_s: float = 60.0) -> None:
    """Until the topic znode holds ``replicas`` with nothing being added or removed, the
    ISR is those replicas in ZooKeeper and Metadata, and no replica is left on
    a broker outside them."""
    def done():
        t = _topic_znode(zk, topic)
        if t.partitions[partition] != tuple(replicas) or t.adding_replicas or t.removing_replicas:
            return False
        leader, assigned, isr = c.partitions(topic)[partition]
        return list(assigned) == list(replicas) and sorted(isr) == sorted(replicas) and leader in replicas

    wait_for(done, timeout_s, f"{topic}-{partition} reassigned to {list(replicas)}")
    wait_for(lambda: all((b.log_dirs[0] / f"{topic}-{partition}").exists() == (i in replicas)
                         for i, b in c.brokers.items()), 30, f"only brokers {list(replicas)} hold {topic}-{partition}")


def _fill(c: Cluster, topic: str, partition: int, count: int, size: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(count):  # numbers padded to ``size`` bytes (consume_all reads them back), none
        p.produce(topic, str(10**9 + i).ljust(size).encode(), partition=partition)  # a producer's
        p.poll(0)
    assert p.flush(60) == 0


def test_move_replicas_under_acks_all_load(cluster):
    c, zk = cluster
    topic = "move"
    create_topic_assigned(c, topic, [[1, 2], [2, 1]], config={"min.insync.replicas": 1})
    producer = BackgroundProducer(c.bootstrap, topic, 2, rate_per_s=300).start()
    try:
        wait_for(lambda: producer.acked_count() >= 300, 30, "300 acknowledged before the move")
        t0 = time.monotonic()
        assert _reassign(c, {(topic, 0): [2, 3], (topic, 1): [3, 2]}) == {}
        _wait_done(c, zk, topic, 0, [2, 3])
        _wait_done(c, zk, topic, 1, [3, 2])
        print(f"moved in {time.monotonic() - t0:.1f} s")
        assert _ongoing(c) == {}
        before = producer.acked_count()
        wait_for(lambda: producer.acked_count() >= before + 300, 30, "progress after the move")
    finally:
        producer.halt()
    producer.stop()
    assert producer.errors == [], producer.errors[:5]
    consumed = consume_all(c.bootstrap, topic, 2)
    validate(producer.acked, consumed)
    assert producer.acked_count() >= 600


def test_replication_factor_up_and_down(cluster):
    c, zk = cluster
    topic = "rf"
    create_topic_assigned(c, topic, [[1]])
    _fill(c, topic, 0, 200, 1000)
    assert _reassign(c, {(topic, 0): [1, 2, 3]}) == {}
    _wait_done(c, zk, topic, 0, [1, 2, 3])
    assert _reassign(c, {(topic, 0): [3]}) == {}
    _wait_done(c, zk, topic, 0, [3])
    # The controller's decision, from ZooKeeper: _wait_done saw one broker's
    # Metadata, and another's may not have applied the same UpdateMetadata yet
    # (read right after one showed the end, another still named leader 1 with
    # replicas (3, 1) once in 48 reads on a CPU-loaded machine).
    assert zk_partition_state(zk, topic, 0)["leader"] == 3
    assert len(consume_all(c.bootstrap, topic, 1)[0]) == 200


def test_errors_as_kafka(cluster):
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError, UnknownTopicOrPartitionError

    c, _zk = cluster
    create_topic_assigned(c, "errors", [[1, 2]])
    got = {tp.topic + str(tp.partition): e for tp, e in _reassign(c, {
        ("errors", 0): None, ("errors", 5): [1], ("nope", 0): [1], ("errors", 1): [1, 1]}).items()}
    assert got == {"errors0": NoReassignmentInProgressError, "errors5": UnknownTopicOrPartitionError,
                   "nope0": UnknownTopicOrPartitionError, "errors1": InvalidReplicationAssignmentError}
    got = _reassign(c, {("errors", 0): [1, 9]})
    assert list(got.values()) == [InvalidReplicationAssignmentError]  # broker 9 is not live
    # an empty list (kafka-python refuses to send one): through the raw request
    from kafkapy.tools.reassign_partitions import Cluster as Raw

    assert list(Raw(c.bootstrap, 30000).alter({("errors", 0): []})) == [("errors", 0)]
    assert _ongoing(c) == {}


def _set_configs(c: Cluster, brokers: dict = None, topics: dict = None, applied_on=None) -> None:
    """IncrementalAlterConfigs SET (a None value: DELETE) through confluent-kafka; with
    ``applied_on`` (a broker id), until that broker's own DescribeConfigs shows them all
    (its replica fetcher reads the same image: a throttle is in force there)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resources = []
    for kind, entries in (("broker", brokers or {}), ("topic", topics or {})):
        for name, configs in entries.items():
            resources.append(ConfigResource(kind, str(name), incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.DELETE if v is None else
                            AlterConfigOpType.SET) for k, v in configs.items()]))
    admin = c.admin()
    for future in admin.incremental_alter_configs(resources).values():
        future.result(timeout=30)
    if applied_on is not None:
        wanted = [(4 if kind == "broker" else 2, str(name), k, v)
                  for kind, entries in (("broker", brokers or {}), ("topic", topics or {}))
                  for name, configs in entries.items() for k, v in configs.items()]
        wait_for(lambda: all(_described(c, applied_on, t, n, k) == v for t, n, k, v in wanted), 30,
                 f"the configs applied on broker {applied_on}")


def _described(c: Cluster, broker_id: int, resource_type: int, name: str, key: str):
    """``key``'s value as ``broker_id`` itself answers DescribeConfigs (v4) for the resource."""
    from kafkapy.client.blocking import request_once

    b = c.brokers[broker_id]
    r = request_once((b.host, b.port), 32, 4, {"resources": [
        {"resource_type": resource_type, "resource_name": name, "configuration_keys": [key]}],
        "include_synonyms": False, "include_documentation": False}, 10, "reassign-test")
    (result,) = r.results
    return next((e.value for e in result.configs if e.name == key), None)


def test_cancel_an_inflight_reassignment(cluster):
    c, zk = cluster
    topic = "cancel"
    create_topic_assigned(c, topic, [[1, 2]])
    _fill(c, topic, 0, 150, 10_000)
    # broker 3 may take in 50 KB/s for it: the move cannot finish for ~30 s
    _set_configs(c, brokers={3: {"follower.replication.throttled.rate": "50000"}},
                 topics={topic: {"follower.replication.throttled.replicas": "0:3"}}, applied_on=3)
    try:
        assert _reassign(c, {(topic, 0): [2, 3]}) == {}
        ongoing = _ongoing(c)
        (tp, state), = ongoing.items()
        assert (tp.topic, tp.partition) == (topic, 0)
        assert (state["replicas"], state["adding_replicas"], state["removing_replicas"]) == ([2, 3, 1], [3], [1])
        t = _topic_znode(zk, topic)
        assert (t.partitions[0], t.adding_replicas, t.removing_replicas) == ((2, 3, 1), {0: (3,)}, {0: (1,)})
        assert _tool(c, "--list").stdout == f"Current partition reassignments:\n{topic}-0: replicas: 2,3,1. adding: 3. " \
                                             "removing: 1.\n"
        wait_for(lambda: (c.brokers[3].log_dirs[0] / f"{topic}-0").exists(), 30, "broker 3 to start its replica")
        assert _reassign(c, {(topic, 0): None}) == {}
        # Kafka cannot restore the original order: ORS is RS less the adding replicas
        _wait_done(c, zk, topic, 0, [2, 1])
        assert _ongoing(c) == {}
    finally:
        _set_configs(c, brokers={3: {"follower.replication.throttled.rate": None}},
                     topics={topic: {"follower.replication.throttled.replicas": None}})
    assert len(consume_all(c.bootstrap, topic, 1)[0]) == 150


def test_a_deletion_waits_for_the_reassignment(cluster):
    c, zk = cluster
    topic = "held"
    create_topic_assigned(c, topic, [[1, 2]])
    _fill(c, topic, 0, 150, 10_000)
    _set_configs(c, brokers={3: {"follower.replication.throttled.rate": "50000"}},
                 topics={topic: {"follower.replication.throttled.replicas": "0:3"}}, applied_on=3)
    try:
        assert _reassign(c, {(topic, 0): [2, 3]}) == {}
        admin = c.admin()  # kept until the future resolves
        # The answer waits for the topic to go (Kafka's DelayedDeleteTopics):
        # held by the move, it times out; the deletion stays marked.
        with pytest.raises(KafkaException) as timed_out:
            admin.delete_topics([topic], operation_timeout=1.5)[topic].result(timeout=30)
        assert timed_out.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT
        assert zk.exists(zk_data.delete_topic_path(topic)) is not None
        assert zk.exists(zk_data.topic_path(topic)) is not None and _topic_znode(zk, topic).adding_replicas
        assert f"deletion of ['{topic}'] waits for their reassignments" in c.brokers[controller_id(c)].log_text()
        assert _reassign(c, {(topic, 0): None}) == {}  # the move ends (cancelled): the deletion goes on
        wait_for(lambda: zk.exists(zk_data.topic_path(topic)) is None, 30, f"{topic} deleted")
        wait_for(lambda: not any((b.log_dirs[0] / f"{topic}-0").exists() for b in c.brokers.values()), 30,
                 f"every replica of {topic}-0 deleted")
    finally:
        _set_configs(c, brokers={3: {"follower.replication.throttled.rate": None}})


def test_apache_java_admin_client(cluster, java_client):
    """Apache's Java AdminClient 3.9 sends both APIs to the controller and reads the answers."""
    c, zk = cluster
    topic = "java"
    create_topic_assigned(c, topic, [[1, 2]])
    def rows(*command):
        result = java_client.admin(c.bootstrap, *command)
        assert result.returncode == 0, result.describe()
        return [line[1:] for line in result.lines if line[0] in ("REASSIGN", "REASSIGNMENT")]

    assert rows("reassign", topic, "0", "-") == [[topic, "0", "NoReassignmentInProgressException"]]
    assert rows("reassign", topic, "0", "2,3") == [[topic, "0", "OK"]]
    _wait_done(c, zk, topic, 0, [2, 3])
    assert rows("list-reassignments") == []


def _tool(c: Cluster, *args, check=True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "kafkapy.tools.reassign_partitions", "--bootstrap-server",
                          c.bootstrap, *args], capture_output=True, text=True, timeout=90)
    if check:
        assert out.returncode == 0, (out.stdout, out.stderr)
    return out


def _topic_config(c: Cluster, topic: str, name: str):
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource("topic", topic)
    admin = c.admin()  # kept until the future resolves
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return entries[name].value if name in entries else None


def _move_time(c: Cluster, zk, topic: str, target, tmp_path, throttle=None) -> float:
    """Seconds from the tool's --execute until ``topic``-0 is on ``target`` alone."""
    plan = tmp_path / f"{topic}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": target}]}))
    start = time.monotonic()
    _tool(c, "--execute", "--reassignment-json-file", str(plan), *(["--throttle", str(throttle)] if throttle else []))
    _wait_done(c, zk, topic, 0, target, timeout_s=60)
    return time.monotonic() - start


def test_tool_generate_execute_verify(cluster, tmp_path):
    c, zk = cluster
    topic = "tool"
    create_topic_assigned(c, topic, [[1, 2], [2, 1]])
    _fill(c, topic, 0, 100, 1000)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    out = _tool(c, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "2,3").stdout
    current, proposed = out.split("Proposed partition reassignment configuration\n")
    assert current.startswith("Current partition replica assignment\n")
    assert json.loads(current.split("\n")[1]) == {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": topic, "partition": 1, "replicas": [2, 1], "log_dirs": ["any", "any"]}]}
    plan = json.loads(proposed)
    assert [sorted(p["replicas"]) for p in plan["partitions"]] == [[2, 3], [2, 3]]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(proposed)
    out = _tool(c, "--execute", "--reassignment-json-file", str(plan_file), "--throttle", "50000000").stdout
    assert "Save this to use as the --reassignment-json-file option during rollback" in out
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out
    assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in out
    assert _topic_config(c, topic, "follower.replication.throttled.replicas")
    for p in plan["partitions"]:
        _wait_done(c, zk, topic, p["partition"], p["replicas"])
    out = _tool(c, "--verify", "--reassignment-json-file", str(plan_file)).stdout
    assert f"Reassignment of partition {topic}-0 is completed." in out
    assert f"Reassignment of partition {topic}-1 is completed." in out
    assert "Clearing broker-level throttles on brokers 1,2,3" in out
    assert f"Clearing topic-level throttles on topic {topic}" in out
    assert not _topic_config(c, topic, "follower.replication.throttled.replicas")
    assert _tool(c, "--list").stdout.strip() == "No partition reassignments found."
    bad = _tool(c, "--execute", "--reassignment-json-file", str(topics), check=False)
    assert bad.returncode == 1 and "Partition reassignment list cannot be empty" in bad.stderr


def test_a_throttled_reassignment_is_slower(cluster, tmp_path):
    c, zk = cluster
    topic = "throttled"
    create_topic_assigned(c, topic, [[1]], config={"min.insync.replicas": 2})
    _fill(c, topic, 0, 150, 10_000)  # 1.5 MB
    fast = _move_time(c, zk, topic, [1, 2], tmp_path)
    # Under acks=all load (min.insync.replicas=2): broker 2, in the ISR, is a throttled
    # source's follower too, but an ISR member is never held back, so it stays in the
    # ISR (a held-back one would leave it after replica.lag.time.max.ms, 3 s) and
    # the producer goes on.
    producer = BackgroundProducer(c.bootstrap, topic, 1, rate_per_s=100).start()
    isrs, stop = [], threading.Event()

    def sample():
        while not stop.wait(0.1):  # bounded by the move
            isrs.append(tuple(zk_partition_state(zk, topic, 0)["isr"]))

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        sampler.start()
        throttled = _move_time(c, zk, topic, [1, 2, 3], tmp_path, throttle=250_000)
    finally:
        stop.set()
        producer.halt()
    sampler.join(5)
    producer.stop()
    print(f"1.5 MB replica added in {fast:.2f} s unthrottled, {throttled:.2f} s at 250 KB/s")
    # 1.5 MB at 250 KB/s less one window's burst and one 256 KB fetch: at least ~4 s;
    # unthrottled about a second
    assert 3.0 <= throttled and fast + 2.0 <= throttled, (fast, throttled)
    assert len(isrs) >= 20 and all({1, 2} <= set(isr) for isr in isrs), isrs
    assert producer.errors == [] and producer.acked_count() >= 200, producer.errors[:5]
    validate(producer.acked, {0: [v for v in consume_all(c.bootstrap, topic, 1)[0] if v < 10**9]})
    out = _tool(c, "--verify", "--reassignment-json-file", str(tmp_path / f"{topic}.json")).stdout
    assert "Clearing topic-level throttles" in out


def test_zookeeper_written_reassignment(cluster):
    c, zk = cluster
    topic = "zk-move"
    create_topic_assigned(c, topic, [[1]])
    zk.create(REASSIGN_PARTITIONS_PATH, json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 3]}]}).encode())
    _wait_done(c, zk, topic, 0, [2, 3])
    wait_for(lambda: zk.exists(REASSIGN_PARTITIONS_PATH) is None, 30, "/admin/reassign_partitions deleted")


def test_controller_killed_mid_reassignment(cluster):
    c, zk = cluster
    topic = "failover"
    ctl = controller_id(c)
    a, b = sorted(set(c.brokers) - {ctl})
    create_topic_assigned(c, topic, [[a, ctl]], config={"min.insync.replicas": 1})
    _fill(c, topic, 0, 150, 10_000)
    _set_configs(c, brokers={b: {"follower.replication.throttled.rate": "300000"}},
                 topics={topic: {"follower.replication.throttled.replicas": f"0:{b}"}}, applied_on=b)
    producer = BackgroundProducer(c.bootstrap, topic, 1, rate_per_s=200).start()
    try:
        wait_for(lambda: producer.acked_count() >= 100, 30, "100 acknowledged before the move")
        assert _reassign(c, {(topic, 0): [a, b]}) == {}
        assert _topic_znode(zk, topic).adding_replicas == {0: (b,)}
        assert c.brokers[ctl].kill() == -signal.SIGKILL
        wait_for(lambda: controller_id(c) in (a, b), 30, "a new controller")
        def done():
            t = _topic_znode(zk, topic)
            return t.partitions[0] == (a, b) and not t.adding_replicas and not t.removing_replicas

        wait_for(done, 60, f"{topic}-0 reassigned to {[a, b]} by the new controller")
        successor = c.brokers[controller_id(c)]
        assert f"resuming the reassignment of {topic}-0" in successor.log_text()
        assert f"reassignment of {topic}-0 completed" in successor.log_text()
        wait_for(lambda: sorted(c.partitions(topic)[0][2]) == sorted([a, b]), 30, "ISR of the targets")
        before = producer.acked_count()
        wait_for(lambda: producer.acked_count() >= before + 100, 30, "progress after the failover")
    finally:
        producer.halt()
        _set_configs(c, brokers={b: {"follower.replication.throttled.rate": None}},
                     topics={topic: {"follower.replication.throttled.replicas": None}})
    producer.stop()
    assert producer.errors == [], producer.errors[:5]
    validate(producer.acked, consume_all(c.bootstrap, topic, 1))
    c.brokers[ctl].start()  # back for whatever runs next
    c.wait_brokers(set(c.brokers))
