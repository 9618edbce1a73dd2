"""Fetch (key 1), v4-v12, sessionless, with long polling.

Contract:
- Each partition is read from ``fetch_offset`` up to the high watermark
  (read_uncommitted) or the last stable offset (read_committed; equal to the
  high watermark until transactions exist). A fetch from the middle of a batch
  returns that whole batch; clients skip the records before their offset.
- Byte limits: ``partition_max_bytes`` per partition and ``max_bytes`` in
  total, except that the first non-empty partition returns at least its first
  whole batch (KIP-74), so a batch larger than the limits cannot stall a
  consumer. Past the limit, partitions are answered empty (but present).
- Record data is not copied: each partition's records are file regions the
  processor sends with os.sendfile.
- Long polling: if fewer than ``min_bytes`` are available and ``max_wait_ms``
  has not passed, the request becomes a ``DelayedFetch`` (replication.purgatory)
  watching each partition's high watermark for a value past the one read; its
  processor parks it and runs the fetch again when an append moves a watched
  high watermark or the deadline passes. Any partition error answers at once.
- Errors per partition: OFFSET_OUT_OF_RANGE (1), UNKNOWN_TOPIC_OR_PARTITION (3)
  (a partition another broker hosts: NOT_LEADER_OR_FOLLOWER, ``unhosted_error``),
  and ``Partition.check_leader``'s NOT_LEADER_OR_FOLLOWER (6) /
  FENCED_LEADER_EPOCH (74) / UNKNOWN_LEADER_EPOCH (75) against
  ``current_leader_epoch`` (v9+; -1 = no check). Standalone they never occur.
- A follower's fetch (replica_id >= 0, Kafka's replica fetcher) goes to the
  leader too (Kafka's Partition.fetchRecords for a follower): a replica not
  assigned to the partition gets UNKNOWN_LEADER_EPOCH when it sent its
  current_leader_epoch, else NOT_LEADER_OR_FOLLOWER (Kafka's
  followerReplicaOrThrow; it retries). From v12 a ``last_fetched_epoch``
  (>= 0) is checked first (Kafka's readRecords): the leader's end offset of
  that epoch (``Partition.last_offset_for_leader_epoch``) unknown, or the
  fetch offset below the log start offset, answers OFFSET_OUT_OF_RANGE; an
  end offset below the fetch offset, or a smaller epoch found, answers
  ``diverging_epoch`` {epoch, end_offset} with no records and no fetch state
  recorded, at once, so the follower truncates and fetches again. Otherwise
  it records the follower's fetch state, which may move the high watermark:
  then the processors' parked operations are woken (a DelayedProduce waiting
  for acks=all, a consumer's DelayedFetch), as an append wakes them. It
  reads up to the log end offset; parked, it waits for the log end offset to
  pass its fetch offset. A consumer's fetch pays one int compare for all this.
- Fetch sessions (KIP-227, v7+): kafkapy creates none. A request for a new
  session (epoch 0) gets session id 0, which tells the client to keep sending
  full fetches; a request in an existing session gets
  FETCH_SESSION_ID_NOT_FOUND (70), as Kafka answers for an evicted session.
"""

import dataclasses
from functools import cache

from kafkapy.protocol.codec import RecordsRegions
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.purgatory import DelayedFetch
from kafkapy.server.handlers import _plan

API_KEY = 1
READ_COMMITTED = 1
HIGH_WATERMARK = "high_watermark"
LOG_END_OFFSET = "log_end_offset"  # what a follower's DelayedFetch waits on


@cache
def _response_classes(cls):
    """``(topic class, partition class, partition fields, diverging-epoch
    class or None)`` of one version's FetchResponse, resolved once per version.

    The response is built from these classes directly rather than through
    ``construct``'s per-dict walk, which was 18 % of a 16-partition fetch's
    worker time (cProfile of ``worker.handle_request``: ~60 of 355 us).
    """
    topic_cls = next(n[1] for name, n, _ in _plan(cls) if name == "responses")
    part_cls = next(n[1] for name, n, _ in _plan(topic_cls) if name == "partitions")
    epoch_cls = next((n[1] for name, n, _ in _plan(part_cls) if name == "diverging_epoch"), None)
    return topic_cls, part_cls, frozenset(f.name for f in dataclasses.fields(part_cls)), epoch_cls


def _partition(part_cls, fields, index, error_code, high_watermark, log_start_offset,
               aborted, records, diverging_epoch=None):
    kw = {"partition_index": index, "error_code": error_code,
          "high_watermark": high_watermark, "aborted_transactions": aborted,
          "records": records}
    if diverging_epoch is not None:
        kw["diverging_epoch"] = diverging_epoch
    # last_stable_offset from v4, log_start_offset from v5,
    # preferred_read_replica from v11: pass only what this version has.
    if "last_stable_offset" in fields:
        kw["last_stable_offset"] = high_watermark
    if "log_start_offset" in fields:
        kw["log_start_offset"] = log_start_offset
    if "preferred_read_replica" in fields:
        kw["preferred_read_replica"] = -1
    return part_cls(**kw)


