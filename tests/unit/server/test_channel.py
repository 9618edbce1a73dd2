"""The request channel's pieces: the arena ring allocator and the bounded queue."""

import multiprocessing
import queue
import random

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


def test_request_queue_is_bounded_and_fifo():
    ctx = multiprocessing.get_context("fork")
    q = RequestQueue(ctx, 3)
    assert all(q.try_put(("req", i)) for i in range(3))
    assert not q.try_put(("req", 3)), "a full queue must refuse, not block"
    assert q.size() == 3
    assert q.get() == ("req", 0)
    assert q.try_put(("req", 3)), "a permit comes back when a worker takes a request"
    assert [q.get(), q.get(), q.get()] == [("req", 1), ("req", 2), ("req", 3)]
    with pytest.raises(queue.Empty):
        q.get(timeout_s=0.01)
    q.put_stop()
    assert q.get() is None
