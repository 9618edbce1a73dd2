"""WriteTxnMarkers (key 27), v0-v1: a transaction coordinator's COMMIT/ABORT
markers for partitions this broker leads (inter-broker; Kafka's
handleWriteTxnMarkersRequest).

Contract, per marker and partition: the marker is appended as the leader
appends a produce (``Partition.append_control_batch_to_leader``: leader and
min.insync.replicas checks, acks=-1) and answered once the high watermark
passed it, at most ``MARKER_WAIT_MS`` (REQUEST_TIMED_OUT after that: the
coordinator retries). Errors as Kafka's: UNKNOWN_TOPIC_OR_PARTITION (3) for
a partition the metadata does not have, NOT_LEADER_OR_FOLLOWER (6),
NOT_ENOUGH_REPLICAS (19), INVALID_PRODUCER_EPOCH (47) for an epoch older
than the producer's, TRANSACTION_COORDINATOR_FENCED (52) for an older
coordinator epoch. kafkapy has no authorizer, so (as Kafka without one)
any client may send it.
"""

from kafkapy.coordinator.transaction.coordinator import WriteMarkers
from kafkapy.coordinator.transaction.marker_channel import LocalMarkerWriter
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.protocol import acls
from kafkapy.server.security.authorizer import cluster_denied

API_KEY = 27
# Kafka waits up to the coordinator's request timeout in the produce
# purgatory; a worker waits here, bounded well inside the coordinator's
# socket timeout (marker_channel.REMOTE_TIMEOUT_S).
MARKER_WAIT_MS = 10_000


def handle(ctx, request):
    broker = ctx.broker
    # Kafka: Alter on the cluster, else ClusterAction (a broker's request).
    if cluster_denied(ctx, acls.ALTER) and cluster_denied(ctx, acls.CLUSTER_ACTION):
        return construct(ctx.response_class(), {"markers": [
            {"producer_id": m.producer_id, "topics": [
                {"name": t.name, "partitions": [
                    {"partition_index": p, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                    for p in t.partition_indexes]} for t in m.topics]} for m in request.markers]})
    topics_md = broker.metadata().topics
    batch = []
    unknown = []  # per marker: partitions the metadata does not have
    for m in request.markers:
        markers = WriteMarkers("", m.coordinator_epoch, m.producer_id, m.producer_epoch,
                               bool(m.transaction_result), frozenset(), None)
        known, missing = [], set()
        for t in m.topics:
            info = topics_md.get(t.name)
            for p in t.partition_indexes:
                if info is not None and 0 <= p < info.num_partitions:
                    known.append((t.name, p))
                else:
                    missing.add((t.name, p))
        batch.append((markers, list(dict.fromkeys(known))))
        unknown.append(missing)
    # Every marker of the request is appended before any is waited for:
    # one request carries all of a coordinator's markers for this broker.
    written = LocalMarkerWriter(broker, MARKER_WAIT_MS).write_all(batch)
    results = []
    for m, errors, missing in zip(request.markers, written, unknown):
        results.append({"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p, "error_code": int(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if (t.name, p) in missing else errors[(t.name, p)])}
                for p in t.partition_indexes]}
            for t in m.topics]})
    return construct(ctx.response_class(), {"markers": results})
