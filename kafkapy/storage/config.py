"""Per-log configuration: Kafka's topic-level config names in snake case.

The server builds a LogConfig from broker defaults (``log.*``) overridden by
topic configs; storage only reads it.  Defaults are Kafka's (3.x/4.0).

Frozen: the partitions of a topic share one object, and ``Log`` derives the
values its append path needs when it is given a config (``Log.config``), so a
change is always a new object (``replace``).
"""

from dataclasses import dataclass, fields
from typing import Optional

LONG_MAX = 2**63 - 1


class InvalidConfigError(Exception):
    """A bad topic-level config; CreateTopics/AlterConfigs answer INVALID_CONFIG (40) with ``message``.

    Defined here, beside ``LogConfig``, so every layer that builds or applies
    one (the server's config table, replication refreshing open logs) shares it.
    """

    error_code = 40

    def __init__(self, key: Optional[str], message: str):
        self.key = key
        self.message = message
        super().__init__(message)


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824            # segment.bytes, 1 GiB
    segment_ms: int = 604800000                 # segment.ms, 7 days
    segment_jitter_ms: int = 0                  # segment.jitter.ms
    segment_index_bytes: int = 10485760         # segment.index.bytes, 10 MiB
    index_interval_bytes: int = 4096            # index.interval.bytes
    retention_ms: int = 604800000               # retention.ms, 7 days; -1 = unlimited
    retention_bytes: int = -1                   # retention.bytes; -1 = unlimited
    file_delete_delay_ms: int = 60000           # file.delete.delay.ms
    flush_messages: int = LONG_MAX              # flush.messages
    flush_ms: int = LONG_MAX                    # flush.ms
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type: CreateTime | LogAppendTime
    max_message_bytes: int = 1048588            # max.message.bytes (1 MiB + 12-byte log overhead)
    cleanup_policy: str = "delete"              # cleanup.policy
    preallocate: bool = False                   # preallocate
    min_insync_replicas: int = 1                # min.insync.replicas
    compression_type: str = "producer"          # compression.type
    delete_retention_ms: int = 86400000         # delete.retention.ms, 1 day
    min_compaction_lag_ms: int = 0              # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX       # max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5      # min.cleanable.dirty.ratio
    message_timestamp_difference_max_ms: int = LONG_MAX  # message.timestamp.difference.max.ms
    # KIP-937: each side's own bound; LONG_MAX (unset) falls back to
    # message.timestamp.difference.max.ms, as Kafka's LogConfig does.
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = LONG_MAX   # message.timestamp.after.max.ms
    compression_gzip_level: int = -1            # compression.gzip.level (-1: zlib's default, 6)
    compression_lz4_level: int = 9              # compression.lz4.level
    compression_zstd_level: int = 3             # compression.zstd.level
    message_downconversion_enable: bool = True  # message.downconversion.enable (Fetch v0-v3)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_segment_ms(self) -> int:
        """Kafka's maxSegmentMs: a compacted log rolls by max.compaction.lag.ms too,
        so no record waits in the (uncleanable) active segment past the lag."""
        if "compact" in self.cleanup_policy and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def max_index_size(self) -> int:
        """segment.index.bytes rounded down to a whole number of 8-byte offset entries (Kafka does this)."""
        return self.segment_index_bytes - self.segment_index_bytes % 8

    def replace(self, **changes) -> "LogConfig":
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return LogConfig(**values)
