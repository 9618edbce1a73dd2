"""The broker as each process sees it: metadata, open logs, topic changes.

``Broker`` is owned by one process (a handler worker, or the supervisor) and
never shared. What must agree between processes lives in the metadata store
(topics), the shared partition table (each partition's scalar state and its
lock) and the files on disk; a ``Broker`` only caches views of them:

* ``metadata()`` re-reads the store when its generation counter moved and
  closes the logs of partitions that disappeared or whose topic id changed;
* ``partition(topic, p)`` opens the ``Log`` of a partition on first use, on
  the slot the metadata assigns it.

Dynamic configs: ``config`` is the static ``BrokerConfig`` layered with the
dynamic broker configs of the metadata store (``effective_broker_config``),
rebuilt when the generation moves; at the same moment every open log whose
effective ``LogConfig`` changed (topic override or broker default) gets the
new one, so an AlterConfigs handled by one worker takes effect in every
worker and in the supervisor (which runs retention) within one tick.
"""

from __future__ import annotations

import logging
import os
import uuid

from kafkapy.coordination.embedded import GENERATION as METADATA_GENERATION
from kafkapy.coordination.embedded import PRODUCER_ID_BLOCK, EmbeddedMetadataStore, TopicInfo
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.config import (
    DEFAULT_BROKER_ENTITY,
    InvalidConfigError,
    broker_config_entries,
    cluster_default_entries,
    effective_broker_config,
    log_config_for,
    topic_config_entries,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from kafkapy.protocol.topics import TopicError, check_topic_name
from kafkapy.storage.errors import RecordError
from kafkapy.storage.producer_state import ProducerStateError

log = logging.getLogger("kafkapy.broker")

NEXT_PRODUCER_ID = "next_producer_id"



class Broker:
    def __init__(self, config, table, log_manager, wake_pipes=(), cluster_id=None):
        self.static_config = config
        self._config = config  # static layered with the dynamic configs; see metadata()
        self._dynamic = ({}, {})  # (cluster default, this broker) the _config was built from
        self.table = table
        self.log_manager = log_manager
        self.store = EmbeddedMetadataStore(config.log_dirs[0], table)
        self.wake_pipes = list(wake_pipes)
        self.broker_id = config.broker_id if config.broker_id >= 0 else 0
        self.cluster_id = cluster_id
        endpoint = config.advertised_listeners[0]
        self.advertised_address = (endpoint.host or "127.0.0.1", endpoint.port)
        self._logs: dict[tuple[str, int], tuple] = {}  # (topic, p) -> (Log, slot, topic_id)
        self._log_configs: dict[tuple, object] = {}  # topic overrides -> LogConfig
        self._log_configs_for = None  # the _config they were built from
        self._seen_generation = -1

    # -- metadata -------------------------------------------------------------
    @property
    def config(self):
        """The effective broker config (static + dynamic), current as of the latest metadata."""
        self.metadata()
        return self._config

    def metadata(self):
        md = self.store.current()
        if self.store._cached_generation != self._seen_generation:
            self._seen_generation = self.store._cached_generation
            self._apply_dynamic_configs(md)
            for key, (lg, slot, topic_id) in list(self._logs.items()):
                info = md.topics.get(key[0])
                if info is None or info.topic_id != topic_id or key[1] >= info.num_partitions:
                    del self._logs[key]
                    lg.release()
                else:
                    self._refresh_log_config(lg, info)
        return md

    def _apply_dynamic_configs(self, md) -> None:
        dynamic = (md.broker_dynamic(DEFAULT_BROKER_ENTITY), md.broker_dynamic(str(self.broker_id)))
        if dynamic == self._dynamic:
            return
        try:
            self._config = effective_broker_config(self.static_config, *dynamic)
        except InvalidConfigError as exc:
            # Validated before it was stored, so only a hand-edited metadata
            # file gets here; keep serving with the previous config.
            log.error("ignoring dynamic broker configs: %s", exc.message)
            return
        self._dynamic = dynamic
        log.info("dynamic broker configs now %s (cluster default) and %s (broker %d)",
                 dynamic[0], dynamic[1], self.broker_id)

    def _refresh_log_config(self, lg, info) -> None:
        try:
            config = self.log_config(info)
        except InvalidConfigError as exc:
            log.error("topic %s: ignoring invalid stored configs: %s", info.name, exc.message)
            return
        # Identity first: partitions share their topic's LogConfig, and
        # comparing two field by field costs ~2 us.
        if lg.config is not config and lg.config != config:
            lg.config = config

    def partition(self, topic: str, partition: int):
        """``(Log, slot)`` of a partition this broker leads, or None."""
        entry = self._logs.get((topic, partition))
        if entry is not None and self.store._cached_generation == self.table.counter(METADATA_GENERATION):
            return entry[0], entry[1]
        md = self.metadata()
        entry = self._logs.get((topic, partition))
        if entry is not None:
            return entry[0], entry[1]
        info = md.topics.get(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            return None
        slot = info.slots[partition]
        config = self.log_config(info)
        lg = self.log_manager.attach_log(topic, partition, config, self.table.slot(slot), info.topic_id.bytes)
        if lg.config is not config:
            # attach_log handed back a Log opened earlier (the supervisor's,
            # loaded with the static config before dynamic configs were read).
            self._refresh_log_config(lg, info)
        self._logs[(topic, partition)] = (lg, slot, info.topic_id)
        return lg, slot

    def log_config(self, info: TopicInfo):
        """The topic's ``LogConfig``, one per (broker config, topic overrides).

        Building one costs ~45 us: paid per partition it was 40 % of a
        worker's first use of a partition (1,000s of partitions, 8 workers).
        LogConfig objects are never modified in place, so partitions share.
        """
        if self._log_configs_for is not self._config:
            self._log_configs = {}
            self._log_configs_for = self._config
        key = tuple(sorted(info.configs.items()))
        config = self._log_configs.get(key)
        if config is None:
            config = self._log_configs[key] = log_config_for(self._config, info.configs)
        return config

    # -- produce --------------------------------------------------------------
    def append(self, topic: str, partition: int, records, acks: int = 1):
        """Append one partition's records; returns ``(error_code, AppendResult, message)``."""
        part = self.partition(topic, partition)
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None
        lg = part[0]
        if records is None or len(records) == 0:
            return ErrorCode.CORRUPT_MESSAGE, None, "Produce request has no records"
        isr_size = 1  # one broker: the ISR is the leader alone
        if acks == -1 and isr_size < lg.config.min_insync_replicas:
            # Kafka's Partition.appendRecordsToLeader refuses before writing.
            return (ErrorCode.NOT_ENOUGH_REPLICAS, None,
                    f"The size of the current ISR Set({self.broker_id}) is insufficient to satisfy "
                    f"the min.isr requirement of {lg.config.min_insync_replicas} for partition "
                    f"{topic}-{partition}")
        try:
            with lg.state.lock():
                # One replica: everything appended is replicated to the whole
                # ISR, so the high watermark follows in the same slot write.
                result = lg.append_as_leader(records, 0, advance_high_watermark=True)
        except RecordError as exc:
            return exc.error_code, None, str(exc)
        except ProducerStateError as exc:
            return exc.error_code, None, str(exc)
        return ErrorCode.NONE, result, None

    def notify_appended(self) -> None:
        """Wake processors holding long-poll fetches (only if any are parked)."""
        for pipe in self.wake_pipes:
            pipe.wake_if_parked()

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
            self._create_logs(info, info.slots, range(num_partitions), created)
            md.topics[name] = info

        try:
            self.store.update(change)
        except TopicError:
            raise
        except Exception:
            log.exception("creating topic %s failed; rolling back %d partitions", name, len(created))
            self._roll_back(name, created)
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Creating topic {name} failed") from None
        log.info("created topic %s with %d partitions (id %s)", name, num_partitions, info.topic_id)
        return info

    def _create_logs(self, info: TopicInfo, slots: list, partitions, created: list) -> None:
        """Create ``partitions`` of ``info``'s topic, each with a fresh slot
        (appended to ``slots``; ``(partition, slot)`` to ``created`` as it is
        allocated, for ``_roll_back``), with one syncfs for all of them instead
        of two fsyncs per partition. Each starts its leader epoch and is let go
        once created: this process opens a partition again only if it serves
        it."""
        def fresh_slots():
            for p in partitions:
                slot = self.table.allocate()
                created.append((p, slot))
                slots.append(slot)
                yield p, self.table.slot(slot)

        def let_go(p, lg):
            lg.become_leader(0)  # the one broker leads every partition at epoch 0
            lg.release()
            self.log_manager.logs.pop((info.name, p), None)

        self.log_manager.create_logs(info.name, fresh_slots(), self.log_config(info),
                                     info.topic_id.bytes, let_go)

    def _roll_back(self, name: str, created: list) -> None:
        for p, slot in created:
            self.log_manager.delete_log(name, p)
            self.table.free(slot)

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
        """``(name, value, source)`` of every topic key (CreateTopics v5+)."""
        for entry in self.describe_topic_configs(overrides):
            yield entry.name, entry.value, entry.source

    # -- configs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) ---------
    def _dynamic_layers(self, md):
        return md.broker_dynamic(DEFAULT_BROKER_ENTITY), md.broker_dynamic(str(self.broker_id))

    def describe_topic_configs(self, overrides: dict):
        md = self.metadata()
        return topic_config_entries(self._config, self.static_config, *self._dynamic_layers(md),
                                    overrides)

    def describe_broker_configs(self, entity: str):
        """Entries of broker resource ``entity`` ("" = the cluster default)."""
        md = self.metadata()
        entity = self._broker_entity(entity)
        if entity == DEFAULT_BROKER_ENTITY:
            return cluster_default_entries(md.broker_dynamic(entity))
        return broker_config_entries(self.static_config, *self._dynamic_layers(md))

    def _broker_entity(self, name: str) -> str:
        """Kafka's check in ConfigAdminManager: "" or this broker's own id."""
        if name == "":
            return DEFAULT_BROKER_ENTITY
        try:
            broker_id = int(name)
        except ValueError:
            broker_id = None
        if broker_id != self.broker_id:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {self.broker_id} or empty string, "
                             f"but received {name}")
        return str(broker_id)

    def alter_topic_configs(self, name: str, compute, validate_only=False) -> dict:
        """Replace topic ``name``'s overrides with ``compute(current overrides)``.

        ``compute`` runs under the metadata lock, so concurrent incremental
        changes from several workers never lose each other's keys. Raises
        TopicError (UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG). Returns the
        new overrides.
        """
        result = {}

        def change(md):
            info = md.topics.get(name)
            if info is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Topic {name} does not exist")
            try:
                overrides = validate_topic_configs(compute(dict(info.configs)))
                log_config_for(self._config, overrides)
            except InvalidConfigError as exc:
                raise TopicError(ErrorCode.INVALID_CONFIG, exc.message) from None
            info.configs = overrides
            result.update(overrides)

        if validate_only:
            change(self._copy_metadata())
        else:
            self.store.update(change)
            self.metadata()
            log.info("topic %s configs now %s", name, result)
        return result

    def alter_broker_configs(self, entity_name: str, compute, validate_only=False) -> dict:
        """Replace the dynamic configs of broker entity ("" = cluster default, or this
        broker's id) with ``compute(current)``. INVALID_REQUEST for keys that cannot change
        at run time or another broker's id, INVALID_CONFIG for bad values."""
        from kafkapy.server.config import NonDynamicConfigError

        entity = self._broker_entity(entity_name)
        result = {}

        def change(md):
            try:
                configs = validate_dynamic_broker_configs(compute(dict(md.broker_dynamic(entity))))
                layers = dict(md.broker_configs)
                layers[entity] = configs
                effective_broker_config(self.static_config, layers.get(DEFAULT_BROKER_ENTITY, {}),
                                        layers.get(str(self.broker_id), {}))
            except NonDynamicConfigError as exc:
                raise TopicError(ErrorCode.INVALID_REQUEST, exc.message) from None
            except InvalidConfigError as exc:
                raise TopicError(ErrorCode.INVALID_CONFIG, exc.message) from None
            if configs:
                md.broker_configs[entity] = configs
            else:
                md.broker_configs.pop(entity, None)
            result.update(configs)

        if validate_only:
            change(self._copy_metadata())
        else:
            self.store.update(change)
            self.metadata()
            log.info("dynamic broker configs of %s now %s", entity, result)
        return result

    def _copy_metadata(self):
        import copy

        return copy.deepcopy(self.metadata())

    # -- partitions ----------------------------------------------------------------
    def create_partitions(self, name: str, count: int, assignments=None, validate_only=False) -> None:
        """CreatePartitions: grow topic ``name`` to ``count`` partitions (Kafka's checks and
        messages); raises TopicError."""
        info = self.metadata().topics.get(name)
        if info is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "This server does not host this topic-partition.")
        current = info.num_partitions
        if count < current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the "
                             f"requested {count}.")
        if count == current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        if assignments is not None:
            added = count - current
            if len(assignments) != added:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {added} but "
                                 f"{len(assignments)} assignments provided.")
            unknown = sorted({b for a in assignments for b in a if b != self.broker_id})
            if unknown:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Unknown broker(s) in replica assignment: "
                                 f"{', '.join(map(str, unknown))}.")
            for i, a in enumerate(assignments):
                if len(a) != 1:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Inconsistent replication factor between partitions, partition 0 "
                                     f"has 1 while partitions [{current + i}] have replication "
                                     f"factors [{len(a)}], respectively.")
        if validate_only:
            return
        created = []

        def change(md):
            created.clear()
            live = md.topics.get(name)
            if live is None or live.topic_id != info.topic_id:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 "This server does not host this topic-partition.")
            if live.num_partitions >= count:
                raise TopicError(ErrorCode.INVALID_PARTITIONS,
                                 f"Topic currently has {live.num_partitions} partitions, which is "
                                 f"higher than the requested {count}.")
            self._create_logs(live, live.slots, range(live.num_partitions, count), created)
            live.num_partitions = count

        try:
            self.store.update(change)
        except TopicError:
            raise
        except Exception:
            log.exception("adding partitions to %s failed; rolling back %d", name, len(created))
            self._roll_back(name, created)
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Adding partitions to {name} failed") from None
        log.info("topic %s now has %d partitions", name, count)

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
