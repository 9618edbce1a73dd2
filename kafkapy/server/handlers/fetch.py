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
- Errors per partition: OFFSET_OUT_OF_RANGE (1), UNKNOWN_TOPIC_OR_PARTITION (3),
  and ``Partition.check_leader``'s NOT_LEADER_OR_FOLLOWER (6) /
  FENCED_LEADER_EPOCH (74) / UNKNOWN_LEADER_EPOCH (75) against
  ``current_leader_epoch`` (v9+; -1 = no check). Standalone they never occur.
- A follower's fetch (replica_id >= 0, Kafka's replica fetcher) goes to the
  leader too: it records the follower's fetch state (which may move the high
  watermark) and reads up to the log end offset; parked, it waits for the
  log end offset to pass its fetch offset.
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
    """``(topic class, partition class, partition fields)`` of one version's
    FetchResponse, resolved once per version.

    The response is built from these classes directly rather than through
    ``construct``'s per-dict walk, which was 18 % of a 16-partition fetch's
    worker time (cProfile of ``worker.handle_request``: ~60 of 355 us).
    """
    topic_cls = next(n[1] for name, n, _ in _plan(cls) if name == "responses")
    part_cls = next(n[1] for name, n, _ in _plan(topic_cls) if name == "partitions")
    return topic_cls, part_cls, frozenset(f.name for f in dataclasses.fields(part_cls))


def _partition(part_cls, fields, index, error_code, high_watermark, log_start_offset,
               aborted, records):
    kw = {"partition_index": index, "error_code": error_code,
          "high_watermark": high_watermark, "aborted_transactions": aborted,
          "records": records}
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
    topic_cls, part_cls, fields = _response_classes(cls)
    if version >= 7 and request.session_id != 0:
        return cls(throttle_time=0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                   session_id=0, responses=())
    aborted = () if request.isolation_level == READ_COMMITTED else None
    remaining = request.max_bytes
    total = 0
    failed = False
    watch = {}  # slot -> (field, value): what a DelayedFetch waits for
    has_epoch = version >= 9
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    topics = []
    for topic in request.topics:
        partitions = []
        for fp in topic.partitions:
            partition = get_partition(topic.topic, fp.partition)
            code = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if partition is None
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
                data, high_watermark, log_start_offset = partition.fetch_records_for_follower(
                    replica_id, fp.fetch_offset, max(0, min(fp.partition_max_bytes, remaining)),
                    total == 0, ctx.now_ms)
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
    if not failed and total < request.min_bytes and request.max_wait > 0:
        deadline = ctx.deadline_ms or ctx.now_ms + request.max_wait
        if ctx.now_ms < deadline:
            return DelayedFetch(watch, deadline)
    if version >= 7:
        return cls(throttle_time=0, error_code=0, session_id=0, responses=tuple(topics))
    return cls(throttle_time=0, responses=tuple(topics))
