"""The classic group state machine, driven with a fake clock and store."""

import pytest

from kafkapy.coordinator import group as g
from kafkapy.coordinator.group_coordinator import CoordinatorConfig, GroupCoordinator
from kafkapy.coordinator.records import EMPTY_CONSUMER_ASSIGNMENT
from kafkapy.protocol.errors import ErrorCode as E


class FakeStore:
    num_partitions = 50

    def __init__(self):
        self.records = []  # (partition, key, value)
        self.fail = 0

    def append(self, partition, records):
        if self.fail:
            return self.fail
        self.records.extend((partition, k, v) for k, v in records)
        return 0

    def partition_exists(self, topic, partition):
        return topic == "t" and 0 <= partition < 6


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self):
        return self.now


@pytest.fixture
def env():
    clock, store = Clock(), FakeStore()
    coord = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=100,
                                               offsets_retention_ms=60_000), store, clock)

    def advance(ms):
        clock.now += ms
        coord.timers.run_due(clock.now)

    return coord, store, clock, advance


PROTO = [("range", b"meta-r"), ("roundrobin", b"meta-rr")]


def join(coord, member_id="", group="grp", version_v4=True, protocols=PROTO, instance=None,
         session=1000, rebalance=2000, ptype="consumer", v9=False):
    out = []
    coord.join_group(group, member_id, instance, version_v4, "cli", "/h", rebalance, session, ptype,
                     protocols, out.append, support_skipping_assignment=v9)
    return out


def sync(coord, member_id, generation, assignments=(), group="grp"):
    out = []
    coord.sync_group(group, generation, member_id, None, None, None, list(assignments), out.append)
    return out


def join_new(coord, advance=None, **kw):
    first = join(coord, **kw)
    assert first[0]["error_code"] == E.MEMBER_ID_REQUIRED
    return first[0]["member_id"], join(coord, member_id=first[0]["member_id"], **kw)


def test_member_id_required_only_from_v4(env):
    coord, *_ = env
    old = join(coord, version_v4=False)
    advance = env[3]
    advance(0)
    assert old[0]["error_code"] == E.NONE and old[0]["member_id"].startswith("cli-")
    new = join(coord, group="other")
    assert new[0]["error_code"] == E.MEMBER_ID_REQUIRED


def test_single_member_lifecycle(env):
    coord, store, clock, advance = env
    mid, res = join_new(coord)
    advance(0)
    assert res and res[0]["error_code"] == E.NONE and res[0]["leader"] == mid
    assert res[0]["members"][0]["metadata"] == b"meta-r"
    assert coord.groups["grp"].state == g.COMPLETING_REBALANCE
    s = sync(coord, mid, res[0]["generation_id"], [(mid, b"asg")])
    assert s == [dict(s[0], error_code=E.NONE, assignment=b"asg")]
    assert coord.groups["grp"].state == g.STABLE
    assert coord.heartbeat("grp", mid, None, 1) == E.NONE
    assert coord.heartbeat("grp", mid, None, 0) == E.ILLEGAL_GENERATION
    assert coord.heartbeat("grp", "nobody", None, 1) == E.UNKNOWN_MEMBER_ID
    assert coord.heartbeat("nogroup", mid, None, 1) == E.UNKNOWN_MEMBER_ID
    # The session expires without heartbeats: the group empties.
    advance(1001)
    assert coord.groups["grp"].state == g.EMPTY and coord.groups["grp"].generation_id == 2


