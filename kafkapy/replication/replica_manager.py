"""The replica manager: the partitions this process serves (Kafka's ``ReplicaManager``).

One per process (each handler worker, the supervisor, the coordinator
process), never shared. It owns ``{(topic, partition): Partition}``, opened
lazily on first use on the slot the shared table's slot map gives it, and is
the one way in for every handler that appends to or reads a partition:
Produce, Fetch, ListOffsets, DeleteRecords, DescribeProducers,
DescribeLogDirs and the group coordinator's ``__consumer_offsets`` writes.
Leader and epoch checks of cluster mode belong here and in ``Partition``.

Metadata reaches it from the server's metadata cache: ``update_metadata`` is
called whenever the metadata generation moved, and lets go of partitions
whose topic disappeared, was recreated with another id, or shrank, and gives
the others their topic's current ``LogConfig``. The hot path,
``get_partition`` of an open partition, is a dict hit and one compare of the
shared generation counter with the one last applied.

After an append moves high watermarks, ``wake_delayed_operations`` pokes the
processors' wake pipes, only those with something parked (a wake costs ~25 us
here), so delayed fetches parked there are checked.
"""

from __future__ import annotations

import logging

from kafkapy.coordination.store import METADATA_GENERATION
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import Partition
from kafkapy.storage.config import InvalidConfigError

log = logging.getLogger("kafkapy.replica")


class ReplicaManager:
    def __init__(self, local_broker_id: int, log_manager, table, metadata, log_config,
                 wake_pipes=()):
        """``metadata()`` returns the current metadata (calling back
        ``update_metadata`` when its generation moved); ``log_config(topic
        info)`` the topic's effective LogConfig; both are the metadata cache's."""
        self.local_broker_id = local_broker_id
        self.log_manager = log_manager
        self.table = table
        self._metadata = metadata
        self._log_config = log_config
        self.wake_pipes = list(wake_pipes)
        self.all_partitions: dict[tuple[str, int], Partition] = {}
        self._generation = -1  # the metadata generation last applied

    # -- metadata ------------------------------------------------------------------
    def update_metadata(self, md, generation: int) -> None:
        """Apply metadata of ``generation``: let go of partitions that are
        gone, refresh the LogConfig of the others."""
        self._generation = generation
        for key, partition in list(self.all_partitions.items()):
            info = md.topics.get(key[0])
            if info is None or info.topic_id != partition.topic_id or key[1] >= info.num_partitions:
                del self.all_partitions[key]
                partition.release()
            else:
                self.refresh_log_config(partition.log, info)

    def refresh_log_config(self, lg, info) -> None:
        try:
            config = self._log_config(info)
        except InvalidConfigError as exc:
            # Validated before it was stored, so only a hand-edited metadata
            # file gets here; keep serving with the previous config.
            log.error("topic %s: ignoring invalid stored configs: %s", info.name, exc.message)
            return
        # Identity first: partitions share their topic's LogConfig, and
        # comparing two field by field costs ~2 us.
        if lg.config is not config and lg.config != config:
            lg.config = config

    # -- partitions ----------------------------------------------------------------
    def get_partition(self, topic: str, partition_id: int) -> Partition | None:
        """The partition if this broker hosts it, else None."""
        partition = self.all_partitions.get((topic, partition_id))
        if partition is not None and self._generation == self.table.counter(METADATA_GENERATION):
            return partition
        md = self._metadata()
        partition = self.all_partitions.get((topic, partition_id))
        if partition is not None:
            return partition
        info = md.topics.get(topic)
        if info is None or not 0 <= partition_id < info.num_partitions:
            return None
        slot = self.table.slot_for(info.topic_id, partition_id)
        if slot is None:  # the topic is being deleted: its slots go after its metadata
            return None
        config = self._log_config(info)
        lg = self.log_manager.attach_log(topic, partition_id, config, self.table.slot(slot),
                                         info.topic_id.bytes)
        if lg.config is not config:
            # attach_log handed back a Log opened earlier (the supervisor's,
            # loaded with the static config before dynamic configs were read).
            self.refresh_log_config(lg, info)
        partition = Partition(topic, partition_id, info.topic_id, lg, slot, self.local_broker_id)
        self.all_partitions[(topic, partition_id)] = partition
        return partition

    def append_records(self, topic: str, partition_id: int, records, acks: int = 1):
        """Append one partition's records as its leader: ``(error_code,
        AppendResult or None, message or None)``."""
        partition = self.get_partition(topic, partition_id)
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None
        return partition.append_records_to_leader(records, acks)

    def wake_delayed_operations(self) -> None:
        """High watermarks moved: wake the processors holding delayed
        operations (only those with any parked)."""
        for pipe in self.wake_pipes:
            pipe.wake_if_parked()

    def sync_partitions(self) -> None:
        """Open every partition of the metadata and let the log manager drop
        logs no partition holds (the supervisor, which flushes, checkpoints
        and applies retention to all of them)."""
        md = self._metadata()
        for name, info in md.topics.items():
            for p in range(info.num_partitions):
                self.get_partition(name, p)
        logs = self.log_manager.logs
        for key in list(logs):
            if key not in self.all_partitions:
                logs.pop(key).release()

    def close(self) -> None:
        """Let go of this process's handles (workers); files are left as they are."""
        for partition in self.all_partitions.values():
            partition.release()
        self.all_partitions.clear()
