"""The API table: the one place that says which Kafka APIs and versions kafkapy serves.

Dispatch (``kafkapy.server.handlers``) and the ApiVersions response are both
derived from ``API_TABLE``; nothing else lists versions.

``min_version``/``max_version`` are what ApiVersions advertises.
``served_from`` is the lowest version actually answered: Produce is advertised
from v0 because librdkafka before 2.11 (Debian's kcat links 2.0.2) only enables
message format v2 when Produce v3 *and* the old versions are inside the range,
but v0-v2 (message format v0/v1) are refused at request time, as Kafka 4 does.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class ApiSpec:
    api_key: int
    name: str
    module: str  # <package>.<module>.v<N>.request/response
    min_version: int
    max_version: int
    served_from: int
    # Which process kind handles it: "worker" (any handler worker) or
    # "coordinator" (the one group-coordinator process, which owns all group
    # state in memory; see docs/architecture.md).
    owner: str = "worker"
    # Where the version modules live: kio's generated schemas, or kafkapy's
    # own (kafkapy.protocol.schema) for the APIs kio lacks.
    package: str = "kio.schema"

    @property
    def camel(self) -> str:
        return "".join(part.capitalize() for part in self.module.split("_"))

    @cache
    def request_class(self, version: int):
        mod = importlib.import_module(f"{self.package}.{self.module}.v{version}.request")
        return getattr(mod, f"{self.camel}Request")

    @cache
    def response_class(self, version: int):
        mod = importlib.import_module(f"{self.package}.{self.module}.v{version}.response")
        return getattr(mod, f"{self.camel}Response")

    def is_flexible(self, version: int) -> bool:
        return bool(self.request_class(version).__flexible__)


_OWN_SCHEMAS = "kafkapy.protocol.schema"


def _spec(key, name, module, lo, hi, served_from=None, owner="worker", package="kio.schema"):
    return ApiSpec(key, name, module, lo, hi, lo if served_from is None else served_from, owner,
                   package)


API_TABLE: dict[int, ApiSpec] = {
    s.api_key: s
    for s in (
        _spec(0, "Produce", "produce", 0, 11, served_from=3),
        _spec(1, "Fetch", "fetch", 4, 12),
        _spec(2, "ListOffsets", "list_offsets", 1, 7),
        _spec(3, "Metadata", "metadata", 0, 13),
        _spec(10, "FindCoordinator", "find_coordinator", 0, 6),
        _spec(18, "ApiVersions", "api_versions", 0, 4),
        _spec(19, "CreateTopics", "create_topics", 2, 7),
        _spec(20, "DeleteTopics", "delete_topics", 1, 6),
        _spec(21, "DeleteRecords", "delete_records", 0, 2),
        _spec(22, "InitProducerId", "init_producer_id", 0, 5),
        # kio has v2-v4 only (Kafka 3.9's v0-v1 are deprecated).
        _spec(23, "OffsetForLeaderEpoch", "offset_for_leader_epoch", 2, 4),
        # The ZooKeeper-mode controller's requests (kio lacks them): our own schemas.
        _spec(4, "LeaderAndIsr", "leader_and_isr", 7, 7, package=_OWN_SCHEMAS),
        _spec(5, "StopReplica", "stop_replica", 4, 4, package=_OWN_SCHEMAS),
        _spec(6, "UpdateMetadata", "update_metadata", 8, 8, package=_OWN_SCHEMAS),
        # Group APIs: served by the group-coordinator process.
        _spec(8, "OffsetCommit", "offset_commit", 2, 9, owner="coordinator"),
        _spec(9, "OffsetFetch", "offset_fetch", 1, 9, owner="coordinator"),
        _spec(11, "JoinGroup", "join_group", 0, 9, owner="coordinator"),
        _spec(12, "Heartbeat", "heartbeat", 0, 4, owner="coordinator"),
        _spec(13, "LeaveGroup", "leave_group", 0, 5, owner="coordinator"),
        _spec(14, "SyncGroup", "sync_group", 0, 5, owner="coordinator"),
        _spec(15, "DescribeGroups", "describe_groups", 0, 5, owner="coordinator"),
        _spec(16, "ListGroups", "list_groups", 0, 5, owner="coordinator"),
        _spec(42, "DeleteGroups", "delete_groups", 0, 2, owner="coordinator"),
        _spec(47, "OffsetDelete", "offset_delete", 0, 0, owner="coordinator"),
        _spec(68, "ConsumerGroupHeartbeat", "consumer_group_heartbeat", 0, 1, owner="coordinator"),
        _spec(69, "ConsumerGroupDescribe", "consumer_group_describe", 0, 1, owner="coordinator"),
        _spec(32, "DescribeConfigs", "describe_configs", 1, 4),
        _spec(33, "AlterConfigs", "alter_configs", 0, 2),
        _spec(35, "DescribeLogDirs", "describe_log_dirs", 1, 4),
        _spec(37, "CreatePartitions", "create_partitions", 0, 3),
        _spec(44, "IncrementalAlterConfigs", "incremental_alter_configs", 0, 1),
        _spec(60, "DescribeCluster", "describe_cluster", 0, 1),
        _spec(61, "DescribeProducers", "describe_producers", 0, 0),
        _spec(75, "DescribeTopicPartitions", "describe_topic_partitions", 0, 0),
    )
}

API_VERSIONS_KEY = 18

# API keys whose requests go to the group coordinator process.
COORDINATOR_KEYS = frozenset(k for k, s in API_TABLE.items() if s.owner == "coordinator")
