"""The cluster-mode metadata store: the image plus admin writes to ZooKeeper.

``ZkMetadataStore`` is every cluster-mode process's store. Reads are the
image's (``MetadataImage``: what the controller sent, re-read when
``metadata_generation`` moved). ``update(change)`` is the admin path, Kafka's
ZkAdminManager / AdminZkClient: it runs ``change`` on ZooKeeper's model
(topics with their assignment as each partition's ``replicas``, read as the
change looks them up, as Kafka's admin path reads the topics it names; topic
and broker configs; the producer-id block end) and writes what differs as
one multi-op conditional on the versions read (``ZkClient.AdminWrites``):

* a new topic -> ``/config/topics/<t>`` then ``/brokers/topics/<t>`` (topic
  id, replicas from ``TopicInfo.partitions[p].replicas``, which the admin
  manager fills); one whose name is marked for deletion is refused as
  existing, as Kafka does;
* more partitions -> ``/brokers/topics/<t>`` set at its version;
* a removed topic -> ``/admin/delete_topics/<t>`` (topics already marked are
  not in the model: deleting again is nothing to do);
* changed topic or broker configs -> ``/config/<type>/<name>`` plus a
  ``/config/changes/config_change_<seq>`` notification;
* changed user/client entity configs (quotas, SCRAM credentials:
  ``Metadata.entity_configs``, read lazily per entity as ``change`` looks
  them up, ``ZkEntityConfigs``) -> ``/config/users/<u>[/clients/<c>]`` or
  ``/config/clients/<c>`` (missing parents created empty) plus a
  notification with Kafka's ``entity_path`` (``users/alice/clients/c1``);
* a moved ``producer_id_block_end`` -> ``/latest_producer_id_block``
  (ZkProducerIdManager's block, assigned to this broker).

A lost condition (another broker wrote in between) reads again and runs
``change`` again, a bounded number of times. The controller acts on the
topic znodes; the image changes only when it sends UpdateMetadata, except
configs: a config written here is applied to this broker's image at once
(as Kafka's brokers learn configs from ``/config/changes``, not from the
controller), and every broker follows the notifications
(``follow_config_changes``, run by the controller child).

Ownership: one store per process; its ZooKeeper client is opened lazily on
the first ``update`` (a worker that never handles an admin request never
connects) and used by that process's one handler thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import MutableMapping

from kafkapy.metadata.zk import data as zk_data
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.model import NO_BROKER, Metadata, PartitionState, TopicInfo
from kafkapy.metadata.store import METADATA_GENERATION, PRODUCER_ID_BLOCK, ProducerIdsBlock
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.topics import TopicError

log = logging.getLogger("kafkapy.zookeeper")

# How often update() reads again and re-runs its change after losing a condition.
UPDATE_RETRIES = 10
# Kafka's ZkNodeChangeNotificationListener deletes processed notifications older
# than this (changeExpirationMs, 15 minutes), on every broker.
CONFIG_CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class ZkMetadataStore(MetadataImage):
    """Owned per process; opens its ZooKeeper client lazily on the first ``update``."""

    def __init__(self, log_dir: str, table, local_broker, config, security=None):
        super().__init__(log_dir, table, local_broker)
        self.config = config
        self.security = security  # ZkSecurity (the server builds it from the config), None: none
        self._zk = None

    @property
    def zk(self):
        if self._zk is None:
            from kafkapy.metadata.zk.client import ZkClient  # kazoo only where ZooKeeper is used

            self._zk = ZkClient(self.config["zookeeper.connect"], self.config["zookeeper.session.timeout.ms"],
                                self.config["zookeeper.connection.timeout.ms"], security=self.security).connect()
        return self._zk

    def close(self) -> None:
        if self._zk is not None:
            self._zk.close()
            self._zk = None

    def update(self, change) -> Metadata:
        """Run ``change`` on ZooKeeper's model and write the difference (module
        docstring); returns the model as written. TopicError from ``change`` or
        from the write (TOPIC_ALREADY_EXISTS) propagates; so does ZkConflict
        after ``UPDATE_RETRIES`` lost conditions."""
        from kafkapy.metadata.zk.client import ZkConflict

        def attempt_once():
            state = self.zk.read_admin_state(all_topics=False)
            after = self.model(state)
            change(after)
            before = self.model(state)  # the same reads: nothing more is read from ZooKeeper
            batch = self.zk.writes()
            self._diff(state, before, after, batch)
            batch.commit()
            return before, after

        for attempt in range(UPDATE_RETRIES):
            try:
                before, after = self.zk.until_connected(attempt_once)
            except ZkConflict as exc:
                if attempt == UPDATE_RETRIES - 1:
                    raise
                log.info("admin write lost a race (%s); reading again", exc)
                continue
            self._apply_configs(before, after)
            return after
        raise AssertionError("unreachable")

    def new_producer_id_block(self, broker_id: int, size: int = PRODUCER_ID_BLOCK) -> ProducerIdsBlock:
        """ZkProducerIdManager's block: only ``/latest_producer_id_block`` is read and
        written (conditional on its version, again until it lands), not the whole model."""
        return self.zk.until_connected(lambda: self.zk.new_producer_id_block(broker_id, size))

    def set_consumer_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        self.zk.set_consumer_offset(group, topic, partition, offset)

    def consumer_offset(self, group: str, topic: str, partition: int) -> int | None:
        return self.zk.get_consumer_offset(group, topic, partition)

    def read_model(self) -> Metadata:
        """ZooKeeper's admin model now (what ``update`` gives ``change``), for a
        validate-only run of a change; nothing is written."""
        return self.zk.until_connected(lambda: self.model(self.zk.read_admin_state(all_topics=False)))

    def replace(self, md: Metadata) -> None:
        raise NotImplementedError("a cluster's metadata is ZooKeeper's: nothing replaces it wholesale")

    def model(self, state) -> Metadata:
        """ZooKeeper's admin model: topics not marked for deletion, read as ``change``
        asks for them (``ZkTopics``; each partition's state carries its replicas,
        leader and ISR are the controller's and not read here), configs, the
        producer-id block end; brokers and controller from the image."""
        image = self.current()
        md = Metadata(brokers=dict(image.brokers), controller_id=image.controller_id,
                      controller_epoch=image.controller_epoch, cluster_mode=True)
        md.topics = ZkTopics(state)
        md.entity_configs = ZkEntityConfigs(state)
        md.broker_configs = {entity: dict(c.configs) for entity, c in state.broker_configs.items() if c.configs}
        block = state.producer_id_block
        md.producer_id_block_end = block.next_block_first_id if block is not None else 0
        return md

    def _diff(self, state, before: Metadata, after: Metadata, batch) -> None:
        for name in sorted(after.topics.touched):  # what the change did not look at is as it was
            info, old = after.topics.get(name), before.topics.get(name)
            if info is None:
                if old is not None:
                    batch.mark_topic_for_deletion(name)
                continue
            assignment = topic_assignment(info)
            if old is None:
                if name in state.marked_for_deletion:
                    raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' is marked for deletion.")
                config = state.topic_configs.get(name)
                batch.create_topic(name, info.topic_id, assignment, info.configs,
                                   config.version if config else -1)
                continue
            if info.topic_id != old.topic_id:
                raise ValueError(f"topic {name}: the topic id cannot change")
            old_assignment = topic_assignment(old)
            if assignment != old_assignment:
                if any(assignment.get(p) != r for p, r in old_assignment.items()):
                    raise ValueError(f"topic {name}: only new partitions may be assigned here "
                                     "(reassignment is the controller's)")
                if state.topics[name].reassigning:
                    # Kafka's CreatePartitions refuses it, racing the controller otherwise
                    raise TopicError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                                     f"A partition reassignment is in progress for the topic '{name}'.")
                batch.set_topic_assignment(name, old.topic_id, assignment, state.topics[name].version)
            if info.configs != old.configs:
                config = state.topic_configs.get(name)
                batch.set_entity_config(zk_data.CONFIG_TYPE_TOPIC, name, info.configs,
                                        config.version if config else -1)
        for entity in sorted(before.broker_configs.keys() | after.broker_configs.keys()):
            configs = after.broker_configs.get(entity, {})
            if configs != before.broker_configs.get(entity, {}):
                config = state.broker_configs.get(entity)
                batch.set_entity_config(zk_data.CONFIG_TYPE_BROKER, entity, configs,
                                        config.version if config else -1)
        created = set()
        for key in sorted(_entity_keys(before, after)):
            configs = after.entity_configs.get(key) or {}
            if configs == (before.entity_configs.get(key) or {}):
                continue
            for parent in zk_data.config_entity_parents(key):
                if parent in state.absent_paths and parent not in created:
                    created.add(parent)
                    batch.create_config_parent(parent)
            config = state.entity_configs.get(key)
            batch.set_entity_config(key[0], key[1], configs, config.version if config else -1)
        if after.producer_id_block_end != before.producer_id_block_end:
            size = after.producer_id_block_end - before.producer_id_block_end
            if size <= 0 or after.producer_id_block_end - 1 > zk_data.INT64_MAX:
                raise ValueError(f"producer id block end cannot move from {before.producer_id_block_end} "
                                 f"to {after.producer_id_block_end}")
            block = ProducerIdsBlock(self.local_broker.broker_id, before.producer_id_block_end, size)
            batch.set_producer_id_block(block, state.producer_id_block_version)

    def _apply_configs(self, before: Metadata, after: Metadata) -> None:
        """What this broker's image may show at once: the configs just written (of
        topics it knows; the others arrive with ``follow_config_changes``)."""
        topics = {}
        for name in after.topics.touched:
            info, old = after.topics.get(name), before.topics.get(name)
            if info is not None and old is not None and info.configs != old.configs:
                topics[name] = info.configs
        brokers = after.broker_configs if after.broker_configs != before.broker_configs else None
        entities = {}
        for key in _entity_keys(before, after):
            configs = after.entity_configs.get(key) or {}
            if configs != (before.entity_configs.get(key) or {}):
                entities[key] = configs
        if topics or brokers is not None or entities:
            self.apply(lambda md: apply_configs(md, topics, brokers, entities))


def _entity_keys(before: Metadata, after: Metadata):
    """The user/client entities a change may have altered: those it looked at."""
    if isinstance(after.entity_configs, ZkEntityConfigs):
        return set(after.entity_configs.touched)
    return set(after.entity_configs) | set(before.entity_configs)


class ZkEntityConfigs(MutableMapping):
    """The admin model's user/client entity configs (``Metadata.entity_configs``),
    read from ZooKeeper per entity as they are asked for (``ZkTopics``' rule);
    iterating reads them all. Entities without keys are absent."""

    def __init__(self, state):
        self.state = state
        self.touched: set = set()
        self._configs: dict = {}

    def _read(self, key: tuple) -> None:
        if key in self.touched:
            return
        self.touched.add(key)
        self.state.read_entities([key])
        config = self.state.entity_configs.get(key)
        if config is not None and config.configs:
            self._configs[key] = dict(config.configs)

    def __getitem__(self, key: tuple) -> dict:
        self._read(key)
        return self._configs[key]

    def __setitem__(self, key: tuple, configs: dict) -> None:
        self._read(key)
        self._configs[key] = configs

    def __delitem__(self, key: tuple) -> None:
        self._read(key)
        del self._configs[key]

    def __iter__(self):
        self.state.read_all_entities()
        for key in sorted(self.state.entity_configs):
            self._read(key)
        return iter(list(self._configs))

    def __len__(self) -> int:
        return len(list(iter(self)))


class ZkTopics(MutableMapping):
    """The admin model's topics (name -> TopicInfo), read from ZooKeeper as they are
    asked for: a name looked up, set or removed is read first (one round trip),
    iterating reads every topic. ``touched`` names what the change looked at:
    only those can differ from ZooKeeper. Topics marked for deletion are absent."""

    def __init__(self, state):
        self.state = state
        self.touched: set = set()
        self._topics: dict = {}

    def _read(self, name: str) -> None:
        if name in self.touched:
            return
        self.touched.add(name)
        self.state.read_topics([name])
        topic = self.state.topics.get(name)
        if topic is None or name in self.state.marked_for_deletion:
            return
        config = self.state.topic_configs.get(name)
        self._topics[name] = TopicInfo(name, topic.topic_id, len(topic.partitions),
                                       dict(config.configs) if config else {},
                                       {p: assigned(r) for p, r in topic.partitions.items()})

    def _read_all(self) -> None:
        self.state.read_all_topics()
        for name in sorted(self.state.read | self.state.topics.keys()):
            self._read(name)

    def __getitem__(self, name: str) -> TopicInfo:
        self._read(name)
        return self._topics[name]

    def __setitem__(self, name: str, info: TopicInfo) -> None:
        self._read(name)
        self._topics[name] = info

    def __delitem__(self, name: str) -> None:
        self._read(name)
        del self._topics[name]

    def __iter__(self):
        self._read_all()
        return iter(list(self._topics))

    def __len__(self) -> int:
        self._read_all()
        return len(self._topics)


def assigned(replicas) -> PartitionState:
    """A partition of the admin model: its replicas; leader and ISR are the controller's."""
    return PartitionState(tuple(replicas), NO_BROKER, -1, (), -1)


def topic_assignment(info: TopicInfo) -> dict:
    """``{partition: replicas}`` of every partition of ``info``; each must have replicas."""
    out = {}
    for p in range(info.num_partitions):
        replicas = info.replicas(p)
        if not replicas:
            raise ValueError(f"topic {info.name} partition {p} has no replicas assigned")
        out[p] = tuple(replicas)
    return out


def apply_configs(md: Metadata, topics: dict, brokers: dict | None, entities: dict | None = None,
                  all_entities: bool = False) -> None:
    """Set the overrides of the topics in ``topics`` that ``md`` has, and (unless
    None) replace the dynamic broker configs with ``brokers``; set the user/client
    entities in ``entities`` (an empty config removes one), or with ``all_entities``
    make ``entities`` the whole of them."""
    if entities is not None:
        if all_entities:
            md.entity_configs = {}
        for key, configs in entities.items():
            if configs:
                md.entity_configs[key] = dict(configs)
            else:
                md.entity_configs.pop(key, None)
    for name, configs in topics.items():
        info = md.topics.get(name)
        if info is not None:
            info.configs = dict(configs)
    if brokers is not None:
        md.broker_configs = {entity: dict(c) for entity, c in brokers.items() if c}


# --------------------------------------------------------------------- following /config

class ConfigFollower:
    """Keeps an image's topic, broker and user/client configs equal to ZooKeeper's ``/config``.

    Kafka's brokers learn configs from ZooKeeper (ZkConfigManager) rather than
    from the controller; so does the image here. Kazoo's callback thread keeps
    ``topics``/``brokers`` (name -> overrides) current: a watch on
    ``/config/topics`` and ``/config/brokers`` children reads entities that
    appear (a topic's config is written before its topic znode), and a watch on
    ``/config/changes`` reads the notifications newer than the last one seen and
    re-reads only the entities they name (bounded work per event). One thread of
    its own applies the differences to the image, when told or when the image's
    generation moved (a topic the controller just announced gets its configs
    from what was read before). Processed notifications older than 15 minutes
    are deleted, as every Kafka broker does. User and client entities
    (quotas, SCRAM credentials) are read in full at start and then only as
    notifications name them (every write of one comes with a notification).
    """

    def __init__(self, zk_client, image, poll_s: float = 0.2, clock_ms=None):
        self.zk = zk_client
        self.image = image
        self.poll_s = poll_s
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.topics: dict = {}
        self.brokers: dict = {}
        self.entities: dict = {}  # user/client entity key -> configs
        self.last_change = -1  # sequence number of the last notification processed
        self._lock = threading.Lock()
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._started_changes = False
        self._thread = threading.Thread(target=self._run, name="config-follower", daemon=True)

    def start(self) -> "ConfigFollower":
        self.zk.watch_children(zk_data.CONFIG_CHANGES_PATH, self._guarded(self._on_changes))
        for entity_type, known in ((zk_data.CONFIG_TYPE_TOPIC, self.topics),
                                   (zk_data.CONFIG_TYPE_BROKER, self.brokers)):
            self.zk.watch_children(zk_data.config_entity_type_path(entity_type), self._guarded(
                lambda names, t=entity_type, k=known: self._on_entities(t, k, names)))
        # after the first notifications call (it sets last_change), so a change
        # missed by this read has a later notification
        read = self.zk.read_user_client_entities(None)
        with self._lock:
            self.entities.update({k: c.configs for k, c in read.items()})
        self.sync()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._dirty.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5)

    # -- kazoo's callback thread ------------------------------------------------------
    @staticmethod
    def _guarded(callback):
        """A watch callback that logs its failure instead of ending the watch (the
        next event reads again: nothing is marked done before it is)."""
        def run(*args):
            try:
                callback(*args)
            except Exception:
                log.exception("following ZooKeeper configs: %s failed", callback.__name__)
        return run

    def _on_entities(self, entity_type: str, known: dict, names) -> None:
        """Children of ``/config/<type>`` changed: read the new ones, drop the gone."""
        names = set(names)
        new = [n for n in names if n not in known]
        read = self.zk.read_entity_configs(entity_type, new) if new else {}
        with self._lock:
            for gone in set(known) - names:
                del known[gone]
            for name, config in read.items():
                known[name] = config.configs
        self._dirty.set()

    def _on_changes(self, children) -> None:
        """New ``config_change_<seq>`` notifications: re-read the entities they name."""
        seqs = {}
        for child in children:
            try:
                seqs[zk_data.sequence_number(child, zk_data.CONFIG_CHANGE_PREFIX)] = child
            except ValueError:
                continue
        if not self._started_changes:
            # the first call: everything is read in full by the entity watches
            self._started_changes = True
            self.last_change = max(seqs, default=-1)
            self._purge(list(seqs.values()))
            return
        new = sorted(s for s in seqs if s > self.last_change)
        if not new:
            return
        paths = [zk_data.CONFIG_CHANGES_PATH + "/" + seqs[s] for s in new]
        found = self.zk.get_with_stat(paths)
        entities = {zk_data.CONFIG_TYPE_TOPIC: set(), zk_data.CONFIG_TYPE_BROKER: set()}
        user_client = set()
        for path in paths:
            if path not in found:
                continue
            try:
                entity_type, name = zk_data.decode_config_change(found[path][0])
            except ValueError as exc:
                log.warning("ignoring config change notification %s: %s", path, exc)
                continue
            if entity_type in entities:
                entities[entity_type].add(name)
            elif entity_type in (zk_data.CONFIG_TYPE_USER, zk_data.CONFIG_TYPE_CLIENT, zk_data.CONFIG_TYPE_IP):
                user_client.add((entity_type, name))
        if user_client:
            read = self.zk.read_user_client_entities(sorted(user_client))
            with self._lock:
                for key in user_client:
                    self.entities[key] = read[key].configs if key in read else {}
        for entity_type, known in ((zk_data.CONFIG_TYPE_TOPIC, self.topics),
                                   (zk_data.CONFIG_TYPE_BROKER, self.brokers)):
            names = entities[entity_type]
            if not names:
                continue
            read = self.zk.read_entity_configs(entity_type, names)
            with self._lock:
                for name in names:
                    if name in read:
                        known[name] = read[name].configs
                    else:
                        known.pop(name, None)
        self.last_change = new[-1]
        self._dirty.set()
        self._purge([seqs[s] for s in new], found)

    def _purge(self, children, found=None) -> None:
        """Delete the processed notifications older than the expiration (Kafka's
        purgeObsoleteNotifications)."""
        paths = [zk_data.CONFIG_CHANGES_PATH + "/" + c for c in children]
        if found is None:
            found = self.zk.get_with_stat(paths)
        cutoff = self.clock_ms() - CONFIG_CHANGE_EXPIRATION_MS
        old = [p for p in paths if p in found and found[p][1].ctime < cutoff]
        if old:
            self.zk.delete_quietly(old)

    # -- the follower's thread ----------------------------------------------------------
    def _run(self) -> None:
        seen = self.image.table.counter(METADATA_GENERATION)
        while not self._stop.is_set():
            self._dirty.wait(self.poll_s)
            if self._stop.is_set():
                return
            generation = self.image.table.counter(METADATA_GENERATION)
            if self._dirty.is_set() or generation != seen:
                self._dirty.clear()
                try:
                    self.sync()
                except Exception:
                    log.exception("applying ZooKeeper configs to the metadata image failed")
                seen = self.image.table.counter(METADATA_GENERATION)

    def sync(self) -> bool:
        """Apply to the image what differs from the configs read; True if it did."""
        md = self.image.current()
        with self._lock:
            topics = {name: dict(c) for name, c in self.topics.items()
                      if name in md.topics and md.topics[name].configs != c}
            brokers = {entity: dict(c) for entity, c in self.brokers.items() if c}
            entities = {key: dict(c) for key, c in self.entities.items() if c}
        if brokers == md.broker_configs:
            brokers = None
        if entities == md.entity_configs:
            entities = None
        if not topics and brokers is None and entities is None:
            return False
        self.image.apply(lambda m: apply_configs(m, topics, brokers, entities, all_entities=True))
        return True


def follow_config_changes(zk_client, image) -> ConfigFollower:
    """Read every ``/config/topics/*``, ``/config/brokers/*`` and user/client entity into ``image`` and keep
    them current from ``/config/changes`` (``ConfigFollower``); the controller
    child calls this once after connecting. Returns the follower (``stop()``)."""
    return ConfigFollower(zk_client, image).start()
