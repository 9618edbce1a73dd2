"""KIP-848 consumer groups: heartbeat state machine, revoke-before-assign,
assignors, offsets v9, classic/consumer conversion, persistence of the epoch."""

import uuid
from types import SimpleNamespace

import pytest

from kafkapy.coordinator import consumer_group as cg
from kafkapy.coordinator.assignors import range_assign, uniform_assign
from kafkapy.coordinator.group_coordinator import CoordinatorConfig, GroupCoordinator
from kafkapy.coordinator.records import ConsumerGroupKey, decode_consumer_group_metadata_value, decode_key
from kafkapy.protocol.errors import ErrorCode as E

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)


class FakeStore:
    num_partitions = 50

    def __init__(self):
        self.records = []
        self.topic_map = {"t": (T, 6), "u": (U, 2)}

    def append(self, partition, records):
        self.records.extend((partition, k, v) for k, v in records)
        return 0

    def partition_exists(self, topic, partition):
        return topic in self.topic_map and 0 <= partition < self.topic_map[topic][1]

    def topics(self):
        return dict(self.topic_map)


class Clock:
    now = 1_000_000

    def __call__(self):
        return self.now


@pytest.fixture
def env():
    clock, store = Clock(), FakeStore()
    coord = GroupCoordinator(CoordinatorConfig(consumer_session_timeout_ms=3000,
                                               consumer_heartbeat_interval_ms=500), store, clock)

    def advance(ms):
        clock.now += ms
        coord.timers.run_due(clock.now)

    return coord, store, advance


def hb(coord, member_id, epoch, owned=None, topics=("t",), group="g", version=1, regex=None,
       assignor=None, rebalance_timeout=5000):
    if owned is not None:
        owned = [SimpleNamespace(topic_id=tid, partitions=tuple(ps)) for tid, ps in owned.items()]
    elif epoch == 0:
        owned = []
    req = SimpleNamespace(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None,
                          rack_id=None, rebalance_timeout=rebalance_timeout if epoch == 0 else -1,
                          subscribed_topic_names=list(topics) if topics is not None else None,
                          subscribed_topic_regex=regex, server_assignor=assignor, topic_partitions=owned)
    return coord.consumer_group_heartbeat(version, req, "cli", "/h")


def assigned(resp):
    out = {}
    for tp in resp["assignment"]["topic_partitions"]:
        out[tp["topic_id"]] = set(tp["partitions"])
    return out


def test_single_member_gets_everything(env):
    coord, store, _ = env
    r = hb(coord, "m1", 0)
    assert r["error_code"] == E.NONE and r["member_epoch"] == 1 and r["heartbeat_interval"] == 500
    assert assigned(r) == {T: set(range(6))}
    assert coord.groups["g"].state == cg.STABLE
    epochs = [decode_consumer_group_metadata_value(v) for _p, k, v in store.records
              if decode_key(k) == ConsumerGroupKey("g")]
    assert epochs == [1]


def test_revoke_before_assign(env):
    coord, _, _ = env
    a = assigned(hb(coord, "a", 0))
    r = hb(coord, "b", 0)
    # b joins at epoch 2 but every partition is still a's: nothing yet.
    assert r["member_epoch"] == 2 and assigned(r) == {}
    group = coord.groups["g"]
    assert group.state == cg.RECONCILING
    # a is asked to revoke 3 partitions and stays at epoch 1.
    r = hb(coord, "a", 1, owned=a)
    assert r["member_epoch"] == 1
    kept = assigned(r)
    assert len(kept[T]) == 3
    # b still gets nothing while a reports the revoked partitions.
    r = hb(coord, "b", 2, owned={})
    assert r["assignment"] is None or assigned(r) == {}
    # a acknowledges (reports only what it kept): epoch 2.
    r = hb(coord, "a", 1, owned=kept)
    assert r["member_epoch"] == 2
    r = hb(coord, "b", 2, owned={})
    got = assigned(r)
    assert got[T] == set(range(6)) - kept[T]
    assert group.state == cg.STABLE


def test_fenced_and_unknown(env):
    coord, _, _ = env
    hb(coord, "a", 0)
    assert hb(coord, "a", 5, owned={})["error_code"] == E.FENCED_MEMBER_EPOCH
    assert hb(coord, "zz", 1, owned={})["error_code"] == E.UNKNOWN_MEMBER_ID
    assert hb(coord, "a", 0, rebalance_timeout=-1)["error_code"] == E.INVALID_REQUEST
    assert hb(coord, "", 0)["error_code"] == E.INVALID_REQUEST  # v1: client-made ids
    assert hb(coord, "", 0, version=0)["member_id"]  # v0: the coordinator makes one
    assert hb(coord, "x", 0, assignor="sticky")["error_code"] == E.UNSUPPORTED_ASSIGNOR
    assert hb(coord, "x", 0, regex="(")["error_code"] == E.INVALID_REGULAR_EXPRESSION
    assert hb(coord, "x", 3, group="nope", owned={})["error_code"] == E.UNKNOWN_MEMBER_ID


