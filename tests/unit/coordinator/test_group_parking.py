"""A __consumer_offsets append the followers have not replicated yet parks its
request instead of holding the group coordinator (Kafka's DelayedProduce
for storeOffsets / storeGroup): driven sans-IO with a store whose appends
stay pending until the test settles them."""

import uuid

import pytest

from kafkapy.coordinator import group as g
from kafkapy.coordinator.group_coordinator import CoordinatorConfig, GroupCoordinator
from kafkapy.coordinator.offsets_topic import PendingAppend
from kafkapy.protocol.errors import ErrorCode as E


class ParkingStore:
    """``begin_append`` / ``poll_append`` as OffsetsTopicStore answers them:
    while ``hold`` is set an append waits until ``settle`` (or ``fail``)."""

    num_partitions = 50

    def __init__(self):
        self.records = []  # (partition, key, value), in append order
        self.hold = False
        self.outcomes = {}  # id(PendingAppend) -> error code once settled
        self.next_offset = 0
        self.verifications = []  # what each append was to check (KIP-890)

    def begin_append(self, partition, records, producer=None, verification=None):
        self.verifications.append(verification)
        base = self.next_offset
        self.next_offset += len(records)
        self.records.extend((partition, k, v) for k, v in records)
        if not self.hold:
            return E.NONE, base, None
        return E.NONE, base, PendingAppend(partition, self.next_offset, base, 0.0)

    def poll_append(self, pending):
        error = self.outcomes.get(id(pending))
        return None if error is None else (error, pending.first_offset if error == E.NONE else -1)

    def settle(self, coord, error=E.NONE):
        for pending, *_ in coord.manager._parked:
            self.outcomes[id(pending)] = error

    def append(self, partition, records):
        return self.begin_append(partition, records)[0]

    def partition_exists(self, topic, partition):
        return topic == "t" and 0 <= partition < 6


@pytest.fixture
def env():
    clock = [1_000_000]
    store = ParkingStore()
    coord = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=100),
                             store, lambda: clock[0])
    return coord, store


def commit(coord, group, offset, partition=0):
    out = []
    coord.commit_offsets(group, "", None, -1, [("t", partition, offset, -1, "m")], respond=out.append)
    return out


def fetch(coord, group, require_stable=False):
    error, found = coord.fetch_offsets(group, [("t", [0])], require_stable)
    assert error == E.NONE
    (_p, om, code), = found[0][1]
    return (om.offset if om is not None else None), code


def test_a_parked_commit_is_answered_and_applied_only_once_replicated(env):
    coord, store = env
    assert commit(coord, "a", 5) == [{("t", 0): E.NONE}]  # settles inline: as before
    store.hold = True
    answer = commit(coord, "a", 9)
    assert answer == [] and len(coord.manager._parked) == 1
    # Pending: a plain fetch sees the last committed offset, a stable one is told to wait.
    assert fetch(coord, "a") == (5, E.NONE)
    assert fetch(coord, "a", require_stable=True) == (None, E.UNSTABLE_OFFSET_COMMIT)
    assert coord.poll_appends(0) == 0 + 1  # still waiting: look again in 1 ms
    assert coord.poll_appends(0) == 2  # nothing moved: backs off
    assert answer == []
    store.settle(coord)
    assert coord.poll_appends(0) is None
    assert answer == [{("t", 0): E.NONE}]
    assert fetch(coord, "a") == (9, E.NONE)
    assert fetch(coord, "a", require_stable=True) == (9, E.NONE)
    assert coord.pending_offset_commits == {}


def test_other_groups_are_served_while_one_commit_waits(env):
    coord, store = env
    store.hold = True
    waiting = commit(coord, "a", 1)
    store.hold = False
    assert commit(coord, "b", 2) == [{("t", 0): E.NONE}]
    assert fetch(coord, "b", require_stable=True) == (2, E.NONE)
    assert waiting == [] and fetch(coord, "a") == (None, E.NONE)
    store.settle(coord)
    coord.poll_appends(0)
    assert waiting == [{("t", 0): E.NONE}] and fetch(coord, "a") == (1, E.NONE)


def test_a_timed_out_commit_answers_the_mapped_error_and_applies_nothing(env):
    coord, store = env
    commit(coord, "a", 5)
    store.hold = True
    answer = commit(coord, "a", 9)
    # OffsetsTopicStore.poll_append maps REQUEST_TIMED_OUT to COORDINATOR_NOT_AVAILABLE.
    store.settle(coord, E.COORDINATOR_NOT_AVAILABLE)
    coord.poll_appends(0)
    assert answer == [{("t", 0): E.COORDINATOR_NOT_AVAILABLE}]
    assert fetch(coord, "a", require_stable=True) == (5, E.NONE)
    assert coord.pending_offset_commits == {}


