"""The broker as each process sees it: the wiring of its parts.

``Broker`` is owned by one process (a handler worker, the supervisor, the
coordinator process) and never shared. What must agree between processes
lives in the metadata store (topics, configs, producer-id blocks), the
shared partition table (each partition's scalar state, its lock, the slot
map) and the files on disk; the parts only cache views of them:

* ``store`` — the metadata store (``metadata_store``): standalone the
  embedded one, in cluster mode the image the controller feeds
  (``ZkMetadataStore``: admin writes go to ZooKeeper);
* ``metadata_cache`` (server/metadata_cache.py) — the store's metadata,
  re-read when its generation moved, and the dynamic broker configs;
  ``metadata()`` and ``config`` are its;
* ``replica_manager`` (kafkapy.replication) — every append to and read of a
  partition; told of each new metadata generation by the cache;
* ``admin`` (server/admin_manager.py) — topic creation, deletion, partitions
  and configs;
* ``producer_id_manager`` (kafkapy.coordinator.transaction) — InitProducerId;
* ``fetch_sessions`` (server/fetch_session.py) — the fetch session cache, one
  shared mapping for the process tree (the first Broker, the supervisor's,
  creates it before forking).
"""

from __future__ import annotations

import os

from kafkapy.metadata.embedded import EmbeddedMetadataStore
from kafkapy.metadata.model import BrokerInfo, EndPoint
from kafkapy.coordinator.transaction.producer_id_manager import ProducerIdManager
from kafkapy.replication.replica_manager import ReplicaManager
from kafkapy.server.admin_manager import AdminManager
from kafkapy.server.fetch_session import FetchSessionCache
from kafkapy.server.metadata_cache import MetadataCache
from kafkapy.server.quotas.connections import ConnectionQuotas
from kafkapy.server.quotas.manager import QuotaManager
from kafkapy.server.security.authorizer import authorizer_for


class Broker:
    """One process's broker: the wiring handlers reach as ``ctx.broker``."""

    def __init__(self, config, table, log_manager, wake_pipes=(), cluster_id=None):
        self.static_config = config
        self.table = table
        self.log_manager = log_manager
        self.broker_id = config.broker_id if config.broker_id >= 0 else 0
        self.cluster_id = cluster_id
        info = local_broker_info(config, self.broker_id)
        self.advertised_address = (info.host, info.port)
        self.store = metadata_store(config, table, info)
        self.metadata_cache = MetadataCache(config, self.store, self.broker_id)
        self.replica_manager = ReplicaManager(self.broker_id, log_manager, table, self.metadata,
                                              self.metadata_cache.log_config, wake_pipes)
        self.metadata_cache.listener = self.replica_manager.update_metadata
        self.admin = AdminManager(self.metadata_cache, self.store, table, log_manager, self.broker_id)
        self.producer_id_manager = ProducerIdManager(self.broker_id, self.store, table)
        # Shared by the process tree: created by the supervisor's Broker before it forks.
        self.fetch_sessions = FetchSessionCache.for_config(config)
        # Client quotas (server/quotas): the accounting table and the connection
        # counts are shared by the process tree, made here before the supervisor forks.
        self.quotas = QuotaManager.for_config(config)
        self.connection_quotas = ConnectionQuotas.for_config(config)
        # ACLs (server/security/authorizer.py): None unless authorizer.class.name is set.
        self.authorizer = authorizer_for(config, table, lambda: self.store.zk)

    @property
    def config(self):
        """The effective broker config (static + dynamic), current as of the latest metadata."""
        return self.metadata_cache.config

    def metadata(self):
        """The current metadata (re-read when its generation moved)."""
        return self.metadata_cache.metadata()

    def close(self) -> None:
        """Let go of this process's handles (workers); files are left as they are."""
        self.replica_manager.close()
        close_store = getattr(self.store, "close", None)  # cluster mode: its ZooKeeper client
        if close_store is not None:
            close_store()


def metadata_store(config, table, info: BrokerInfo):
    """The process's metadata store: standalone the embedded store; in cluster
    mode (``zookeeper.connect``) the metadata image the controller feeds,
    whose admin writes go to ZooKeeper (metadata.zk.store)."""
    if config["zookeeper.connect"]:
        from kafkapy.metadata.zk.store import ZkMetadataStore
        from kafkapy.server.security.zookeeper import zk_security

        return ZkMetadataStore(config.log_dirs[0], table, info, config, zk_security(config))
    return EmbeddedMetadataStore(config.log_dirs[0], table, info)


def local_broker_info(config, broker_id: int) -> BrokerInfo:
    """This broker as it registers itself: id, advertised endpoints, rack."""
    endpoints = tuple(EndPoint(ep.host or "127.0.0.1", ep.port, ep.listener_name, ep.security_protocol)
                      for ep in config.advertised_listeners)
    first = endpoints[0]
    return BrokerInfo(broker_id, first.host, first.port, config["broker.rack"], endpoints)


def pid_path(log_dir: str) -> str:
    return os.path.join(log_dir, ".lock")
