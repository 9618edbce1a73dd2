"""The API table advertises what Apache Kafka 3.9 advertises in ZooKeeper mode.

``KAFKA_39_ZK`` is, for every API whose message JSON in Kafka 3.9
(``clients/src/main/resources/common/message/*Request.json``) lists the
``zkBroker`` listener, its ``validVersions``: a ZooKeeper-mode broker's
ApiVersions answer (``ApiVersionsResponse.filterApis`` with the ZK_BROKER
listener; no 3.9 zkBroker API has an unstable latest version, and the
telemetry APIs are KRaft brokers' only). Kafka 3.9 still serves the versions
4.0 removed (KIP-896), so the ranges start at v0.

For each API kafkapy implements, the advertised range must be exactly
Kafka's; an API Kafka 3.9's ZooKeeper broker does not expose must not be
advertised. The raw sweep (tests/integration/test_api_sweep.py) sends every
advertised version to a real broker.
"""

from kafkapy.protocol.api import API_TABLE

# api key -> (name, min, max): Kafka 3.9's zkBroker APIs.
KAFKA_39_ZK = {
    0: ("Produce", 0, 11), 1: ("Fetch", 0, 17), 2: ("ListOffsets", 0, 9), 3: ("Metadata", 0, 12),
    4: ("LeaderAndIsr", 0, 7), 5: ("StopReplica", 0, 4), 6: ("UpdateMetadata", 0, 8),
    7: ("ControlledShutdown", 0, 3), 8: ("OffsetCommit", 0, 9), 9: ("OffsetFetch", 0, 9),
    10: ("FindCoordinator", 0, 6), 11: ("JoinGroup", 0, 9), 12: ("Heartbeat", 0, 4), 13: ("LeaveGroup", 0, 5),
    14: ("SyncGroup", 0, 5), 15: ("DescribeGroups", 0, 5), 16: ("ListGroups", 0, 5),
    17: ("SaslHandshake", 0, 1), 18: ("ApiVersions", 0, 4), 19: ("CreateTopics", 0, 7),
    20: ("DeleteTopics", 0, 6), 21: ("DeleteRecords", 0, 2), 22: ("InitProducerId", 0, 5),
    23: ("OffsetForLeaderEpoch", 0, 4), 24: ("AddPartitionsToTxn", 0, 5), 25: ("AddOffsetsToTxn", 0, 4),
    26: ("EndTxn", 0, 4), 27: ("WriteTxnMarkers", 0, 1), 28: ("TxnOffsetCommit", 0, 4),
    29: ("DescribeAcls", 0, 3), 30: ("CreateAcls", 0, 3), 31: ("DeleteAcls", 0, 3),
    32: ("DescribeConfigs", 0, 4), 33: ("AlterConfigs", 0, 2), 34: ("AlterReplicaLogDirs", 0, 2),
    35: ("DescribeLogDirs", 0, 4), 36: ("SaslAuthenticate", 0, 2), 37: ("CreatePartitions", 0, 3),
    38: ("CreateDelegationToken", 0, 3), 39: ("RenewDelegationToken", 0, 2),
    40: ("ExpireDelegationToken", 0, 2), 41: ("DescribeDelegationToken", 0, 3), 42: ("DeleteGroups", 0, 2),
    43: ("ElectLeaders", 0, 2), 44: ("IncrementalAlterConfigs", 0, 1),
    45: ("AlterPartitionReassignments", 0, 0), 46: ("ListPartitionReassignments", 0, 0),
    47: ("OffsetDelete", 0, 0), 48: ("DescribeClientQuotas", 0, 1), 49: ("AlterClientQuotas", 0, 1),
    50: ("DescribeUserScramCredentials", 0, 0), 51: ("AlterUserScramCredentials", 0, 0),
    56: ("AlterPartition", 0, 3), 57: ("UpdateFeatures", 0, 1), 58: ("Envelope", 0, 0),
    60: ("DescribeCluster", 0, 1), 61: ("DescribeProducers", 0, 0), 65: ("DescribeTransactions", 0, 0),
    66: ("ListTransactions", 0, 1), 67: ("AllocateProducerIds", 0, 0),
    68: ("ConsumerGroupHeartbeat", 0, 0), 69: ("ConsumerGroupDescribe", 0, 0),
}

# Kafka 3.9 zkBroker APIs kafkapy does not implement (nothing advertised, nothing answered).
NOT_IMPLEMENTED = {34, 38, 39, 40, 41, 56, 57, 58, 67}

# Past Kafka 3.9 on purpose: its ZooKeeper broker advertises KIP-848's
# ConsumerGroupHeartbeat/Describe v0 and answers UNSUPPORTED_VERSION (the new
# group coordinator needs KRaft); kafkapy serves KIP-848 groups, and
# librdkafka 2.10+ (confluent-kafka 2.16 here) joins them only when v1 is
# advertised (test_groups_kip848.py fails with v0 alone).
BEYOND_KAFKA_39 = {68: (0, 1), 69: (0, 1)}


def test_kafkapy_implements_every_kafka_39_zk_api_but_the_listed_ones():
    advertised = {k for k, s in API_TABLE.items() if s.advertised}
    assert advertised == set(KAFKA_39_ZK) - NOT_IMPLEMENTED


def test_every_advertised_range_is_kafka_39s():
    wrong = {}
    for key, spec in API_TABLE.items():
        if not spec.advertised:
            continue
        name, lo, hi = KAFKA_39_ZK[key]
        expected = BEYOND_KAFKA_39.get(key, (lo, hi))
        if (spec.name, spec.min_version, spec.max_version) != (name, *expected):
            wrong[key] = ((spec.name, spec.min_version, spec.max_version), (name, *expected))
    assert not wrong, wrong


def test_every_advertised_version_is_served():
    # served_from above min_version would advertise a version answered UNSUPPORTED_VERSION.
    assert {k: (s.min_version, s.served_from) for k, s in API_TABLE.items() if s.served_from != s.min_version} == {}


def test_apis_a_kafka_39_zk_broker_does_not_expose_are_not_advertised():
    # KRaft brokers' (listeners "broker" only): the client-telemetry APIs and
    # DescribeTopicPartitions; kafkapy answers them when sent, unadvertised.
    assert {k for k, s in API_TABLE.items() if not s.advertised} == {71, 72, 75}
    assert not set(KAFKA_39_ZK) & {71, 72, 75}


def test_the_exceptions_only_add_versions():
    for key, (lo, hi) in BEYOND_KAFKA_39.items():
        _name, klo, khi = KAFKA_39_ZK[key]
        assert lo == klo and hi > khi
