"""The broker's side of the ZooKeeper-mode controller requests (UpdateMetadata,
LeaderAndIsr, StopReplica) and OffsetForLeaderEpoch, through the real
handlers on in-process Brokers (a temp log dir, a real shared table; two
Broker objects on one table stand in for two workers). Cluster-mode Brokers
have ``zookeeper.connect`` set to an address nothing listens on: these
handlers never write ZooKeeper. The round trip through a real broker and a
real ZooKeeper is tests/integration/test_inter_broker.py."""

import os
import uuid

import pytest

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server import config as c
from kafkapy.server.broker import Broker
from kafkapy.server.config import BrokerConfig
from kafkapy.server.handlers import HANDLERS, RequestContext
from kafkapy.storage.log_manager import LogManager

from support.storage import make_batch, records_of

ME, OTHER, THIRD = 1, 2, 3
TOPIC_ID = uuid.UUID("0b1e5a52-8d6c-4c8f-9a7e-3f1d2c4b5a69")
LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, OFFSET_FOR_LEADER_EPOCH, METADATA = 4, 5, 6, 23, 3


def _config(tmp_path, cluster=True):
    props = {"log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:9092",
             "broker.id": str(ME)}
    if cluster:
        props["zookeeper.connect"] = "127.0.0.1:1/unused"
    return BrokerConfig.from_props(props)


def _broker(config, table):
    return Broker(config, table, LogManager(config.log_dirs, c.log_config_for(config, {}), ME))


@pytest.fixture
def workers(tmp_path, table):
    """Two cluster-mode Brokers (two workers) of broker 1 on one table."""
    config = _config(tmp_path)
    a, b = _broker(config, table), _broker(config, table)
    yield a, b
    a.close()
    b.close()


def _call(broker, api_key, request, version=None):
    spec = API_TABLE[api_key]
    version = spec.max_version if version is None else version
    return HANDLERS[api_key](RequestContext(broker, api_key, version, 1, "kafkapy-controller-2", 0), request)


def _req(api_key, cls_name, version=None, **fields):
    spec = API_TABLE[api_key]
    mod = __import__(f"{spec.package}.{spec.module}.v{spec.max_version if version is None else version}.request",
                     fromlist=["x"])
    return getattr(mod, cls_name)(**fields)


def _update_metadata(controller_epoch=1, states=(), brokers=(ME, OTHER, THIRD), topic="t", topic_id=TOPIC_ID):
    """``states``: (partition, leader, leader_epoch, isr, replicas, zk_version)."""
    partitions = tuple(_req(UPDATE_METADATA, "UpdateMetadataPartitionState", partition_index=p,
                            controller_epoch=controller_epoch, leader=leader, leader_epoch=epoch, isr=tuple(isr),
                            zk_version=version, replicas=tuple(replicas), offline_replicas=())
                       for p, leader, epoch, isr, replicas, version in states)
    live = tuple(_req(UPDATE_METADATA, "UpdateMetadataBroker", id=b, rack="r%d" % b, endpoints=(
        _req(UPDATE_METADATA, "UpdateMetadataEndpoint", port=9090 + b, host="127.0.0.1",
             listener="PLAINTEXT", security_protocol=0),)) for b in brokers)
    topics = (_req(UPDATE_METADATA, "UpdateMetadataTopicState", topic_name=topic, topic_id=topic_id,
                   partition_states=partitions),) if states else ()
    return _req(UPDATE_METADATA, "UpdateMetadataRequest", controller_id=OTHER, controller_epoch=controller_epoch,
                topic_states=topics, live_brokers=live)


def _leader_and_isr(states, controller_epoch=1, topic="t", topic_id=TOPIC_ID, live_leaders=(ME, OTHER)):
    """``states``: (partition, leader, leader_epoch, isr, replicas, partition_epoch)."""
    partitions = tuple(_req(LEADER_AND_ISR, "LeaderAndIsrPartitionState", partition_index=p,
                            controller_epoch=controller_epoch, leader=leader, leader_epoch=epoch, isr=tuple(isr),
                            partition_epoch=pe, replicas=tuple(replicas))
                       for p, leader, epoch, isr, replicas, pe in states)
    return _req(LEADER_AND_ISR, "LeaderAndIsrRequest", controller_id=OTHER, controller_epoch=controller_epoch,
                topic_states=(_req(LEADER_AND_ISR, "LeaderAndIsrTopicState", topic_name=topic, topic_id=topic_id,
                                   partition_states=partitions),),
                live_leaders=tuple(_req(LEADER_AND_ISR, "LeaderAndIsrLiveLeader", broker_id=b, host_name="127.0.0.1",
                                        port=9090 + b) for b in live_leaders))


