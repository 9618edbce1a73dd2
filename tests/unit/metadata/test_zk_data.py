"""Kafka's znode formats (kafkapy.metadata.zk.data).

The literal JSON texts below are written from Kafka 3.9's ZkData.scala (field
names, value types, which fields are optional) with the key order Kafka's
Scala maps give them; that order is checked against the examples in Kafka's
docs/implementation.html and matches what Kafka 3.x brokers are seen writing.
"""

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.metadata.zk import data as z
from kafkapy.metadata.model import BrokerInfo, EndPoint, PartitionState
from kafkapy.metadata.store import ProducerIdsBlock

TOPIC_ID = uuid.UUID("5e4fc4f2-6d8a-4b35-9a0e-1c2d3e4f5a6b")
TOPIC_ID_TEXT = "Xk_E8m2KSzWaDhwtPk9aaw"  # Kafka's Uuid.toString of it: base64url, unpadded


# ------------------------------------------------------------------ paths

def test_paths():
    assert z.broker_path(3) == "/brokers/ids/3"
    assert z.topic_path("orders") == "/brokers/topics/orders"
    assert z.partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"
    assert z.topic_config_path("orders") == "/config/topics/orders"
    assert z.broker_config_path(z.DEFAULT_ENTITY) == "/config/brokers/<default>"
    assert z.broker_config_path(2) == "/config/brokers/2"
    assert z.user_config_path("User:alice smith") == "/config/users/User%3Aalice%20smith"
    assert z.user_config_path(z.DEFAULT_ENTITY) == "/config/users/<default>"
    assert z.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert z.config_change_path() == "/config/changes/config_change_"
    assert z.isr_change_path() == "/isr_change_notification/isr_change_"
    assert z.CLUSTER_ID_PATH == "/cluster/id"
    assert z.CONTROLLER_PATH == "/controller"
    assert z.CONTROLLER_EPOCH_PATH == "/controller_epoch"
    assert z.LATEST_PRODUCER_ID_BLOCK_PATH == "/latest_producer_id_block"
    assert "/config/topics" in z.PERSISTENT_PATHS and "/brokers/ids" in z.PERSISTENT_PATHS


def test_sequence_numbers():
    assert z.sequence_number("config_change_0000000042", z.CONFIG_CHANGE_PREFIX) == 42
    assert z.sequence_number("/isr_change_notification/isr_change_0000000007", z.ISR_CHANGE_PREFIX) == 7
    with pytest.raises(ValueError):
        z.sequence_number("config_change_", z.CONFIG_CHANGE_PREFIX)
    with pytest.raises(ValueError):
        z.sequence_number("other_01", z.CONFIG_CHANGE_PREFIX)
    assert z.broker_id_from_path("/brokers/ids/12") == 12


@pytest.mark.parametrize("name", ["User:alice", "a b*c", "ü~/+", "CN=x,O=y"])
def test_sanitize_round_trip(name):
    sanitized = z.sanitize(name)
    assert "/" not in sanitized and " " not in sanitized and "*" not in sanitized
    assert z.desanitize(sanitized) == name


def test_sanitize_like_java_url_encoder():
    # URLEncoder keeps [A-Za-z0-9._*-], '+' for space; Kafka then writes %20 and %2A
    assert z.sanitize("a.b-c_d") == "a.b-c_d"
    assert z.sanitize("a b") == "a%20b"
    assert z.sanitize("a*b~") == "a%2Ab%7E"
    assert z.desanitize("a+b") == "a b"


# ------------------------------------------------------------------ zookeeper.connect

def test_zookeeper_connect_with_chroot():
    zc = z.parse_zookeeper_connect("h1:2181,h2:2182/kafkapy")
    assert zc.hosts == (("h1", 2181), ("h2", 2182))
    assert zc.chroot == "/kafkapy"
    assert zc.hosts_string == "h1:2181,h2:2182"
    assert zc.path("/brokers/ids") == "/kafkapy/brokers/ids"
    assert zc.path("/") == "/kafkapy"


