"""User and client entity configs (quotas, SCRAM credentials) in the metadata
model and stores: Kafka's entity keys and sanitized names, the embedded store's
atomic key-by-key alterations and its file, and the writes the ZooKeeper store
turns a change into (recorded, not sent). Real ZooKeeper:
tests/integration/test_entity_configs_zk.py."""

import json
import multiprocessing

import pytest

from kafkapy.metadata.embedded import EmbeddedMetadataStore
from kafkapy.metadata.model import (
    DEFAULT_ENTITY,
    Metadata,
    client_entity,
    entity_key,
    entity_names,
    user_client_entity,
    user_entity,
)
from kafkapy.metadata.zk.store import ConfigFollower, ZkMetadataStore, apply_configs
from kafkapy.metadata.zk.client import AdminState, EntityConfig
from kafkapy.metadata.model import BrokerInfo

pytestmark = pytest.mark.timeout(60)

SCRAM = "salt=c2FsdA==,stored_key=a2V5,server_key=c2s=,iterations=4096"


def test_entity_keys_are_kafkas_znode_paths():
    assert user_entity("alice") == ("users", "alice")
    assert user_entity("CN=a b,O=x") == ("users", "CN%3Da%20b%2CO%3Dx")
    assert client_entity(None) == ("clients", DEFAULT_ENTITY)
    assert user_client_entity("alice", "c/1") == ("users", "alice/clients/c%2F1")
    assert user_client_entity(None, None) == ("users", "<default>/clients/<default>")
    assert entity_key("u", client_default=True) == ("users", "u/clients/<default>")
    assert entity_names(("users", "alice/clients/c%2F1")) == ("alice", "c/1")
    assert entity_names(("clients", "<default>")) == (None, "<default>")
    assert entity_names(user_entity("CN=a b")) == ("CN=a b", None)
    with pytest.raises(ValueError):
        entity_key()


def test_alter_keeps_other_keys_and_persists(tmp_path, table):
    store = EmbeddedMetadataStore(str(tmp_path), table)
    alice = user_entity("alice")
    store.alter_entity_configs(alice, {"SCRAM-SHA-256": SCRAM})
    generation = store.generation
    assert store.alter_entity_configs(alice, {"producer_byte_rate": 1048576}) == {
        "SCRAM-SHA-256": SCRAM, "producer_byte_rate": "1048576"}
    assert store.generation > generation
    # another process's store object sees it through the generation
    other = EmbeddedMetadataStore(str(tmp_path), table)
    assert other.current().entity_configs[alice] == {"SCRAM-SHA-256": SCRAM, "producer_byte_rate": "1048576"}
    with open(tmp_path / "kafkapy-metadata.json") as f:
        assert json.load(f)["entity_configs"] == {
            "users/alice": {"SCRAM-SHA-256": SCRAM, "producer_byte_rate": "1048576"}}
    store.alter_entity_configs(alice, delete=["SCRAM-SHA-256"])
    assert other.current().entity_configs[alice] == {"producer_byte_rate": "1048576"}
    store.alter_entity_configs(alice, delete=["producer_byte_rate", "absent"])
    assert alice not in other.current().entity_configs  # no empty entities
    assert Metadata.from_json(Metadata(entity_configs={("clients", "c"): {"a": "1"}}).to_json()).entity_configs == {
        ("clients", "c"): {"a": "1"}}


def test_batch_is_all_or_nothing(tmp_path, table):
    store = EmbeddedMetadataStore(str(tmp_path), table)
    store.alter_entity_configs(client_entity("c1"), {"consumer_byte_rate": "5"})

    def validate(entity, config):
        if entity == client_entity("bad"):
            raise ValueError("no")
    with pytest.raises(ValueError):
        store.alter_entity_configs_batch({client_entity("c1"): ({}, ["consumer_byte_rate"]),
                                          client_entity("bad"): ({"x": "1"}, [])}, validate)
    assert store.current().entity_configs == {client_entity("c1"): {"consumer_byte_rate": "5"}}




def _worker(path, table, key):
    store = EmbeddedMetadataStore(path, table)
    for i in range(20):
        store.alter_entity_configs(user_entity("alice"), {f"{key}{i}": str(i)})


def test_concurrent_alterations_of_one_entity_lose_no_key(tmp_path, table):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), table, k)) for k in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    config = EmbeddedMetadataStore(str(tmp_path), table).current().entity_configs[user_entity("alice")]
    assert len(config) == 40


class RecordingWrites:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args: self.calls.append((name, *args))


def test_zookeeper_writes_of_entity_changes(tmp_path, table):
    store = ZkMetadataStore(str(tmp_path), table, BrokerInfo(1, "h", 9092), {"zookeeper.connect": "unused:1"})
    state = AdminState(entity_configs={("users", "alice"): EntityConfig({"SCRAM-SHA-256": SCRAM}, 3)},
                       absent_paths={"/config/users/bob", "/config/users/bob/clients"})

    def change(md):
        md.entity_configs[("users", "alice")] = {"SCRAM-SHA-256": SCRAM, "producer_byte_rate": "10"}
        md.entity_configs[("users", "bob/clients/c1")] = {"request_percentage": "50"}
        md.entity_configs[("users", "bob/clients/c2")] = {"request_percentage": "60"}
        assert ("clients", "nobody") not in md.entity_configs
    after = store.model(state)
    change(after)
    before = store.model(state)
    batch = RecordingWrites()
    store._diff(state, before, after, batch)
    assert batch.calls == [
        ("set_entity_config", "users", "alice", {"SCRAM-SHA-256": SCRAM, "producer_byte_rate": "10"}, 3),
        ("create_config_parent", "/config/users/bob"),
        ("create_config_parent", "/config/users/bob/clients"),
        ("set_entity_config", "users", "bob/clients/c1", {"request_percentage": "50"}, -1),
        ("set_entity_config", "users", "bob/clients/c2", {"request_percentage": "60"}, -1)]


def test_apply_and_follower_sync_of_entities(tmp_path, table):
    md = Metadata(entity_configs={("clients", "a"): {"x": "1"}})
    apply_configs(md, {}, None, {("clients", "a"): {}, ("clients", "b"): {"y": "2"}})
    assert md.entity_configs == {("clients", "b"): {"y": "2"}}
    store = ZkMetadataStore(str(tmp_path), table, BrokerInfo(1, "h", 9092), {"zookeeper.connect": "unused:1"})
    follower = ConfigFollower(None, store)
    follower.entities = {("users", "u"): {"producer_byte_rate": "7"}, ("clients", "gone"): {}}
    assert follower.sync() is True
    assert store.current().entity_configs == {("users", "u"): {"producer_byte_rate": "7"}}
    assert follower.sync() is False
