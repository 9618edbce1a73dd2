"""kafkapy-dump-log: print log segments, indexes and snapshots offline (kafka-dump-log.sh).

Reads the files directly and never writes to them, so it is safe on the log
dirs of a running broker (it may then see a partially written tail batch,
which it reports as trailing bytes exactly as Kafka's tool does).

Output follows Kafka's DumpLogSegments line for line:

* every file: ``Dumping <path>``;
* ``.log``: ``Log starting offset: N``, then per batch ``baseOffset: ...
  lastOffset: ... count: ... ... isvalid: true``; with ``--deep-iteration``
  (implied by ``--print-data-log``) a ``| offset: ...`` line per record, and
  with ``--print-data-log`` its ``key:`` and ``payload:``;
* ``.index``: ``offset: N position: P``, and on stderr the entries whose
  position is not the start of the batch ending at that offset
  (``Mismatches in :<path>`` / ``  Index offset: X, log offset: Y``);
* ``.timeindex``: ``timestamp: T offset: N``, with Kafka's three error reports;
* ``.snapshot`` (producer state) and ``.txnindex``.

Index files of an active segment are preallocated and zero-filled past the
last entry; like Kafka we stop at the first zero entry (relative offset 0
after slot 0).  For ``--index-sanity-check`` we count entries the same way,
so a live segment's index passes as it does after Kafka trims it on close.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
import sys
from dataclasses import dataclass, field
from typing import Optional, Sequence

import crc32c

from kafkapy._core.records_py import CorruptRecordError, UnsupportedCompressionError, decode_records
from kafkapy.tools._cli import ToolError, parser, run

# Kafka's FileLogInputStream needs offset(8) + length(4) + leader epoch(4) +
# magic(1) = 17 bytes to see a batch's size and magic.
HEADER_SIZE_UP_TO_MAGIC = 17
LOG_OVERHEAD = 12
BATCH_HEADER_SIZE = 61
# Smallest batchLength a v0 message could have had (LegacyRecord.RECORD_OVERHEAD_V0);
# below it Kafka raises CorruptRecordException rather than reading further.
RECORD_OVERHEAD_V0 = 14
# DumpLogSegments' --max-message-size default: 5 MiB.
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_TXN_ENTRY = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, lastStableOffset
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40


@dataclass
class Batch:
    """One v2 batch header as found in a file, plus where it sits."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    is_valid: bool = True

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == -1:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & ATTR_TIMESTAMP_TYPE else "CreateTime"

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def delete_horizon(self) -> str:
        # Java prints the OptionalLong itself.
        if self.attributes & ATTR_DELETE_HORIZON:
            return f"OptionalLong[{self.base_timestamp}]"
        return "OptionalLong.empty"

    @property
    def compression(self) -> str:
        return COMPRESSION_NAMES.get(self.attributes & 0x07, f"unknown({self.attributes & 0x07})")


def increment_sequence(sequence: int, increment: int) -> int:
    """Producer sequences are int32 that wrap to 0 after 2147483647."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


class Segment:
    """A read-only view of a file: mmap for non-empty files, b"" otherwise.

    Owned by one dump call; ``close`` releases the map.  Nothing keeps a
    memoryview of the map past ``close``."""

    def __init__(self, path: str, max_bytes: int = -1):
        self._file = open(path, "rb")
        size = os.fstat(self._file.fileno()).st_size
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        self.file_size = size
        self.size = size if max_bytes < 0 else min(size, max_bytes)

    @property
    def buf(self):
        return self._map if self._map is not None else b""

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def iter_batches(buf, start: int, end: int, path: str):
    """Yield the batches in ``buf[start:end]`` as Kafka's FileLogInputStream does.

    Stops quietly at a tail too short for a header or a batch running past
    ``end`` (a torn write); raises ToolError on a batch length below Kafka's
    minimum, as Kafka's CorruptRecordException would end its dump."""
    position = start
    while end - position >= HEADER_SIZE_UP_TO_MAGIC:
        batch_length = struct.unpack_from(">i", buf, position + 8)[0]
        if batch_length < RECORD_OVERHEAD_V0:
            raise ToolError(
                f"Found record size {batch_length} smaller than minimum record overhead "
                f"({RECORD_OVERHEAD_V0}) in file {path}.")
        size = batch_length + LOG_OVERHEAD
        if size > end - position:
            return
        magic = buf[position + 16]
        if magic != 2 or size < BATCH_HEADER_SIZE:
            raise ToolError(
                f"Unsupported record batch at position {position} of {path}: magic {magic}, "
                f"size {size} (only message format v2 is supported)")
        fields = _HEADER.unpack_from(buf, position)
        batch = Batch(position, *fields)
        batch.is_valid = crc32c.crc32c(buf[position + 21: position + size]) == batch.crc
        yield batch
        position += size