def test_zookeeper_connect_defaults_and_ipv6():
    zc = z.parse_zookeeper_connect(" h1 , [::1]:2183,h3,")
    assert zc.hosts == (("h1", 2181), ("::1", 2183), ("h3", 2181))
    assert zc.chroot is None
    assert zc.hosts_string == "h1:2181,[::1]:2183,h3:2181"
    assert z.parse_zookeeper_connect("h1:2181/").chroot is None  # a lone "/" is no chroot
    assert z.parse_zookeeper_connect("h1/a/b").chroot == "/a/b"


@pytest.mark.parametrize("bad", ["h1:2181/kafka/", "h1/a//b", "h1/a/../b", "h1/./a", "", "h1:x",
                                 "[::1", "h1/a\x01"])
def test_zookeeper_connect_rejects(bad):
    with pytest.raises(ValueError):
        z.parse_zookeeper_connect(bad)


# ------------------------------------------------------------------ key order as Kafka writes it

def test_scala_map_order_matches_kafka_docs():
    # docs/implementation.html shows the partition-state and (old) broker znodes
    # in the iteration order of Scala's immutable HashMap
    assert z._scala_immutable_order(["version", "leader", "leader_epoch", "controller_epoch", "isr"]) == [
        "controller_epoch", "leader", "version", "leader_epoch", "isr"]
    assert z._scala_immutable_order(["version", "host", "port", "endpoints", "jmx_port", "timestamp"]) == [
        "jmx_port", "timestamp", "endpoints", "host", "version", "port"]
    assert z._scala_immutable_order(["d", "c", "b", "a"]) == ["d", "c", "b", "a"]  # Map1..Map4


# ------------------------------------------------------------------ /cluster/id

def test_cluster_id():
    text = b'{"version":"1","id":"hF3oYt6uQgS0yNBx9uR1Tw"}'
    assert z.encode_cluster_id("hF3oYt6uQgS0yNBx9uR1Tw") == text
    assert z.decode_cluster_id(text) == "hF3oYt6uQgS0yNBx9uR1Tw"
    for bad in (b"", b"{", b'{"version":"1"}', b'{"id":5}', b"[]"):
        with pytest.raises(ValueError):
            z.decode_cluster_id(bad)


# ------------------------------------------------------------------ /controller, /controller_epoch

def test_controller_as_kafka_3_9_writes_it():
    text = b'{"version":2,"brokerid":1,"timestamp":"1718000000000","kraftControllerEpoch":-1}'
    assert z.encode_controller(1, 1718000000000) == text
    reg = z.decode_controller(text)
    assert (reg.broker_id, reg.timestamp_ms, reg.kraft_controller_epoch, reg.version) == (1, 1718000000000, -1, 2)


def test_controller_older_and_migration_forms():
    old = z.decode_controller(b'{"version":1,"brokerid":0,"timestamp":"1705318800456"}')
    assert (old.broker_id, old.kraft_controller_epoch, old.version) == (0, None, 1)
    kraft = z.decode_controller(b'{"version":2,"brokerid":3000,"timestamp":"1","kraftControllerEpoch":7}')
    assert (kraft.broker_id, kraft.kraft_controller_epoch) == (3000, 7)
    for bad in (b"not json", b'{"version":2}', b'{"brokerid":"1"}', b'{"brokerid":1,"kraftControllerEpoch":"x"}',
                b'{"brokerid":4294967296}', b'{"brokerid":true}'):
        with pytest.raises(ValueError):
            z.decode_controller(bad)


def test_controller_epoch_is_plain_text():
    assert z.encode_controller_epoch(1) == b"1"
    assert z.decode_controller_epoch(b"17") == 17
    assert z.decode_controller_epoch(b"-1") == -1
    for bad in (b"", b" 1", b"1.0", b"one", b"2147483648", b"1_0", "١".encode()):
        with pytest.raises(ValueError):
            z.decode_controller_epoch(bad)


