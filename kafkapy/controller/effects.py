"""The effects the controller's decisions return, for the event thread to carry out.

``ControllerState`` (state.py) and its reassignment methods (reassignment.py)
are sans-IO: each event method returns these, in order, having already
applied them to the state; ``Controller._execute`` (kafka_controller.py)
writes the znodes through ``kafkapy.metadata.zk.controller`` and sends the
requests through the channel manager. Plain frozen data, shared by both
sides and by the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkapy.metadata.model import PartitionState


@dataclass(frozen=True)
class WritePartitionState:
    """Write ``/brokers/topics/<topic>/partitions/<partition>/state``: create it
    when ``expected_version`` is None, else a set conditional on that version."""

    topic: str
    partition: int
    state: PartitionState
    controller_epoch: int
    expected_version: int | None


@dataclass(frozen=True)
class SendLeaderAndIsr:
    broker_id: int
    controller_epoch: int
    partitions: tuple  # ((topic, partition, PartitionState, is_new), ...)


@dataclass(frozen=True)
class SendUpdateMetadata:
    broker_ids: tuple
    controller_epoch: int
    partitions: tuple  # ((topic, partition, PartitionState), ...)


@dataclass(frozen=True)
class SendStopReplica:
    broker_id: int
    controller_epoch: int
    partitions: tuple  # ((topic, partition), ...)
    delete: bool


@dataclass(frozen=True)
class DeleteTopic:
    """Remove the deleted topic's znodes: ``/brokers/topics/<t>`` with its partition
    states, ``/config/topics/<t>``, then ``/admin/delete_topics/<t>``."""

    topic: str


@dataclass(frozen=True)
class WriteTopicAssignment:
    """Set ``/brokers/topics/<topic>`` (fenced by the controller epoch, not
    conditional on its version: Kafka's setTopicAssignmentRaw)."""

    topic: str
    topic_id: object
    partitions: tuple  # ((partition, replicas), ...)
    adding: tuple  # ((partition, replicas), ...) being reassigned only
    removing: tuple


@dataclass(frozen=True)
class RemoveZkReassignment:
    """Take partitions out of ``/admin/reassign_partitions`` (Kafka's
    maybeRemoveFromZkReassignment): ``entries`` ``((topic, partition,
    replicas or None), ...)``; None matches any target. The znode goes when
    nothing is left in it."""

    entries: tuple


__all__ = ["DeleteTopic", "RemoveZkReassignment", "SendLeaderAndIsr", "SendStopReplica", "SendUpdateMetadata",
           "WritePartitionState", "WriteTopicAssignment"]
