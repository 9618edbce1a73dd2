"""Every API key and every version in the API table, as raw frames against a
real standalone broker.

For each (key, version) a minimal valid request goes out as raw frames
(``support.raw_api``: the version's schema, the header of that version, its own
connection). The answer must carry the request's correlation id, decode at
that version leaving no byte over, and carry what a Kafka 3.9 broker answers
to that request: NONE where the request can succeed, else the error Kafka
gives (STALE_CONTROLLER_EPOCH for controller requests to a broker that has
no controller, UNKNOWN_MEMBER_ID for a heartbeat of an unknown group, ...),
with the fields that show it was acted on (offsets, committed values, ids).

The table of cases is complete by construction: a key of the API table
without a case fails ``test_every_api_has_a_case``. Unadvertised APIs
(``ApiSpec.advertised`` False) are swept too: Kafka answers them when sent.
One broker serves the whole module.
"""

from __future__ import annotations

import datetime
import time
import uuid

import pytest

from support.clients import module_broker

from support.raw_api import TIMEOUT_S, call, call_raw

from support.legacy_messages import message

from kafkapy._core.records_py import build_batch
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.errors import ErrorCode as E

pytestmark = pytest.mark.timeout(180)

TOPIC = "sweep"
GROUP = "sweep-group"  # an offsets-only group with offset COMMITTED on TOPIC-0
COMMITTED = 1
COMMITTED_V0 = 2  # GROUP's OffsetCommit v0 offset on TOPIC-0, kept apart as Kafka 3.9 does (ZooKeeper)
RECORDS = 3  # records in TOPIC-0 before the sweep
ZERO_UUID = uuid.UUID(int=0)
PRODUCE_V3 = 3


class Sweep:
    """The module's broker and what the fixture learnt about it."""

    def __init__(self, broker):
        self.broker = broker
        self.topic_id = ZERO_UUID

    def call(self, api_key: int, version: int, data: dict):
        return call(self.broker.bootstrap, api_key, version, data)

    def call_raw(self, api_key: int, version: int, body: bytes) -> bytes:
        return call_raw(self.broker.bootstrap, api_key, version, body)


def _batch(n: int = 1) -> bytes:
    now = int(time.time() * 1000)
    return bytes(build_batch([(b"k%d" % i, b"v%d" % i, [], now) for i in range(n)]))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    with module_broker(tmp_path_factory, {"group.initial.rebalance.delay.ms": 0,
                                          "num.io.threads": 2}) as broker:
        s = Sweep(broker)
        created = s.call(19, 7, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1}],
                                 "timeout": 10000})
        assert created.topics[0].error_code == E.NONE
        s.topic_id = created.topics[0].topic_id
        produced = s.call(0, 9, {"acks": 1, "timeout": 10000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": _batch(RECORDS)}]}]})
        assert produced.responses[0].partition_responses[0].error_code == E.NONE
        # The first FindCoordinator creates __consumer_offsets; the coordinator
        # answers COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS until it has it.
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            found = s.call(10, 3, {"key": GROUP, "key_type": 0})
            committed = s.call(8, 2, {"group_id": GROUP, "member_id": "", "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": COMMITTED,
                                                "committed_metadata": "m"}]}]})
            code = committed.topics[0].partitions[0].error_code
            if found.error_code == E.NONE and code == E.NONE:
                break
            assert time.monotonic() < deadline, f"coordinator not ready: {found.error_code}, {code}"
            time.sleep(0.2)
        committed = s.call(8, 0, {"group_id": GROUP, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "committed_offset": COMMITTED_V0, "committed_metadata": "m0"}]}]})
        assert committed.topics[0].partitions[0].error_code == E.NONE
        yield s


# -- the cases: (request dict for a version, check of its response) --------------------

