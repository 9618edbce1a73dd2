"""WriteTxnMarkers (key 27), v0-v1: a transaction coordinator's COMMIT/ABORT
markers for partitions this broker leads (inter-broker; Kafka's
handleWriteTxnMarkersRequest).

Contract, per marker and partition: the marker is appended as the leader
appends a produce (``Partition.append_control_batch_to_leader``: leader and
min.insync.replicas checks, acks=-1), every marker of the request before any
is waited for. The request is answered at once when every high watermark
has passed its marker (always while the ISR is this broker alone); else the
handler returns a ``DelayedTxnMarkers`` and its worker is free: the
processor parks it (as an acks=-1 produce, Kafka's DelayedProduce) and
answers when every watched partition's high watermark passed its marker or
its leadership moved, or after ``MARKER_WAIT_MS``. Errors as Kafka's:
UNKNOWN_TOPIC_OR_PARTITION (3) for a partition the metadata does not have,
NOT_LEADER_OR_FOLLOWER (6) (also for one whose leadership moved while its
marker waited), NOT_ENOUGH_REPLICAS (19) before the append,
NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) when the ISR shrank below
min.insync.replicas while it waited, REQUEST_TIMED_OUT (7) for a marker the
ISR did not all get in time (the coordinator retries),
INVALID_PRODUCER_EPOCH (47) for an epoch older than the producer's,
TRANSACTION_COORDINATOR_FENCED (52) for an older coordinator epoch,
CLUSTER_AUTHORIZATION_FAILED (31) without Alter or ClusterAction on the
cluster. Without an authorizer (as Kafka without one) any client may send it.

A marker's effects on this broker happen at its append, whatever the
answer: the producer state (its transaction ended, the last stable offset
and ``.txnindex``) in ``Log.append_control_batch``; the group coordinator
reads markers on ``__consumer_offsets`` partitions from the log
(``GroupMetadataManager.poll_txn_markers``), where Kafka's handler calls
onTransactionCompleted.
"""

from kafkapy.coordinator.transaction.coordinator import WriteMarkers
from kafkapy.coordinator.transaction.marker_channel import LocalMarkerWriter
from kafkapy.protocol import acls
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import effective_min_isr
from kafkapy.replication.purgatory import HIGH_WATERMARK, DelayedTxnMarkers
from kafkapy.server.handlers import construct
from kafkapy.server.security.authorizer import cluster_denied

API_KEY = 27
# Kafka parks the markers for the broker's request.timeout.ms (30 s); here
# they wait well inside the coordinator's socket timeout for the answer
# (marker_channel.REMOTE_TIMEOUT_S, 15 s), so the coordinator hears
# REQUEST_TIMED_OUT and retries rather than dropping the connection.
MARKER_WAIT_MS = 10_000


def handle(ctx, request):
    broker = ctx.broker
    # Kafka: Alter on the cluster, else ClusterAction (a broker's request).
    if cluster_denied(ctx, acls.ALTER) and cluster_denied(ctx, acls.CLUSTER_ACTION):
        denied = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return txn_markers_response(ctx.response_class(), [
            (m.producer_id, [(t.name, [(p, denied) for p in t.partition_indexes]) for t in m.topics])
            for m in request.markers])
    topics_md = broker.metadata().topics
    writer = LocalMarkerWriter(broker)  # its append only; the wait is the processor's
    watch = {}  # slot -> (HIGH_WATERMARK, the largest offset its markers need)
    leader_epochs, min_isr = {}, {}
    appended = []  # slots appended to: the fetches (followers') parked on them wake
    results = []
    for m in request.markers:
        markers = WriteMarkers("", m.coordinator_epoch, m.producer_id, m.producer_epoch,
                               bool(m.transaction_result), frozenset(), None)
        done = {}  # (topic, partition) -> (error code, slot, required offset): once each
        topics = []
        for t in m.topics:
            info = topics_md.get(t.name)
            partitions = []
            for p in t.partition_indexes:
                tp = (t.name, p)
                if tp not in done:
                    if info is None or not 0 <= p < info.num_partitions:
                        done[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), -1, 0)
                    else:
                        done[tp] = _append(writer, tp, markers, watch, leader_epochs, min_isr, appended)
                partitions.append((p, *done[tp]))
            topics.append((t.name, partitions))
        results.append((m.producer_id, topics))
    if appended:
        # A marker moves the log end offset (and, with the leader alone in
        # the ISR, the high watermark and last stable offset): the followers'
        # fetches and read_committed consumers parked on it, as Kafka's
        # append completes its delayed fetches.
        broker.replica_manager.wake_delayed_operations(appended)
    op = DelayedTxnMarkers(watch, ctx.now_ms + MARKER_WAIT_MS, ctx.correlation_id, ctx.api_version, results,
                           leader_epochs, 0, min_isr)
    if watch:
        return op
    return txn_markers_response(ctx.response_class(), op.final_results(None))


def _append(writer, tp, markers, watch, leader_epochs, min_isr, appended) -> tuple:
    """Append ``markers`` to ``tp``: ``(error code, slot, required offset)``,
    slot -1 when answered now; a marker to wait for goes into ``watch``."""
    error, partition, offset = writer.append(tp[0], tp[1], markers)
    if partition is None:
        return int(error), -1, 0
    slot = partition.slot
    appended.append(slot)
    done, error = partition.check_enough_replicas_reach_offset(offset)
    if done or error:
        return int(error), -1, 0
    if slot not in watch or watch[slot][1] < offset:
        watch[slot] = (HIGH_WATERMARK, offset)
    leader_epochs[slot] = partition.leader_epoch
    min_isr[slot] = effective_min_isr(partition.log.config, partition.state.replica_count)
    return 0, slot, offset


def txn_markers_response(cls, answered):
    """A WriteTxnMarkersResponse of ``cls`` from ``[(producer_id, [(topic,
    [(partition, error code), ...]), ...]), ...]``."""
    return construct(cls, {"markers": [
        {"producer_id": producer_id, "topics": [
            {"name": name, "partitions": [{"partition_index": p, "error_code": code} for p, code in partitions]}
            for name, partitions in topics]}
        for producer_id, topics in answered]})


def delayed_txn_markers_response(op: DelayedTxnMarkers, read_field):
    """The WriteTxnMarkersResponse of a parked request, complete or expired
    (``DelayedTxnMarkers.final_results``); the processor that held it builds it."""
    from kafkapy.protocol.api import API_TABLE

    return txn_markers_response(API_TABLE[API_KEY].response_class(op.api_version), op.final_results(read_field))
