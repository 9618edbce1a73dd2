"""Fetch (key 1), v0-v17, with fetch sessions (KIP-227) and long polling.

Contract:
- v0-v3 (Kafka 3.9 serves them; kio lacks them): the client reads message
  format v0 (v0-v1) or v1 (v2-v3) only, so each partition's v2 batches are
  down-converted (``storage.legacy_records.down_convert``; KIP-283's rules:
  offsets and timestamps kept, headers and control batches dropped, the
  codec kept, a zstd batch answers UNSUPPORTED_COMPRESSION_TYPE (76)), at
  most the partition's byte limit of output but at least its first batch's
  messages. It is the one place record bytes are read and rewritten on the
  way out: v4+ keeps the sendfile path. ``message.downconversion.enable``
  false (the topic's, defaulting to the broker's ``log.`` key) answers a
  consumer UNSUPPORTED_VERSION (35) for the topic's partitions, as Kafka.
  v0-v3 have no isolation level (read_uncommitted: aborted records go out,
  markers do not); v0-v2 no ``max_bytes``; v0 no throttle time.
- Each partition is read from ``fetch_offset`` up to the high watermark
  (read_uncommitted) or the last stable offset (read_committed: the first
  offset of the earliest open transaction; the answer carries it and the
  aborted transactions whose data it may hold, from the ``.txnindex``, so the
  client drops their records; read_uncommitted answers the high watermark as
  last stable offset and no list). A fetch from the middle of a batch
  returns that whole batch; clients skip the records before their offset.
- Topics: by name up to v12, by topic id from v13 (KIP-516; resolved through
  the metadata, as Metadata v10+ answers them; an unknown id answers
  UNKNOWN_TOPIC_ID (100) for each of its partitions, and v13+ answers carry
  topic ids, not names). v15 moves ``replica_id`` into ``replica_state``
  (KIP-903); v17's ``replica_directory_id`` (KIP-853) and v12's
  ``cluster_id`` are accepted and not used.
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
  high watermark or the deadline passes. A read error answers at once; the
  metadata errors (UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION: Kafka's
  "erroneous" partitions, never read) only when nothing else is readable.
- Errors per partition: OFFSET_OUT_OF_RANGE (1), UNKNOWN_TOPIC_OR_PARTITION (3)
  (a partition another broker hosts: NOT_LEADER_OR_FOLLOWER, ``unhosted_error``),
  and ``Partition.check_leader``'s NOT_LEADER_OR_FOLLOWER (6) /
  FENCED_LEADER_EPOCH (74) / UNKNOWN_LEADER_EPOCH (75) against
  ``current_leader_epoch`` (v9+; -1 = no check). Standalone they never occur.
  From v16 (KIP-951) a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
  partition carries ``current_leader`` {leader_id, leader_epoch} (the local
  partition's role, else the metadata's; -1/-1 unknown) and the answer lists
  that leader's endpoint in ``node_endpoints`` (when it is a live broker).
- ACLs (with an authorizer): a consumer needs Read on each topic, a
  follower ClusterAction on the cluster; else the partitions answer
  TOPIC_AUTHORIZATION_FAILED (29) unread (Kafka's erroneous partitions).
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
  for acks=all, a consumer's DelayedFetch), as an append wakes them; a parked
  fetch run again (woken or expired: ``deadline_ms`` set) only reads, as
  Kafka's DelayedFetch completes (``readFromPurgatory``). It
  reads up to the log end offset; parked, it waits for the log end offset to
  pass its fetch offset. A consumer's fetch pays one int compare for all this.
- Fetch sessions (KIP-227, v7+; Kafka's FetchManager.newContext), by
  ``(session_id, session_epoch)``:
  * epoch -1 (FINAL): sessionless; a session id given is closed first.
  * epoch 0 (INITIAL): a full fetch that closes the session named (if any)
    and, when answered, creates a new one holding every partition of the
    answer, in its order (``server.fetch_session``): its id is the answer's
    ``session_id``, 0 when the cache had no room (the client stays
    sessionless). Followers' sessions are privileged in eviction.
  * epoch > 0: incremental. An unknown session id answers
    FETCH_SESSION_ID_NOT_FOUND (70), another epoch than the session's
    INVALID_FETCH_SESSION_EPOCH (71), a session of topic ids fetched below
    v13 or the reverse FETCH_SESSION_TOPIC_ID_ERROR (106), each with no
    partitions and session id 0. Otherwise the request's partitions are
    added or update the session's fetch parameters, ``forgotten_topics_data``
    removes partitions, and every partition of the session is read; the
    answer holds only those with records, another high watermark or log start
    offset than last sent, an error, or a diverging epoch, and a partition
    that returned records moves to the end of the session (so others come
    first next time when ``max_bytes`` cuts). A session left empty is closed
    and answered sessionless (session id 0). The epoch moves on when the
    answer is sent (a parked fetch changes nothing until then); a fetch that
    lost a race with another of the same epoch answers
    INVALID_FETCH_SESSION_EPOCH.
"""