def test_session_timeout_and_leave(env):
    coord, _, advance = env
    hb(coord, "a", 0)
    hb(coord, "b", 0)
    r = hb(coord, "c", 0)
    group = coord.groups["g"]
    assert len(group.members) == 3
    r = hb(coord, "c", -1)
    assert r["member_epoch"] == -1 and "c" not in group.members
    for _ in range(10):
        advance(400)
        hb(coord, "a", group.members["a"].member_epoch, owned=group.members["a"].assigned)
    assert "b" not in group.members  # expired
    assert group.members["a"].assigned == {T: set(range(6))}


def test_revocation_timeout_fences(env):
    coord, _, advance = env
    hb(coord, "a", 0, rebalance_timeout=1000)
    hb(coord, "b", 0)
    group = coord.groups["g"]
    hb(coord, "a", 1, owned={T: set(range(6))})  # a must revoke but never does
    assert group.members["a"].state == cg.M_UNREVOKED
    advance(600)
    hb(coord, "b", 2, owned={})
    advance(600)
    assert "a" not in group.members
    r = hb(coord, "b", 2, owned={})
    assert r["error_code"] == E.FENCED_MEMBER_EPOCH or r["member_epoch"] >= 2


def test_offsets_v9(env):
    coord, _, _ = env
    hb(coord, "a", 0)
    offsets = [("t", 0, 10, -1, "")]
    assert coord.commit_offsets("g", "a", None, 1, offsets, api_version=9) == {("t", 0): E.NONE}
    assert coord.commit_offsets("g", "a", None, 0, offsets, api_version=9) == {("t", 0): E.STALE_MEMBER_EPOCH}
    assert coord.commit_offsets("g", "x", None, 1, offsets, api_version=9) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert coord.commit_offsets("g", "a", None, 1, offsets, api_version=8) == {("t", 0): E.UNSUPPORTED_VERSION}
    assert coord.commit_offsets("gone", "a", None, 1, offsets, api_version=9) == {("t", 0): E.GROUP_ID_NOT_FOUND}
    err, found = coord.fetch_offsets("g", [("t", [0])], member_id="a", member_epoch=1)
    assert err == E.NONE and found[0][1][0][1].offset == 10
    assert coord.fetch_offsets("g", [("t", [0])], member_id="a", member_epoch=7)[0] == E.STALE_MEMBER_EPOCH
    assert coord.fetch_offsets("g", [("t", [0])])[0] == E.NONE  # admin