def test_three_members_join_together_and_follower_gets_empty_assignment(env):
    coord, store, clock, advance = env
    ids, results = [], []
    coord.config.initial_rebalance_delay_ms = 100
    for _ in range(3):
        mid, res = join_new(coord)
        ids.append(mid)
        results.append(res)
    assert all(not r for r in results)  # parked during the initial delay
    advance(100)
    advance(100)
    assert all(r and r[0]["error_code"] == E.NONE for r in results)
    gen = results[0][0]["generation_id"]
    leader = results[0][0]["leader"]
    assert sum(1 for r in results if r[0]["members"]) == 1
    followers = [m for m in ids if m != leader]
    parked = sync(coord, followers[0], gen)
    assert parked == []
    lead = sync(coord, leader, gen, [(leader, b"L"), (followers[0], b"F0")])
    assert lead[0]["assignment"] == b"L" and parked[0]["assignment"] == b"F0"
    late = sync(coord, followers[1], gen)
    assert late[0]["error_code"] == E.NONE and late[0]["assignment"] == EMPTY_CONSUMER_ASSIGNMENT


def test_inconsistent_protocols_and_empty_protocol_list(env):
    coord, *_ = env
    assert join(coord, protocols=[])[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert "grp" not in coord.groups  # a refused first join leaves no group behind
    mid, res = join_new(coord)
    assert join(coord, protocols=[("sticky", b"")], version_v4=False)[0]["error_code"] == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert join(coord, ptype="connect", version_v4=False)[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_session_timeout_bounds_and_group_id(env):
    coord, *_ = env
    assert join(coord, session=10)[0]["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert join(coord, group="")[0]["error_code"] == E.INVALID_GROUP_ID
    assert join(coord, member_id="ghost")[0]["error_code"] == E.UNKNOWN_MEMBER_ID


def test_group_max_size(env):
    coord, store, clock, advance = env
    coord.config.max_size = 1
    mid, res = join_new(coord)
    advance(0)
    sync(coord, mid, 1, [(mid, b"")])
    assert join(coord, version_v4=False)[0]["error_code"] == E.GROUP_MAX_SIZE_REACHED


def test_rebalance_on_new_member_and_stale_generation_commit(env):
    coord, store, clock, advance = env
    a, ra = join_new(coord)
    advance(0)
    sync(coord, a, 1, [(a, b"x")])
    assert coord.commit_offsets("grp", a, None, 1, [("t", 0, 5, -1, "m")]) == {("t", 0): E.NONE}
    b, rb = join_new(coord)
    assert coord.groups["grp"].state == g.PREPARING_REBALANCE
    assert coord.heartbeat("grp", a, None, 1) == E.REBALANCE_IN_PROGRESS
    ra2 = join(coord, member_id=a)
    assert ra2 and rb and ra2[0]["generation_id"] == 2
    # Kafka checks CompletingRebalance before the member and generation.
    assert coord.commit_offsets("grp", a, None, 1, [("t", 0, 6, -1, "")]) == {("t", 0): E.REBALANCE_IN_PROGRESS}
    leader = ra2[0]["leader"]
    sync(coord, leader, 2, [(a, b""), (b, b"")])
    assert coord.commit_offsets("grp", a, None, 1, [("t", 0, 6, -1, "")]) == {("t", 0): E.ILLEGAL_GENERATION}
    assert coord.commit_offsets("grp", "zz", None, 2, [("t", 0, 6, -1, "")]) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    err, topics = coord.fetch_offsets("grp", [("t", [0, 1])])
    assert err == E.NONE and [(p, om.offset if om else -1) for p, om, _ in topics[0][1]] == [(0, 5), (1, -1)]


def test_commit_validation(env):
    coord, store, *_ = env
    assert coord.commit_offsets("simple", "", None, -1, [("t", 1, 3, -1, "x" * 5000), ("nope", 0, 1, -1, ""),
                                                        ("t", 2, 9, -1, "ok")]) == {
        ("t", 1): E.OFFSET_METADATA_TOO_LARGE, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("t", 2): E.NONE}
    assert coord.commit_offsets("gone", "m", None, 3, [("t", 0, 1, -1, "")]) == {("t", 0): E.ILLEGAL_GENERATION}
    store.fail = E.COORDINATOR_NOT_AVAILABLE
    assert coord.commit_offsets("simple", "", None, -1, [("t", 3, 1, -1, "")]) == \
        {("t", 3): E.COORDINATOR_NOT_AVAILABLE}


def test_leave_and_describe_and_delete(env):
    coord, store, clock, advance = env
    a, _ = join_new(coord)
    advance(0)
    sync(coord, a, 1, [(a, b"A")])
    d = coord.describe_group("grp")
    assert d["group_state"] == g.STABLE and d["protocol_data"] == "range"
    assert d["members"][0]["member_assignment"] == b"A"
    assert coord.describe_group("unknown")["group_state"] == g.DEAD
    assert coord.delete_groups(["grp", "unknown"]) == {"grp": E.NON_EMPTY_GROUP, "unknown": E.GROUP_ID_NOT_FOUND}
    assert coord.leave_group("grp", [(a, None), ("who", None)]) == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID])
    assert coord.groups["grp"].state == g.EMPTY
    assert coord.list_groups(("empty",)) == (E.NONE, [{"group_id": "grp", "protocol_type": "consumer",
                                                       "group_state": "Empty", "group_type": "classic"}])
    assert coord.list_groups(("empty",), ("CLASSIC",))[1][0]["group_id"] == "grp"
    assert coord.list_groups((), ("consumer",))[1] == []
    assert coord.delete_groups(["grp"]) == {"grp": E.NONE}
    assert "grp" not in coord.groups and store.records[-1][2] is None


def test_static_member_rejoins_without_rebalance_and_old_id_is_fenced(env):
    coord, store, clock, advance = env
    first = join(coord, instance="i1")
    advance(0)
    old = first[0]["member_id"]
    sync(coord, old, 1, [(old, b"mine")])
    again = join(coord, instance="i1")
    assert again[0]["error_code"] == E.NONE and again[0]["generation_id"] == 1
    new = again[0]["member_id"]
    assert new != old and coord.groups["grp"].state == g.STABLE
    assert sync(coord, new, 1)[0]["assignment"] == b"mine"
    assert coord.heartbeat("grp", old, "i1", 1) == E.FENCED_INSTANCE_ID
    assert coord.commit_offsets("grp", old, "i1", 1, [("t", 0, 1, -1, "")]) == {("t", 0): E.FENCED_INSTANCE_ID}


def _stable_static_pair(coord, advance):
    """A Stable group of static members i1 (leader) and i2 at generation 2."""
    first = join(coord, instance="i1")
    advance(0)
    i1 = first[0]["member_id"]
    sync(coord, i1, 1, [(i1, b"")])
    second = join(coord, instance="i2")
    rejoin = join(coord, member_id=i1, instance="i1")
    advance(0)
    i2 = second[0]["member_id"]
    assert rejoin[0]["generation_id"] == second[0]["generation_id"] == 2 and rejoin[0]["leader"] == i1
    sync(coord, i1, 2, [(i1, b"A1"), (i2, b"A2")])
    sync(coord, i2, 2)
    assert coord.groups["grp"].state == g.STABLE
    return i1, i2


def test_static_leader_rejoining_is_told_to_skip_assignment_from_v9(env):
    coord, store, clock, advance = env
    i1, i2 = _stable_static_pair(coord, advance)
    # Before v9 (KIP-814): the old leader id is answered, so the returning
    # leader acts as a follower: no members, no skip.
    before = join(coord, instance="i1")[0]
    assert (before["error_code"], before["leader"], before["members"], before["skip_assignment"]) == \
        (E.NONE, i1, [], False)
    new_leader = before["member_id"]
    # From v9: the returning leader is answered as the leader, with the
    # members, and skips the assignment; the group stays Stable at generation 2.
    after = join(coord, instance="i1", v9=True)[0]
    assert after["error_code"] == E.NONE and after["leader"] == after["member_id"] != new_leader
    assert after["skip_assignment"] is True and after["generation_id"] == 2
    assert {m["group_instance_id"] for m in after["members"]} == {"i1", "i2"}
    assert coord.groups["grp"].state == g.STABLE
    # A returning follower with v9 is not the leader: no members, no skip.
    again = join(coord, instance="i2", v9=True)[0]
    assert (again["skip_assignment"], again["members"], again["leader"]) == (False, [], after["member_id"])
    assert sync(coord, again["member_id"], 2)[0]["assignment"] == b"A2"


def test_rebalance_timeout_drops_members_that_do_not_rejoin(env):
    coord, store, clock, advance = env
    a, _ = join_new(coord)
    advance(0)
    sync(coord, a, 1, [(a, b"")])
    b, rb = join_new(coord, session=5000, rebalance=3000)
    for _ in range(3):
        advance(900)
        coord.heartbeat("grp", a, None, 1)
    advance(400)
    assert rb[0]["error_code"] == E.NONE and rb[0]["members"] and list(coord.groups["grp"].members) == [b]


def test_load_restores_groups_and_offsets(env):
    coord, store, clock, advance = env
    a, _ = join_new(coord)
    advance(0)
    sync(coord, a, 1, [(a, b"A")])
    coord.commit_offsets("grp", a, None, 1, [("t", 0, 17, 3, "meta")])
    coord.commit_offsets("simple", "", None, -1, [("t", 1, 4, -1, "")])
    fresh = GroupCoordinator(coord.config, store, clock)
    fresh.load(store.records)
    grp = fresh.groups["grp"]
    assert grp.state == g.STABLE and grp.generation_id == 1 and list(grp.members) == [a]
    assert grp.members[a].assignment == b"A"
    assert grp.offsets[("t", 0)].offset == 17 and grp.offsets[("t", 0)].metadata == "meta"
    assert fresh.groups["simple"].offsets[("t", 1)].offset == 4
    # The loaded member must heartbeat within its session or be removed.
    clock.now += 1001
    fresh.timers.run_due(clock.now)
    assert fresh.groups["grp"].state == g.EMPTY


def test_offsets_of_empty_groups_expire(env):
    coord, store, clock, advance = env
    coord.commit_offsets("simple", "", None, -1, [("t", 1, 4, -1, "")])
    advance(59_000)
    assert coord.expire_offsets() == 0
    advance(1_000)
    assert coord.expire_offsets() == 1
    assert "simple" not in coord.groups


def test_loading_answers(env):
    coord, *_ = env
    coord.loading = True
    assert join(coord)[0]["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert coord.heartbeat("grp", "m", None, 1) == E.NONE
    assert coord.fetch_offsets("grp", None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert coord.list_groups()[0] == E.COORDINATOR_LOAD_IN_PROGRESS


# -- cluster mode: the coordinator serves only the partitions it leads ------------------

def test_groups_of_partitions_not_led_here_get_not_coordinator(env):
    coord, *_ = env
    coord.owned_partitions = set()
    assert join(coord)[0]["error_code"] == E.NOT_COORDINATOR
    coord.owned_partitions = {coord._partition("grp")}
    assert join(coord)[0]["error_code"] == E.MEMBER_ID_REQUIRED
    coord.loading_partitions = {coord._partition("grp")}
    assert join(coord)[0]["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert coord.list_groups()[0] == E.COORDINATOR_LOAD_IN_PROGRESS


def test_unloading_a_partition_answers_waiting_members_and_forgets_its_groups(env):
    coord, store, clock, advance = env
    partition = coord._partition("grp")
    coord.owned_partitions = {partition}
    mid, first = join_new(coord)
    advance(0)
    generation = first[0]["generation_id"]
    # A second member joins: the rebalance parks its JoinGroup until the first rejoins.
    other, parked = join_new(coord)
    assert parked == []
    assert coord.unload_partition(partition) == 1
    assert parked and parked[0]["error_code"] == E.NOT_COORDINATOR
    assert "grp" not in coord.groups and partition not in coord.owned_partitions
    # The group's timers were cancelled: its session deadlines pass without effect.
    advance(10_000)
    assert "grp" not in coord.groups
    assert sync(coord, mid, generation, [(mid, b"a")])[0]["error_code"] == E.NOT_COORDINATOR
