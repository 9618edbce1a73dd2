"""The cluster-metadata model: standalone defaults, the embedded file format
(old files with shared-table slots load; new files hold none)."""

import json
import uuid

from kafkapy.metadata.model import BrokerInfo, Metadata, PartitionState, TopicInfo


def _md_with_topic(partitions=3, **topic):
    md = Metadata(controller_id=7)
    md.topics["t"] = TopicInfo("t", uuid.uuid4(), partitions, {"retention.ms": "5"}, **topic)
    return md


def test_standalone_partition_state_is_the_controller_alone():
    md = _md_with_topic()
    state = md.partition_state("t", 2)
    assert state == PartitionState(replicas=(7,), leader=7, leader_epoch=0, isr=(7,), partition_epoch=0)
    assert md.partition_state("t", 3) is None and md.partition_state("t", -1) is None
    assert md.partition_state("nope", 0) is None


def test_explicit_partition_state_wins_and_round_trips():
    md = _md_with_topic()
    explicit = PartitionState((1, 2, 3), 2, 5, (2, 3), 9)
    md.topics["t"].partitions[1] = explicit
    assert md.partition_state("t", 1) == explicit and md.topics["t"].replicas(1) == (1, 2, 3)
    assert md.partition_state("t", 0).leader == 7
    again = Metadata.from_json(json.loads(json.dumps(md.to_json())))
    assert again.topics["t"].partitions == {1: explicit}
    assert again.topics["t"].configs == {"retention.ms": "5"}


def test_old_file_with_slots_loads_and_slots_are_not_metadata():
    topic_id = uuid.uuid4()
    old = {"version": 1, "producer_id_block_end": 3000,
           "broker_configs": {"<default>": {"log.retention.ms": "9"}, "0": {}},
           "topics": {"a": {"topic_id": str(topic_id), "num_partitions": 2, "configs": {},
                            "slots": [17, 4]}}}
    md = Metadata.from_json(old)
    info = md.topics["a"]
    assert (info.name, info.topic_id, info.num_partitions) == ("a", topic_id, 2)
    assert md.by_id(topic_id) is info and md.by_id(uuid.uuid4()) is None
    assert md.producer_id_block_end == 3000
    assert md.broker_dynamic("<default>") == {"log.retention.ms": "9"} and md.broker_dynamic("1") == {}
    assert info.partitions == {}
    written = md.to_json()
    assert "slots" not in json.dumps(written)
    assert written["broker_configs"] == {"<default>": {"log.retention.ms": "9"}}


def test_live_facts_stay_out_of_the_file():
    md = _md_with_topic()
    md.brokers = {7: BrokerInfo(7, "h", 9092)}
    md.controller_epoch = 1
    written = md.to_json()
    assert set(written) == {"version", "producer_id_block_end", "broker_configs", "topics"}
    assert set(written["topics"]["t"]) == {"topic_id", "num_partitions", "configs"}
