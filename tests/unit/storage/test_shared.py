"""SharedPartitionTable: slot fields, cross-process locks, allocation, counters.

Every child process is forked (the broker's start method) and every wait is
bounded: joins, queue reads and lock attempts all carry timeouts.
"""

import multiprocessing
import os
import signal
import threading
import time

import pytest

from kafkapy.storage.shared import (
    LocalPartitionState,
    LockTimeout,
    PartitionState,
    SharedPartitionTable,
)

pytestmark = pytest.mark.timeout(60)

FORK = multiprocessing.get_context("fork")
JOIN_TIMEOUT_S = 20


def _run(processes):
    for p in processes:
        p.start()
    for p in processes:
        p.join(JOIN_TIMEOUT_S)
    for p in processes:
        if p.is_alive():
            p.kill()
            p.join(5)
            pytest.fail(f"child {p.pid} did not finish in {JOIN_TIMEOUT_S} s")
        assert p.exitcode == 0, f"child {p.pid} exited with {p.exitcode}"


def _put_and_exit(results, value):
    # os._exit skips the queue's feeder-thread flush, so flush it first.
    results.put(value)
    results.close()
    results.join_thread()
    os._exit(0)


def _expected_defaults():
    return {
        name: (-1 if name in ("active_max_timestamp", "active_offset_of_max_timestamp",
                              "leader_epoch", "first_batch_timestamp", "leader_id",
                              "current_leader_epoch", "partition_epoch") else 0)
        for name in PartitionState.FIELDS
    }


# --- single process --------------------------------------------------------------


def test_local_state_defaults_and_lock():
    state = LocalPartitionState(log_end_offset=7)
    expected = _expected_defaults()
    expected["log_end_offset"] = 7
    assert state.as_dict() == expected
    with state.lock():
        with state.lock():  # re-entrant
            state.high_watermark = 5
    assert state.high_watermark == 5
    with pytest.raises(AttributeError):
        LocalPartitionState(no_such_field=1)


def test_allocate_sets_defaults_and_fields_are_isolated(table):
    a, b = table.allocate(), table.allocate()
    assert a != b
    sa, sb = table.slot(a), table.slot(b)
    assert sa.as_dict() == _expected_defaults()
    for i, name in enumerate(PartitionState.FIELDS):
        setattr(sa, name, 1000 + i)
    assert sb.as_dict() == _expected_defaults()
    assert [getattr(table.slot(a), n) for n in PartitionState.FIELDS] == [1000 + i for i in range(len(PartitionState.FIELDS))]
    sa.log_end_offset = 2**63 - 1
    assert sa.log_end_offset == 2**63 - 1
    sa.log_end_offset = -(2**63)
    assert sa.log_end_offset == -(2**63)


def test_read_field_reads_what_the_slot_view_reads(table):
    """The processors' watched-field read (no view made) gives every field's
    value as the slot's own property, for each of two slots."""
    from kafkapy.storage.shared import PartitionState

    a, b = table.allocate(), table.allocate()
    for n, name in enumerate(PartitionState.FIELDS):
        setattr(table.slot(a), name, 1000 + n)
        setattr(table.slot(b), name, -(n + 1))
    for index in (a, b):
        for name in PartitionState.FIELDS:
            assert table.read_field(index, name) == getattr(table.slot(index), name), (index, name)
    with pytest.raises(IndexError):
        table.read_field(table.capacity, "high_watermark")


def test_free_then_reallocate_resets_fields(tmp_path):
    t = SharedPartitionTable(capacity=2, lock_path=str(tmp_path / "l"))
    try:
        a = t.allocate()
        t.slot(a).log_end_offset = 99
        t.slot(a).leader_epoch = 4
        b = t.allocate()
        with pytest.raises(MemoryError):
            t.allocate()
        t.free(a)
        with pytest.raises(ValueError):
            t.free(a)
        assert t.allocate() == a
        assert t.slot(a).as_dict() == _expected_defaults()
        assert t.used_slots == 2 and t.is_allocated(b)
        with pytest.raises(IndexError):
            t.slot(2)
    finally:
        t.close()


