"""Message schemas kio does not have.

kio's classes are generated from Kafka 4.x, which dropped two things Kafka
3.9 still serves:

* the ZooKeeper-mode inter-broker APIs LeaderAndIsr (4), StopReplica (5)
  and UpdateMetadata (6). A kafkapy controller sends them to kafkapy
  brokers, so each is written here at the one version Kafka 3.9's
  controller sends with the latest inter-broker protocol (LeaderAndIsr v7,
  StopReplica v4, UpdateMetadata v8);
* the oldest versions of client APIs (KIP-896): OffsetCommit v0-v1,
  OffsetFetch v0, DescribeConfigs v0, CreateTopics v0-v1, DeleteTopics v0,
  OffsetForLeaderEpoch v0-v1, ListOffsets v0, Fetch v0-v3, DescribeLogDirs
  v0 (the API table's ``own_below``).

Each is written from the field list of Kafka 3.9's message JSON in kio's
class shape: ``kafkapy.protocol.api`` loads them from this package instead
of ``kio.schema`` and the codec reads and writes them like any other.
"""
