"""The broker as each process sees it: metadata, open logs, topic changes.

``Broker`` is owned by one process (a handler worker, or the supervisor) and
never shared. What must agree between processes lives in the metadata store
(topics), the shared partition table (each partition's scalar state and its
lock) and the files on disk; a ``Broker`` only caches views of them:

* ``metadata()`` re-reads the store when its generation counter moved and
  closes the logs of partitions that disappeared or whose topic id changed;
* ``partition(topic, p)`` opens the ``Log`` of a partition on first use, on
  the slot the metadata assigns it.
"""

from __future__ import annotations

import logging
import os
import uuid

from kafkapy.coordination.embedded import PRODUCER_ID_BLOCK, EmbeddedMetadataStore, TopicInfo
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.config import (
    TOPIC_CONFIGS,
    InvalidConfigError,
    format_value,
    log_config_for,
    topic_config_values,
    validate_topic_configs,
)
from kafkapy.server.topics import TopicError, check_topic_name
from kafkapy.storage.errors import RecordError
from kafkapy.storage.producer_state import ProducerStateError

log = logging.getLogger("kafkapy.broker")

NEXT_PRODUCER_ID = "next_producer_id"
DELAYED_FETCHES = "delayed_fetches"

# DescribeConfigs config sources (Kafka's ConfigSource ids).
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


class Broker:
    def __init__(self, config, table, log_manager, wake_pipes=(), cluster_id=None):
        self.config = config
        self.table = table
        self.log_manager = log_manager
        self.store = EmbeddedMetadataStore(config.log_dirs[0], table)
        self.wake_pipes = list(wake_pipes)
        self.broker_id = config.broker_id if config.broker_id >= 0 else 0
        self.cluster_id = cluster_id
        endpoint = config.advertised_listeners[0]
        self.advertised_address = (endpoint.host or "127.0.0.1", endpoint.port)
        self._logs: dict[tuple[str, int], tuple] = {}  # (topic, p) -> (Log, slot, topic_id)
        self._seen_generation = -1

    # -- metadata -------------------------------------------------------------
    def metadata(self):
        md = self.store.current()
        if self.store._cached_generation != self._seen_generation:
            self._seen_generation = self.store._cached_generation
            for key, (lg, slot, topic_id) in list(self._logs.items()):
                info = md.topics.get(key[0])
                if info is None or info.topic_id != topic_id or key[1] >= info.num_partitions:
                    del self._logs[key]
                    lg.release()
        return md

    def partition(self, topic: str, partition: int):
        """``(Log, slot)`` of a partition this broker leads, or None."""
        entry = self._logs.get((topic, partition))
        if entry is not None and self.store._cached_generation == self.table.counter("metadata_generation"):
            return entry[0], entry[1]
        md = self.metadata()
        entry = self._logs.get((topic, partition))
        if entry is not None:
            return entry[0], entry[1]
        info = md.topics.get(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            return None
        slot = info.slots[partition]
        lg = self.log_manager.attach_log(topic, partition, self.log_config(info),
                                         self.table.slot(slot), info.topic_id.bytes)
        self._logs[(topic, partition)] = (lg, slot, info.topic_id)
        return lg, slot

    def log_config(self, info: TopicInfo):
        return log_config_for(self.config, info.configs)

    # -- produce --------------------------------------------------------------
    def append(self, topic: str, partition: int, records):
        """Append one partition's records; returns ``(error_code, AppendResult, message)``."""
        part = self.partition(topic, partition)
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None
        lg, _slot = part
        if records is None or len(records) == 0:
            return ErrorCode.CORRUPT_MESSAGE, None, "Produce request has no records"
        try:
            with lg.lock():
                result = lg.append_as_leader(records, 0)
                # One replica: everything appended is replicated to the whole ISR.
                lg.update_high_watermark(lg.log_end_offset)
        except RecordError as exc:
            return exc.error_code, None, str(exc)
        except ProducerStateError as exc:
            return exc.error_code, None, str(exc)
        return ErrorCode.NONE, result, None

    def notify_appended(self) -> None:
        """Wake processors holding long-poll fetches (only if any are parked)."""
        if self.table.counter(DELAYED_FETCHES) > 0:
            for pipe in self.wake_pipes:
                pipe.wake()

    # -- topics ---------------------------------------------------------------
    def create_topic(self, name, num_partitions=None, configs=None, validate_only=False,
                     replication_factor=-1) -> TopicInfo:
        check_topic_name(name)
        if num_partitions is None:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if replication_factor <= 0:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0.")
        if replication_factor > 1:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Replication factor: {replication_factor} larger than available "
                             f"brokers: 1.")
        try:
            overrides = validate_topic_configs(configs or {})
        except InvalidConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if self.metadata().topics.get(name) is not None:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        info = TopicInfo(name, uuid.uuid4(), num_partitions, overrides, [])
        if validate_only:
            return info
        created = []

        def change(md):
            if name in md.topics:
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            config = self.log_config(info)
            for p in range(num_partitions):
                slot = self.table.allocate()
                info.slots.append(slot)
                self.log_manager.create_log(name, p, config, self.table.slot(slot),
                                            info.topic_id.bytes)
                created.append(p)
            md.topics[name] = info

        try:
            self.store.update(change)
        except TopicError:
            raise
        except Exception:
            log.exception("creating topic %s failed; rolling back %d partitions", name, len(created))
            for p, slot in zip(created, info.slots):
                self.log_manager.delete_log(name, p)
                self.table.free(slot)
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Creating topic {name} failed") from None
        log.info("created topic %s with %d partitions (id %s)", name, num_partitions, info.topic_id)
        return info

    def delete_topic(self, name: str) -> None:
        removed = []

        def change(md):
            info = md.topics.pop(name, None)
            if info is not None:
                removed.append(info)

        self.store.update(change)
        if not removed:
            return
        info = removed[0]
        self.metadata()  # drops our own open logs of the topic
        for p, slot in enumerate(info.slots):
            state = self.table.slot(slot)
            with state.lock():
                self.log_manager.delete_log(name, p)
                state.generation = state.generation + 1
            self.table.free(slot)
        log.info("deleted topic %s", name)

    def topic_config_entries(self, overrides: dict):
        values = topic_config_values(self.config, overrides)
        for key in sorted(values):
            source = SOURCE_DYNAMIC_TOPIC if key in overrides else SOURCE_DEFAULT
            yield key, format_value(TOPIC_CONFIGS[key].type, values[key]), source

    # -- producer ids ------------------------------------------------------------
    def allocate_producer_id(self) -> int:
        with self.table.lock_all():
            producer_id = self.table.counter(NEXT_PRODUCER_ID)
            if producer_id >= self.store.current().producer_id_block_end:
                def grow(md):
                    md.producer_id_block_end = max(md.producer_id_block_end, producer_id) \
                        + PRODUCER_ID_BLOCK
                self.store.update(grow)
            self.table.set_counter(NEXT_PRODUCER_ID, producer_id + 1)
        return producer_id

    def sync_logs(self) -> None:
        """Open every partition of the metadata (the supervisor, which flushes,
        checkpoints and applies retention to all of them)."""
        md = self.metadata()
        for name, info in md.topics.items():
            for p in range(info.num_partitions):
                self.partition(name, p)
        for key in list(self.log_manager.logs):
            if key not in self._logs:
                self.log_manager.logs.pop(key).release()

    def close(self) -> None:
        """Let go of this process's handles (workers); files are left as they are."""
        for lg, _slot, _tid in self._logs.values():
            lg.release()
        self._logs.clear()


def pid_path(log_dir: str) -> str:
    return os.path.join(log_dir, ".lock")
