"""ListOffsets (key 2), v0-v9 (Kafka 3.9's range; v10 is Kafka 4.0's, see below).

v0 (Kafka 3.9's handleListOffsetRequestV0) answers ``old_style_offsets``, a
list, for -1 LATEST, -2 EARLIEST or a timestamp: the base offsets of the
log's segments (and the log end offset while the active segment holds
data), each paired with its file's modification time; from the newest
entry (LATEST), the oldest (EARLIEST) or the newest modified at or before
the timestamp, ``max_num_offsets`` of them going back, largest first; for a
consumer (replica_id -1) offsets past the high watermark give way to the
high watermark (``Partition.legacy_fetch_offsets_for_timestamp``). Another
negative timestamp answers UNSUPPORTED_VERSION; the partition errors and
ACLs are v1's; duplicates are not checked (Kafka does not in v0).

Contract, per partition (Kafka's special timestamps, each from the version
that introduced it; a negative timestamp unknown to the request's version
answers UNSUPPORTED_VERSION (35), as Kafka's timestampMinSupportedVersion):
- -1 LATEST: the high watermark (read_uncommitted) or last stable offset
  (read_committed: the first offset of the earliest open transaction, or
  the high watermark); timestamp -1. For a
  replica (replica_id >= 0, a follower's fetcher after OFFSET_OUT_OF_RANGE)
  the log end offset, as Kafka reads a replica's request with no isolation.
- -2 EARLIEST: the log start offset; timestamp -1.
- -3 MAX_TIMESTAMP (v7+): the offset and timestamp of the batch holding the
  largest timestamp; -1/-1 for an empty log.
- -4 EARLIEST_LOCAL (v8+, KIP-405): with no tiered storage the local log
  starts at the log start offset: as EARLIEST.
- -5 LATEST_TIERED (v9+, KIP-1005): nothing is tiered: offset -1,
  timestamp -1, leader epoch -1 (Kafka's answer without remote storage).
- t >= 0: the first offset whose timestamp is >= t, via the time index, with
  that batch's timestamp; -1/-1 if none (or if it is not yet below the high
  watermark; with read_committed, below the last stable offset).
- v10 (Kafka 4.0, KIP-1075) adds ``timeout_ms`` for remote-storage lookups:
  accepted, nothing here waits; not in the API table, as Kafka 3.9 does not
  serve it.
- A partition named twice in the request: INVALID_REQUEST (42) for each.
- Errors: UNKNOWN_TOPIC_OR_PARTITION (3) (a partition another broker hosts:
  NOT_LEADER_OR_FOLLOWER, ``ReplicaManager.unhosted_error``); ``Partition.check_leader``'s
  NOT_LEADER_OR_FOLLOWER (6), FENCED_LEADER_EPOCH (74), UNKNOWN_LEADER_EPOCH
  (75) against ``current_leader_epoch`` (v4+). ``leader_epoch`` (v4+) is the
  partition's leader epoch for LATEST, else the epoch of the batch holding
  the offset found (-1 when none), as Kafka's.
- ACLs (with an authorizer): Describe on each topic, else its partitions
  answer TOPIC_AUTHORIZATION_FAILED (29), checked first as in Kafka; such
  topics come last in the answer, after the others in request order (every
  version: Kafka's responseTopics ++ unauthorizedResponseStatus).
"""

from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kafkapy.server.handlers import construct
from kafkapy.server.security.authorizer import denied_topics

API_KEY = 2
READ_COMMITTED = 1
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
# Kafka's timestampMinSupportedVersion: the first version that may ask for each.
_MIN_VERSION = {EARLIEST_TIMESTAMP: 1, LATEST_TIMESTAMP: 1, MAX_TIMESTAMP: 7,
                EARLIEST_LOCAL_TIMESTAMP: 8, LATEST_TIERED_TIMESTAMP: 9}


