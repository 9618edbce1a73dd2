"""KIP-951 in a two-broker cluster: a Fetch v16+ sent to a broker that does
not lead the partition answers NOT_LEADER_OR_FOLLOWER with the current
leader, its epoch and its endpoint, so the client goes there without a
Metadata round trip; v15 answers the error alone."""

from __future__ import annotations

import pytest

from support.fetch import FETCH, Conn, fetch_request, partitions_of, topic_id


pytestmark = pytest.mark.timeout(180)

NOT_LEADER_OR_FOLLOWER = 6


@pytest.fixture
def cluster(make_cluster):
    c, _ = make_cluster(broker_ids=(1, 2))
    return c


def test_a_follower_less_broker_names_the_leader(cluster):
    (leader, _, _), = cluster.create_topic("kip951", partitions=1, replication_factor=1).values()
    other = next(i for i in cluster.brokers if i != leader)
    host, _, port = cluster.brokers[leader].bootstrap.rpartition(":")
    with Conn(cluster.brokers[other].bootstrap) as c:
        tid = topic_id(c, "kip951")
        for version in (15, 16, 17):
            r = c.call(FETCH, version, fetch_request(version, [(tid, [(0, 0)])]))
            p = partitions_of(r)[(tid, 0)]
            assert p.error_code == NOT_LEADER_OR_FOLLOWER
            if version < 16:
                assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (-1, -1)
                continue
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader, 0)
            assert [(n.node_id, n.host, n.port) for n in r.node_endpoints] == [(leader, host, int(port))]