def test_an_offsets_only_group_created_by_a_failed_parked_commit_goes(env):
    coord, store = env
    store.hold = True
    commit(coord, "fresh", 3)
    assert "fresh" in coord.groups  # kept while its commit is pending
    store.settle(coord, E.COORDINATOR_NOT_AVAILABLE)
    coord.poll_appends(0)
    assert "fresh" not in coord.groups


def test_losing_the_partition_answers_parked_commits_not_coordinator(env):
    coord, store = env
    coord.owned_partitions = set(range(50))
    store.hold = True
    answer = commit(coord, "a", 9)
    other = commit(coord, "b", 4)
    partition = coord._partition("a")
    assert coord._partition("b") != partition
    coord.unload_partition(partition)
    assert answer == [{("t", 0): E.NOT_COORDINATOR}]
    assert other == [] and len(coord.manager._parked) == 1
    assert "a" not in coord.pending_offset_commits
    store.settle(coord)
    coord.poll_appends(0)
    assert other == [{("t", 0): E.NONE}]


def test_two_parked_commits_of_one_partition_apply_in_order(env):
    coord, store = env
    store.hold = True
    first, second = commit(coord, "a", 1), commit(coord, "a", 2)
    store.settle(coord)
    coord.poll_appends(0)
    assert first and second and fetch(coord, "a", require_stable=True) == (2, E.NONE)


def test_a_parked_txn_offset_commit_is_answered_once_replicated(env):
    coord, store = env
    store.hold = True
    out = []
    coord.txn_commit_offsets("tg", 7, 0, "", None, -1, [("t", 1, 11, -1, "")], respond=out.append)
    assert out == []
    error, found = coord.fetch_offsets("tg", [("t", [1])], True)
    assert found[0][1][0][2] == E.UNSTABLE_OFFSET_COMMIT
    store.settle(coord)
    coord.poll_appends(0)
    assert out == [{("t", 1): E.NONE}]
    # Still pending: it waits for the producer's marker now.
    assert coord.fetch_offsets("tg", [("t", [1])], True)[1][0][1][0][2] == E.UNSTABLE_OFFSET_COMMIT
    coord.manager._complete_txn_offsets(coord._partition("tg"), 7, True)
    assert coord.fetch_offsets("tg", [("t", [1])], True)[1][0][1][0][1].offset == 11


def test_a_failed_parked_txn_offset_commit_leaves_nothing_pending(env):
    coord, store = env
    store.hold = True
    out = []
    coord.txn_commit_offsets("tg", 7, 0, "", None, -1, [("t", 1, 11, -1, "")], respond=out.append)
    store.settle(coord, E.NOT_COORDINATOR)
    coord.poll_appends(0)
    assert out == [{("t", 1): E.NOT_COORDINATOR}] and "tg" not in coord.pending_txn_offsets


class Verifier:
    """A TxnOffsetCommit's ``verify``: remembers each question; the test answers it."""

    def __init__(self):
        self.asked = []  # (topic, partition, then)

    def __call__(self, topic, partition, then):
        self.asked.append((topic, partition, then))


def test_a_txn_offset_commit_waits_for_its_verification_then_appends_with_its_token(env):
    coord, store = env
    verify, out = Verifier(), []
    coord.txn_commit_offsets("tg", 7, 0, "", None, -1, [("t", 1, 11, -1, "")], respond=out.append, verify=verify)
    ((topic, partition, then),) = verify.asked
    assert (topic, partition) == ("__consumer_offsets", coord._partition("tg"))
    assert out == [] and store.records == []  # nothing appended before the answer
    then(E.NONE, ("token",))
    assert out == [{("t", 1): E.NONE}] and store.verifications == [("token",)]
    assert coord.fetch_offsets("tg", [("t", [1])], True)[1][0][1][0][2] == E.UNSTABLE_OFFSET_COMMIT


def test_a_refused_verification_answers_every_partition_and_leaves_nothing_pending(env):
    coord, store = env
    for answer, expected in ((E.INVALID_TXN_STATE, E.INVALID_TXN_STATE),
                             (E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_EPOCH),
                             # Kafka's maybeConvertOffsetCommitError: retried without a lookup
                             (E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS),
                             (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE)):
        verify, out = Verifier(), []
        coord.txn_commit_offsets("tg", 7, 0, "", None, -1, [("t", 1, 11, -1, ""), ("t", 2, 3, -1, "")],
                                 respond=out.append, verify=verify)
        verify.asked[0][2](answer, ("token",))
        assert out == [{("t", 1): expected, ("t", 2): expected}]
    assert store.records == [] and "tg" not in coord.pending_txn_offsets
    assert coord.fetch_offsets("tg", [("t", [1])], True)[1][0][1][0][2] == E.NONE


