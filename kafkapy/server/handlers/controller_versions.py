"""The controller requests' older versions, read as their newest.

kafkapy's controller sends LeaderAndIsr v7, StopReplica v4 and
UpdateMetadata v8; an Apache Kafka controller on an older
``inter.broker.protocol.version`` sends older ones, which Kafka 3.9 still
serves. ``upgraded`` turns such a request into the newest version's entity,
filled in as Kafka's request classes present the old fields
(LeaderAndIsrRequest.partitionStates, StopReplicaRequest.topicStates,
UpdateMetadataRequest.topicStates / liveBrokers), so each handler reads one
shape:

* partitions listed one by one with their topic name (LeaderAndIsr v0-v1,
  StopReplica v0, UpdateMetadata v0-v4) are grouped by topic, in the order
  the topics first appear;
* no topic ids before LeaderAndIsr v5 / UpdateMetadata v7: None (the
  handlers then go by name: a topic the broker does not know by id yet
  cannot be created from such a request, see their contracts);
* StopReplica v0-v2's one ``delete_partitions`` flag applies to every
  partition, each with leader epoch -1 (Kafka's NoEpoch: never fenced);
* UpdateMetadata v0's broker is one PLAINTEXT endpoint (``v0_host``,
  ``v0_port``); v1-v2's endpoints are named after their security protocol
  (ListenerName.forSecurityProtocol);
* fields an old version lacks take the newest schema's defaults (broker
  epoch -1, no adding/removing or offline replicas, ``is_new`` false).

Sans-IO; the handlers call it first thing.
"""

from __future__ import annotations

import dataclasses

from kafkapy.protocol.api import API_TABLE
from kafkapy.server.handlers import construct

# Kafka's SecurityProtocol ids and names (a listener named after its protocol).
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


def upgraded(api_key: int, version: int, request):
    """``request`` (of ``version``) as an entity of the API's newest version."""
    spec = API_TABLE[api_key]
    if version == spec.max_version:
        return request
    data = dataclasses.asdict(request)
    _UPGRADES[api_key](data, version)
    return construct(spec.request_class(spec.max_version), data)


def _grouped(states, topic_key: str = "topic_name") -> list:
    """Per-partition dicts carrying their topic name -> topic states, topics in
    first-seen order, ids unknown."""
    topics: dict = {}
    for state in states:
        name = state.pop(topic_key)
        topics.setdefault(name, []).append(state)
    return [{"topic_name": name, "topic_id": None, "partition_states": parts} for name, parts in topics.items()]


def _leader_and_isr(data: dict, version: int) -> None:
    if version < 2:
        data["topic_states"] = _grouped(data.pop("ungrouped_partition_states"))
    for topic in data["topic_states"]:
        topic.setdefault("topic_id", None)


def _stop_replica(data: dict, version: int) -> None:
    if version >= 3:
        return
    delete = data.pop("delete_partitions")
    if version == 0:
        pairs = [(p["topic_name"], p["partition_index"]) for p in data.pop("ungrouped_partitions")]
    else:
        pairs = [(t["name"], p) for t in data.pop("topics") for p in t["partition_indexes"]]
    data["topic_states"] = [{k: v for k, v in t.items() if k != "topic_id"} for t in _grouped(
        {"topic_name": name, "partition_index": p, "leader_epoch": -1, "delete_partition": delete}
        for name, p in pairs)]


def _update_metadata(data: dict, version: int) -> None:
    for broker in data["live_brokers"]:
        if version == 0:
            broker["endpoints"] = [{"port": broker.pop("v0_port"), "host": broker.pop("v0_host"),
                                    "listener": SECURITY_PROTOCOLS[0], "security_protocol": 0}]
        for endpoint in broker["endpoints"]:
            endpoint.setdefault("listener", SECURITY_PROTOCOLS.get(endpoint["security_protocol"], "PLAINTEXT"))
    if version < 5:
        data["topic_states"] = _grouped(data.pop("ungrouped_partition_states"))
    for topic in data["topic_states"]:
        topic.setdefault("topic_id", None)


_UPGRADES = {4: _leader_and_isr, 5: _stop_replica, 6: _update_metadata}
