"""Topic and config administration (Kafka's ``ZkAdminManager`` and ``ConfigAdminManager``).

CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs
and IncrementalAlterConfigs change the metadata store through here, with
Kafka's checks and messages. Each change runs under the store's atomic
update.

Standalone (the embedded store) a topic's partitions are created (files, and
a slot claimed in the shared table's slot map for each) inside that update
and rolled back if it fails; deleting a topic deletes them.

In cluster mode (the store is a ``ZkMetadataStore``) the update writes
ZooKeeper and the controller does the rest, as with Kafka's ZkAdminManager:
new partitions get replicas here (Kafka's placement over the live brokers,
or a given assignment checked as Kafka does), and LeaderAndIsr from the
controller creates their logs on the brokers that host them; DeleteTopics
marks the topic for deletion and StopReplica deletes the logs. CreateTopics
and CreatePartitions answer once the znodes are written, without waiting
for the controller to announce the partitions (Kafka waits up to the
request's timeout for its metadata cache; clients retry UNKNOWN_TOPIC_OR_PARTITION
and LEADER_NOT_AVAILABLE until the controller's UpdateMetadata lands).

Owned by one process; handlers reach it as ``ctx.broker.admin``.
"""

from __future__ import annotations

import logging
import uuid

from kafkapy.metadata.assignment import (
    assign_replicas_to_brokers,
    broker_metadatas,
    new_partitions_assignment,
)
from kafkapy.metadata.model import TopicInfo
from kafkapy.metadata.zk.store import ZkMetadataStore, assigned
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError, check_topic_name
from kafkapy.server.config.dynamic import (
    DEFAULT_BROKER_ENTITY,
    broker_config_entries,
    check_reconfiguration,
    cluster_default_entries,
    effective_broker_config,
    topic_config_entries,
    validate_dynamic_broker_configs,
)
from kafkapy.server.config.topic_keys import log_config_for, validate_topic_configs
from kafkapy.server.config.types import InvalidConfigError

log = logging.getLogger("kafkapy.broker")


