"""Two replicas converge whatever the leadership history (KIP-101/KIP-279):
a Hypothesis run over random sequences of appends on the current leader,
partial replication (a few fetch rounds) and elections of either replica,
clean or not (the ISR is the leader alone, so every election may lose the
follower's unreplicated tail or keep records the new leader never had).
Afterwards, with no more elections, the follower's replica fetcher must end
with exactly the leader's batches: same offsets, epochs and bytes.

Both brokers are in-process: each a real Partition on one shared table, its
own ReplicaFetcher, and the other's Fetch/ListOffsets handlers reached
through the codec (support.leader_endpoint's InProcessLeader)."""

import itertools
import uuid
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.metadata.model import BrokerInfo, EndPoint, Metadata, PartitionState, TopicInfo
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import Partition
from kafkapy.server.config import BrokerConfig
from kafkapy.server.replica_fetcher import ReplicaFetcher

from support.leader_endpoint import InProcessLeader, ReplicaManager, batches
from support.storage import make_batch, open_log, records_of

TOPIC_ID = uuid.UUID(int=9)
_runs = itertools.count()

OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 3)),
    st.tuples(st.just("fetch"), st.integers(0, 2)),
    st.tuples(st.just("elect"), st.sampled_from((0, 1))),
), max_size=25)


class Pair:
    """Brokers 0 and 1, both replicas of t-0."""

    def __init__(self, root, table):
        self.logs = []
        self.md = Metadata(cluster_mode=True, brokers={
            b: BrokerInfo(b, "127.0.0.1", 9000 + b, None, (EndPoint("127.0.0.1", 9000 + b, "PLAINTEXT"),))
            for b in (0, 1)})
        self.generation = 0
        self.now = 1000.0
        self.partitions, self.rms, self.fetchers = {}, {}, {}
        config = BrokerConfig.from_props({"log.dirs": str(root / "cfg"), "replica.fetch.wait.max.ms": 0,
                                          "replica.fetch.backoff.ms": 100})
        for b in (0, 1):
            slot = table.allocate()
            lg = open_log(root / f"b{b}", state=table.slot(slot))
            self.logs.append(lg)
            self.partitions[b] = Partition("t", 0, TOPIC_ID, lg, slot, b, assume_leader=False)
            self.rms[b] = ReplicaManager({("t", 0): self.partitions[b]})
            broker = SimpleNamespace(broker_id=b, store=SimpleNamespace(generation=0), replica_manager=self.rms[b])
            broker.metadata = lambda broker=broker: self._metadata(broker)
            self.fetchers[b] = ReplicaFetcher(0, broker, config, self._endpoint, clock=lambda: self.now)
        self.leader, self.epoch = None, 0
        self.endpoints = []
        self.fetches = []

    def _metadata(self, broker):
        broker.store.generation = self.generation
        return self.md

    def _endpoint(self, leader_id, address, client_id, broker_id, timeout_ms):
        # InProcessLeader answers with the leader's handlers (``leader_rm``).
        view = SimpleNamespace(leader_rm=self.rms[leader_id], endpoints=self.endpoints, fetches=self.fetches)
        return InProcessLeader(view, leader_id, address, client_id, broker_id, timeout_ms)

    def elect(self, leader: int) -> None:
        """The controller's decision: ``leader`` at the next epoch, ISR itself alone."""
        self.epoch += 1
        self.leader = leader
        self.md.topics["t"] = TopicInfo("t", TOPIC_ID, 1, {}, {0: PartitionState((0, 1), leader, self.epoch,
                                                                                 (leader,), self.epoch)})
        self.generation += 1
        self.partitions[leader].make_leader(self.epoch, (leader,), (0, 1), self.epoch)
        self.partitions[1 - leader].make_follower(leader, self.epoch, (0, 1), self.epoch)

    def append(self, n: int) -> None:
        code, _, message = self.partitions[self.leader].append_records_to_leader(
            records_of(make_batch(n, tag=b"%d-" % next(_runs))), 1)
        assert code == ErrorCode.NONE, message

    def rounds(self, n: int) -> None:
        for _ in range(n):
            self.now += 1.0  # every back-off over
            for fetcher in self.fetchers.values():
                fetcher.run_once(timeout_s=0)

    def close(self) -> None:
        for f in self.fetchers.values():
            f.close()
        for lg in self.logs:
            lg.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_the_follower_ends_with_exactly_the_leaders_batches(tmp_path, table, ops):
    pair = Pair(tmp_path / f"run{next(_runs)}", table)
    try:
        pair.elect(0)
        for op, arg in ops:
            if op == "append":
                pair.append(arg)
            elif op == "fetch":
                pair.rounds(arg)
            else:
                pair.elect(arg)
        leader, follower = pair.partitions[pair.leader], pair.partitions[1 - pair.leader]
        for _ in range(20):  # bounded: a few rounds per truncation step at most
            pair.rounds(1)
            if follower.log_end_offset == leader.log_end_offset and batches(follower) == batches(leader):
                break
        assert batches(follower) == batches(leader), (ops, leader.log.leader_epoch_entries(),
                                                        follower.log.leader_epoch_entries())
        assert follower.high_watermark == leader.high_watermark == leader.log_end_offset
    finally:
        pair.close()
