"""The replica fetcher's network side against real peers: a real broker's
Fetch v12 and ListOffsets over TCP (the answers decoded by the fetcher's
own connection), and leaders that refuse connections, never answer, or
negotiate and then leave a Fetch unanswered, each ending in a bounded
back-off instead of a stuck loop.

The real broker here is a standalone one (broker 0 leads every partition
with itself as the only replica), so a follower fetch from broker 1 is
answered as Kafka answers a replica it does not know with its leader epoch
sent: UNKNOWN_LEADER_EPOCH, retried after replica.fetch.backoff.ms."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from types import SimpleNamespace

import pytest

from kafkapy.metadata.model import BrokerInfo, EndPoint, Metadata, PartitionState, TopicInfo
from kafkapy.protocol.codec import encode_to_bytes
from kafkapy.replication.partition import Partition
from kafkapy.server.config import BrokerConfig
from kafkapy.server.handlers.api_versions import build_response
from kafkapy.server.replica_fetcher import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ReplicaFetcher
from kafkapy.storage.shared import SharedPartitionTable

from support.storage import open_log

confluent_kafka = pytest.importorskip("confluent_kafka")

LEADER, FOLLOWER = 0, 1
SOCKET_TIMEOUT_MS = 400


class Follower:
    """This side: a follower Partition on its own shared table, and what the
    fetcher reads from its broker."""

    def __init__(self, tmp_path, leader_port: int):
        tmp_path.mkdir(parents=True)
        self.table = SharedPartitionTable(capacity=16, lock_path=str(tmp_path / "partitions.lock"))
        slot = self.table.allocate()
        self.log = open_log(tmp_path / "t-0", state=self.table.slot(slot))
        self.partition = Partition("t", 0, None, self.log, slot, FOLLOWER, assume_leader=False)
        self.partition.make_follower(LEADER, 0, (LEADER, FOLLOWER), 0)
        md = Metadata(cluster_mode=True, brokers={LEADER: BrokerInfo(
            LEADER, "127.0.0.1", leader_port, None, (EndPoint("127.0.0.1", leader_port, "PLAINTEXT"),))})
        md.topics["t"] = TopicInfo("t", uuid.uuid4(), 1, {}, {0: PartitionState((LEADER, FOLLOWER), LEADER, 0,
                                                                                 (LEADER, FOLLOWER))})
        self.wakes = 0
        self.broker = SimpleNamespace(
            broker_id=FOLLOWER, metadata=lambda: md, store=SimpleNamespace(generation=1),
            replica_manager=SimpleNamespace(get_partition=lambda t, p: self.partition if (t, p) == ("t", 0)
                                            else None, wake_delayed_operations=self._wake))
        config = BrokerConfig.from_props({
            "log.dirs": str(tmp_path / "cfg"), "broker.id": FOLLOWER, "replica.fetch.wait.max.ms": 100,
            "replica.fetch.backoff.ms": 1000, "replica.socket.timeout.ms": SOCKET_TIMEOUT_MS})
        self.fetcher = ReplicaFetcher(0, self.broker, config)

    def _wake(self, slots=None):
        self.wakes += 1

    def state(self):
        return self.fetcher.states[("t", 0)]

    def close(self):
        self.fetcher.close()
        self.log.close()
        self.table.close()


@pytest.fixture
def follower_of(tmp_path):
    made = []

    def make(port):
        f = Follower(tmp_path / f"f{len(made)}", port)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


def _run_until(fetcher, predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # bounded by the deadline
        fetcher.run_once(timeout_s=0.1)
        if predicate():
            return
    raise AssertionError("timed out")


def test_fetch_and_list_offsets_over_tcp_from_a_real_broker(broker, follower_of):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(20)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(3):
        producer.produce("t", value=b"v%d" % i, partition=0)
    assert producer.flush(20) == 0

    f = follower_of(broker.port)
    started = time.monotonic()
    _run_until(f.fetcher, lambda: f.state().delayed_until > 0)
    # The leader answered (UNKNOWN_LEADER_EPOCH: broker 1 is not its replica),
    # so the partition backs off; nothing was appended, the connection stays.
    assert f.state().delayed_until - started >= 0.9
    assert f.partition.log_end_offset == 0 and f.wakes == 0
    endpoint = f.fetcher.endpoints[LEADER]
    assert endpoint.conn.connected and not f.fetcher.in_flight
    assert endpoint.conn.version(1) == 12  # Fetch v12 negotiated
    # Kafka's fetchLatestOffset / fetchEarliestOffset: ListOffsets as replica 1.
    assert endpoint.fetch_offset("t", 0, 0, LATEST_TIMESTAMP) == 3
    assert endpoint.fetch_offset("t", 0, 0, EARLIEST_TIMESTAMP) == 0
    # Within the back-off nothing more is sent.
    f.fetcher.run_once(timeout_s=0.1)
    assert not f.fetcher.in_flight


def test_a_refusing_leader_backs_off(follower_of):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once closed
    f = follower_of(port)
    started = time.monotonic()
    f.fetcher.run_once(timeout_s=0.1)
    assert time.monotonic() - started < 2
    assert f.state().delayed_until >= started + 1.0
    assert not f.fetcher.endpoints[LEADER].conn.connected


def test_a_silent_leader_is_given_up_within_the_socket_timeout(follower_of):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)  # connects succeed; nothing is ever answered
        f = follower_of(server.getsockname()[1])
        started = time.monotonic()
        f.fetcher.run_once(timeout_s=0.1)
        elapsed = time.monotonic() - started
        assert SOCKET_TIMEOUT_MS / 1000 * 0.9 <= elapsed < 3
        assert f.state().delayed_until >= started + 1.0
        assert not f.fetcher.endpoints[LEADER].conn.connected


class AnswersOnlyApiVersions:
    """A peer that negotiates (ApiVersions answered as the server would) and
    then never answers: a leader hung after the fetcher's request went out."""

    def __init__(self):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(4)
        self.port = self.server.getsockname()[1]
        self.requests = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.server.settimeout(10)
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        conn.settimeout(10)
        with conn:
            while True:  # bounded: the socket times out or the test closes it
                try:
                    size = int.from_bytes(_read(conn, 4), "big")
                    frame = _read(conn, size)
                except (OSError, ConnectionError):
                    return
                api_key, version, correlation_id = struct.unpack(">hhi", frame[:8])
                self.requests.append(api_key)
                if api_key == 18:
                    body = encode_to_bytes(build_response(version))
                    reply = struct.pack(">i", correlation_id) + body  # ApiVersions: header v0
                    conn.sendall(struct.pack(">i", len(reply)) + reply)

    def close(self):
        self.server.close()


def _read(conn, n):
    out = bytearray()
    while len(out) < n:
        chunk = conn.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def test_a_fetch_left_unanswered_is_abandoned_after_wait_plus_socket_timeout(follower_of):
    peer = AnswersOnlyApiVersions()
    try:
        f = follower_of(peer.port)
        started = time.monotonic()
        _run_until(f.fetcher, lambda: f.state().delayed_until > 0)
        elapsed = time.monotonic() - started
        assert peer.requests == [18, 1]  # negotiated, then one Fetch never answered
        # replica.fetch.wait.max.ms (100) + replica.socket.timeout.ms (400), one tick late at most
        assert 0.5 <= elapsed < 2
        assert not f.fetcher.endpoints[LEADER].conn.connected and not f.fetcher.in_flight
    finally:
        peer.close()
