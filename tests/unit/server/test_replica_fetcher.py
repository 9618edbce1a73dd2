"""The replica fetcher's decisions and the leader's answer to a follower's
fetch, in-process: Kafka's fetcher hash, the truncation offset for a
diverging epoch (Kafka's getOffsetTruncationState), whole batches only, the
leader's last-fetched-epoch check (Kafka's readRecords) and what the Fetch
handler answers a follower (unknown replica, diverging epoch, out of range,
the wake after its fetch moved the high watermark). Real logs in temporary
dirs on a real shared table."""

from types import SimpleNamespace

import pytest

from kafkapy.client._schema import build
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import Partition
from kafkapy.server.handlers import RequestContext
from kafkapy.server.handlers import fetch as fetch_handler
from kafkapy.server.handlers.fetch import diverging_epoch
from kafkapy.server.replica_fetcher import fetcher_id_for, java_string_hash, truncation_offset, whole_batches

from support.storage import make_batch, open_log, records_of

LEADER, FOLLOWER, OTHER = 0, 1, 2
NONE, OUT_OF_RANGE = ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE


# -- which fetcher --------------------------------------------------------------------
def test_java_string_hash_matches_java():
    # Values printed by java.lang.String.hashCode (OpenJDK 17).
    assert java_string_hash("") == 0
    assert java_string_hash("foo") == 101574
    assert java_string_hash("hello world") == 1794106052
    assert java_string_hash("__consumer_offsets") == -970371369  # wraps negative
    assert java_string_hash("\u00e9") == 233
    assert java_string_hash("topic-\u00fc\u4e2d") == -957315569


def test_fetcher_id_is_kafkas_abs_31_hash_plus_partition_mod_n():
    # Utils.abs(31 * "foo".hashCode + p) % n, computed by hand.
    assert [fetcher_id_for("foo", p, 3) for p in range(4)] == [(31 * 101574 + p) % 3 for p in range(4)]
    # A negative hash wrapping in 32 bits; Java printed 1 for this one.
    assert fetcher_id_for("__consumer_offsets", 5, 7) == 1
    assert {fetcher_id_for("t", p, 1) for p in range(50)} == {0}
    assert {fetcher_id_for("t", p, 4) for p in range(50)} == {0, 1, 2, 3}


# -- where a follower truncates ----------------------------------------------------------
@pytest.mark.parametrize("leader, local, log_end_offset, fetch_offset, expected", [
    # The leader has the epoch and it ends before the follower's end: truncate to it.
    ((1, 3), (1, 5), 5, 5, (3, True)),
    # Both ends past the follower's log end offset: nothing to cut.
    ((1, 9), (1, 9), 5, 5, (5, True)),
    # The follower's own epoch ends first (it saw a later epoch start earlier).
    ((2, 8), (2, 6), 9, 9, (6, True)),
    # The leader answered an epoch the follower does not have (its floor is
    # epoch 1 ending at 4): cut to 4 and ask again.
    ((3, 7), (1, 4), 9, 9, (4, False)),
    # Below every epoch the follower tracks: the leader's offset alone.
    ((1, 2), (-1, -1), 6, 6, (2, True)),
    # The leader knows no end offset: keep the fetch offset.
    ((-1, -1), (1, 4), 6, 6, (6, True)),
    # An epoch-less answer (old protocol): the leader's offset, capped.
    ((-1, 4), (1, 4), 6, 6, (4, True)),
])
def test_truncation_offset(leader, local, log_end_offset, fetch_offset, expected):
    assert truncation_offset(leader[0], leader[1], local, log_end_offset, fetch_offset) == expected


def test_whole_batches_drops_a_cut_last_batch():
    one, two = make_batch(2), make_batch(3)
    data = one + two
    assert bytes(whole_batches(data)) == data
    assert bytes(whole_batches(data[:-1])) == one
    assert bytes(whole_batches(data[:len(one) + 11])) == one
    assert bytes(whole_batches(one[:20])) == b""
    assert whole_batches(b"") == b"" and whole_batches(None) == b""


# -- the leader's check of the last fetched epoch ---------------------------------------
@pytest.mark.parametrize("epoch_end, last_fetched, fetch_offset, log_start, expected", [
    ((3, 10), 3, 10, 0, (NONE, None)),  # same epoch, the follower is at its end: read
    ((3, 12), 3, 10, 0, (NONE, None)),  # the current epoch goes on: read
    ((3, 8), 3, 10, 0, (NONE, (3, 8))),  # the follower has more of the epoch than the leader
    ((2, 10), 3, 10, 0, (NONE, (2, 10))),  # the leader never had epoch 3
    ((-1, -1), 3, 10, 0, (OUT_OF_RANGE, None)),  # unknown epoch
    ((3, 8), 3, 10, 11, (OUT_OF_RANGE, None)),  # below the log start: out of range first
])
def test_diverging_epoch(epoch_end, last_fetched, fetch_offset, log_start, expected):
    assert diverging_epoch(epoch_end, last_fetched, fetch_offset, log_start) == expected


# -- the Fetch handler's follower path -------------------------------------------------------
@pytest.fixture
def leader(tmp_path, table):
    slot = table.allocate()
    log = open_log(tmp_path / "leader", state=table.slot(slot))
    partition = Partition("t", 0, None, log, slot, LEADER)
    yield partition
    log.close()


