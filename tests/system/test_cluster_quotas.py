"""Client quotas in a cluster (real ZooKeeper, two brokers): a quota altered
through one broker is written to ZooKeeper as Kafka writes it
(``/config/clients/<c>`` and a ``/config/changes`` notification), every broker
follows it into its image, and the other broker throttles that client's
produce (its own per-broker accounting, as Kafka's quotas are per broker)."""

from __future__ import annotations

import pytest

from support.cluster import create_topic_assigned
from support.wait import wait_for

from support.quotas import Connection, alter, describe, produce_request

from kafkapy.protocol.errors import ErrorCode as E

pytestmark = pytest.mark.timeout(180)


def test_quota_set_on_one_broker_applies_on_another(make_cluster):
    cluster, _ = make_cluster(broker_ids=(1, 2))
    one, two = cluster.brokers[1].bootstrap, cluster.brokers[2].bootstrap
    create_topic_assigned(cluster, "cq", [[2]])
    r = alter(one, {"client-id": "cq-client"}, {"producer_byte_rate": 80 * 1024})
    assert r.entries[0].error_code == E.NONE
    wait_for(lambda: describe(two, [("client-id", 0, "cq-client")], strict=True)[1] ==
             {(("client-id", "cq-client"),): {"producer_byte_rate": 81920.0}}, 15, "broker 2 to follow")
    # broker 2 serves the partition once LeaderAndIsr reached it (Metadata may say so first)
    warm = Connection(two, "cq-warm")
    try:
        wait_for(lambda: warm.call(0, 9, produce_request("cq", 10))[0].responses[0]
                 .partition_responses[0].error_code == E.NONE, 15, "broker 2 to lead cq")
    finally:
        warm.close()
    conn = Connection(two, "cq-client")
    try:
        response, _ = conn.call(0, 9, {**produce_request("cq", 100_000, records=9), "acks": 1})
        partition = response.responses[0].partition_responses[0]
        assert partition.error_code == E.NONE
        throttle = response.throttle_time
        throttle_ms = throttle.total_seconds() * 1000 if hasattr(throttle, "total_seconds") else throttle
        assert throttle_ms >= 500  # ~900 KB against a bucket of 10 s x 80 KB/s
    finally:
        conn.close()
    # an acks=all produce answered late (when broker 1 has fetched the
    # records) carries the throttle time too, as Kafka computes it for
    # the response it sends after its DelayedProduce completes
    create_topic_assigned(cluster, "cq-all", [[2, 1]])
    conn = Connection(two, "cq-client")
    try:
        response, _ = conn.call(0, 9, {**produce_request("cq-all", 100_000), "acks": -1})
        partition = response.responses[0].partition_responses[0]
        assert partition.error_code == E.NONE and partition.base_offset == 0
        throttle = response.throttle_time
        throttle_ms = throttle.total_seconds() * 1000 if hasattr(throttle, "total_seconds") else throttle
        assert throttle_ms >= 500, throttle_ms  # still over its 80 KB/s
    finally:
        conn.close()
    # another client on the same broker is not throttled
    conn = Connection(two, "cq-other")
    try:
        response, _ = conn.call(0, 9, produce_request("cq", 100_000, records=9))
        throttle = response.throttle_time
        assert (throttle.total_seconds() if hasattr(throttle, "total_seconds") else throttle) == 0
    finally:
        conn.close()