def _produce(s, v):
    data = {"acks": 1, "timeout": 10000, "transactional_id": None, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": _batch()}]}]}
    if v < PRODUCE_V3:
        # Produce v0-v2 carry message format v0/v1 (v2: magic 1), up-converted
        # to a v2 batch on append as Kafka 3.9 does.
        data["topic_data"][0]["partition_data"][0]["records"] = message(1 if v == 2 else 0, b"k", b"v",
                                                                         int(time.time() * 1000))
    r = s.call(0, v, data)
    (p,) = r.responses[0].partition_responses
    assert (r.responses[0].name, p.index, p.error_code) == (TOPIC, 0, E.NONE)
    assert p.base_offset >= RECORDS


def _fetch(s, v):
    r = s.call(1, v, {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                      "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                          {"topic": TOPIC, "topic_id": s.topic_id, "partitions": [
                              {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                               "current_leader_epoch": -1, "log_start_offset": -1}]}],
                      "forgotten_topics_data": [], "rack_id": ""})
    assert getattr(r, "error_code", E.NONE) == E.NONE
    (p,) = r.responses[0].partitions
    assert (p.partition_index, p.error_code) == (0, E.NONE)
    assert p.high_watermark >= RECORDS and len(p.records) > 0
    if v < 4:
        # Down-converted: message format v0 (Fetch v0-v1) or v1 (v2-v3)
        assert p.records[16] == (0 if v <= 1 else 1)


def _list_offsets(s, v):
    r = s.call(2, v, {"replica_id": -1, "isolation_level": 0, "timeout": 10000, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1,
                                        "max_num_offsets": 2}]}]})
    (p,) = r.topics[0].partitions
    assert (p.partition_index, p.error_code) == (0, E.NONE)
    if v == 0:
        # one segment: the log end offset (LATEST), then its base offset
        assert len(p.old_style_offsets) == 2 and p.old_style_offsets[0] >= RECORDS
        assert p.old_style_offsets[1] == 0
        return
    assert p.offset >= RECORDS


def _metadata(s, v):
    r = s.call(3, v, {"topics": [{"name": TOPIC, "topic_id": ZERO_UUID}], "allow_auto_topic_creation": False,
                      "include_cluster_authorized_operations": False,
                      "include_topic_authorized_operations": False})
    (t,) = r.topics
    assert (t.name, t.error_code, [p.partition_index for p in t.partitions]) == (TOPIC, E.NONE, [0])
    assert [b.node_id for b in r.brokers] == [t.partitions[0].leader_id]


def _controller_partitions(api_key, v) -> dict:
    """One partition of TOPIC in the version's own form (old versions list
    partitions one by one, or per topic without states)."""
    state = {"topic_name": TOPIC, "partition_index": 0, "controller_epoch": 0, "leader": 0, "leader_epoch": 0,
             "isr": [0], "partition_epoch": 0, "zk_version": 0, "replicas": [0],
             "delete_partition": False}
    if api_key == 5:
        return {"delete_partitions": False, "ungrouped_partitions": [{"topic_name": TOPIC, "partition_index": 0}],
                "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                "topic_states": [{"topic_name": TOPIC, "partition_states": [state]}]}
    return {"ungrouped_partition_states": [state],
            "topic_states": [{"topic_name": TOPIC, "topic_id": None, "partition_states": [state]}]}


def _stale_controller(api_key):
    # A standalone broker has no controller: every controller request is
    # from a stale one (Kafka: STALE_CONTROLLER_EPOCH), every version (older
    # ones read as the newest: server/handlers/controller_versions.py).
    def case(s, v):
        r = s.call(api_key, v, {"controller_id": 0, "controller_epoch": 0, "broker_epoch": -1,
                                "live_leaders": [], "live_brokers": [], **_controller_partitions(api_key, v)})
        assert r.error_code == E.STALE_CONTROLLER_EPOCH
        if api_key == 5 or (api_key == 4 and v < 5):
            assert [(p.topic_name, p.partition_index, p.error_code) for p in r.partition_errors] \
                == [(TOPIC, 0, E.STALE_CONTROLLER_EPOCH)]
        elif api_key == 4:
            assert [[(p.partition_index, p.error_code) for p in t.partition_errors] for t in r.topics] \
                == [[(0, E.STALE_CONTROLLER_EPOCH)]]
    return case


def _offset_commit(s, v):
    r = s.call(8, v, {"group_id": f"sweep-commit-{v}", "generation_id_or_member_epoch": -1, "member_id": "",
                      "retention_time": -1, "topics": [{"name": TOPIC, "partitions": [
                          {"partition_index": 0, "committed_offset": 2, "commit_timestamp": -1,
                           "committed_metadata": ""}]}]})
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics] \
        == [(TOPIC, [(0, E.NONE)])]


