"""Cluster-mode metrics from the brokers' own /metrics endpoints (issue 15,
section 3): one active controller, under-replicated partitions counted on the
leader while a follower is down, ISR shrinks and expands counted, the
replica fetchers' lag exposed. Scraped over HTTP from each broker."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from support.cluster import create_topic_assigned
from support.wait import wait_for
from support.cluster import scrape_metrics as scrape


@pytest.fixture
def cluster(make_cluster):
    # A session far longer than the lag: the leader's ISR job, not the
    # controller's reaction to the dead broker's session, shrinks the ISR.
    c, _ = make_cluster(metrics=True, **{"replica.lag.time.max.ms": 1500, "zookeeper.session.timeout.ms": 10000})
    return c


def test_cluster_gauges_follow_a_followers_death_and_return(cluster):
    ports = cluster.metrics_ports
    create_topic_assigned(cluster, "m", [[1, 2, 3]])  # broker 1 leads, 2 and 3 follow
    cluster.wait_topic_ready("m", 1, 3)

    def on(broker_id, name):
        return scrape(int(ports[broker_id])).get(name)

    active = wait_for(lambda: [on(i, "kafka_controller_kafkacontroller_active_controller_count") for i in (1, 2, 3)],
                      30, "every broker's gauges")
    assert sorted(active) == [0, 0, 1]
    # The supervisor refreshes its partition gauges about once a second.
    wait_for(lambda: on(1, "kafka_server_replicamanager_leader_count") == 1, 30, "broker 1 leading")
    wait_for(lambda: on(2, "kafka_server_replicamanager_partition_count") == 1, 30, "broker 2 hosting")
    assert on(2, "kafka_server_replicamanager_leader_count") == 0
    assert on(1, "kafka_server_replicamanager_under_replicated_partitions") == 0
    assert on(2, "kafka_server_replicafetchermanager_max_lag") is not None

    victim = 3 if on(3, "kafka_controller_kafkacontroller_active_controller_count") == 0 else 2
    cluster.brokers[victim].kill()
    # A dead follower at the log end offset is still caught up (Kafka's
    # isCaughtUp): records it does not fetch make it fall behind.
    producer = Producer({"bootstrap.servers": cluster.brokers[1].bootstrap, "acks": 1, "linger.ms": 0})

    def behind():
        producer.produce("m", b"x")
        producer.flush(5)
        return on(1, "kafka_server_replicamanager_under_replicated_partitions") == 1

    wait_for(behind, 30, "the leader counting its partition under-replicated")
    assert on(1, "kafka_server_replicamanager_isr_shrinks_total") >= 1
    assert on(1, "kafka_server_replicamanager_under_min_isr_partition_count") == 0  # min.insync.replicas=1

    # As Kafka's, a broker restarted while its old session's registration is
    # still there refuses to start (broker id already registered): wait it out.
    zk = cluster.zookeeper.client(cluster.chroot)
    try:
        wait_for(lambda: not zk.exists(f"/brokers/ids/{victim}"), 30, "the dead broker's session to expire")
    finally:
        zk.stop()
        zk.close()
    cluster.brokers[victim].start()
    wait_for(lambda: on(1, "kafka_server_replicamanager_under_replicated_partitions") == 0, 60,
             "the ISR full again")
    assert on(1, "kafka_server_replicamanager_isr_expands_total") >= 1
