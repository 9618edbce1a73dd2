"""The replica fetcher's loop in-process against a leader's real Fetch and
ListOffsets handlers: every request is built by the fetcher, encoded and
decoded with the codec (record data read from the leader's segment files, as
sendfile would send it) and answered by the handlers on a leader Partition;
the follower is a real Partition on the same shared table. Covers catch-up
(same batches, high watermarks on both sides, the wake), the KIP-101
divergence (truncate, then fetch the new epoch), OFFSET_OUT_OF_RANGE
(truncate fully to the leader's log start), back-off on NOT_LEADER_OR_FOLLOWER,
fencing until new metadata, the role check, and which partitions a fetcher
takes."""

import uuid
from types import SimpleNamespace

import pytest

from kafkapy.metadata.model import BrokerInfo, EndPoint, Metadata, PartitionState, TopicInfo
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import Partition
from kafkapy.server.config import BrokerConfig
from kafkapy.server.replica_fetcher import ReplicaFetcher, fetcher_id_for

from support.leader_endpoint import FOLLOWER, LEADER, InProcessLeader, ReplicaManager, batches
from support.storage import make_batch, open_log, records_of

TOPIC_ID = uuid.UUID(int=7)
FOLLOWER_METHODS = ("append_records_to_follower", "truncate_to", "truncate_fully_and_start_at",
                    "last_offset_for_leader_epoch")


@pytest.fixture(autouse=True)
def _follower_interface():
    missing = [m for m in FOLLOWER_METHODS if not hasattr(Partition, m)]
    if missing:
        pytest.fail(f"Partition lacks {missing} (brief-interfaces item 3)")


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def cluster(tmp_path, table):
    logs = []

    def partition(name, broker):
        slot = table.allocate()
        lg = open_log(tmp_path / name, state=table.slot(slot))
        logs.append(lg)
        return Partition("t", 0, TOPIC_ID, lg, slot, broker, assume_leader=False)

    c = SimpleNamespace(endpoints=[], fetches=[])
    c.leader = partition("leader", LEADER)
    c.follower = partition("follower", FOLLOWER)
    c.leader_rm = ReplicaManager({("t", 0): c.leader})
    c.follower_rm = ReplicaManager({("t", 0): c.follower})
    c.generation = 1
    c.md = Metadata(cluster_mode=True, brokers={
        b: BrokerInfo(b, "127.0.0.1", 9000 + b, None, (EndPoint("127.0.0.1", 9000 + b, "PLAINTEXT"),))
        for b in (LEADER, FOLLOWER)})
    c.broker = SimpleNamespace(broker_id=FOLLOWER, metadata=lambda: c.md,
                               store=SimpleNamespace(generation=0), replica_manager=c.follower_rm)

    def metadata():
        c.broker.store.generation = c.generation
        return c.md

    c.broker.metadata = metadata

    def set_state(leader_epoch, leader=LEADER, replicas=(LEADER, FOLLOWER), isr=(LEADER, FOLLOWER)):
        """The controller's decision, as LeaderAndIsr would apply it to both brokers."""
        c.md.topics["t"] = TopicInfo("t", TOPIC_ID, 1, {}, {0: PartitionState(replicas, leader, leader_epoch,
                                                                               isr)})
        c.generation += 1
        if leader == LEADER:
            c.leader.make_leader(leader_epoch, isr, replicas)
        c.follower.make_follower(leader, leader_epoch, replicas, 0)

    c.set_state = set_state
    c.clock = Clock()
    config = BrokerConfig.from_props({"log.dirs": str(tmp_path / "cfg"), "broker.id": FOLLOWER,
                                      "replica.fetch.wait.max.ms": 0, "replica.fetch.backoff.ms": 500})
    c.fetcher = ReplicaFetcher(0, c.broker, config, lambda *a: InProcessLeader(c, *a), clock=c.clock)
    yield c
    for lg in logs:
        lg.close()


