"""The leader's ISR job (replication/isr_job.py ``IsrJob``) against a real
ZooKeeper, over a real leader ``Partition`` on a real shared table: an
expansion whose ZooKeeper write landed but never reached the partition (its
answer lost with the connection, or its round failed on the notification
before the local apply) is not lost: the next round finds the znode naming
this leader at its leader epoch at a newer version, takes its ISR and
version, and notifies the controller. A znode the controller moved (newer
leader epoch) is still left to its LeaderAndIsr. A failed notification does
not hold back the local ISR and is written again next round.

Before the fix each of the first two left the follower out of the leader's
ISR until the next LeaderAndIsr: every later write failed on the stale
partition epoch and was dropped as "the controller moved it"."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import pytest

from kafkapy.metadata.zk import data as zk_data
from kafkapy.metadata.model import BrokerInfo, Metadata, PartitionState, TopicInfo
from kafkapy.metadata.zk.client import ZkClient
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import Partition
from kafkapy.replication.isr_job import IsrJob

from support.storage import make_batch, open_log, records_of
from support.zookeeper import chroot_for

LEADER, FOLLOWER = 0, 1
EPOCH = 3
STATE = zk_data.partition_state_path("t", 0)


@pytest.fixture
def setup(zookeeper, table, tmp_path, request):
    """``(job, leader partition, raw ZkClient)``: the znode says LEADER leads at
    EPOCH with ISR [LEADER] (version 0), so does the slot; FOLLOWER has fetched
    up to the leader's log end (an expansion candidate)."""
    client = ZkClient(zookeeper.connect_string(chroot_for(request)),
                      session_timeout_ms=6000).connect()
    client.zk.ensure_path(zk_data.partition_path("t", 0))
    client.zk.create(STATE, zk_data.encode_partition_state(
        PartitionState((), LEADER, EPOCH, (LEADER,), 0), controller_epoch=1))
    slot = table.allocate()
    lg = open_log(tmp_path / "t-0", state=table.slot(slot))
    partition = Partition("t", 0, None, lg, slot, LEADER, assume_leader=False)
    partition.make_leader(EPOCH, (LEADER,), (LEADER, FOLLOWER), 0)
    code, _, _ = partition.append_records_to_leader(records_of(make_batch(2)), 1)
    assert code == ErrorCode.NONE
    now = int(time.time() * 1000)
    partition.update_follower_fetch_state(FOLLOWER, partition.log_end_offset, now)
    assert partition.maybe_expand_isr_candidates() == {FOLLOWER}
    md = Metadata(topics={"t": TopicInfo("t", uuid.uuid4(), 1, partitions={
        0: PartitionState((LEADER, FOLLOWER), LEADER, EPOCH, (LEADER,), 0)})},
        brokers={b: BrokerInfo(b, "127.0.0.1", 9092 + b) for b in (LEADER, FOLLOWER)})
    broker = SimpleNamespace(
        broker_id=LEADER, metadata=lambda: md,
        replica_manager=SimpleNamespace(get_partition=lambda t, p: partition if (t, p) == ("t", 0) else None,
                                        wake_delayed_operations=lambda slots=None: None))
    job = IsrJob(broker, client, lag_ms=10_000)  # not started: rounds run by hand
    yield job, partition, client, now
    lg.close()
    client.close()


def _znode(client):
    data, stat = client.zk.get(STATE)
    return zk_data.decode_partition_state(data, (), stat.version, "t", 0).state


def _notified(client) -> set:
    found = set()
    for child in client.zk.get_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH):
        data, _ = client.zk.get(f"{zk_data.ISR_CHANGE_NOTIFICATION_PATH}/{child}")
        found |= zk_data.decode_isr_change(data)
    return found


def test_own_write_whose_answer_was_lost_is_taken(setup):
    job, partition, client, now = setup
    # What a set whose answer was lost with the connection leaves: ZooKeeper
    # has the expansion (version 1), the slot still version 0 and ISR [LEADER].
    assert job.writer.update_isr("t", 0, LEADER, EPOCH, (LEADER, FOLLOWER), 0) == 1
    assert partition.isr == {LEADER} and partition.partition_epoch == 0
    for _ in range(3):  # bounded: one round is enough
        job.run_once(False, now)
        if partition.isr == {LEADER, FOLLOWER}:
            break
    assert partition.isr == {LEADER, FOLLOWER}
    assert partition.partition_epoch == 1 == _znode(client).partition_epoch
    assert ("t", 0) in _notified(client)
    # From the committed state the next change is written at the right version.
    assert partition.append_records_to_leader(records_of(make_batch(1)), 1)[0] == ErrorCode.NONE
    job.run_once(True, now + 20_000)  # FOLLOWER behind and not caught up for 20 s: shrunk
    assert partition.isr == {LEADER} and partition.partition_epoch == 2
    assert _znode(client).isr == (LEADER,)