class FakeReplicaManager:
    def __init__(self, partition):
        self.partition = partition
        self.wakes = 0

    def get_partition(self, topic, index):
        return self.partition if (topic, index) == ("t", 0) else None

    def wake_delayed_operations(self, slots=None, high_watermark_only=False):
        self.wakes += 1


def _fetch(replica_manager, replica_id, fetch_offset, last_fetched_epoch=-1, current_leader_epoch=-1,
           version=12, max_wait=0):
    cls = API_TABLE[1].request_class(version)
    request = build(cls, {
        "replica_id": replica_id, "max_wait": max_wait, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "forgotten_topics_data": [], "topics": [{"topic": "t", "partitions": [{
            "partition": 0, "current_leader_epoch": current_leader_epoch, "fetch_offset": fetch_offset,
            "last_fetched_epoch": last_fetched_epoch, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20}]}]})
    ctx = RequestContext(SimpleNamespace(replica_manager=replica_manager), 1, version, 7, "f", 0)
    response = fetch_handler.handle(ctx, request)
    return response.responses[0].partitions[0] if hasattr(response, "responses") else response


def _append(partition, n):
    code, result, _ = partition.append_records_to_leader(records_of(make_batch(n)), 1)
    assert code == NONE
    return result


def test_a_replica_not_assigned_gets_unknown_leader_epoch_or_not_leader(leader):
    leader.make_leader(1, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
    _append(leader, 2)
    rm = FakeReplicaManager(leader)
    # With its leader epoch (Kafka's followerReplicaOrThrow): retriable UNKNOWN_LEADER_EPOCH.
    part = _fetch(rm, OTHER, 0, current_leader_epoch=1)
    assert (part.error_code, part.records) == (ErrorCode.UNKNOWN_LEADER_EPOCH, b"")
    part = _fetch(rm, OTHER, 0, current_leader_epoch=-1)
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # Nothing recorded for it, and the assigned follower still reads.
    assert OTHER not in leader.replica_states()
    part = _fetch(rm, FOLLOWER, 0, current_leader_epoch=1)
    assert part.error_code == NONE and part.records.size > 0


def test_follower_fetch_that_moves_the_high_watermark_wakes_parked_operations(leader):
    leader.make_leader(1, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
    _append(leader, 3)
    rm = FakeReplicaManager(leader)
    assert leader.high_watermark == 0
    _fetch(rm, FOLLOWER, 0, current_leader_epoch=1)  # reads, the follower has nothing yet
    assert (leader.high_watermark, rm.wakes) == (0, 0)
    part = _fetch(rm, FOLLOWER, 3, current_leader_epoch=1)  # the follower has all three
    assert leader.high_watermark == 3 and part.high_watermark == 3
    assert rm.wakes == 1
    # A consumer's fetch wakes nothing.
    _fetch(rm, -1, 0)
    assert rm.wakes == 1


def _needs_epoch_lookup():
    if not hasattr(Partition, "last_offset_for_leader_epoch"):
        pytest.fail("Partition.last_offset_for_leader_epoch (brief-interfaces item 3) is missing")


def test_leader_answers_a_diverging_epoch_and_records_nothing(leader):
    _needs_epoch_lookup()
    leader.make_leader(1, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
    _append(leader, 3)  # epoch 1: offsets 0-2
    leader.make_leader(2, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
    _append(leader, 2)  # epoch 2: offsets 3-4
    rm = FakeReplicaManager(leader)
    # The follower wrote offsets 0-4 in epoch 1 (it led epoch 1 longer): epoch 1 ends at 3 here.
    part = _fetch(rm, FOLLOWER, 5, last_fetched_epoch=1, current_leader_epoch=2)
    assert part.error_code == NONE
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (1, 3)
    assert part.records == b""
    assert leader.replica_states()[FOLLOWER][0] == -1  # no fetch state recorded
    assert leader.high_watermark == 0 and rm.wakes == 0
    # After truncating to 3 it fetches on: records, and no diverging epoch.
    part = _fetch(rm, FOLLOWER, 3, last_fetched_epoch=1, current_leader_epoch=2)
    assert part.error_code == NONE and part.diverging_epoch.epoch == -1 and part.records.size > 0
    assert leader.replica_states()[FOLLOWER][0] == 3
    # Caught up in epoch 2: nothing diverges, the high watermark follows.
    part = _fetch(rm, FOLLOWER, 5, last_fetched_epoch=2, current_leader_epoch=2)
    assert part.diverging_epoch.epoch == -1 and leader.high_watermark == 5
    # Before v12 there is no last_fetched_epoch: never a diverging epoch.
    part = _fetch(rm, FOLLOWER, 5, last_fetched_epoch=1, current_leader_epoch=2, version=11)
    assert part.error_code == NONE and not hasattr(part, "diverging_epoch")


def test_leader_answers_out_of_range_for_an_epoch_it_cannot_place(leader):
    _needs_epoch_lookup()
    leader.make_leader(3, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
    _append(leader, 2)
    rm = FakeReplicaManager(leader)
    # Epoch 5 is past every epoch the leader has (Kafka's endOffsetFor: UNDEFINED).
    part = _fetch(rm, FOLLOWER, 2, last_fetched_epoch=5, current_leader_epoch=3)
    assert part.error_code == OUT_OF_RANGE and part.records == b""
    assert leader.replica_states()[FOLLOWER][0] == -1
