"""DescribeLogDirs (key 35), v0-v4 (v0, which Kafka 3.9 still serves, is v1).

Contract (Kafka's ReplicaManager.describeLogDirs):
- One result per configured log dir (its absolute path), error NONE, with the
  partitions that live in it: ``partition_size`` = bytes of its segments,
  ``offset_lag`` 0 (no future replicas: ``is_future_key`` false).
- ``topics`` null = every partition; otherwise only the partitions named
  (unknown ones are left out, as Kafka does).
- v4: ``total_bytes`` / ``usable_bytes`` of the dir's file system (statvfs:
  blocks x fragment size, available-to-unprivileged blocks x fragment size);
  an unreadable dir -> KAFKA_STORAGE_ERROR (56) for it.
- An offline log dir (an I/O error took it offline: "Log-dir failure" in
  docs/architecture.md): KAFKA_STORAGE_ERROR (56), no partitions, sizes -1.
- v3+: top-level ``error_code`` NONE.
"""

import os

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.protocol import acls
from kafkapy.server.security.authorizer import cluster_denied

API_KEY = 35


def handle(ctx, request):
    broker = ctx.broker
    if cluster_denied(ctx, acls.DESCRIBE):  # Kafka: Describe on the cluster
        return construct(ctx.response_class(), {"throttle_time": 0, "results": [],
                                                "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED})
    md = broker.metadata()
    if request.topics is None:
        wanted = [(name, p) for name, info in sorted(md.topics.items())
                  for p in range(info.num_partitions)]
    else:
        wanted = []
        for t in request.topics:
            info = md.topics.get(t.topic)
            if info is None:
                continue
            wanted.extend((t.topic, p) for p in t.partitions if 0 <= p < info.num_partitions)
    log_dirs = [os.path.abspath(d) for d in broker.static_config.log_dirs]
    by_dir = {d: {} for d in log_dirs}
    for name, p in wanted:
        partition = broker.replica_manager.get_partition(name, p)
        if partition is None:
            continue
        size = partition.size_in_bytes()
        parent = os.path.dirname(os.path.abspath(partition.log.dir))
        by_dir.setdefault(parent, {}).setdefault(name, []).append(
            {"partition_index": p, "partition_size": size, "offset_lag": 0, "is_future_key": False})
    results = []
    for d, topics in by_dir.items():
        result = {"error_code": 0, "log_dir": d,
                  "topics": [{"name": n, "partitions": parts} for n, parts in sorted(topics.items())],
                  "total_bytes": -1, "usable_bytes": -1}
        if broker.replica_manager.log_manager.failure_channel.is_offline(d):
            # Kafka's describeLogDirs for an offline dir: the error, no partitions.
            result.update(error_code=ErrorCode.KAFKA_STORAGE_ERROR, topics=[])
            results.append(result)
            continue
        try:
            st = os.statvfs(d)
            result.update(total_bytes=st.f_blocks * st.f_frsize, usable_bytes=st.f_bavail * st.f_frsize)
        except OSError:
            result.update(error_code=ErrorCode.KAFKA_STORAGE_ERROR, topics=[])
        results.append(result)
    return construct(ctx.response_class(), {"throttle_time": 0, "error_code": 0, "results": results})