def test_failed_notification_keeps_the_local_isr_and_is_sent_again(setup):
    job, partition, client, now = setup
    # A real ZooKeeper failure of the notification only: its parent is gone.
    client.zk.delete(zk_data.ISR_CHANGE_NOTIFICATION_PATH, recursive=True)
    job.run_once(False, now)
    assert _znode(client).isr == (LEADER, FOLLOWER)
    assert partition.isr == {LEADER, FOLLOWER} and partition.partition_epoch == 1
    client.zk.ensure_path(zk_data.ISR_CHANGE_NOTIFICATION_PATH)
    assert job.run_once(False, now) == []  # nothing new to write
    assert ("t", 0) in _notified(client)


def test_a_znode_the_controller_moved_is_left_to_its_leader_and_isr(setup):
    job, partition, client, now = setup
    # The controller's write: leader epoch + 1 (every controller write moves it).
    client.zk.set(STATE, zk_data.encode_partition_state(
        PartitionState((), LEADER, EPOCH + 1, (LEADER,), 0), controller_epoch=1), version=0)
    assert job.run_once(False, now) == []
    assert partition.isr == {LEADER} and partition.partition_epoch == 0
    assert _znode(client).leader_epoch == EPOCH + 1 and _znode(client).partition_epoch == 1


def test_a_joining_replica_holds_the_high_watermark_from_before_zookeeper_names_it(setup):
    """Kafka's maximal ISR (PendingExpandIsr): once the expansion's write is
    in ZooKeeper the controller may elect FOLLOWER, so between that write and
    its apply the high watermark must not pass FOLLOWER's log end offset.
    Before the fix an append in that window (the ISR still the leader alone)
    took the high watermark to the log end: records FOLLOWER lacks, counted
    as replicated."""
    job, partition, client, now = setup
    joining = partition.log_end_offset  # FOLLOWER fetched up to here
    seen = []
    write = job.writer.update_isr

    def update_isr(*args):
        version = write(*args)
        # The window: ZooKeeper names FOLLOWER, the leader appends.
        assert partition.append_records_to_leader(records_of(make_batch(3)), 1)[0] == ErrorCode.NONE
        seen.append((_znode(client).isr, partition.isr, partition.high_watermark))
        return version

    job.writer.update_isr = update_isr
    job.run_once(False, now)
    assert seen == [((LEADER, FOLLOWER), {LEADER}, joining)]
    assert partition.isr == {LEADER, FOLLOWER} and partition.high_watermark == joining
    partition.update_follower_fetch_state(FOLLOWER, partition.log_end_offset, now)
    assert partition.high_watermark == partition.log_end_offset


def test_an_expansion_whose_write_failed_holds_the_high_watermark_while_proposed(setup):
    """A write that failed may have landed (a lost connection): the replica
    keeps counting while the job proposes it, and stops once it is no longer
    proposed (its broker stopped fetching for replica.lag.time.max.ms), so a
    dead follower does not hold the high watermark for good."""
    from kazoo.exceptions import ConnectionLoss

    job, partition, client, now = setup
    joining = partition.log_end_offset
    write = job.writer.update_isr

    def lost(*args):
        raise ConnectionLoss()

    job.writer.update_isr = lost
    with pytest.raises(ConnectionLoss):
        job.run_once(False, now)
    assert partition.append_records_to_leader(records_of(make_batch(2)), 1)[0] == ErrorCode.NONE
    assert partition.isr == {LEADER} and partition.high_watermark == joining
    job.writer.update_isr = write
    # FOLLOWER has not fetched since ``now``: no longer proposed, no longer counted.
    assert job.run_once(False, now + 10_001) == []
    assert partition.isr == {LEADER} and partition.high_watermark == partition.log_end_offset
    assert _znode(client).isr == (LEADER,)