def _offset_fetch(s, v):
    topics = [{"name": TOPIC, "partition_indexes": [0]}]
    r = s.call(9, v, {"group_id": GROUP, "topics": topics, "require_stable": False,
                      "groups": [{"group_id": GROUP, "topics": topics}]})
    if v >= 8:
        (g,) = r.groups
        assert (g.group_id, g.error_code) == (GROUP, E.NONE)
        topics_out = g.topics
    else:
        assert getattr(r, "error_code", E.NONE) == E.NONE
        topics_out = r.topics
    (p,) = topics_out[0].partitions
    assert (topics_out[0].name, p.partition_index, p.error_code) == (TOPIC, 0, E.NONE)
    # v0 reads the v0 commit only (metadata dropped); v1+ the coordinator's
    assert (p.committed_offset, p.metadata) == ((COMMITTED_V0, "") if v == 0 else (COMMITTED, "m"))


def _find_coordinator(s, v):
    r = s.call(10, v, {"key": GROUP, "key_type": 0, "coordinator_keys": [GROUP]})
    if v >= 4:
        (c,) = r.coordinators
        assert (c.key, c.error_code, c.port) == (GROUP, E.NONE, s.broker.port)
    else:
        assert (r.error_code, r.port) == (E.NONE, s.broker.port)


def _join_group(s, v):
    r = s.call(11, v, {"group_id": f"sweep-join-{v}", "session_timeout": 10000, "rebalance_timeout": 10000,
                       "member_id": "", "protocol_type": "consumer",
                       "protocols": [{"name": "range", "metadata": b""}]})
    if v >= 4:
        # KIP-394: a member without an id gets one and must join again.
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id
    else:
        assert r.error_code == E.NONE and r.member_id == r.leader and r.generation_id == 1


def _heartbeat(s, v):
    r = s.call(12, v, {"group_id": "sweep-nogroup", "generation_id": 1, "member_id": "m"})
    assert r.error_code == E.UNKNOWN_MEMBER_ID


def _leave_group(s, v):
    r = s.call(13, v, {"group_id": "sweep-nogroup", "member_id": "m", "members": [{"member_id": "m"}]})
    if v >= 3:
        assert r.error_code == E.NONE
        assert [(m.member_id, m.error_code) for m in r.members] == [("m", E.UNKNOWN_MEMBER_ID)]
    else:
        assert r.error_code == E.UNKNOWN_MEMBER_ID


def _sync_group(s, v):
    r = s.call(14, v, {"group_id": "sweep-nogroup", "generation_id": 1, "member_id": "m",
                       "protocol_type": "consumer", "protocol_name": "range", "assignments": []})
    assert r.error_code == E.UNKNOWN_MEMBER_ID


def _describe_groups(s, v):
    r = s.call(15, v, {"groups": [GROUP], "include_authorized_operations": False})
    (g,) = r.groups
    assert (g.group_id, g.error_code, g.group_state, list(g.members)) == (GROUP, E.NONE, "Empty", [])


def _list_groups(s, v):
    r = s.call(16, v, {"states_filter": [], "types_filter": []})
    assert r.error_code == E.NONE
    assert GROUP in {g.group_id for g in r.groups}