def batch_line(batch: Batch, position: int) -> str:
    count = batch.records_count
    return (
        f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {count}"
        f" baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence}"
        f" producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch}"
        f" partitionLeaderEpoch: {batch.partition_leader_epoch}"
        f" isTransactional: {_bool(batch.is_transactional)} isControl: {_bool(batch.is_control)}"
        f" deleteHorizonMs: {batch.delete_horizon}"
        f" position: {position} {batch.timestamp_type}: {batch.max_timestamp}"
        f" size: {batch.size} magic: {batch.magic} compresscodec: {batch.compression}"
        f" crc: {batch.crc} isvalid: {_bool(batch.is_valid)}"
    )


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _text(data: Optional[bytes]) -> str:
    # Kafka's StringDecoder: new String(bytes, UTF-8), malformed input replaced.
    return data.decode("utf-8", "replace")


def _control_suffix(key: Optional[bytes], value: Optional[bytes]) -> str:
    if key is None or len(key) < _CONTROL_KEY.size:
        return " controlType: UNKNOWN(-1)"
    _version, type_id = _CONTROL_KEY.unpack_from(key, 0)
    name = CONTROL_TYPES.get(type_id, "UNKNOWN")
    if type_id in (0, 1) and value is not None and len(value) >= _END_TXN_VALUE.size:
        _v, coordinator_epoch = _END_TXN_VALUE.unpack_from(value, 0)
        return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
    return f" controlType: {name}({type_id})"


@dataclass
class DumpOptions:
    print_data_log: bool = False
    deep_iteration: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    skip_record_metadata: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_bytes: int = -1
    transaction_log_decoder: bool = False


@dataclass
class Problems:
    """What Kafka's tool reports on stderr after all files: keyed by absolute path."""

    index_mismatches: dict = field(default_factory=dict)  # path -> {index offset: log offset}
    time_mismatches: dict = field(default_factory=dict)  # path -> [(index ts, log ts)]
    time_out_of_order: dict = field(default_factory=dict)  # path -> [(index ts, previous ts)]
    time_not_found: dict = field(default_factory=dict)  # path -> [(index offset, log offset)]
    non_consecutive: dict = field(default_factory=dict)  # path -> {offset: next offset}
    errors: int = 0

    def write(self, err) -> None:
        for path, mismatches in self.index_mismatches.items():
            err.write(f"Mismatches in :{path}\n")
            for index_offset in sorted(mismatches, reverse=True):
                err.write(f"  Index offset: {index_offset}, log offset: {mismatches[index_offset]}\n")
        for path, items in self.time_mismatches.items():
            err.write(f"Found timestamp mismatch in :{path}\n")
            for index_ts, log_ts in items:
                err.write(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}\n")
        for path, items in self.time_out_of_order.items():
            err.write(f"Found out of order timestamp in :{path}\n")
            for index_ts, prev_ts in items:
                err.write(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}\n")
        for items in self.time_not_found.values():
            err.write("The following indexed offsets are not found in the log.\n")
            for index_offset, log_offset in items:
                err.write(f"Indexed offset: {index_offset}, found log offset: {log_offset}\n")
        for path, pairs in self.non_consecutive.items():
            err.write(f"Non-consecutive offsets in {path}\n")
            for offset in sorted(pairs):
                err.write(f"  {offset} is followed by {pairs[offset]}\n")

    @property
    def any(self) -> bool:
        return bool(self.index_mismatches or self.time_mismatches or self.time_out_of_order
                    or self.time_not_found or self.non_consecutive)


