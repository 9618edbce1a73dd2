"""Transactional offset commits pending until their marker (Kafka's GroupMetadata /
GroupMetadataManager rules): live commits and replay."""

import pytest

from kafkapy.coordinator.transaction.pending_offsets import CommitRecord, OffsetsReplay, PendingTxnOffsets

TP0, TP1 = ("t", 0), ("t", 1)


def test_commit_applies_pending_offsets_abort_drops_them():
    pending, committed = PendingTxnOffsets(), {}
    pending.prepare(7, {TP0: 10, TP1: 20})
    assert pending.has_pending_for(TP0) and pending.has_pending_from(7)
    pending.on_append(7, TP0, 10, batch_offset=100)
    pending.on_append(7, TP1, 20, batch_offset=100)
    pending.complete(7, commit=True, committed=committed)
    assert committed == {TP0: CommitRecord(100, 10), TP1: CommitRecord(100, 20)}
    assert not pending.has_pending_for(TP0) and not pending.has_pending_from(7)
    pending.prepare(8, {TP0: 11})
    pending.on_append(8, TP0, 11, batch_offset=101)
    pending.complete(8, commit=False, committed=committed)
    assert committed[TP0] == CommitRecord(100, 10)


def test_a_newer_regular_commit_wins_over_an_older_transactional_one():
    pending = PendingTxnOffsets()
    committed = {TP0: CommitRecord(105, 50)}  # a plain commit appended after the transactional one
    pending.prepare(7, {TP0: 10})
    pending.on_append(7, TP0, 10, batch_offset=100)
    pending.complete(7, commit=True, committed=committed)
    assert committed[TP0] == CommitRecord(105, 50)


def test_failed_append_and_unappended_commit():
    pending, committed = PendingTxnOffsets(), {}
    pending.prepare(7, {TP0: 10})
    pending.fail(7, TP0)
    assert not pending.has_pending_from(7)
    pending.prepare(7, {TP0: 10})
    pending.on_append(7, TP0, 99, batch_offset=1)  # another value: not this commit's record
    with pytest.raises(ValueError):
        pending.complete(7, commit=True, committed=committed)


def test_replay_applies_only_committed_transactions_in_kafkas_order():
    replay = OffsetsReplay()
    replay.record(TP0, 1, batch_offset=0)                                   # plain commit
    replay.record(TP0, 2, batch_offset=1, producer_id=7, transactional=True)
    replay.record(TP1, 3, batch_offset=1, producer_id=7, transactional=True)
    replay.record(TP1, 4, batch_offset=2, producer_id=8, transactional=True)
    replay.record(TP1, 5, batch_offset=3)                                   # plain, after both
    replay.marker(8, commit=False)                                          # 8 aborted
    replay.marker(7, commit=True)                                           # 7 committed
    # TP0 takes 7's offset (appended after the plain one); TP1 keeps the later plain commit.
    assert replay.committed == {TP0: CommitRecord(1, 2), TP1: CommitRecord(3, 5)}
    replay.record(TP0, 6, batch_offset=4, producer_id=9, transactional=True)
    replay.record(TP0, None, batch_offset=5)                                # plain tombstone
    assert TP0 not in replay.committed
    assert replay.pending == {9: {TP0: CommitRecord(4, 6)}}                 # still open at the end