# ------------------------------------------------------------------ /brokers/ids/<id>

BROKER_V5 = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},'
             b'"endpoints":["PLAINTEXT://broker1.example:9092","SSL://broker1.example:9093"],"rack":"rack-a",'
             b'"jmx_port":-1,"port":9092,"host":"broker1.example","version":5,"timestamp":"1718000000000"}')


def test_broker_v5_as_kafka_writes_it():
    broker = BrokerInfo(1, "broker1.example", 9092, "rack-a",
                        (EndPoint("broker1.example", 9092), EndPoint("broker1.example", 9093, "SSL", "SSL")))
    assert z.encode_broker(broker, 1718000000000) == BROKER_V5
    reg = z.decode_broker_registration(1, BROKER_V5)
    assert reg.broker == broker
    assert (reg.version, reg.jmx_port, reg.timestamp_ms, reg.features) == (5, -1, 1718000000000, {})


def test_broker_without_rack_and_without_plaintext_listener():
    broker = BrokerInfo(2, "", 9093, None, (EndPoint("", 9093, "SSL", "SSL"),
                                           EndPoint("b2", 9094, "INTERNAL", "SASL_SSL")))
    text = (b'{"features":{},"listener_security_protocol_map":{"SSL":"SSL","INTERNAL":"SASL_SSL"},'
            b'"endpoints":["SSL://:9093","INTERNAL://b2:9094"],"jmx_port":-1,"port":-1,"host":null,'
            b'"version":5,"timestamp":"5"}')
    assert z.encode_broker(broker, 5) == text
    assert z.decode_broker(2, text) == broker


def test_broker_older_versions():
    v4 = (b'{"listener_security_protocol_map":{"CLIENT":"PLAINTEXT","REPLICATION":"SSL"},'
          b'"endpoints":["CLIENT://h1:9092","REPLICATION://h1:9093"],"rack":"dc1","jmx_port":9999,'
          b'"port":9092,"host":"h1","version":4,"timestamp":"2233345666"}')
    b = z.decode_broker(5, v4)
    assert b == BrokerInfo(5, "h1", 9092, "dc1", (EndPoint("h1", 9092, "CLIENT", "PLAINTEXT"),
                                                   EndPoint("h1", 9093, "REPLICATION", "SSL")))
    # version 2: no listener map, listener names are protocol names
    v2 = (b'{"version":2,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
          b'"endpoints":["PLAINTEXT://host1:9092","SSL://host1:9093"]}')
    b = z.decode_broker(6, v2)
    assert [(e.listener_name, e.security_protocol, e.port) for e in b.endpoints] == [
        ("PLAINTEXT", "PLAINTEXT", 9092), ("SSL", "SSL", 9093)]
    assert b.rack is None
    v1 = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert z.decode_broker(7, v1) == BrokerInfo(7, "localhost", 9092, None, (EndPoint("localhost", 9092),))
    # rack null, IPv6 endpoint, lower-case listener name normalised
    v5 = (b'{"features":{"f":{"min_version":1,"max_version":2}},"endpoints":["plaintext://[::1]:9092"],'
          b'"rack":null,"jmx_port":-1,"port":9092,"host":"::1","version":5,"timestamp":"1"}')
    reg = z.decode_broker_registration(8, v5)
    assert reg.broker == BrokerInfo(8, "::1", 9092, None, (EndPoint("::1", 9092),))
    assert reg.features == {"f": {"min_version": 1, "max_version": 2}}
    assert z.encode_broker(reg.broker, 1).count(b'"PLAINTEXT://[::1]:9092"') == 1


