"""Kafka's ACLs on one real broker, with real clients (issue 13, Authorization).

One broker with ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``,
``super.users=User:admin`` and two listeners: PLAINTEXT (the harness's
readiness probe; its principal User:ANONYMOUS has no ACLs) and
SASL_PLAINTEXT with PLAIN users admin, alice, bob and carol (the
inter-broker listener: the broker's own requests come as admin). ACLs are made
by admin with confluent-kafka's AdminClient (CreateAcls / DescribeAcls /
DeleteAcls) or the kafkapy-acls tool; the users then produce, consume,
commit and ask for metadata with confluent-kafka, and raw frames check
hostile CreateAcls input.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
import uuid

import pytest

from kafkapy.protocol import acls as A
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.security.scram_store import add_scram_credentials
from support.broker import free_port
from support.clients import module_broker
from support.sasl import serve_then_check_log
from support.rawclient import RawClient, encode_request

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType,
    ResourceType,
)

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret",
         "zoe": "zoe-secret"}  # zoe never gets an ACL
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
        "password=\"admin-secret\" " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _overrides(sasl_port: int, plain_port: int, **extra) -> dict:
    listeners = f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    return {"listeners": listeners, "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": AUTHORIZER, "super.users": "User:admin",
            # The broker's own requests (KIP-890's verification of a transactional
            # produce, AddPartitionsToTxn v4, needs ClusterAction) log in as admin,
            # as Kafka's brokers use a principal with ClusterAction.
            "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "num.partitions": 1, "num.io.threads": 2, "num.network.threads": 2,
            "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 2, **extra}


def _prepare(sasl: int):
    """What a broker of _overrides(sasl, ...) needs before it starts."""
    def prepare(broker):
        broker.sasl_bootstrap = f"127.0.0.1:{sasl}"
        # admin also as a SCRAM user, for the tool's SCRAM client (kafkapy.tools._secure_conn).
        os.makedirs(broker.log_dirs[0], exist_ok=True)
        add_scram_credentials(str(broker.log_dirs[0]), "admin", "SCRAM-SHA-256", USERS["admin"])
    return prepare


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    plain, sasl = free_port(), free_port()
    yield from serve_then_check_log(module_broker(tmp_path_factory, _overrides(sasl, plain), name="acls",
                                                  port=plain, before_start=_prepare(sasl)), USERS.values())


def _conf(broker, user: str, **extra) -> dict:
    return {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": USERS[user], **extra}


def _admin(broker) -> AdminClient:
    return AdminClient(_conf(broker, "admin"))


def _create_topics(broker, *names, partitions=1):
    admin = _admin(broker)  # kept alive until the futures are done
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], operation_timeout=10)
    for f in futures.values():
        f.result(timeout=20)


def _acl(user, resource_type, name, operation, permission=AclPermissionType.ALLOW,
         pattern=ResourcePatternType.LITERAL, host="*"):
    return AclBinding(resource_type, name, pattern, f"User:{user}", host, operation, permission)


def _grant(broker, *bindings):
    admin = _admin(broker)
    results = admin.create_acls(list(bindings), request_timeout=15)
    for f in results.values():
        assert f.result(timeout=20) is None


def _produce(broker, user, topic, values, **extra):
    """Deliver ``values``; the delivery errors (None for each success)."""
    producer = confluent_kafka.Producer(_conf(broker, user, **{"message.timeout.ms": 5000, "retries": 0, **extra}))
    outcomes = []
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, _msg: outcomes.append(err))
    producer.flush(15)
    return outcomes


def _end_offset(broker, topic, partition=0) -> int:
    consumer = confluent_kafka.Consumer(_conf(broker, "admin", **{"group.id": "probe"}))
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        consumer.close()


def _consume(broker, user, topic, group, want: int, timeout_s=15.0):
    """``(values, errors)`` from a group consumer reading ``topic`` from the start."""
    consumer = confluent_kafka.Consumer(_conf(broker, user, **{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    values, errors = [], []
    consumer.subscribe([topic])
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and len(values) < want and not errors:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(msg.error().code())
                continue
            values.append(msg.value())
    finally:
        consumer.close()
    return values, errors


# ----------------------------------------------------------------- the ACL APIs


def test_create_describe_delete_acls_with_confluent(secured):
    admin = _admin(secured)
    topic = "acl-apis"
    _grant(secured, _acl("alice", ResourceType.TOPIC, topic, AclOperation.READ),
           _acl("bob", ResourceType.TOPIC, "acl-", AclOperation.WRITE, AclPermissionType.DENY,
                ResourcePatternType.PREFIXED),
           _acl("alice", ResourceType.GROUP, "g-apis", AclOperation.READ))
    found = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(timeout=20)
    mine = {(b.restype, b.name, b.resource_pattern_type, b.principal, b.operation, b.permission_type)
            for b in found}
    assert (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", AclOperation.READ,
            AclPermissionType.ALLOW) in mine
    assert (ResourceType.TOPIC, "acl-", ResourcePatternType.PREFIXED, "User:bob", AclOperation.WRITE,
            AclPermissionType.DENY) in mine
    # MATCH: every pattern that applies to the name (the literal and the covering prefix)
    matched = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None,
                                                   None, AclOperation.ANY, AclPermissionType.ANY)).result(timeout=20)
    assert {b.name for b in matched} == {topic, "acl-"}
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "acl-", ResourcePatternType.PREFIXED, None,
                                                  None, AclOperation.ANY, AclPermissionType.ANY)],
                                request_timeout=15)
    gone = [b for f in deleted.values() for b in f.result(timeout=20)]
    assert [(b.name, b.principal) for b in gone] == [("acl-", "User:bob")]
    left = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:bob",
                                                None, AclOperation.ANY, AclPermissionType.ANY)).result(timeout=20)
    assert not [b for b in left if b.name == "acl-"]
    # A principal without Alter on the cluster cannot create ACLs.
    alice = AdminClient(_conf(secured, "alice"))
    results = alice.create_acls(
        [_acl("alice", ResourceType.TOPIC, "anything", AclOperation.ALL)], request_timeout=15)
    with pytest.raises(confluent_kafka.KafkaException) as err:
        list(results.values())[0].result(timeout=20)
    assert err.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


# ----------------------------------------------------------------- produce, fetch, commit, metadata


def test_without_write_nothing_is_appended_and_deny_wins(secured):
    topic = "acl-write"
    _create_topics(secured, topic)
    outcomes = _produce(secured, "alice", topic, [b"a", b"b"])
    assert [e.code() if e else None for e in outcomes] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2
    assert _end_offset(secured, topic) == 0
    _grant(secured, _acl("alice", ResourceType.TOPIC, topic, AclOperation.WRITE))
    assert _produce(secured, "alice", topic, [b"c"]) == [None]
    assert _end_offset(secured, topic) == 1
    # A Deny for every user wins over alice's Allow.
    _grant(secured, AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:*", "*",
                               AclOperation.WRITE, AclPermissionType.DENY))
    outcomes = _produce(secured, "alice", topic, [b"d"])
    assert outcomes[0] is not None and outcomes[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _end_offset(secured, topic) == 1
    # The super user is not subject to ACLs.
    assert _produce(secured, "admin", topic, [b"e"]) == [None]
    assert _end_offset(secured, topic) == 2


def test_without_read_no_fetch_and_no_commit(secured):
    topic, group = "acl-read", "g-acl-read"
    _create_topics(secured, topic)
    assert _produce(secured, "admin", topic, [b"1", b"2", b"3"]) == [None] * 3
    # Read on the group only: the fetch is refused.
    _grant(secured, _acl("bob", ResourceType.GROUP, group, AclOperation.READ),
           _acl("bob", ResourceType.TOPIC, topic, AclOperation.DESCRIBE))
    values, errors = _consume(secured, "bob", topic, group, 3)
    assert values == [] and KafkaError.TOPIC_AUTHORIZATION_FAILED in errors
    # Committing for the topic is refused too; for a group without Read, the group is.
    consumer = confluent_kafka.Consumer(_conf(secured, "bob", **{"group.id": group}))
    try:
        with pytest.raises(confluent_kafka.KafkaException) as err:
            consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        assert err.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()
    # Describe on a group finds its coordinator (FindCoordinator) but commits need Read.
    _grant(secured, _acl("bob", ResourceType.GROUP, "g-not-bobs", AclOperation.DESCRIBE))
    consumer = confluent_kafka.Consumer(_conf(secured, "bob", **{"group.id": "g-not-bobs"}))
    try:
        with pytest.raises(confluent_kafka.KafkaException) as err:
            consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        assert err.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()
    _grant(secured, _acl("bob", ResourceType.TOPIC, topic, AclOperation.READ))
    values, errors = _consume(secured, "bob", topic, group, 3)
    assert values == [b"1", b"2", b"3"] and not errors


def test_metadata_hides_topics_without_describe(secured):
    _create_topics(secured, "acl-visible", "acl-hidden")
    _grant(secured, _acl("carol", ResourceType.TOPIC, "acl-visible", AclOperation.DESCRIBE))
    admin = AdminClient(_conf(secured, "carol"))
    names = set(admin.list_topics(timeout=10).topics)
    assert "acl-visible" in names and "acl-hidden" not in names and "__consumer_offsets" not in names
    hidden = admin.list_topics(topic="acl-hidden", timeout=10).topics["acl-hidden"]
    assert hidden.error is not None and hidden.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The super user sees everything.
    assert {"acl-visible", "acl-hidden"} <= set(_admin(secured).list_topics(timeout=10).topics)


def _metadata_error_from(broker, source: str, user: str, topic: str) -> int:
    """Metadata v1 for ``topic`` asked by ``user`` (SASL PLAIN) from the
    loopback address ``source``: the topic's error code."""
    from support.sasl import authenticate, handshake

    host, _, port = broker.sasl_bootstrap.rpartition(":")
    with RawClient(host, int(port), source_address=(source, 0)) as client:
        assert handshake(client, "PLAIN").error_code == 0
        assert authenticate(client, f"\0{user}\0{USERS[user]}".encode()).error_code == 0
        response = _raw_call(client, 3, 1, {"topics": [{"name": topic}]})
    [answer] = response.topics
    return answer.error_code