class AdminManager:
    def __init__(self, metadata_cache, store, table, log_manager, broker_id: int):
        self.metadata_cache = metadata_cache
        self.store = store
        self.table = table
        self.log_manager = log_manager
        self.broker_id = broker_id
        self.static_config = metadata_cache.static_config
        # cluster mode: admin writes go to ZooKeeper and the controller acts on them
        self.cluster_mode = isinstance(store, ZkMetadataStore)

    @property
    def config(self):
        """The effective broker config (static + dynamic), as of the latest metadata."""
        return self.metadata_cache.config

    def metadata(self):
        return self.metadata_cache.metadata()

    # -- topics ---------------------------------------------------------------
    def create_topic(self, name, num_partitions=None, configs=None, validate_only=False,
                     replication_factor=-1, assignments=None) -> TopicInfo:
        """``assignments`` (cluster mode): partition -> broker ids, given instead of a
        partition count and replication factor (CreateTopics' manual assignment)."""
        check_topic_name(name)
        if num_partitions is None:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if self.cluster_mode:
            return self._create_topic_in_cluster(name, num_partitions, configs, validate_only,
                                                 replication_factor, assignments)
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

        self._update_creating(change, name, created, f"Creating topic {name} failed")
        log.info("created topic %s with %d partitions (id %s)", name, num_partitions, info.topic_id)
        return info

    def _create_topic_in_cluster(self, name, num_partitions, configs, validate_only,
                                 replication_factor, assignments) -> TopicInfo:
        """ZkAdminManager.createTopics for one topic, in its order of checks."""
        md = self.metadata()
        if name in md.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignments:
            replicas = validate_create_assignment(assignments)
        else:
            # the live brokers in the metadata cache's order, as Kafka's CreateTopics
            replicas = assign_replicas_to_brokers(list(md.brokers.values()), num_partitions,
                                                  replication_factor)
        try:
            overrides = validate_topic_configs(configs or {})
        except InvalidConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        info = TopicInfo(name, uuid.uuid4(), len(replicas), overrides,
                         {p: assigned(r) for p, r in replicas.items()})

        def change(md):
            if name in md.topics:
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            if "." in name or "_" in name:  # Kafka's Topic.hasCollisionChars
                unified = name.replace(".", "_")
                colliding = sorted(t for t in self.store.zk.topic_names()
                                   if t != name and t.replace(".", "_") == unified)
                if colliding:
                    raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                     f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")
            md.topics[name] = info

        self._update_cluster(change, f"Creating topic {name} failed", validate_only)
        if validate_only:
            return info
        log.info("created topic %s with %d partitions (id %s), replicas %s", name, info.num_partitions,
                 info.topic_id, {p: list(r) for p, r in replicas.items()})
        return info

    def _update_cluster(self, change, failure: str, validate_only: bool = False):
        """``store.update(change)`` in cluster mode (``validate_only``: ``change`` run on
        ZooKeeper's model, nothing written): a TopicError is the answer; anything
        else (ZooKeeper unreachable, conflicts past the retries) is UNKNOWN_SERVER_ERROR
        with ``failure``, as Kafka answers an AdminOperationException."""
        try:
            if validate_only:
                return change(self.store.read_model())
            return self.store.update(change)
        except TopicError:
            raise
        except Exception:
            log.exception("%s", failure)
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, failure) from None

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

        self.log_manager.create_logs(info.name, fresh_slots(), self.metadata_cache.log_config(info),
                                     info.topic_id.bytes, let_go)

    def _update_creating(self, change, name: str, created: list, failure: str) -> None:
        """Store ``change``, which creates partitions of topic ``name`` (listed
        in ``created`` as they are made); if it fails for any reason but a
        TopicError, the partitions made are removed and UNKNOWN_SERVER_ERROR
        raised with ``failure``."""
        try:
            self.store.update(change)
        except TopicError:
            raise
        except Exception:
            log.exception("%s; rolling back %d partitions", failure, len(created))
            self._roll_back(name, created)
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, failure) from None

    def _roll_back(self, name: str, created: list) -> None:
        for p, slot in created:
            self.log_manager.delete_log(name, p)
            self.table.free(slot)  # and its slot map entry

    def delete_topic(self, name: str) -> None:
        """Standalone: the topic and its logs go now. Cluster mode: the topic is marked
        for deletion (``/admin/delete_topics/<t>``; one marked already is fine, as in
        Kafka) and the controller deletes it."""
        removed = []

        def change(md):
            info = md.topics.pop(name, None)
            if info is not None:
                removed.append(info)

        if self.cluster_mode:
            self._update_cluster(change, f"Deleting topic {name} failed")
            if removed:
                log.info("marked topic %s for deletion", name)
            return
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
        return topic_config_entries(self.config, self.static_config, *self._dynamic_layers(md),
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
                log_config_for(self.config, overrides)
            except InvalidConfigError as exc:
                raise TopicError(ErrorCode.INVALID_CONFIG, exc.message) from None
            info.configs = overrides
            result.update(overrides)

        if self._change_configs(change, validate_only):
            log.info("topic %s configs now %s", name, result)
        return result

    def alter_broker_configs(self, entity_name: str, compute, validate_only=False) -> dict:
        """Replace the dynamic configs of broker entity ("" = cluster default, or this
        broker's id) with ``compute(current)``. INVALID_REQUEST for keys that cannot change
        at run time or another broker's id, INVALID_CONFIG for bad values."""
        from kafkapy.server.config.dynamic import NonDynamicConfigError

        entity = self._broker_entity(entity_name)
        result = {}

        def change(md):
            try:
                configs = validate_dynamic_broker_configs(compute(dict(md.broker_dynamic(entity))))
                layers = dict(md.broker_configs)
                current = effective_broker_config(self.static_config, layers.get(DEFAULT_BROKER_ENTITY, {}),
                                                  layers.get(str(self.broker_id), {}))
                layers[entity] = configs
                check_reconfiguration(current, effective_broker_config(
                    self.static_config, layers.get(DEFAULT_BROKER_ENTITY, {}), layers.get(str(self.broker_id), {})))
            except NonDynamicConfigError as exc:
                raise TopicError(ErrorCode.INVALID_REQUEST, exc.message) from None
            except InvalidConfigError as exc:
                raise TopicError(ErrorCode.INVALID_CONFIG, exc.message) from None
            if configs:
                md.broker_configs[entity] = configs
            else:
                md.broker_configs.pop(entity, None)
            result.update(configs)

        if self._change_configs(change, validate_only):
            log.info("dynamic broker configs of %s now %s", entity, result)
        return result

    def _change_configs(self, change, validate_only: bool) -> bool:
        """Run ``change`` on a copy (validate_only) or as a store update that
        this process applies at once; True if it was stored. In cluster mode
        both run on ZooKeeper's model (``_update_cluster``)."""
        if self.cluster_mode:
            self._update_cluster(change, "Altering configs failed", validate_only)
        elif validate_only:
            import copy

            change(copy.deepcopy(self.metadata()))
        else:
            self.store.update(change)
        if validate_only:
            return False
        self.metadata()
        return True

    # -- partitions ----------------------------------------------------------------
    def create_partitions(self, name: str, count: int, assignments=None, validate_only=False) -> None:
        """CreatePartitions: grow topic ``name`` to ``count`` partitions (Kafka's checks and
        messages); raises TopicError."""
        if self.cluster_mode:
            return self._create_partitions_in_cluster(name, count, assignments, validate_only)
        info = self.metadata().topics.get(name)
        if info is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "This server does not host this topic-partition.")
        current = info.num_partitions
        check_partition_count(current, count)
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

        self._update_creating(change, name, created, f"Adding partitions to {name} failed")
        log.info("topic %s now has %d partitions", name, count)

    def _create_partitions_in_cluster(self, name: str, count: int, assignments, validate_only: bool) -> None:
        """ZkAdminManager.createPartitions for one topic: the existing assignment is
        ZooKeeper's (read inside the update, so the new partitions are placed
        against the latest one), the brokers are the registered ones, sorted by id."""
        def change(md):
            brokers = broker_metadatas(self.store.zk.live_brokers().values())
            broker_ids = [b.broker_id for b in brokers]
            info = md.topics.get(name)
            if info is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            current = info.num_partitions
            check_partition_count(current, count)
            existing = {p: info.replicas(p) for p in range(current) if info.replicas(p)}
            if assignments is not None:
                unknown = sorted({b for a in assignments for b in a} - set(broker_ids))
                if unknown:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
                if len(assignments) != count - current:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Increasing the number of partitions by {count - current} but "
                                     f"{len(assignments)} assignments provided.")
                added = {current + i: list(a) for i, a in enumerate(assignments)}
                if 0 not in existing:  # Kafka's AdminOperationException for it
                    new_partitions_assignment(name, existing, brokers, count)
                validate_added_assignment(added, len(existing[0]), broker_ids)
            else:
                added = new_partitions_assignment(name, existing, brokers, count)
            for p, replicas in added.items():
                info.partitions[p] = assigned(replicas)
            info.num_partitions = count

        self._update_cluster(change, f"Adding partitions to {name} failed", validate_only)
        if not validate_only:
            log.info("topic %s now has %d partitions", name, count)