def _stop_replica(partitions, controller_epoch=1, topic="t"):
    """``partitions``: (partition, leader_epoch, delete)."""
    return _req(STOP_REPLICA, "StopReplicaRequest", controller_id=OTHER, controller_epoch=controller_epoch,
                topic_states=(_req(STOP_REPLICA, "StopReplicaTopicState", topic_name=topic, partition_states=tuple(
                    _req(STOP_REPLICA, "StopReplicaPartitionState", partition_index=p, leader_epoch=e,
                         delete_partition=d) for p, e, d in partitions)),))


def _partition_errors(response):
    return {(str(t.topic_id), p.partition_index): p.error_code for t in response.topics for p in t.partition_errors}


def _produce(broker, partition=0, n=1):
    return broker.replica_manager.append_records("t", partition, records_of(make_batch(n)), 1)[0]


def _offset_for_leader_epoch(broker, partition, leader_epoch, current_leader_epoch=-1, topic="t"):
    request = _req(OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpochRequest", replica_id=-1, topics=(
        _req(OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderTopic", topic=topic, partitions=(
            _req(OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderPartition", partition=partition,
                 current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch),)),))
    p = _call(broker, OFFSET_FOR_LEADER_EPOCH, request).topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


# -- standalone -----------------------------------------------------------------------
def test_standalone_refuses_every_controller_request(tmp_path, table):
    broker = _broker(_config(tmp_path, cluster=False), table)
    try:
        broker.admin.create_topic("t", 1)
        assert _call(broker, UPDATE_METADATA, _update_metadata(5)).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        response = _call(broker, LEADER_AND_ISR, _leader_and_isr([(0, OTHER, 7, (OTHER,), (ME, OTHER), 0)], 5))
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert _partition_errors(response) == {(str(TOPIC_ID), 0): ErrorCode.STALE_CONTROLLER_EPOCH}
        response = _call(broker, STOP_REPLICA, _stop_replica([(0, -2, True)], 5))
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert [(e.topic_name, e.error_code) for e in response.partition_errors] == [
            ("t", ErrorCode.STALE_CONTROLLER_EPOCH)]
        # Nothing moved: the one broker still leads at epoch 0 and serves.
        assert _produce(broker) == ErrorCode.NONE
        partition = broker.replica_manager.get_partition("t", 0)
        assert (partition.leader_id, partition.leader_epoch) == (ME, 0)
        # OffsetForLeaderEpoch answers standalone too: epoch 0 ends at the log end.
        assert _offset_for_leader_epoch(broker, 0, 0) == (ErrorCode.NONE, 0, 1)
        assert _offset_for_leader_epoch(broker, 0, 0, current_leader_epoch=1)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert _offset_for_leader_epoch(broker, 5, 0)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        broker.close()