def test_acl_hosts_match_the_client_address(secured):
    """An ACL's host is the client's address: allowed from 127.0.0.2 only,
    then allowed from any host with a Deny for 127.0.0.3 (deny wins there)."""
    _create_topics(secured, "acl-host")
    _grant(secured, _acl("carol", ResourceType.TOPIC, "acl-host", AclOperation.DESCRIBE, host="127.0.0.2"))
    assert _metadata_error_from(secured, "127.0.0.2", "carol", "acl-host") == 0
    assert _metadata_error_from(secured, "127.0.0.3", "carol", "acl-host") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    _grant(secured, _acl("carol", ResourceType.TOPIC, "acl-host", AclOperation.DESCRIBE),
           _acl("carol", ResourceType.TOPIC, "acl-host", AclOperation.DESCRIBE, AclPermissionType.DENY,
                host="127.0.0.3"))
    assert _metadata_error_from(secured, "127.0.0.4", "carol", "acl-host") == 0
    assert _metadata_error_from(secured, "127.0.0.3", "carol", "acl-host") == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_prefixed_allow_and_literal_deny(secured):
    _create_topics(secured, "pfx-open", "pfx-secret", "other-topic")
    for topic in ("pfx-open", "pfx-secret", "other-topic"):
        assert _produce(secured, "admin", topic, [b"x"]) == [None]
    _grant(secured, _acl("alice", ResourceType.TOPIC, "pfx-", AclOperation.READ,
                         pattern=ResourcePatternType.PREFIXED),
           _acl("alice", ResourceType.TOPIC, "pfx-secret", AclOperation.READ, AclPermissionType.DENY),
           _acl("alice", ResourceType.GROUP, "g-pfx", AclOperation.READ, pattern=ResourcePatternType.PREFIXED))
    assert _consume(secured, "alice", "pfx-open", "g-pfx-1", 1) == ([b"x"], [])
    values, errors = _consume(secured, "alice", "pfx-secret", "g-pfx-2", 1)
    assert values == [] and KafkaError.TOPIC_AUTHORIZATION_FAILED in errors
    # Read (allowed by the prefix) implies Describe; a Deny of Read does not deny Describe
    # (Kafka's rules), so both are listed; the topic no ACL covers is not.
    names = set(AdminClient(_conf(secured, "alice")).list_topics(timeout=10).topics)
    assert {"pfx-open", "pfx-secret"} <= names and "other-topic" not in names