def _api_versions(s, v):
    r = s.call(18, v, {"client_software_name": "sweep", "client_software_version": "1"})
    assert r.error_code == E.NONE
    advertised = {a.api_key: (a.min_version, a.max_version) for a in r.api_keys}
    assert advertised == {k: (spec.min_version, spec.max_version)
                          for k, spec in API_TABLE.items() if spec.advertised}


def _create_topics(s, v):
    name = f"sweep-create-{v}"
    r = s.call(19, v, {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1}],
                       "timeout": 10000, "validate_only": False})
    (t,) = r.topics
    assert (t.name, t.error_code) == (name, E.NONE)
    again = s.call(19, v, {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1}],
                           "timeout": 10000})
    assert again.topics[0].error_code == E.TOPIC_ALREADY_EXISTS


def _delete_topics(s, v):
    name = f"sweep-delete-{v}"
    created = s.call(19, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}],
                             "timeout": 10000})
    assert created.topics[0].error_code == E.NONE
    r = s.call(20, v, {"topic_names": [name], "topics": [{"name": name, "topic_id": ZERO_UUID}],
                       "timeout": 10000})
    (t,) = r.responses
    assert (t.name, t.error_code) == (name, E.NONE)
    # Metadata below v4 would auto-create it again (Kafka's rule).
    gone = s.call(3, 4, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
    assert gone.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def _delete_records(s, v):
    r = s.call(21, v, {"topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 0}]}],
                       "timeout": 10000})
    (p,) = r.topics[0].partitions
    assert (p.partition_index, p.error_code, p.low_watermark) == (0, E.NONE, 0)


def _init_producer_id(s, v):
    r = s.call(22, v, {"transactional_id": None, "transaction_timeout": 60000})
    assert r.error_code == E.NONE and r.producer_id >= 0 and r.producer_epoch == 0


def _txn_init(s, txn_id: str) -> tuple[int, int]:
    """A transactional id with a producer id (its coordinator found first, as
    clients do: FindCoordinator key type 1 creates __transaction_state)."""
    found = s.call(10, 3, {"key": txn_id, "key_type": 1})
    assert found.error_code == E.NONE, found
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        r = s.call(22, 5, {"transactional_id": txn_id, "transaction_timeout": 60000, "producer_id": -1,
                           "producer_epoch": -1})
        if r.error_code not in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert r.error_code == E.NONE, r
    return r.producer_id, r.producer_epoch


def _txn_add_partitions(s, txn_id: str, pid: int, epoch: int, version: int = 3):
    r = s.call(24, version, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                             "v3_and_below_producer_epoch": epoch,
                             "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]})
    return [(t.name, [(q.partition_index, q.partition_error_code) for q in t.results_by_partition])
            for t in r.results_by_topic_v3_and_below]


def _add_partitions_to_txn(s, v):
    txn_id = f"sweep-add-{v}"
    pid, epoch = _txn_init(s, txn_id)
    if v < 4:
        assert _txn_add_partitions(s, txn_id, pid, epoch, v) == [(TOPIC, [(0, E.NONE)])]
        return
    # v4+ (brokers' batched form): add, then verify-only finds it added.
    for verify_only in (False, True):
        r = s.call(24, v, {"transactions": [{"transactional_id": txn_id, "producer_id": pid,
                                             "producer_epoch": epoch, "verify_only": verify_only,
                                             "topics": [{"name": TOPIC, "partitions": [0]}]}]})
        (t,) = r.results_by_transaction
        assert (r.error_code, t.transactional_id) == (E.NONE, txn_id)
        assert [(q.partition_index, q.partition_error_code) for q in t.topic_results[0].results_by_partition] \
            == [(0, E.NONE)]


def _add_offsets_to_txn(s, v):
    txn_id = f"sweep-add-offsets-{v}"
    pid, epoch = _txn_init(s, txn_id)
    r = s.call(25, v, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                       "group_id": f"sweep-txn-group-{v}"})
    assert r.error_code == E.NONE


def _end_txn(s, v):
    txn_id = f"sweep-end-{v}"
    pid, epoch = _txn_init(s, txn_id)
    # Nothing begun: Kafka's INVALID_TXN_STATE; then a transaction committed.
    r = s.call(26, v, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": True})
    assert r.error_code == E.INVALID_TXN_STATE
    assert _txn_add_partitions(s, txn_id, pid, epoch) == [(TOPIC, [(0, E.NONE)])]
    r = s.call(26, v, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": True})
    assert r.error_code == E.NONE


def _txn_offset_commit(s, v):
    txn_id, group = f"sweep-txn-commit-{v}", f"sweep-txn-group-{v}"
    pid, epoch = _txn_init(s, txn_id)
    r = s.call(25, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "group_id": group})
    assert r.error_code == E.NONE
    r = s.call(28, v, {"transactional_id": txn_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
                       "generation_id": -1, "member_id": "", "group_instance_id": None,
                       "topics": [{"name": TOPIC, "partitions": [
                           {"partition_index": 0, "committed_offset": 2, "committed_leader_epoch": -1,
                            "committed_metadata": ""}]}]})
    assert [(t.name, [(q.partition_index, q.error_code) for q in t.partitions]) for t in r.topics] \
        == [(TOPIC, [(0, E.NONE)])]
    r = s.call(26, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": True})
    assert r.error_code == E.NONE
    fetched = s.call(9, 7, {"group_id": group, "require_stable": True,
                            "topics": [{"name": TOPIC, "partition_indexes": [0]}]})
    assert (fetched.topics[0].partitions[0].error_code, fetched.topics[0].partitions[0].committed_offset) \
        == (E.NONE, 2)


def _describe_transactions(s, v):
    pid, epoch = _txn_init(s, "sweep-describe")
    r = s.call(65, v, {"transactional_ids": ["sweep-describe"]})
    (t,) = r.transaction_states
    assert (t.error_code, t.transaction_state, t.producer_id, t.producer_epoch) == (E.NONE, "Empty", pid, epoch)


def _list_transactions(s, v):
    pid, _ = _txn_init(s, "sweep-list")
    r = s.call(66, v, {"state_filters": [], "producer_id_filters": [pid], "duration_filter": -1})
    assert r.error_code == E.NONE
    assert [(t.transactional_id, t.producer_id) for t in r.transaction_states] == [("sweep-list", pid)]


def _write_txn_markers(s, v):
    topic = "sweep-markers"
    s.call(19, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}], "timeout": 10000})
    r = s.call(27, v, {"markers": [
        {"producer_id": 4242, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
         "topics": [{"name": topic, "partition_indexes": [0]}, {"name": "no-such-topic", "partition_indexes": [0]}]}]})
    (m,) = r.markers
    assert (m.producer_id, [(t.name, [(q.partition_index, q.error_code) for q in t.partitions]) for t in m.topics]) \
        == (4242, [(topic, [(0, E.NONE)]), ("no-such-topic", [(0, E.UNKNOWN_TOPIC_OR_PARTITION)])])


