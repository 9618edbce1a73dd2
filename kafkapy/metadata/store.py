"""The metadata-store interface: what the server needs from cluster metadata.

Two implementations: ``embedded.EmbeddedMetadataStore`` (standalone: one
JSON file in the first log dir) and, with cluster mode, a ZooKeeper store
(the only module importing kazoo). Callers see the model of
``kafkapy.metadata.model`` and never the storage behind it.

The generation contract, which keeps the hot path at one shared-memory
read: every store publishes each change it makes *or sees* (the ZooKeeper
store: when a watch fires) by incrementing the shared partition table's
counter ``METADATA_GENERATION``. A process compares that counter with the
``generation`` of the metadata it last applied, and calls ``current()``
only when they differ.

Ownership: a store object is owned by one process (each handler worker, the
supervisor, the coordinator process) and never shared; what processes share
is the backing storage and the generation counter.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable

from kafkapy.metadata.model import Metadata

# The shared table counter (kafkapy.storage.shared.SharedPartitionTable.counter)
# that moves whenever the metadata did.
METADATA_GENERATION = "metadata_generation"
# Kafka's ProducerIdManager reserves ids in blocks of 1000 (PidBlockSize), so
# allocating one rarely touches the store; ids of a block left unused when the
# broker stops are skipped, never reused.
PRODUCER_ID_BLOCK = 1000


@dataclass(frozen=True)
class ProducerIdsBlock:
    """Producer ids ``first_producer_id .. last_producer_id`` reserved for one
    broker (Kafka's ``ProducerIdsBlock``; ZooKeeper's ``/latest_producer_id_block``)."""

    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


class MetadataStore(ABC):
    @property
    @abstractmethod
    def generation(self) -> int:
        """The generation of the metadata ``current()`` or ``update()`` last
        returned in this process (-1 before the first)."""

    @abstractmethod
    def current(self) -> Metadata:
        """The latest metadata; re-read only if ``METADATA_GENERATION`` moved.

        The object is shared by every caller of this process: read-only.
        """

    @abstractmethod
    def update(self, change: Callable[[Metadata], None]) -> Metadata:
        """Apply ``change(md)`` to the latest metadata atomically and publish it.

        Conditional on what ``change`` read: no other update lands between
        the read it is given and the write (the embedded store holds the table
        lock throughout; ZooKeeper writes with the versions it read and runs
        ``change`` again on a conflict, so ``change`` must be safe to repeat
        on a fresh copy). An exception from ``change`` aborts the update and
        propagates. Returns the new metadata.
        """

    def replace(self, md: Metadata) -> None:
        """Make ``md``'s persistent facts (topics, dynamic broker configs, the
        producer-id block) the whole metadata: the supervisor at start-up."""
        def change(current: Metadata) -> None:
            current.topics = md.topics
            current.producer_id_block_end = md.producer_id_block_end
            current.broker_configs = md.broker_configs
            current.entity_configs = md.entity_configs

        self.update(change)

    def alter_entity_configs(self, entity: tuple, set=None, delete=()) -> dict:
        """Set keys ``set`` and remove keys ``delete`` of one user/client entity
        (``metadata.user_entity`` ...), atomically, leaving its other keys as they
        are; returns the entity's new config. See ``alter_entity_configs_batch``."""
        return self.alter_entity_configs_batch({entity: (set or {}, delete)})[entity]

    def alter_entity_configs_batch(self, alterations, validate=None) -> dict:
        """``alterations``: ``{entity key: (keys to set, keys to delete)}``, applied in
        one ``update`` (all or none; in a cluster one ZooKeeper multi-op with a
        ``/config/changes`` notification per entity). ``validate(entity, new
        config)`` may raise to abort everything. An entity left without keys is
        removed. Returns ``{entity key: new config}``."""
        out = {}

        def change(md: Metadata) -> None:
            out.clear()
            for entity, (to_set, to_delete) in alterations.items():
                config = dict(md.entity_configs.get(entity) or {})
                for key in to_delete:
                    config.pop(key, None)
                config.update({k: str(v) for k, v in (to_set or {}).items()})
                if validate is not None:
                    validate(entity, config)
                if config:
                    md.entity_configs[entity] = config
                elif entity in md.entity_configs:
                    del md.entity_configs[entity]
                out[entity] = config

        self.update(change)
        return out

    @abstractmethod
    def set_consumer_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Store an OffsetCommit v0 offset where Kafka 3.9 keeps it: ZooKeeper's
        ``/consumers/<group>/offsets/<topic>/<partition>`` (KafkaZkClient's
        setOrCreateConsumerOffset), the embedded store's file standalone. Apart
        from ``__consumer_offsets``: OffsetFetch v1+ never sees it. ValueError
        for a group ZooKeeper cannot name (``zk.data.consumer_offset_path``)."""

    @abstractmethod
    def consumer_offset(self, group: str, topic: str, partition: int) -> int | None:
        """The offset ``set_consumer_offset`` stored (KafkaZkClient's
        getConsumerOffset), None without one."""

    def new_producer_id_block(self, broker_id: int, size: int = PRODUCER_ID_BLOCK) -> ProducerIdsBlock:
        """Reserve the next ``size`` producer ids for ``broker_id`` (Kafka's
        ``ZkProducerIdManager.getNewProducerIdBlock``): they start at the end
        of the block reserved before, which moves past them atomically."""
        blocks = []

        def change(md: Metadata) -> None:
            blocks[:] = [ProducerIdsBlock(broker_id, md.producer_id_block_end, size)]
            md.producer_id_block_end += size

        self.update(change)
        return blocks[0]