@pytest.mark.parametrize("bad", [
    b"garbage",
    b'{"version":0,"jmx_port":-1,"host":"h","port":1}',
    b'{"version":5,"endpoints":["PLAINTEXT://h:1"]}',  # no jmx_port
    b'{"version":5,"jmx_port":-1}',  # no endpoints
    b'{"version":5,"jmx_port":-1,"endpoints":["EXTERNAL://h:1"]}',  # no protocol for EXTERNAL
    b'{"version":5,"jmx_port":-1,"endpoints":["PLAINTEXT//h:1"]}',
    b'{"version":5,"jmx_port":-1,"endpoints":["PLAINTEXT://h:1","PLAINTEXT://h:2"]}',
    b'{"version":5,"jmx_port":-1,"endpoints":["PLAINTEXT://h:1"],"rack":3}',
    b'{"version":"5","jmx_port":-1,"endpoints":["PLAINTEXT://h:1"]}',
    b'{"version":1,"jmx_port":-1,"host":"h"}',
    b'{"version":5,"jmx_port":-1,"endpoints":["X://h:1"],"listener_security_protocol_map":{"X":"TLS"}}',
])
def test_broker_malformed(bad):
    with pytest.raises(ValueError):
        z.decode_broker(1, bad)


# ------------------------------------------------------------------ /brokers/topics/<t>

def test_topic_as_kafka_writes_it():
    text = (b'{"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]},"topic_id":"' + TOPIC_ID_TEXT.encode()
            + b'","adding_replicas":{},"removing_replicas":{},"version":3}')
    assignment = {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}
    assert z.encode_topic(TOPIC_ID, assignment) == text
    t = z.decode_topic("orders", text)
    assert t == z.TopicAssignment(TOPIC_ID, assignment, {}, {})


def test_topic_partition_keys_in_scala_hash_order():
    # 12 partitions: Kafka's mutable.HashMap has grown to 32 buckets and "11" comes first
    text = (b'{"partitions":{"11":[0],"0":[0],"1":[0],"2":[0],"3":[0],"4":[0],"5":[0],"6":[0],"7":[0],'
            b'"8":[0],"9":[0],"10":[0]},"adding_replicas":{},"removing_replicas":{},"version":3}')
    assert z.encode_topic(None, {p: [0] for p in range(12)}) == text
    assert list(z.decode_topic("t", text).partitions) == list(range(12))


def test_topic_older_versions_and_reassignment():
    v1 = b'{"version":1,"partitions":{"0":[0,1,3]}}'
    assert z.decode_topic("t", v1) == z.TopicAssignment(None, {0: (0, 1, 3)}, {}, {})
    v2 = b'{"version":2,"partitions":{"2":[2,3,1],"1":[1,2,3],"0":[3,1,2]},"adding_replicas":{},"removing_replicas":{}}'
    assert z.decode_topic("t", v2).partitions == {0: (3, 1, 2), 1: (1, 2, 3), 2: (2, 3, 1)}
    moving = (b'{"partitions":{"0":[1,2,3,4]},"topic_id":"' + TOPIC_ID_TEXT.encode()
              + b'","adding_replicas":{"0":[4]},"removing_replicas":{"0":[1]},"version":3}')
    t = z.decode_topic("t", moving)
    assert (t.adding_replicas, t.removing_replicas) == ({0: (4,)}, {0: (1,)})
    assert z.encode_topic(TOPIC_ID, t.partitions, t.adding_replicas, t.removing_replicas) == moving
    assert z.decode_topic("t", b"{}") == z.TopicAssignment(None, {}, {}, {})
    # a padded id is accepted as Kafka's Uuid.fromString does
    padded = b'{"partitions":{},"topic_id":"' + TOPIC_ID_TEXT.encode() + b'=="}'
    assert z.decode_topic("t", padded).topic_id == TOPIC_ID


@pytest.mark.parametrize("bad", [
    b"", b"[1]", b'{"partitions":{"x":[1]}}', b'{"partitions":{"0":["1"]}}', b'{"partitions":{"0":1}}',
    b'{"partitions":[]}', b'{"partitions":{},"topic_id":"short"}', b'{"partitions":{},"topic_id":"Xk/E8m2KSzWaDhwtPk9aaw"}',
    b'{"partitions":{},"topic_id":7}',
])
def test_topic_malformed(bad):
    with pytest.raises(ValueError):
        z.decode_topic("t", bad)


