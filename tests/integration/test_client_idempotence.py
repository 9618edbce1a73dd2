"""kafkapy.client's idempotent producer after OUT_OF_ORDER_SEQUENCE_NUMBER
against a real broker (client/idempotence.py, Java's KIP-360 handling): the
broker's state for the producer is moved past the client's (a raw batch with
the producer's id and next sequence, as a leader whose log differs from what
the client was acknowledged would hold), so the client's next batch is
refused as out of order although it is the next one.  The producer bumps its
epoch for that partition only, re-sends the batch from sequence 0 under the
same producer id, and nothing is written twice or lost; the other partition
keeps its sequences."""

from __future__ import annotations

import time
import uuid

import pytest

from support.clients import module_broker
from support.fetch import Conn

from support.cluster import consume_all

from kafkapy._core.records_py import build_batch
from kafkapy.client import KafkaAdminClient, KafkaProducer, NewTopic, TopicPartition

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with module_broker(tmp_path_factory) as b:
        yield b


def test_out_of_order_for_the_next_batch_bumps_the_epoch_without_duplicates(broker):
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    with KafkaAdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    tp0 = TopicPartition(topic, 0)
    with KafkaProducer(broker.bootstrap, linger_ms=100) as producer:
        assert producer.idempotent
        for i in range(10):
            producer.send(topic, b"%d" % i, partition=i % 2)
        producer.flush(TIMEOUT_S)
        idem = producer._sender._idem
        producer_id, epoch = idem.producer_id, idem.producer_epoch
        assert epoch == 0
        next_sequence = idem._partitions[tp0].next_sequence
        assert next_sequence == 5
        # Someone else's write under our producer id and next sequence.
        raw = Conn(broker.bootstrap)
        try:
            batch = bytes(build_batch([(None, b"1000", [], int(time.time() * 1000))],
                                      producer_id=producer_id, producer_epoch=0, base_sequence=next_sequence))
            response = raw.call(0, 9, {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
            assert response.responses[0].partition_responses[0].error_code == 0
        finally:
            raw.close()
        # Three records in one batch at sequence 5: the broker expects 6 (OUT_OF_ORDER).
        futures = [producer.send(topic, b"%d" % (100 + i), partition=0) for i in range(3)]
        producer.flush(TIMEOUT_S)
        for future in futures:
            future.get(TIMEOUT_S)  # acknowledged, none failed
        assert (idem.producer_id, idem.producer_epoch) == (producer_id, 1)
        assert idem._partitions[tp0].producer_epoch == 1 and idem._partitions[tp0].next_sequence == 3
        producer.send(topic, b"200", partition=1).get(TIMEOUT_S)
        # Partition 1 had nothing unacknowledged: it moved to the new epoch from 0.
        assert idem._partitions[TopicPartition(topic, 1)].producer_epoch == 1
    consumed = consume_all(broker.bootstrap, topic, 2)
    assert consumed == {0: [0, 2, 4, 6, 8, 1000, 100, 101, 102], 1: [1, 3, 5, 7, 9, 200]}
