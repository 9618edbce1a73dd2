"""The metadata cache of one process (Kafka's ``MetadataCache`` with its dynamic configs).

Owned by one process (a handler worker, the supervisor, the coordinator
process) and never shared: it caches the metadata store's view and
re-reads it when the shared ``metadata_generation`` counter moved, then tells
its listener (the process's ``ReplicaManager.update_metadata``) so open
partitions follow.

Dynamic configs: ``config`` is the static ``BrokerConfig`` layered with the
dynamic broker configs of the metadata store (``effective_broker_config``),
rebuilt when the generation moves; at the same moment every open log whose
effective ``LogConfig`` changed (topic override or broker default) gets the
new one, so an AlterConfigs handled by one worker takes effect in every
worker and in the supervisor (which runs retention) within one tick.
"""

from __future__ import annotations

import logging

from kafkapy.metadata.model import TopicInfo
from kafkapy.server.config.dynamic import DEFAULT_BROKER_ENTITY, effective_broker_config
from kafkapy.server.config.topic_keys import log_config_for
from kafkapy.server.config.types import InvalidConfigError

log = logging.getLogger("kafkapy.broker")


class MetadataCache:
    def __init__(self, static_config, store, broker_id: int):
        self.static_config = static_config
        self.store = store
        self.broker_id = broker_id
        self._config = static_config  # static layered with the dynamic configs; see metadata()
        self._dynamic = ({}, {})  # (cluster default, this broker) the _config was built from
        self._log_configs: dict[tuple, object] = {}  # topic overrides -> LogConfig
        self._log_configs_for = None  # the _config they were built from
        self._seen_generation = -1
        self.listener = None  # called with (metadata, generation) when the generation moved

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
            if self.listener is not None:
                self.listener(md, self._seen_generation)
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
