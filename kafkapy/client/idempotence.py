"""Sequence bookkeeping of an idempotent, non-transactional producer (Java's
TransactionManager without transactions, KIP-98 and KIP-360); no I/O.

The sender thread owns one ``Idempotence``.  Each partition keeps the
producer id/epoch its sequences belong to, the next sequence, the last
acknowledged one and the batches sequenced but not yet completed
("unacked": on the wire or waiting for a retry).  The rules, as Java 3.9's:

* a retried batch keeps its producer id, epoch and sequence, so the broker
  deduplicates it if an earlier attempt was written;
* OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is not the next one after
  the last acknowledged sequence is explained by an earlier batch still
  pending: retried as it is.  For the next batch (a real gap, or a broker
  that lost our state: a leader resumed from a pause that has not heard of
  its successor answers so) and for UNKNOWN_PRODUCER_ID, the partition asks
  for an epoch bump;
* a batch failed to the application whose outcome is unknown (its request
  timed out or its connection dropped, or it expired in a retry) marks its
  partition "unresolved": new batches of it wait until the unacked ones
  complete; if the last acknowledged sequence is then not the last sequence
  sent, the partition asks for an epoch bump.  A batch failed for sure
  (refused by the broker) asks for a bump at once (a gap otherwise);
* the bump (Java's bumpIdempotentProducerEpoch) increments the epoch
  locally (a new InitProducerId only once the epoch is exhausted) and
  restarts the sequences of the partitions that asked for it at 0, once
  none of their batches is on the wire.  Their unacked batches are
  re-sequenced under the new epoch only if no attempt of theirs can have
  been written; the others are returned to be failed to the application
  (OUT_OF_ORDER_SEQUENCE_NUMBER), never re-sent under the new epoch: the
  broker could not recognise them as duplicates.  Other partitions move to
  the new epoch (from sequence 0) when they have nothing unacked.

Batches are the accumulator's ``ProducerBatch`` (``tp``, ``producer_id``,
``producer_epoch``, ``base_sequence``, ``record_count``, ``maybe_written``).
"""

from __future__ import annotations

import logging

log = logging.getLogger("kafkapy.client")

SEQUENCE_MASK = 0x7FFFFFFF
MAX_EPOCH = 32767
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
UNKNOWN_PRODUCER_ID = 59


def last_sequence(batch) -> int:
    return (batch.base_sequence + batch.record_count - 1) & SEQUENCE_MASK


def _follows(sequence: int, last: int) -> bool:
    """``sequence`` is at or after ``last`` (sequences wrap at 2**31)."""
    return ((sequence - last) & SEQUENCE_MASK) < (1 << 30)


