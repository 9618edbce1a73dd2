"""Cluster-mode admin writes against a real ZooKeeper (Debian's, started by the
harness): ZkClient's admin operations write the znodes Kafka 3.9 writes
(read back with zk_data's decoders, byte for byte), ZkMetadataStore turns a
change of the model into those writes and retries a lost race, configs reach
the image (at once on the writing broker, through /config/changes on the
others), and the admin manager of a cluster-mode broker places replicas over
the live brokers with Kafka's rules and messages."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from kafkapy.metadata.zk import data as zk_data
from kafkapy.metadata.model import BrokerInfo, EndPoint, TopicInfo
from kafkapy.metadata.store import METADATA_GENERATION
from kafkapy.metadata.zk.store import (
    CONFIG_CHANGE_EXPIRATION_MS,
    ConfigFollower,
    ZkMetadataStore,
    assigned,
    follow_config_changes,
)
from kafkapy.metadata.zk.client import ZkClient, ZkConflict
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError
from kafkapy.server.admin_manager import AdminManager
from kafkapy.server.config import BrokerConfig
from kafkapy.server.metadata_cache import MetadataCache
from kafkapy.storage.shared import SharedPartitionTable
from support.wait import wait_for
from support.zookeeper import chroot_for

pytestmark = pytest.mark.timeout(120)
# Bound on a config change's arrival at a follower (or a store).
WAIT_S = 10.0


def _broker(broker_id, rack=None):
    port = 9090 + broker_id
    return BrokerInfo(broker_id, "127.0.0.1", port, rack, (EndPoint("127.0.0.1", port),))


@pytest.fixture
def chroot(request):
    return chroot_for(request)


@pytest.fixture
def client(zookeeper, chroot):
    c = ZkClient(zookeeper.connect_string(chroot), session_timeout_ms=4000).connect()
    yield c
    c.close()


@pytest.fixture
def table(tmp_path):
    t = SharedPartitionTable(capacity=64, lock_path=str(tmp_path / "partitions.lock"))
    yield t
    t.close()


def _config(zookeeper, chroot, broker_id=1, **extra):
    props = {"broker.id": str(broker_id), "zookeeper.connect": zookeeper.connect_string(chroot),
             "zookeeper.session.timeout.ms": "4000", "log.dirs": "/nonexistent"}
    props.update({k.replace("_", "."): str(v) for k, v in extra.items()})
    return BrokerConfig.from_props(props, warn_unknown=False)


def _store(zookeeper, chroot, tmp_path, table, broker_id=1, name="a"):
    log_dir = tmp_path / name
    log_dir.mkdir(exist_ok=True)
    return ZkMetadataStore(str(log_dir), table, _broker(broker_id), _config(zookeeper, chroot, broker_id))


# ------------------------------------------------------------------ ZkClient

def test_create_topic_writes_kafkas_znodes_config_first(client):
    topic_id = uuid.uuid4()
    client.create_topic("orders", {0: (1, 2), 1: (2, 3)}, {"cleanup.policy": "compact"}, topic_id)
    data, stat = client.zk.get(zk_data.topic_path("orders"))
    assert data == zk_data.encode_topic(topic_id, {0: (1, 2), 1: (2, 3)})
    assert data.startswith(b'{"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"')
    znode = zk_data.decode_topic("orders", data)
    assert (znode.topic_id, znode.partitions) == (topic_id, {0: (1, 2), 1: (2, 3)})
    config, config_stat = client.zk.get(zk_data.topic_config_path("orders"))
    assert config == b'{"version":1,"config":{"cleanup.policy":"compact"}}'
    # one multi-op (config first, as Kafka orders them): never a topic without its config
    assert config_stat.czxid == stat.czxid
    # a topic creation is no config change: no notification
    assert client.zk.get_children(zk_data.CONFIG_CHANGES_PATH) == []
    with pytest.raises(TopicError, match="Topic 'orders' already exists.") as exc:
        client.create_topic("orders", {0: (1,)})
    assert exc.value.error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_deletion_marker_and_a_marked_topic_still_exists(client):
    client.create_topic("gone", {0: (1,)})
    assert client.mark_topic_for_deletion("gone") is True
    assert client.mark_topic_for_deletion("gone") is False  # marked already
    data, _ = client.zk.get(zk_data.delete_topic_path("gone"))
    assert data == b""
    with pytest.raises(TopicError, match="Topic 'gone' is marked for deletion."):
        client.create_topic("gone", {0: (1,)})
    with pytest.raises(TopicError, match="Topic `nothing` to delete does not exist") as exc:
        client.mark_topic_for_deletion("nothing")
    assert exc.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.read_admin_state().marked_for_deletion == {"gone"}


def test_assignment_write_is_conditional_on_the_znode_version(client):
    topic_id = client.create_topic("t", {0: (1, 2)})
    version = client.read_admin_state().topics["t"].version
    client.set_topic_assignment("t", topic_id, {0: (1, 2), 1: (2, 1)}, version)
    with pytest.raises(ZkConflict):
        client.set_topic_assignment("t", topic_id, {0: (1, 2), 1: (2, 1), 2: (1, 2)}, version)
    state = client.read_admin_state()
    assert state.topics["t"].partitions == {0: (1, 2), 1: (2, 1)}
    assert state.topics["t"].version == version + 1


def test_entity_config_with_a_sequential_change_notification(client):
    client.set_entity_config(zk_data.CONFIG_TYPE_BROKER, zk_data.DEFAULT_ENTITY, {"log.retention.ms": "1000"})
    client.set_entity_config(zk_data.CONFIG_TYPE_BROKER, zk_data.DEFAULT_ENTITY, {})
    data, _ = client.zk.get(zk_data.broker_config_path(zk_data.DEFAULT_ENTITY))
    assert data == b'{"version":1,"config":{}}'
    changes = sorted(client.zk.get_children(zk_data.CONFIG_CHANGES_PATH))
    assert changes == ["config_change_0000000000", "config_change_0000000001"]
    body, _ = client.zk.get(zk_data.CONFIG_CHANGES_PATH + "/" + changes[0])
    assert body == b'{"version":2,"entity_path":"brokers/<default>"}'
    # conditional: a stale version loses
    with pytest.raises(ZkConflict):
        client.set_entity_config(zk_data.CONFIG_TYPE_BROKER, zk_data.DEFAULT_ENTITY, {"a": "b"}, version=0)


def test_producer_id_blocks_from_two_brokers_never_overlap(zookeeper, chroot, client):
    other = ZkClient(zookeeper.connect_string(chroot), session_timeout_ms=4000).connect()
    blocks, errors = [], []

    def take(c, broker_id):
        try:
            for _ in range(10):
                blocks.append(c.new_producer_id_block(broker_id, 1000))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=take, args=(c, i)) for i, c in ((1, client), (2, other))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        other.close()
    assert not errors
    starts = sorted(b.first_producer_id for b in blocks)
    assert starts == [1000 * i for i in range(20)]  # contiguous, none twice
    data, _ = client.zk.get(zk_data.LATEST_PRODUCER_ID_BLOCK_PATH)
    last = zk_data.decode_producer_id_block(data)
    assert (last.first_producer_id, last.last_producer_id) == (19000, 19999)
    assert data == zk_data.encode_producer_id_block(last)


# ------------------------------------------------------------------ ZkMetadataStore

def test_model_reads_only_the_topics_a_change_looks_at(client):
    from kafkapy.metadata.zk.store import ZkTopics

    for i in range(5):
        client.create_topic(f"t{i}", {0: (1,)}, {"i": str(i)})
    client.mark_topic_for_deletion("t4")
    state = client.read_admin_state(all_topics=False)
    topics = ZkTopics(state)
    assert topics["t1"].configs == {"i": "1"} and "nope" not in topics
    assert state.read == {"t1", "nope"} and not state.complete
    assert "t4" not in topics  # being deleted
    assert sorted(topics) == ["t0", "t1", "t2", "t3"] and state.complete
    assert state.marked_for_deletion == {"t4"}


def _add(name, assignment, configs=None):
    def change(md):
        if name in md.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        md.topics[name] = TopicInfo(name, uuid.uuid4(), len(assignment), dict(configs or {}),
                                    {p: assigned(r) for p, r in assignment.items()})
    return change


def test_store_update_writes_the_difference(zookeeper, chroot, client, tmp_path, table):
    store = _store(zookeeper, chroot, tmp_path, table)
    try:
        md = store.update(_add("t", {0: (1, 2, 3), 1: (2, 3, 1)}, {"retention.ms": "100"}))
        state = client.read_admin_state()
        assert state.topics["t"].partitions == {0: (1, 2, 3), 1: (2, 3, 1)}
        assert state.topics["t"].topic_id == md.topics["t"].topic_id
        assert state.topic_configs["t"].configs == {"retention.ms": "100"}
        # the image changes only when the controller says so
        assert "t" not in store.current().topics

        def grow(md):
            md.topics["t"].partitions[2] = assigned((3, 1, 2))
            md.topics["t"].num_partitions = 3
        store.update(grow)
        assert client.read_admin_state().topics["t"].partitions[2] == (3, 1, 2)

        def reassign(md):
            md.topics["t"].partitions[0] = assigned((3, 2, 1))
        with pytest.raises(ValueError, match="only new partitions"):
            store.update(reassign)

        # configs: written with a notification, and the image shows them at once when it has the topic
        store.apply(lambda m: m.topics.__setitem__("t", TopicInfo("t", md.topics["t"].topic_id, 3)))

        def configure(md):
            md.topics["t"].configs = {"retention.ms": "200"}
            md.broker_configs["1"] = {"log.cleaner.threads": "2"}
        store.update(configure)
        assert client.get_entity_config("topics", "t").configs == {"retention.ms": "200"}
        assert client.get_entity_config("brokers", "1").configs == {"log.cleaner.threads": "2"}
        notes = sorted(client.zk.get_children(zk_data.CONFIG_CHANGES_PATH))
        bodies = [zk_data.decode_config_change(client.zk.get(zk_data.CONFIG_CHANGES_PATH + "/" + n)[0])
                  for n in notes]
        assert bodies == [("topics", "t"), ("brokers", "1")]
        image = store.current()
        assert image.topics["t"].configs == {"retention.ms": "200"}
        assert image.broker_configs == {"1": {"log.cleaner.threads": "2"}}

        block = store.new_producer_id_block(1)
        assert (block.first_producer_id, block.size) == (0, 1000)
        assert store.new_producer_id_block(1).first_producer_id == 1000
        assert client.get_producer_id_block()[0].last_producer_id == 1999

        store.update(lambda md: md.topics.pop("t"))
        state = client.read_admin_state()
        assert state.marked_for_deletion == {"t"} and "t" in state.topics
        assert "t" not in store.read_model().topics  # being deleted: not there for the admin path
        with pytest.raises(TopicError, match="Topic 't' is marked for deletion."):
            store.update(_add("t", {0: (1,)}))
    finally:
        store.close()


def test_store_retries_a_lost_race_by_running_the_change_again(zookeeper, chroot, client, tmp_path,
                                                               table):
    client.create_topic("t", {0: (1,)}, {"a": "1"})
    store = _store(zookeeper, chroot, tmp_path, table)
    runs = []

    def add_key(md):
        runs.append(dict(md.topics["t"].configs))
        if len(runs) == 1:  # another broker changes the same config between our read and write
            client.set_entity_config("topics", "t", {"a": "1", "b": "2"})
        md.topics["t"].configs = {**md.topics["t"].configs, "c": "3"}

    try:
        store.update(add_key)
        assert runs == [{"a": "1"}, {"a": "1", "b": "2"}]
        assert client.get_entity_config("topics", "t").configs == {"a": "1", "b": "2", "c": "3"}
        # a creation race: the other broker wins, this one answers TOPIC_ALREADY_EXISTS
        created = []

        def create_racing(md):
            if not created:
                created.append(client.create_topic("u", {0: (2,)}))
            _add("u", {0: (1,)})(md)
        with pytest.raises(TopicError, match="Topic 'u' already exists."):
            store.update(create_racing)
        assert client.read_admin_state().topics["u"].topic_id == created[0]
    finally:
        store.close()


# ------------------------------------------------------------------ following /config

def test_follower_brings_configs_into_the_image(zookeeper, chroot, client, tmp_path, table):
    client.set_entity_config("topics", "t", {"retention.ms": "1"})
    client.set_entity_config("brokers", "<default>", {"log.retention.ms": "5"})
    image_dir = tmp_path / "image"
    image_dir.mkdir()
    store = ZkMetadataStore(str(image_dir), table, _broker(1), _config(zookeeper, chroot))
    store.apply(lambda m: m.topics.__setitem__("t", TopicInfo("t", uuid.uuid4(), 1)))
    follower = follow_config_changes(client, store)
    try:
        image = store.current()
        assert image.topics["t"].configs == {"retention.ms": "1"}  # read in full at start
        assert image.broker_configs == {"<default>": {"log.retention.ms": "5"}}
        # a change on another broker arrives through its notification
        client.set_entity_config("topics", "t", {"retention.ms": "2"})
        wait_for(lambda: store.current().topics["t"].configs == {"retention.ms": "2"}, WAIT_S, "the changed topic config")
        client.set_entity_config("brokers", "<default>", {})
        wait_for(lambda: store.current().broker_configs == {}, WAIT_S, "the broker default configs gone")
        # a new topic: its config is written before the controller announces it
        client.create_topic("n", {0: (1,)}, {"segment.ms": "9"})
        wait_for(lambda: "n" in follower.topics, WAIT_S, "the new topic's config")
        generation = table.counter(METADATA_GENERATION)
        store.apply(lambda m: m.topics.__setitem__("n", TopicInfo("n", uuid.uuid4(), 1)))  # UpdateMetadata
        wait_for(lambda: store.current().topics["n"].configs == {"segment.ms": "9"}, WAIT_S, "the new topic's config applied")
        assert table.counter(METADATA_GENERATION) >= generation + 2
        assert follower.last_change == 3
    finally:
        follower.stop()
        store.close()


def test_follower_deletes_expired_notifications(zookeeper, chroot, client, tmp_path, table):
    client.set_entity_config("topics", "old", {"x": "1"})
    store = ZkMetadataStore(str(tmp_path), table, _broker(1), _config(zookeeper, chroot))
    later = int(time.time() * 1000) + CONFIG_CHANGE_EXPIRATION_MS + 60_000
    follower = ConfigFollower(client, store, clock_ms=lambda: later).start()
    try:
        # the existing notification is expired by the follower's clock: deleted at start
        assert client.zk.get_children(zk_data.CONFIG_CHANGES_PATH) == []
        client.set_entity_config("topics", "old", {"x": "2"})
        wait_for(lambda: follower.topics.get("old") == {"x": "2"}, WAIT_S, "the changed config")
        wait_for(lambda: client.zk.get_children(zk_data.CONFIG_CHANGES_PATH) == [], WAIT_S, "the notification deleted")
    finally:
        follower.stop()


# ------------------------------------------------------------------ the admin manager in cluster mode

@pytest.fixture
def admin(zookeeper, chroot, client, tmp_path, table):
    brokers = [_broker(1), _broker(2), _broker(3)]
    for b in brokers:
        client.register_broker(b)
    config = _config(zookeeper, chroot, 1, default_replication_factor=3)
    store = ZkMetadataStore(str(tmp_path), table, brokers[0], config)
    store.apply(lambda m: m.brokers.update({b.broker_id: b for b in brokers}))  # as UpdateMetadata does
    cache = MetadataCache(config, store, 1)
    manager = AdminManager(cache, store, table, None, 1)
    yield manager
    store.close()


def test_admin_creates_topics_with_kafkas_placement(admin, client):
    assert admin.cluster_mode
    info = admin.create_topic("auto")  # auto-creation: num.partitions, default.replication.factor
    state = client.read_admin_state()
    assert state.topics["auto"].partitions == {0: info.replicas(0)}
    assert len(info.replicas(0)) == 3 and set(info.replicas(0)) == {1, 2, 3}
    info = admin.create_topic("six", 6, {"cleanup.policy": "compact"}, replication_factor=2)
    placed = client.read_admin_state().topics["six"].partitions
    assert all(len(r) == 2 and len(set(r)) == 2 for r in placed.values())
    # leaders spread over the brokers (Kafka's round robin from a random start)
    assert sorted(r[0] for r in placed.values()) == [1, 1, 2, 2, 3, 3]
    assert client.get_entity_config("topics", "six").configs == {"cleanup.policy": "compact"}
    with pytest.raises(TopicError, match=r"^Replication factor: 4 larger than available brokers: 3\.$") as exc:
        admin.create_topic("big", 1, replication_factor=4)
    assert exc.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    before = client.read_admin_state()
    admin.create_topic("dry", 2, replication_factor=3, validate_only=True)
    assert "dry" not in client.read_admin_state().topics and before.topics.keys() == {"auto", "six"}
    admin.create_topic("a.b_c", 1, replication_factor=1)
    with pytest.raises(TopicError, match=r"^Topic 'a_b.c' collides with existing topics: a.b_c$") as exc:
        admin.create_topic("a_b.c", 1, replication_factor=1)
    assert exc.value.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    # validate-only checks ZooKeeper too: "auto" is not in this broker's image yet
    with pytest.raises(TopicError, match="Topic 'auto' already exists."):
        admin.create_topic("auto", validate_only=True)


def test_admin_manual_assignment_checked_as_kafka(admin, client):
    admin.create_topic("m", -1, assignments={0: [3, 1], 1: [1, 2]}, replication_factor=-1)
    assert client.read_admin_state().topics["m"].partitions == {0: (3, 1), 1: (1, 2)}
    cases = [({0: [1, 2], 1: [1]}, "All partitions should have the same number of replicas"),
             ({0: [1, 1]}, "Duplicate replica assignment found: HashMap(0 -> ArrayBuffer(1, 1))"),
             ({1: [1], 2: [2]}, "partitions should be a consecutive 0-based integer sequence")]
    for assignments, message in cases:
        with pytest.raises(TopicError) as exc:
            admin.create_topic("bad", -1, assignments=assignments)
        assert (exc.value.error_code, exc.value.message) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
    # Kafka's CreateTopics does not check the brokers of a manual assignment
    admin.create_topic("elsewhere", -1, assignments={0: [7]})
    assert client.read_admin_state().topics["elsewhere"].partitions == {0: (7,)}


def test_admin_create_partitions_and_delete(admin, client):
    admin.create_topic("p", -1, assignments={0: [2, 3], 1: [3, 1]})
    admin.create_partitions("p", 4)
    placed = client.read_admin_state().topics["p"].partitions
    # Kafka's createNewPartitionsAssignment: start at the first broker >= partition 0's
    # leader (2: index 1, also the shift), partition ids continuing at 2
    assert placed == {0: (2, 3), 1: (3, 1), 2: (1, 3), 3: (2, 3)}
    admin.create_partitions("p", 5, [[1, 2]])
    assert client.read_admin_state().topics["p"].partitions[4] == (1, 2)
    cases = [(6, [[1, 9]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 9."),
             (7, [[1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT,
              "Increasing the number of partitions by 2 but 1 assignments provided."),
             (6, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT,
              "Inconsistent replication factor between partitions, partition 0 has 2 while partitions [5] have "
              "replication factors [1], respectively."),
             (6, [[1, 1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT,
              "Duplicate brokers not allowed in replica assignment: 1, 1 for partition id 5."),
             (5, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 5 partitions."),
             (3, None, ErrorCode.INVALID_PARTITIONS,
              "Topic currently has 5 partitions, which is higher than the requested 3.")]
    for count, assignments, code, message in cases:
        with pytest.raises(TopicError) as exc:
            admin.create_partitions("p", count, assignments)
        assert (exc.value.error_code, exc.value.message) == (code, message)
    with pytest.raises(TopicError, match="The topic 'nope' does not exist.") as exc:
        admin.create_partitions("nope", 2)
    assert exc.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    admin.create_partitions("p", 8, validate_only=True)
    assert len(client.read_admin_state().topics["p"].partitions) == 5
    admin.delete_topic("p")
    admin.delete_topic("p")  # marked already: nothing to do, no error
    assert client.read_admin_state().marked_for_deletion == {"p"}


def test_admin_refuses_partitions_while_a_reassignment_moves_replicas(admin, client):
    # a topic znode as Kafka's controller writes it mid-reassignment
    client.zk.create(zk_data.topic_path("moving"), zk_data.encode_topic(uuid.uuid4(), {0: (1, 2, 3)},
                                                                         adding_replicas={0: (3,)}))
    with pytest.raises(TopicError, match="A partition reassignment is in progress for the topic 'moving'.") as exc:
        admin.create_partitions("moving", 2)
    assert exc.value.error_code == ErrorCode.REASSIGNMENT_IN_PROGRESS
    assert client.read_admin_state().topics["moving"].partitions == {0: (1, 2, 3)}


# ------------------------------------------------------------------ the handlers on a cluster-mode broker

def test_create_topics_with_a_timeout_and_no_leader_elected_times_out_but_creates(admin, client):
    """Kafka's DelayedCreatePartitions: the answer waits up to the timeout for
    leaders; with no controller to elect them it says REQUEST_TIMED_OUT, and
    the topic exists all the same."""
    started = time.monotonic()
    response = _handle(admin, 19, 7, {"timeout": 300, "validate_only": False, "topics": [
        {"name": "waited", "num_partitions": 2, "replication_factor": 2, "assignments": [], "configs": []}]})
    assert [(t.name, t.error_code) for t in response.topics] == [("waited", ErrorCode.REQUEST_TIMED_OUT)]
    assert time.monotonic() - started >= 0.3
    assert "waited" in client.read_admin_state().topics


def _handle(admin, api_key, version, values):
    from types import SimpleNamespace

    from kafkapy.client._schema import build
    from kafkapy.protocol.api import API_TABLE
    from kafkapy.server.handlers import HANDLERS, RequestContext

    broker = SimpleNamespace(admin=admin, metadata=admin.metadata, config=admin.config, broker_id=1,
                             cluster_id="c")
    request = build(API_TABLE[api_key].request_class(version), values)
    ctx = RequestContext(broker, api_key, version, 1, "test", 0)
    response = HANDLERS[api_key](ctx, request)
    hold = ctx.hold
    if hold is not None:  # what the worker does with a held answer, inline
        for _ in range(10_000):  # bounded by the hold's deadline
            if hold.ready() or time.monotonic() >= hold.deadline:
                break
            time.sleep(0.01)
        if not hold.ready():
            response = hold.expire(response)
    return response


def test_handlers_answer_from_zookeeper_writes(admin, client):
    # timeout 0: answered once the znodes are written (no controller runs here
    # to elect leaders, which a timeout would wait for: see the next test)
    response = _handle(admin, 19, 7, {"timeout": 0, "validate_only": False, "topics": [
        {"name": "c1", "num_partitions": 3, "replication_factor": 2, "assignments": [], "configs": []},
        {"name": "c2", "num_partitions": -1, "replication_factor": -1, "configs": [],
         "assignments": [{"partition_index": 0, "broker_ids": [3, 2, 1]}]},
        {"name": "c3", "num_partitions": 1, "replication_factor": 5, "assignments": [], "configs": []}]})
    got = {t.name: (t.error_code, t.num_partitions, t.replication_factor) for t in response.topics}
    assert got == {"c1": (0, 3, 2), "c2": (0, 1, 3), "c3": (ErrorCode.INVALID_REPLICATION_FACTOR, -1, -1)}
    state = client.read_admin_state()
    assert response.topics[0].topic_id == state.topics["c1"].topic_id
    assert state.topics["c2"].partitions == {0: (3, 2, 1)}
    # auto-creation: written, and LEADER_NOT_AVAILABLE until the controller announces it
    metadata = {"topics": [{"topic_id": None, "name": "auto"}], "allow_auto_topic_creation": True,
                "include_topic_authorized_operations": False}
    response = _handle(admin, 3, 12, metadata)
    assert [(t.name, t.error_code) for t in response.topics] == [("auto", ErrorCode.LEADER_NOT_AVAILABLE)]
    assert "auto" in client.read_admin_state().topics
    response = _handle(admin, 3, 12, metadata)  # created already: still LEADER_NOT_AVAILABLE
    assert [(t.name, t.error_code) for t in response.topics] == [("auto", ErrorCode.LEADER_NOT_AVAILABLE)]
    # configs of a topic only ZooKeeper knows yet (no UpdateMetadata here): checked and written there
    with pytest.raises(TopicError) as exc:
        admin.alter_topic_configs("c2", lambda current: {**current, "retention.ms": "x"}, validate_only=True)
    assert exc.value.error_code == ErrorCode.INVALID_CONFIG
    assert admin.alter_topic_configs("c2", lambda current: {**current, "retention.ms": "5"},
                                     validate_only=True) == {"retention.ms": "5"}
    assert client.get_entity_config("topics", "c2").configs == {}
    admin.alter_topic_configs("c2", lambda current: {**current, "retention.ms": "5"})
    assert client.get_entity_config("topics", "c2").configs == {"retention.ms": "5"}
    with pytest.raises(TopicError) as exc:
        admin.alter_topic_configs("nope", lambda current: current)
    assert exc.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # dynamic broker configs: /config/brokers/<default> and <id>, this broker's config at once
    admin.alter_broker_configs("", lambda current: {**current, "log.retention.ms": "60000"})
    admin.alter_broker_configs("1", lambda current: {"log.segment.bytes": "2000000"})
    assert client.get_entity_config("brokers", "<default>").configs == {"log.retention.ms": "60000"}
    assert client.get_entity_config("brokers", "1").configs == {"log.segment.bytes": "2000000"}
    assert (admin.config["log.retention.ms"], admin.config["log.segment.bytes"]) == (60000, 2000000)
    with pytest.raises(TopicError) as exc:
        admin.alter_broker_configs("2", lambda current: current)  # another broker's: ask that broker
    assert exc.value.error_code == ErrorCode.INVALID_REQUEST
    # deletion marks the topic; the controller deletes it. With a timeout the
    # answer waits for the topic to leave this broker's metadata (Kafka's
    # DelayedDeleteTopics): no controller runs here, so it times out.
    topic_id = state.topics["c1"].topic_id
    admin.store.apply(lambda m: m.topics.__setitem__("c1", TopicInfo("c1", topic_id, 3)))
    started = time.monotonic()
    response = _handle(admin, 20, 6, {"timeout": 300, "topics": [{"name": "c1", "topic_id": None}]})
    assert [(r.name, r.error_code) for r in response.responses] == [("c1", ErrorCode.REQUEST_TIMED_OUT)]
    assert time.monotonic() - started >= 0.3
    assert client.read_admin_state().marked_for_deletion == {"c1"}
    response = _handle(admin, 20, 6, {"timeout": 0, "topics": [{"name": "c1", "topic_id": None}]})
    assert [(r.name, r.error_code) for r in response.responses] == [("c1", ErrorCode.NONE)]  # at once


def test_auto_creation_answers_the_creation_error(zookeeper, chroot, client, tmp_path, table):
    config = _config(zookeeper, chroot, 1, default_replication_factor=3)
    store = ZkMetadataStore(str(tmp_path), table, _broker(1), config)
    store.apply(lambda m: m.brokers.update({1: _broker(1)}))  # one live broker
    manager = AdminManager(MetadataCache(config, store, 1), store, table, None, 1)
    try:
        response = _handle(manager, 3, 12, {"topics": [{"topic_id": None, "name": "t"}],
                                            "allow_auto_topic_creation": True,
                                            "include_topic_authorized_operations": False})
        assert [(t.name, t.error_code) for t in response.topics] == [("t", ErrorCode.INVALID_REPLICATION_FACTOR)]
        assert client.read_admin_state().topics == {}
    finally:
        store.close()


def test_follower_keeps_following_after_zookeeper_restarts(zookeeper_factory, tmp_path, table):
    server = zookeeper_factory()
    connect = server.connect_string("/r")
    follower_client = ZkClient(connect, session_timeout_ms=4000).connect()
    config = BrokerConfig.from_props({"broker.id": "1", "zookeeper.connect": connect, "log.dirs": "/nonexistent"},
                                     warn_unknown=False)
    store = ZkMetadataStore(str(tmp_path), table, _broker(1), config)
    store.apply(lambda m: m.topics.__setitem__("t", TopicInfo("t", uuid.uuid4(), 1)))
    follower = follow_config_changes(follower_client, store)
    try:
        server.restart(kill=True)  # connections drop; the session outlives the restart
        writer = ZkClient(connect, session_timeout_ms=4000).connect()
        try:
            writer.set_entity_config("topics", "t", {"retention.ms": "7"})
        finally:
            writer.close()
        wait_for(lambda: store.current().topics["t"].configs == {"retention.ms": "7"}, 20.0,
                 "the change after the restart")
    finally:
        follower.stop()
        follower_client.close()


def test_store_update_waits_out_a_lost_connection(zookeeper_factory, chroot, tmp_path, table):
    """Kafka's retryRequestsUntilConnected: an admin write in flight when the
    connection is lost (here: the server paused, so kazoo gives the connection
    up after two thirds of the session timeout and the write fails with
    ConnectionLoss) is sent again once a connection is back, not failed."""
    server = zookeeper_factory()
    store = _store(server, chroot, tmp_path, table)
    outcome = []
    try:
        store.zk  # connected before the pause
        server.pause()
        writer = threading.Thread(target=lambda: outcome.append(store.update(_add("late", {0: (1,)}))),
                                  daemon=True)
        writer.start()
        wait_for(lambda: not store.zk.zk.connected, WAIT_S, "the store's connection given up")
        assert outcome == [] and writer.is_alive()  # waiting for a connection, not failed
        server.resume()
        writer.join(WAIT_S + 8)  # the session and connection timeouts bound the wait
        assert outcome and "late" in outcome[0].topics
    finally:
        server.resume()
        store.close()
    check = server.client(chroot)
    try:
        assert check.exists(zk_data.topic_path("late")) is not None
    finally:
        check.stop()
        check.close()