def test_allow_everyone_if_no_acl_found(broker_factory):
    plain, sasl = free_port(), free_port()
    broker = broker_factory(_overrides(sasl, plain, **{"allow.everyone.if.no.acl.found": True}), port=plain,
                            start=False)
    _prepare(sasl)(broker)
    broker.start()
    _create_topics(broker, "open-topic", "guarded-topic")
    _grant(broker, _acl("bob", ResourceType.TOPIC, "guarded-topic", AclOperation.WRITE))
    assert _produce(broker, "alice", "open-topic", [b"1"]) == [None]  # no ACLs at all: allowed
    outcomes = _produce(broker, "alice", "guarded-topic", [b"2"])  # ACLs, none for alice
    assert outcomes[0] is not None and outcomes[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(broker, "bob", "guarded-topic", [b"3"]) == [None]
    assert _end_offset(broker, "open-topic") == 1 and _end_offset(broker, "guarded-topic") == 1


# ----------------------------------------------------------------- hostile CreateAcls, raw frames


def _sasl_raw(broker, user) -> RawClient:
    client = RawClient.connect(broker.sasl_bootstrap)
    mechanism = b"PLAIN"
    raw = client.request(17, 1, struct.pack(">h", len(mechanism)) + mechanism)  # SaslHandshake v1
    assert struct.unpack_from(">h", raw)[0] == 0
    token = f"\0{user}\0{USERS[user]}".encode()
    raw = client.request(36, 0, struct.pack(">i", len(token)) + token)  # SaslAuthenticate v0
    assert struct.unpack_from(">h", raw)[0] == 0
    return client


def _string(s: str | None) -> bytes:
    return struct.pack(">h", -1) if s is None else struct.pack(">h", len(s.encode())) + s.encode()


def _creation(rtype, name, pattern, principal, host, op, perm) -> bytes:
    return (struct.pack(">b", rtype) + _string(name) + struct.pack(">b", pattern) + _string(principal)
            + _string(host) + struct.pack(">bb", op, perm))


def _create_acls_v1(client, *creations) -> list:
    """CreateAcls v1 -> [(error code, error message)]."""
    raw = client.request(30, 1, struct.pack(">i", len(creations)) + b"".join(creations))
    (count,) = struct.unpack_from(">i", raw, 4)
    pos, out = 8, []
    for _ in range(count):
        code, length = struct.unpack_from(">hh", raw, pos)
        pos += 4
        message = None if length < 0 else raw[pos:pos + length].decode()
        pos += max(length, 0)
        out.append((code, message))
    return out


def test_hostile_create_acls_get_kafkas_errors(secured):
    with _sasl_raw(secured, "admin") as client:
        results = _create_acls_v1(
            client,
            _creation(99, "t", A.LITERAL, "User:x", "*", A.READ, A.ALLOW),        # a type Kafka does not know
            _creation(A.TOPIC, "t", A.LITERAL, "alice", "*", A.READ, A.ALLOW),  # not type:name
            _creation(A.CLUSTER, "not-kafka-cluster", A.LITERAL, "User:x", "*", A.ALTER, A.ALLOW),
            _creation(A.TOPIC, "", A.LITERAL, "User:x", "*", A.READ, A.ALLOW),
            _creation(A.TOPIC, "a/b", A.LITERAL, "User:x", "*", A.READ, A.ALLOW),
            _creation(A.TOPIC, "fine-topic", A.LITERAL, "User:x", "*", A.READ, A.ALLOW))
        assert [code for code, _ in results] == [ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_SERVER_ERROR,
                                                ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,
                                                ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
        assert results[2][1] == "The only valid name for the CLUSTER resource is kafka-cluster"
        # ANY as an operation: Kafka's binding constructor refuses the whole request.
        results = _create_acls_v1(client, _creation(A.TOPIC, "t", A.LITERAL, "User:x", "*", A.OP_ANY, A.ALLOW),
                                  _creation(A.TOPIC, "t", A.LITERAL, "User:x", "*", A.READ, A.ALLOW))
        assert [code for code, _ in results] == [ErrorCode.UNKNOWN_SERVER_ERROR] * 2
    # An UNKNOWN (0) code fails to parse in Kafka: the connection is closed.
    with _sasl_raw(secured, "admin") as client:
        client.send(encode_request(30, 1, 9, struct.pack(">i", 1) + _creation(0, "t", A.LITERAL, "User:x", "*",
                                                                              A.READ, A.ALLOW)))
        assert client.wait_closed(5)
    # Without Alter on the cluster (alice; User:ANONYMOUS on PLAINTEXT): CLUSTER_AUTHORIZATION_FAILED.
    with _sasl_raw(secured, "alice") as client:
        assert [c for c, _ in _create_acls_v1(client, _creation(A.TOPIC, "t", A.LITERAL, "User:alice", "*",
                                                                 A.ALL, A.ALLOW))] == \
            [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    with RawClient.connect(secured.bootstrap) as client:
        assert [c for c, _ in _create_acls_v1(client, _creation(A.TOPIC, "t", A.LITERAL, "User:ANONYMOUS", "*",
                                                                 A.ALL, A.ALLOW))] == \
            [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    # Nothing of the refused creations was stored; the valid one was.
    admin = _admin(secured)
    found = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:x", None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(timeout=20)
    assert [(b.name, b.operation) for b in found] == [("fine-topic", AclOperation.READ)]
    with RawClient.connect(secured.bootstrap) as client:
        assert client.api_versions(timeout_s=5)[0] == 0  # still serving


# ----------------------------------------------------------------- kafkapy-acls


def _tool(secured, tmp_path, *args, mechanism="PLAIN", password=USERS["admin"]):
    config = tmp_path / "admin.properties"
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    config.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                      f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
                      f'username="admin" password="{password}";\n')
    return subprocess.run([sys.executable, "-m", "kafkapy.tools.acls", "--bootstrap-server", secured.sasl_bootstrap,
                           "--command-config", str(config), *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO)


def test_kafkapy_acls_tool_adds_lists_removes(secured, tmp_path):
    topic = f"tool-{uuid.uuid4().hex[:6]}"
    added = _tool(secured, tmp_path, "--add", "--allow-principal", "User:dave", "--operation", "Read",
                  "--operation", "Describe", "--topic", topic)
    assert added.returncode == 0, added.stderr
    resource = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert added.stdout == (f"Adding ACLs for resource `{resource}`: \n"
                            " \t(principal=User:dave, host=*, operation=READ, permissionType=ALLOW)\n"
                            "\t(principal=User:dave, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n")
    consumer = _tool(secured, tmp_path, "--add", "--consumer", "--allow-principal", "User:erin", "--topic", topic,
                     "--group", "g-erin", "--resource-pattern-type", "prefixed")
    assert consumer.returncode == 0, consumer.stderr
    listed = _tool(secured, tmp_path, "--list", "--topic", topic)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == (f"Current ACLs for resource `{resource}`: \n"
                             " \t(principal=User:dave, host=*, operation=READ, permissionType=ALLOW)\n"
                             "\t(principal=User:dave, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n")
    matched = _tool(secured, tmp_path, "--list", "--topic", topic, "--resource-pattern-type", "match",
                    "--principal", "User:erin")
    assert matched.stdout.startswith("ACLs for principal `User:erin`\n")
    assert f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=PREFIXED)" in matched.stdout
    assert "User:dave" not in matched.stdout
    # The same through SCRAM-SHA-256 (the tool's own SCRAM client).
    assert _tool(secured, tmp_path, "--list", "--topic", topic, mechanism="SCRAM-SHA-256").stdout == listed.stdout
    removed = _tool(secured, tmp_path, "--remove", "--force", "--topic", topic)
    assert removed.returncode == 0 and removed.stdout == "", removed.stderr
    assert _tool(secured, tmp_path, "--list", "--topic", topic).stdout == ""
    wrong = _tool(secured, tmp_path, "--list", mechanism="SCRAM-SHA-256", password="wrong")
    assert wrong.returncode == 1 and wrong.stdout.startswith("Error while executing ACL command: Authentication failed")
    bad = _tool(secured, tmp_path, "--add", "--allow-principal", "User:dave", "--operation", "IdempotentWrite",
                "--topic", topic)
    assert bad.returncode == 1 and "ResourceType TOPIC only supports operations" in bad.stderr


def _error_code(future, timeout_s=20):
    """None if ``future`` succeeds, else its Kafka error code."""
    try:
        future.result(timeout=timeout_s)
        return None
    except confluent_kafka.KafkaException as exc:
        return exc.args[0].code()


def _raw_call(client, api_key: int, version: int, data: dict):
    """A non-flexible request built from ``data`` -> the decoded response."""
    from kafkapy.protocol.api import API_TABLE
    from kafkapy.protocol.codec import decode, encode_to_bytes
    from kafkapy.protocol.entities import construct

    spec = API_TABLE[api_key]
    body = encode_to_bytes(construct(spec.request_class(version), data))
    return decode(spec.response_class(version), memoryview(client.request(api_key, version, body)), 0)[0]


def test_admin_apis_without_acls_get_kafkas_errors(secured):
    """A principal without any ACL: each admin API answers Kafka's
    authorization error for its resource, and nothing changes."""
    from confluent_kafka import ConsumerGroupTopicPartitions, ElectionType
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions

    _create_topics(secured, "acl-admin")
    assert _produce(secured, "admin", "acl-admin", [b"a", b"b"]) == [None, None]
    zoe = AdminClient(_conf(secured, "zoe"))
    T, G, C = KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED, \
        KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert _error_code(zoe.create_topics([NewTopic("acl-zoe-new", 1, 1)])["acl-zoe-new"]) == T
    assert _error_code(zoe.delete_topics(["acl-admin"])["acl-admin"]) == T
    assert _error_code(zoe.create_partitions([NewPartitions("acl-admin", 3)])["acl-admin"]) == T
    [described] = zoe.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "acl-admin")]).values()
    assert _error_code(described) == T
    [described] = zoe.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "0")]).values()
    assert _error_code(described) == C
    change = ConfigResource(ConfigResource.Type.TOPIC, "acl-admin", incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    [altered] = zoe.incremental_alter_configs([change]).values()
    assert _error_code(altered) == T
    # DeleteRecords and ListOffsets raw: librdkafka answers them itself (_NOENT)
    # for a topic its Metadata does not show.
    with _sasl_raw(secured, "zoe") as client:
        deleted = _raw_call(client, 21, 1, {"topics": [{"name": "acl-admin", "partitions": [
            {"partition_index": 0, "offset": 1}]}], "timeout": 10000})
        assert deleted.topics[0].partitions[0].error_code == T
        listed = _raw_call(client, 2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "acl-admin", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                  "timestamp": -1}]}]})
        assert listed.topics[0].partitions[0].error_code == T
        # Quotas need DescribeConfigs / AlterConfigs on the cluster; log dirs Describe on it.
        quotas = _raw_call(client, 48, 0, {"components": [], "strict": False})
        assert quotas.error_code == C
        altered_quota = _raw_call(client, 49, 0, {"entries": [{"entity": [{"entity_type": "client-id",
                                                                           "entity_name": "zoe"}],
                                                               "ops": [{"key": "producer_byte_rate", "value": 1.0,
                                                                        "remove": False}]}],
                                                  "validate_only": False})
        assert altered_quota.entries[0].error_code == C
        log_dirs = _raw_call(client, 35, 1, {"topics": None})
        assert log_dirs.results == ()  # v1 has no error code: nothing is described
    assert _error_code(zoe.elect_leaders(ElectionType.PREFERRED, [TopicPartition("acl-admin", 0)])) == C
    [fetched] = zoe.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g-zoe")]).values()
    assert _error_code(fetched) == G
    [gone] = zoe.delete_consumer_groups(["g-zoe"]).values()
    assert _error_code(gone) == G
    # Nothing changed: the topic, its partitions, its records and its config are as they were.
    admin = _admin(secured)
    assert len(admin.list_topics(topic="acl-admin", timeout=10).topics["acl-admin"].partitions) == 1
    assert "acl-zoe-new" not in admin.list_topics(timeout=10).topics
    assert _end_offset(secured, "acl-admin") == 2
    [config] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "acl-admin")]).values()
    assert config.result(timeout=20)["retention.ms"].value != "1000"
    probe = confluent_kafka.Consumer(_conf(secured, "admin", **{"group.id": "probe-low"}))
    try:
        assert probe.get_watermark_offsets(TopicPartition("acl-admin", 0), timeout=10)[0] == 0  # no record deleted
    finally:
        probe.close()


