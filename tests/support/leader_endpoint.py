"""A replica fetcher's leader end point answered in-process: the leader's real
Fetch and ListOffsets handlers behind the codec (requests built and encoded,
answers encoded and decoded, record data read from the leader's segment files
as sendfile would send it), for the replica fetcher's unit tests.

``cluster`` is the test's namespace: ``leader_rm`` (the leader's
``ReplicaManager``), ``endpoints`` (each end point made is appended) and
``fetches`` (each Fetch request's values are appended).

Ownership: an ``InProcessLeader`` and its fetch session cache belong to the
one test thread that drives its fetcher.
"""

from types import SimpleNamespace

from kafkapy.client._schema import build
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import Parts, decode, encode
from kafkapy.server.fetch_session import FetchSessionCache
from kafkapy.server.handlers import RequestContext
from kafkapy.server.handlers import fetch as fetch_handler
from kafkapy.server.handlers import list_offsets as list_offsets_handler
from kafkapy.server.replica_fetcher import PartitionError

LEADER, FOLLOWER = 0, 1


class ReplicaManager:
    """The handlers' ReplicaManager: a partition by (topic, index), and a count of wakes."""

    def __init__(self, partitions):
        self.partitions = partitions  # (topic, index) -> Partition
        self.wakes = 0

    def get_partition(self, topic, index):
        return self.partitions.get((topic, index))

    def wake_delayed_operations(self, slots=None, high_watermark_only=False):
        self.wakes += 1


def materialize(parts) -> bytes:
    out = bytearray()
    for part in parts:
        if isinstance(part, (bytes, bytearray)):
            out += part
        else:  # a FileRegion: what the processor would sendfile
            with open(part.path, "rb") as f:
                f.seek(part.position)
                out += f.read(part.length)
    return bytes(out)


class InProcessLeader:
    """The fetcher's LeaderEndPoint, answered by the leader's handlers in-process."""

    def __init__(self, cluster, leader_id, address, client_id, broker_id, timeout_ms):
        self.cluster = cluster
        self.leader_id = leader_id
        self.address = address
        self.closed = 0
        # The leader's fetch session cache (the fetcher keeps a session per leader).
        self.fetch_sessions = FetchSessionCache(64, 120_000)
        cluster.endpoints.append(self)

    def _call(self, api_key, version, values):
        request = build(API_TABLE[api_key].request_class(version), values)
        ctx = RequestContext(SimpleNamespace(replica_manager=self.cluster.leader_rm,
                                             fetch_sessions=self.fetch_sessions), api_key, version, 1,
                             "f", 0)
        handler = fetch_handler if api_key == 1 else list_offsets_handler
        response = handler.handle(ctx, request)
        out = Parts()
        encode(response, out)
        decoded, _ = decode(API_TABLE[api_key].response_class(version), materialize(out.parts()), 0)
        return decoded

    def send_fetch(self, values, callback):
        self.cluster.fetches.append(values)
        callback(self._call(1, 12, values), None)

    def fetch_offset(self, topic, partition, current_leader_epoch, timestamp):
        values = {"replica_id": FOLLOWER, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "current_leader_epoch": current_leader_epoch,
             "timestamp": timestamp}]}]}
        p = self._call(2, 7, values).topics[0].partitions[0]
        if p.error_code:
            raise PartitionError(p.error_code)
        return p.offset

    def fileno(self):
        return -1

    def close(self):
        self.closed += 1


def batches(partition):
    """(base offset, partition leader epoch, bytes) of every batch."""
    with partition.lock():
        data = partition.read_records(partition.log_start_offset, 1 << 30)
        raw = materialize(data.regions) if data.size else b""
    out, position = [], 0
    while position < len(raw):
        size = 12 + int.from_bytes(raw[position + 8:position + 12], "big")
        batch = raw[position:position + size]
        out.append((int.from_bytes(batch[:8], "big"), int.from_bytes(batch[12:16], "big", signed=True), batch))
        position += size
    return out
