"""Kafka's replica placement and leader election, as pure functions.

Replica placement is Kafka's ``AdminUtils.assignReplicasToBrokers``
(``server-common/src/main/java/org/apache/kafka/admin/AdminUtils.java`` at
3.9.0), which both ZooKeeper-mode CreateTopics and CreatePartitions use:

* rack-unaware: partition p's first replica is broker
  ``(p + start_index) % n`` of the list, its others follow at a shift
  ``1 + (shift + j) % (n - 1)`` from it, and the shift grows by one each time
  the partition id wraps around the broker list, so that the brokers
  following a given leader vary;
* rack-aware (every broker has a rack): the same on a list that alternates
  racks (racks sorted by name, brokers of a rack by id), skipping a broker
  whose rack or self already holds a replica of the partition while some
  rack or broker holds none.

``start_index`` and the initial shift are random (``random.randrange`` unless
``rand`` is given: a function ``rand(n) -> [0, n)``, called for the start
index first, then for the shift, as Kafka's ``RAND.nextInt``) or both
``fixed_start_index``.

Broker order matters: Kafka's AdminZkClient (CreatePartitions, the topic
tool) sorts brokers by id (``broker_metadatas``); ZooKeeper-mode CreateTopics
passes the metadata cache's live brokers in that map's order.

Leader election is Kafka's ``PartitionLeaderElectionAlgorithms`` and
``Election`` (``core/src/main/scala/kafka/controller/``); a new partition's
leader and ISR are ``PartitionStateMachine.initializeLeaderAndIsrForPartitions``'s.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError


class AdminOperationError(TopicError):
    """Kafka's AdminOperationException: not an ApiException, so a request answers it
    with UNKNOWN_SERVER_ERROR (ApiError.fromThrowable)."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)


@dataclass(frozen=True)
class BrokerMetadata:
    """Kafka's ``org.apache.kafka.admin.BrokerMetadata``: an id and an optional rack."""

    broker_id: int
    rack: str | None = None


# Kafka's RackAwareMode: Enforced refuses a cluster where only some brokers
# have a rack, Safe then ignores racks, Disabled always ignores them.
RACK_AWARE_ENFORCED = "enforced"
RACK_AWARE_SAFE = "safe"
RACK_AWARE_DISABLED = "disabled"


def broker_metadatas(brokers: Iterable, rack_aware_mode: str = RACK_AWARE_ENFORCED) -> list:
    """AdminZkClient.getBrokerMetadatas: ``BrokerMetadata`` of the brokers (anything
    with ``broker_id`` and ``rack``, e.g. ``BrokerInfo``), sorted by id."""
    brokers = list(brokers)
    with_rack = [b for b in brokers if b.rack is not None]
    if rack_aware_mode == RACK_AWARE_ENFORCED and with_rack and len(with_rack) < len(brokers):
        raise AdminOperationError("Not all brokers have rack information. Add --disable-rack-aware in command line"
                                  " to make replica assignment without rack information.")
    ignore_racks = rack_aware_mode == RACK_AWARE_DISABLED or (
        rack_aware_mode == RACK_AWARE_SAFE and len(with_rack) < len(brokers))
    out = [BrokerMetadata(b.broker_id, None if ignore_racks else b.rack) for b in brokers]
    return sorted(out, key=lambda b: b.broker_id)


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def assign_replicas_to_brokers(brokers: Sequence, n_partitions: int, replication_factor: int,
                               fixed_start_index: int = -1, start_partition_id: int = -1,
                               rand: Callable[[int], int] | None = None) -> dict:
    """partition id -> list of broker ids (the first is the preferred leader).

    ``brokers``: ``BrokerMetadata`` (or anything with ``broker_id`` and ``rack``,
    or plain ids), in the order placement uses. Partition ids start at
    ``max(0, start_partition_id)``. Raises ``TopicError`` INVALID_PARTITIONS /
    INVALID_REPLICATION_FACTOR with Kafka's messages, and
    ``AdminOperationError`` when only some brokers have a rack.
    """
    brokers = [b if hasattr(b, "broker_id") else BrokerMetadata(int(b)) for b in brokers]
    if n_partitions <= 0:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rand = rand if rand is not None else random.randrange
    if all(b.rack is None for b in brokers):
        return _rack_unaware([b.broker_id for b in brokers], n_partitions, replication_factor,
                             fixed_start_index, start_partition_id, rand)
    return _rack_aware(brokers, n_partitions, replication_factor, fixed_start_index, start_partition_id, rand)


