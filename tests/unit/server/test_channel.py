"""The request channel's pieces: the arena ring allocator and the bounded queue."""

import multiprocessing
import queue
import random
import time

import pytest

from kafkapy.server.reactor.channel import Arena, RequestQueue


def test_arena_regions_never_overlap_and_space_comes_back():
    arena = Arena(1 << 16)
    rng = random.Random(7)
    live: dict[int, int] = {}
    for step in range(5000):
        if live and (rng.random() < 0.5 or len(live) > 20):
            # Free mostly in arrival order, sometimes out of order.
            off = next(iter(live)) if rng.random() < 0.8 else rng.choice(list(live))
            del live[off]
            arena.free(off)
            continue
        n = rng.randint(1, 1 << 13)
        off = arena.alloc(n)
        if off < 0:
            continue
        assert 0 <= off and off + n <= arena.size
        for o, m in live.items():
            assert off + n <= o or o + m <= off, f"step {step}: [{off},{off + n}) overlaps [{o},{o + m})"
        live[off] = n
    for off in list(live):
        arena.free(off)
    # Everything freed: the whole arena is available again.
    assert arena.alloc(arena.size) == 0


def test_arena_refuses_what_cannot_fit_now():
    arena = Arena(1000)
    a = arena.alloc(600)
    assert a == 0
    assert arena.alloc(500) == -1  # neither after the head nor before the tail
    assert arena.alloc(2000) == -1  # larger than the arena
    arena.free(a)
    assert arena.alloc(500) == 0


def test_arena_takes_one_request_bigger_than_its_ring_when_empty():
    arena = Arena(1 << 20, 1 << 16)
    small = arena.alloc(1000)
    assert small == 0
    assert arena.alloc(1 << 19) == -1, "a request past the ring waits for the ring to empty"
    arena.free(small)
    assert arena.alloc(1 << 19) == 0
    assert arena.alloc(10) == -1, "nothing else fits while the big one is live"
    arena.free(0)
    # Small requests wrap within the ring, never touching pages past it.
    offs = [arena.alloc(1 << 14) for _ in range(4)]
    assert offs == [0, 1 << 14, 2 << 14, 3 << 14]
    assert arena.alloc(1 << 14) == -1


def _put(q, conn_id, body=None, arena_off=-1, size=None):
    size = len(body) if body is not None else size
    return q.try_put(1, conn_id, arena_off, size, 0, body)


def test_request_queue_is_bounded_and_fifo():
    ctx = multiprocessing.get_context("fork")
    q = RequestQueue(ctx, 3)
    assert all(_put(q, i, b"req%d" % i) for i in range(3))
    assert not _put(q, 3, b"req3"), "a full queue must refuse, not block"
    assert q.size() == 3
    first = q.get()
    assert (first.processor_id, first.conn_id, bytes(first.body)) == (1, 0, b"req0")
    assert _put(q, 3, b"req3"), "a permit comes back when a worker takes a request"
    assert [bytes(q.get().body) for _ in range(3)] == [b"req1", b"req2", b"req3"]
    with pytest.raises(queue.Empty):
        q.get(timeout_s=0.01)
    with pytest.raises(queue.Empty):
        q.get(timeout_s=0)
    q.put_stop()
    assert q.get() is None


def test_request_queue_carries_arena_descriptors_and_inline_bodies():
    ctx = multiprocessing.get_context("fork")
    q = RequestQueue(ctx, 10)
    arena = Arena(1 << 16)
    off = arena.alloc(5)
    arena.view[off:off + 5] = b"hello"
    assert _put(q, 7, arena_off=off, size=5)
    body = bytes(range(256)) * 64  # 16 KiB: the largest inline body
    assert _put(q, 8, body)
    a, b = q.get(), q.get()
    assert (a.conn_id, a.body, bytes(a.view([None, arena.view]))) == (7, None, b"hello")
    assert b.conn_id == 8 and bytes(b.view([None, arena.view])) == body
    b.view([None, arena.view])[0] = 255  # writable: offsets are patched in place
    assert a.put_s > 0


def test_request_queue_one_datagram_per_reader_across_processes():
    """Several reading processes share the queue: every request is taken once."""
    ctx = multiprocessing.get_context("fork")
    q = RequestQueue(ctx, 1000, readers=3)
    results = ctx.Queue()

    def reader(reader_id):
        got = []
        while True:
            req = q.get(reader_id, timeout_s=5)
            if req is None:
                break
            got.append(bytes(req.body))
        results.put(got)

    procs = [ctx.Process(target=reader, args=(i,)) for i in range(3)]
    for p in procs:
        p.start()
    sent = [b"r%04d" % i for i in range(600)]
    for i, body in enumerate(sent):
        while not _put(q, i, body):
            pass  # bounded: readers free permits
    for _ in procs:
        q.put_stop()
    got = []
    for _ in procs:
        got.extend(results.get(timeout=20))
    for p in procs:
        p.join(10)
    assert sorted(got) == sent


def test_request_queue_wakes_the_reader_that_went_idle_last():
    """LIFO wake-ups: with readers idle, the most recently idle one is woken,
    so a lightly loaded broker keeps using the same (warm) worker."""
    ctx = multiprocessing.get_context("fork")
    q = RequestQueue(ctx, 100, readers=3)
    results = ctx.Queue()

    def reader(reader_id):
        while True:
            req = q.get(reader_id, timeout_s=10)
            if req is None:
                return
            results.put((reader_id, bytes(req.body)))

    def wait_all_idle():
        deadline = time.monotonic() + 10
        while len(q.idle_readers()) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        return q.idle_readers()

    procs = [ctx.Process(target=reader, args=(i,)) for i in range(3)]
    for i, p in enumerate(procs):
        p.start()
        deadline = time.monotonic() + 10
        while len(q.idle_readers()) < i + 1 and time.monotonic() < deadline:
            time.sleep(0.005)  # readers go idle in the order 0, 1, 2
    assert q.idle_readers() == [0, 1, 2]
    served = []
    for i in range(20):
        # The reader that answered goes back on top of the stack once it is
        # idle again (a request arriving before that wakes the next one).
        assert wait_all_idle()[-1] == 2
        assert _put(q, i, b"x%d" % i)
        served.append(results.get(timeout=10))
    for _ in procs:
        q.put_stop()
    for p in procs:
        p.join(10)
    # One request at a time: always the reader on top of the idle stack,
    # the one that became idle last (2) and came back first.
    assert {r for r, _ in served} == {2}
    assert [b for _, b in served] == [b"x%d" % i for i in range(20)]
