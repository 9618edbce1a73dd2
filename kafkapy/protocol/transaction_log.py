"""Kafka's record formats in ``__transaction_state``, and which partition an id uses.

Sans-IO codecs, byte-for-byte Kafka's generated ``TransactionLogKey`` /
``TransactionLogValue`` (transaction-coordinator/.../common/message in 3.9)
written with ``MessageUtil.toVersionPrefixedBytes``, so Kafka's own tools
(kafka-console-consumer with the transaction-log formatter, kafka-dump-log
``--transaction-log-decoder``) read this topic:

* key, version 0 (the only one): ``version int16, transactional_id string``
  (int16 length).
* value, version 0: ``version int16, producer_id int64, producer_epoch int16,
  transaction_timeout_ms int32, transaction_status int8,
  transaction_partitions nullable [topic string, partition_ids [int32]],
  transaction_last_update_timestamp_ms int64,
  transaction_start_timestamp_ms int64``; arrays int32-counted (-1: null).
* value, version 1: the same fields, flexible (compact strings and arrays:
  unsigned varint length + 1, 0 for null; an empty tagged-field section after
  each partition entry and at the end).
* a null value is a tombstone: the transactional id expired.
* ``transaction_status`` is Kafka's TransactionState id (``TransactionState``,
  with the names DescribeTransactions answers).

Kafka 3.9 writes value version 0 unless ``transaction.version`` 1 is
enabled (not the default), and null partitions in state Empty; so do we.
Partitions are written grouped by topic, topics and ids sorted (Kafka's
order comes from a hash set; any order reads back the same).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafkapy.protocol.coordinator_records import RecordFormatError, _Reader, _Writer, partition_for

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TXN_KEY_VERSION",
    "TransactionState",
    "TxnLogValue",
    "RecordFormatError",
    "partition_for",
    "encode_key",
    "decode_key",
    "encode_value",
    "decode_value",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"
TXN_KEY_VERSION = 0
TXN_VALUE_VERSIONS = (0, 1)


class TransactionState(enum.IntEnum):
    """Kafka's TransactionState ids, as written in TransactionLogValue.TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions / ListTransactions answer (Kafka's ``state.name``)."""
        return _NAMES[self]

    @property
    def is_expiration_allowed(self) -> bool:
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @classmethod
    def from_name(cls, name: str) -> "TransactionState | None":
        return _BY_NAME.get(name)


_S = TransactionState
_NAMES = {_S.EMPTY: "Empty", _S.ONGOING: "Ongoing", _S.PREPARE_COMMIT: "PrepareCommit",
          _S.PREPARE_ABORT: "PrepareAbort", _S.COMPLETE_COMMIT: "CompleteCommit",
          _S.COMPLETE_ABORT: "CompleteAbort", _S.DEAD: "Dead", _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {name: state for state, name in _NAMES.items()}


@dataclass(frozen=True)
class TxnLogValue:
    """One TransactionLogValue. ``status`` is the state's id (Kafka's
    TransactionState.id: 0 Empty .. 7 PrepareEpochFence); ``partitions`` a
    frozenset of (topic, partition)."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    status: int
    partitions: frozenset
    last_update_timestamp_ms: int
    start_timestamp_ms: int


def encode_key(transactional_id: str) -> bytes:
    w = _Writer()
    w.i16(TXN_KEY_VERSION)
    w.string(transactional_id)
    return bytes(w.out)


def decode_key(buf) -> str | None:
    """The transactional id, or None for a key version this code does not
    know (Kafka's UnknownKey: skipped on load)."""
    r = _Reader(buf)
    version = r.i16()
    if version != TXN_KEY_VERSION:
        return None
    return r.string()


def encode_value(value: TxnLogValue, version: int = 0) -> bytes:
    if version not in TXN_VALUE_VERSIONS:
        raise ValueError(f"TransactionLogValue version {version} is not one of {TXN_VALUE_VERSIONS}")
    if value.status == 0 and value.partitions:
        # Kafka's valueToBytes refuses this too: an Empty transaction has no partitions.
        raise ValueError("a transaction in state Empty cannot have partitions")
    w = _Writer(flexible=version >= 1)
    w.i16(version)
    w.i64(value.producer_id)
    w.i16(value.producer_epoch)
    w.i32(value.transaction_timeout_ms)
    w.out += value.status.to_bytes(1, "big", signed=True)
    if value.status == 0:
        w.array_len(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in value.partitions:
            by_topic.setdefault(topic, []).append(partition)
        w.array_len(len(by_topic))
        for topic in sorted(by_topic):
            w.string(topic)
            ids = sorted(by_topic[topic])
            w.array_len(len(ids))
            for p in ids:
                w.i32(p)
            w.tags()
    w.i64(value.last_update_timestamp_ms)
    w.i64(value.start_timestamp_ms)
    w.tags()
    return bytes(w.out)


def decode_value(buf) -> TxnLogValue | None:
    """A value's fields; None for a tombstone (``buf`` None). Raises
    RecordFormatError for an unknown version or bytes that do not decode
    (Kafka's readTxnRecordValue throws on both)."""
    if buf is None:
        return None
    version = _Reader(buf).i16()
    if version not in TXN_VALUE_VERSIONS:
        raise RecordFormatError(f"unknown TransactionLogValue version {version}")
    r = _Reader(buf, 2, flexible=version >= 1)
    producer_id = r.i64()
    producer_epoch = r.i16()
    timeout_ms = r.i32()
    r._need(1)
    status = int.from_bytes(r.buf[r.pos:r.pos + 1], "big", signed=True)
    r.pos += 1
    partitions = set()
    for _ in range(r.array_len()):
        topic = r.string()
        for _ in range(r.array_len()):
            partitions.add((topic, r.i32()))
        r.skip_tags()
    last_update = r.i64()
    start = r.i64()
    r.skip_tags()
    return TxnLogValue(producer_id, producer_epoch, timeout_ms, status,
                       frozenset() if status == 0 else frozenset(partitions), last_update, start)
