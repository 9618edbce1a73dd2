"""Produce (key 0), served v0-v11.

Contract:
- acks: 0 = no response (if any partition failed, the connection is closed,
  as Kafka does, so the producer notices); 1 answers after the local append;
  -1 (all) answers once the high watermark has passed every appended
  partition's records (Kafka's DelayedProduce): at once if it already has —
  always, while the ISR is this broker alone — else the request becomes a
  ``DelayedProduce`` its processor parks until then or ``timeout`` ms, when
  the partitions still short answer REQUEST_TIMED_OUT (7). Leadership is
  looked at first: a partition this broker no longer leads right after the
  append, or no longer leads at that epoch when the parked request is
  answered, answers NOT_LEADER_OR_FOLLOWER (6) whatever its high watermark.
  Any other value -> INVALID_REQUIRED_ACKS (21) for every partition.
- Each partition's records are validated and appended through the replica
  manager (``Partition.append_records_to_leader``, under the partition
  lock); errors are per partition: CORRUPT_MESSAGE (2),
  INVALID_RECORD (87), MESSAGE_TOO_LARGE (10), RECORD_LIST_TOO_LARGE (18),
  UNKNOWN_TOPIC_OR_PARTITION (3), INVALID_PRODUCER_EPOCH (47),
  OUT_OF_ORDER_SEQUENCE_NUMBER (45), NOT_ENOUGH_REPLICAS (19) for acks=-1
  when ``min.insync.replicas`` exceeds the ISR (one replica here). A duplicate idempotent batch is
  acknowledged with the offsets it got the first time.
- ``log_append_time`` is -1 unless the topic uses LogAppendTime.
- v0-v2 carry message format v0/v1 (MessageSets): each partition's set is
  converted to one v2 batch (``storage.legacy_records``, Kafka's LogValidator
  up-conversion) and then appended like any other; a set with no complete
  message appends nothing and answers NONE with base offset -1, as Kafka.
  Their responses are kafkapy's own schemas (v0: no throttle_time, v2 adds
  log_append_time).
- Records stay a memoryview of the request buffer: offsets are assigned in
  place and the bytes written to the segment as they arrived.
- KIP-890 partition verification (``transaction.partition.verification.enable``,
  on by default; ``server/txn_verification.py``): with a transactional id,
  a transactional batch of a producer with no transaction open on its
  partition waits (parked, nothing appended) for its coordinator to say
  the partition is in the producer's transaction; refused:
  INVALID_TXN_STATE (48; TRANSACTION_ABORTABLE, 120, from v11),
  INVALID_PRODUCER_EPOCH (47) when fenced, NOT_ENOUGH_REPLICAS (19) when
  the coordinator could not answer. With the setting on, such a batch is
  never appended unverified, with or without a transactional id (48).
- ACLs (with an authorizer, Kafka's KafkaApis.handleProduceRequest):
  transactional batches need Write on the request's transactional id, else
  every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53); each
  topic needs Write, else its partitions answer TOPIC_AUTHORIZATION_FAILED
  (29) and nothing of them is appended.
"""

import dataclasses
import logging
from functools import cache

from kafkapy.protocol import acls, produce_wire
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.readers import _read_plan
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.purgatory import HIGH_WATERMARK, DelayedProduce
from kafkapy.server import txn_verification
from kafkapy.server.handlers import CloseConnection, NoResponse, _plan
from kafkapy.storage import legacy_records
from kafkapy.storage.producer_state import NOT_VERIFIED

API_KEY = 0
log = logging.getLogger("kafkapy.request")

_VALID_ACKS = (-1, 0, 1)
# What a partition's answer is built from (``_response_classes``), in the builder's argument order.
_PARTITION_ARGUMENTS = ("index", "error_code", "base_offset", "log_append_time", "log_start_offset", "error_message")


