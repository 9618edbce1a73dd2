"""KafkaAdminClient (alias AdminClient): topics, partitions, configs, groups, offsets, records.

Every call is synchronous in the caller's thread.  Requests go where Kafka's
AdminClient sends them: topic creation/deletion and partition changes to the
controller, broker configs to that broker, group operations to the group's
coordinator (FindCoordinator), offsets and record deletion to each
partition's leader, everything else to the least-loaded broker.

Errors: a call raises the ``KafkaError`` subclass of the first per-item error
code (Kafka's code and name on the exception); ``raise_errors=False`` on the
calls that act on several items returns ``{item: KafkaError | None}`` instead.

Ownership: one thread at a time (connections are not locked).
"""

from __future__ import annotations

import itertools
import time
from typing import NamedTuple

from . import config as _config
from . import errors
from .assignors import decode_assignment, decode_subscription
from .conn import Connection, KafkaClient, metadata_request
from .structs import (
    CONFIG_RESOURCE_TYPES,
    BrokerMetadata,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)

_CLIENT_IDS = itertools.count(1)

LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 2, 3, 8, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 15, 16, 19, 20, 21
DESCRIBE_CONFIGS, ALTER_CONFIGS, CREATE_PARTITIONS, DELETE_GROUPS = 32, 33, 37, 42
INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 44, 60

OFFSET_SPECS = {"earliest": -2, "latest": -1, "max_timestamp": -3}
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
OPS = {"set": 0, "delete": 1, "append": 2, "subtract": 3}


class ConfigEntry(NamedTuple):
    name: str
    value: str | None
    read_only: bool
    source: str
    is_sensitive: bool
    is_default: bool


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str
    state: str | None


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list
    subscription: list


