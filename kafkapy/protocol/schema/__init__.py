"""Message schemas kio does not have.

kio's classes are generated from Kafka 4.x, which dropped two things Kafka
3.9 still serves:

* the ZooKeeper-mode inter-broker APIs LeaderAndIsr (4), StopReplica (5),
  UpdateMetadata (6) and ControlledShutdown (7), every version Kafka 3.9
  serves. A kafkapy controller sends the newest (LeaderAndIsr v7,
  StopReplica v4, UpdateMetadata v8, as Kafka 3.9's with the latest
  inter-broker protocol); an older Kafka controller the older ones
  (``kafkapy.server.handlers.controller_versions`` reads them as the newest);
* the oldest versions of client APIs (KIP-896): OffsetCommit v0-v1,
  OffsetFetch v0, DescribeConfigs v0, CreateTopics v0-v1, DeleteTopics v0,
  OffsetForLeaderEpoch v0-v1, ListOffsets v0, Fetch v0-v3, DescribeLogDirs
  v0 (the API table's ``own_below``).

Each is written from the field list of Kafka 3.9's message JSON in kio's
class shape: ``kafkapy.protocol.api`` loads them from this package instead
of ``kio.schema`` and the codec reads and writes them like any other.
"""