def transaction_log_key_value(key: Optional[bytes], value: Optional[bytes]) -> tuple:
    """A ``__transaction_state`` record as Kafka's TransactionLog.formatRecordKeyAndValue
    prints it: ``(key text, value text or None)``."""
    from kafkapy.protocol.transaction_log import RecordFormatError, TransactionState, decode_key, decode_value

    try:
        transactional_id = decode_key(key)
    except RecordFormatError:
        transactional_id = None
    if transactional_id is None:
        version = int.from_bytes(key[:2], "big", signed=True) if key and len(key) >= 2 else -1
        return f"unknown::version={version}", None
    key_text = f"transaction_metadata::transactionalId={transactional_id}"
    if value is None:
        return key_text, "<DELETE>"
    txn = decode_value(value)
    partitions = ",".join(f"{topic}-{partition}" for topic, partition in sorted(txn.partitions))
    return key_text, (f"producerId:{txn.producer_id},producerEpoch:{txn.producer_epoch},"
                      f"state={TransactionState(txn.status).kafka_name},partitions=[{partitions}],"
                      f"txnLastUpdateTimestamp={txn.last_update_timestamp_ms},"
                      f"txnTimeoutMs={txn.transaction_timeout_ms}")


def _base_offset_of(path: str) -> int:
    name = os.path.basename(path)
    try:
        return int(name.split(".")[0])
    except ValueError:
        raise ToolError(f"Cannot parse a base offset from the file name {name}") from None


