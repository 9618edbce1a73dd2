"""Purgatory: delayed operations complete when what they watch is reached,
expire at their deadline, are never returned twice nor after cancel (a
Hypothesis state machine over a few slots), and a delayed produce answers
REQUEST_TIMED_OUT for the partitions still short when it expires; the worker
finishes a pickled delayed produce from a real shared table."""

import pickle

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.purgatory import DelayedFetch, DelayedProduce, Purgatory, from_wire

SLOTS = range(3)
HW = "high_watermark"


class PurgatoryMachine(RuleBasedStateMachine):
    """A model of the slots' high watermarks and the clock beside a Purgatory."""

    @initialize()
    def start(self):
        self.purgatory = Purgatory()
        self.fields = {slot: 0 for slot in SLOTS}
        self.now = 1000
        self.parked = {}  # key -> op, what the model says is parked
        self.returned = set()
        self.cancelled = set()
        self.next_key = 0

    def read(self, slot, field):
        assert field == HW
        return self.fields[slot]

    def _satisfied(self, op):
        hits = [self.fields[s] >= v for s, (_f, v) in op.watch.items()]
        return any(hits) if isinstance(op, DelayedFetch) else all(hits)

    @rule(kind=st.sampled_from(["fetch", "produce"]),
          slots=st.sets(st.sampled_from(list(SLOTS)), min_size=1),
          ahead=st.integers(0, 3), wait=st.integers(0, 50))
    def park(self, kind, slots, ahead, wait):
        watch = {s: (HW, self.fields[s] + ahead) for s in slots}
        deadline = self.now + wait
        if kind == "fetch":
            op = DelayedFetch(watch, deadline)
        else:
            op = DelayedProduce(watch, deadline, 7, 9, [("t", [(s, 0, 0, -1, 0, None, s) for s in slots])])
        key = self.next_key
        self.next_key += 1
        self.purgatory.park(key, op)
        self.parked[key] = op

    @rule(slot=st.sampled_from(list(SLOTS)), by=st.integers(1, 3))
    def advance_field(self, slot, by):
        self.fields[slot] += by

    @rule(ms=st.integers(1, 30))
    def advance_time(self, ms):
        self.now += ms

    @precondition(lambda self: self.parked)
    @rule(data=st.data())
    def cancel(self, data):
        key = data.draw(st.sampled_from(sorted(self.parked)))
        assert self.purgatory.cancel(key) is self.parked.pop(key)
        self.cancelled.add(key)

    @rule(woken=st.booleans())
    def poll(self, woken):
        ready = self.purgatory.poll(self.read, self.now, woken)
        for key, op, expired in ready:
            assert key not in self.returned and key not in self.cancelled
            assert self.parked.pop(key) is op
            satisfied = self._satisfied(op)
            if expired:
                assert self.now >= op.deadline_ms
                assert not (woken and satisfied)
            else:
                assert woken and satisfied
            self.returned.add(key)
        # Whatever should have come out did.
        for op in self.parked.values():
            assert self.now < op.deadline_ms
            assert not (woken and self._satisfied(op))

    @rule()
    def expire_all(self):
        ready = self.purgatory.expire_all()
        assert {key for key, _op, _e in ready} == set(self.parked)
        assert all(expired for _k, _op, expired in ready)
        self.returned.update(self.parked)
        self.parked.clear()

    @invariant()
    def parked_agrees(self):
        if not hasattr(self, "purgatory"):
            return
        assert len(self.purgatory) == len(self.parked)
        if self.parked:
            assert self.purgatory.next_deadline_ms() == min(op.deadline_ms for op in self.parked.values())
        else:
            assert self.purgatory.next_deadline_ms() is None


TestPurgatory = PurgatoryMachine.TestCase
TestPurgatory.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_delayed_produce_times_out_only_the_partitions_still_short():
    fields = {3: 10, 4: 4}
    op = DelayedProduce({3: (HW, 10), 4: (HW, 9)}, 5000, 42, 9, [
        ("a", [(0, 0, 5, -1, 0, None, 3), (1, int(ErrorCode.CORRUPT_MESSAGE), -1, -1, -1, "bad", -1)]),
        ("b", [(0, 0, 2, -1, 0, None, 4)]),
    ])
    read = lambda slot, field: fields[slot]  # noqa: E731
    assert not op.is_satisfied(read)
    assert op.final_results(read) == [
        ("a", [(0, 0, 5, -1, 0, None, 3), (1, 2, -1, -1, -1, "bad", -1)]),
        ("b", [(0, ErrorCode.REQUEST_TIMED_OUT, -1, -1, -1, None, 4)]),
    ]
    fields[4] = 9
    assert op.is_satisfied(read)
    assert op.final_results(read)[1] == ("b", [(0, 0, 2, -1, 0, None, 4)])


def test_delayed_produce_completes_when_a_partitions_leadership_moves():
    # Kafka's checkEnoughReplicasReachOffset: a partition no longer led at
    # the epoch the records were appended at answers NOT_LEADER_OR_FOLLOWER
    # at once instead of waiting for the request's timeout.
    fields = {(3, HW): 10, (3, "current_leader_epoch"): 5, (4, HW): 4, (4, "current_leader_epoch"): 5,
              (3, "leader_id"): 1, (4, "leader_id"): 1}
    read = lambda slot, field: fields[(slot, field)]  # noqa: E731
    op = DelayedProduce({3: (HW, 10), 4: (HW, 9)}, 5000, 42, 9,
                        [("a", [(0, 0, 5, -1, 0, None, 3)]), ("b", [(0, 0, 2, -1, 0, None, 4)])],
                        {3: 5, 4: 5})
    assert not op.is_satisfied(read)
    fields[(4, "current_leader_epoch")] = 6  # LeaderAndIsr made this broker a follower
    assert op.is_satisfied(read)
    assert op.final_results(read) == [
        ("a", [(0, 0, 5, -1, 0, None, 3)]),
        ("b", [(0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, None, 4)]),
    ]
    again = from_wire(pickle.loads(pickle.dumps(op.to_wire())))
    assert again.leader_epochs == {3: 5, 4: 5} and again.final_results(read) == op.final_results(read)


