"""The shared fetch session table (server/fetch_session.py): Kafka's session
ids per shard, epochs, commits, eviction rules, the slot size bound, and one
table seen by a forked process, as handler workers see it."""

from __future__ import annotations

import os

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.fetch_session import (
    DECODED_SESSIONS,
    FINAL_EPOCH,
    NUM_SHARDS,
    SESSION_ID_RANGE,
    Entry,
    FetchSessionCache,
    next_epoch,
)

EVICTION_MS = 1000


def entries(n, topic="t"):
    return [Entry(topic, p, 0, 1 << 20, -1, -1, -1, 0, 0) for p in range(n)]


def test_next_epoch_is_kafkas():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_fewer_slots_than_shards_means_no_sessions():
    cache = FetchSessionCache(7, EVICTION_MS)
    assert cache.create(0, False, False, entries(1)) == 0


def test_ids_name_their_shard_round_robin_and_their_slot():
    cache = FetchSessionCache(2 * NUM_SHARDS, EVICTION_MS)
    ids = [cache.create(0, False, False, entries(1)) for _ in range(2 * NUM_SHARDS)]
    assert [i // SESSION_ID_RANGE for i in ids] == list(range(NUM_SHARDS)) * 2
    assert len(set(ids)) == len(ids) and all(i > 0 for i in ids)
    assert {cache.get(i).slot for i in ids} == set(range(2 * NUM_SHARDS))
    assert len(cache) == 2 * NUM_SHARDS
    # Every shard full, none evictable: no new session.
    assert cache.create(1, False, False, entries(1)) == 0
    assert cache.get(ids[0] + 1) is None and cache.get(0) is None and cache.get(-5) is None


def test_commit_moves_the_epoch_and_detects_a_second_commit():
    cache = FetchSessionCache(8, EVICTION_MS)
    sid = cache.create(0, False, False, entries(3))
    session = cache.get(sid)
    assert (session.epoch, len(session.entries)) == (1, 3)
    assert cache.commit(session, None, 10) == ErrorCode.NONE
    # The same snapshot again: another fetch of that epoch got there first.
    assert cache.commit(session, None, 11) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    session = cache.get(sid)
    assert session.epoch == 2
    changed = session.entries[1:] + [session.entries[0]._replace(high_watermark=7)]
    assert cache.commit(session, changed, 12) == ErrorCode.NONE
    again = cache.get(sid)
    assert again.epoch == 3 and again.entries == changed
    assert cache.remove(sid) and not cache.remove(sid)
    assert cache.commit(again, None, 13) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_session_larger_than_its_slot_is_not_kept():
    cache = FetchSessionCache(8, EVICTION_MS, slot_data_bytes=4096)
    assert cache.create(0, False, False, entries(1000)) == 0
    sid = cache.create(0, False, False, entries(10))
    session = cache.get(sid)
    assert cache.commit(session, entries(1000), 1) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.get(sid) is None


def _full_cache(privileged=False, size=1):
    cache = FetchSessionCache(NUM_SHARDS, EVICTION_MS)  # one slot per shard
    ids = [cache.create(0, privileged, False, entries(size)) for _ in range(NUM_SHARDS)]
    assert all(ids)
    return cache, ids


def test_a_stale_session_is_evicted_by_any_new_one():
    cache, ids = _full_cache()
    now = EVICTION_MS + 1
    assert cache.create(now, False, False, entries(1)) // SESSION_ID_RANGE == 0
    assert cache.get(ids[0]) is None and cache.get(ids[1]) is not None


def test_only_larger_sessions_evict_smaller_ones_once_they_are_old():
    cache, ids = _full_cache(size=2)
    # Not yet touched after the eviction time: evictable by no one.
    assert cache.create(10, False, False, entries(5)) == 0  # shard 0
    now = EVICTION_MS + 5
    for sid in ids:  # used again: fresh, but old enough to be evictable by all
        assert cache.commit(cache.get(sid), None, now) == ErrorCode.NONE
    assert cache.create(now, False, False, entries(2)) == 0  # shard 1: not more valuable
    new = cache.create(now, False, False, entries(3))  # shard 2
    assert new // SESSION_ID_RANGE == 2 and cache.get(ids[2]) is None


def test_privileged_sessions_evict_consumers_not_the_reverse():
    cache, ids = _full_cache(privileged=True)
    # A consumer's session never evicts a recent follower's.
    assert cache.create(10, False, False, entries(100)) == 0
    consumers = FetchSessionCache(NUM_SHARDS, EVICTION_MS)
    cids = [consumers.create(0, False, False, entries(100)) for _ in range(NUM_SHARDS)]
    # A follower's session evicts a consumer's however small it is.
    assert consumers.create(1, True, False, entries(1)) // SESSION_ID_RANGE == 0
    assert consumers.get(cids[0]) is None


def test_one_table_for_forked_processes():
    cache = FetchSessionCache(8, EVICTION_MS)
    sid = cache.create(0, False, True, entries(4, topic=b"\x01" * 16))
    pid = os.fork()
    if pid == 0:  # the child: a worker committing a fetch of the session
        code = 1
        try:
            session = cache.get(sid)
            moved = session.entries[1:] + session.entries[:1]
            code = 0 if cache.commit(session, moved, 5) == ErrorCode.NONE else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    session = cache.get(sid)
    assert session.epoch == 2 and session.uses_topic_ids
    assert [e.partition for e in session.entries] == [1, 2, 3, 0]


@pytest.mark.parametrize("slots", [8, 1000])
def test_for_config_is_one_cache_per_process_tree(monkeypatch, slots):
    monkeypatch.setattr(FetchSessionCache, "_inherited", None)
    config = {"max.incremental.fetch.session.cache.slots": slots,
              "min.incremental.fetch.session.eviction.ms": EVICTION_MS}
    first = FetchSessionCache.for_config(config)
    assert FetchSessionCache.for_config(config) is first and first.capacity == slots // NUM_SHARDS * NUM_SHARDS


def test_a_process_keeps_few_decoded_sessions_and_reads_the_others_again():
    cache = FetchSessionCache(8 * 20, EVICTION_MS)
    ids = [cache.create(0, False, False, entries(3, topic=f"t{i}")) for i in range(DECODED_SESSIONS + 20)]
    assert all(ids) and len(cache._decoded) == DECODED_SESSIONS
    for i, sid in enumerate(ids):
        session = cache.get(sid)
        assert [e.key for e in session.entries] == [f"t{i}"] * 3
        assert cache.commit(session, None, 1) == ErrorCode.NONE