def check_partition_count(current: int, count: int) -> None:
    """CreatePartitions' INVALID_PARTITIONS unless ``count`` grows the topic."""
    if count < current:
        raise TopicError(ErrorCode.INVALID_PARTITIONS,
                         f"Topic currently has {current} partitions, which is higher than the "
                         f"requested {count}.")
    if count == current:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")


def validate_create_assignment(assignments) -> dict:
    """AdminZkClient.validateTopicCreate's checks of a manual assignment (partition ->
    broker ids); the brokers are not checked against the live ones (Kafka's
    CreateTopics does not either). Returns it as partition -> tuple."""
    replicas = {int(p): tuple(r) for p, r in assignments.items()}
    if len({len(r) for r in replicas.values()}) != 1:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas")
    if any(len(r) != len(set(r)) for r in replicas.values()):
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Duplicate replica assignment found: {_scala_map(replicas)}")
    if sorted(replicas) != list(range(len(replicas))):
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "partitions should be a consecutive 0-based integer sequence")
    for p, r in sorted(replicas.items()):
        if not r:  # Kafka would write it; a partition nobody hosts is refused here
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Cannot have replication factor of 0 for partition id {p}.")
    return replicas


def validate_added_assignment(added: dict, replication_factor: int, broker_ids) -> None:
    """AdminZkClient.validateReplicaAssignment: the new partitions' replicas (partition ->
    broker ids) against partition 0's replication factor and the registered brokers."""
    available = set(broker_ids)
    for p, replicas in sorted(added.items()):
        if not replicas:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Cannot have replication factor of 0 for partition id {p}.")
        if len(replicas) != len(set(replicas)):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "Duplicate brokers not allowed in replica assignment: "
                             f"{', '.join(map(str, replicas))} for partition id {p}.")
        if not set(replicas) <= available:
            raise TopicError(ErrorCode.BROKER_NOT_AVAILABLE,
                             f"Some brokers specified for partition id {p} are not available. "
                             f"Specified brokers: {', '.join(map(str, replicas))}, "
                             f"available brokers: {', '.join(map(str, sorted(available)))}.")
    bad = sorted((p, len(r)) for p, r in added.items() if len(r) != replication_factor)
    if bad:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "Inconsistent replication factor between partitions, partition 0 has "
                         f"{replication_factor} while partitions [{', '.join(str(p) for p, _ in bad)}] have "
                         f"replication factors [{', '.join(str(n) for _, n in bad)}], respectively.")


def _scala_map(replicas: dict) -> str:
    """How Kafka's message prints the assignment (a Scala mutable.HashMap of ArrayBuffers)."""
    inner = ", ".join(f"{p} -> ArrayBuffer({', '.join(map(str, r))})" for p, r in sorted(replicas.items()))
    return f"HashMap({inner})"