@cache
def _response_classes(cls):
    """``(topic class, partition builder, response builder)`` of one version's ProduceResponse.

    The entities are built directly rather than through ``construct``'s
    per-dict walk: with 16 partitions per request (a confluent-kafka
    producer at linger 5 ms) the dicts and ``construct`` were ~2.5 us of the
    ~20 us each partition cost a worker.  The builder takes the fields every
    version has and sets those this version's class declares (log_append_time
    from v2, log_start_offset from v5, error_message from v8), the others at
    their defaults (record_errors empty, current_leader unknown), through the
    slot setters the codec's reader uses: a new partition answer without the
    frozen dataclass's keyword ``__init__`` costs ~0.6 us against ~1.2-1.8
    (a Produce of 500 partitions answers 500 of them). The response builder
    passes throttle_time from v1.
    """
    produce_wire.install_response_writer(cls)  # v3+: written in one pass (protocol/produce_wire.py)
    topic_cls = next(n[1] for name, n, _ in _plan(cls) if name == "responses")
    part_cls = next(n[1] for name, n, _ in _plan(topic_cls) if name == "partition_responses")
    plan = []  # (slot setter, argument position or -1, value when -1), in field order
    for field, setter in zip(dataclasses.fields(part_cls), _read_plan(part_cls).setters):
        if field.name in _PARTITION_ARGUMENTS:
            plan.append((setter, _PARTITION_ARGUMENTS.index(field.name), None))
        elif field.name == "record_errors":
            plan.append((setter, -1, ()))
        elif field.default is not dataclasses.MISSING:
            plan.append((setter, -1, field.default))
        else:
            raise TypeError(f"{part_cls.__qualname__}.{field.name}: no value for this field")
    plan = tuple(plan)
    new = object.__new__

    def partition(*values):
        """``(index, error_code, base_offset, log_append_time, log_start_offset, error_message)``."""
        entity = new(part_cls)
        for setter, at, value in plan:
            setter(entity, values[at] if at >= 0 else value)
        return entity

    has_throttle = any(f.name == "throttle_time" for f in dataclasses.fields(cls))

    def response(topics, throttle_ms: int = 0):
        return cls(responses=topics, throttle_time=throttle_ms) if has_throttle else cls(responses=topics)

    return topic_cls, partition, response


def handle(ctx, request):
    replica_manager = ctx.broker.replica_manager
    # KIP-890: {(topic, partition): (verification error, token)} on the run after the coordinator's answer.
    verified = ctx.verification
    # The setting is read only for a transactional id or a transactional
    # batch: reading the broker's current config was ~3.6 us, a tenth of a
    # small produce's handling, and other produces never need it.
    verify = _UNREAD
    if verified is None and getattr(request, "transactional_id", None) is not None and request.acks in _VALID_ACKS:
        verify = _verification(ctx)
        if verify is not None:
            op = txn_verification.start(ctx, request)
            if op is not None:
                return op
    acks = request.acks
    any_error = False
    appended = []  # the slots appended to: what parked operations may wait on
    get_partition = replica_manager.get_partition
    cls = ctx.response_class()
    topic_cls, partition, response = _response_classes(cls)
    append = replica_manager.append_records
    legacy = ctx.api_version < produce_wire.FIRST_VERSION  # v0-v2: message format v0/v1
    valid_acks = acks in _VALID_ACKS
    # acks=-1: {slot: ("high_watermark", last offset + 1)} of the partitions
    # whose high watermark has not passed their records yet.
    watch = {} if acks == -1 else None
    leader_epochs = {}  # slot -> the leader epoch the append ran at (DelayedProduce's leadership check)
    auth = getattr(ctx.broker, "authorizer", None)
    denied = _denied(ctx, auth, request) if auth is not None else None
    topics = []
    for topic in request.topic_data:
        name = topic.name
        partitions = []
        for pdata in topic.partition_data:
            index = pdata.index
            if denied and (denied is _ALL or name in denied):
                any_error = True
                partitions.append(partition(index, int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                                                       if denied is _ALL else ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                            -1, -1, -1, None))
                continue
            if valid_acks:
                records = pdata.records
                if legacy:
                    code, records, message = _up_convert(records)
                    if code or not records:
                        any_error = any_error or bool(code)
                        partitions.append(partition(index, int(code), -1, -1, -1, message))
                        continue
                if verified is not None and (name, index) in verified:
                    code, check = verified[name, index]
                    if code:
                        code, message = txn_verification.produce_error(code, ctx.api_version)
                        any_error = True
                        partitions.append(partition(index, int(code), -1, -1, -1, message))
                        continue
                else:
                    check = verify
                    if check is _UNREAD:
                        if _transactional(records):
                            verify = check = _verification(ctx)
                        else:
                            check = None  # the append checks only transactional batches
                code, result, message = append(name, index, records, acks, check)
            else:
                code, result, message = ErrorCode.INVALID_REQUIRED_ACKS, None, None
            if not code and (result.record_count > 0 or watch is not None):
                replica = get_partition(name, index)
                if result.record_count > 0:
                    appended.append(replica.slot)
                if watch is not None:
                    # acks=-1 looks at leadership before the high watermark, as
                    # Kafka's checkEnoughReplicasReachOffset: a LeaderAndIsr that
                    # made this broker a follower since the append leaves it the
                    # new leader's high watermark, past offsets where our
                    # records may be truncated (a preferred election, here).
                    # The leader epoch is the append's own: a leadership that
                    # went away and came back since (a later epoch) may have
                    # truncated them too; Kafka would have completed this
                    # produce with the same error when it became a follower.
                    if not replica.is_leader or replica.leader_epoch != result.leader_epoch:
                        code, message = ErrorCode.NOT_LEADER_OR_FOLLOWER, None
                    elif replica.high_watermark <= result.last_offset:
                        watch[replica.slot] = (HIGH_WATERMARK, result.last_offset + 1)
                        leader_epochs[replica.slot] = result.leader_epoch
            if code:
                any_error = True
                partitions.append(partition(index, int(code), -1, -1, -1, message))
            else:
                partitions.append(partition(index, 0, result.first_offset, result.log_append_time_ms,
                                            result.log_start_offset, None))
        topics.append(topic_cls(name=name, partition_responses=tuple(partitions)))
    if appended:
        replica_manager.wake_delayed_operations(appended)
    if acks == 0:
        return CloseConnection if any_error else NoResponse
    if watch:
        return _delayed(ctx, request, watch, topics, leader_epochs)
    return response(tuple(topics))


