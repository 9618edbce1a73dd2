"""The cluster harness's waits against a real cluster: ``Cluster.wait_topic_ready``
returns only once every running broker's own Metadata shows the topic, not
when the first one does (brokers learn it from the controller's
UpdateMetadata one by one)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from support.cluster import Frozen, controller_id
from support.wait import wait_for

pytestmark = pytest.mark.timeout(120)


def test_wait_topic_ready_waits_for_a_broker_that_was_frozen_while_the_topic_was_made(make_cluster):
    # Sessions outlive the freeze (a Metadata request to the frozen broker
    # waits for its 5 s timeout): the broker keeps its registration, so nothing but
    # its UpdateMetadata arriving late tells it apart.
    c, _zk = make_cluster(**{"zookeeper.session.timeout.ms": 10000})
    controller = controller_id(c)
    frozen = next(i for i in sorted(c.brokers) if i != controller)
    a, b = [i for i in sorted(c.brokers) if i != frozen]
    admin = AdminClient({"bootstrap.servers": c.brokers[controller].bootstrap})  # CreateTopics goes to the controller
    with Frozen(c.brokers[frozen]):
        admin.create_topics([NewTopic("late", 1, -1, replica_assignment=[[a, b]])],
                            operation_timeout=10)["late"].result(timeout=30)
        wait_for(lambda: c.broker_partitions(c.brokers[controller], "late"), 10,
                 "the topic in the controller's own metadata")
        with pytest.raises(AssertionError, match="every running broker"):
            c.wait_topic_ready("late", 1, 2, timeout_s=1)
    parts = c.wait_topic_ready("late", 1, 2)
    # No further wait: the broker frozen while the topic was made knows it now.
    assert c.broker_partitions(c.brokers[frozen], "late") == parts
    assert parts[0][0] == a and set(parts[0][2]) == {a, b}