def dump_log(path: str, opts: DumpOptions, out, problems: Problems) -> None:
    out.write(f"Log starting offset: {_base_offset_of(path)}\n")
    deep = opts.deep_iteration or opts.print_data_log
    last_offset = -1
    with Segment(path, opts.max_bytes) as seg:
        buf = seg.buf
        valid_bytes = 0
        for batch in iter_batches(buf, 0, seg.size, path):
            lines = [batch_line(batch, valid_bytes)]
            if deep:
                try:
                    records = decode_records(buf[batch.position: batch.position + batch.size])
                except (CorruptRecordError, UnsupportedCompressionError) as exc:
                    records = []
                    sys.stderr.write(f"Cannot read the records of the batch at position {batch.position}: {exc}\n")
                    problems.errors += 1
                for offset, timestamp, key, value, headers in records:
                    if offset != last_offset + 1:
                        problems.non_consecutive.setdefault(os.path.abspath(path), {})[last_offset] = offset
                    last_offset = offset
                    parts = []
                    if not opts.skip_record_metadata:
                        sequence = -1 if batch.base_sequence == -1 else \
                            increment_sequence(batch.base_sequence, offset - batch.base_offset)
                        parts.append(
                            f"| offset: {offset} {batch.timestamp_type}: {timestamp}"
                            f" keySize: {-1 if key is None else len(key)}"
                            f" valueSize: {-1 if value is None else len(value)}"
                            f" sequence: {sequence} headerKeys: [{','.join(k for k, _ in headers)}]")
                        if batch.is_control:
                            parts.append(_control_suffix(key, value))
                    if opts.print_data_log and not batch.is_control:
                        prefix = "| " if opts.skip_record_metadata else " "
                        if opts.transaction_log_decoder:
                            try:
                                key_text, value_text = transaction_log_key_value(key, value)
                            except Exception as exc:  # Kafka's parser throws: report, go on
                                sys.stderr.write(f"Cannot decode the record at offset {offset}: {exc}\n")
                                problems.errors += 1
                                key_text, value_text = None, None
                        else:
                            key_text = None if key is None else _text(key)
                            value_text = None if value is None else _text(value)
                        if key_text is not None:
                            parts.append(f"{prefix}key: {key_text}")
                            prefix = " "
                        if value_text is not None:
                            parts.append(f"{prefix}payload: {value_text}")
                    lines.append("".join(parts))
            out.write("\n".join(lines) + "\n")
            valid_bytes += batch.size
        trailing = seg.file_size - valid_bytes
        if trailing > 0 and opts.max_bytes < 0:
            out.write(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}\n")


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _offset_entries(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(absolute offset, position) entries up to the first preallocated zero entry."""
    entries = []
    usable = len(data) - len(data) % _OFFSET_ENTRY.size
    for i, (relative, position) in enumerate(_OFFSET_ENTRY.iter_unpack(data[:usable])):
        if i > 0 and relative == 0:
            break
        entries.append((base_offset + relative, position))
    return entries


def _time_entries(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) entries up to the first preallocated zero entry."""
    entries = []
    usable = len(data) - len(data) % _TIME_ENTRY.size
    for i, (timestamp, relative) in enumerate(_TIME_ENTRY.iter_unpack(data[:usable])):
        if i > 0 and relative == 0:
            break
        if i == 0 and timestamp == 0 and relative == 0:
            # An all-zero first slot is a preallocated, still empty index (a
            # real entry would carry a 1970 timestamp), e.g. a live segment
            # under index.interval.bytes (4096) of data.
            break
        entries.append((timestamp, base_offset + relative))
    return entries


def _sibling(path: str, suffix: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    return os.path.join(directory, os.path.basename(path).split(".")[0] + suffix)


def dump_index(path: str, opts: DumpOptions, out, problems: Problems) -> None:
    base_offset = _base_offset_of(path)
    data = _read_file(path)
    entries = _offset_entries(data, base_offset)
    if not entries:
        out.write(f"{path} is empty.\n")
        return
    if opts.index_sanity_check:
        last_offset = entries[-1][0]
        if last_offset < base_offset:
            raise ToolError(
                f"Corrupt index found, index file ({os.path.abspath(path)}) has non-zero size but the last "
                f"offset is {last_offset} which is less than the base offset {base_offset}.")
        if len(data) % _OFFSET_ENTRY.size:
            raise ToolError(
                f"Index file {os.path.abspath(path)} is corrupt, found {len(data)} bytes which is neither "
                f"positive nor a multiple of {_OFFSET_ENTRY.size}.")
        out.write(f"{path} passed sanity check.\n")
        return
    log_path = _sibling(path, ".log")
    if not os.path.exists(log_path):
        raise ToolError(f"{log_path} (No such file or directory)")
    lines = []
    with Segment(log_path) as seg:
        for offset, position in entries:
            end = min(seg.size, position + opts.max_message_size) if position >= 0 else 0
            batch = next(iter_batches(seg.buf, position, end, log_path), None) if 0 <= position < seg.size else None
            found = batch.last_offset if batch is not None else -1
            if found != offset:
                problems.index_mismatches.setdefault(os.path.abspath(path), {})[offset] = found
            if not opts.verify_index_only:
                lines.append(f"offset: {offset} position: {position}")
    if lines:
        out.write("\n".join(lines) + "\n")


def dump_time_index(path: str, opts: DumpOptions, out, problems: Problems) -> None:
    base_offset = _base_offset_of(path)
    data = _read_file(path)
    entries = _time_entries(data, base_offset)
    apath = os.path.abspath(path)
    if opts.index_sanity_check:
        if entries:
            last_ts, last_offset = entries[-1]
            if last_ts < entries[0][0]:
                raise ToolError(
                    f"Corrupt time index found, time index file ({apath}) has non-zero size but the last "
                    f"timestamp is {last_ts} which is less than the first timestamp {entries[0][0]}")
            if last_offset < base_offset:
                raise ToolError(
                    f"Corrupt time index found, time index file ({apath}) has non-zero size but the last "
                    f"offset is {last_offset} which is less than the first offset {base_offset}")
        if len(data) % _TIME_ENTRY.size:
            raise ToolError(
                f"Time index file {apath} is corrupt, found {len(data)} bytes which is not positive or "
                f"not a multiple of {_TIME_ENTRY.size}.")
        out.write(f"{path} passed sanity check.\n")
        return
    log_path = _sibling(path, ".log")
    index_path = _sibling(path, ".index")
    if not os.path.exists(log_path):
        raise ToolError(f"{log_path} (No such file or directory)")
    offset_entries = _offset_entries(_read_file(index_path), base_offset) if os.path.exists(index_path) else []
    index_offsets = [entry_offset for entry_offset, _ in offset_entries]
    lines = []
    previous_ts = -1
    with Segment(log_path) as seg:
        for timestamp, offset in entries:
            # OffsetIndex.lookup: the last entry at or below the offset, else the segment start.
            slot = bisect.bisect_right(index_offsets, offset) - 1
            start = offset_entries[slot][1] if slot >= 0 else 0
            match = None
            if 0 <= start <= seg.size:
                for batch in iter_batches(seg.buf, start, seg.size, log_path):
                    if batch.last_offset >= offset:
                        match = batch
                        break
            if match is None:
                problems.time_not_found.setdefault(apath, []).append((offset, -1))
            elif match.last_offset != offset:
                problems.time_not_found.setdefault(apath, []).append((offset, match.last_offset))
            else:
                try:
                    records = decode_records(seg.buf[match.position: match.position + match.size])
                    max_ts = max((r[1] for r in records), default=-1)
                except (CorruptRecordError, UnsupportedCompressionError):
                    max_ts = match.max_timestamp
                if max_ts != timestamp:
                    problems.time_mismatches.setdefault(apath, []).append((timestamp, max_ts))
                if previous_ts >= timestamp:
                    problems.time_out_of_order.setdefault(apath, []).append((timestamp, previous_ts))
            if not opts.verify_index_only:
                lines.append(f"timestamp: {timestamp} offset: {offset}")
            previous_ts = timestamp
    if lines:
        out.write("\n".join(lines) + "\n")


def dump_producer_snapshot(path: str, out) -> None:
    from kafkapy.storage.producer_state import CorruptSnapshotError, read_snapshot

    try:
        entries = read_snapshot(path)
    except CorruptSnapshotError as exc:
        sys.stderr.write(f"{exc}\n")
        return
    for entry in entries:
        txn_first = entry.current_txn_first_offset
        line = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch}"
                f" coordinatorEpoch: {entry.coordinator_epoch}"
                f" currentTxnFirstOffset: {'OptionalLong.empty' if txn_first < 0 else f'OptionalLong[{txn_first}]'}"
                f" lastTimestamp: {entry.last_timestamp}")
        if entry.batches:
            b = entry.batches[0]
            line += (f" firstSequence: {b.first_seq} lastSequence: {b.last_seq} lastOffset: {b.last_offset}"
                     f" offsetDelta: {b.last_offset - b.first_offset} timestamp: {b.timestamp}")
        out.write(line + "\n")


