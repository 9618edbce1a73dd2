"""The cluster-mode broker's metadata image (Kafka's ZooKeeper-mode ``MetadataCache``).

In cluster mode a broker learns the cluster's metadata from the controller,
as Kafka's brokers do: UpdateMetadata (live brokers, every partition's
leader, leader epoch, ISR, replicas, offline replicas, topic ids) and
LeaderAndIsr (the partitions it hosts), plus topic and broker configs from
ZooKeeper's ``/config`` (change notifications). The handler worker that gets
one of those requests, or the controller child for configs, writes what
changed with ``apply(change)``.

Storage and publication are the embedded store's (``EmbeddedMetadataStore``):
one JSON file in the first log dir replaced atomically under the shared
table's lock, and ``metadata_generation`` bumped, so every process re-reads
it when that counter moved and the hot path stays one shared-memory compare.
The file is ``kafkapy-metadata-image.json`` and keeps the live facts too
(brokers, controller id and epoch), because they come from the controller,
not from this process tree. Every partition state is explicit
(``Metadata.cluster_mode``): one not sent yet has no leader.

``update(change)`` is the admin path (CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs, producer-id blocks): in cluster mode that
writes ZooKeeper, which the controller acts on (``zk_store.ZkMetadataStore``
overrides it); the image itself changes only when the controller says so.

Ownership: like every store, one object per process; the file and the
generation counter are shared.
"""

from __future__ import annotations

import os

from kafkapy.metadata.embedded import EmbeddedMetadataStore
from kafkapy.metadata.model import Metadata

IMAGE_FILE = "kafkapy-metadata-image.json"


class MetadataImage(EmbeddedMetadataStore):
    LIVE = True

    def __init__(self, log_dir: str, table, local_broker=None):
        super().__init__(log_dir, table, local_broker)
        self.path = os.path.join(log_dir, IMAGE_FILE)

    def _localize(self, md: Metadata) -> Metadata:
        md.cluster_mode = True
        return md

    def apply(self, change) -> Metadata:
        """Change the image (what the controller or ``/config`` said), atomically
        across processes, and publish it; returns the new image."""
        return EmbeddedMetadataStore.update(self, change)

    def update(self, change) -> Metadata:
        raise NotImplementedError("cluster-mode admin writes go to ZooKeeper (ZkMetadataStore)")

    def set_consumer_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        raise NotImplementedError("cluster mode keeps v0 offsets in ZooKeeper (ZkMetadataStore)")

    def consumer_offset(self, group: str, topic: str, partition: int) -> int | None:
        raise NotImplementedError("cluster mode keeps v0 offsets in ZooKeeper (ZkMetadataStore)")
