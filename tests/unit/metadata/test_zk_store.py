"""The pure parts of the cluster-mode admin path: ZooKeeper's admin state as the
model (ZkMetadataStore.model), the writes a change turns into (_diff, recorded
instead of sent), config application to the image (apply_configs,
ConfigFollower.sync), and the admin manager's checks of manual replica
assignments with Kafka's messages. ZooKeeper itself: tests/integration/test_zk_admin.py."""

import uuid

import pytest

from kafkapy.metadata.model import BrokerInfo, Metadata, TopicInfo
from kafkapy.metadata.store import ProducerIdsBlock
from kafkapy.metadata.zk.store import (
    ConfigFollower,
    ZkMetadataStore,
    apply_configs,
    assigned,
    topic_assignment,
)
from kafkapy.metadata.zk.client import AdminState, EntityConfig, ZkTopic
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError
from kafkapy.server.admin_manager import validate_added_assignment, validate_create_assignment

pytestmark = pytest.mark.timeout(60)

T_ID = uuid.UUID(int=7)


class RecordingWrites:
    """Stands in for AdminWrites: records what would be written, in order."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args: self.calls.append((name, *args))


def _state(**kw):
    base = dict(topics={"t": ZkTopic("t", T_ID, {0: (1, 2), 1: (2, 1)}, 4),
                        "dying": ZkTopic("dying", uuid.UUID(int=8), {0: (1,)}, 0)},
                topic_configs={"t": EntityConfig({"retention.ms": "1"}, 2), "stale": EntityConfig({}, 0)},
                broker_configs={"<default>": EntityConfig({"log.retention.ms": "9"}, 3),
                                "2": EntityConfig({}, 1)},
                marked_for_deletion={"dying"},
                producer_id_block=ProducerIdsBlock(2, 3000, 1000), producer_id_block_version=5)
    base.update(kw)
    return AdminState(**base)


@pytest.fixture
def store(tmp_path, table):
    s = ZkMetadataStore(str(tmp_path), table, BrokerInfo(1, "h", 9092), {"zookeeper.connect": "unused:1"})
    s.apply(lambda md: md.brokers.update({1: BrokerInfo(1, "h", 9092), 2: BrokerInfo(2, "h", 9093)}))
    return s


def _diff(store, state, change):
    after = store.model(state)
    change(after)
    before = store.model(state)
    batch = RecordingWrites()
    store._diff(state, before, after, batch)
    return batch.calls


def test_model_is_zookeepers_topics_configs_and_block(store):
    md = store.model(_state())
    assert md.cluster_mode and set(md.brokers) == {1, 2}
    assert list(md.topics) == ["t"]  # a topic marked for deletion is not there for the admin path
    t = md.topics["t"]
    assert (t.topic_id, t.num_partitions, t.configs) == (T_ID, 2, {"retention.ms": "1"})
    assert t.replicas(1) == (2, 1) and t.partitions[1].leader == -1
    assert md.broker_configs == {"<default>": {"log.retention.ms": "9"}}  # empty entities left out
    assert md.producer_id_block_end == 4000
    assert store.model(_state(producer_id_block=None)).producer_id_block_end == 0


def test_no_change_writes_nothing(store):
    assert _diff(store, _state(), lambda md: None) == []


def test_new_topic_is_created_config_first_with_the_config_znode_version(store):
    def create(md):
        md.topics["stale"] = TopicInfo("stale", T_ID, 1, {"a": "b"}, {0: assigned((2, 1))})
        md.topics["fresh"] = TopicInfo("fresh", T_ID, 1, {}, {0: assigned((1,))})
    calls = _diff(store, _state(), create)
    assert calls == [("create_topic", "fresh", T_ID, {0: (1,)}, {}, -1),
                     ("create_topic", "stale", T_ID, {0: (2, 1)}, {"a": "b"}, 0)]
    with pytest.raises(TopicError, match="Topic 'dying' is marked for deletion.") as exc:
        _diff(store, _state(), lambda md: md.topics.__setitem__(
            "dying", TopicInfo("dying", T_ID, 1, {}, {0: assigned((1,))})))
    assert exc.value.error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_grown_deleted_and_reconfigured_topics(store):
    def change(md):
        t = md.topics["t"]
        t.partitions[2] = assigned((1, 2))
        t.num_partitions = 3
        t.configs = {}
    assert _diff(store, _state(), change) == [
        ("set_topic_assignment", "t", T_ID, {0: (1, 2), 1: (2, 1), 2: (1, 2)}, 4),
        ("set_entity_config", "topics", "t", {}, 2)]
    assert _diff(store, _state(), lambda md: md.topics.pop("t")) == [("mark_topic_for_deletion", "t")]


def test_refused_topic_changes(store):
    def reassign(md):
        md.topics["t"].partitions[0] = assigned((2, 1))
    with pytest.raises(ValueError, match="only new partitions"):
        _diff(store, _state(), reassign)

    def new_id(md):
        md.topics["t"].topic_id = uuid.uuid4()
    with pytest.raises(ValueError, match="topic id cannot change"):
        _diff(store, _state(), new_id)

    def unassigned(md):
        md.topics["t"].num_partitions = 3
    with pytest.raises(ValueError, match="partition 2 has no replicas"):
        _diff(store, _state(), unassigned)

    def grow(md):
        md.topics["t"].partitions[2] = assigned((1, 2))
        md.topics["t"].num_partitions = 3
    moving = _state(topics={"t": ZkTopic("t", T_ID, {0: (1, 2), 1: (2, 1)}, 4, reassigning=True)})
    with pytest.raises(TopicError, match="A partition reassignment is in progress for the topic 't'.") as exc:
        _diff(store, moving, grow)
    assert exc.value.error_code == ErrorCode.REASSIGNMENT_IN_PROGRESS


def test_broker_configs_and_the_producer_id_block(store):
    def change(md):
        md.broker_configs.pop("<default>")
        md.broker_configs["1"] = {"x": "y"}
        md.producer_id_block_end += 1000
    assert _diff(store, _state(), change) == [
        ("set_entity_config", "brokers", "1", {"x": "y"}, -1),
        ("set_entity_config", "brokers", "<default>", {}, 3),
        ("set_producer_id_block", ProducerIdsBlock(1, 4000, 1000), 5)]  # assigned to this broker

    def backwards(md):
        md.producer_id_block_end -= 1
    with pytest.raises(ValueError, match="cannot move"):
        _diff(store, _state(), backwards)


def test_topic_assignment_and_apply_configs():
    info = TopicInfo("t", T_ID, 2, {}, {0: assigned([3, 1]), 1: assigned([1, 3])})
    assert topic_assignment(info) == {0: (3, 1), 1: (1, 3)}
    md = Metadata(topics={"t": TopicInfo("t", T_ID, 1)}, broker_configs={"1": {"a": "b"}})
    apply_configs(md, {"t": {"k": "v"}, "absent": {"k": "v"}}, None)
    assert md.topics["t"].configs == {"k": "v"} and "absent" not in md.topics
    assert md.broker_configs == {"1": {"a": "b"}}
    apply_configs(md, {}, {"<default>": {"c": "d"}, "1": {}})
    assert md.broker_configs == {"<default>": {"c": "d"}}


def test_follower_sync_applies_only_differences_of_known_topics(store, table):
    store.apply(lambda md: md.topics.update(t=TopicInfo("t", T_ID, 1, {"old": "1"}), u=TopicInfo("u", T_ID, 1)))
    follower = ConfigFollower(None, store)
    follower.topics = {"t": {"new": "2"}, "not-yet-announced": {"a": "b"}}
    follower.brokers = {"<default>": {"log.retention.ms": "5"}, "3": {}}
    assert follower.sync() is True
    md = store.current()
    assert md.topics["t"].configs == {"new": "2"}
    assert md.topics["u"].configs == {}  # no config znode read for it: left as it is
    assert "not-yet-announced" not in md.topics
    assert md.broker_configs == {"<default>": {"log.retention.ms": "5"}}
    assert follower.sync() is False  # nothing differs any more: no write, no generation move


# ------------------------------------------------------------------ manual assignments (admin manager)

@pytest.mark.parametrize("assignments, message", [
    ({0: [1, 2], 1: [3]}, "All partitions should have the same number of replicas"),
    ({0: [1, 2], 1: [3, 3]}, "Duplicate replica assignment found: HashMap(0 -> ArrayBuffer(1, 2), "
                             "1 -> ArrayBuffer(3, 3))"),
    ({0: [1], 2: [2]}, "partitions should be a consecutive 0-based integer sequence"),
    ({0: []}, "Cannot have replication factor of 0 for partition id 0."),
])
def test_create_assignment_refused_as_kafka(assignments, message):
    with pytest.raises(TopicError) as exc:
        validate_create_assignment(assignments)
    assert (exc.value.error_code, exc.value.message) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def test_create_assignment_accepted_without_checking_brokers():
    assert validate_create_assignment({1: [9, 8], 0: [1, 2]}) == {1: (9, 8), 0: (1, 2)}


@pytest.mark.parametrize("added, code, message", [
    ({3: []}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Cannot have replication factor of 0 for partition id 3."),
    ({3: [1, 1]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Duplicate brokers not allowed in replica assignment: 1, 1 for partition id 3."),
    ({3: [1, 4]}, ErrorCode.BROKER_NOT_AVAILABLE,
     "Some brokers specified for partition id 3 are not available. Specified brokers: 1, 4, "
     "available brokers: 1, 2, 3."),
    ({3: [1], 4: [1, 2], 5: [2, 3, 1]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Inconsistent replication factor between partitions, partition 0 has 2 while partitions [3, 5] "
     "have replication factors [1, 3], respectively."),
])
def test_added_partitions_refused_as_kafka(added, code, message):
    with pytest.raises(TopicError) as exc:
        validate_added_assignment(added, 2, [3, 1, 2])
    assert (exc.value.error_code, exc.value.message) == (code, message)
    validate_added_assignment({3: [3, 1]}, 2, [1, 2, 3])  # a good one passes