def handle(ctx, request):
    get_partition = ctx.broker.replica_manager.get_partition
    version = ctx.api_version
    cls = ctx.response_class()
    topic_cls, part_cls, fields, epoch_cls = _response_classes(cls)
    if version >= 7 and request.session_id != 0:
        return cls(throttle_time=0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                   session_id=0, responses=())
    aborted = () if request.isolation_level == READ_COMMITTED else None
    remaining = request.max_bytes
    total = 0
    failed = False
    watch = {}  # slot -> (field, value): what a DelayedFetch waits for
    has_epoch = version >= 9
    high_watermark_moved = False  # by a follower's fetch: wake the parked operations
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    topics = []
    for topic in request.topics:
        partitions = []
        for fp in topic.partitions:
            partition = get_partition(topic.topic, fp.partition)
            code = (ctx.broker.replica_manager.unhosted_error(topic.topic, fp.partition) if partition is None
                    else partition.check_leader(fp.current_leader_epoch if has_epoch else -1))
            if code:
                failed = True
                partitions.append(_partition(part_cls, fields, fp.partition, int(code),
                                             -1, -1, None, b""))
                continue
            if replica_id < 0:
                data, high_watermark, log_start_offset = partition.fetch_records(
                    fp.fetch_offset, max(0, min(fp.partition_max_bytes, remaining)), total == 0)
                watch[partition.slot] = (HIGH_WATERMARK, high_watermark + 1)  # moved past what was read
            else:
                code, diverging = _check_follower(partition, replica_id, fp, has_epoch, version)
                if code or diverging is not None:
                    # An error, or the follower's log diverged: answered at
                    # once, with no records (Kafka's readRecords).
                    failed = True
                    partitions.append(_partition(
                        part_cls, fields, fp.partition, int(code), partition.high_watermark,
                        partition.log_start_offset, None, b"",
                        None if diverging is None else epoch_cls(epoch=diverging[0],
                                                                 end_offset=diverging[1])))
                    continue
                before = partition.high_watermark
                data, high_watermark, log_start_offset = partition.fetch_records_for_follower(
                    replica_id, fp.fetch_offset, max(0, min(fp.partition_max_bytes, remaining)),
                    total == 0, ctx.now_ms)
                if high_watermark > before:
                    high_watermark_moved = True
                watch[partition.slot] = (LOG_END_OFFSET, fp.fetch_offset + 1)
            if data is None:
                failed = True
                partitions.append(_partition(part_cls, fields, fp.partition,
                                             int(ErrorCode.OFFSET_OUT_OF_RANGE),
                                             high_watermark, log_start_offset, None, b""))
                continue
            size = data.size
            total += size
            remaining -= size
            partitions.append(_partition(part_cls, fields, fp.partition, 0, high_watermark,
                                         log_start_offset, aborted,
                                         RecordsRegions(data.regions, size) if size else b""))
        topics.append(topic_cls(topic=topic.topic, partitions=tuple(partitions)))
    if high_watermark_moved:
        ctx.broker.replica_manager.wake_delayed_operations()
    if not failed and total < request.min_bytes and request.max_wait > 0:
        deadline = ctx.deadline_ms or ctx.now_ms + request.max_wait
        if ctx.now_ms < deadline:
            return DelayedFetch(watch, deadline)
    if version >= 7:
        return cls(throttle_time=0, error_code=0, session_id=0, responses=tuple(topics))
    return cls(throttle_time=0, responses=tuple(topics))


def _check_follower(partition, replica_id: int, fp, has_epoch: bool, version: int):
    """A follower's fetch of one partition before its read: ``(error code,
    None or (epoch, end_offset) of a diverging epoch)`` (the module docstring;
    Kafka's followerReplicaOrThrow, then readRecords' last-fetched-epoch check)."""
    if replica_id not in partition.replicas:
        sent_epoch = has_epoch and fp.current_leader_epoch >= 0
        return (ErrorCode.UNKNOWN_LEADER_EPOCH if sent_epoch else ErrorCode.NOT_LEADER_OR_FOLLOWER), None
    if version < 12 or fp.last_fetched_epoch < 0:
        return ErrorCode.NONE, None
    return diverging_epoch(partition.last_offset_for_leader_epoch(fp.last_fetched_epoch),
                           fp.last_fetched_epoch, fp.fetch_offset, partition.log_start_offset)


def diverging_epoch(epoch_end_offset, last_fetched_epoch: int, fetch_offset: int,
                    log_start_offset: int):
    """Kafka's readRecords check of a follower's ``last_fetched_epoch``, given
    the leader's ``(epoch, end_offset)`` for it (``(-1, -1)``: unknown):
    ``(OFFSET_OUT_OF_RANGE, None)`` when it is unknown or ``fetch_offset`` is
    below the log start offset; ``(NONE, (epoch, end_offset))`` when the
    follower's log diverged (the leader has a smaller epoch there, or the
    epoch ends before ``fetch_offset``); ``(NONE, None)`` to read on."""
    epoch, end_offset = epoch_end_offset
    if epoch < 0 or end_offset < 0 or fetch_offset < log_start_offset:
        return ErrorCode.OFFSET_OUT_OF_RANGE, None
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return ErrorCode.NONE, (epoch, end_offset)
    return ErrorCode.NONE, None
