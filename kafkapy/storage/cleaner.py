"""Log compaction (``cleanup.policy=compact``): a bounded subset of Kafka's LogCleaner.

What it does, per log, under the partition lock:

1. Builds the offset map: the last offset of every key in the whole log
   (inactive segments and the active one).
2. Rewrites each *inactive* segment that holds a record some later record
   supersedes, keeping the records whose offset is the key's last one.
   Tombstones (null value) are kept until ``delete.retention.ms`` after
   their batch's max timestamp, then dropped, so a consumer that is behind
   still sees the delete (Kafka's rule, measured per batch instead of per
   cleaned segment). Records without a key cannot be compacted and go.
3. Kept records keep their offsets; batches whose records all survive are
   copied byte for byte (compression, producer ids and all); others are
   rebuilt uncompressed, one batch per run of consecutive offsets (a v2
   batch's offsets are base..base+count-1, which ``scan_batches`` checks).
   A segment left with nothing keeps one empty batch at its last offset so
   offsets never go backwards across segments.

Crash safety with the rename dance (Kafka's .cleaned/.swap): the new data
is written to ``<base>.log.cleaned`` and fsynced, renamed to
``<base>.log.swap``; the segment's index files are removed, then the
``.swap`` is renamed over ``<base>.log`` (atomic). A crash before that
rename leaves the old segment (load removes ``.cleaned``/``.swap`` strays
and rebuilds missing indexes from the old log); after it, the new log,
whose missing indexes load rebuilds. Either way no offset is lost or
duplicated. Other processes holding the old segment keep reading the old
inode until the bumped generation makes them reload.

Transactions (Kafka's cleaner, simplified): records of aborted transactions
are dropped and never supersede a key; records of transactions still open
(no marker yet) are kept as they are and supersede nothing yet; committed
transactional records compact like any other, a rebuilt batch keeping its
producer id, epoch, sequence and transactional flag. Control batches
(markers) are kept.

Not done (vs Kafka): the dirty-ratio scheduling (``min.cleanable.dirty.ratio``),
``min.compaction.lag.ms``, merging small segments, removing markers after
``delete.retention.ms``.
"""

from __future__ import annotations

import logging
import os

from kafkapy._core import load as _load_core
from kafkapy._core.records_py import build_batch, decode_records
from kafkapy.storage.control_records import CorruptRecordError, parse_end_txn_marker
from kafkapy.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name

log = logging.getLogger("kafkapy.storage.cleaner")
_batch = _load_core("batch")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_LOG_OVERHEAD = 12
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
COMMITTED, ABORTED, OPEN = "committed", "aborted", "open"


def _read_segment(segment) -> bytes:
    fd = os.open(segment.path, os.O_RDONLY)
    try:
        return os.pread(fd, segment.size, 0)
    finally:
        os.close(fd)


def _records(buf):
    """``(header, [(offset, ts, key, value, headers)])`` per batch of ``buf``."""
    headers, _, _ = _batch.scan_batches(buf, 0, -1, False)
    for h in headers:
        view = memoryview(buf)[h.position:h.position + h.batch_length + _LOG_OVERHEAD]
        yield h, view, (decode_records(view) if not h.attributes & 0x20 else [])


def clean_log(lg, now_ms: int) -> int:
    """Compact ``lg`` if its policy includes compact; returns segments rewritten."""
    if "compact" not in lg.config.cleanup_policy:
        return 0
    with lg.lock():
        segments = lg.segments()
        if len(segments) < 2:
            return 0
        contents = [list(_records(_read_segment(segment))) for segment in segments]
        fate = _transaction_fates(contents)
        last_offset_of: dict[bytes, int] = {}
        for batches in contents:
            for h, _view, records in batches:
                if fate.get(h.base_offset, COMMITTED) != COMMITTED:
                    continue  # an aborted or open transaction's records supersede nothing
                for offset, _ts, key, _value, _hdrs in records:
                    if key is not None:
                        last_offset_of[key] = offset
        rewritten = 0
        delete_retention_ms = lg.config.delete_retention_ms
        for i, segment in enumerate(segments[:-1]):
            out = bytearray()
            changed = False
            last_offset = segment.base_offset
            for h, view, records in contents[i]:
                last_offset = h.base_offset + h.last_offset_delta
                if h.attributes & _CONTROL or fate.get(h.base_offset) == OPEN:
                    out += view
                    continue
                tombstone_expired = h.max_timestamp + delete_retention_ms <= now_ms
                kept = [] if fate.get(h.base_offset) == ABORTED else [
                    r for r in records if r[2] is not None and last_offset_of.get(r[2]) == r[0]
                    and not (r[3] is None and tombstone_expired)]
                if len(kept) == len(records):
                    out += view
                    continue
                changed = True
                run: list = []
                for rec in kept + [None]:
                    if run and (rec is None or rec[0] != run[-1][0] + 1):
                        out += _rebuilt(h, run)
                        run = []
                    if rec is not None:
                        run.append(rec)
            if not changed:
                continue
            if not out:
                out += build_batch([], base_offset=last_offset)
            _swap_in(lg, i, segment, bytes(out))
            rewritten += 1
        if rewritten:
            lg._bump_generation()
            log.info("%s: compacted %d segments", lg.dir, rewritten)
        return rewritten


def _transaction_fates(contents) -> dict:
    """Base offset of each transactional (non-control) batch -> COMMITTED,
    ABORTED or OPEN (its producer's next marker in the log, if any)."""
    fate = {}
    open_batches: dict[int, list] = {}  # producer id -> base offsets of its open transaction's batches
    for batches in contents:
        for h, view, _records in batches:
            if h.attributes & _CONTROL:
                try:
                    outcome = COMMITTED if parse_end_txn_marker(view).is_commit else ABORTED
                except CorruptRecordError:
                    continue
                for base in open_batches.pop(h.producer_id, ()):
                    fate[base] = outcome
            elif h.attributes & _TRANSACTIONAL:
                open_batches.setdefault(h.producer_id, []).append(h.base_offset)
                fate[h.base_offset] = OPEN
    return fate


def _rebuilt(h, run) -> bytes:
    """Records ``run`` (consecutive offsets) of batch ``h`` as one new
    uncompressed batch, with the batch's producer and transactional flag."""
    first = run[0][0]
    sequence = -1 if h.base_sequence < 0 else (h.base_sequence + first - h.base_offset) % (1 << 31)
    return build_batch([(k, v, hd, ts) for _o, ts, k, v, hd in run], base_offset=first,
                       producer_id=h.producer_id, producer_epoch=h.producer_epoch, base_sequence=sequence,
                       is_transactional=bool(h.attributes & _TRANSACTIONAL))


def _swap_in(lg, index: int, segment, data: bytes) -> None:
    base = segment.base_offset
    log_path = os.path.join(lg.dir, segment_file_name(base, LOG_SUFFIX))
    cleaned = log_path + CLEANED_SUFFIX
    swap = log_path + SWAP_SUFFIX
    fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(cleaned, swap)
    _fsync_dir(lg.dir)
    segment.close()
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        try:
            os.unlink(os.path.join(lg.dir, segment_file_name(base, suffix)))
        except FileNotFoundError:
            pass
    os.rename(swap, log_path)
    _fsync_dir(lg.dir)
    fresh = lg._open_segment(base)
    fresh.recover()
    fresh.on_become_inactive()
    lg._segments[index] = fresh


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
