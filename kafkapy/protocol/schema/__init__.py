"""Message schemas kio does not have: the ZooKeeper-mode inter-broker APIs.

kio's classes are generated from Kafka 4.x, which dropped LeaderAndIsr (4),
StopReplica (5) and UpdateMetadata (6) with ZooKeeper mode. A kafkapy
controller sends them to kafkapy brokers, so each is written here at the one
version Kafka 3.9's controller sends with the latest inter-broker protocol
(LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8), in kio's class shape:
``kafkapy.protocol.api`` loads them from this package instead of
``kio.schema`` and the codec reads and writes them like any other.
"""
