"""The broker as each process sees it: metadata, open logs, topic changes.

``Broker`` is owned by one process (a handler worker, or the supervisor) and
never shared. What must agree between processes lives in the metadata store
(topics), the shared partition table (each partition's scalar state and its
lock) and the files on disk; a ``Broker`` only caches views of them:

* ``metadata()`` re-reads the store when its generation counter moved and
  hands the new metadata to the replica manager, which lets go of partitions
  that disappeared or whose topic id changed;
* ``replica_manager`` (kafkapy.replication) opens each partition on first
  use, on the slot the shared table's slot map gives it, and is how handlers
  append to and read partitions.

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
from kafkapy.coordination.metadata import BrokerInfo, EndPoint
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
from kafkapy.replication.replica_manager import ReplicaManager

log = logging.getLogger("kafkapy.broker")

NEXT_PRODUCER_ID = "next_producer_id"



class Broker:
    def __init__(self, config, table, log_manager, wake_pipes=(), cluster_id=None):
        self.static_config = config
        self._config = config  # static layered with the dynamic configs; see metadata()
        self._dynamic = ({}, {})  # (cluster default, this broker) the _config was built from
        self.table = table
        self.log_manager = log_manager
        self.broker_id = config.broker_id if config.broker_id >= 0 else 0
        self.cluster_id = cluster_id
        endpoint = config.advertised_listeners[0]
        self.advertised_address = (endpoint.host or "127.0.0.1", endpoint.port)
        endpoints = tuple(EndPoint(ep.host or "127.0.0.1", ep.port, ep.listener_name, ep.security_protocol)
                          for ep in config.advertised_listeners)
        self.store = EmbeddedMetadataStore(
            config.log_dirs[0], table,
            BrokerInfo(self.broker_id, *self.advertised_address, config["broker.rack"], endpoints))
        self._log_configs: dict[tuple, object] = {}  # topic overrides -> LogConfig
        self._log_configs_for = None  # the _config they were built from
        self._seen_generation = -1
        self.replica_manager = ReplicaManager(self.broker_id, log_manager, table, self.metadata,
                                              self.log_config, wake_pipes)

    # -- metadata -------------------------------------------------------------
    @property
    def config(self):
        """The effective broker config (static + dynamic), current as of the latest metadata."""
        self.metadata()
        return self._config

    def metadata(self):
        md = self.store.current()
        if self.store.generation != self._seen_generation:
            self._seen_generation = self.store.generation
            self._apply_dynamic_configs(md)
            self.replica_manager.update_metadata(md, self._seen_generation)
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
        info = TopicInfo(name, uuid.uuid4(), num_partitions, overrides)
        if validate_only:
            return info
        created = []

        def change(md):
            if name in md.topics:
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            self._create_logs(info, range(num_partitions), created)
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

    def _create_logs(self, info: TopicInfo, partitions, created: list) -> None:
        """Create ``partitions`` of ``info``'s topic, each on a slot claimed
        in the shared table's slot map (``(partition, slot)`` to ``created``
        as it is claimed, for ``_roll_back``), with one syncfs for all of them instead
        of two fsyncs per partition. Each starts its leader epoch and is let go
        once created: this process opens a partition again only if it serves
        it."""
        def fresh_slots():
            for p in partitions:
                slot = self.table.claim(info.topic_id, p)
                created.append((p, slot))
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
            self.table.free(slot)  # and its slot map entry

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
        for p in range(info.num_partitions):
            slot = self.table.slot_for(info.topic_id, p)
            if slot is None:  # never claimed: its creation failed half-way
                self.log_manager.delete_log(name, p)
                continue
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
            self._create_logs(live, range(live.num_partitions, count), created)
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


    def close(self) -> None:
        """Let go of this process's handles (workers); files are left as they are."""
        self.replica_manager.close()


def pid_path(log_dir: str) -> str:
    return os.path.join(log_dir, ".lock")