def test_delegation_token_and_transactional_id_acls_through_the_tool(secured, tmp_path):
    """The other resource types' ACLs are stored and listed (DelegationToken
    allows Describe only, as Kafka)."""
    token, txn = f"tok-{uuid.uuid4().hex[:6]}", f"txn-{uuid.uuid4().hex[:6]}"
    added = _tool(secured, tmp_path, "--add", "--allow-principal", "User:dave", "--operation", "Describe",
                  "--delegation-token", token)
    assert added.returncode == 0, added.stderr
    added = _tool(secured, tmp_path, "--add", "--deny-principal", "User:dave", "--operation", "Write",
                  "--transactional-id", txn)
    assert added.returncode == 0, added.stderr
    listed = _tool(secured, tmp_path, "--list", "--delegation-token", token)
    assert listed.stdout == (f"Current ACLs for resource `ResourcePattern(resourceType=DELEGATION_TOKEN, name={token}, "
                             "patternType=LITERAL)`: \n"
                             " \t(principal=User:dave, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n"), listed
    listed = _tool(secured, tmp_path, "--list", "--transactional-id", txn)
    assert "(principal=User:dave, host=*, operation=WRITE, permissionType=DENY)" in listed.stdout, listed
    bad = _tool(secured, tmp_path, "--add", "--allow-principal", "User:dave", "--operation", "Read",
                "--delegation-token", token)
    assert bad.returncode == 1 and "ResourceType DELEGATION_TOKEN only supports operations" in bad.stderr, bad
    removed = _tool(secured, tmp_path, "--remove", "--force", "--delegation-token", token)
    assert removed.returncode == 0 and _tool(secured, tmp_path, "--list", "--delegation-token", token).stdout == ""


