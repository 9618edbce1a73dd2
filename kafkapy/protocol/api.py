"""The API table: the one place that says which Kafka APIs and versions kafkapy serves.

Dispatch (``kafkapy.server.handlers``) and the ApiVersions response are both
derived from ``API_TABLE``; nothing else lists versions.

``min_version``/``max_version`` are what ApiVersions advertises.
``served_from`` is the lowest version actually answered (the default: the
lowest advertised). Produce v0-v2 (message format v0/v1) are served as Kafka
3.9 serves them, converted to v2 batches on append (``storage.legacy_records``).
``own_below``: kio is generated from Kafka 4.x, which dropped the oldest
versions of some APIs (KIP-896) that Kafka 3.9 still serves; versions below
it come from kafkapy's own kio-shaped schemas (``kafkapy.protocol.schema``).
``advertised``: False for an API Kafka 3.9 answers but leaves out of
ApiVersions (the client-telemetry APIs without a telemetry receiver plugin).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from functools import cache


# eq=False: one spec per API, compared and hashed by identity. The per-version
# class lookups below are cached on (self, version), and a field-wise hash of
# ten fields was ~0.4 us each, three per request.
@dataclass(frozen=True, eq=False)
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
    own_below: int = 0
    advertised: bool = True

    def _package(self, version: int) -> str:
        return _OWN_SCHEMAS if version < self.own_below else self.package

    @property
    def camel(self) -> str:
        return "".join(part.capitalize() for part in self.module.split("_"))

    @cache
    def request_class(self, version: int):
        mod = importlib.import_module(f"{self._package(version)}.{self.module}.v{version}.request")
        return getattr(mod, f"{self.camel}Request")

    @cache
    def response_class(self, version: int):
        mod = importlib.import_module(f"{self._package(version)}.{self.module}.v{version}.response")
        return getattr(mod, f"{self.camel}Response")

    def is_flexible(self, version: int) -> bool:
        return bool(self.request_class(version).__flexible__)


_OWN_SCHEMAS = "kafkapy.protocol.schema"
_VERSION_IN_MODULE = re.compile(r"\.v(\d+)\.(?:request|response)$")


def schema_version(cls) -> int:
    """The version of a request or response class (``...<api>.v<N>.request``
    or ``.response``, as ``request_class``/``response_class`` import them);
    -1 for any other class."""
    m = _VERSION_IN_MODULE.search(cls.__module__)
    return int(m.group(1)) if m else -1


def _spec(key, name, module, lo, hi, served_from=None, owner="worker", package="kio.schema",
          own_below=0, advertised=True):
    return ApiSpec(key, name, module, lo, hi, lo if served_from is None else served_from, owner,
                   package, own_below, advertised)


API_TABLE: dict[int, ApiSpec] = {
    s.api_key: s
    for s in (
        _spec(0, "Produce", "produce", 0, 11, own_below=3),
        _spec(1, "Fetch", "fetch", 0, 17, own_below=4),
        _spec(2, "ListOffsets", "list_offsets", 0, 9, own_below=1),
        _spec(3, "Metadata", "metadata", 0, 12),
        _spec(10, "FindCoordinator", "find_coordinator", 0, 6),
        _spec(18, "ApiVersions", "api_versions", 0, 4),
        # Served by the processor while a SASL connection authenticates
        # (kafkapy.server.security.sasl); the handlers answer the rest.
        _spec(17, "SaslHandshake", "sasl_handshake", 0, 1),
        _spec(36, "SaslAuthenticate", "sasl_authenticate", 0, 2),
        _spec(19, "CreateTopics", "create_topics", 0, 7, own_below=2),
        _spec(20, "DeleteTopics", "delete_topics", 0, 6, own_below=1),
        _spec(21, "DeleteRecords", "delete_records", 0, 2),
        _spec(23, "OffsetForLeaderEpoch", "offset_for_leader_epoch", 0, 4, own_below=2),
        # The ZooKeeper-mode controller's requests (kio lacks them): our own schemas.
        # kafkapy's controller sends the newest; the older ones are an older
        # Kafka controller's (a lower inter.broker.protocol.version).
        _spec(4, "LeaderAndIsr", "leader_and_isr", 0, 7, package=_OWN_SCHEMAS),
        _spec(5, "StopReplica", "stop_replica", 0, 4, package=_OWN_SCHEMAS),
        _spec(6, "UpdateMetadata", "update_metadata", 0, 8, package=_OWN_SCHEMAS),
        # v0's request header has no client id (protocol.headers)
        _spec(7, "ControlledShutdown", "controlled_shutdown", 0, 3, package=_OWN_SCHEMAS),
        # Group APIs: served by the group-coordinator process.
        _spec(8, "OffsetCommit", "offset_commit", 0, 9, owner="coordinator", own_below=2),
        _spec(9, "OffsetFetch", "offset_fetch", 0, 9, owner="coordinator", own_below=1),
        _spec(11, "JoinGroup", "join_group", 0, 9, owner="coordinator"),
        _spec(12, "Heartbeat", "heartbeat", 0, 4, owner="coordinator"),
        _spec(13, "LeaveGroup", "leave_group", 0, 5, owner="coordinator"),
        _spec(14, "SyncGroup", "sync_group", 0, 5, owner="coordinator"),
        _spec(15, "DescribeGroups", "describe_groups", 0, 5, owner="coordinator"),
        _spec(16, "ListGroups", "list_groups", 0, 5, owner="coordinator"),
        _spec(42, "DeleteGroups", "delete_groups", 0, 2, owner="coordinator"),
        _spec(47, "OffsetDelete", "offset_delete", 0, 0, owner="coordinator"),
        # KIP-848 past Kafka 3.9's ZooKeeper mode (which advertises v0 and answers
        # UNSUPPORTED_VERSION): librdkafka 2.10+ joins with group.protocol=consumer
        # only when v1 is advertised.
        _spec(68, "ConsumerGroupHeartbeat", "consumer_group_heartbeat", 0, 1, owner="coordinator"),
        _spec(69, "ConsumerGroupDescribe", "consumer_group_describe", 0, 1, owner="coordinator"),
        # Transaction APIs: served by the transaction coordinator, which lives
        # in the group-coordinator process (docs/architecture.md, "Transactions").
        _spec(22, "InitProducerId", "init_producer_id", 0, 5, owner="coordinator"),
        _spec(24, "AddPartitionsToTxn", "add_partitions_to_txn", 0, 5, owner="coordinator"),
        _spec(25, "AddOffsetsToTxn", "add_offsets_to_txn", 0, 4, owner="coordinator"),
        _spec(26, "EndTxn", "end_txn", 0, 4, owner="coordinator"),
        _spec(28, "TxnOffsetCommit", "txn_offset_commit", 0, 4, owner="coordinator"),
        # The coordinator's markers to partition leaders (inter-broker), answered by any worker.
        _spec(27, "WriteTxnMarkers", "write_txn_markers", 0, 1, own_below=1),
        _spec(65, "DescribeTransactions", "describe_transactions", 0, 0, owner="coordinator"),
        _spec(66, "ListTransactions", "list_transactions", 0, 1, owner="coordinator"),
        _spec(32, "DescribeConfigs", "describe_configs", 0, 4, own_below=1),
        _spec(33, "AlterConfigs", "alter_configs", 0, 2),
        _spec(35, "DescribeLogDirs", "describe_log_dirs", 0, 4, own_below=1),
        _spec(37, "CreatePartitions", "create_partitions", 0, 3),
        _spec(43, "ElectLeaders", "elect_leaders", 0, 2),
        _spec(44, "IncrementalAlterConfigs", "incremental_alter_configs", 0, 1),
        # Decided by the controller (docs/architecture.md, "Partition reassignment")
        _spec(45, "AlterPartitionReassignments", "alter_partition_reassignments", 0, 0),
        _spec(46, "ListPartitionReassignments", "list_partition_reassignments", 0, 0),
        _spec(60, "DescribeCluster", "describe_cluster", 0, 1),
        # SCRAM credentials in the user entity configs (server/security/scram_store.py).
        _spec(50, "DescribeUserScramCredentials", "describe_user_scram_credentials", 0, 0),
        _spec(51, "AlterUserScramCredentials", "alter_user_scram_credentials", 0, 0),
        # ACLs (server/security/authorizer.py); v0 (no pattern type) from our own schemas.
        _spec(29, "DescribeAcls", "describe_acls", 0, 3, own_below=1),
        _spec(30, "CreateAcls", "create_acls", 0, 3, own_below=1),
        _spec(31, "DeleteAcls", "delete_acls", 0, 3, own_below=1),
        _spec(61, "DescribeProducers", "describe_producers", 0, 0),
        # KRaft brokers' (listeners "broker"): Kafka 3.9 in ZooKeeper mode leaves it
        # out of ApiVersions; answered when sent, as clients fall back to Metadata.
        _spec(75, "DescribeTopicPartitions", "describe_topic_partitions", 0, 0, advertised=False),
        _spec(48, "DescribeClientQuotas", "describe_client_quotas", 0, 1),
        _spec(49, "AlterClientQuotas", "alter_client_quotas", 0, 1),
        # KIP-714 client telemetry, answered as Kafka 3.9 does with no receiver
        # plugin, which also leaves them out of ApiVersions.
        _spec(71, "GetTelemetrySubscriptions", "get_telemetry_subscriptions", 0, 0, advertised=False),
        _spec(72, "PushTelemetry", "push_telemetry", 0, 0, advertised=False),
    )
}

API_VERSIONS_KEY = 18

# API keys whose requests go to the group coordinator process.
COORDINATOR_KEYS = frozenset(k for k, s in API_TABLE.items() if s.owner == "coordinator")