def _offset_for_leader_epoch(s, v):
    r = s.call(23, v, {"replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    (p,) = r.topics[0].partitions
    assert (p.partition, p.error_code) == (0, E.NONE)
    # Epoch 0 is the latest: it ends at the log end offset.
    assert p.end_offset >= RECORDS
    if v >= 1:
        assert p.leader_epoch == 0


def _describe_configs(s, v):
    r = s.call(32, v, {"resources": [{"resource_type": 2, "resource_name": TOPIC,
                                      "configuration_keys": ["retention.ms", "cleanup.policy"]}]})
    (res,) = r.results
    assert (res.error_code, res.resource_name) == (E.NONE, TOPIC)
    assert sorted(c.name for c in res.configs) == ["cleanup.policy", "retention.ms"]


def _alter_configs(s, v):
    r = s.call(33, v, {"resources": [{"resource_type": 2, "resource_name": TOPIC, "configs": [
        {"name": "retention.ms", "value": str(86400000 + v)}]}], "validate_only": False})
    assert [(x.error_code, x.resource_name) for x in r.responses] == [(E.NONE, TOPIC)]


def _describe_log_dirs(s, v):
    r = s.call(35, v, {"topics": [{"topic": TOPIC, "partitions": [0]}]})
    assert getattr(r, "error_code", E.NONE) == E.NONE
    (d,) = r.results
    assert d.error_code == E.NONE
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in d.topics] == [(TOPIC, [0])]


def _create_partitions(s, v):
    # The count it has already: Kafka's INVALID_PARTITIONS.
    r = s.call(37, v, {"topics": [{"name": TOPIC, "count": 1, "assignments": None}], "timeout": 10000,
                       "validate_only": False})
    assert [(x.name, x.error_code) for x in r.results] == [(TOPIC, E.INVALID_PARTITIONS)]


def _delete_groups(s, v):
    r = s.call(42, v, {"groups_names": ["sweep-nogroup"]})
    assert [(x.group_id, x.error_code) for x in r.results] == [("sweep-nogroup", E.GROUP_ID_NOT_FOUND)]


def _incremental_alter_configs(s, v):
    r = s.call(44, v, {"resources": [{"resource_type": 2, "resource_name": TOPIC, "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": str(86400000 + 10 + v)}]}],
        "validate_only": False})
    assert [(x.error_code, x.resource_name) for x in r.responses] == [(E.NONE, TOPIC)]