def dump_txn_index(path: str, out) -> None:
    data = _read_file(path)
    usable = len(data) - len(data) % _TXN_ENTRY.size
    for version, producer_id, first, last, lso in _TXN_ENTRY.iter_unpack(data[:usable]):
        out.write(f"version: {version} producerId: {producer_id} firstOffset: {first}"
                  f" lastOffset: {last} lastStableOffset: {lso}\n")


def _body(argv: Sequence[str]) -> int:
    p = parser("kafkapy-dump-log", "This tool helps to parse a log file and dump its contents to the console, "
                                    "useful for debugging a seemingly corrupt log segment.")
    p.add_argument("--files", required=True,
                   help="REQUIRED: The comma separated list of data and index log files to be dumped.")
    p.add_argument("--print-data-log", action="store_true",
                   help="If set, printing the messages content when dumping data logs. Automatically set if any "
                        "decoder option is specified.")
    p.add_argument("--deep-iteration", action="store_true",
                   help="If set, uses deep instead of shallow iteration. Automatically set if print-data-log is enabled.")
    p.add_argument("--verify-index-only", action="store_true",
                   help="If set, just verify the index log without printing its content.")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="If set, just checks the index sanity without printing its content. This is the same check "
                        "that is executed on broker startup to determine if an index needs rebuilding or not.")
    p.add_argument("--transaction-log-decoder", action="store_true",
                   help="If set, log data will be parsed as transaction metadata from the __transaction_state topic.")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="Whether to skip printing metadata for each record.")
    p.add_argument("--max-message-size", type=int, default=DEFAULT_MAX_MESSAGE_SIZE,
                   help="Size of largest message.")
    p.add_argument("--max-bytes", type=int, default=-1,
                   help="Limit the amount of total batches read in bytes avoiding reading the whole .log file(s).")
    args = p.parse_args(argv)
    # Kafka: a decoder option implies --print-data-log.
    opts = DumpOptions(args.print_data_log or args.transaction_log_decoder, args.deep_iteration,
                       args.verify_index_only, args.index_sanity_check, args.skip_record_metadata,
                       args.max_message_size, args.max_bytes, args.transaction_log_decoder)
    files = [f for f in args.files.split(",") if f]
    if not files:
        raise ToolError("Missing required argument \"[files]\"")
    out = sys.stdout
    problems = Problems()
    for path in files:
        out.write(f"Dumping {path}\n")
        suffix = os.path.splitext(path)[1]
        if suffix not in (".log", ".index", ".timeindex", ".snapshot", ".txnindex"):
            sys.stderr.write(f"Ignoring unknown file {path}\n")
            continue
        if not os.path.isfile(path):
            raise ToolError(f"{path} (No such file or directory)")
        if suffix == ".log":
            dump_log(path, opts, out, problems)
        elif suffix == ".index":
            dump_index(path, opts, out, problems)
        elif suffix == ".timeindex":
            dump_time_index(path, opts, out, problems)
        elif suffix == ".snapshot":
            dump_producer_snapshot(path, out)
        else:
            dump_txn_index(path, out)
    out.flush()
    problems.write(sys.stderr)
    # Kafka exits 0 even when it reports mismatches; scripts read stderr.  We
    # keep that, and use 1 only for files we could not read at all.
    return 1 if problems.errors else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
