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
the others their topic's current ``LogConfig``.

Cluster mode (the metadata is the broker's image, ``Metadata.cluster_mode``):
a partition is hosted here when the image lists this broker among its
replicas and its slot is claimed (the LeaderAndIsr handler claims it and
creates the log: ``create_partition``); its role comes only from
LeaderAndIsr (no role is assumed), and StopReplica clears it or deletes the
partition (``stop_replica``). ``update_metadata`` also lets go of partitions
no longer hosted (this broker left the replicas, or the slot was freed by a
StopReplica in another process). The hot path,
``get_partition`` of an open partition, is a dict hit and one compare of the
shared generation counter with the one last applied.

After an append moves high watermarks, ``wake_delayed_operations`` pokes the
processors' wake pipes, only those with something parked (a wake costs ~25 us
here), so delayed fetches parked there are checked.
"""

from __future__ import annotations

import logging
import os

from kafkapy.metadata.store import METADATA_GENERATION
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import Partition
from kafkapy.storage.config import InvalidConfigError
from kafkapy.storage.errors import KafkaStorageError

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
        # Partitions whose log dir went offline (Kafka's HostedPartition.Offline):
        # KAFKA_STORAGE_ERROR until the broker restarts (storage.log_dirs).
        self.offline_partitions: set[tuple[str, int]] = set()
        self._generation = -1  # the metadata generation last applied

    # -- metadata ------------------------------------------------------------------
    def update_metadata(self, md, generation: int) -> None:
        """Apply metadata of ``generation``: let go of partitions that are
        gone (cluster mode: or no longer hosted here), refresh the LogConfig
        of the others."""
        self._generation = generation
        if self.log_manager.failure_channel.offline_mask():
            self._drop_offline_partitions()
        for key, partition in list(self.all_partitions.items()):
            info = md.topics.get(key[0])
            if (info is None or info.topic_id != partition.topic_id or key[1] >= info.num_partitions
                    or (md.cluster_mode and not self._hosted(md, info, key[1], partition.slot))):
                del self.all_partitions[key]
                partition.release()
            else:
                self.refresh_log_config(partition.log, info)

    def _drop_offline_partitions(self) -> None:
        """Kafka's handleLogDirFailure, in this process: let go of the
        partitions in offline dirs (their handles closed; the files stay as
        they are for the next start's recovery)."""
        offline = set(self.log_manager.failure_channel.offline_dirs())
        for key, partition in list(self.all_partitions.items()):
            if os.path.dirname(os.path.abspath(partition.log.dir)) in offline:
                del self.all_partitions[key]
                self.offline_partitions.add(key)
                try:
                    partition.release()
                except OSError:
                    pass  # a failed dir may fail closing too
                log.warning("%s-%d is offline: its log dir failed", key[0], key[1])

    def is_offline(self, topic: str, partition_id: int) -> bool:
        """The partition's log is in an offline dir (its requests answer KAFKA_STORAGE_ERROR)."""
        key = (topic, partition_id)
        if key in self.offline_partitions:
            return True
        if key in self.all_partitions or not self.log_manager.failure_channel.offline_mask():
            return False
        if self.log_manager.is_log_offline(topic, partition_id):
            self.offline_partitions.add(key)
            return True
        return False

    def _hosted(self, md, info, partition_id: int, slot: int | None = None) -> bool:
        """Cluster mode: the image lists this broker as a replica and the
        slot map holds the partition (at ``slot``, when given)."""
        state = info.partitions.get(partition_id)
        if state is None or self.local_broker_id not in state.replicas:
            return False
        found = self.table.slot_for(info.topic_id, partition_id)
        return found is not None and (slot is None or found == slot)

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
        """The partition if this broker hosts it, else None (cluster mode:
        the image lists this broker as a replica and its slot is claimed)."""
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
        if md.cluster_mode:
            state = info.partitions.get(partition_id)
            if state is None or self.local_broker_id not in state.replicas:
                return None
        slot = self.table.slot_for(info.topic_id, partition_id)
        if slot is None:  # the topic is being deleted: its slots go after its metadata
            return None  # (cluster mode: or its LeaderAndIsr has not come yet)
        if (topic, partition_id) in self.offline_partitions:
            return None
        try:
            return self._open(topic, partition_id, info, slot, md.cluster_mode)
        except KafkaStorageError:
            self.offline_partitions.add((topic, partition_id))
            return None

    def _open(self, topic: str, partition_id: int, info, slot: int, cluster_mode: bool) -> Partition:
        config = self._log_config(info)
        lg = self.log_manager.attach_log(topic, partition_id, config, self.table.slot(slot),
                                         info.topic_id.bytes)
        if lg.config is not config:
            # attach_log handed back a Log opened earlier (the supervisor's,
            # loaded with the static config before dynamic configs were read).
            self.refresh_log_config(lg, info)
        # Standalone the one broker leads a partition with no role yet;
        # cluster mode waits for LeaderAndIsr.
        partition = Partition(topic, partition_id, info.topic_id, lg, slot, self.local_broker_id,
                              assume_leader=not cluster_mode)
        self.all_partitions[(topic, partition_id)] = partition
        return partition

    def unhosted_error(self, topic: str, partition_id: int) -> int:
        """What a request for a partition ``get_partition`` did not find
        answers (Kafka's getPartitionOrError): NOT_LEADER_OR_FOLLOWER when the
        metadata knows it (another broker hosts it: the client refreshes its
        metadata), else UNKNOWN_TOPIC_OR_PARTITION."""
        if (topic, partition_id) in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        md = self._metadata()
        info = md.topics.get(topic)
        if md.cluster_mode and info is not None and 0 <= partition_id < info.num_partitions:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # -- cluster mode: what the controller says ---------------------------------------
    def create_partition(self, topic: str, partition_id: int) -> Partition:
        """LeaderAndIsr for a partition the image now lists this broker in:
        the hosted partition, its slot claimed and its log created first if it
        is new here (Kafka's createLogIfNotExists). InconsistentTopicId when a
        log of the same name on disk holds another topic id (the slot is
        given back)."""
        md = self._metadata()
        info = md.topics[topic]
        partition = self.get_partition(topic, partition_id)
        if partition is not None:
            return partition
        if self.is_offline(topic, partition_id):
            raise KafkaStorageError(f"{topic}-{partition_id} is in an offline log dir")
        with self.table.lock_all():
            slot = self.table.slot_for(info.topic_id, partition_id)
            created = slot is None
            if created:
                slot = self.table.claim(info.topic_id, partition_id)
        if created:
            try:
                # Log.open under the slot lock: another process attaching
                # meanwhile waits, then maps what this one loaded.
                lg = self.log_manager.create_log(topic, partition_id, self._log_config(info),
                                                 self.table.slot(slot), info.topic_id.bytes)
            except Exception:
                self.log_manager.logs.pop((topic, partition_id), None)
                self.table.free(slot)
                raise
            log.info("created log for partition %s-%d (slot %d)", topic, partition_id, slot)
            partition = Partition(topic, partition_id, info.topic_id, lg, slot, self.local_broker_id,
                                  assume_leader=False)
            self.all_partitions[(topic, partition_id)] = partition
            return partition
        return self._open(topic, partition_id, info, slot, True)

    def stop_replica(self, topic: str, partition_id: int, leader_epoch: int, delete: bool) -> int:
        """StopReplica for one partition (Kafka's ReplicaManager.stopReplicas):
        FENCED_LEADER_EPOCH when ``leader_epoch`` is older than the
        partition's (-1 NoEpoch and -2 EpochDuringDelete always pass); else
        the role is cleared and, with ``delete``, the log is deleted, the slot
        freed and every process told (the metadata generation moves, so each
        lets go of the partition: ``update_metadata``). A partition not
        hosted here is still deleted from disk (deleted while this broker was
        down). Returns the partition's error code."""
        partition = self.get_partition(topic, partition_id)
        if partition is not None:
            if leader_epoch >= 0 and leader_epoch < partition.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            partition.clear_role()
        if not delete:
            return ErrorCode.NONE
        if partition is not None:
            del self.all_partitions[(topic, partition_id)]
            partition.release()
        topic_id = self._topic_id_on_disk(topic, partition_id)
        if topic_id is None and partition is not None:
            topic_id = partition.topic_id
        slot = self.table.slot_for(topic_id, partition_id) if topic_id is not None else None
        if slot is None:
            self.log_manager.delete_log(topic, partition_id)
        else:
            state = self.table.slot(slot)
            with state.lock():
                self.log_manager.delete_log(topic, partition_id)
                state.generation = state.generation + 1  # other processes' Logs see it gone
            self.table.free(slot)
        self.table.increment(METADATA_GENERATION)
        log.info("deleted partition %s-%d (StopReplica)", topic, partition_id)
        return ErrorCode.NONE

    def _topic_id_on_disk(self, topic: str, partition_id: int):
        """The topic id in the partition dir's partition.metadata, or None."""
        import uuid

        from kafkapy.storage import checkpoints

        path = self.log_manager._find_dir(topic, partition_id)
        if path is None:
            return None
        try:
            raw = checkpoints.read_partition_metadata(path)
        except checkpoints.CheckpointError:
            return None
        return uuid.UUID(bytes=raw) if raw is not None else None

    def append_records(self, topic: str, partition_id: int, records, acks: int = 1, verification=None):
        """Append one partition's records as its leader: ``(error_code,
        AppendResult or None, message or None)``; ``verification``:
        ``Log.append_as_leader``'s."""
        partition = self.get_partition(topic, partition_id)
        if partition is None:
            return self.unhosted_error(topic, partition_id), None, None
        return partition.append_records_to_leader(records, acks, verification)

    def wake_delayed_operations(self, slots=None, high_watermark_only: bool = False) -> None:
        """The watched fields of ``slots`` moved (high watermarks, log end
        offsets; None: any slot's, e.g. leader epochs after a LeaderAndIsr):
        wake the processors holding delayed operations that watch them
        (``high_watermark_only``: only the high watermarks moved, as a
        follower's Fetch moves them: operations waiting on a log end offset
        stay asleep)."""
        for pipe in self.wake_pipes:
            pipe.wake_if_watched(slots, high_watermark_only)

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