def test_lock_is_reentrant_and_excludes_threads(table):
    state = table.slot(table.allocate())
    threads_n, rounds_n = 4, 2000

    def work():
        for _ in range(rounds_n):
            with state.lock():
                with state.lock():
                    value = state.log_end_offset
                    if value % 97 == 0:
                        # A thread switch here loses updates unless lock()
                        # also excludes threads (record locks alone do not).
                        time.sleep(0)
                    state.log_end_offset = value + 1

    threads = [threading.Thread(target=work) for _ in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(JOIN_TIMEOUT_S)
    assert not any(th.is_alive() for th in threads)
    assert state.log_end_offset == threads_n * rounds_n


def test_counters_single_process(table):
    assert table.counter("metadata_generation") == 0
    assert table.increment("metadata_generation") == 1
    assert table.increment("metadata_generation", 5) == 6
    table.set_counter("broker_epoch", -3)
    assert table.counter("broker_epoch") == -3
    assert table.counters() == {"metadata_generation": 6, "broker_epoch": -3}
    with pytest.raises(ValueError):
        table.increment("x" * 57)


# --- across processes -------------------------------------------------------------


def _increment_field(table, index, rounds_n, use_threads):
    state = table.slot(index)

    def work():
        for _ in range(rounds_n):
            with state.lock():
                state.unflushed_messages = state.unflushed_messages + 1
                if state.unflushed_messages % 50 == 0:
                    time.sleep(0)  # give the other processes a chance to interleave

    if use_threads:
        threads = [threading.Thread(target=work) for _ in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(JOIN_TIMEOUT_S)
    else:
        work()
    os._exit(0)


def test_processes_increment_under_slot_lock_exactly(table):
    index = table.allocate()
    processes_n, rounds_n = 3, 3000
    procs = [FORK.Process(target=_increment_field, args=(table, index, rounds_n, False))
             for _ in range(processes_n)]
    _run(procs)
    assert table.slot(index).unflushed_messages == processes_n * rounds_n


def test_processes_with_threads_increment_exactly(table):
    index = table.allocate()
    processes_n, rounds_n = 2, 1500
    procs = [FORK.Process(target=_increment_field, args=(table, index, rounds_n, True))
             for _ in range(processes_n)]
    _run(procs)
    assert table.slot(index).unflushed_messages == processes_n * 2 * rounds_n


def _hold_lock_forever(table, index, ready):
    lock = table.slot(index).lock()
    lock.acquire()
    ready.set()
    time.sleep(60)  # killed long before this ends
    os._exit(1)


def _acquire_and_report(table, index, results):
    start = time.monotonic()
    try:
        with table.slot(index).lock(timeout_s=5):
            table.slot(index).generation += 1
        waited_s = time.monotonic() - start
    except LockTimeout:
        waited_s = None
    _put_and_exit(results, waited_s)


def test_sigkilled_holder_releases_slot_lock(table):
    index = table.allocate()
    other = table.allocate()
    ready = FORK.Event()
    holder = FORK.Process(target=_hold_lock_forever, args=(table, index, ready))
    holder.start()
    try:
        assert ready.wait(10), "holder never took the lock"
        with pytest.raises(LockTimeout):
            with table.slot(index).lock(timeout_s=0.2):
                pass
        # Other slots are independent of the held one.
        with table.slot(other).lock(timeout_s=1):
            pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(10)
        assert holder.exitcode == -signal.SIGKILL
        results = FORK.Queue()
        waiter = FORK.Process(target=_acquire_and_report, args=(table, index, results))
        _run([waiter])
        waited_s = results.get(timeout=10)
        assert waited_s is not None and waited_s < 2
        assert table.slot(index).generation == 1
        with table.slot(index).lock(timeout_s=2):
            pass
    finally:
        if holder.is_alive():
            holder.kill()
            holder.join(5)


def _nested_lock_child(table, index, results):
    state = table.slot(index)
    try:
        with state.lock(timeout_s=0.2):
            outcome = "acquired"
    except LockTimeout:
        outcome = "blocked"
    _put_and_exit(results, outcome)


def test_inner_release_keeps_record_lock_until_outermost(table):
    index = table.allocate()
    state = table.slot(index)
    results = FORK.Queue()
    with state.lock():
        with state.lock():
            pass
        # Still held: the inner exit must not have issued LOCK_UN.
        _run([FORK.Process(target=_nested_lock_child, args=(table, index, results))])
        assert results.get(timeout=5) == "blocked"
    _run([FORK.Process(target=_nested_lock_child, args=(table, index, results))])
    assert results.get(timeout=5) == "acquired"


def _allocate_many(table, count, results):
    got = [table.allocate() for _ in range(count)]
    _put_and_exit(results, got)


def test_allocate_across_processes_never_hands_out_a_slot_twice(table):
    processes_n, per_process = 4, 150
    results = FORK.Queue()
    procs = [FORK.Process(target=_allocate_many, args=(table, per_process, results))
             for _ in range(processes_n)]
    _run(procs)
    all_indexes = []
    for _ in range(processes_n):
        all_indexes.extend(results.get(timeout=10))
    assert len(all_indexes) == processes_n * per_process
    assert len(set(all_indexes)) == len(all_indexes)
    assert table.used_slots == len(all_indexes)
    assert all(table.is_allocated(i) for i in all_indexes)


def _free_and_reallocate(table, to_free, results):
    for index in to_free:
        table.free(index)
    _put_and_exit(results, [table.allocate() for _ in range(len(to_free))])


def test_free_and_reallocate_across_processes(table):
    held = [table.allocate() for _ in range(100)]
    results = FORK.Queue()
    procs = [FORK.Process(target=_free_and_reallocate, args=(table, held[i::2], results))
             for i in range(2)]
    _run(procs)
    again = results.get(timeout=10) + results.get(timeout=10)
    assert len(set(again)) == 100
    assert table.used_slots == 100


def _bump_counter(table, rounds_n):
    for _ in range(rounds_n):
        table.increment("metadata_generation")
    table.set_counter(f"child_{os.getpid()}", 1)
    os._exit(0)


def test_counters_across_processes(table):
    table.set_counter("metadata_generation", 10)
    procs = [FORK.Process(target=_bump_counter, args=(table, 500)) for _ in range(3)]
    _run(procs)
    assert table.counter("metadata_generation") == 10 + 3 * 500
    # Names registered by the children are visible in the parent.
    assert sorted(k for k in table.counters() if k.startswith("child_")) == sorted(
        f"child_{p.pid}" for p in procs)


def _report_fd(table, results):
    _put_and_exit(results, table._fd)


def test_children_reopen_lock_file(table):
    results = FORK.Queue()
    _run([FORK.Process(target=_report_fd, args=(table, results))])
    # The child's descriptor is a fresh open; the parent's is untouched.
    assert isinstance(results.get(timeout=5), int)
    os.fstat(table._fd)
    with table.lock_all(timeout_s=1):
        pass


def test_table_lock_excludes_other_process(table):
    results = FORK.Queue()

    def child():
        try:
            with table.lock_all(timeout_s=0.2):
                outcome = "acquired"
        except LockTimeout:
            outcome = "blocked"
        _put_and_exit(results, outcome)

    with table.lock_all():
        _run([FORK.Process(target=child)])
        assert results.get(timeout=5) == "blocked"


def test_close_releases_mapping(tmp_path):
    t = SharedPartitionTable(capacity=8, lock_path=str(tmp_path / "l"))
    state = t.slot(t.allocate())
    state.log_end_offset = 3
    del state
    t.close()
    t.close()  # idempotent


def test_snapshot_and_store_match_the_fields(table):
    from kafkapy.storage.shared import FIELD, LocalPartitionState, PartitionState

    shared = table.slot(table.allocate())
    local = LocalPartitionState()
    for state in (shared, local):
        with state.lock():
            assert state.snapshot() == tuple(PartitionState.DEFAULTS[n] for n in PartitionState.FIELDS)
            state.store(0, (10, 9))
            state.store(FIELD["active_size"], (4096, 3, 2))
            state.first_batch_timestamp = 77
            snap = state.snapshot()
            assert snap == tuple(getattr(state, n) for n in PartitionState.FIELDS)
            assert (state.log_end_offset, state.high_watermark, state.log_start_offset) == (10, 9, 0)
            assert (state.active_size, state.index_entries, state.time_index_entries,
                    state.active_max_timestamp) == (4096, 3, 2, -1)
            assert snap[FIELD["first_batch_timestamp"]] == 77
    # Neighbouring slots are untouched by a store.
    other = table.slot(table.allocate())
    assert other.snapshot()[0] == 0


def _increment_through_view(view, rounds_n, results):
    # ``view`` was made, and its lock looked up, in the parent before the fork.
    for _ in range(rounds_n):
        with view.lock():
            view.unflushed_messages += 1
    _put_and_exit(results, view.lock() is view._table._record_lock(1 + view.index))


def test_slot_view_made_before_fork_takes_the_childs_lock(table):
    """A view caches its record lock; after a fork it must not hand the child
    the parent's (whose thread lock a parent thread may hold)."""
    index = table.allocate()
    view = table.slot(index)
    parent_lock = view.lock()
    assert view.lock() is parent_lock                      # cached
    results = FORK.Queue()
    with parent_lock:
        # The parent holds the record lock: the children wait for it (so
        # they really lock through the kernel), then count exactly.
        procs = [FORK.Process(target=_increment_through_view, args=(view, 500, results)) for _ in range(2)]
        for p in procs:
            p.start()
        time.sleep(0.05)
        assert view.unflushed_messages == 0
    for p in procs:
        p.join(JOIN_TIMEOUT_S)
        assert p.exitcode == 0
    assert [results.get(timeout=5) for _ in procs] == [True, True]
    assert view.unflushed_messages == 1000
    assert view.lock() is parent_lock


def test_counter_reads_a_known_name_and_an_unknown_one(table):
    assert table.counter("never_set") == 0
    table.set_counter("metadata_generation", 5)
    assert table.counter("metadata_generation") == 5
    table.increment("metadata_generation")
    assert table.counter("metadata_generation") == 6


# --- a store as a reader without the lock sees it ------------------------------------


class _Watched:
    """An int for ``struct`` whose conversion (``__index__``, called while a
    store packs its values) first runs ``look``: what a reader without the
    lock would see of the slot at that moment of the store."""

    def __init__(self, value, look):
        self.value = value
        self.look = look

    def __index__(self):
        self.look()
        return self.value


def test_a_store_shows_each_word_old_or_new_and_never_zero(table):
    """``store``/``store_replica`` are read without the lock (a leader's log
    end offset, a follower's fetch state): mid-store every word must be its
    old value or its new one. ``struct.pack_into`` on the mapping zero-filled
    the words before writing them, and a leader read its log end offset 0
    there (a follower in the ISR truncated to 0 on the answer)."""
    from kafkapy.storage.shared import REPLICA_WORDS

    state = table.slot(table.allocate())
    old = tuple(range(101, 112))  # log_end_offset .. first_batch_timestamp: 11 words, none 0
    new = tuple(range(201, 212))
    seen = []
    with state.lock():
        state.store(0, old)
        state.store(0, [_Watched(v, lambda: seen.append(state.snapshot()[:11])) for v in new])
        assert state.snapshot()[:11] == new
        assert len(seen) == 11
        for snapshot in seen:
            assert all(word in (was, now) for word, was, now in zip(snapshot, old, new)), snapshot

        old_replica = (7, 500, 1_000, 500, 1_000)
        new_replica = (7, 501, 2_000, 501, 2_000)
        seen.clear()
        state.store_replica(1, old_replica)
        state.store_replica(1, [_Watched(v, lambda: seen.append(state.replica_block()[REPLICA_WORDS:
                                                                                        2 * REPLICA_WORDS]))
                                for v in new_replica])
        assert state.replica_block()[REPLICA_WORDS:2 * REPLICA_WORDS] == new_replica
        assert len(seen) == REPLICA_WORDS
        for block in seen:
            assert all(word in (was, now) for word, was, now in zip(block, old_replica, new_replica)), block


STORES_N = 100_000


def _store_rising_log_end_offset(table, index, first):
    state = table.slot(index)
    for offset in range(first, first + STORES_N):
        with state.lock():
            state.store(0, (offset, offset))  # as an append stores log end offset and high watermark
    os._exit(0)


def test_another_process_never_reads_a_stored_word_going_back(table):
    """One process stores a rising log end offset (as appends do, under the
    slot lock); another reads it without the lock, as a leader answering a
    follower's Fetch did: it never goes back. With ``pack_into`` on the
    mapping it read 0 in the store's zero-filled moment."""
    index = table.allocate()
    state = table.slot(index)
    first = 1_000
    state.store(0, (first - 1, first - 1))
    writer = FORK.Process(target=_store_rising_log_end_offset, args=(table, index, first))
    writer.start()
    try:
        previous = first - 1
        reads = 0
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while previous < first + STORES_N - 1 and time.monotonic() < deadline:
            for _ in range(1_000):
                offset = state.log_end_offset
                assert offset >= previous, f"log end offset read {offset} after {previous} ({reads} reads)"
                previous = offset
                reads += 1
        assert previous == first + STORES_N - 1, f"the writer stopped at {previous}"
    finally:
        writer.join(JOIN_TIMEOUT_S)
        if writer.is_alive():
            writer.kill()
            writer.join(5)
    assert writer.exitcode == 0