# ----------------------------------------------------------------- groups, idempotence, transactions


def test_group_join_needs_read_on_the_group(secured):
    topic, group = "acl-group", "g-acl-join"
    _create_topics(secured, topic)
    _grant(secured, _acl("carol", ResourceType.TOPIC, topic, AclOperation.READ),
           _acl("carol", ResourceType.GROUP, group, AclOperation.DESCRIBE))  # finds the coordinator only
    values, errors = _consume(secured, "carol", topic, group, 1)
    assert values == [] and KafkaError.GROUP_AUTHORIZATION_FAILED in errors


def test_idempotent_and_transactional_producers_need_their_acls(secured):
    _create_topics(secured, "idem-topic")
    # Idempotence: IdempotentWrite on the cluster, or Write on some topic (Kafka's authorizeByResourceType).
    outcomes = _produce(secured, "bob", "idem-topic", [b"1"], **{"enable.idempotence": True, "retries": 1})
    assert outcomes[0] is not None and outcomes[0].code() in (KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                                                              KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert _end_offset(secured, "idem-topic") == 0
    _grant(secured, _acl("bob", ResourceType.TOPIC, "idem-", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED))
    assert _produce(secured, "bob", "idem-topic", [b"2"], **{"enable.idempotence": True, "retries": 3}) == [None]
    # Transactions: the transactional id needs Write (and Describe to find its coordinator).
    producer = confluent_kafka.Producer(_conf(secured, "bob", **{"transactional.id": "tx-bob"}))
    with pytest.raises(confluent_kafka.KafkaException) as err:
        producer.init_transactions(15)
    assert err.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    _grant(secured, _acl("bob", ResourceType.TRANSACTIONAL_ID, "tx-bob", AclOperation.WRITE))
    producer = confluent_kafka.Producer(_conf(secured, "bob", **{"transactional.id": "tx-bob"}))
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce("idem-topic", b"3")
    producer.commit_transaction(15)
    # The idempotent record, the transactional one and the commit marker (written after EndTxn's answer).
    deadline = time.monotonic() + 10
    while _end_offset(secured, "idem-topic") < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _end_offset(secured, "idem-topic") == 3


def test_authorized_operations_are_reported(secured):
    from confluent_kafka import TopicCollection

    _create_topics(secured, "acl-ops")
    _grant(secured, _acl("carol", ResourceType.TOPIC, "acl-ops", AclOperation.READ))
    carol, admin = AdminClient(_conf(secured, "carol")), _admin(secured)
    described = carol.describe_topics(TopicCollection(["acl-ops"]), include_authorized_operations=True)
    ops = set(described["acl-ops"].result(timeout=20).authorized_operations)
    assert ops == {AclOperation.READ, AclOperation.DESCRIBE}  # Read implies Describe
    cluster = carol.describe_cluster(include_authorized_operations=True).result(timeout=20)
    assert not cluster.authorized_operations  # no Describe on the cluster: none reported
    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=20)
    assert {AclOperation.ALTER, AclOperation.CLUSTER_ACTION, AclOperation.IDEMPOTENT_WRITE} \
        <= set(cluster.authorized_operations)