def test_classic_and_consumer_do_not_mix(env):
    coord, _, _ = env
    hb(coord, "a", 0)
    out = []
    coord.join_group("g", "", None, True, "c", "/h", 5000, 10000, "consumer", [("range", b"")], out.append)
    assert out[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    coord.commit_offsets("g", "a", None, 1, [("t", 1, 5, -1, "")], api_version=9)
    hb(coord, "a", -1)
    # Empty consumer group + classic JoinGroup: converted; offsets kept.
    out = []
    coord.join_group("g", "", None, True, "c", "/h", 5000, 10000, "consumer", [("range", b"")], out.append)
    assert out[0]["error_code"] == E.MEMBER_ID_REQUIRED
    assert getattr(coord.groups["g"], "type", "classic") == "classic"
    assert coord.groups["g"].offsets[("t", 1)].offset == 5
    # A non-empty classic group refuses consumer members.
    coord.join_group("g", out[0]["member_id"], None, True, "c", "/h", 5000, 10000, "consumer",
                     [("range", b"")], out.append)
    assert hb(coord, "b", 0)["error_code"] == E.GROUP_ID_NOT_FOUND


def test_describe_and_list(env):
    coord, _, _ = env
    hb(coord, "a", 0)
    [d] = coord.consumer_group_describe(["g"])
    assert d["error_code"] == E.NONE and d["group_state"] == "Stable" and d["assignor_name"] == "uniform"
    assert d["members"][0]["assignment"]["topic_partitions"][0]["topic_name"] == "t"
    assert coord.consumer_group_describe(["nope"])[0]["error_code"] == E.GROUP_ID_NOT_FOUND
    assert coord.list_groups()[1] == [{"group_id": "g", "protocol_type": "consumer", "group_state": "Stable",
                                       "group_type": "consumer"}]
    # ListGroups v5's types filter (KIP-848), without case; unknown types match nothing.
    assert coord.list_groups((), ("Consumer",))[1][0]["group_id"] == "g"
    assert coord.list_groups((), ("classic",))[1] == []
    assert coord.list_groups((), ("share",))[1] == []


def test_restart_keeps_epoch_and_offsets(env):
    coord, store, _ = env
    hb(coord, "a", 0)
    coord.commit_offsets("g", "a", None, 1, [("t", 2, 7, -1, "")], api_version=9)
    fresh = GroupCoordinator(CoordinatorConfig(), store, Clock())
    fresh.load(store.records)
    group = fresh.groups["g"]
    assert group.type == "consumer" and group.group_epoch == 1 and group.offsets[("t", 2)].offset == 7
    # The member and its assignment were replayed: it carries on at its epoch.
    assert group.state == cg.STABLE and group.members["a"].client_host == "/h"
    r = hb(fresh, "a", 1, owned={T: set(range(6))})
    assert r["error_code"] == E.NONE and r["member_epoch"] == 1 and r["assignment"] is None
    # A new member continues the group epoch (2) and takes half after a revokes.
    r = hb(fresh, "b", 0)
    assert r["member_epoch"] == 2 and fresh.groups["g"].group_epoch == 2


def test_regex_and_metadata_change(env):
    coord, store, _ = env
    r = hb(coord, "a", 0, topics=None, regex="t|u")
    assert assigned(r) == {T: set(range(6)), U: {0, 1}}
    store.topic_map["u"] = (U, 4)  # partitions added
    r = hb(coord, "a", r["member_epoch"], owned=assigned(r))
    assert assigned(r)[U] == {0, 1, 2, 3}


def test_assignors_balance_and_stick():
    members = {m: {"t"} for m in ("a", "b", "c")}
    topics = {"t": (T, 6)}
    first = uniform_assign(members, topics, {})
    assert sorted(len(a[T]) for a in first.values()) == [2, 2, 2]
    members["d"] = {"t"}
    second = uniform_assign(members, topics, first)
    moved = sum(len(first[m][T] - second[m].get(T, set())) for m in first)
    assert moved == 1 and sorted(len(a.get(T, ())) for a in second.values()) == [1, 1, 2, 2]
    r = range_assign({"a": {"t"}, "b": {"t"}}, {"t": (T, 5)}, {})
    assert r == {"a": {T: {0, 1, 2}}, "b": {T: {3, 4}}}


def _live_keys(records):
    """The keys whose last record is not a tombstone, decoded."""
    last = {}
    for _p, k, v in records:
        last[k] = v
    return {decode_key(k) for k, v in last.items() if v is not None}


def test_reconciling_group_replays_mid_revocation(env):
    """Restart while a member is revoking: epochs, pending revocation, targets
    and the partition owners all come back, and the move completes."""
    coord, store, _ = env
    a = assigned(hb(coord, "a", 0))
    hb(coord, "b", 0)
    kept = assigned(hb(coord, "a", 1, owned=a))  # a must revoke 3
    before = coord.groups["g"]
    fresh = GroupCoordinator(CoordinatorConfig(), store, Clock())
    fresh.load(store.records)
    group = fresh.groups["g"]
    assert (group.group_epoch, group.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert group.state == cg.RECONCILING
    ma, mb = group.members["a"], group.members["b"]
    assert (ma.member_epoch, ma.state, ma.assigned) == (1, cg.M_UNREVOKED, kept)
    assert ma.pending_revocation == before.members["a"].pending_revocation
    assert (mb.member_epoch, mb.state) == (2, cg.M_UNRELEASED)
    assert group.target_assignment == before.target_assignment
    assert group.partition_epochs == before.partition_epochs
    # b still waits while a holds the revoked partitions, then gets them.
    r = hb(fresh, "b", 2, owned={})
    assert r["assignment"] is None or assigned(r) == {}
    assert hb(fresh, "a", 1, owned=kept)["member_epoch"] == 2
    r = hb(fresh, "b", 2, owned={})
    assert assigned(r)[T] == set(range(6)) - kept[T] and group.state == cg.STABLE


def test_leave_and_delete_write_tombstones(env):
    coord, store, advance = env
    hb(coord, "a", 0)
    hb(coord, "b", 0)
    assert {k.member_id for k in _live_keys(store.records) if getattr(k, "version", 0) == 5} == {"a", "b"}
    r = hb(coord, "b", -1)
    assert r["error_code"] == E.NONE
    live = _live_keys(store.records)
    assert not any(getattr(k, "member_id", None) == "b" for k in live)
    advance(3001)  # a's session expires: the group is Empty
    assert coord.groups["g"].state == cg.EMPTY
    assert coord.delete_groups(["g"]) == {"g": E.NONE}
    assert _live_keys(store.records) == set()
    fresh = GroupCoordinator(CoordinatorConfig(), store, Clock())
    fresh.load(store.records)
    assert "g" not in fresh.groups