def _append(partition, n, tag=b""):
    code, _, message = partition.append_records_to_leader(records_of(make_batch(n, tag=tag)), 1)
    assert code == ErrorCode.NONE, message


def _rounds(c, n):
    for _ in range(n):
        c.fetcher.run_once(timeout_s=0)


def test_follower_catches_up_with_the_leaders_batches_and_high_watermark(cluster):
    c = cluster
    c.set_state(1)
    for i in range(3):
        _append(c.leader, i + 1, tag=b"%d" % i)
    assert c.leader.high_watermark == 0  # the follower is in the ISR and has nothing
    _rounds(c, 1)
    assert c.follower.log_end_offset == 6 and c.leader.high_watermark == 0
    assert batches(c.follower) == batches(c.leader)  # the same bytes: offsets, epochs, CRCs
    assert c.follower_rm.wakes == 1
    # Fetching at 6 tells the leader, whose answer carries the new high watermark.
    _rounds(c, 1)
    assert c.leader.high_watermark == 6 and c.follower.high_watermark == 6
    first, sent = c.fetches[-2], c.fetches[-1]
    # The first fetch is full and asks for a fetch session; the next is
    # incremental and names the partition, whose fetch offset moved.
    assert (first["session_id"], first["session_epoch"]) == (0, 0)
    assert sent["replica_id"] == FOLLOWER and sent["session_id"] > 0 and sent["session_epoch"] == 1
    p = sent["topics"][0]["partitions"][0]
    assert (p["fetch_offset"], p["current_leader_epoch"], p["last_fetched_epoch"]) == (6, 1, 1)
    # Nothing new: no append, no wake, and the fetches name no partition.
    _rounds(c, 2)
    assert c.follower_rm.wakes == 1 and c.follower.log_end_offset == 6
    assert c.fetches[-1]["topics"] == [] and c.fetches[-1]["session_epoch"] == 3


def test_a_leader_that_lost_the_fetch_session_gets_a_full_fetch_again(cluster):
    from kafkapy.server.fetch_session import FetchSessionCache

    c = cluster
    c.set_state(1)
    _append(c.leader, 2)
    _rounds(c, 2)
    assert c.fetches[-1]["session_id"] > 0 and c.leader.high_watermark == 2
    # The leader restarted: its session cache is empty.
    for endpoint in c.endpoints:
        endpoint.fetch_sessions = FetchSessionCache(64, 120_000)
    _append(c.leader, 3)
    _rounds(c, 1)  # FETCH_SESSION_ID_NOT_FOUND: the session starts over, after a back-off
    assert c.follower.log_end_offset == 2
    c.clock.now += 10
    _rounds(c, 2)  # a full fetch, then an incremental one in the new session
    full = [f for f in c.fetches if f["session_epoch"] == 0]
    assert len(full) == 2 and full[-1]["topics"][0]["partitions"][0]["fetch_offset"] == 2
    assert c.follower.log_end_offset == 5 and c.leader.high_watermark == 5


def test_diverged_follower_truncates_then_fetches_the_new_epoch(cluster):
    c = cluster
    # Epoch 1: this broker (1) led and wrote 5 records; the other (0) got only 3 of them.
    c.follower.make_leader(1, (FOLLOWER,), (FOLLOWER, LEADER))
    c.leader.make_follower(FOLLOWER, 1, (FOLLOWER, LEADER), 0)
    _append(c.follower, 3, tag=b"a")
    _append(c.follower, 2, tag=b"lost")
    c.leader.append_records_to_follower(records_of(*[b for _, _, b in batches(c.follower)[:1]]), 0, 0)
    assert c.leader.log_end_offset == 3
    # Epoch 2: broker 0 leads (an unclean election) and writes 4 records at offset 3.
    c.set_state(2, isr=(LEADER,))
    _append(c.leader, 4, tag=b"b")
    _rounds(c, 1)  # diverging epoch (1, 3): truncate to 3
    assert c.follower.log_end_offset == 3
    assert c.follower.last_offset_for_leader_epoch(1) == (1, 3)
    _rounds(c, 1)  # fetch from 3 in epoch 1: the leader's epoch-2 batch
    assert c.follower.log_end_offset == 7
    assert batches(c.follower) == batches(c.leader)
    assert [e for _, e, _ in batches(c.follower)] == [1, 2]