_ALL = frozenset(("*",))  # every partition refused (transactional id not authorized)
# A v2 batch header: magic at byte 16, attributes (int16) at 21-22; bit 4 (of the low byte) is "transactional".
_MAGIC_AT, _ATTRIBUTES_AT, _TRANSACTIONAL = 16, 22, 0x10
_UNREAD = object()  # transaction.partition.verification.enable not read yet for this request


def _transactional(records) -> bool:
    """Whether the first batch of a partition's records is transactional
    (a v3+ idempotent or transactional produce carries one batch)."""
    return records is not None and len(records) > _ATTRIBUTES_AT and records[_MAGIC_AT] >= 2 \
        and bool(records[_ATTRIBUTES_AT] & _TRANSACTIONAL)


def _verification(ctx):
    """``NOT_VERIFIED`` with transaction.partition.verification.enable (KIP-890), else None."""
    return NOT_VERIFIED if ctx.broker.config[txn_verification.CONFIG] else None


def _denied(ctx, auth, request):
    """The topics this produce may not write (Kafka's Write on each topic),
    or ``_ALL`` when it carries transactional batches without Write on its
    transactional id (Kafka looks at each partition's first batch)."""
    for topic in request.topic_data:
        for pdata in topic.partition_data:
            records = pdata.records
            if _transactional(records):
                tid = getattr(request, "transactional_id", None)
                if tid is None or not auth.allowed(ctx, acls.WRITE, acls.TRANSACTIONAL_ID, tid):
                    return _ALL
                break
        else:
            continue
        break
    return auth.denied(ctx, acls.WRITE, acls.TOPIC, (t.name for t in request.topic_data))


def _up_convert(records):
    """``(error code, v2 records, message)`` for a Produce v0-v2 partition's
    MessageSet; v2 batches sent in an old version pass as they are (Kafka's
    validator takes any magic below v3)."""
    if records is None or not legacy_records.is_legacy(records):
        return ErrorCode.NONE, records, None
    try:
        return ErrorCode.NONE, memoryview(bytearray(legacy_records.to_v2_batch(records))), None
    except legacy_records.LegacyRecordError as exc:
        return exc.error_code, None, str(exc)


def _delayed(ctx, request, watch: dict, topics, leader_epochs: dict) -> DelayedProduce:
    """Kafka's tryCompleteElseWatch, the watch half: the results so far, to
    be answered when the high watermark passes every watched partition, or
    at once when a partition is no longer led at ``leader_epochs`` (read
    right after each append)."""
    replica_manager = ctx.broker.replica_manager
    results = []
    for topic in topics:
        parts = []
        for p in topic.partition_responses:
            slot = -1
            if p.error_code == 0:
                replica = replica_manager.get_partition(topic.name, p.index)
                slot = replica.slot if replica.slot in watch else -1
            parts.append((p.index, p.error_code, p.base_offset, p.log_append_time,
                          getattr(p, "log_start_offset", -1), getattr(p, "error_message", None), slot))
        results.append((topic.name, parts))
    return DelayedProduce(watch, ctx.now_ms + request.timeout, ctx.correlation_id, ctx.api_version,
                          results, leader_epochs)


def delayed_produce_response(op: DelayedProduce, read_field):
    """The ProduceResponse of a parked produce, complete or expired (see
    ``DelayedProduce.final_results``)."""
    cls = API_TABLE[API_KEY].response_class(op.api_version)
    topic_cls, partition, response = _response_classes(cls)
    topics = tuple(
        topic_cls(name=name, partition_responses=tuple(
            partition(index, int(code), base, append_time, start, message)
            for index, code, base, append_time, start, message, _slot in parts))
        for name, parts in op.final_results(read_field))
    return response(topics, op.throttle_ms)

