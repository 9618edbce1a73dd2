"""The types of the tools' client interface (``_client``), which both backends return.

Topic-partitions and consumer records, ListOffsets' special timestamps, the
admin call timeout, ``ClientError`` (every backend error as Kafka's error
name and code) and the small records admin results are normalised into.
Below ``_client`` and its two backends (``_client_kafkapy``,
``_client_confluent``): ``_client`` picks a backend, the backends build these.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field
from typing import Optional

TopicPartition = namedtuple("TopicPartition", ("topic", "partition"))
ConsumerRecord = namedtuple(
    "ConsumerRecord", ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers"))

# ListOffsets' special timestamps (ListOffsetsRequest.LATEST_TIMESTAMP etc.).
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3

# How long an admin call may take before the tool gives up: Kafka's
# default.api.timeout.ms is 60 s; a command-line tool against a local broker
# should answer in well under a second, so 30 s only guards against a hang.
DEFAULT_TIMEOUT_S = 30.0


class ClientError(Exception):
    """A Kafka error: ``name`` like ``TOPIC_ALREADY_EXISTS``, ``code`` Kafka's number."""

    def __init__(self, name: str, code: int = -1, message: str = ""):
        super().__init__(message or name)
        self.name = name
        self.code = code
        self.message = message or name

    @classmethod
    def from_code(cls, code: int, message=None) -> "ClientError":
        """The error a response's ``error_code`` (and ``error_message``) names."""
        from kafkapy.protocol.errors import ErrorCode

        try:
            name = ErrorCode(code).name
        except ValueError:
            name = str(code)
        return cls(name, code, message or "")


@dataclass
class PartitionInfo:
    partition: int
    leader: int  # -1: no leader
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicInfo:
    name: str
    topic_id: Optional[str]
    is_internal: bool
    partitions: list[PartitionInfo]


@dataclass
class ConfigEntry:
    name: str
    value: Optional[str]
    source: str  # Kafka's ConfigSource names: DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, STATIC_BROKER_CONFIG, ...
    is_default: bool
    is_sensitive: bool
    is_read_only: bool
    synonyms: list[tuple[str, Optional[str], str]] = field(default_factory=list)


@dataclass
class MemberInfo:
    member_id: str
    client_id: str
    host: str
    group_instance_id: Optional[str]
    assignment: list[TopicPartition]


@dataclass
class GroupInfo:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: Optional[tuple[int, str, int]]  # (id, host, port)
    members: list[MemberInfo]