def test_kafka_python_admin_manages_acls(secured):
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             KafkaAdminClient, ResourcePattern, ResourcePatternFilter)
    from kafka.admin import ResourceType as KResourceType

    admin = KafkaAdminClient(bootstrap_servers=secured.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="admin",
                             sasl_plain_password=USERS["admin"], request_timeout_ms=15000)
    try:
        acl = ACL(principal="User:zed", host="*", operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW,
                  resource_pattern=ResourcePattern(KResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED))
        created = admin.create_acls([acl])
        assert not created["failed"] and len(created["succeeded"]) == 1
        any_zed = ACLFilter(principal="User:zed", host=None, operation=ACLOperation.ANY,
                            permission_type=ACLPermissionType.ANY,
                            resource_pattern=ResourcePatternFilter(KResourceType.ANY, None,
                                                                   ACLResourcePatternType.ANY))
        found, error = admin.describe_acls(any_zed)
        assert [(a.resource_pattern.resource_name, a.operation) for a in found] == [("kp-", ACLOperation.READ)]
        deleted = admin.delete_acls([any_zed])
        assert [len(acls) for _filter, acls, _error in deleted] == [1]
        assert admin.describe_acls(any_zed)[0] == []
    finally:
        admin.close()


def test_java_client_gets_kafkas_authorization_exceptions(secured, java_client):
    topic = "acl-java"
    _create_topics(secured, topic)
    _grant(secured, _acl("carol", ResourceType.TOPIC, topic, AclOperation.DESCRIBE))
    configs = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
               "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                   f'username="carol" password="{USERS["carol"]}";',
               "delivery.timeout.ms": 10000, "request.timeout.ms": 5000}
    refused = java_client.produce(secured.sasl_bootstrap, topic, 3, idempotent=False, configs=configs)
    assert not refused.acks and refused.errors, refused.describe()
    assert {cls.rsplit(".", 1)[-1] for _key, cls, _msg in refused.errors} == {"TopicAuthorizationException"}
    assert _end_offset(secured, topic) == 0
    _grant(secured, _acl("carol", ResourceType.TOPIC, topic, AclOperation.WRITE))
    accepted = java_client.produce(secured.sasl_bootstrap, topic, 3, idempotent=False, configs=configs)
    assert len(accepted.acks) == 3 and not accepted.errors, accepted.describe()