class _Partition:
    __slots__ = ("producer_id", "producer_epoch", "next_sequence", "last_acked", "unacked")

    def __init__(self, producer_id: int, producer_epoch: int):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence = 0
        self.last_acked = -1
        self.unacked: set = set()

    def restart(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence = 0
        self.last_acked = -1


class Idempotence:
    def __init__(self):
        self.producer_id = -1
        self.producer_epoch = -1
        self._partitions: dict = {}
        self.bump_partitions: set = set()   # Java's partitionsToRewriteSequences
        self._unresolved: dict = {}         # tp -> the sequence after the batch of unknown outcome

    # ------------------------------------------------------------ identity

    def set_producer(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch

    def _stale(self, entry: _Partition) -> bool:
        return entry.producer_id != self.producer_id or entry.producer_epoch != self.producer_epoch

    def _is_next(self, tp, sequence: int) -> bool:
        entry = self._partitions.get(tp)
        last = -1 if entry is None else entry.last_acked
        return ((last + 1) & SEQUENCE_MASK) == sequence

    def is_unresolved(self, tp) -> bool:
        return tp in self._unresolved

    def unacked(self, tp) -> int:
        entry = self._partitions.get(tp)
        return 0 if entry is None else len(entry.unacked)

    # ------------------------------------------------------------ sending

    def can_drain(self, tp, batch) -> bool:
        """May ``batch`` (the head of its partition's queue) be sent now?"""
        if tp in self.bump_partitions or self.producer_id < 0:
            return False
        if batch.base_sequence >= 0:
            return True  # a retry, with its own identity (the sender keeps order)
        if tp in self._unresolved:
            return False
        entry = self._partitions.get(tp)
        # A partition changes identity only with nothing unacked.
        return entry is None or not (entry.unacked and self._stale(entry))

    def stamp(self, batch) -> tuple:
        """(producer id, epoch, base sequence) to seal a drained batch with."""
        if batch.base_sequence >= 0:
            return batch.producer_id, batch.producer_epoch, batch.base_sequence
        tp = batch.tp
        entry = self._partitions.get(tp)
        if entry is None:
            entry = self._partitions[tp] = _Partition(self.producer_id, self.producer_epoch)
        elif self._stale(entry):  # can_drain: nothing of it unacked
            entry.restart(self.producer_id, self.producer_epoch)
        sequence = entry.next_sequence
        entry.next_sequence = (sequence + batch.record_count) & SEQUENCE_MASK
        entry.unacked.add(batch)
        return entry.producer_id, entry.producer_epoch, sequence

    # ------------------------------------------------------------ outcomes

    def _take(self, batch):
        entry = self._partitions.get(batch.tp)
        if entry is None or batch not in entry.unacked:
            return None
        entry.unacked.discard(batch)
        return entry

    def on_acked(self, batch) -> None:
        """Written (or DUPLICATE_SEQUENCE_NUMBER: written before)."""
        entry = self._take(batch)
        if entry is None or batch.producer_id != entry.producer_id or batch.producer_epoch != entry.producer_epoch:
            return
        last = last_sequence(batch)
        if entry.last_acked < 0 or _follows(last, entry.last_acked):
            entry.last_acked = last

    def on_sequence_error(self, batch, code: int) -> None:
        """OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID for a batch that
        will be retried (Java's canRetry): maybe ask for an epoch bump."""
        tp = batch.tp
        if code == UNKNOWN_PRODUCER_ID:
            self.request_bump(tp)
            return
        unresolved = self._unresolved.get(tp)
        if unresolved is None and not self._is_next(tp, batch.base_sequence):
            return  # an earlier batch is pending: retried as it is
        if unresolved is None or batch.base_sequence == unresolved:
            self.request_bump(tp)

    def on_failed(self, batch, maybe_written: bool) -> None:
        """A sequenced batch failed to the application for good (Java's handleFailedBatch)."""
        if self._take(batch) is None:
            return
        if maybe_written:
            after = (last_sequence(batch) + 1) & SEQUENCE_MASK
            known = self._unresolved.get(batch.tp)
            self._unresolved[batch.tp] = after if known is None or _follows(after, known) else known
        else:
            self.request_bump(batch.tp)

    def request_bump(self, tp) -> None:
        if tp not in self.bump_partitions:
            log.info("epoch bump requested for %s (producer id %d, epoch %d)", tp, self.producer_id,
                     self.producer_epoch)
        self.bump_partitions.add(tp)

    def resolve(self) -> None:
        """Java's maybeResolveSequences: an unresolved partition with nothing
        unacked is resolved if its last acknowledged sequence is the last one
        sent, else it asks for a bump."""
        for tp in list(self._unresolved):
            entry = self._partitions.get(tp)
            if entry is not None and entry.unacked:
                continue
            del self._unresolved[tp]
            if entry is not None and not self._stale(entry) and not self._is_next(tp, entry.next_sequence):
                self.request_bump(tp)

    def bump(self) -> list:
        """Bump the epoch and restart the asking partitions' sequences (the
        caller checked none of their batches is on the wire).  Returns their
        unacked batches that may have been written, to be failed; the others
        get ``base_sequence = -1`` and are sequenced again when drained."""
        if self.producer_epoch >= MAX_EPOCH:
            self.producer_id = self.producer_epoch = -1  # a new InitProducerId
        else:
            self.producer_epoch += 1
        log.info("producer epoch bumped: producer id %d epoch %d; sequences restart for %s",
                 self.producer_id, self.producer_epoch, sorted(map(str, self.bump_partitions)))
        failed = []
        for tp in self.bump_partitions:
            self._unresolved.pop(tp, None)
            entry = self._partitions.get(tp)
            if entry is None:
                continue
            for batch in entry.unacked:
                if batch.maybe_written:
                    failed.append(batch)
                else:
                    batch.base_sequence = -1
            entry.unacked.clear()
            entry.restart(self.producer_id, self.producer_epoch)
        self.bump_partitions.clear()
        return failed