def test_a_high_watermark_reached_after_the_leadership_moved_is_no_acknowledgement():
    # kafkapy-chaos (30 minutes, four brokers) lost acknowledged records at
    # two preferred-leader elections: the old leader, now a follower, took the
    # new leader's high watermark past the parked produce's offset (the
    # records there were the new leader's; its own were truncated) and the
    # produce answered NONE. Kafka's checkEnoughReplicasReachOffset looks at
    # leadership first: a partition no longer led at the append's epoch
    # answers NOT_LEADER_OR_FOLLOWER whatever its high watermark.
    fields = {(4, HW): 4, (4, "current_leader_epoch"): 5, (4, "leader_id"): 1}
    read = lambda slot, field: fields[(slot, field)]  # noqa: E731
    op = DelayedProduce({4: (HW, 9)}, 5000, 42, 9, [("b", [(0, 0, 2, -1, 0, None, 4)])], {4: 5})
    assert not op.is_satisfied(read)
    fields[(4, "current_leader_epoch")] = 6  # a follower of the new leader now ...
    fields[(4, "leader_id")] = 2
    fields[(4, HW)] = 12  # ... whose high watermark passed offset 9 with its own records
    assert op.is_satisfied(read)
    assert op.final_results(read) == [("b", [(0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, None, 4)])]


def test_delayed_produce_completes_when_its_partition_is_stopped():
    # StopReplica (a reassignment moved the replica away) keeps the epochs but
    # clears the leader: NOT_LEADER_OR_FOLLOWER at once, not at the timeout.
    fields = {(4, HW): 4, (4, "current_leader_epoch"): 5, (4, "leader_id"): 1}
    read = lambda slot, field: fields[(slot, field)]  # noqa: E731
    op = DelayedProduce({4: (HW, 9)}, 5000, 42, 9, [("b", [(0, 0, 2, -1, 0, None, 4)])], {4: 5})
    assert not op.is_satisfied(read)
    fields[(4, "leader_id")] = -1
    assert op.is_satisfied(read)
    assert op.final_results(read) == [("b", [(0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, None, 4)])]


def test_operations_are_data():
    fetch = DelayedFetch({1: (HW, 3)}, 99)
    produce = DelayedProduce({1: (HW, 3)}, 99, 5, 9, [("t", [(0, 0, 2, -1, 0, None, 1)])])
    for op in (fetch, produce):
        again = pickle.loads(pickle.dumps(op))
        assert type(again) is type(op)
        assert (again.watch, again.deadline_ms) == (op.watch, op.deadline_ms)
    assert pickle.loads(pickle.dumps(produce)).results == produce.results
    # Between processes they travel as tuples of plain values.
    for op in (fetch, produce):
        wire = op.to_wire()
        assert all(type(v) in (int, dict, list) for v in wire)
        again = from_wire(pickle.loads(pickle.dumps(wire)))
        assert type(again) is type(op) and again.__getstate__() == op.__getstate__()


def test_a_fetch_is_satisfied_by_any_partition_a_produce_by_all():
    fields = {0: 5, 1: 0}
    read = lambda slot, field: fields[slot]  # noqa: E731
    watch = {0: (HW, 5), 1: (HW, 1)}
    assert DelayedFetch(watch, 10).is_satisfied(read)
    assert not DelayedProduce(watch, 10, 0, 9, []).is_satisfied(read)
    purgatory = Purgatory()
    purgatory.park("c", DelayedFetch({1: (HW, 1)}, 100))
    assert purgatory.poll(read, 50, check_watches=True) == []
    fields[1] = 1
    # Without a wake only deadlines are looked at.
    assert purgatory.poll(read, 50, check_watches=False) == []
    [(key, _op, expired)] = purgatory.poll(read, 50, check_watches=True)
    assert (key, expired, len(purgatory)) == ("c", False, 0)


def test_a_parked_produce_is_answered_from_the_shared_table(tmp_path):
    from kafkapy.server.handlers.produce import delayed_produce_response
    from kafkapy.storage.shared import SharedPartitionTable

    table = SharedPartitionTable(capacity=8, lock_path=str(tmp_path / "locks"))
    try:
        done, short = table.allocate(), table.allocate()
        table.slot(done).high_watermark = 10
        table.slot(short).high_watermark = 3
        op = from_wire(pickle.loads(pickle.dumps(DelayedProduce({done: (HW, 10), short: (HW, 5)}, 0, 1234, 9, [
            ("t", [(0, 0, 7, -1, 0, None, done), (1, 0, 2, -1, 0, None, short)])]).to_wire())))
        response = delayed_produce_response(op, lambda slot, field: getattr(table.slot(slot), field))
        [topic] = response.responses
        got = [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses]
        assert topic.name == "t" and got == [(0, 0, 7), (1, ErrorCode.REQUEST_TIMED_OUT, -1)]
    finally:
        table.close()
