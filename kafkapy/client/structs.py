"""The client's value types, with Kafka's names (all immutable namedtuples)."""

from __future__ import annotations

from typing import NamedTuple, Optional


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """What a completed ``send`` future resolves to (Java's RecordMetadata)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


class BrokerMetadata(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: Optional[str] = None


class PartitionMetadata(NamedTuple):
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple
    isr: tuple
    offline_replicas: tuple
    error_code: int


class NewTopic(NamedTuple):
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict = {}
    replica_assignments: dict = {}


class NewPartitions(NamedTuple):
    total_count: int
    new_assignments: Optional[list] = None


class ConfigResource(NamedTuple):
    """``type``: "topic"/"broker"/"broker_logger" or Kafka's numeric code (2, 4, 8)."""

    type: object
    name: str
    configs: Optional[dict] = None


CONFIG_RESOURCE_TYPES = {"unknown": 0, "any": 1, "topic": 2, "group": 3, "broker": 4, "broker_logger": 8}