def _offset_delete(s, v):
    r = s.call(47, v, {"group_id": "sweep-nogroup", "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0}]}]})
    assert r.error_code == E.GROUP_ID_NOT_FOUND


def _describe_cluster(s, v):
    r = s.call(60, v, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
    assert r.error_code == E.NONE
    assert [b.port for b in r.brokers] == [s.broker.port]


def _describe_acls(s, v):
    # No authorizer on the sweep's broker: Kafka's SECURITY_DISABLED (with one: test_acls.py).
    r = s.call(29, v, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                       "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
    assert (r.error_code, r.resources) == (E.SECURITY_DISABLED, ())


def _create_acls(s, v):
    r = s.call(30, v, {"creations": [{"resource_type": 2, "resource_name": TOPIC, "resource_pattern_type": 3,
                                      "principal": "User:a", "host": "*", "operation": 3, "permission_type": 3}]})
    assert [x.error_code for x in r.results] == [E.SECURITY_DISABLED]


def _delete_acls(s, v):
    r = s.call(31, v, {"filters": [{"resource_type_filter": 2, "resource_name_filter": TOPIC, "pattern_type_filter": 3,
                                    "principal_filter": None, "host_filter": None, "operation": 1,
                                    "permission_type": 1}]})
    assert [(x.error_code, x.matching_acls) for x in r.filter_results] == [(E.SECURITY_DISABLED, ())]


def _sasl_handshake(s, v):
    # On a PLAINTEXT listener (KafkaApis' answer; SASL listeners: test_security.py).
    r = s.call(17, v, {"mechanism": "PLAIN"})
    assert (r.error_code, r.mechanisms) == (E.ILLEGAL_SASL_STATE, ())


def _sasl_authenticate(s, v):
    r = s.call(36, v, {"auth_bytes": b"\x00a\x00b"})
    assert r.error_code == E.ILLEGAL_SASL_STATE


def _alter_user_scram_credentials(s, v):
    r = s.call(51, v, {"deletions": [], "upsertions": [{"name": f"sweep-{v}", "mechanism": 1, "iterations": 4096,
                                                        "salt": b"salt", "salted_password": b"x" * 32}]})
    assert [(x.user, x.error_code) for x in r.results] == [(f"sweep-{v}", E.NONE)]


def _describe_user_scram_credentials(s, v):
    s.call(51, 0, {"deletions": [], "upsertions": [{"name": "sweep-d", "mechanism": 2, "iterations": 8192,
                                                    "salt": b"salt", "salted_password": b"x" * 64}]})
    r = s.call(50, v, {"users": [{"name": "sweep-d"}]})
    assert r.error_code == E.NONE
    assert [(x.user, [(i.mechanism, i.iterations) for i in x.credential_infos]) for x in r.results] \
        == [("sweep-d", [(2, 8192)])]


def _describe_producers(s, v):
    r = s.call(61, v, {"topics": [{"name": TOPIC, "partition_indexes": [0]}]})
    (p,) = r.topics[0].partitions
    assert (p.partition_index, p.error_code) == (0, E.NONE)


def _consumer_group_heartbeat(s, v):
    r = s.call(68, v, {"group_id": f"sweep-cg-{v}", "member_id": str(uuid.uuid4()), "member_epoch": 0,
                       "rebalance_timeout": 10000, "subscribed_topic_names": [TOPIC],
                       "topic_partitions": []})
    assert r.error_code == E.NONE and r.member_epoch >= 1 and r.member_id


def _consumer_group_describe(s, v):
    r = s.call(69, v, {"group_ids": ["sweep-nogroup"], "include_authorized_operations": False})
    assert [(g.group_id, g.error_code) for g in r.groups] == [("sweep-nogroup", E.GROUP_ID_NOT_FOUND)]


def _get_telemetry_subscriptions(s, v):
    r = s.call(71, v, {"client_instance_id": ZERO_UUID})
    assert r.error_code == E.NONE and r.client_instance_id != ZERO_UUID
    assert (list(r.requested_metrics), r.push_interval, r.delta_temporality) == ([], 300000, True)


def _push_telemetry(s, v):
    got = s.call(71, 0, {"client_instance_id": ZERO_UUID})
    r = s.call(72, v, {"client_instance_id": got.client_instance_id, "subscription_id": got.subscription_id,
                       "terminating": False, "compression_type": 0, "metrics": b""})
    assert r.error_code == E.NONE


def _describe_topic_partitions(s, v):
    r = s.call(75, v, {"topics": [{"name": TOPIC}], "response_partition_limit": 2000, "cursor": None})
    (t,) = r.topics
    assert (t.name, t.error_code, t.topic_id, [p.partition_index for p in t.partitions]) \
        == (TOPIC, E.NONE, s.topic_id, [0])


def _alter_client_quotas(s, v):
    entity = [{"entity_type": "client-id", "entity_name": f"sweep-{v}"}]
    r = s.call(49, v, {"entries": [{"entity": entity, "ops": [
        {"key": "producer_byte_rate", "value": 1e9, "remove": False}]}], "validate_only": False})
    assert [(e.error_code, [(x.entity_type, x.entity_name) for x in e.entity]) for e in r.entries] \
        == [(E.NONE, [("client-id", f"sweep-{v}")])]


def _describe_client_quotas(s, v):
    s.call(49, 1, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": "sweep-d"}], "ops": [
        {"key": "consumer_byte_rate", "value": 1e9, "remove": False}]}], "validate_only": False})
    r = s.call(48, v, {"components": [{"entity_type": "client-id", "match_type": 0, "match": "sweep-d"}],
                       "strict": True})
    assert r.error_code == E.NONE
    assert [([(x.entity_type, x.entity_name) for x in e.entity], [(x.key, x.value) for x in e.values])
            for e in r.entries] == [([("client-id", "sweep-d")], [("consumer_byte_rate", 1e9)])]