def handle(ctx, request):
    if ctx.api_version == 0:
        return _handle_v0(ctx, request)
    get_partition = ctx.broker.replica_manager.get_partition
    version = ctx.api_version
    has_epoch = version >= 4
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED  # v2+
    seen, duplicates = set(), set()
    for t in request.topics:
        for lp in t.partitions:
            key = (t.name, lp.partition_index)
            (duplicates if key in seen else seen).add(key)
    denied = denied_topics(ctx, acls.DESCRIBE, [t.name for t in request.topics])
    topics = []
    for topic in request.topics:
        partitions = []
        for lp in topic.partitions:
            timestamp = lp.timestamp
            if topic.name in denied:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif (topic.name, lp.partition_index) in duplicates:
                code = ErrorCode.INVALID_REQUEST
            elif timestamp < 0 and version < _MIN_VERSION.get(timestamp, 1 << 15):
                code = ErrorCode.UNSUPPORTED_VERSION
            else:
                partition = get_partition(topic.name, lp.partition_index)
                code = (ctx.broker.replica_manager.unhosted_error(topic.name, lp.partition_index)
                        if partition is None
                        else partition.check_leader(lp.current_leader_epoch if has_epoch else -1))
            if code:
                partitions.append({"partition_index": lp.partition_index, "error_code": code,
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1})
                continue
            leader_epoch = partition.leader_epoch
            if timestamp == LATEST_TIMESTAMP and request.replica_id >= 0:
                offset, timestamp = partition.log_end_offset, -1
            elif timestamp == LATEST_TIERED_TIMESTAMP:
                offset, timestamp, leader_epoch = -1, -1, -1
            elif committed and (timestamp == LATEST_TIMESTAMP or timestamp >= 0):
                offset, timestamp = _committed(partition, timestamp)
            else:
                offset, timestamp = partition.fetch_offset_for_timestamp(
                    EARLIEST_TIMESTAMP if timestamp == EARLIEST_LOCAL_TIMESTAMP else timestamp)
            if lp.timestamp != LATEST_TIMESTAMP and leader_epoch >= 0:
                leader_epoch = _epoch_of(partition, offset)
            partitions.append({"partition_index": lp.partition_index, "error_code": 0,
                               "timestamp": timestamp, "offset": offset,
                               "leader_epoch": leader_epoch})
        topics.append({"name": topic.name, "partitions": partitions})
    return construct(ctx.response_class(), {"throttle_time": 0, "topics": _denied_last(topics, denied)})


def _denied_last(topics: list, denied: set) -> list:
    """Kafka answers the topics it may describe first, then the others (a stable split)."""
    return [t for t in topics if t["name"] not in denied] + [t for t in topics if t["name"] in denied]


def _handle_v0(ctx, request):
    replica_manager = ctx.broker.replica_manager
    denied = denied_topics(ctx, acls.DESCRIBE, [t.name for t in request.topics])
    topics = []
    for topic in request.topics:
        partitions = []
        for lp in topic.partitions:
            offsets = ()
            if topic.name in denied:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif lp.timestamp < EARLIEST_TIMESTAMP:
                code = ErrorCode.UNSUPPORTED_VERSION
            else:
                partition = replica_manager.get_partition(topic.name, lp.partition_index)
                code = (replica_manager.unhosted_error(topic.name, lp.partition_index) if partition is None
                        else partition.check_leader(-1))
                if not code:
                    offsets = partition.legacy_fetch_offsets_for_timestamp(
                        lp.timestamp, lp.max_num_offsets, request.replica_id == -1)
            partitions.append({"partition_index": lp.partition_index, "error_code": code,
                               "old_style_offsets": offsets})
        topics.append({"name": topic.name, "partitions": partitions})
    return construct(ctx.response_class(), {"topics": _denied_last(topics, denied)})


def _epoch_of(partition, offset: int) -> int:
    """The leader epoch of the batch holding ``offset`` (the epoch cache's
    entry covering it; -1 for none or no offset): Kafka answers every lookup
    but LATEST with the found batch's epoch (FileRecords.searchForTimestamp,
    MAX_TIMESTAMP's batch, EARLIEST's first epoch entry), LATEST with the
    partition's."""
    if offset < 0:
        return -1
    log = partition.log
    with log.lock():
        entries = log.leader_epoch_entries()
    epoch = -1
    for entry_epoch, start_offset in entries:
        if start_offset > offset:
            break
        epoch = entry_epoch
    return epoch


def _committed(partition, timestamp: int) -> tuple[int, int]:
    """LATEST and timestamp lookups for a read_committed
    client (Kafka's Partition.fetchOffsetForTimestamp with READ_COMMITTED):
    LATEST is the last stable offset, and a timestamp's answer at or past it
    is none."""
    last_stable_offset = partition.last_stable_offset()
    if timestamp == LATEST_TIMESTAMP:
        return last_stable_offset, -1
    offset, found = partition.fetch_offset_for_timestamp(timestamp)
    return (offset, found) if offset < last_stable_offset else (-1, -1)
