"""The idempotent producer's sequence decisions (client/idempotence.py, Java's
TransactionManager without transactions, KIP-360), without I/O: which sequence
errors are retried as they are, when the epoch is bumped, and that a batch
that may have been written is never re-sequenced under a new epoch (the chaos
run's duplicate: a value written by producer 2000 seq 5038 and again by 2001
seq 0 after a resumed zombie leader answered OUT_OF_ORDER_SEQUENCE_NUMBER)."""

from kafkapy.client.idempotence import MAX_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, Idempotence
from kafkapy.client.structs import TopicPartition

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)


class Batch:
    def __init__(self, tp, records=10):
        self.tp = tp
        self.record_count = records
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.maybe_written = False


def _send(idem, batch):
    """What the sender does when it drains a batch: stamp and seal."""
    assert idem.can_drain(batch.tp, batch)
    batch.producer_id, batch.producer_epoch, batch.base_sequence = idem.stamp(batch)
    return batch.producer_id, batch.producer_epoch, batch.base_sequence


def _idem():
    idem = Idempotence()
    idem.set_producer(2000, 0)
    return idem


def test_sequences_per_partition_and_a_retry_keeps_its_identity():
    idem = _idem()
    a1, a2, b1 = Batch(A), Batch(A, 5), Batch(B)
    assert _send(idem, a1) == (2000, 0, 0)
    assert _send(idem, a2) == (2000, 0, 10)
    assert _send(idem, b1) == (2000, 0, 0)
    a1.maybe_written = True  # its request timed out
    assert _send(idem, a1) == (2000, 0, 0)  # retried as it was
    idem.on_acked(a1)
    idem.on_acked(a2)
    assert _send(idem, Batch(A)) == (2000, 0, 15)
    assert not idem.bump_partitions


def test_out_of_order_for_a_batch_behind_a_pending_one_is_retried_without_bump():
    idem = _idem()
    a1, a2 = Batch(A), Batch(A)
    _send(idem, a1)
    _send(idem, a2)
    idem.on_sequence_error(a2, OUT_OF_ORDER_SEQUENCE_NUMBER)  # a1 not acknowledged yet: not the next one
    assert not idem.bump_partitions
    assert idem.can_drain(A, a2) and idem.stamp(a2) == (2000, 0, 10)