def _controlled_shutdown(s, v):
    # standalone: no controller to move leaderships
    r = s.call(7, v, {"broker_id": 0, "broker_epoch": -1})
    assert (r.error_code, r.remaining_partitions) == (E.NOT_CONTROLLER, ())


def _elect_leaders(s, v):
    # standalone: the broker is every partition's preferred replica and leads it
    r = s.call(43, v, {"election_type": 0, "topic_partitions": [{"topic": TOPIC, "partitions": [0]}],
                       "timeout": datetime.timedelta(seconds=5)})
    (t,) = r.replica_election_results
    assert (t.topic, [(p.partition_id, p.error_code) for p in t.partition_result]) \
        == (TOPIC, [(0, E.ELECTION_NOT_NEEDED)])


def _alter_partition_reassignments(s, v):
    # standalone: a one-broker cluster whose controller is the broker itself
    (me,) = [b.node_id for b in s.call(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False}).brokers]
    r = s.call(45, v, {"timeout": datetime.timedelta(seconds=5), "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": (me,)},
                                       {"partition_index": 1, "replicas": None}]},
        {"name": "sweep-unknown", "partitions": [{"partition_index": 0, "replicas": (me,)},
                                                 {"partition_index": 1, "replicas": (me + 1,)}]}]})
    assert r.error_code == E.NONE
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.responses] == [
        (TOPIC, [(0, E.NONE), (1, E.NO_REASSIGNMENT_IN_PROGRESS)]),
        ("sweep-unknown", [(0, E.UNKNOWN_TOPIC_OR_PARTITION), (1, E.INVALID_REPLICA_ASSIGNMENT)])]


