"""A cluster on a secured ZooKeeper, as Kafka 3.9 documents it (issue 27, section 2).

Real ZooKeeper servers (Debian's 3.8) configured as ZooKeeper's and Kafka's
docs say, three real brokers, and kazoo clients standing in for anyone else:

* SASL DIGEST-MD5: ZooKeeper with ``authProvider.1=...SASLAuthenticationProvider``
  and a server JAAS file; the brokers with ``zookeeper.set.acl=true`` and the
  JAAS ``Client`` section named by ``-Djava.security.auth.login.config`` in
  ``KAFKA_OPTS``. The brokers register, elect a controller, a topic is made
  and served under an idempotent acks=all producer; every znode they made has
  Kafka's ACLs (creator-all ``sasl:kafka`` + world-read; creator-only on
  ``/config/users`` and ``/config/brokers``; ``/consumers`` open); an
  unauthenticated client reads what world-read allows and writes nothing.
* TLS: ZooKeeper serving only its ``secureClientPort`` (NettyServerCnxnFactory,
  client certificates required); the brokers with ``zookeeper.ssl.client.enable``
  and the ``zookeeper.ssl.*`` keys, and ``zookeeper.set.acl=true`` on their
  certificate's identity (``x509:CN=...``).
"""

from __future__ import annotations

import pytest
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from support.certs import make_certs
from support.cluster import BackgroundProducer, finish, progress, zk_controller
from support.wait import wait_for

pytestmark = pytest.mark.timeout(180)

USER, PASSWORD = "kafka", "kafka-secret"


def _load_and_validate(c, topic: str) -> None:
    c.create_topic(topic, partitions=3, replication_factor=3)
    producer = BackgroundProducer(c.bootstrap, topic, 3, rate_per_s=300).start()
    try:
        progress(producer, 300, f"300 acknowledged on {topic}")
    except BaseException:
        producer.close()
        raise
    finish(c, producer, topic, 3)


def _acls(zk, path: str) -> set:
    acls, _ = zk.get_acls(path)
    return {(a.id.scheme, a.id.id, a.perms) for a in acls}


def _check_kafka_acls(zk, creator: tuple, topic: str) -> None:
    """ZkData.defaultAcls on what the brokers made."""
    owner_all = (*creator, Permissions.ALL)
    world_read = ("world", "anyone", Permissions.READ)
    for path in ("/brokers", "/brokers/ids", "/brokers/ids/1", "/brokers/topics", f"/brokers/topics/{topic}",
                 f"/brokers/topics/{topic}/partitions/0/state", "/controller", "/controller_epoch",
                 "/cluster/id", "/config", "/config/topics", f"/config/topics/{topic}", "/admin/delete_topics",
                 "/isr_change_notification", "/latest_producer_id_block"):
        assert _acls(zk, path) == {owner_all, world_read}, path
    for path in ("/config/users", "/config/brokers"):  # sensitive: no world-read
        assert _acls(zk, path) == {owner_all}, path
    assert _acls(zk, "/consumers") == {("world", "anyone", Permissions.ALL)}


def _check_outsider_cannot_write(outsider, topic: str) -> None:
    """What a client without the brokers' identity can and cannot do."""
    data, stat = outsider.get(f"/brokers/topics/{topic}")  # world-read
    assert data
    with pytest.raises(NoAuthError):
        outsider.set(f"/brokers/topics/{topic}", b"{}", version=stat.version)
    with pytest.raises(NoAuthError):
        outsider.create(f"/brokers/topics/{topic}-forged", b"{}")
    with pytest.raises(NoAuthError):
        outsider.create("/admin/delete_topics/" + topic)
    with pytest.raises(NoAuthError):  # deleting needs DELETE on the parent (the chroot is the
        outsider.delete("/brokers/ids/1")  # harness's, made open before the brokers: not asked there)
    with pytest.raises(NoAuthError):
        outsider.get_children("/config/users")  # sensitive: not even read
    assert outsider.exists(f"/brokers/topics/{topic}-forged") is None


def test_sasl_digest_md5_with_secure_acls(zookeeper_factory, make_cluster, tmp_path):
    server = zookeeper_factory(sasl_users={USER: PASSWORD})
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text("// the brokers' ZooKeeper login, as Kafka's docs write it\n"
                    "Client {\n"
                    "  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                    f'  username="{USER}"\n'
                    f'  password="{PASSWORD}";\n'
                    "};\n")
    c, outsider = make_cluster(zookeeper=server, env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"},
                               **{"zookeeper.set.acl": "true"})
    wait_for(lambda: zk_controller(outsider), 20, "a controller")
    _load_and_validate(c, "sasl-acl")
    kafka = server.client(c.chroot, sasl_options={"mechanism": "DIGEST-MD5", "username": USER,
                                                  "password": PASSWORD})
    try:
        _check_kafka_acls(kafka, ("sasl", USER), "sasl-acl")
    finally:
        kafka.stop()
        kafka.close()
    _check_outsider_cannot_write(outsider, "sasl-acl")
    for b in c.brokers.values():
        assert PASSWORD not in b.log_text()


def test_tls_only_zookeeper_with_certificate_acls(zookeeper_factory, make_cluster, tmp_path):
    certs = make_certs(tmp_path / "certs")
    server = zookeeper_factory(tls=certs)
    cert, key = certs.client("broker", "/CN=kafka-broker")
    keystore = tmp_path / "broker.keystore.pem"
    keystore.write_text(key.read_text() + cert.read_text())
    c, outsider = make_cluster(zookeeper=server, **{
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.ssl.keystore.location": str(keystore),
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(certs.ca_cert),
        "zookeeper.ssl.truststore.type": "PEM",
        "zookeeper.set.acl": "true"})
    assert "clientPort=" not in server.config_path.read_text().replace("secureClientPort=", "")
    wait_for(lambda: zk_controller(outsider), 20, "a controller")
    _load_and_validate(c, "tls-acl")
    kafka = server.client(c.chroot, certfile=str(cert), keyfile=str(key))  # the brokers' identity
    try:
        _check_kafka_acls(kafka, ("x509", "CN=kafka-broker"), "tls-acl")
    finally:
        kafka.stop()
        kafka.close()
    # The harness's own client has a certificate of the same CA but another name.
    _check_outsider_cannot_write(outsider, "tls-acl")