class GroupDescription(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list
    coordinator: int
    error_code: int


def _resource_type(value) -> int:
    if isinstance(value, int):
        return value
    name = getattr(value, "name", value)
    return CONFIG_RESOURCE_TYPES[str(name).lower()]


class KafkaAdminClient:
    def __init__(self, bootstrap_servers=None, **settings):
        if bootstrap_servers is not None:
            settings["bootstrap.servers"] = bootstrap_servers
        cfg = _config.resolve(_config.ADMIN, settings, "KafkaAdminClient")
        self.config = cfg
        self.client_id = cfg["client.id"] or f"adminclient-{next(_CLIENT_IDS)}"
        self._request_timeout_ms = int(cfg["request.timeout.ms"])
        self._retry_backoff_ms = int(cfg["retry.backoff.ms"])
        self._client = KafkaClient(cfg["bootstrap.servers"], self.client_id, self._request_timeout_ms,
                                   self._retry_backoff_ms, allow_auto_topic_creation=False,
                                   security=_config.security(cfg))
        self._client.topics = None
        self._coordinators: dict[str, Connection] = {}
        self._closed = False

    # ------------------------------------------------------------ plumbing

    def _metadata(self, topics=None):
        conn = self._client.least_loaded_connection()
        response = conn.request(METADATA, metadata_request(topics, False))
        self._client.metadata.update(response, topics)
        return response

    def _controller(self) -> Connection:
        if self._client.metadata.controller_id < 0 or not self._client.metadata.brokers:
            self._metadata([])
        controller = self._client.metadata.controller_id
        if controller >= 0 and controller in self._client.metadata.brokers:
            return self._client.connection(controller)
        return self._client.least_loaded_connection()

    def _timeout(self, timeout_ms):
        return self._request_timeout_ms if timeout_ms is None else int(timeout_ms)

    @staticmethod
    def _finish(results: dict, raise_errors: bool):
        if raise_errors:
            for error in results.values():
                if error is not None:
                    raise error
        return results

    def _coordinator(self, group_id: str) -> Connection:
        conn = self._coordinators.get(group_id)
        if conn is not None and conn.connected:
            return conn
        deadline = time.monotonic() + self._request_timeout_ms / 1000
        while True:
            any_conn = self._client.least_loaded_connection()
            response = any_conn.request(FIND_COORDINATOR, {"key": group_id, "key_type": 0,
                                                           "coordinator_keys": [group_id]})
            entry = response.coordinators[0] if any_conn.version(FIND_COORDINATOR) >= 4 else response
            if not entry.error_code:
                for existing in self._coordinators.values():
                    if existing.connected and (existing.host, existing.port) == (entry.host, entry.port):
                        self._coordinators[group_id] = existing
                        return existing
                conn = Connection(entry.node_id, entry.host, entry.port, self.client_id, self._request_timeout_ms,
                                  security=self._client.security)
                conn.connect()
                self._coordinators[group_id] = conn
                return conn
            error = errors.for_code(entry.error_code, f"FindCoordinator {group_id}")
            if not error.retriable or time.monotonic() > deadline:
                raise error
            time.sleep(self._retry_backoff_ms / 1000)

    # ------------------------------------------------------------ cluster and topics

    def describe_cluster(self) -> dict:
        conn = self._client.least_loaded_connection()
        if conn.supports(DESCRIBE_CLUSTER):
            response = conn.request(DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False,
                                                       "endpoint_type": 1})
            errors.raise_for_code(response.error_code, response.error_message)
            brokers = [BrokerMetadata(b.broker_id, b.host, b.port, b.rack) for b in response.brokers]
            return {"cluster_id": response.cluster_id, "controller_id": response.controller_id,
                    "brokers": sorted(brokers)}
        response = self._metadata([])
        metadata = self._client.metadata
        return {"cluster_id": metadata.cluster_id, "controller_id": metadata.controller_id,
                "brokers": sorted(metadata.brokers.values())}

    def list_topics(self, include_internal: bool = False) -> list:
        self._metadata(None)
        metadata = self._client.metadata
        return sorted(t for t in metadata.partitions
                      if include_internal or t not in metadata.internal_topics)

    def describe_topics(self, topics=None) -> list:
        """``[{"topic", "topic_id", "is_internal", "error_code", "partitions": [PartitionMetadata]}]``."""
        response = self._metadata(None if topics is None else list(topics))
        out = []
        for topic in response.topics:
            partitions = sorted(self._client.metadata.partitions.get(topic.name, {}).values())
            out.append({"topic": topic.name, "topic_id": getattr(topic, "topic_id", None),
                        "is_internal": getattr(topic, "is_internal", False),
                        "error_code": topic.error_code, "partitions": partitions})
            if topics is not None and topic.error_code:
                raise errors.for_code(topic.error_code, f"describe topic {topic.name}")
        return out

    def create_topics(self, new_topics, validate_only: bool = False, timeout_ms=None,
                      raise_errors: bool = True) -> dict:
        """``{name: None | KafkaError}``; raises the first error unless ``raise_errors=False``."""
        topics = []
        for t in new_topics:
            if isinstance(t, str):
                t = NewTopic(t)
            assignments = [{"partition_index": p, "broker_ids": list(b)}
                           for p, b in sorted((t.replica_assignments or {}).items())]
            topics.append({
                "name": t.name,
                "num_partitions": -1 if assignments else t.num_partitions,
                "replication_factor": -1 if assignments else t.replication_factor,
                "assignments": assignments,
                "configs": [{"name": k, "value": None if v is None else str(v)} for k, v in (t.configs or {}).items()],
            })
        timeout = self._timeout(timeout_ms)
        response = self._controller().request(CREATE_TOPICS, {
            "topics": topics, "timeout": timeout, "validate_only": validate_only}, timeout_ms=timeout + 5000)
        results = {t.name: (errors.for_code(t.error_code, t.error_message or t.name) if t.error_code else None)
                   for t in response.topics}
        return self._finish(results, raise_errors)

    def delete_topics(self, topics, timeout_ms=None, raise_errors: bool = True) -> dict:
        topics = list(topics)
        timeout = self._timeout(timeout_ms)
        response = self._controller().request(DELETE_TOPICS, lambda v: {
            "topics": [{"name": t, "topic_id": None} for t in topics],
            "topic_names": topics, "timeout": timeout}, timeout_ms=timeout + 5000)
        results = {r.name: (errors.for_code(r.error_code, getattr(r, "error_message", None) or r.name)
                            if r.error_code else None) for r in response.responses}
        return self._finish(results, raise_errors)

    def create_partitions(self, topic_partitions: dict, validate_only: bool = False, timeout_ms=None,
                          raise_errors: bool = True) -> dict:
        """``{topic: total_count or NewPartitions}``."""
        topics = []
        for name, spec in topic_partitions.items():
            if not isinstance(spec, NewPartitions):
                spec = NewPartitions(int(spec))
            topics.append({"name": name, "count": spec.total_count,
                           "assignments": None if not spec.new_assignments else
                           [{"broker_ids": list(b)} for b in spec.new_assignments]})
        timeout = self._timeout(timeout_ms)
        response = self._controller().request(CREATE_PARTITIONS, {
            "topics": topics, "timeout": timeout, "validate_only": validate_only}, timeout_ms=timeout + 5000)
        results = {r.name: (errors.for_code(r.error_code, r.error_message or r.name) if r.error_code else None)
                   for r in response.results}
        return self._finish(results, raise_errors)

    # ------------------------------------------------------------ configs

    def _config_node(self, resource) -> Connection:
        rtype = _resource_type(resource.type)
        if rtype in (4, 8) and str(resource.name).strip():
            self._metadata([])
            return self._client.connection(int(resource.name))
        return self._client.least_loaded_connection()

    def describe_configs(self, config_resources, include_synonyms: bool = False,
                         include_documentation: bool = False) -> dict:
        """``{ConfigResource(type, name): {config name: ConfigEntry}}``."""
        out = {}
        for resource in config_resources:
            rtype = _resource_type(resource.type)
            keys = list(resource.configs) if resource.configs else None
            conn = self._config_node(resource)
            response = conn.request(DESCRIBE_CONFIGS, {
                "resources": [{"resource_type": rtype, "resource_name": str(resource.name),
                               "configuration_keys": keys}],
                "include_synonyms": include_synonyms, "include_documentation": include_documentation})
            for result in response.results:
                errors.raise_for_code(result.error_code, result.error_message or str(resource.name))
                entries = {}
                for c in result.configs:
                    source = getattr(c, "config_source", -1)
                    if source == -1:  # v0 has is_default instead of a source
                        source = 5 if getattr(c, "is_default", False) else 0
                    entries[c.name] = ConfigEntry(c.name, c.value, c.read_only, CONFIG_SOURCES.get(source, str(source)),
                                                  c.is_sensitive, source == 5)
                out[ConfigResource(resource.type, str(resource.name))] = entries
        return out

    def alter_configs(self, config_resources, validate_only: bool = False) -> dict:
        """Replace the whole dynamic config of each resource (legacy AlterConfigs)."""
        results = {}
        for resource in config_resources:
            rtype = _resource_type(resource.type)
            response = self._config_node(resource).request(ALTER_CONFIGS, {
                "resources": [{"resource_type": rtype, "resource_name": str(resource.name),
                               "configs": [{"name": k, "value": None if v is None else str(v)}
                                           for k, v in (resource.configs or {}).items()]}],
                "validate_only": validate_only})
            for r in response.responses:
                errors.raise_for_code(r.error_code, r.error_message or str(resource.name))
            results[ConfigResource(resource.type, str(resource.name))] = None
        return results

    def incremental_alter_configs(self, config_resources, validate_only: bool = False) -> dict:
        """``ConfigResource(type, name, configs={name: value | None | (op, value)})``;
        None deletes the key, op is "set"/"delete"/"append"/"subtract"."""
        results = {}
        for resource in config_resources:
            rtype = _resource_type(resource.type)
            configs = []
            for k, v in (resource.configs or {}).items():
                if isinstance(v, tuple):
                    op, value = v
                    op = OPS[op] if isinstance(op, str) else int(op)
                elif v is None:
                    op, value = 1, None
                else:
                    op, value = 0, v
                configs.append({"name": k, "config_operation": op, "value": None if value is None else str(value)})
            response = self._config_node(resource).request(INCREMENTAL_ALTER_CONFIGS, {
                "resources": [{"resource_type": rtype, "resource_name": str(resource.name), "configs": configs}],
                "validate_only": validate_only})
            for r in response.responses:
                errors.raise_for_code(r.error_code, r.error_message or str(resource.name))
            results[ConfigResource(resource.type, str(resource.name))] = None
        return results

    # ------------------------------------------------------------ groups

    def list_groups(self, states=None) -> list:
        """Every group on every broker (Java asks each broker): ``[GroupListing]``."""
        self._metadata([])
        out = {}
        for node_id in sorted(self._client.metadata.brokers):
            conn = self._client.connection(node_id)
            response = conn.request(LIST_GROUPS, {"states_filter": list(states or ()), "types_filter": []})
            errors.raise_for_code(response.error_code, "ListGroups")
            for g in response.groups:
                out[g.group_id] = GroupListing(g.group_id, g.protocol_type, getattr(g, "group_state", None))
        return sorted(out.values())

    list_consumer_groups = list_groups

    def describe_groups(self, group_ids) -> list:
        out = []
        for group_id in group_ids:
            conn = self._coordinator(group_id)
            response = conn.request(DESCRIBE_GROUPS, {"groups": [group_id], "include_authorized_operations": False})
            for g in response.groups:
                errors.raise_for_code(g.error_code, f"DescribeGroups {g.group_id}")
                members = []
                for m in g.members:
                    consumer = g.protocol_type == "consumer"
                    members.append(MemberDescription(
                        m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host,
                        decode_assignment(m.member_assignment) if consumer else [],
                        decode_subscription(m.member_metadata) if consumer else []))
                out.append(GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data,
                                            members, conn.node_id, g.error_code))
        return out

    describe_consumer_groups = describe_groups

    def delete_groups(self, group_ids, raise_errors: bool = True) -> dict:
        results = {}
        for group_id in group_ids:
            response = self._coordinator(group_id).request(DELETE_GROUPS, {"groups_names": [group_id]})
            for r in response.results:
                results[r.group_id] = errors.for_code(r.error_code, r.group_id) if r.error_code else None
        return self._finish(results, raise_errors)

    delete_consumer_groups = delete_groups

    def list_consumer_group_offsets(self, group_id: str, partitions=None) -> dict:
        """``{TopicPartition: OffsetAndMetadata}`` (partitions with no commit are left out)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list] = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]
        response = self._coordinator(group_id).request(OFFSET_FETCH, {
            "group_id": group_id, "topics": topics, "require_stable": False})
        errors.raise_for_code(getattr(response, "error_code", 0), f"OffsetFetch {group_id}")
        out = {}
        for topic in response.topics:
            for p in topic.partitions:
                errors.raise_for_code(p.error_code, f"OffsetFetch {topic.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[TopicPartition(topic.name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.metadata or "", getattr(p, "committed_leader_epoch", -1))
        return out

    def alter_consumer_group_offsets(self, group_id: str, offsets: dict) -> dict:
        """Commit ``{tp: offset | OffsetAndMetadata}`` for a group with no active members."""
        by_topic: dict[str, list] = {}
        for tp, om in offsets.items():
            if not isinstance(om, OffsetAndMetadata):
                om = OffsetAndMetadata(int(om))
            by_topic.setdefault(tp[0], []).append({
                "partition_index": tp[1], "committed_offset": om.offset, "committed_leader_epoch": om.leader_epoch,
                "commit_timestamp": -1, "committed_metadata": om.metadata or ""})
        response = self._coordinator(group_id).request(OFFSET_COMMIT, {
            "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time": -1, "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]})
        results = {}
        for topic in response.topics:
            for p in topic.partitions:
                errors.raise_for_code(p.error_code, f"OffsetCommit {topic.name}-{p.partition_index}")
                results[TopicPartition(topic.name, p.partition_index)] = None
        return results

    # ------------------------------------------------------------ partitions and records

    def _by_leader(self, items: dict) -> dict:
        topics = sorted({tp[0] for tp in items})
        self._metadata(topics)
        by_node: dict[int, dict] = {}
        for tp, value in items.items():
            tp = TopicPartition(*tp)
            leader = self._client.metadata.leader_for(tp.topic, tp.partition)
            if leader < 0:
                code = self._client.metadata.topic_errors.get(tp.topic, 3)
                raise errors.for_code(code, f"no leader for {tp}")
            by_node.setdefault(leader, {})[tp] = value
        return by_node

    def list_offsets(self, topic_partition_offsets: dict, isolation_level: str = "read_uncommitted") -> dict:
        """``{tp: spec}`` with spec -2/"earliest", -1/"latest", -3/"max_timestamp" or a timestamp in ms;
        returns ``{tp: OffsetAndTimestamp}`` (offset -1 when no record matches a timestamp)."""
        specs = {tp: OFFSET_SPECS.get(spec, spec) if isinstance(spec, str) else int(spec)
                 for tp, spec in topic_partition_offsets.items()}
        level = 1 if isolation_level in ("read_committed", 1) else 0
        out = {}
        for node, parts in self._by_leader(specs).items():
            by_topic: dict[str, list] = {}
            for tp, ts in parts.items():
                by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition,
                                                          "current_leader_epoch": -1, "timestamp": ts,
                                                          "max_num_offsets": 1})
            response = self._client.request(node, LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": level,
                "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]})
            for topic in response.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, p.partition_index)
                    errors.raise_for_code(p.error_code, f"ListOffsets {tp}")
                    out[tp] = OffsetAndTimestamp(p.offset, p.timestamp, getattr(p, "leader_epoch", -1))
        return out

    def delete_records(self, records_to_delete: dict, timeout_ms=None) -> dict:
        """``{tp: before_offset}`` (-1: the high watermark); returns ``{tp: low_watermark}``."""
        timeout = self._timeout(timeout_ms)
        out = {}
        for node, parts in self._by_leader(records_to_delete).items():
            by_topic: dict[str, list] = {}
            for tp, offset in parts.items():
                by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "offset": int(offset)})
            response = self._client.request(node, DELETE_RECORDS, {
                "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()], "timeout": timeout},
                timeout_ms=timeout + 5000)
            for topic in response.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, p.partition_index)
                    errors.raise_for_code(p.error_code, f"DeleteRecords {tp}")
                    out[tp] = p.low_watermark
        return out

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for conn in set(self._coordinators.values()):
            conn.close()
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


AdminClient = KafkaAdminClient