def _list_partition_reassignments(s, v):
    r = s.call(46, v, {"timeout": datetime.timedelta(seconds=5), "topics": None})
    assert (r.error_code, r.topics) == (E.NONE, ())


CASES = {
    0: _produce, 1: _fetch, 2: _list_offsets, 3: _metadata,
    4: _stale_controller(4), 5: _stale_controller(5), 6: _stale_controller(6), 7: _controlled_shutdown,
    8: _offset_commit, 9: _offset_fetch, 10: _find_coordinator, 11: _join_group, 12: _heartbeat,
    13: _leave_group, 14: _sync_group, 15: _describe_groups, 16: _list_groups, 18: _api_versions,
    17: _sasl_handshake, 36: _sasl_authenticate,
    50: _describe_user_scram_credentials, 51: _alter_user_scram_credentials,
    19: _create_topics, 20: _delete_topics, 21: _delete_records, 22: _init_producer_id,
    23: _offset_for_leader_epoch, 32: _describe_configs, 33: _alter_configs, 35: _describe_log_dirs,
    37: _create_partitions, 42: _delete_groups, 43: _elect_leaders, 44: _incremental_alter_configs, 47: _offset_delete,
    60: _describe_cluster, 61: _describe_producers, 68: _consumer_group_heartbeat,
    69: _consumer_group_describe, 71: _get_telemetry_subscriptions, 72: _push_telemetry,
    75: _describe_topic_partitions,
    45: _alter_partition_reassignments, 46: _list_partition_reassignments,
    48: _describe_client_quotas, 49: _alter_client_quotas,
    24: _add_partitions_to_txn, 25: _add_offsets_to_txn, 26: _end_txn, 28: _txn_offset_commit,
    65: _describe_transactions, 66: _list_transactions, 27: _write_txn_markers,
    29: _describe_acls, 30: _create_acls, 31: _delete_acls,
}

def test_every_api_has_a_case():
    assert sorted(API_TABLE) == sorted(CASES)


def test_sweep_every_api_and_version(sweep):
    """All (key, version) pairs; failures are collected so one run shows them all."""
    failures = []
    swept = 0
    for key in sorted(API_TABLE):
        spec = API_TABLE[key]
        for version in range(spec.min_version, spec.max_version + 1):
            swept += 1
            try:
                CASES[key](sweep, version)
            except Exception as exc:  # noqa: BLE001 - reported below with the pair
                failures.append(f"{spec.name} v{version}: {type(exc).__name__}: {exc}")
    assert sweep.broker.running, sweep.broker.log_tail(30)
    assert not failures, f"{len(failures)} of {swept} failed:\n" + "\n".join(failures)
