"""Produce (key 0), served v3-v11 (advertised from v0, see protocol.api).

Contract:
- acks: 0 = no response (if any partition failed, the connection is closed,
  as Kafka does, so the producer notices); 1 and -1 (all) answer after the
  local append — with one broker the ISR is just us, so acks=all adds nothing.
  Any other value -> INVALID_REQUIRED_ACKS (21) for every partition.
- Each partition's records are validated and appended by ``Log.append_as_leader``
  under the partition lock; errors are per partition: CORRUPT_MESSAGE (2),
  INVALID_RECORD (87), MESSAGE_TOO_LARGE (10), RECORD_LIST_TOO_LARGE (18),
  UNKNOWN_TOPIC_OR_PARTITION (3), INVALID_PRODUCER_EPOCH (47),
  OUT_OF_ORDER_SEQUENCE_NUMBER (45), NOT_ENOUGH_REPLICAS (19) for acks=-1
  when ``min.insync.replicas`` exceeds the ISR (one replica here). A duplicate idempotent batch is
  acknowledged with the offsets it got the first time.
- ``log_append_time`` is -1 unless the topic uses LogAppendTime.
- Records stay a memoryview of the request buffer: offsets are assigned in
  place and the bytes written to the segment as they arrived.
"""

import logging
import struct

from kafkapy.protocol.codec import decode
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import CloseConnection, NoResponse, construct

API_KEY = 0
log = logging.getLogger("kafkapy.request")


def handle(ctx, request):
    broker = ctx.broker
    acks = request.acks
    any_error = False
    appended = False
    topics = []
    for topic in request.topic_data:
        partitions = []
        for pdata in topic.partition_data:
            if acks not in (-1, 0, 1):
                code, result, message = ErrorCode.INVALID_REQUIRED_ACKS, None, None
            else:
                code, result, message = broker.append(topic.name, pdata.index, pdata.records, acks)
            if code:
                any_error = True
                partitions.append({"index": pdata.index, "error_code": int(code),
                                   "base_offset": -1, "log_append_time": -1,
                                   "log_start_offset": -1, "error_message": message})
            else:
                appended = appended or result.record_count > 0
                partitions.append({"index": pdata.index, "error_code": 0,
                                   "base_offset": result.first_offset,
                                   "log_append_time": result.log_append_time_ms,
                                   "log_start_offset": result.log_start_offset,
                                   "error_message": None})
        topics.append({"name": topic.name, "partition_responses": partitions})
    if appended:
        broker.notify_appended()
    if acks == 0:
        return CloseConnection if any_error else NoResponse
    return construct(ctx.response_class(), {"responses": topics, "throttle_time": 0})


def reject_old_version(version: int, buf, offset: int) -> bytes:
    """Answer Produce v0-v2 (message format v0/v1) with UNSUPPORTED_VERSION.

    Their request body is v3's without the leading transactional id, so it is
    decoded as v3 behind a null one (0xFFFF); the response is written by hand
    because v0/v1 responses predate kio's schemas: per partition
    (index, error, base_offset[, log_append_time v2]), then throttle_time (v1+).
    Returns the response body; raises DecodeError on a malformed request.
    """
    from kafkapy.protocol.api import API_TABLE

    body = b"\xff\xff" + bytes(buf[offset:])
    request, _ = decode(API_TABLE[API_KEY].request_class(3), memoryview(body), 0)
    if request.acks == 0:
        return None
    out = [struct.pack(">i", len(request.topic_data))]
    for topic in request.topic_data:
        name = topic.name.encode()
        out.append(struct.pack(">h", len(name)) + name)
        out.append(struct.pack(">i", len(topic.partition_data)))
        for pdata in topic.partition_data:
            out.append(struct.pack(">ihq", pdata.index, ErrorCode.UNSUPPORTED_VERSION, -1))
            if version >= 2:
                out.append(struct.pack(">q", -1))
    if version >= 1:
        out.append(struct.pack(">i", 0))
    return b"".join(out)
