"""The tools' one seam to a Kafka client: a narrow interface, two backends.

The tools are meant to run on kafkapy's own client (``kafkapy.client``); it
was being written at the same time as the tools, so every tool talks only to
the small interface below and this module picks the backend:

* ``kafkapy.client`` when it imports (the default);
* confluent-kafka otherwise, or when ``KAFKAPY_TOOLS_CLIENT=confluent``.

The interface follows ``kafkapy.client``'s names (``send`` returning a future,
``poll(timeout_ms) -> {TopicPartition: [ConsumerRecord]}``), so with that
backend the producer and consumer are passed through untouched; only admin
results are normalised into the small records defined here.

Every backend error is raised as ``ClientError`` carrying Kafka's error name
and code, so tools can print Kafka's messages without knowing the backend.

Ownership: each object here is created and used by one tool invocation on its
main thread; the confluent producer's delivery callbacks also run there (from
``poll``/``flush``).
"""

from __future__ import annotations

import importlib
import os
import time
from collections import namedtuple
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

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


def backend_name() -> str:
    forced = os.environ.get("KAFKAPY_TOOLS_CLIENT", "").strip().lower()
    if forced in ("confluent", "kafkapy"):
        return forced
    try:
        module = importlib.import_module("kafkapy.client")
    except ImportError:
        return "confluent"
    # The package may exist before its classes do (it was written alongside
    # the tools): use it only once it offers all three.
    for name in ("KafkaProducer", "KafkaConsumer", "AdminClient"):
        try:
            getattr(module, name)
        except Exception:  # noqa: BLE001 - AttributeError, or a lazy import of a module not written yet
            return "confluent"
    try:
        importlib.import_module("kafkapy.tools._client_kafkapy")
    except ImportError:
        return "confluent"
    return "kafkapy"


def connect(bootstrap_servers: str, config: Optional[dict] = None):
    """The backend's ``Clients`` for one tool run."""
    if backend_name() == "kafkapy":
        from kafkapy.tools import _client_kafkapy as backend
    else:
        from kafkapy.tools import _client_confluent as backend
    return backend.Clients(bootstrap_servers, dict(config or {}))


def wait_until(predicate: Callable[[], bool], timeout_s: float, step_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return predicate()


def as_tps(items: Iterable) -> list[TopicPartition]:
    return [TopicPartition(t.topic, t.partition) for t in items]


def describe_error(exc: ClientError) -> str:
    """A Kafka-style one-line description: the message, with the error name if it adds anything."""
    message = exc.message or exc.name
    return message if exc.name in message or exc.name == message else f"{message} ({exc.name})"
