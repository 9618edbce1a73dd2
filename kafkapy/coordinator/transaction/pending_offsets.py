"""Offsets committed inside transactions (TxnOffsetCommit), as Kafka's group
coordinator keeps them (GroupMetadata's pendingTransactionalOffsetCommits and
GroupMetadataManager's loading), sans-IO; for the group coordinator to adopt
when TxnOffsetCommit is wired (docs/architecture.md, "Transactions").

A transactional offset commit is written to ``__consumer_offsets`` in a
transactional batch of the producer; it is *pending* until the transaction's
marker reaches that partition: COMMIT makes it the group's committed offset
unless a newer commit of that partition was appended after it (Kafka's
``olderThan``: by the offset of the batch that carried it), ABORT drops it.
While pending, OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for the partition.

Keys and values are opaque here (the group coordinator's ``OffsetKey`` and
``OffsetAndMetadata``); a value None is a tombstone.
"""

from __future__ import annotations

from collections import namedtuple

# A commit with the offset of the batch that appended it (None: not appended yet).
CommitRecord = namedtuple("CommitRecord", ("appended_batch_offset", "value"))


def _older(current: CommitRecord | None, candidate: CommitRecord) -> bool:
    """Kafka's CommitRecordMetadataAndOffset.olderThan, from the candidate's side:
    may ``candidate`` replace ``current``?"""
    if current is None:
        return True
    if current.appended_batch_offset is None or candidate.appended_batch_offset is None:
        raise ValueError("comparing a commit that was never appended")
    return current.appended_batch_offset < candidate.appended_batch_offset


class PendingTxnOffsets:
    """One group's transactional offset commits waiting for their markers."""

    def __init__(self):
        # producer id -> {partition key: CommitRecord}
        self.pending: dict[int, dict] = {}

    def prepare(self, producer_id: int, offsets: dict) -> None:
        """TxnOffsetCommit accepted: ``offsets`` (key -> value) pending, not yet appended."""
        producer = self.pending.setdefault(producer_id, {})
        for key, value in offsets.items():
            producer[key] = CommitRecord(None, value)

    def on_append(self, producer_id: int, key, value, batch_offset: int) -> None:
        """The commit record is in the log at ``batch_offset``."""
        producer = self.pending.get(producer_id)
        if producer is not None and key in producer and producer[key].value == value:
            producer[key] = CommitRecord(batch_offset, value)

    def fail(self, producer_id: int, key) -> None:
        """The commit record could not be written: forget it."""
        producer = self.pending.get(producer_id)
        if producer is not None:
            producer.pop(key, None)
            if not producer:
                del self.pending[producer_id]

    def complete(self, producer_id: int, commit: bool, committed: dict) -> None:
        """The producer's marker was written to the group's partition:
        apply its pending commits to ``committed`` (key -> CommitRecord, the
        group's offsets) on COMMIT, drop them on ABORT."""
        producer = self.pending.pop(producer_id, None)
        if not commit or not producer:
            return
        for key, record in producer.items():
            if record.appended_batch_offset is None:
                raise ValueError(f"producer {producer_id}: committing an offset that was never appended")
            if _older(committed.get(key), record):
                committed[key] = record

    def has_pending_from(self, producer_id: int) -> bool:
        return producer_id in self.pending

    def has_pending_for(self, key) -> bool:
        """require_stable: is an offset of this partition waiting for a marker?"""
        return any(key in producer for producer in self.pending.values())


class OffsetsReplay:
    """Loading ``__consumer_offsets`` with transactional commits (Kafka's
    GroupMetadataManager.doLoadGroupsAndOffsets for offset records).

    Feed it every offset record and every transaction marker of a partition
    in log order; ``committed`` then holds the offsets as Kafka loads them
    (key -> CommitRecord; a tombstone removes) and ``pending`` the
    transactions still open (their producer id -> key -> CommitRecord), to
    hand to each group's ``PendingTxnOffsets``."""

    def __init__(self):
        self.committed: dict = {}
        self.pending: dict[int, dict] = {}

    def record(self, key, value, batch_offset: int, producer_id: int = -1, transactional: bool = False) -> None:
        if transactional:
            producer = self.pending.setdefault(producer_id, {})
            if value is None:
                producer.pop(key, None)
            else:
                producer[key] = CommitRecord(batch_offset, value)
        elif value is None:
            self.committed.pop(key, None)
        else:
            self.committed[key] = CommitRecord(batch_offset, value)

    def marker(self, producer_id: int, commit: bool) -> None:
        producer = self.pending.pop(producer_id, {})
        if commit:
            for key, record in producer.items():
                if _older(self.committed.get(key), record):
                    self.committed[key] = record
