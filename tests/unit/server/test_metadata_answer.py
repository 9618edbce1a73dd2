"""Metadata answers from the metadata model: standalone every partition is
this broker's; a partition state set in the model (as cluster mode's image
will hold) is answered as it is, a leader that is not a live broker as
LEADER_NOT_AVAILABLE with its dead replicas offline."""

import typing

from kafkapy.metadata.model import PartitionState
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server import config as c
from kafkapy.server.broker import Broker
from kafkapy.server.handlers import HANDLERS, RequestContext
from kafkapy.storage.log_manager import LogManager


def _metadata_request(topic, version=12):
    cls = API_TABLE[3].request_class(version)
    args = typing.get_args(typing.get_type_hints(cls)["topics"])
    topic_cls = typing.get_args(args[0])[0] if typing.get_origin(args[0]) is tuple else args[0]
    return cls(topics=(topic_cls(topic_id=None, name=topic),), allow_auto_topic_creation=False,
               include_topic_authorized_operations=False)


def test_partitions_answer_the_model(tmp_path, table):
    config = c.BrokerConfig.from_props({"log.dirs": str(tmp_path / "logs"), "broker.id": "4",
                                        "listeners": "PLAINTEXT://127.0.0.1:9092", "broker.rack": "r1"})
    broker = Broker(config, table, LogManager(config.log_dirs, c.log_config_for(config, {}), 4))
    try:
        broker.admin.create_topic("t", 3)

        def set_states(md):
            md.topics["t"].partitions[1] = PartitionState((4, 7), 4, 3, (4,), 2)
            md.topics["t"].partitions[2] = PartitionState((7, 4), 7, 5, (7,), 6)

        broker.store.update(set_states)
        ctx = RequestContext(broker, 3, 12, 1, "test", 0)
        response = HANDLERS[3](ctx, _metadata_request("t"))
        assert [(b.node_id, b.host, b.port, b.rack) for b in response.brokers] == \
            [(4, "127.0.0.1", 9092, "r1")]
        assert response.controller_id == 4
        got = [(p.partition_index, p.error_code, p.leader_id, p.leader_epoch, tuple(p.replica_nodes),
                tuple(p.isr_nodes), tuple(p.offline_replicas)) for p in response.topics[0].partitions]
        assert got == [
            (0, ErrorCode.NONE, 4, 0, (4,), (4,), ()),
            (1, ErrorCode.NONE, 4, 3, (4, 7), (4,), (7,)),
            (2, ErrorCode.LEADER_NOT_AVAILABLE, -1, 5, (7, 4), (7,), (7,)),
        ]
    finally:
        broker.close()


def test_v13_answers_a_top_level_error_code(tmp_path, table):
    config = c.BrokerConfig.from_props({"log.dirs": str(tmp_path / "logs"), "broker.id": "0",
                                        "listeners": "PLAINTEXT://127.0.0.1:9092"})
    broker = Broker(config, table, LogManager(config.log_dirs, c.log_config_for(config, {}), 0))
    try:
        broker.admin.create_topic("t", 1)
        response = HANDLERS[3](RequestContext(broker, 3, 13, 1, "test", 0), _metadata_request("t", 13))
        assert response.error_code == ErrorCode.NONE
        assert [p.leader_id for p in response.topics[0].partitions] == [0]
    finally:
        broker.close()
