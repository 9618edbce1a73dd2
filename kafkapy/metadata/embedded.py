"""The embedded metadata store: topic metadata for a standalone broker.

What it holds (Kafka keeps the same facts in ZooKeeper or the KRaft
``__cluster_metadata`` log): topics with their ids, partition counts and
config overrides, dynamic broker configs (per broker id, and the cluster-wide
default under ``<default>``, as Kafka's ``/config/brokers/<entity>``), and the
end of the reserved producer-id block.

OffsetCommit v0's offsets (Kafka 3.9 keeps them in ZooKeeper's
``/consumers/<group>/offsets/<topic>/<partition>``, apart from
``__consumer_offsets``) live in a second file beside it,
``kafkapy-consumer-offsets.json`` (``{"version": 1, "offsets": {group:
{topic: {partition: offset}}}}``), written the same way under the same
lock; they are not metadata, so writing them moves no generation and no
process re-reads anything.

Stored as one JSON file in the first log dir, replaced atomically (write a
temporary file, fsync, rename, fsync the directory) so a crash leaves either
the old or the new version. Every change happens under the shared table's
table lock and bumps the table counter ``metadata_generation``; each process
keeps a parsed copy and re-reads the file only when that counter moved, so
the common path (a request on a known topic) costs one shared-memory read.

The live part of the model is this process tree's own: ``brokers`` is the
local broker alone, and it is the controller (``controller_id``), so every
partition is led by it at epoch 0 (``Metadata.partition_state``). Which
shared-table slot holds a partition is not metadata: see the slot map of
``SharedPartitionTable``. Files of earlier versions list each topic's slots;
they load, and the slots are ignored.
"""

from __future__ import annotations

import json
import os

from kafkapy.metadata.model import (  # noqa: F401  (TopicInfo, Metadata: re-exported)
    INITIAL_CONTROLLER_EPOCH,
    BrokerInfo,
    Metadata,
    TopicInfo,
)
from kafkapy.metadata.store import METADATA_GENERATION, PRODUCER_ID_BLOCK, MetadataStore
from kafkapy.metadata.zk.data import consumer_offset_path

METADATA_FILE = "kafkapy-metadata.json"
CONSUMER_OFFSETS_FILE = "kafkapy-consumer-offsets.json"
GENERATION = METADATA_GENERATION  # the name callers of this module used


class EmbeddedMetadataStore(MetadataStore):
    """Owned per process; the file and the generation counter are shared.

    ``local_broker`` is this broker's registration (``brokers`` and the
    controller of the metadata); without it, broker 0 on no address.
    """

    def __init__(self, log_dir: str, table, local_broker: BrokerInfo | None = None):
        self.path = os.path.join(log_dir, METADATA_FILE)
        self.table = table
        self.local_broker = local_broker if local_broker is not None else BrokerInfo(0, "", 0)
        self._cached: Metadata | None = None
        self._cached_generation = -1

    LIVE = False  # whether the file keeps brokers and controller (the cluster image does)

    @property
    def generation(self) -> int:
        return self._cached_generation

    def current(self) -> Metadata:
        generation = self.table.counter(METADATA_GENERATION)
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
            self._cached_generation = self.table.increment(METADATA_GENERATION)
        return md

    def _load(self) -> Metadata:
        return self._localize(self._read())

    def _read(self) -> Metadata:
        try:
            with open(self.path, encoding="utf-8") as f:
                return Metadata.from_json(json.load(f))
        except FileNotFoundError:
            return Metadata()

    def _localize(self, md: Metadata) -> Metadata:
        """Standalone: the local broker is the only one and the controller."""
        broker = self.local_broker
        md.brokers = {broker.broker_id: broker}
        md.controller_id = broker.broker_id
        md.controller_epoch = INITIAL_CONTROLLER_EPOCH
        return md

    def _write(self, md: Metadata) -> None:
        try:
            self._write_file(md)
        except OSError as exc:
            # The store lives in the first log dir: an I/O error there takes
            # that dir offline (bit 0 of storage.log_dirs' word), which stops
            # the broker, as a failed metadata log dir halts Kafka's.
            from kafkapy.storage.log_dirs import LogDirFailureChannel

            log_dir = os.path.dirname(os.path.abspath(self.path))
            LogDirFailureChannel([log_dir], self.table, METADATA_GENERATION).mark_offline(
                log_dir, f"Error while writing the metadata store {self.path}: {exc}")
            raise

    def _write_file(self, md: Metadata) -> None:
        replace_json(self.path, md.to_json(live=self.LIVE))

    # -- OffsetCommit / OffsetFetch v0 (MetadataStore.set_consumer_offset) --------------------
    def set_consumer_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        consumer_offset_path(group, topic, partition)  # a group ZooKeeper refuses is refused alike
        path = os.path.join(os.path.dirname(self.path), CONSUMER_OFFSETS_FILE)
        with self.table.lock_all():
            offsets = _read_consumer_offsets(path)
            offsets.setdefault(group, {}).setdefault(topic, {})[str(partition)] = int(offset)
            replace_json(path, {"version": 1, "offsets": offsets})

    def consumer_offset(self, group: str, topic: str, partition: int) -> int | None:
        # Read without the lock: the file is only ever replaced whole.
        path = os.path.join(os.path.dirname(self.path), CONSUMER_OFFSETS_FILE)
        return _read_consumer_offsets(path).get(group, {}).get(topic, {}).get(str(partition))


def _read_consumer_offsets(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)["offsets"]
    except FileNotFoundError:
        return {}


def replace_json(path: str, obj) -> None:
    """Write ``obj`` as ``path`` atomically: a temporary file, fsync, rename, fsync
    the directory, so a crash leaves the old or the new version."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
