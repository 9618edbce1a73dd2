"""The embedded metadata store: topic metadata for a standalone broker.

What it holds (Kafka keeps the same facts in ZooKeeper or the KRaft
``__cluster_metadata`` log): topics with their ids, partition counts and
config overrides, dynamic broker configs (per broker id, and the cluster-wide
default under ``<default>``, as Kafka's ``/config/brokers/<entity>``), and the
end of the reserved producer-id block.

Stored as one JSON file in the first log dir, replaced atomically (write a
temporary file, fsync, rename, fsync the directory) so a crash leaves either
the old or the new version. Every change happens under the shared table's
table lock and bumps the table counter ``metadata_generation``; each process
keeps a parsed copy and re-reads the file only when that counter moved, so
the common path (a request on a known topic) costs one shared-memory read.

Runtime facts that are not metadata — which shared-table slot holds which
partition — live in the same file under ``slots`` because every process
needs them; the supervisor rewrites them at start-up.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field

METADATA_FILE = "kafkapy-metadata.json"
GENERATION = "metadata_generation"
# Producer ids are reserved in blocks so that allocating one rarely writes
# the file; a restart skips the rest of the block (ids are never reused).
PRODUCER_ID_BLOCK = 1000


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict = field(default_factory=dict)
    slots: list = field(default_factory=list)  # shared-table slot of each partition


@dataclass
class Metadata:
    topics: dict = field(default_factory=dict)  # name -> TopicInfo
    producer_id_block_end: int = 0
    # entity ("<default>" or a broker id as a string) -> {broker key: raw value}
    broker_configs: dict = field(default_factory=dict)

    def broker_dynamic(self, entity: str) -> dict:
        return self.broker_configs.get(entity, {})

    def by_id(self, topic_id) -> TopicInfo | None:
        for info in self.topics.values():
            if info.topic_id == topic_id:
                return info
        return None

    def to_json(self) -> dict:
        return {
            "version": 1,
            "producer_id_block_end": self.producer_id_block_end,
            "broker_configs": {entity: dict(c) for entity, c in self.broker_configs.items() if c},
            "topics": {
                name: {"topic_id": str(t.topic_id), "num_partitions": t.num_partitions,
                       "configs": t.configs, "slots": t.slots}
                for name, t in self.topics.items()
            },
        }

    @classmethod
    def from_json(cls, data: dict) -> "Metadata":
        md = cls(producer_id_block_end=data.get("producer_id_block_end", 0),
                 broker_configs={entity: dict(c) for entity, c in data.get("broker_configs", {}).items()})
        for name, t in data.get("topics", {}).items():
            md.topics[name] = TopicInfo(name, uuid.UUID(t["topic_id"]), t["num_partitions"],
                                        dict(t.get("configs", {})), list(t.get("slots", [])))
        return md


class EmbeddedMetadataStore:
    """Owned per process; the file and the generation counter are shared."""

    def __init__(self, log_dir: str, table):
        self.path = os.path.join(log_dir, METADATA_FILE)
        self.table = table
        self._cached: Metadata | None = None
        self._cached_generation = -1

    def current(self) -> Metadata:
        generation = self.table.counter(GENERATION)
        if self._cached is None or generation != self._cached_generation:
            self._cached = self._load()
            self._cached_generation = generation
        return self._cached

    def update(self, change) -> Metadata:
        """Apply ``change(metadata)`` atomically across processes; returns the new metadata."""
        with self.table.lock_all():
            md = self._load()
            change(md)
            self._write(md)
            self._cached = md
            self._cached_generation = self.table.increment(GENERATION)
        return md

    def replace(self, md: Metadata) -> None:
        """Write ``md`` as the whole metadata (the supervisor, at start-up)."""
        self.update(lambda current: current.__dict__.update(topics=md.topics,
                                                            producer_id_block_end=md.producer_id_block_end,
                                                            broker_configs=md.broker_configs))

    def _load(self) -> Metadata:
        try:
            with open(self.path, encoding="utf-8") as f:
                return Metadata.from_json(json.load(f))
        except FileNotFoundError:
            return Metadata()

    def _write(self, md: Metadata) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(md.to_json(), f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(os.path.dirname(self.path), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
