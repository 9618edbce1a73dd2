"""Transaction markers: Kafka's control batches (EndTransactionMarker).

A COMMIT or ABORT marker is a v2 batch with attributes transactional |
control (``0x30``; no compression, CreateTime), the producer's id and epoch,
base sequence -1 and one record (offset delta 0, timestamp delta 0, no
headers) whose

* key is ``version int16 (0), type int16`` — Kafka's ControlRecordType:
  0 ABORT, 1 COMMIT (2-6 are KRaft's and other control types, never a
  transaction marker);
* value is ``version int16 (0), coordinator_epoch int32``; a newer version is
  read as version 0 (its first fields are the same), as Kafka does.

Written only by the broker (the transaction coordinator's markers); produce
requests carrying control batches are refused before they reach the log.
"""

from __future__ import annotations

import struct

from kafkapy._core.records_py import CorruptRecordError, build_batch, decode_records

__all__ = ["ABORT", "COMMIT", "EndTxnMarker", "CorruptRecordError", "build_end_txn_marker_batch",
           "parse_end_txn_marker", "marker_key", "marker_value"]

ABORT = 0
COMMIT = 1
CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class EndTxnMarker(tuple):
    """(control_type, coordinator_epoch) of one marker."""

    __slots__ = ()

    def __new__(cls, control_type: int, coordinator_epoch: int):
        return tuple.__new__(cls, (control_type, coordinator_epoch))

    control_type = property(lambda self: self[0])
    coordinator_epoch = property(lambda self: self[1])

    @property
    def is_commit(self) -> bool:
        return self[0] == COMMIT


def marker_key(control_type: int) -> bytes:
    return _KEY.pack(CONTROL_RECORD_KEY_VERSION, control_type)


def marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def build_end_txn_marker_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                               timestamp_ms: int, base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """Kafka's MemoryRecords.withEndTransactionMarker, byte for byte."""
    record = (marker_key(COMMIT if commit else ABORT), marker_value(coordinator_epoch), [], timestamp_ms)
    return build_batch([record], base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                       is_transactional=True, is_control=True)


def parse_end_txn_marker(batch) -> EndTxnMarker:
    """The marker of a control batch (the bytes of the whole batch).
    Raises CorruptRecordError if it is not a COMMIT/ABORT marker."""
    records = decode_records(batch)
    if not records:
        raise CorruptRecordError("control batch without a record")
    _offset, _ts, key, value, _headers = records[0]
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record key is too short")
    version, control_type = _KEY.unpack_from(key, 0)
    if version < 0 or control_type not in (ABORT, COMMIT):
        raise CorruptRecordError(f"not a transaction marker: control key version {version}, type {control_type}")
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError("end transaction marker value is shorter than 6 bytes")
    value_version, coordinator_epoch = _VALUE.unpack_from(value, 0)
    if value_version < 0:
        raise CorruptRecordError(f"invalid end transaction marker version {value_version}")
    return EndTxnMarker(control_type, coordinator_epoch)