def test_list_and_describe_groups_follow_describe_acls(secured):
    topic = "acl-groups-listed"
    _create_topics(secured, topic)
    assert _produce(secured, "admin", topic, [b"x"]) == [None]
    for group in ("g-listed-mine", "g-listed-other"):
        assert _consume(secured, "admin", topic, group, 1) == ([b"x"], [])
    _grant(secured, _acl("carol", ResourceType.GROUP, "g-listed-m", AclOperation.DESCRIBE,
                         pattern=ResourcePatternType.PREFIXED))
    carol = AdminClient(_conf(secured, "carol"))
    listed = {g.group_id for g in carol.list_consumer_groups(request_timeout=15).result(timeout=20).valid}
    assert "g-listed-mine" in listed and "g-listed-other" not in listed
    described = carol.describe_consumer_groups(["g-listed-mine", "g-listed-other"], request_timeout=15)
    assert described["g-listed-mine"].result(timeout=20).group_id == "g-listed-mine"
    with pytest.raises(confluent_kafka.KafkaException) as err:
        described["g-listed-other"].result(timeout=20)
    assert err.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    # The super user lists both.
    admin = _admin(secured)
    assert {"g-listed-mine", "g-listed-other"} <= {
        g.group_id for g in admin.list_consumer_groups(request_timeout=15).result(timeout=20).valid}


