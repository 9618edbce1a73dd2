"""Brokers that reach each other over a secured listener (issue 13, inter-broker security).

Each broker has a PLAINTEXT listener for the harness and the test's clients and
an INTERNAL listener that is the inter-broker one (``inter.broker.listener.name``),
so replica fetches, the controller's LeaderAndIsr/UpdateMetadata and
controlled shutdown can only work if the brokers speak its protocol as clients:

* SASL_SSL with SCRAM-SHA-512: the broker's login is the listener's JAAS
  ``username``/``password``; its SCRAM credential is seeded in ZooKeeper's
  ``/config/users/broker`` before the first start, as an operator does with
  ``kafka-configs --zookeeper``. The trust store verifies the other broker and
  ``ssl.endpoint.identification.algorithm`` (Kafka's default https) checks the
  host name (the certificate's SAN is 127.0.0.1). An idempotent acks=all
  producer keeps writing while a leader is SIGKILLed; every acknowledged record
  is consumed and the ISR is full again once it restarts.
* SSL with mutual TLS and ACLs: the broker's principal is its certificate's
  (``ssl.principal.mapping.rules`` maps it to User:broker, the only broker
  super user); the brokers replicate, a client without ACLs is refused.
"""

from __future__ import annotations

import pytest

from support.broker import free_port, write_properties
from support.certs import make_certs
from support.cluster import BackgroundProducer, consume_all, validate
from support.wait import wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(180)

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
              'password="broker-secret";')
# The brokers' certificate (CN=localhost) is User:broker; client certificates
# (/O=kafkapy/CN=<name>) are User:<name>.
RULES = "RULE:^.*CN=localhost.*$/broker/,RULE:^CN=([a-zA-Z0-9]*),.*$/$1/L,DEFAULT"


def _cluster(make_cluster, work, protocol, overrides):
    """A cluster not started yet: each broker with an INTERNAL listener of ``protocol``."""
    certs = make_certs(work / "certs")
    c, _ = make_cluster(start=False, **{
        "offsets.topic.num.partitions": 3, "num.network.threads": 2, "num.io.threads": 2,
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,INTERNAL:{protocol}",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certs.server_keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca_cert, **overrides})
    c.certs, c.internal = certs, {}
    for i, b in c.brokers.items():
        c.internal[i] = f"127.0.0.1:{free_port()}"
        b.props["listeners"] = b.props["advertised.listeners"] = f"PLAINTEXT://{b.bootstrap},INTERNAL://{c.internal[i]}"
        write_properties(b.props_path, b.props)
    return c


@pytest.fixture
def scram_cluster(zookeeper, make_cluster, tmp_path):
    from kafkapy.metadata.zk import data as zk_data
    from kafkapy.metadata.zk.client import ZkClient
    from kafkapy.server.security.scram_store import make_credential

    c = _cluster(make_cluster, tmp_path, "SASL_SSL", {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS})
    zk = ZkClient(zookeeper.connect_string(c.chroot)).connect()
    try:
        zk.set_entity_config(zk_data.CONFIG_TYPE_USER, "broker",
                             {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "broker-secret").to_string()})
    finally:
        zk.close()
    return c.start()


def test_sasl_ssl_scram_interbroker_survives_a_leader_sigkill(scram_cluster):
    c = scram_cluster
    parts = c.create_topic("secure-r3", partitions=2, replication_factor=3)
    assert all(set(isr) == {1, 2, 3} for _, _, isr in parts.values())  # followers fetched over SASL_SSL
    # The listener does require SCRAM: a wrong password is refused there.
    from kafkapy.client.blocking import open_socket
    from kafkapy.client.security import AuthenticationFailed, ClientSecurity

    wrong = ClientSecurity.from_client_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": SCRAM_JAAS.replace("broker-secret", "wrong"),
        "ssl.truststore.location": str(c.certs.ca_cert)})
    host, port = c.internal[1].split(":")
    with pytest.raises(AuthenticationFailed):
        open_socket((host, int(port)), 10, wrong).close()

    producer = BackgroundProducer(c.bootstrap, "secure-r3", 2, rate_per_s=300).start()
    try:
        wait_for(lambda: producer.acked_count() >= 300, 30, "300 acknowledged before the fault")
        victim = c.leader_of("secure-r3", 0)
        c.brokers[victim].kill()
        wait_for(lambda: c.leader_of("secure-r3", 0) not in (-1, victim), 30, "a new leader for secure-r3-0")
        acked_at_fault = producer.acked_count()
        wait_for(lambda: producer.acked_count() >= acked_at_fault + 300, 30, "progress after the leader's death")
        c.brokers[victim].start()
        c.wait_topic_ready("secure-r3", 2, 3, timeout_s=60)  # the restarted broker fetches again over SASL_SSL
        producer.stop()
    finally:
        producer.halt()
    assert producer.errors == []
    validate(producer.acked, consume_all(c.bootstrap, "secure-r3", 2))


