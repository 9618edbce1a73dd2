"""The embedded metadata store through the MetadataStore interface: atomic
updates, the generation, changes made by another store object (another
process) on the same table and dir, the producer-id block, OffsetCommit v0's offsets."""

import json
import multiprocessing
import os
import uuid

import pytest

from kafkapy.metadata.embedded import CONSUMER_OFFSETS_FILE, METADATA_FILE, EmbeddedMetadataStore
from kafkapy.metadata.model import BrokerInfo, Metadata, TopicInfo
from kafkapy.metadata.store import METADATA_GENERATION, PRODUCER_ID_BLOCK, MetadataStore

pytestmark = pytest.mark.timeout(60)

FORK = multiprocessing.get_context("fork")


def _add_topic(name, partitions=1):
    def change(md):
        md.topics[name] = TopicInfo(name, uuid.uuid4(), partitions)
    return change


def test_embedded_store_is_a_metadata_store_with_this_broker_as_controller(tmp_path, table):
    store = EmbeddedMetadataStore(str(tmp_path), table, BrokerInfo(3, "h", 9093))
    assert isinstance(store, MetadataStore)
    assert store.generation == -1
    md = store.current()
    assert md.topics == {} and md.controller_id == 3 and md.controller_epoch == 1
    assert md.brokers == {3: BrokerInfo(3, "h", 9093)}
    store.update(_add_topic("t", 2))
    assert store.current().partition_state("t", 1).isr == (3,)


def test_update_moves_the_generation_and_writes_the_file(tmp_path, table):
    store = EmbeddedMetadataStore(str(tmp_path), table)
    store.current()
    before = store.generation
    assert before == table.counter(METADATA_GENERATION)
    md = store.update(_add_topic("t", 4))
    assert store.generation == before + 1 == table.counter(METADATA_GENERATION)
    assert store.current() is md  # no re-read while the counter stands still
    with open(tmp_path / METADATA_FILE) as f:
        on_disk = json.load(f)
    assert on_disk["topics"]["t"]["num_partitions"] == 4
    assert not os.path.exists(str(tmp_path / METADATA_FILE) + ".tmp")


def test_failed_change_writes_nothing(tmp_path, table):
    store = EmbeddedMetadataStore(str(tmp_path), table)
    store.update(_add_topic("t"))
    generation = store.generation

    def bad(md):
        md.topics.clear()
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError):
        store.update(bad)
    assert store.generation == generation == table.counter(METADATA_GENERATION)
    assert set(EmbeddedMetadataStore(str(tmp_path), table).current().topics) == {"t"}


def test_second_store_object_sees_the_change(tmp_path, table):
    a = EmbeddedMetadataStore(str(tmp_path), table)
    b = EmbeddedMetadataStore(str(tmp_path), table)
    assert b.current().topics == {}
    a.update(_add_topic("x"))
    assert set(b.current().topics) == {"x"} and b.generation == a.generation
    # b's update starts from what a wrote (conditional on the latest read).
    b.update(_add_topic("y"))
    assert set(a.current().topics) == {"x", "y"}


def _add_topics_and_exit(path, table, names):
    store = EmbeddedMetadataStore(path, table)
    for name in names:
        store.update(_add_topic(name))
    os._exit(0)


def test_concurrent_updates_from_processes_lose_nothing(tmp_path, table):
    names = [[f"p{i}-{j}" for j in range(20)] for i in range(3)]
    procs = [FORK.Process(target=_add_topics_and_exit, args=(str(tmp_path), table, n)) for n in names]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    store = EmbeddedMetadataStore(str(tmp_path), table)
    assert set(store.current().topics) == {n for group in names for n in group}
    assert store.generation == 60


def test_replace_keeps_the_persistent_facts(tmp_path, table):
    store = EmbeddedMetadataStore(str(tmp_path), table)
    md = Metadata(producer_id_block_end=5000, broker_configs={"<default>": {"log.retention.ms": "1"}})
    md.topics["r"] = TopicInfo("r", uuid.uuid4(), 2)
    store.replace(md)
    other = EmbeddedMetadataStore(str(tmp_path), table).current()
    assert set(other.topics) == {"r"} and other.producer_id_block_end == 5000
    assert other.broker_dynamic("<default>") == {"log.retention.ms": "1"}


def test_producer_id_blocks_follow_each_other(tmp_path, table):
    a = EmbeddedMetadataStore(str(tmp_path), table)
    b = EmbeddedMetadataStore(str(tmp_path), table)
    first = a.new_producer_id_block(0)
    second = b.new_producer_id_block(0)
    assert (first.first_producer_id, first.last_producer_id) == (0, PRODUCER_ID_BLOCK - 1)
    assert second.first_producer_id == first.next_block_first_id
    assert a.current().producer_id_block_end == 2 * PRODUCER_ID_BLOCK


def test_consumer_offsets_v0_are_kept_apart_and_move_no_generation(tmp_path, table):
    a = EmbeddedMetadataStore(str(tmp_path), table)
    b = EmbeddedMetadataStore(str(tmp_path), table)
    a.current()
    generation = table.counter(METADATA_GENERATION)
    assert a.consumer_offset("g", "t", 0) is None
    a.set_consumer_offset("g", "t", 0, 5)
    a.set_consumer_offset("g", "t", 1, 6)
    b.set_consumer_offset("g", "t", 0, 7)
    b.set_consumer_offset("h", "t", 0, 8)
    assert [a.consumer_offset(*k) for k in (("g", "t", 0), ("g", "t", 1), ("h", "t", 0), ("h", "t", 1))] \
        == [7, 6, 8, None]
    assert table.counter(METADATA_GENERATION) == generation  # not metadata: nobody re-reads
    with pytest.raises(ValueError):
        a.set_consumer_offset("", "t", 0, 1)  # ZooKeeper cannot name it; neither does the file
    assert json.loads((tmp_path / CONSUMER_OFFSETS_FILE).read_text())["offsets"]["h"] == {"t": {"0": 8}}