def test_zombie_out_of_order_bumps_only_its_partition_and_never_resequences_a_maybe_written_batch():
    idem = _idem()
    # Partition A: sequence 5038 sent to a leader that was paused; the answer was lost.
    a_acked = Batch(A, 5038)
    _send(idem, a_acked)
    idem.on_acked(a_acked)
    a_lost = Batch(A)
    assert _send(idem, a_lost) == (2000, 0, 5038)
    a_lost.maybe_written = True
    # Partition B: the resumed zombie answers OUT_OF_ORDER for the next batch.
    b_acked, b_next, b_after = Batch(B), Batch(B), Batch(B)
    _send(idem, b_acked)
    idem.on_acked(b_acked)
    _send(idem, b_next)
    _send(idem, b_after)
    b_after.maybe_written = True  # sent on the connection that dropped
    idem.on_sequence_error(b_next, OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert idem.bump_partitions == {B}
    assert not idem.can_drain(B, b_next)  # nothing of B goes out until the bump
    failed = idem.bump()
    assert (idem.producer_id, idem.producer_epoch) == (2000, 1)
    assert failed == [b_after]  # may be written: failed to the application, not re-sent
    assert b_next.base_sequence == -1 and _send(idem, b_next) == (2000, 1, 0)
    # A keeps the old epoch for its retry: the broker deduplicates 5038 if it has it.
    assert _send(idem, a_lost) == (2000, 0, 5038)
    fresh = Batch(A)
    assert not idem.can_drain(A, fresh)  # A changes epoch only with nothing unacked
    idem.on_acked(a_lost)
    assert _send(idem, fresh) == (2000, 1, 0)


def test_out_of_order_for_the_next_batch_when_nothing_may_be_written_resequences_all():
    idem = _idem()
    b1, b2 = Batch(B, 3), Batch(B, 4)
    _send(idem, b1)
    _send(idem, b2)
    idem.on_sequence_error(b1, OUT_OF_ORDER_SEQUENCE_NUMBER)
    idem.on_sequence_error(b2, OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert idem.bump() == []
    assert _send(idem, b1) == (2000, 1, 0)
    assert _send(idem, b2) == (2000, 1, 3)


def test_unknown_producer_id_bumps():
    idem = _idem()
    b = Batch(B)
    _send(idem, b)
    idem.on_sequence_error(b, UNKNOWN_PRODUCER_ID)
    assert idem.bump_partitions == {B}


def test_an_expired_batch_of_unknown_outcome_holds_new_batches_until_resolved():
    idem = _idem()
    a1, a2 = Batch(A), Batch(A)
    _send(idem, a1)
    _send(idem, a2)
    idem.on_failed(a1, maybe_written=True)  # delivery timeout in a retry
    assert idem.is_unresolved(A)
    assert not idem.can_drain(A, Batch(A))
    assert idem.can_drain(A, a2)  # the sequenced one still goes, as it was
    idem.on_acked(a2)  # the broker had a1: a2 followed it
    idem.resolve()
    assert not idem.is_unresolved(A) and not idem.bump_partitions
    assert _send(idem, Batch(A)) == (2000, 0, 20)


def test_an_unresolved_partition_whose_last_batches_all_failed_bumps():
    idem = _idem()
    a0, a1 = Batch(A), Batch(A)
    _send(idem, a0)
    idem.on_acked(a0)
    _send(idem, a1)
    idem.on_failed(a1, maybe_written=True)
    idem.resolve()
    assert idem.bump_partitions == {A}


def test_out_of_order_right_after_an_unresolved_batch_bumps_otherwise_waits():
    idem = _idem()
    a1, a2, a3 = Batch(A), Batch(A), Batch(A)
    for b in (a1, a2, a3):
        _send(idem, b)
    idem.on_failed(a1, maybe_written=True)
    idem.on_sequence_error(a3, OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert not idem.bump_partitions  # a2 may still resolve it
    idem.on_sequence_error(a2, OUT_OF_ORDER_SEQUENCE_NUMBER)  # a1 was not written: a gap
    assert idem.bump_partitions == {A}


def test_a_batch_refused_for_good_bumps_its_partition():
    idem = _idem()
    a1 = Batch(A)
    _send(idem, a1)
    idem.on_failed(a1, maybe_written=False)
    assert idem.bump_partitions == {A}


def test_an_exhausted_epoch_asks_for_a_new_producer_id():
    idem = Idempotence()
    idem.set_producer(7, MAX_EPOCH)
    b = Batch(B)
    _send(idem, b)
    idem.on_sequence_error(b, UNKNOWN_PRODUCER_ID)
    assert idem.bump() == []
    assert idem.producer_id == -1 and not idem.can_drain(B, b)
    idem.set_producer(8, 0)
    assert _send(idem, b) == (8, 0, 0)


def test_a_refused_batch_of_a_partition_still_on_the_old_epoch_bumps_it_again():
    idem = _idem()
    a1, a2, b1 = Batch(A), Batch(A), Batch(B)
    _send(idem, a1)
    _send(idem, a2)
    _send(idem, b1)
    idem.on_sequence_error(b1, UNKNOWN_PRODUCER_ID)
    idem.bump()
    assert idem.producer_epoch == 1
    idem.on_failed(a1, maybe_written=False)  # A's sequences of epoch 0 now have a gap before a2
    assert idem.bump_partitions == {A}
    idem.bump()
    assert _send(idem, a2) == (2000, 2, 0)