def test_old_versions_answer_denied_topics_as_kafka_39(secured):
    """ListOffsets (v0 and later) answers the topics the principal may not
    Describe after the others, as Kafka 3.9 does; OffsetCommit/OffsetFetch v0
    (Kafka: ZooKeeper-stored) check Read/Describe on the group, then on each topic."""
    allowed, hidden, group = "acl-old-allowed", "acl-old-hidden", "g-acl-old"
    _create_topics(secured, allowed, hidden)
    _grant(secured, _acl("alice", ResourceType.TOPIC, allowed, AclOperation.READ),
           _acl("alice", ResourceType.GROUP, group, AclOperation.READ))
    T, G = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED
    with _sasl_raw(secured, "alice") as client:
        for version in (0, 1, 5):
            listed = _raw_call(client, 2, version, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": name, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                               "timestamp": -1, "max_num_offsets": 1}]}
                for name in (hidden, allowed)]})
            assert [(t.name, t.partitions[0].error_code) for t in listed.topics] \
                == [(allowed, ErrorCode.NONE), (hidden, T)], version
        committed = _raw_call(client, 8, 0, {"group_id": group, "topics": [
            {"name": name, "partitions": [{"partition_index": 0, "committed_offset": 3, "committed_metadata": ""}]}
            for name in (hidden, allowed)]})
        assert [(t.name, t.partitions[0].error_code) for t in committed.topics] \
            == [(hidden, T), (allowed, ErrorCode.NONE)]
        fetched = _raw_call(client, 9, 0, {"group_id": group, "topics": [
            {"name": name, "partition_indexes": [0]} for name in (hidden, allowed)]})
        assert [(t.name, t.partitions[0].committed_offset, t.partitions[0].error_code) for t in fetched.topics] \
            == [(hidden, -1, T), (allowed, 3, ErrorCode.NONE)]
        other = "g-acl-old-not-alices"
        committed = _raw_call(client, 8, 0, {"group_id": other, "topics": [
            {"name": allowed, "partitions": [{"partition_index": 0, "committed_offset": 3,
                                              "committed_metadata": ""}]}]})
        assert committed.topics[0].partitions[0].error_code == G
        fetched = _raw_call(client, 9, 0, {"group_id": other, "topics": [
            {"name": allowed, "partition_indexes": [0]}]})
        assert (fetched.topics[0].partitions[0].committed_offset, fetched.topics[0].partitions[0].error_code) \
            == (-1, G)