# ------------------------------------------------------------------ partition state

def test_partition_state_as_kafka_writes_it():
    text = b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3,1]}'
    state = PartitionState((2, 3, 1), 2, 0, (2, 3, 1), 4)
    assert z.encode_partition_state(state, controller_epoch=1) == text
    decoded = z.decode_partition_state(text, replicas=(2, 3, 1), zk_version=4)
    assert decoded == z.PartitionStateZNode(state, 1, z.LEADER_RECOVERED)


def test_partition_state_recovering():
    text = b'{"controller_epoch":3,"leader":1,"version":1,"leader_recovery_state":1,"leader_epoch":5,"isr":[1]}'
    state = PartitionState((1, 2), 1, 5, (1,), 0)
    assert z.encode_partition_state(state, 3, z.LEADER_RECOVERING) == text
    assert z.decode_partition_state(text, (1, 2)).leader_recovery_state == z.LEADER_RECOVERING
    # without replicas and zk version the model fields default
    assert z.decode_partition_state(text).state == PartitionState((), 1, 5, (1,), 0)


@pytest.mark.parametrize("bad", [
    b"{}", b'{"leader":1,"leader_epoch":0,"isr":[1]}', b'{"leader":1,"leader_epoch":0,"controller_epoch":1}',
    b'{"leader":"1","leader_epoch":0,"isr":[1],"controller_epoch":1}',
    b'{"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1,"leader_recovery_state":2}',
    b'{"leader":1,"leader_epoch":0.0,"isr":[1],"controller_epoch":1}', b"nul",
])
def test_partition_state_malformed(bad):
    with pytest.raises(ValueError):
        z.decode_partition_state(bad)


# ------------------------------------------------------------------ configs and notifications

def test_config_znode():
    text = b'{"version":1,"config":{"cleanup.policy":"compact","max.message.bytes":"2000000","retention.ms":"86400000"}}'
    config = {"retention.ms": "86400000", "max.message.bytes": "2000000", "cleanup.policy": "compact"}
    assert z.encode_config(config) == text
    assert z.decode_config(text) == config
    assert z.encode_config({}) == b'{"version":1,"config":{}}'
    # what Kafka reads as no overrides
    assert z.decode_config(b"") == {} and z.decode_config(None) == {}
    assert z.decode_config(b'{"version":1}') == {} and z.decode_config(b"[]") == {}
    with pytest.raises(ValueError):
        z.decode_config(b'{"version":1,"config":{"retention.ms":86400000}}')
    with pytest.raises(ValueError):
        z.decode_config(b"{version")


def test_config_change_notifications():
    assert z.encode_config_change("topics", "orders") == b'{"version":2,"entity_path":"topics/orders"}'
    assert z.decode_config_change(b'{"version":2,"entity_path":"topics/orders"}') == ("topics", "orders")
    assert z.decode_config_change(b'{"version":2,"entity_path":"brokers/<default>"}') == ("brokers", "<default>")
    assert z.decode_config_change(b'{"version":2,"entity_path":"users/User%3Aa/clients/c1"}') == (
        "users", "User%3Aa/clients/c1")
    assert z.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == ("topics", "t")
    for bad in (b'{"version":3,"entity_path":"topics/t"}', b'{"version":2}', b'{"version":2,"entity_path":"topics"}',
                b'{"version":2,"entity_path":"queues/q"}', b'{"version":1,"entity_type":"brokers","entity_name":"1"}',
                b'{"version":1,"entity_type":"topics"}', b"[]", b"x"):
        with pytest.raises(ValueError):
            z.decode_config_change(bad)


def test_delete_topic_marker_is_empty():
    assert z.DELETE_TOPIC_DATA == b""