def test_sasl_ssl_interbroker_markers_and_a_record_larger_than_the_read_buffer(scram_cluster):
    """A transaction over partitions led by each broker commits: the
    coordinator's WriteTxnMarkers reach the other leaders over SASL_SSL. Then
    acks=all waits for both followers, whose fetch answer (690 KB) is larger
    than the client's 256 KiB read buffer: it is received straight into a frame
    buffer of its own (conn.Connection's direct receive) through the TLS socket."""
    from confluent_kafka import Consumer, TopicPartition

    c = scram_cluster
    parts = c.create_topic("secure-txn", partitions=3, replication_factor=3)
    assert {leader for leader, _, _ in parts.values()} == {1, 2, 3}
    txn = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "secure-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for n in range(30):
        txn.produce("secure-txn", str(n).encode(), partition=n % 3)
    txn.commit_transaction(30)
    committed = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "txn", "enable.auto.commit": False,
                          "isolation.level": "read_committed"})
    try:
        committed.assign([TopicPartition("secure-txn", p, 0) for p in range(3)])
        seen = []
        for _ in range(60):  # bounded: 60 polls of 0.5 s
            msg = committed.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(int(msg.value()))
            if len(seen) == 30:
                break
    finally:
        committed.close()
    assert sorted(seen) == list(range(30))  # each leader's partition ended with its COMMIT marker

    c.create_topic("secure-big", partitions=1, replication_factor=3)
    big = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    delivered = []
    value = bytes(range(256)) * 2700  # 691 200 bytes, not compressible to nothing
    big.produce("secure-big", value, on_delivery=lambda err, msg: delivered.append(err))
    assert big.flush(30) == 0 and delivered == [None]
    leader = c.leader_of("secure-big", 0)
    c.brokers[leader].kill()  # the record must come from a follower's copy now
    wait_for(lambda: c.leader_of("secure-big", 0) not in (-1, leader), 30, "a new leader for secure-big-0")
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "big", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("secure-big", 0, 0)])
        msg = None
        for _ in range(30):  # bounded: 30 polls of 1 s
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                break
    finally:
        consumer.close()
    assert msg is not None and msg.error() is None and msg.value() == value


@pytest.fixture
def mtls_cluster(make_cluster, tmp_path):
    c = _cluster(make_cluster, tmp_path, "SSL", {
        "listener.name.internal.ssl.client.auth": "required", "ssl.principal.mapping.rules": RULES,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker;User:admin"})
    return c.start()


def test_ssl_interbroker_with_the_certificate_principal_as_super_user(mtls_cluster):
    c = mtls_cluster
    cert, key = c.certs.client("admin", "/O=kafkapy/CN=admin")
    admin_conf = {"bootstrap.servers": ",".join(c.internal.values()), "security.protocol": "SSL",
                  "ssl.ca.location": str(c.certs.ca_cert), "ssl.certificate.location": str(cert),
                  "ssl.key.location": str(key)}
    admin = AdminClient(admin_conf)
    admin.create_topics([NewTopic("mtls-r3", 2, 3)], operation_timeout=10)["mtls-r3"].result(timeout=30)

    def full_isr():
        md = admin.list_topics("mtls-r3", timeout=10).topics["mtls-r3"]
        return md.error is None and len(md.partitions) == 2 and all(
            p.leader > 0 and sorted(p.isrs) == [1, 2, 3] for p in md.partitions.values())

    # LeaderAndIsr from the controller and the followers' fetches all carry User:broker.
    wait_for(full_isr, 60, "mtls-r3 led with full ISRs")
    producer = Producer({**admin_conf, "acks": "all", "enable.idempotence": True})
    results = []
    for n in range(50):
        producer.produce("mtls-r3", str(n).encode(), partition=n % 2,
                         on_delivery=lambda err, msg: results.append(err))
    assert producer.flush(30) == 0 and results == [None] * 50
    # ANONYMOUS on the PLAINTEXT listener holds no ACL: refused.
    refused = []
    anonymous = Producer({"bootstrap.servers": c.bootstrap, "message.timeout.ms": 10000, "retries": 0})
    anonymous.produce("mtls-r3", b"x", partition=0, on_delivery=lambda err, msg: refused.append(err))
    anonymous.flush(20)
    assert len(refused) == 1 and refused[0] is not None
    assert refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