def _rack_unaware(broker_list: list, n_partitions: int, replication_factor: int,
                  fixed_start_index: int, start_partition_id: int, rand) -> dict:
    n = len(broker_list)
    out = {}
    for partition, first, shift in _placements(n, n_partitions, fixed_start_index, start_partition_id, rand):
        replicas = [broker_list[first]]
        replicas += [broker_list[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        out[partition] = replicas
    return out


def _placements(n: int, n_partitions: int, fixed_start_index: int, start_partition_id: int, rand):
    """The walk both of Kafka's assignments share: for each new partition,
    ``(partition id, index of its first replica, follower shift)`` over ``n``
    brokers; the start index and the shift are random unless fixed (drawn in
    that order, as Kafka does), and the shift grows each time the partitions
    wrap around the brokers."""
    start_index = fixed_start_index if fixed_start_index >= 0 else rand(n)
    partition = max(0, start_partition_id)
    shift = fixed_start_index if fixed_start_index >= 0 else rand(n)
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        yield partition, (partition + start_index) % n, shift
        partition += 1


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list:
    """AdminUtils.getRackAlternatedBrokerList: one broker of each rack in turn, racks
    in name order, each rack's brokers in id order
    ({0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"} -> [0, 3, 1, 5, 4, 2])."""
    by_rack = {}
    for broker_id, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [sorted(by_rack[r]) for r in sorted(by_rack)]
    out = []
    depth = 0
    while len(out) < len(broker_racks):
        out += [q[depth] for q in queues if depth < len(q)]
        depth += 1
    return out


def _rack_aware(brokers: list, n_partitions: int, replication_factor: int,
                fixed_start_index: int, start_partition_id: int, rand) -> dict:
    rack_of = {}
    for b in brokers:
        if b.rack is None:
            raise AdminOperationError("Not all brokers have rack information for replica rack aware assignment.")
        rack_of[b.broker_id] = b.rack
    n_racks = len(set(rack_of.values()))
    arranged = rack_alternated_broker_list(rack_of)
    n = len(arranged)
    out = {}
    for partition, first, shift in _placements(n, n_partitions, fixed_start_index, start_partition_id, rand):
        leader = arranged[first]
        replicas = [leader]
        racks_used = {rack_of[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = rack_of[broker]
                k += 1
                # skip a broker whose rack already has a replica while some rack has
                # none, or that already has one while some broker has none
                if ((rack not in racks_used or len(racks_used) == n_racks)
                        and (broker not in brokers_used or len(brokers_used) == n)):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        out[partition] = replicas
    return out


def new_partitions_assignment(topic: str, existing: Mapping[int, Sequence[int]], brokers: Sequence,
                              num_partitions: int, rand: Callable[[int], int] | None = None) -> dict:
    """AdminZkClient.createNewPartitionsAssignment without a given assignment: the
    replicas of partitions ``len(existing) .. num_partitions - 1``, with the
    replication factor of partition 0 and placement continuing from the
    first broker whose id is >= partition 0's first replica (fixed start
    index, so both the start and the shift are that index). ``brokers`` as
    ``broker_metadatas`` returns them (sorted by id)."""
    if 0 not in existing:
        raise AdminOperationError(f"Unexpected existing replica assignment for topic '{topic}', partition id 0 "
                                  f"is missing. Assignment: {dict(existing)}")
    partition0 = list(existing[0])
    to_add = num_partitions - len(existing)
    if to_add <= 0:
        raise TopicError(ErrorCode.INVALID_PARTITIONS,
                         "The number of partitions for a topic can only be increased. "
                         f"Topic {topic} currently has {len(existing)} partitions, "
                         f"{num_partitions} would not be an increase.")
    ids = [b.broker_id if hasattr(b, "broker_id") else int(b) for b in brokers]
    start_index = next((i for i, b in enumerate(ids) if b >= partition0[0]), -1)
    return assign_replicas_to_brokers(brokers, to_add, len(partition0), max(0, start_index), len(existing), rand)


# ------------------------------------------------------------------ leader election

def elect_leader(assignment: Sequence[int], isr: Sequence[int], live_brokers: Iterable[int],
                 unclean: bool = False) -> int | None:
    """Offline-partition election (offlinePartitionLeaderElection): the first replica in
    assignment order that is live and in the ISR; failing that, with unclean
    election enabled, the first live replica; else None (the partition stays
    offline)."""
    live = set(live_brokers)
    in_sync = set(isr)
    leader = next((r for r in assignment if r in live and r in in_sync), None)
    if leader is None and unclean:
        leader = next((r for r in assignment if r in live), None)
    return leader


def elect_leader_and_isr(assignment: Sequence[int], isr: Sequence[int], live_brokers: Iterable[int],
                         unclean: bool = False) -> tuple | None:
    """Election.leaderForOffline: (leader, new ISR, recovering) or None.

    A leader from the ISR keeps the ISR's live members; an unclean leader
    becomes the whole ISR and the partition is RECOVERING (leader recovery,
    supported from metadata version 3.2)."""
    live = set(live_brokers)
    leader = elect_leader(assignment, isr, live, unclean)
    if leader is None:
        return None
    if leader in isr:
        return leader, tuple(r for r in isr if r in live), False
    return leader, (leader,), True


def preferred_leader(assignment: Sequence[int], isr: Sequence[int], live_brokers: Iterable[int]) -> int | None:
    """Preferred-replica election: the first assigned replica, if it is live and in the ISR."""
    if not assignment:
        return None
    first = assignment[0]
    return first if first in set(live_brokers) and first in set(isr) else None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Sequence[int], live_brokers: Iterable[int],
                               shutting_down: Iterable[int]) -> int | None:
    """Controlled-shutdown election: the first live ISR replica not shutting down."""
    live, in_sync, leaving = set(live_brokers), set(isr), set(shutting_down)
    return next((r for r in assignment if r in live and r in in_sync and r not in leaving), None)


def initial_leader_and_isr(assignment: Sequence[int], live_brokers: Iterable[int]) -> tuple | None:
    """A new partition's (leader, isr): the ISR is its live replicas in assignment
    order and the first of them leads (leader epoch 0, partition epoch 0);
    None when no replica is live (Kafka logs the failed New -> Online change
    and leaves the partition without state)."""
    live = set(live_brokers)
    isr = tuple(r for r in assignment if r in live)
    if not isr:
        return None
    return isr[0], isr