def test_isr_change_notification():
    text = b'{"version":1,"partitions":[{"topic":"orders","partition":0},{"topic":"orders","partition":3}]}'
    assert z.encode_isr_change([("orders", 0), ("orders", 3), ("orders", 0)]) == text
    assert z.decode_isr_change(text) == {("orders", 0), ("orders", 3)}
    for bad in (b'{"version":1}', b'{"partitions":{}}', b'{"partitions":[{"topic":"t"}]}',
                b'{"partitions":[{"topic":1,"partition":0}]}'):
        with pytest.raises(ValueError):
            z.decode_isr_change(bad)


# ------------------------------------------------------------------ /latest_producer_id_block

def test_producer_id_block_as_kafka_writes_it():
    text = b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    block = ProducerIdsBlock(2, 1000, 1000)
    assert z.encode_producer_id_block(block) == text
    assert z.decode_producer_id_block(text) == block
    for bad in (b'{"version":1,"broker":2,"block_start":1000,"block_end":1999}',  # numbers, not strings
                b'{"version":1,"block_start":"0","block_end":"999"}', b'{"broker":2,"block_start":"x","block_end":"9"}',
                b'{"broker":2,"block_start":"0","block_end":"9223372036854775808"}',
                b'{"broker":2,"block_start":"0","block_end":"4294967296"}'):
        with pytest.raises(ValueError):
            z.decode_producer_id_block(bad)


def test_next_producer_id_block():
    first = z.next_producer_id_block(None, 1)
    assert first == ProducerIdsBlock(1, 0, 1000)
    assert z.next_producer_id_block(first, 2) == ProducerIdsBlock(2, 1000, 1000)
    with pytest.raises(ValueError):
        z.next_producer_id_block(ProducerIdsBlock(1, z.INT64_MAX - 1500, 1000), 1)


# ------------------------------------------------------------------ round trips (Hypothesis)

int32 = st.integers(z.INT32_MIN, z.INT32_MAX)
broker_ids = st.integers(0, 1 << 20)
hosts = st.one_of(st.just(""), st.from_regex(r"[a-z0-9][a-z0-9.-]{0,20}", fullmatch=True),
                  st.sampled_from(["::1", "fe80::1%eth0", "10.0.0.1"]))
ports = st.integers(0, 65535)
listener_names = st.from_regex(r"[A-Z][A-Z0-9_-]{0,12}", fullmatch=True)
protocols = st.sampled_from(z.SECURITY_PROTOCOLS)
racks = st.one_of(st.none(), st.text(min_size=1, max_size=10))


@st.composite
def brokers(draw):
    names = draw(st.lists(listener_names, min_size=1, max_size=6, unique=True))
    endpoints = tuple(EndPoint(draw(hosts), draw(ports), n, draw(protocols)) for n in names)
    return BrokerInfo(draw(broker_ids), endpoints[0].host, endpoints[0].port, draw(racks), endpoints)


@given(brokers(), st.integers(0, 1 << 45), int32)
@settings(max_examples=200)
def test_broker_round_trip(broker, timestamp, jmx_port):
    reg = z.decode_broker_registration(broker.broker_id, z.encode_broker(broker, timestamp, jmx_port))
    assert reg.broker == broker
    assert (reg.timestamp_ms, reg.jmx_port, reg.version) == (timestamp, jmx_port, 5)


assignments = st.dictionaries(st.integers(0, 5000), st.lists(broker_ids, min_size=1, max_size=5).map(tuple),
                              max_size=40)


@given(st.one_of(st.none(), st.uuids()), assignments, st.data())
@settings(max_examples=200)
def test_topic_round_trip(topic_id, partitions, data):
    keys = sorted(partitions)
    adding = {p: partitions[p][:1] for p in data.draw(st.lists(st.sampled_from(keys), max_size=3))} if keys else {}
    t = z.decode_topic("t", z.encode_topic(topic_id, partitions, adding))
    assert t == z.TopicAssignment(topic_id, dict(sorted(partitions.items())), dict(sorted(adding.items())), {})


