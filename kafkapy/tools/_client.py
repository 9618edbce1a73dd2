"""The tools' one seam to a Kafka client: a narrow interface, two backends.

The tools are meant to run on kafkapy's own client (``kafkapy.client``); it
was being written at the same time as the tools, so every tool talks only to
the small interface below and this module picks the backend:

* ``kafkapy.client`` when it imports (the default);
* confluent-kafka otherwise, or when ``KAFKAPY_TOOLS_CLIENT=confluent``.

The interface follows ``kafkapy.client``'s names (``send`` returning a future,
``poll(timeout_ms) -> {TopicPartition: [ConsumerRecord]}``), so with that
backend the producer and consumer are passed through untouched; only admin
results are normalised into the small records of ``_client_types``.

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
from typing import Callable, Iterable, Optional

from kafkapy.tools._client_types import (
    DEFAULT_TIMEOUT_S,
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    ClientError,
    ConfigEntry,
    ConsumerRecord,
    GroupInfo,
    MemberInfo,
    PartitionInfo,
    TopicInfo,
    TopicPartition,
)


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


# The interface the tools reach as ``_client.<name>``: its types are _client_types'.
__all__ = ["DEFAULT_TIMEOUT_S", "EARLIEST", "LATEST", "MAX_TIMESTAMP", "ClientError", "ConfigEntry", "ConsumerRecord",
           "GroupInfo", "MemberInfo", "PartitionInfo", "TopicInfo", "TopicPartition", "as_tps", "backend_name",
           "connect", "describe_error", "wait_until"]
