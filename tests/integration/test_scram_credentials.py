"""SCRAM credentials in the metadata store: DescribeUserScramCredentials and
AlterUserScramCredentials (real brokers, real clients).

Standalone: ``kafkapy-configs --alter --entity-type users --add-config
'SCRAM-SHA-256=[iterations=8192,password=...]'`` (run as a subprocess, over a
SASL listener with ``--command-config``), then confluent-kafka and
kafka-python authenticate with the new password; a changed password and a
deleted mechanism take effect on the next connection; ``--describe`` shows
mechanism and iterations only. confluent-kafka's AdminClient alters and
describes through the same APIs; raw requests check Kafka's per-user
errors. The offline credentials file of earlier releases is moved into the
metadata store at start. Cluster: a user created with the tool through one
broker authenticates on another (ZooKeeper ``/config/users/<user>``,
followed by every broker), and the znode has Kafka's format.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.security.scram_store import CREDENTIALS_FILE, add_scram_credentials
from support.broker import free_port, write_properties
from support.clients import module_broker
from support.wait import wait_for
from support.rawclient import RawClient
from support.sasl import authenticate, flexible_request, handshake, serve_then_check_log

confluent_kafka = pytest.importorskip("confluent_kafka")

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_admin="admin-secret";')
SECRETS = ("alice-secret", "alice-new-secret", "admin-secret", "carol-secret", "dave-secret")


def _sasl_overrides(port, sasl_port):
    listeners = f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    return {"listeners": listeners, "advertised.listeners": listeners,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "connection.failed.authentication.delay.ms": 0, "num.partitions": 1}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    work = tmp_path_factory.mktemp("scram")
    port, sasl_port = free_port(), free_port()

    def prepare(b):
        # Written offline before the first start (earlier releases' file): moved
        # into the metadata store by the supervisor.
        add_scram_credentials(str(b.log_dirs[0]), "dave", "SCRAM-SHA-512", "dave-secret", 5000)
        b.sasl = f"127.0.0.1:{sasl_port}"
        b.admin_config = work / "admin.properties"
        b.admin_config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                                  'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                                  'username="admin" password="admin-secret";\n')

    yield from serve_then_check_log(module_broker(tmp_path_factory, _sasl_overrides(port, sasl_port),
                                                  name="scram-broker", port=port, before_start=prepare), SECRETS)


def configs_tool(*args, timeout_s=60):
    proc = subprocess.run([sys.executable, "-m", "kafkapy.tools.configs", *args], capture_output=True, text=True,
                          timeout=timeout_s)
    return proc.returncode, proc.stdout, proc.stderr


def _scram_conf(bootstrap, mechanism, user, password):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password}


def confluent_authenticates(bootstrap, mechanism, user, password, timeout_s=10.0) -> bool:
    """Whether a new confluent-kafka client authenticates (lists topics) or
    fails authentication (its error callback says so), within ``timeout_s``."""
    from confluent_kafka.admin import AdminClient

    errors = []
    admin = AdminClient({**_scram_conf(bootstrap, mechanism, user, password), "error_cb": errors.append})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.5)
            return True
        except confluent_kafka.KafkaException:
            admin.poll(0)  # serves the error callback
        if errors:
            assert errors[0].code() == confluent_kafka.KafkaError._AUTHENTICATION, errors
            return False
    raise AssertionError(f"neither authenticated nor refused in {timeout_s} s")


def kafka_python_authenticates(bootstrap, mechanism, user, password) -> bool:
    kafka = pytest.importorskip("kafka")
    try:
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                                       sasl_mechanism=mechanism, sasl_plain_username=user,
                                       sasl_plain_password=password, request_timeout_ms=10000,
                                       max_block_ms=10000)
    except kafka.errors.KafkaError:
        return False
    try:
        producer.send("kp-scram", b"x").get(timeout=20)
        return True
    except kafka.errors.KafkaError:
        return False
    finally:
        producer.close(timeout=5)


def test_tool_alter_then_clients_authenticate_and_describe(broker):
    common = ["--bootstrap-server", broker.sasl, "--command-config", str(broker.admin_config),
              "--entity-type", "users", "--entity-name", "alice"]
    # --describe asks DescribeClientQuotas too: over the same SASL listener (--command-config)
    describe = ["--describe", *common]
    rc, out, err = configs_tool("--alter", *common, "--add-config",
                                "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
                                "SCRAM-SHA-512=[password=alice-secret]")
    assert rc == 0, err
    assert out == "Completed updating config for user alice.\n"
    rc, out, err = configs_tool(*describe)
    assert rc == 0, err
    assert out.splitlines()[-1] == ("SCRAM credential configs for user-principal 'alice' are "
                                    "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096")
    assert "secret" not in out and "salt" not in out
    assert confluent_authenticates(broker.sasl, "SCRAM-SHA-256", "alice", "alice-secret")
    assert kafka_python_authenticates(broker.sasl, "SCRAM-SHA-512", "alice", "alice-secret")
    # A new password: the old one fails on the next connection, the new one works.
    rc, _, err = configs_tool("--alter", *common, "--add-config", "SCRAM-SHA-256=[password=alice-new-secret]")
    assert rc == 0, err
    assert not confluent_authenticates(broker.sasl, "SCRAM-SHA-256", "alice", "alice-secret")
    assert confluent_authenticates(broker.sasl, "SCRAM-SHA-256", "alice", "alice-new-secret")
    # A deleted mechanism.
    rc, out, err = configs_tool("--alter", *common, "--delete-config", "SCRAM-SHA-512")
    assert rc == 0 and out == "Completed updating config for user alice.\n", err
    assert not confluent_authenticates(broker.sasl, "SCRAM-SHA-512", "alice", "alice-secret")
    rc, out, _ = configs_tool(*describe)
    assert out.splitlines()[-1] == ("SCRAM credential configs for user-principal 'alice' are "
                                    "SCRAM-SHA-256=iterations=4096")
    # Quotas of the same user over the same SASL listener (AlterClientQuotas, DescribeClientQuotas).
    rc, out, err = configs_tool("--alter", *common, "--add-config", "producer_byte_rate=1048576")
    assert rc == 0 and out == "Completed updating config for user alice.\n", err
    rc, out, err = configs_tool(*describe)
    assert rc == 0, err
    assert out.splitlines() == ["Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0",
                                "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096"]
    rc, out, err = configs_tool("--alter", *common, "--delete-config", "producer_byte_rate")
    assert rc == 0, err
    # Without --command-config the SASL listener closes the unauthenticated request: an error, no hang.
    rc, _, err = configs_tool("--describe", "--bootstrap-server", broker.sasl, "--entity-type", "users",
                              "--entity-name", "alice", timeout_s=60)
    assert rc != 0 and "Error while executing config command" in err, err
    # Kafka's refusals, before anything is sent.
    rc, _, err = configs_tool("--alter", *common, "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]")
    assert rc != 0 and "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256" in err
    rc, _, err = configs_tool("--alter", *common, "--add-config", "SCRAM-SHA-256=[password=x],producer_byte_rate=10")
    assert rc != 0 and "Cannot alter both quota and SCRAM credential configs simultaneously" in err


def test_confluent_admin_alter_and_describe(broker):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10000),
                                     b"carol-secret"),
        UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256),
    ])
    futures["carol"].result(timeout=30)
    with pytest.raises(confluent_kafka.KafkaException) as info:
        futures["nobody"].result(timeout=30)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.RESOURCE_NOT_FOUND
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(timeout=30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 10000)]
    assert confluent_authenticates(broker.sasl, "SCRAM-SHA-512", "carol", "carol-secret")
    assert kafka_python_authenticates(broker.sasl, "SCRAM-SHA-512", "carol", "carol-secret")
    everyone = admin.describe_user_scram_credentials().result(timeout=30)
    assert {"carol", "dave"} <= set(everyone)


def _request(client, api_key, data):
    spec = API_TABLE[api_key]
    frame = flexible_request(client, api_key, 0, encode_to_bytes(construct(spec.request_class(0), data)))
    return decode(spec.response_class(0), memoryview(frame), 5)[0]  # after the response header's tag byte


def test_raw_errors_as_kafka(broker):
    with RawClient.connect(broker.bootstrap) as client:
        upsert = lambda name, mechanism=1, iterations=4096: {  # noqa: E731
            "name": name, "mechanism": mechanism, "iterations": iterations, "salt": b"s" * 16,
            "salted_password": b"p" * 32}
        response = _request(client, 51, {
            "deletions": [{"name": "", "mechanism": 1}, {"name": "erin", "mechanism": 2}],
            "upsertions": [upsert("frank", 3), upsert("gina", 1, 4095), upsert("hank", 2, 16385),
                           upsert("ivan"), upsert("ivan"), upsert("judy", 2, 16384)]})
        results = {r.user: (r.error_code, r.error_message) for r in response.results}
        assert results == {
            "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            "erin": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
            "frank": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            "gina": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            "hank": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            "ivan": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
            "judy": (ErrorCode.NONE, None),
        }
        response = _request(client, 50, {"users": [{"name": "judy"}, {"name": ""}, {"name": "kim"},
                                                   {"name": "lee"}, {"name": "lee"}]})
        assert response.error_code == 0
        got = [(r.user, r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos])
               for r in response.results]
        assert got == [("judy", 0, [(2, 16384)]), ("", ErrorCode.RESOURCE_NOT_FOUND, []),
                       ("kim", ErrorCode.RESOURCE_NOT_FOUND, []), ("lee", ErrorCode.DUPLICATE_RESOURCE, [])]
        assert response.results[2].error_message == "Attempt to describe a user credential that does not exist: kim"


def test_offline_file_moved_into_the_store(broker):
    logs = broker.log_dirs[0]
    assert not (logs / CREDENTIALS_FILE).exists() and (logs / (CREDENTIALS_FILE + ".migrated")).exists()
    stored = json.loads((logs / "kafkapy-metadata.json").read_text())["entity_configs"]["users/dave"]
    assert set(stored) == {"SCRAM-SHA-512"} and "iterations=5000" in stored["SCRAM-SHA-512"]
    assert confluent_authenticates(broker.sasl, "SCRAM-SHA-512", "dave", "dave-secret")


@pytest.mark.timeout(180)
def test_cluster_user_created_through_one_broker_authenticates_on_another(make_cluster):
    cluster, zk = make_cluster(broker_ids=(1, 2), start=False)
    sasl = {}
    for i, b in cluster.brokers.items():
        sasl[i] = free_port()
        b.props.update({k: str(v) for k, v in _sasl_overrides(b.port, sasl[i]).items()})
        write_properties(b.props_path, b.props)
    cluster.start()
    controller = wait_for(lambda: json.loads(zk.get("/controller")[0])["brokerid"], what="a controller")
    other = 1 if controller == 2 else 2
    # Through the broker that is not the controller: the tool finds it.
    rc, out, err = configs_tool("--alter", "--bootstrap-server", cluster.brokers[other].bootstrap,
                                "--entity-type", "users", "--entity-name", "alice",
                                "--add-config", "SCRAM-SHA-256=[iterations=4096,password=alice-secret]")
    assert rc == 0, err
    data = json.loads(zk.get("/config/users/alice")[0])
    fields = dict(kv.split("=", 1) for kv in data["config"]["SCRAM-SHA-256"].split(","))
    assert data["version"] == 1 and set(fields) == {"salt", "stored_key", "server_key", "iterations"}
    for i in (1, 2):
        bootstrap = f"127.0.0.1:{sasl[i]}"
        wait_for(lambda: confluent_authenticates(bootstrap, "SCRAM-SHA-256", "alice", "alice-secret", 5),
                 timeout_s=30, what=f"alice authenticating on broker {i}")
    # AlterUserScramCredentials to a broker that is not the controller.
    with RawClient.connect(cluster.brokers[other].bootstrap) as client:
        response = _request(client, 51, {"deletions": [{"name": "alice", "mechanism": 1}], "upsertions": []})
    assert [(r.user, r.error_code) for r in response.results] == [("alice", ErrorCode.NOT_CONTROLLER)]


def test_acls_guard_the_scram_apis(broker_factory):
    """With Kafka's authorizer: DESCRIBE / ALTER on the cluster are required
    (CLUSTER_AUTHORIZATION_FAILED otherwise); a super user and a user granted
    ALTER on the cluster may alter."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    port, sasl_port = free_port(), free_port()
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_admin="admin-secret" user_alice="alice-secret";')
    broker_factory({**_sasl_overrides(port, sasl_port),
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                    "super.users": "User:admin"}, port=port)
    def admin(user):
        return AdminClient(_scram_conf(f"127.0.0.1:{sasl_port}", "PLAIN", user, f"{user}-secret"))

    def alter(client, user):
        upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                              b"carol-secret")
        return client.alter_user_scram_credentials([upsert])[user]

    alice = admin("alice")
    with pytest.raises(confluent_kafka.KafkaException) as info:
        alter(alice, "carol").result(timeout=30)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # Describe's refusal with raw frames: librdkafka 2.16 corrupts its heap
    # on a DescribeUserScramCredentials answer with a top-level error.
    with RawClient.connect(f"127.0.0.1:{sasl_port}") as client:
        assert handshake(client, "PLAIN").error_code == 0
        assert authenticate(client, b"\x00alice\x00alice-secret").error_code == 0
        response = _request(client, 50, {"users": [{"name": "carol"}]})
    assert (response.error_code, [(r.user, r.error_code) for r in response.results]) == \
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [("", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)])
    root = admin("admin")
    alter(root, "carol").result(timeout=30)
    grant = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.ALTER, AclPermissionType.ALLOW)
    root.create_acls([grant])[grant].result(timeout=30)
    wait_for(lambda: alter(alice, "dave").result(timeout=30) is None, timeout_s=15, what="alice's ALTER ACL")
    assert confluent_authenticates(f"127.0.0.1:{sasl_port}", "SCRAM-SHA-256", "dave", "carol-secret")
