"""User and client entity configs (quotas, SCRAM credentials) in ZooKeeper, as
Kafka 3.9 keeps them: ``/config/users/<u>``, ``/config/clients/<c>``,
``/config/users/<u>/clients/<c>`` with ``{"version":1,"config":{...}}`` and a
``/config/changes`` notification naming the entity path; one broker's
alteration keeps the entity's other keys and reaches another broker's image
through the notifications (real ZooKeeper from the harness)."""

from __future__ import annotations

import json

import pytest

from kafkapy.metadata.model import (
    BrokerInfo,
    EndPoint,
    client_entity,
    ip_entity,
    user_client_entity,
    user_entity,
)
from kafkapy.metadata.zk.store import ZkMetadataStore, follow_config_changes
from kafkapy.metadata.zk.client import ZkClient
from kafkapy.server.config import BrokerConfig
from kafkapy.storage.shared import SharedPartitionTable
from support.wait import wait_for

pytestmark = pytest.mark.timeout(120)


def test_entity_configs_written_as_kafka_and_followed(zookeeper, tmp_path):
    chroot = "/entity_configs"
    connect = zookeeper.connect_string(chroot)
    client = ZkClient(connect, session_timeout_ms=4000).connect()
    tables = [SharedPartitionTable(capacity=16, lock_path=str(tmp_path / f"t{i}.lock")) for i in (1, 2)]
    stores = []
    for i, table in zip((1, 2), tables):
        (tmp_path / str(i)).mkdir()
        config = BrokerConfig.from_props({"broker.id": str(i), "zookeeper.connect": connect,
                                          "zookeeper.session.timeout.ms": "4000", "log.dirs": "/x"},
                                         warn_unknown=False)
        stores.append(ZkMetadataStore(str(tmp_path / str(i)), table,
                                      BrokerInfo(i, "127.0.0.1", 9090 + i, None, (EndPoint("127.0.0.1", 9090 + i),)),
                                      config))
    one, two = stores
    client.zk.ensure_path("/config/changes")
    client.set_entity_config("users", "alice", {"SCRAM-SHA-256": "salt=x,stored_key=y,server_key=z,iterations=4096"})
    follower = follow_config_changes(client, two)
    try:
        assert two.current().entity_configs[user_entity("alice")]["SCRAM-SHA-256"].startswith("salt=")
        one.alter_entity_configs(user_entity("alice"), {"producer_byte_rate": "1024"})
        one.alter_entity_configs_batch({user_client_entity("bob", "c 1"): ({"request_percentage": "50"}, []),
                                        client_entity(None): ({"consumer_byte_rate": "2048"}, [])})
        data, _ = client.zk.get("/config/users/alice")
        assert json.loads(data) == {"version": 1, "config": {
            "SCRAM-SHA-256": "salt=x,stored_key=y,server_key=z,iterations=4096", "producer_byte_rate": "1024"}}
        data, _ = client.zk.get("/config/users/bob/clients/c%201")
        assert json.loads(data) == {"version": 1, "config": {"request_percentage": "50"}}
        assert client.zk.get("/config/users/bob")[0] in (b"", None)  # parent created empty
        assert json.loads(client.zk.get("/config/clients/<default>")[0])["config"] == {"consumer_byte_rate": "2048"}
        paths = {json.loads(client.zk.get("/config/changes/" + c)[0])["entity_path"]
                 for c in client.zk.get_children("/config/changes")}
        assert {"users/alice", "users/bob/clients/c%201", "clients/<default>"} <= paths
        # the writer's image at once, the other broker's through the notifications
        assert one.current().entity_configs[user_client_entity("bob", "c 1")] == {"request_percentage": "50"}
        wait_for(lambda: two.current().entity_configs.get(client_entity(None)) == {"consumer_byte_rate": "2048"},
                 10, "the follower")
        wait_for(lambda: two.current().entity_configs.get(user_entity("alice"), {}).get(
            "producer_byte_rate") == "1024", 10, "the follower")
        one.alter_entity_configs(ip_entity("127.0.0.1"), {"connection_creation_rate": "5"})
        assert json.loads(client.zk.get("/config/ips/127.0.0.1")[0])["config"] == {"connection_creation_rate": "5"}
        wait_for(lambda: two.current().entity_configs.get(ip_entity("127.0.0.1")) == {"connection_creation_rate": "5"},
                 10, "the follower")
        one.alter_entity_configs(client_entity(None), delete=["consumer_byte_rate"])
        wait_for(lambda: client_entity(None) not in two.current().entity_configs, 10, "the follower")
        assert json.loads(client.zk.get("/config/clients/<default>")[0])["config"] == {}
    finally:
        follower.stop()
        for s in stores:
            s.close()
        for t in tables:
            t.close()
        client.close()
