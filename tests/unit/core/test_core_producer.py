"""producer.FastSend / RecordFuture / ProducerBatchBase: compiled and twin behave alike."""

import threading

import pytest
from support.twins import import_core


@pytest.fixture
def mod(producer_mod):
    # The client installed its future behaviour on import; put it back.
    previous = producer_mod.set_future_behaviour(None)
    producer_mod.set_future_behaviour(previous)
    yield producer_mod
    producer_mod.set_future_behaviour(previous)


def _records_of(producer_mod):
    """The records module the client pairs with ``producer_mod``: the compiled
    FastSend appends to the compiled BatchBuilder only."""
    return import_core("records", "twin" if producer_mod.__name__.endswith("_py") else "compiled")


class _Metadata:
    def __init__(self, counts):
        self.partitions = {topic: {p: None for p in range(n)} for topic, n in counts.items()}


class _Behaviour:
    @staticmethod
    def done(future):
        return future._result is not None


class _Harness:
    """A FastSend over hand-made open batches; slow-path calls are recorded."""

    def __init__(self, mod, counts=None, batch_size=1000, max_record_size=1 << 20):
        mod.set_future_behaviour(_Behaviour)
        self.mod = mod
        self.metadata = _Metadata(counts or {"t": 3})
        self.sticky = {}
        self.open_batches = {}
        self.slow_calls = []
        self.full_calls = 0

        def slow(*args):
            self.slow_calls.append(args)
            return "slow"

        def on_full():
            self.full_calls += 1

        self.attached = []
        self.fast = mod.FastSend(self.metadata, self.sticky, self.open_batches, lambda key, n: len(key) % n,
                                 slow, on_full, batch_size, max_record_size, threading.Lock(),
                                 lambda future, callback: self.attached.append((future, callback)))

    def open(self, topic, partition, batch_size=1000):
        batch = self.mod.ProducerBatchBase((topic, partition), _records_of(self.mod).BatchBuilder(0, batch_size),
                                     object())
        slots = self.open_batches.setdefault(topic, [])
        slots.extend([None] * (partition + 1 - len(slots)))
        slots[partition] = batch
        return batch


def test_appends_to_the_open_sticky_batch(mod):
    h = _Harness(mod)
    batch = h.open("t", 1)
    h.sticky["t"] = 1
    futures = [h.fast.send("t", b"v%d" % i, timestamp_ms=100 + i) for i in range(3)]
    assert h.slow_calls == []
    assert [f._relative_offset for f in futures] == [0, 1, 2]
    assert all(f._result is batch.result and f._partition == 1 and f._topic == "t" for f in futures)
    assert [(f._timestamp, f._key_size, f._value_size) for f in futures] == [(100, -1, 2), (101, -1, 2), (102, -1, 2)]
    assert batch.futures == futures
    assert batch.builder.records_count == 3
    assert isinstance(futures[0], mod.RecordFuture)
    records = _records_of(mod).decode_records(batch.builder.build())
    assert [(r[1], r[3]) for r in records] == [(100, b"v0"), (101, b"v1"), (102, b"v2")]


def test_keyed_and_explicit_partitions(mod):
    h = _Harness(mod)
    b0, b2 = h.open("t", 0), h.open("t", 2)
    f = h.fast.send("t", b"v", key=b"ab")  # len(key) % 3 == 2
    assert f._partition == 2 and b2.futures == [f] and f._key_size == 2
    f = h.fast.send("t", b"v", partition=0)
    assert f._partition == 0 and b0.futures == [f]
    assert h.slow_calls == []


@pytest.mark.parametrize("kwargs", [
    {"headers": [("h", b"1")]},
    {"value": "text"},
    {"key": bytearray(b"k")},
    {"partition": 1},          # no open batch there
    {"partition": 7},          # out of range
    {"topic": "unknown"},
    {"value": b"x" * 2000},    # over max_record_size
    {"timestamp_ms": 1.5},
])
def test_everything_else_goes_to_the_slow_path(mod, kwargs):
    h = _Harness(mod, max_record_size=1000)
    h.open("t", 0)
    h.sticky["t"] = 0
    args = {"topic": "t", "value": b"v"}
    args.update(kwargs)
    assert h.fast.send(args.pop("topic"), **args) == "slow"
    assert len(h.slow_calls) == 1


def test_closed_full_or_disabled_goes_slow_and_full_is_reported(mod):
    h = _Harness(mod, batch_size=200)
    batch = h.open("t", 0, batch_size=200)
    h.sticky["t"] = 0
    # 61-byte header + 57-byte records: two fit in 200 bytes, the third goes slow.
    sent = [h.fast.send("t", b"x" * 50) for _ in range(3)]
    assert [f == "slow" for f in sent] == [False, False, True]
    batch.closed = True
    assert h.fast.send("t", b"x") == "slow"
    h.open("t", 0)
    h.fast.enabled = False
    assert h.fast.send("t", b"x") == "slow"


def test_on_full_when_the_batch_reaches_batch_size(mod):
    h = _Harness(mod, batch_size=100)
    h.open("t", 0, batch_size=1000)
    h.sticky["t"] = 0
    h.fast.send("t", b"x" * 30)
    assert h.full_calls == 0
    h.fast.send("t", b"x" * 30)  # 61 + 2 * ~36 bytes >= 100
    assert h.full_calls == 1


def test_future_methods_delegate_to_the_installed_behaviour(mod):
    class Behaviour:
        @staticmethod
        def result(future, timeout):
            return ("result", future._relative_offset, timeout)

        @staticmethod
        def add_callback(future, fn, *args, **kwargs):
            return ("cb", fn, args, kwargs)

    mod.set_future_behaviour(Behaviour)
    future = mod.RecordFuture(None, 4, "t", 0, 1, -1, 3)
    assert future.get(2) == future.result(2) == ("result", 4, 2)
    assert future.add_callback(len, 1, k=2) == ("cb", len, (1,), {"k": 2})
    assert (future._callbacks, future._errbacks) == (None, None)


def test_callbacks_are_attached_after_the_append(mod):
    h = _Harness(mod)
    batch = h.open("t", 0)
    h.sticky["t"] = 0
    future = h.fast.send("t", b"v", callback=print)
    assert h.slow_calls == [] and h.attached == [(future, print)] and batch.futures == [future]