def test_a_group_not_served_here_is_answered_before_any_verification(env):
    coord, store = env
    coord.owned_partitions = set()  # cluster mode, this broker leads none of __consumer_offsets
    verify, out = Verifier(), []
    coord.txn_commit_offsets("tg", 7, 0, "", None, -1, [("t", 1, 11, -1, "")], respond=out.append, verify=verify)
    assert verify.asked == [] and out == [{("t", 1): E.NOT_COORDINATOR}]


def test_a_group_unloaded_while_verifying_answers_not_coordinator(env):
    coord, store = env
    verify, out = Verifier(), []
    coord.txn_commit_offsets("tg", 7, 0, "", None, -1, [("t", 1, 11, -1, "")], respond=out.append, verify=verify)
    coord.owned_partitions = set()
    verify.asked[0][2](E.NONE, ("token",))
    assert out == [{("t", 1): E.NOT_COORDINATOR}] and store.records == []


def leader_syncs_parked(coord, store):
    """A one-member group "sg" whose leader's SyncGroup waits for its append:
    (member id, the SyncGroup answers)."""
    joined = []
    coord.join_group("sg", "", None, False, "cli", "/h", 2000, 1000, "consumer", [("range", b"m")],
                     joined.append)
    coord.timers.run_due(10**12)
    member = joined[0]["member_id"]
    store.hold = True
    synced = []
    coord.sync_group("sg", 1, member, None, None, None, [(member, b"part")], synced.append)
    return member, synced


def test_the_leaders_sync_group_waits_for_its_assignment(env):
    coord, store = env
    member, synced = leader_syncs_parked(coord, store)
    assert synced == [] and coord.groups["sg"].is_(g.COMPLETING_REBALANCE)
    assert coord.heartbeat("sg", member, None, 1) == E.NONE  # the group is served meanwhile
    store.settle(coord)
    coord.poll_appends(0)
    assert synced[0]["error_code"] == E.NONE and synced[0]["assignment"] == b"part"
    assert coord.groups["sg"].is_(g.STABLE)


def test_unload_answers_a_parked_sync_group_not_coordinator(env):
    coord, store = env
    coord.owned_partitions = set(range(50))
    _member, synced = leader_syncs_parked(coord, store)
    coord.unload_partition(coord._partition("sg"))
    assert [s["error_code"] for s in synced] == [E.NOT_COORDINATOR]
    assert coord.manager._parked == [] and "sg" not in coord.groups


def consumer_heartbeat(coord, member_id, epoch, leave=False):
    from types import SimpleNamespace

    req = SimpleNamespace(group_id="cg", member_id=member_id, member_epoch=-1 if leave else epoch, instance_id=None,
                          rack_id=None, rebalance_timeout=5000 if epoch == 0 else -1, subscribed_topic_names=["t"],
                          subscribed_topic_regex=None, server_assignor=None, topic_partitions=[])
    out = []
    coord.consumer_group_heartbeat(1, req, "cli", "/h", respond=out.append)
    return out


def test_a_kip848_join_is_answered_once_its_records_settle(env):
    coord, store = env
    store.topics = lambda: {"t": (uuid.UUID(int=1), 6)}
    store.hold = True
    joined = consumer_heartbeat(coord, "m1", 0)
    assert joined == [] and len(coord.manager._parked) == 1
    store.settle(coord)
    coord.poll_appends(0)
    assert joined[0]["error_code"] == E.NONE and joined[0]["member_epoch"] == 1
    # A heartbeat that changes nothing writes nothing: answered at once.
    assert consumer_heartbeat(coord, "m1", 1)[0]["error_code"] == E.NONE
    left = consumer_heartbeat(coord, "m1", 1, leave=True)
    assert left == []
    store.settle(coord, E.NOT_COORDINATOR)
    coord.poll_appends(0)
    assert left[0]["error_code"] == E.NOT_COORDINATOR


def test_a_commit_settling_inline_applies_after_the_earlier_parked_one(env):
    coord, store = env
    store.hold = True
    first = commit(coord, "a", 1)
    store.settle(coord)  # the high watermark passed it, not polled yet
    store.hold = False
    assert commit(coord, "a", 2) == [{("t", 0): E.NONE}]
    assert first == [{("t", 0): E.NONE}] and coord.manager._parked == []
    assert fetch(coord, "a", require_stable=True) == (2, E.NONE)


def test_a_parked_commit_whose_completion_fails_is_still_answered(env, monkeypatch):
    coord, store = env
    store.hold = True
    answer = commit(coord, "a", 9)

    def broken(*_args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(coord.manager, "_offsets_stored", broken)
    store.settle(coord)
    coord.poll_appends(0)
    assert answer == [{("t", 0): E.UNKNOWN_SERVER_ERROR}]