import dataclasses
import logging
import time
import uuid
from functools import cache

from kafkapy.metrics import probes
from kafkapy.protocol import acls, fetch_request_wire
from kafkapy.protocol.codec import RecordsRegions
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.purgatory import HIGH_WATERMARK, LOG_END_OFFSET, DelayedFetch
from kafkapy.replication.quota import throttle_for
from kafkapy.server.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, Entry
from kafkapy.server.handlers import _plan
from kafkapy.storage.legacy_records import LegacyRecordError, down_convert, region_bytes

log = logging.getLogger("kafkapy.replica")  # (the request logger is at WARNING: main.py)

API_KEY = 1
READ_COMMITTED = 1
FIRST_V2_FORMAT_VERSION = fetch_request_wire.FIRST_VERSION  # older fetchers read message format v0/v1
_NO_MAX_BYTES = 2**31 - 1  # v0-v2 have no total limit
# Errors of partitions Kafka never reads ("erroneous"): they do not end a long poll.
_METADATA_ERRORS = frozenset((ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
# KIP-951: these answers carry the current leader (v16+).
_LEADER_MOVED = frozenset((ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH))


@cache
def _response_classes(cls):
    """``(topic class, partition class, partition fields, diverging-epoch
    class or None, current-leader class or None)`` of one version's
    FetchResponse, resolved once per version.

    The response is built from these classes directly rather than through
    ``construct``'s per-dict walk, which was 18 % of a 16-partition fetch's
    worker time (cProfile of ``worker.handle_request``: ~60 of 355 us).
    """
    fetch_request_wire.install_response_writer(cls)  # v4+: written in one pass (protocol/fetch_request_wire.py)
    topic_cls = next(n[1] for name, n, _ in _plan(cls) if name == "responses")
    part_cls = next(n[1] for name, n, _ in _plan(topic_cls) if name == "partitions")
    epoch_cls = next((n[1] for name, n, _ in _plan(part_cls) if name == "diverging_epoch"), None)
    leader_cls = next((n[1] for name, n, _ in _plan(part_cls) if name == "current_leader"), None)
    return (topic_cls, part_cls, frozenset(f.name for f in dataclasses.fields(part_cls)), epoch_cls,
            leader_cls)


_names_of = {}  # id(metadata) -> (metadata, {topic id bytes: name}); one entry, per process


def _topic_names(md) -> dict:
    """``{topic id bytes: name}`` of the metadata (Kafka's topicIdsToNames),
    built once per metadata object."""
    cached = _names_of.get(id(md))
    if cached is None or cached[0] is not md:
        _names_of.clear()
        cached = _names_of[id(md)] = (md, {info.topic_id.bytes: name for name, info in md.topics.items()})
    return cached[1]


def _partition(part_cls, fields, index, error_code, high_watermark, log_start_offset,
               txn, records, diverging_epoch=None, current_leader=None):
    """``txn``: a read_committed answer's (last stable offset, aborted
    transactions), else None (read_uncommitted: the high watermark is the
    last stable offset, no aborted list)."""
    kw = {"partition_index": index, "error_code": error_code,
          "high_watermark": high_watermark, "records": records}
    if "aborted_transactions" in fields:  # v4+
        kw["aborted_transactions"] = None if txn is None else txn[1]
    if diverging_epoch is not None:
        kw["diverging_epoch"] = diverging_epoch
    if current_leader is not None:
        kw["current_leader"] = current_leader
    # last_stable_offset from v4, log_start_offset from v5,
    # preferred_read_replica from v11: pass only what this version has.
    if "last_stable_offset" in fields:
        kw["last_stable_offset"] = high_watermark if txn is None else txn[0]
    if "log_start_offset" in fields:
        kw["log_start_offset"] = log_start_offset
    if "preferred_read_replica" in fields:
        kw["preferred_read_replica"] = -1
    return part_cls(**kw)


@cache
def _aborted_class(cls):
    topic_cls, part_cls, *_ = _response_classes(cls)
    return next(n[1] for name, n, _ in _plan(part_cls) if name == "aborted_transactions")


def _aborted(cls, aborted) -> tuple:
    """The AbortedTransaction entries of ``aborted`` (``AbortedTxn``s)."""
    entry = _aborted_class(cls)
    return tuple(entry(producer_id=a.producer_id, first_offset=a.first_offset) for a in aborted)


def _requested(request, uses_topic_ids: bool) -> list:
    """The request's partitions as session entries, in request order."""
    entries = []
    for topic in request.topics:
        key = topic.topic_id.bytes if uses_topic_ids else topic.topic
        for fp in topic.partitions:
            entries.append(Entry(key, fp.partition, fp.fetch_offset, fp.partition_max_bytes,
                                 getattr(fp, "current_leader_epoch", -1),
                                 getattr(fp, "last_fetched_epoch", -1),
                                 getattr(fp, "log_start_offset", -1), -1, -1))
    return entries


def _updated(session_entries: list, request, uses_topic_ids: bool):
    """Kafka's FetchSession.update: the session's partitions after the
    request's (new ones appended, known ones given their new fetch
    parameters in place) and ``forgotten_topics_data``; None if unchanged."""
    if not request.topics and not request.forgotten_topics_data:
        return None
    entries = list(session_entries)
    position = {(e.key, e.partition): i for i, e in enumerate(entries)}
    for new in _requested(request, uses_topic_ids):
        i = position.get((new.key, new.partition))
        if i is None:
            position[(new.key, new.partition)] = len(entries)
            entries.append(new)
        else:
            old = entries[i]
            entries[i] = new._replace(high_watermark=old.high_watermark,
                                      local_log_start_offset=old.local_log_start_offset)
    forgotten = set()
    for topic in request.forgotten_topics_data:
        key = topic.topic_id.bytes if uses_topic_ids else topic.topic
        forgotten.update((key, p) for p in topic.partitions)
    if forgotten:
        entries = [e for e in entries if (e.key, e.partition) not in forgotten]
    return entries


def _session_error(cls, code, session_id=0):
    return cls(throttle_time=0, error_code=int(code), session_id=session_id, responses=())


def handle(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    cls = ctx.response_class()
    uses_topic_ids = version >= 13
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    session_id, epoch = (request.session_id, request.session_epoch) if version >= 7 else (0, FINAL_EPOCH)
    # Sessionless (id 0, epoch -1) is every fetch before v7 and a client's
    # that asks for none: it never looks at the session cache. The replica
    # fetcher keeps a session per leader (FetchSessionHandler), as Kafka's.
    sessions = broker.fetch_sessions if session_id or epoch != FINAL_EPOCH else None
    session = None
    entries = None  # the session's partitions after this request, if they changed
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id:
            sessions.remove(session_id)
        # The request's own FetchPartitions, keyed by topic: no per-partition
        # object is built on this path (~0.4 ms for 1,000 partitions here).
        keys, wanted = [], []
        for topic in request.topics:
            keys += [topic.topic_id.bytes if uses_topic_ids else topic.topic] * len(topic.partitions)
            wanted += topic.partitions
    else:
        session = sessions.get(session_id)
        if session is None:
            return _session_error(cls, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return _session_error(cls, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return _session_error(cls, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        entries = _updated(session.entries, request, uses_topic_ids)
        wanted = session.entries if entries is None else entries
        if not wanted:
            sessions.remove(session_id)
            return cls(throttle_time=0, error_code=0, session_id=0, responses=())
        keys = [e.key for e in wanted]

    results, delayed = _read(ctx, request, keys, wanted, replica_id, version)
    if delayed is not None:
        return delayed

    if session is None:
        if epoch == INITIAL_EPOCH and version >= 7:
            cached = [e._replace(high_watermark=-1 if code else high_watermark,
                                 local_log_start_offset=log_start_offset)
                      for e, (_, code, high_watermark, log_start_offset, *_) in zip(
                          _requested(request, uses_topic_ids), results)]
            session_id = sessions.create(ctx.now_ms, replica_id >= 0, uses_topic_ids, cached)
        else:
            session_id = 0
        return _response(ctx, cls, request, keys, wanted, results, session_id)

    # Incremental: answer only what changed (Kafka's CachedPartition.maybeUpdateResponseData).
    send = []
    cached = []
    moved = []
    changed = entries is not None
    for e, r in zip(wanted, results):
        _, code, high_watermark, log_start_offset, _, size, diverging, *_ = r
        if not (size or code or diverging is not None or high_watermark != e.high_watermark
                or log_start_offset != e.local_log_start_offset):
            cached.append(e)
            continue
        send.append((e, r))
        new_hw = -1 if code else high_watermark
        if new_hw != e.high_watermark or log_start_offset != e.local_log_start_offset:
            e = e._replace(high_watermark=new_hw, local_log_start_offset=log_start_offset)
            changed = True
        if size:
            moved.append(e)  # partitions with records go to the end
            changed = True
        else:
            cached.append(e)
    code = sessions.commit(session, cached + moved if changed else None, ctx.now_ms)
    if code == ErrorCode.INVALID_FETCH_SESSION_EPOCH:  # Kafka names the session here
        return _session_error(cls, code, session.session_id)
    if code:
        return _session_error(cls, code)
    return _response(ctx, cls, request, [e.key for e, _ in send], [e for e, _ in send], [r for _, r in send],
                     session.session_id)


def _read(ctx, request, keys: list, wanted: list, replica_id: int, version: int):
    """Read every wanted partition (a request's FetchPartition or a session's
    Entry, of topic ``keys[i]``): ``(results, DelayedFetch or None)``; a
    result is ``(name or None, error code, high watermark, log start offset,
    records, size, diverging (epoch, end offset) or None, Partition or
    None, (last stable offset, aborted transactions) or None)``, one per
    partition; the last is a read_committed read's (up to the last stable
    offset, Kafka's FetchTxnCommitted)."""
    broker = ctx.broker
    replica_manager = broker.replica_manager
    get_partition = replica_manager.get_partition
    names = _topic_names(broker.metadata()) if version >= 13 else None
    has_epoch = version >= 9
    idle_checks = replica_id >= 0 and version >= 12  # last_fetched_epoch from v12
    first_run = not ctx.deadline_ms  # a parked fetch run again does not record the follower's state
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED and replica_id < 0
    remaining = getattr(request, "max_bytes", _NO_MAX_BYTES)
    down_convert_to = None if version >= FIRST_V2_FORMAT_VERSION else (0 if version <= 1 else 1)
    total = 0
    failed = False
    readable = False
    watch = {}  # slot -> (field, value): what a DelayedFetch waits for
    high_watermark_moved = []  # slots whose high watermark a follower's fetch moved
    # leader.replication.throttled.rate (replication/quota.py): None unless set
    throttle = throttle_for(broker, leader=True) if replica_id >= 0 else None
    results = []
    allowed = _allowed_check(ctx, getattr(broker, "authorizer", None), replica_id)
    for key, e in zip(keys, wanted):
        name = key if names is None else names.get(key)
        if name is None:
            results.append((None, ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, b"", 0, None, None, None))
            continue
        if allowed is not None and not allowed(name):
            results.append((name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, b"", 0, None, None, None))
            continue
        partition = get_partition(name, e.partition)
        if idle_checks and partition is not None:
            # A follower's idle partition (most of a session's): one read
            # of the slot says nothing is to be read or recorded.
            idle = partition.idle_follower_fetch(replica_id, e.fetch_offset,
                                                 e.current_leader_epoch, e.last_fetched_epoch, ctx.now_ms)
            if idle is not None:
                readable = True
                watch[partition.slot] = (LOG_END_OFFSET, e.fetch_offset + 1)
                results.append((name, ErrorCode.NONE, idle[0], idle[1], b"", 0, None, partition, None))
                continue
        if partition is None:
            code = replica_manager.unhosted_error(name, e.partition)
        else:
            code = partition.check_leader(e.current_leader_epoch if has_epoch else -1)
        if code:
            if code not in _METADATA_ERRORS:
                failed = True
            results.append((name, code, -1, -1, b"", 0, None, partition, None))
            continue
        if (down_convert_to is not None and replica_id < 0
                and not partition.log.config.message_downconversion_enable):
            failed = True
            results.append((name, ErrorCode.UNSUPPORTED_VERSION, -1, -1, b"", 0, None, partition, None))
            continue
        readable = True
        txn = None
        max_bytes = max(0, min(e.partition_max_bytes, remaining))
        if committed:
            data, high_watermark, log_start_offset, *txn = partition.fetch_records_committed(
                e.fetch_offset, max_bytes, total == 0)
            watch[partition.slot] = (HIGH_WATERMARK, high_watermark + 1)  # a marker moves it too
        elif replica_id < 0:
            data, high_watermark, log_start_offset = partition.fetch_records(
                e.fetch_offset, max_bytes, total == 0)
            watch[partition.slot] = (HIGH_WATERMARK, high_watermark + 1)  # moved past what was read
        else:
            code, diverging = _check_follower(partition, replica_id, e, has_epoch, version)
            if code or diverging is not None:
                # An error, or the follower's log diverged: answered at
                # once, with no records (Kafka's readRecords).
                failed = True
                results.append((name, code, partition.high_watermark, partition.log_start_offset,
                                b"", 0, diverging, partition, None))
                continue
            before = partition.high_watermark
            data, high_watermark, log_start_offset = partition.fetch_records_for_follower(
                replica_id, e.fetch_offset, max_bytes, total == 0, ctx.now_ms, record=first_run)
            if high_watermark > before:
                high_watermark_moved.append(partition.slot)
            if throttle is not None and data is not None and data.size and throttle.is_throttled(name, e.partition):
                # Kafka's shouldLeaderThrottle: held back only out of the ISR; not waited for
                if replica_id not in partition.isr and throttle.exceeded():
                    results.append((name, ErrorCode.NONE, high_watermark, log_start_offset, b"", 0, None,
                                    partition, None))
                    continue
                throttle.recorded += data.size
            watch[partition.slot] = (LOG_END_OFFSET, e.fetch_offset + 1)
        if data is None:
            failed = True
            results.append((name, ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark, log_start_offset,
                            b"", 0, None, partition, None))
            continue
        size = data.size
        records = RecordsRegions(data.regions, size) if size else b""
        if size and down_convert_to is not None:
            try:
                records = _down_converted(name, data.regions, down_convert_to, e.fetch_offset, max_bytes)
            except LegacyRecordError as exc:
                failed = True
                results.append((name, exc.error_code, -1, -1, b"", 0, None, partition, None))
                continue
            size = len(records)
        total += size
        remaining -= size
        results.append((name, ErrorCode.NONE, high_watermark, log_start_offset, records, size, None,
                        partition, txn))
    if throttle is not None and throttle.recorded:
        throttle.record(throttle.recorded)
    if high_watermark_moved:
        # Wakes only processors whose parked operations (an acks=all
        # produce, a consumer's fetch) watch these partitions' high
        # watermarks; a follower's parked Fetch waits for the log end offset
        # (Kafka's DelayedFetch completes a follower's on bytes, not on a
        # high watermark).
        replica_manager.wake_delayed_operations(high_watermark_moved, high_watermark_only=True)
    if readable and not failed and total < request.min_bytes and request.max_wait > 0:
        deadline = ctx.deadline_ms or ctx.now_ms + request.max_wait
        if ctx.now_ms < deadline:
            return results, DelayedFetch(watch, deadline)
    return results, None


def _down_converted(name: str, regions, magic: int, fetch_offset: int, max_bytes: int) -> bytes:
    """A v0-v3 fetch's records of one partition as a magic ``magic``
    MessageSet; the read was bounded by ``max_bytes`` already, so memory is
    that plus its conversion (counted as Kafka's FetchMessageConversionsPerSec
    and MessageConversionsTimeMs)."""
    started = time.monotonic()
    converted, records = down_convert(region_bytes(regions), magic, fetch_offset, max_bytes)
    probes.request.converted(name, records, time.monotonic() - started)
    return converted


def _allowed_check(ctx, auth, replica_id: int):
    """None without an authorizer; else ``allowed(topic)`` (Kafka's handleFetchRequest):
    a follower's fetch needs ClusterAction on the cluster for every partition,
    a consumer's Read on each topic (asked once per topic per request)."""
    if auth is None:
        return None
    if replica_id >= 0:
        cluster = auth.allowed_cluster(ctx, acls.CLUSTER_ACTION)
        return lambda _name: cluster
    seen = {}

    def allowed(name):
        result = seen.get(name)
        if result is None:
            result = seen[name] = auth.allowed(ctx, acls.READ, acls.TOPIC, name)
        return result

    return allowed


def _response(ctx, cls, request, keys: list, parts: list, results: list, session_id: int):
    """The answer for these partitions (of topics ``keys``), consecutive
    partitions of one topic under one topic entry (Kafka's FetchResponse.of)."""
    version = ctx.api_version
    topic_cls, part_cls, fields, epoch_cls, leader_cls = _response_classes(cls)
    topics = []
    partitions = []
    key = None
    endpoints = {}
    md = None
    for part_key, e, (name, code, high_watermark, log_start_offset, records, size, diverging, partition, txn) \
            in zip(keys, parts, results):
        if part_key != key or not partitions:
            if partitions:
                topics.append(_topic(topic_cls, key, version, partitions))
            key, partitions = part_key, []
        leader = None
        if version >= 16 and code in _LEADER_MOVED:
            md = md or ctx.broker.metadata()
            leader = _current_leader(cls, md, name, e.partition, partition, endpoints)
            leader = leader_cls(leader_id=leader[0], leader_epoch=leader[1])
        if size:
            probes.request.fetched(name, size)
        partitions.append(_partition(
            part_cls, fields, e.partition, int(code), high_watermark, log_start_offset,
            None if txn is None else (txn[0], _aborted(cls, txn[1])), records,
            None if diverging is None else epoch_cls(epoch=diverging[0], end_offset=diverging[1]),
            leader))
    if partitions:
        topics.append(_topic(topic_cls, key, version, partitions))
    if version >= 16:
        return cls(throttle_time=0, error_code=0, session_id=session_id, responses=tuple(topics),
                   node_endpoints=tuple(endpoints.values()))
    if version >= 7:
        return cls(throttle_time=0, error_code=0, session_id=session_id, responses=tuple(topics))
    if version == 0:
        return cls(responses=tuple(topics))
    return cls(throttle_time=0, responses=tuple(topics))


def _topic(topic_cls, key, version: int, partitions: list):
    if version >= 13:
        return topic_cls(topic_id=uuid.UUID(bytes=key), partitions=tuple(partitions))
    return topic_cls(topic=key, partitions=tuple(partitions))


def _current_leader(cls, md, name, index: int, partition, endpoints: dict) -> tuple:
    """KIP-951 (Kafka's getCurrentLeader): ``(leader id, leader epoch)`` of a
    partition, from its local role when hosted here, else from the metadata
    (-1, -1 unknown); the leader's endpoint goes into ``endpoints`` when it is
    a live broker."""
    if partition is not None and partition.state.replica_count:
        leader_id, leader_epoch = partition.leader_id, partition.leader_epoch
    else:
        state = md.partition_state(name, index) if name is not None else None
        leader_id, leader_epoch = (state.leader, state.leader_epoch) if state is not None else (-1, -1)
    broker = md.brokers.get(leader_id)
    if broker is not None and leader_id not in endpoints:
        endpoint_cls = next(n[1] for f, n, _ in _plan(cls) if f == "node_endpoints")
        endpoints[leader_id] = endpoint_cls(node_id=leader_id, host=broker.host, port=broker.port,
                                            rack=broker.rack)
    return leader_id, leader_epoch


def _check_follower(partition, replica_id: int, entry, has_epoch: bool, version: int):
    """A follower's fetch of one partition before its read: ``(error code,
    None or (epoch, end_offset) of a diverging epoch)`` (the module docstring;
    Kafka's followerReplicaOrThrow, then readRecords' last-fetched-epoch check)."""
    if replica_id not in partition.replicas:
        sent_epoch = has_epoch and entry.current_leader_epoch >= 0
        return (ErrorCode.UNKNOWN_LEADER_EPOCH if sent_epoch else ErrorCode.NOT_LEADER_OR_FOLLOWER), None
    if version < 12 or entry.last_fetched_epoch < 0:
        return ErrorCode.NONE, None
    answer = partition.last_offset_for_leader_epoch(entry.last_fetched_epoch)
    code, diverging = diverging_epoch(answer, entry.last_fetched_epoch, entry.fetch_offset,
                                      partition.log_start_offset)
    if diverging is not None:
        # Rare (after a leader change) and followed by a truncation: what the
        # follower said and what the leader knows, for the record (read under
        # the lock: the Log's methods need it).
        with partition.lock():
            log_end_offset, entries = partition.log_end_offset, partition.log.leader_epoch_entries()
        log.info("%s-%d: follower %d at offset %d in epoch %d diverged: answered epoch %d ending at %d "
                 "(log end offset %d, leader epochs %s)", partition.topic, partition.partition_id, replica_id,
                 entry.fetch_offset, entry.last_fetched_epoch, diverging[0], diverging[1],
                 log_end_offset, entries)
    return code, diverging


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