def test_out_of_range_below_the_leaders_log_start_starts_empty_there(cluster):
    c = cluster
    c.set_state(1, isr=(LEADER,))  # the leader commits alone
    for _ in range(4):
        _append(c.leader, 2)
    assert c.leader.delete_records_on_leader(5) == (ErrorCode.NONE, 5)
    _rounds(c, 1)  # OFFSET_OUT_OF_RANGE at 0: ListOffsets says the leader starts at 5
    assert (c.follower.log_start_offset, c.follower.log_end_offset) == (5, 5)
    # Fetching at 5 returns the whole batch 4-5; an empty follower log starts
    # at the batch's base offset instead (Kafka's appendRecordsToFollower on
    # UnexpectedAppendOffsetException), and its log start follows the leader's.
    _rounds(c, 1)
    assert (c.follower.log_start_offset, c.follower.log_end_offset) == (5, 8)
    assert batches(c.follower)[1:] == batches(c.leader)[1:]


def test_not_leader_backs_off_and_fenced_waits_for_new_metadata(cluster):
    c = cluster
    c.set_state(1)
    _append(c.leader, 1)
    # Broker 0 no longer leads (at the same epoch: an older epoch would be
    # FENCED_LEADER_EPOCH first, in Kafka's order).
    c.leader.make_follower(FOLLOWER + 5, 1, (LEADER, FOLLOWER), 0)
    _rounds(c, 1)
    assert len(c.fetches) == 1 and c.follower.log_end_offset == 0
    _rounds(c, 3)
    assert len(c.fetches) == 1  # backing off replica.fetch.backoff.ms
    c.clock.now += 0.6
    _rounds(c, 1)
    assert len(c.fetches) == 2
    # The leader moved to epoch 3: the follower's epoch 1 is fenced.
    c.leader.make_leader(3, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
    c.clock.now += 0.6
    _rounds(c, 1)
    assert len(c.fetches) == 3
    state = c.fetcher.states[("t", 0)]
    assert state.fenced
    c.clock.now += 10
    _rounds(c, 2)
    assert len(c.fetches) == 3  # no fetch until new metadata
    c.set_state(3)
    _rounds(c, 1)
    assert len(c.fetches) == 4 and c.follower.log_end_offset == 1
    assert not c.fetcher.states[("t", 0)].fenced


def test_no_fetch_before_the_slot_agrees_with_the_image(cluster):
    c = cluster
    c.set_state(1)
    _append(c.leader, 1)
    # The image says epoch 2, but this broker's LeaderAndIsr handler has not
    # made the partition a follower at epoch 2 yet.
    c.md.topics["t"].partitions[0] = PartitionState((LEADER, FOLLOWER), LEADER, 2, (LEADER, FOLLOWER))
    c.generation += 1
    _rounds(c, 2)
    assert c.fetches == []
    c.leader.make_leader(2, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
    c.follower.make_follower(LEADER, 2, (LEADER, FOLLOWER), 0)
    _rounds(c, 1)
    assert len(c.fetches) == 1 and c.follower.log_end_offset == 1


def test_assignment_takes_partitions_hashed_here_with_a_live_remote_leader(tmp_path):
    md = Metadata(cluster_mode=True, brokers={
        b: BrokerInfo(b, "127.0.0.1", 9000 + b, None, (EndPoint("127.0.0.1", 9000 + b, "PLAINTEXT"),
                                                      EndPoint("127.0.0.1", 9100 + b, "REPLICATION")))
        for b in (0, 1, 2)})
    states = {p: PartitionState((0, 1, 2), p % 3, 4, (0, 1, 2)) for p in range(12)}
    states[11] = PartitionState((0, 2), 0, 4, (0, 2))  # not a replica here
    states[10] = PartitionState((0, 1, 3), 3, 4, (3,))  # leader 3 is not live
    md.topics["a"] = TopicInfo("a", TOPIC_ID, 12, {}, states)
    broker = SimpleNamespace(broker_id=1, metadata=lambda: md, store=SimpleNamespace(generation=5),
                             replica_manager=ReplicaManager({}))
    config = BrokerConfig.from_props({
        "log.dirs": str(tmp_path), "broker.id": 1, "num.replica.fetchers": 2,
        "listeners": "PLAINTEXT://127.0.0.1:9001,REPLICATION://127.0.0.1:9101",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION"})
    made = []
    taken = {}
    for fid in (0, 1):
        f = ReplicaFetcher(fid, broker, config, lambda *a: made.append(a) or SimpleNamespace(
            address=a[1], close=lambda: None))
        assert f.maybe_update_assignment() and not f.maybe_update_assignment()
        taken[fid] = set(f.states)
    expected = {("a", p) for p in range(10) if p % 3 not in (1,)}
    assert taken[0] | taken[1] == expected and not taken[0] & taken[1]
    for fid in (0, 1):
        assert all(fetcher_id_for("a", p, 2) == fid for _, p in taken[fid])
    # One endpoint per leader per fetcher, on the inter-broker listener.
    assert {(a[0], a[1]) for a in made} <= {(0, ("127.0.0.1", 9100)), (2, ("127.0.0.1", 9102))}
    assert {a[2] for a in made} <= {f"ReplicaFetcherThread-{i}-{b}" for i in (0, 1) for b in (0, 2)}


def test_an_epoch_led_without_records_is_dropped_by_the_truncation(cluster):
    c = cluster
    c.set_state(1)
    _append(c.leader, 3)
    _rounds(c, 2)
    assert c.follower.log_end_offset == 3
    # Broker 1 led epoch 2 and wrote nothing (its cache starts epoch 2 at 3);
    # broker 0 leads epoch 3 and never saw epoch 2.
    c.follower.make_leader(2, (FOLLOWER,), (LEADER, FOLLOWER))
    assert c.follower.last_offset_for_leader_epoch(2) == (2, 3)
    c.set_state(3)
    _append(c.leader, 2)
    # Diverging epoch (1, 3): nothing to cut but the empty epoch 2 (Kafka's
    # truncateTo at the log end offset still truncates the epoch cache).
    _rounds(c, 2)
    assert c.follower.log_end_offset == 5
    assert [e for e, _ in c.follower.log.leader_epoch_entries()] == [1, 3]


def test_an_answer_that_changes_nothing_backs_off_instead_of_spinning(cluster):
    c = cluster
    c.set_state(1, isr=(LEADER,))
    _append(c.leader, 3)
    _rounds(c, 1)
    assert c.follower.log_end_offset == 3
    # A follower whose cache has an epoch the leader never had (5, past the
    # leader's latest): the leader answers OFFSET_OUT_OF_RANGE for it, and
    # its log end and start leave nothing to truncate.
    c.follower.make_leader(5, (FOLLOWER,), (LEADER, FOLLOWER))
    _append(c.follower, 2)
    c.follower.make_follower(LEADER, 1, (LEADER, FOLLOWER), 0)
    _append(c.leader, 4)
    sent = len(c.fetches)
    _rounds(c, 5)
    assert len(c.fetches) == sent + 1  # then backing off replica.fetch.backoff.ms
    assert c.follower.log_end_offset == 5
    c.clock.now += 0.6
    _rounds(c, 1)
    assert len(c.fetches) == sent + 2
