"""The cluster-mode metadata store: the image plus admin writes to ZooKeeper.

``ZkMetadataStore`` is every cluster-mode process's store. Reads are the
image's (``MetadataImage``: what the controller sent, re-read when
``metadata_generation`` moved); ``update(change)`` is the admin path and
writes ZooKeeper (Kafka's ZkAdminManager / AdminZkClient), which the
controller acts on.
"""

from __future__ import annotations

from kafkapy.coordination.image import MetadataImage


class ZkMetadataStore(MetadataImage):
    """Owned per process; opens its ZooKeeper client lazily on the first ``update``."""

    def __init__(self, log_dir: str, table, local_broker, config):
        super().__init__(log_dir, table, local_broker)
        self.config = config
        self._zk = None