@given(st.lists(broker_ids, max_size=5).map(tuple), int32, int32, st.lists(broker_ids, max_size=5).map(tuple),
       st.integers(0, z.INT32_MAX), int32, st.sampled_from([z.LEADER_RECOVERED, z.LEADER_RECOVERING]))
def test_partition_state_round_trip(replicas, leader, leader_epoch, isr, zk_version, controller_epoch, recovery):
    state = PartitionState(replicas, leader, leader_epoch, isr, zk_version)
    data = z.encode_partition_state(state, controller_epoch, recovery)
    assert z.decode_partition_state(data, replicas, zk_version) == z.PartitionStateZNode(state, controller_epoch, recovery)


@given(st.dictionaries(st.text(min_size=1, max_size=30), st.text(max_size=30), max_size=30))
def test_config_round_trip(config):
    data = z.encode_config(config)
    assert z.decode_config(data) == config
    assert sorted(z.decode_config(data)) == sorted(config)


@given(int32, st.integers(0, 1 << 50), st.integers(1, 1 << 20))
def test_producer_id_block_round_trip(broker, start, size):
    block = ProducerIdsBlock(broker, start, size)
    assert z.decode_producer_id_block(z.encode_producer_id_block(block)) == block


@given(st.sets(st.tuples(st.text(min_size=1, max_size=20), st.integers(0, z.INT32_MAX)), max_size=20))
def test_isr_change_round_trip(partitions):
    assert z.decode_isr_change(z.encode_isr_change(sorted(partitions))) == partitions


@given(int32, st.integers(0, 1 << 45), int32, st.text(max_size=40))
def test_controller_cluster_epoch_round_trips(broker, timestamp, epoch, cluster_id):
    reg = z.decode_controller(z.encode_controller(broker, timestamp, epoch))
    assert (reg.broker_id, reg.timestamp_ms, reg.kraft_controller_epoch) == (broker, timestamp, epoch)
    assert z.decode_controller_epoch(z.encode_controller_epoch(epoch)) == epoch
    assert z.decode_cluster_id(z.encode_cluster_id(cluster_id)) == cluster_id


@given(st.uuids())
def test_uuid_text_round_trip(u):
    text = z.uuid_to_kafka(u)
    assert len(text) == 22 and "=" not in text
    assert z.uuid_from_kafka(text) == u


@given(st.binary(max_size=64))
def test_decoders_raise_only_value_error(data):
    for decode in (z.decode_cluster_id, z.decode_controller, z.decode_controller_epoch, z.decode_config_change,
                   z.decode_isr_change, z.decode_producer_id_block, z.decode_config,
                   lambda d: z.decode_broker(1, d), lambda d: z.decode_topic("t", d), z.decode_partition_state,
                   z.decode_consumer_offset):
        try:
            decode(data)
        except ValueError:
            pass


def test_consumer_offset_znode_is_kafkas():
    # ConsumerOffset: /consumers/<group>/offsets/<topic>/<partition>, the offset as decimal text
    assert z.consumer_offset_path("g", "t", 3) == "/consumers/g/offsets/t/3"
    assert z.consumer_offset_path("a/b", "t", 0) == "/consumers/a/b/offsets/t/0"  # nested, as in Kafka
    assert (z.encode_consumer_offset(42), z.encode_consumer_offset(-1)) == (b"42", b"-1")
    assert (z.decode_consumer_offset(b"42"), z.decode_consumer_offset(b"+7")) == (42, 7)
    for bad in (b"", b" 1", b"1_0", b"1.0", b"9223372036854775808"):  # Long.parseLong refuses them
        with pytest.raises(ValueError):
            z.decode_consumer_offset(bad)
    for group in ("", ".", "..", "a\x00"):  # ZooKeeper's PathUtils refuses them
        with pytest.raises(ValueError):
            z.consumer_offset_path(group, "t", 0)


@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_consumer_offset_round_trip(offset):
    assert z.decode_consumer_offset(z.encode_consumer_offset(offset)) == offset
