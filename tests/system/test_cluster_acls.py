"""ACLs in a three-broker cluster on a real ZooKeeper (issue 13, Authorization).

Each broker has two listeners: PLAINTEXT, the inter-broker one (its
principal User:ANONYMOUS is a super user, as docs/architecture.md says a
cluster's broker principal must be), and SASL_PLAINTEXT for clients (PLAIN
users admin, a super user, and alice). An ACL created through one broker
is written to ZooKeeper as Kafka writes it (``/kafka-acl/Topic/<t>``, a
``/kafka-acl-changes`` notification) and followed by every broker: alice's
produce to partitions led by each of the three brokers is refused, then
accepted on all of them once the ACL is added through broker 1, then refused
again once it is removed through broker 2 with the kafkapy-acls tool (alice
keeps Describe throughout, so each refusal is the partition leader's own).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.broker import free_port, write_properties
from support.cluster import create_topic_assigned, running_cluster
from support.wait import wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient, ResourcePatternType, ResourceType,
)

pytestmark = pytest.mark.timeout(180)

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
        "password=\"admin-secret\" " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
TOPIC = "acl-everywhere"


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    def listeners(c):
        c.sasl = {}
        for i, b in c.brokers.items():  # a second listener per broker, for clients
            c.sasl[i] = f"127.0.0.1:{free_port()}"
            b.props["listeners"] = b.props["advertised.listeners"] = \
                f"PLAINTEXT://{b.bootstrap},SASL_PLAINTEXT://{c.sasl[i]}"
            write_properties(b.props_path, b.props)

    with running_cluster(zookeeper, tmp_path_factory.mktemp("cluster"), "/cluster-acls", {
            "offsets.topic.num.partitions": 3,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS",
            "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT"}, before_start=listeners) as (c, _):
        yield c


def _conf(bootstrap, user, **extra):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user], **extra}


def _produce_everywhere(cluster, user) -> list:
    """One record to each partition (each led by another broker): the delivery error codes."""
    producer = confluent_kafka.Producer(_conf(cluster.sasl[1], user, **{"message.timeout.ms": 5000, "retries": 0}))
    outcomes = {}
    for p in range(3):
        producer.produce(TOPIC, b"v", partition=p,
                         on_delivery=lambda err, msg, p=p: outcomes.__setitem__(p, err.code() if err else None))
    producer.flush(15)
    return [outcomes.get(p, "undelivered") for p in range(3)]


def test_acls_written_through_one_broker_apply_on_every_broker(cluster, zookeeper, tmp_path):
    create_topic_assigned(cluster, TOPIC, [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    admin = AdminClient(_conf(cluster.sasl[1], "admin"))  # only broker 1: the CreateAcls go there

    def grant(operation):
        for f in admin.create_acls([AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL,
                                               "User:alice", "*", operation, AclPermissionType.ALLOW)],
                                   request_timeout=15).values():
            assert f.result(timeout=20) is None

    # Describe (metadata) but no Write: each partition's leader refuses the produce itself.
    grant(AclOperation.DESCRIBE)
    denied = [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    wait_for(lambda: _produce_everywhere(cluster, "alice") == denied, 30, "alice's writes refused by each leader")
    grant(AclOperation.WRITE)
    # Kafka's znodes, in Kafka's JSON.
    zk = zookeeper.client("/cluster-acls")
    try:
        doc = json.loads(zk.get(f"/kafka-acl/Topic/{TOPIC}")[0])
        assert sorted(doc["acls"], key=lambda a: a["operation"]) == [
            {"principal": "User:alice", "permissionType": "Allow", "operation": op, "host": "*"}
            for op in ("Describe", "Write")] and doc["version"] == 1
        changes = [zk.get(f"/kafka-acl-changes/{c}")[0] for c in zk.get_children("/kafka-acl-changes")]
        assert f"TOPIC:{TOPIC}".encode() in changes
    finally:
        zk.stop()
        zk.close()
    # Every leader (brokers 1, 2, 3) follows the notification within a bounded time.
    wait_for(lambda: _produce_everywhere(cluster, "alice") == [None] * 3, 30, "alice's writes accepted everywhere")
    # Broker 3 describes the ACL broker 1 wrote.
    other = AdminClient(_conf(cluster.sasl[3], "admin"))
    found = other.describe_acls(AclBindingFilter(ResourceType.TOPIC, TOPIC, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(timeout=20)
    assert sorted((b.principal, b.operation.name) for b in found) == [("User:alice", "DESCRIBE"),
                                                                      ("User:alice", "WRITE")]

    # Removed through broker 2 with the tool: refused everywhere again; the znode keeps Describe.
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                      "org.apache.kafka.common.security.plain.PlainLoginModule required "
                      f'username="admin" password="{USERS["admin"]}";\n')
    removed = subprocess.run([sys.executable, "-m", "kafkapy.tools.acls", "--bootstrap-server", cluster.sasl[2],
                              "--command-config", str(config), "--remove", "--force", "--topic", TOPIC,
                              "--allow-principal", "User:alice", "--operation", "Write"],
                             capture_output=True, text=True, timeout=60)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    wait_for(lambda: _produce_everywhere(cluster, "alice") == denied, 30, "alice's writes refused everywhere")
    zk = zookeeper.client("/cluster-acls")
    try:
        doc = json.loads(zk.get(f"/kafka-acl/Topic/{TOPIC}")[0])
        assert [a["operation"] for a in doc["acls"]] == ["Describe"]
    finally:
        zk.stop()
        zk.close()
