"""DescribeTopicPartitions (KIP-966) pages topics in name order by the
partition limit and answers unknown and invalid names, on a real Broker."""

import pytest

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server import config as c
from kafkapy.server.broker import Broker
from kafkapy.server.handlers import HANDLERS, RequestContext
from kafkapy.server.handlers.describe_topic_partitions import InvalidRequest
from kafkapy.storage.log_manager import LogManager

from kio.schema.describe_topic_partitions.v0.request import Cursor, TopicRequest


@pytest.fixture
def broker(tmp_path, table):
    config = c.BrokerConfig.from_props({"log.dirs": str(tmp_path / "logs"), "broker.id": "0",
                                        "listeners": "PLAINTEXT://127.0.0.1:9092",
                                        "max.request.partition.size.limit": "4"})
    b = Broker(config, table, LogManager(config.log_dirs, c.log_config_for(config, {}), 0))
    b.admin.create_topic("b", 3)
    b.admin.create_topic("a", 2)
    b.admin.create_topic("c", 1)
    yield b
    b.close()


def _describe(broker, topics=(), limit=2000, cursor=None):
    cls = API_TABLE[75].request_class(0)
    request = cls(topics=tuple(TopicRequest(name=t) for t in topics), response_partition_limit=limit,
                  cursor=None if cursor is None else Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    response = HANDLERS[75](RequestContext(broker, 75, 0, 1, "test", 0), request)
    got = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in response.topics]
    nxt = response.next_cursor
    return got, None if nxt is None else (nxt.topic_name, nxt.partition_index)


def test_every_topic_in_name_order_paged_by_the_broker_limit(broker):
    # The broker's max.request.partition.size.limit (4) caps the client's 2000.
    assert _describe(broker) == ([("a", 0, [0, 1]), ("b", 0, [0, 1])], ("b", 2))
    assert _describe(broker, cursor=("b", 2)) == ([("b", 0, [2]), ("c", 0, [0])], None)
    # A limit that ends exactly at a topic's end points the cursor at the next topic.
    assert _describe(broker, limit=2) == ([("a", 0, [0, 1])], ("b", 0))
    assert _describe(broker, limit=0) == ([("a", 0, [0])], ("a", 1))  # at least one


def test_named_topics_unknown_and_invalid(broker):
    got, cursor = _describe(broker, topics=("c", "nope", "bad name!"))
    assert got == [("bad name!", ErrorCode.INVALID_TOPIC_EXCEPTION, []), ("c", 0, [0]),
                   ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])] and cursor is None
    with pytest.raises(InvalidRequest):
        _describe(broker, topics=("a",), cursor=("b", 0))
    with pytest.raises(InvalidRequest):
        _describe(broker, cursor=("a", -1))
