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
  has not passed, the request is parked (``Delay``) in its processor, which
  re-runs it when an append moves a watched partition's high watermark or the
  deadline passes. Any partition error answers at once.
- Errors per partition: OFFSET_OUT_OF_RANGE (1), UNKNOWN_TOPIC_OR_PARTITION (3).
- Fetch sessions (KIP-227, v7+): kafkapy creates none. A request for a new
  session (epoch 0) gets session id 0, which tells the client to keep sending
  full fetches; a request in an existing session gets
  FETCH_SESSION_ID_NOT_FOUND (70), as Kafka answers for an evicted session.
"""

from kafkapy.protocol.codec import RecordsRegions
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import Delay, construct
from kafkapy.storage.errors import OffsetOutOfRange

API_KEY = 1
READ_COMMITTED = 1


def handle(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    cls = ctx.response_class()
    if version >= 7 and request.session_id != 0:
        return construct(cls, {"throttle_time": 0,
                               "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                               "session_id": 0, "responses": ()})
    remaining = request.max_bytes
    total = 0
    failed = False
    watched = {}
    topics = []
    for topic in request.topics:
        partitions = []
        for fp in topic.partitions:
            part = broker.partition(topic.topic, fp.partition)
            if part is None:
                failed = True
                partitions.append(_error(fp.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            log, slot = part
            with log.lock():
                high_watermark = log.high_watermark
                log_start_offset = log.log_start_offset
                try:
                    data = log.read(fp.fetch_offset, max(0, min(fp.partition_max_bytes, remaining)),
                                    high_watermark, total == 0)
                except OffsetOutOfRange:
                    data = None
            watched[slot] = high_watermark
            if data is None:
                failed = True
                partitions.append(_error(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE,
                                         high_watermark, log_start_offset))
                continue
            total += data.size
            remaining -= data.size
            partitions.append({
                "partition_index": fp.partition,
                "error_code": 0,
                "high_watermark": high_watermark,
                "last_stable_offset": high_watermark,
                "log_start_offset": log_start_offset,
                "aborted_transactions": () if request.isolation_level == READ_COMMITTED else None,
                "preferred_read_replica": -1,
                "records": RecordsRegions(data.regions, data.size),
            })
        topics.append({"topic": topic.topic, "partitions": partitions})
    if not failed and total < request.min_bytes and request.max_wait > 0:
        deadline = ctx.deadline_ms or ctx.now_ms + request.max_wait
        if ctx.now_ms < deadline:
            return Delay(deadline, watched)
    return construct(cls, {"throttle_time": 0, "error_code": 0, "session_id": 0,
                           "responses": topics})


def _error(partition, code, high_watermark=-1, log_start_offset=-1):
    return {"partition_index": partition, "error_code": int(code),
            "high_watermark": high_watermark, "last_stable_offset": high_watermark,
            "log_start_offset": log_start_offset, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": b""}