# -- UpdateMetadata ---------------------------------------------------------------------
def test_update_metadata_fills_the_image(workers):
    a, b = workers
    assert not a.metadata().topics and a.metadata().cluster_mode
    states = [(0, OTHER, 3, (OTHER, ME), (OTHER, ME, THIRD), 4), (1, -1, 2, (THIRD,), (THIRD, ME, OTHER), 6)]
    assert _call(a, UPDATE_METADATA, _update_metadata(2, states, brokers=(ME, OTHER))).error_code == 0
    md = b.metadata()  # another worker sees it
    assert (md.controller_id, md.controller_epoch) == (OTHER, 2)
    assert sorted(md.brokers) == [ME, OTHER]
    other = md.brokers[OTHER]
    assert (other.host, other.port, other.rack) == ("127.0.0.1", 9092, "r2")
    assert [(e.listener_name, e.security_protocol) for e in other.endpoints] == [("PLAINTEXT", "PLAINTEXT")]
    info = md.topics["t"]
    assert (info.topic_id, info.num_partitions) == (TOPIC_ID, 2)
    state = md.partition_state("t", 0)
    assert (state.leader, state.leader_epoch, state.isr, state.replicas, state.partition_epoch) == (
        OTHER, 3, (OTHER, ME), (OTHER, ME, THIRD), 4)
    # The Metadata API answers what UpdateMetadata said (offline: replicas on dead brokers).
    request = _req(METADATA, "MetadataRequest", version=12, topics=(
        _req(METADATA, "MetadataRequestTopic", version=12, topic_id=None, name="t"),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    answer = _call(b, METADATA, request, 12)
    assert answer.controller_id == OTHER and sorted(x.node_id for x in answer.brokers) == [ME, OTHER]
    parts = {p.partition_index: p for p in answer.topics[0].partitions}
    assert (parts[0].leader_id, parts[0].leader_epoch, parts[0].isr_nodes) == (OTHER, 3, (OTHER, ME))
    assert parts[0].offline_replicas == (THIRD,)
    # An older controller changes nothing.
    stale = _update_metadata(1, [(0, ME, 9, (ME,), (ME,), 9)])
    assert _call(a, UPDATE_METADATA, stale).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert b.metadata().partition_state("t", 0).leader == OTHER
    # Leader -2 (LeaderDuringDelete) removes partitions, and the topic with its last one.
    assert _call(a, UPDATE_METADATA, _update_metadata(2, [(0, -2, 3, (), (), 4)])).error_code == 0
    assert sorted(b.metadata().topics["t"].partitions) == [1]
    assert _call(a, UPDATE_METADATA, _update_metadata(3, [(1, -2, 3, (), (), 4)])).error_code == 0
    assert "t" not in b.metadata().topics and b.metadata().controller_epoch == 3


def test_update_metadata_with_another_topic_id_is_a_new_incarnation(workers):
    a, _ = workers
    _call(a, UPDATE_METADATA, _update_metadata(1, [(0, OTHER, 1, (OTHER,), (OTHER,), 0),
                                                  (1, OTHER, 1, (OTHER,), (OTHER,), 0)]))
    new_id = uuid.uuid4()
    _call(a, UPDATE_METADATA, _update_metadata(1, [(0, THIRD, 0, (THIRD,), (THIRD,), 0)], topic_id=new_id))
    info = a.metadata().topics["t"]
    assert (info.topic_id, info.num_partitions, sorted(info.partitions)) == (new_id, 1, [0])


# -- LeaderAndIsr -------------------------------------------------------------------------
def _serve(a, states, controller_epoch=1):
    """UpdateMetadata then LeaderAndIsr for ``states``, as the controller sends them."""
    _call(a, UPDATE_METADATA, _update_metadata(controller_epoch, states))
    response = _call(a, LEADER_AND_ISR, _leader_and_isr(states, controller_epoch))
    assert response.error_code == ErrorCode.NONE
    return _partition_errors(response)


def test_leader_and_isr_creates_partitions_and_gives_roles(workers, table, tmp_path):
    a, b = workers
    # Before LeaderAndIsr nothing is hosted: another broker's partition is NOT_LEADER_OR_FOLLOWER.
    _call(a, UPDATE_METADATA, _update_metadata(1, [(0, ME, 0, (ME, OTHER), (ME, OTHER), 0)]))
    assert a.replica_manager.get_partition("t", 0) is None
    assert _produce(a) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    errors = _serve(a, [(0, ME, 1, (ME, OTHER), (ME, OTHER), 0), (1, OTHER, 1, (OTHER, ME), (OTHER, ME), 0)])
    assert errors == {(str(TOPIC_ID), 0): 0, (str(TOPIC_ID), 1): 0}
    assert os.path.isdir(tmp_path / "logs" / "t-0") and os.path.isdir(tmp_path / "logs" / "t-1")
    assert table.slot_for(TOPIC_ID, 0) is not None and table.slot_for(TOPIC_ID, 1) is not None
    # Another worker sees the roles: it leads 0 (and the leader epoch starts at the end of its log) ...
    leader = b.replica_manager.get_partition("t", 0)
    assert (leader.is_leader, leader.leader_epoch, leader.isr, leader.replicas) == (
        True, 1, frozenset({ME, OTHER}), (ME, OTHER))
    assert leader.log.leader_epoch_entries() == [(1, 0)]
    assert _produce(b, 0, 3) == ErrorCode.NONE
    assert leader.high_watermark == 0  # OTHER, in the ISR, has not fetched it
    # ... and follows 1.
    follower = b.replica_manager.get_partition("t", 1)
    assert (follower.is_leader, follower.leader_id, follower.leader_epoch) == (False, OTHER, 1)
    assert _produce(b, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _offset_for_leader_epoch(b, 1, 1) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)
    assert _offset_for_leader_epoch(b, 0, 1) == (ErrorCode.NONE, 1, 3)
    assert _offset_for_leader_epoch(b, 0, 1, current_leader_epoch=0)[0] == ErrorCode.FENCED_LEADER_EPOCH
    # The same leader epoch again: stale; with a newer partition epoch: the ISR changes.
    errors = _serve(a, [(0, ME, 1, (ME, OTHER), (ME, OTHER), 0)])
    assert errors == {(str(TOPIC_ID), 0): ErrorCode.STALE_CONTROLLER_EPOCH}
    errors = _serve(a, [(0, ME, 1, (ME,), (ME, OTHER), 1)])
    assert errors == {(str(TOPIC_ID), 0): 0}
    assert (leader.isr, leader.partition_epoch, leader.high_watermark) == (frozenset({ME}), 1, 3)
    # An older leader epoch is stale; a partition not replicated here is refused.
    errors = _serve(a, [(0, OTHER, 0, (OTHER,), (ME, OTHER), 2), (2, OTHER, 5, (OTHER,), (OTHER, THIRD), 0)])
    assert errors == {(str(TOPIC_ID), 0): ErrorCode.STALE_CONTROLLER_EPOCH,
                      (str(TOPIC_ID), 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert leader.is_leader and table.slot_for(TOPIC_ID, 2) is None
    # Leadership moves: this broker follows at the new epoch, the old one answers for it.
    errors = _serve(a, [(0, OTHER, 2, (OTHER, ME), (ME, OTHER), 3)])
    assert errors == {(str(TOPIC_ID), 0): 0}
    assert (leader.is_leader, leader.leader_id, leader.leader_epoch) == (False, OTHER, 2)
    assert _produce(b, 0) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # An older controller epoch: everything stale, nothing changes.
    response = _call(a, LEADER_AND_ISR, _leader_and_isr([(0, ME, 9, (ME,), (ME, OTHER), 9)], controller_epoch=0))
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert _partition_errors(response) == {(str(TOPIC_ID), 0): ErrorCode.STALE_CONTROLLER_EPOCH}
    assert leader.leader_epoch == 2


def test_leader_and_isr_follower_waits_for_a_live_leader(workers):
    a, _ = workers
    states = [(0, THIRD, 1, (THIRD, ME), (THIRD, ME), 0)]
    _call(a, UPDATE_METADATA, _update_metadata(1, states, brokers=(ME,)))
    response = _call(a, LEADER_AND_ISR, _leader_and_isr(states, live_leaders=()))
    assert _partition_errors(response) == {(str(TOPIC_ID), 0): 0}
    partition = a.replica_manager.get_partition("t", 0)
    assert partition is not None and partition.leader_id == -1  # the log exists, no role yet


def test_leader_and_isr_with_a_log_of_another_topic_id(workers, tmp_path, table):
    a, _ = workers
    _serve(a, [(0, ME, 1, (ME,), (ME,), 0)])
    assert _produce(a) == ErrorCode.NONE
    # The topic was deleted and created again while this broker kept the old log.
    new_id = uuid.uuid4()
    states = [(0, ME, 0, (ME,), (ME,), 0)]
    _call(a, UPDATE_METADATA, _update_metadata(2, states, topic_id=new_id))
    response = _call(a, LEADER_AND_ISR, _leader_and_isr(states, 2, topic_id=new_id))
    assert _partition_errors(response) == {(str(new_id), 0): ErrorCode.INCONSISTENT_TOPIC_ID}
    assert table.slot_for(new_id, 0) is None


# -- StopReplica ---------------------------------------------------------------------------
def test_stop_replica_clears_the_role_or_deletes_the_partition(workers, tmp_path, table):
    a, b = workers
    _serve(a, [(0, ME, 3, (ME,), (ME,), 0), (1, ME, 3, (ME,), (ME,), 0)])
    assert _produce(b, 0) == _produce(b, 1) == ErrorCode.NONE
    used = table.used_slots
    response = _call(a, STOP_REPLICA, _stop_replica([(0, 2, False), (1, 3, False)]))
    assert response.error_code == 0
    assert [(e.partition_index, e.error_code) for e in response.partition_errors] == [
        (0, ErrorCode.FENCED_LEADER_EPOCH), (1, 0)]
    assert _produce(b, 0) == ErrorCode.NONE
    assert _produce(b, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER  # stopped: no role
    # Topic deletion: EpochDuringDelete (-2) passes whatever the epoch; the
    # log goes, the slot is freed and the other worker lets go of it.
    response = _call(a, STOP_REPLICA, _stop_replica([(0, -2, True), (1, -2, True)], controller_epoch=2))
    assert [e.error_code for e in response.partition_errors] == [0, 0]
    assert not os.path.isdir(tmp_path / "logs" / "t-0") and not os.path.isdir(tmp_path / "logs" / "t-1")
    assert table.used_slots == used - 2 and table.slot_for(TOPIC_ID, 0) is None
    assert b.replica_manager.get_partition("t", 0) is None
    assert a.metadata().controller_epoch == 2
    # Stale controller: nothing done.
    response = _call(a, STOP_REPLICA, _stop_replica([(0, -2, True)], controller_epoch=1))
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH


def test_stop_replica_deletes_a_log_the_image_no_longer_lists(workers, tmp_path, table):
    a, _ = workers
    _serve(a, [(0, ME, 1, (ME,), (ME,), 0)])
    # UpdateMetadata with leader -2 came first (Kafka's order): the image forgot it.
    _call(a, UPDATE_METADATA, _update_metadata(1, [(0, -2, 1, (), (), 0)]))
    assert a.replica_manager.get_partition("t", 0) is None
    response = _call(a, STOP_REPLICA, _stop_replica([(0, -2, True)]))
    assert [e.error_code for e in response.partition_errors] == [0]
    assert not os.path.isdir(tmp_path / "logs" / "t-0") and table.slot_for(TOPIC_ID, 0) is None


def test_a_broker_left_out_of_the_replicas_stops_hosting_the_partition(workers, tmp_path, table):
    a, b = workers
    _serve(a, [(0, ME, 1, (ME, OTHER), (ME, OTHER), 0)])
    assert b.replica_manager.get_partition("t", 0) is not None
    # The controller moved the partition away (reassignment): the image no
    # longer lists this broker, so no worker serves it; the log and its slot
    # wait for the StopReplica that deletes them.
    _call(a, UPDATE_METADATA, _update_metadata(1, [(0, OTHER, 2, (OTHER, THIRD), (OTHER, THIRD), 1)]))
    assert b.replica_manager.get_partition("t", 0) is None
    assert _produce(b) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert os.path.isdir(tmp_path / "logs" / "t-0") and table.slot_for(TOPIC_ID, 0) is not None


# -- an older Kafka controller's versions (server/handlers/controller_versions.py) ----------------
def _old(api_key, version, data):
    from kafkapy.protocol.entities import construct

    return construct(API_TABLE[api_key].request_class(version), data)


def test_older_controller_versions_act_as_the_newest(workers, tmp_path):
    a, b = workers
    _call(a, UPDATE_METADATA, _update_metadata(1, [(0, OTHER, 1, (OTHER, ME), (OTHER, ME), 0)]))  # t known by id
    state = {"topic_name": "t", "partition_index": 0, "controller_epoch": 1, "leader": OTHER, "leader_epoch": 4,
             "isr": [OTHER, ME], "zk_version": 1, "partition_epoch": 1, "replicas": [OTHER, ME]}
    # UpdateMetadata v0: partitions one by one, each broker one PLAINTEXT host and port.
    r = _call(a, UPDATE_METADATA, _old(UPDATE_METADATA, 0, {"controller_id": OTHER, "controller_epoch": 1,
        "ungrouped_partition_states": [state],
        "live_brokers": [{"id": i, "v0_host": "127.0.0.1", "v0_port": 9090 + i} for i in (ME, OTHER)]}), 0)
    assert r.error_code == 0
    md = b.metadata()
    assert md.partition_state("t", 0).leader_epoch == 4 and md.topics["t"].topic_id == TOPIC_ID
    assert [(e.port, e.listener_name, e.security_protocol) for e in md.brokers[OTHER].endpoints] \
        == [(9092, "PLAINTEXT", "PLAINTEXT")]
    # v2: endpoints without a listener name are named after their protocol.
    r = _call(a, UPDATE_METADATA, _old(UPDATE_METADATA, 2, {"controller_id": OTHER, "controller_epoch": 1,
        "ungrouped_partition_states": [state], "live_brokers": [
            {"id": i, "rack": None, "endpoints": [{"port": 9190 + i, "host": "127.0.0.1", "security_protocol": 1}]}
            for i in (ME, OTHER)]}), 2)
    assert r.error_code == 0
    assert [(e.listener_name, e.security_protocol) for e in b.metadata().brokers[OTHER].endpoints] \
        == [("SSL", "SSL")]
    # LeaderAndIsr v0 (one by one, by name) makes this broker the leader; the
    # answer is per topic name and partition below v5.
    r = _call(a, LEADER_AND_ISR, _old(LEADER_AND_ISR, 0, {"controller_id": OTHER, "controller_epoch": 1,
        "ungrouped_partition_states": [{**state, "leader": ME, "leader_epoch": 5, "isr": [ME]},
                                       {**state, "topic_name": "unknown", "leader": ME, "leader_epoch": 5}],
        "live_leaders": [{"broker_id": ME, "host_name": "127.0.0.1", "port": 9091}]}), 0)
    assert r.error_code == 0
    # a topic the image knows no id of cannot be hosted (partitions are kept by topic id)
    assert [(e.topic_name, e.partition_index, e.error_code) for e in r.partition_errors] \
        == [("t", 0, 0), ("unknown", 0, ErrorCode.UNKNOWN_TOPIC_ID)]
    leader = b.replica_manager.get_partition("t", 0)
    assert (leader.is_leader, leader.leader_epoch) == (True, 5)
    assert _produce(b) == ErrorCode.NONE
    # v4: per topic, still without ids.
    r = _call(a, LEADER_AND_ISR, _old(LEADER_AND_ISR, 4, {"controller_id": OTHER, "controller_epoch": 1,
        "broker_epoch": -1, "topic_states": [{"topic_name": "t", "partition_states": [
            {**state, "leader": OTHER, "leader_epoch": 6}]}], "live_leaders": [
            {"broker_id": OTHER, "host_name": "127.0.0.1", "port": 9092}]}), 4)
    assert [(e.topic_name, e.partition_index, e.error_code) for e in r.partition_errors] == [("t", 0, 0)]
    assert (leader.is_leader, leader.leader_id, leader.leader_epoch) == (False, OTHER, 6)
    # StopReplica v0: one flag for every partition, leader epoch -1 (never fenced).
    r = _call(a, STOP_REPLICA, _old(STOP_REPLICA, 0, {"controller_id": OTHER, "controller_epoch": 1,
        "delete_partitions": False, "ungrouped_partitions": [{"topic_name": "t", "partition_index": 0}]}), 0)
    assert [(e.topic_name, e.partition_index, e.error_code) for e in r.partition_errors] == [("t", 0, 0)]
    assert os.path.isdir(tmp_path / "logs" / "t-0")
    # v1: per topic; delete.
    r = _call(a, STOP_REPLICA, _old(STOP_REPLICA, 1, {"controller_id": OTHER, "controller_epoch": 1,
        "broker_epoch": -1, "delete_partitions": True, "topics": [{"name": "t", "partition_indexes": [0]}]}), 1)
    assert [(e.topic_name, e.partition_index, e.error_code) for e in r.partition_errors] == [("t", 0, 0)]
    assert not os.path.isdir(tmp_path / "logs" / "t-0")
