"""The controller's requests reaching a real broker (issue 15): one kafkapy
broker started through its real entry point in cluster mode (a real
ZooKeeper for membership), the test acting as the controller. It sends
UpdateMetadata v8, LeaderAndIsr v7 and StopReplica v4 by hand
(kafkapy.protocol.codec over a socket, request header v2) with a controller
epoch above any elected controller's, so only the test moves roles; then
Produce, Fetch, ListOffsets and Metadata requests show what they did:

* before LeaderAndIsr the broker serves nothing (NOT_LEADER_OR_FOLLOWER);
* the partition it leads accepts a produce and serves it; the one it
  follows, and the one another broker hosts, answer NOT_LEADER_OR_FOLLOWER;
* Metadata answers the brokers, controller, leaders, ISR and offline
  replicas UpdateMetadata said;
* an older controller epoch is refused (STALE_CONTROLLER_EPOCH);
* after a restart the logs are back but no role is assumed until the next
  LeaderAndIsr, which finds the records where they were;
* StopReplica with delete removes the partition's log.
"""

from __future__ import annotations

import datetime
import socket
import struct
import time
import uuid

import pytest

from kafkapy._core.records_py import build_batch
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.protocol.errors import ErrorCode
from support.broker import free_port
from support.wait import wait_for
from support.zookeeper import chroot_for

ME, OTHER, GONE = 1, 2, 3
CONTROLLER_EPOCH = 1000  # above any elected controller's
TOPIC = "inter-broker"
TOPIC_ID = uuid.UUID("5d6f3a1e-2b4c-4e8f-9a0b-1c2d3e4f5a6b")
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6


class Connection:
    """One blocking connection speaking flexible versions (header v2, response header v1)."""

    def __init__(self, port: int, timeout_s: float = 10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.correlation_id = 0

    def call(self, api_key: int, values: dict, version: int | None = None):
        spec = API_TABLE[api_key]
        version = spec.max_version if version is None else version
        assert spec.is_flexible(version)
        self.correlation_id += 1
        client_id = b"kafkapy-controller-test"
        header = struct.pack(">hhih", api_key, version, self.correlation_id, len(client_id)) + client_id + b"\0"
        payload = header + encode_to_bytes(construct(spec.request_class(version), values))
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._recv(4))[0]
        frame = self._recv(size)
        assert struct.unpack(">i", frame[:4])[0] == self.correlation_id and frame[4] == 0
        response, _ = decode(spec.response_class(version), frame, 5)
        return response

    def _recv(self, n: int) -> bytes:
        data = b""
        while len(data) < n:  # bounded by the socket timeout
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def broker(zookeeper, broker_factory, request):
    return broker_factory({"zookeeper.connect": zookeeper.connect_string(chroot_for(request)),
                           "broker.id": ME, "zookeeper.session.timeout.ms": 4000})


# The test's cluster: broker 1 (the real one) leads p0 and follows broker 2 on
# p1; p2 lives on brokers 2 and 3 only; broker 3 is down (offline replica).
STATES = [(0, ME, 1, (ME,), (ME,), 0), (1, OTHER, 1, (OTHER, ME), (OTHER, ME), 0),
          (2, OTHER, 1, (OTHER,), (OTHER, GONE), 0)]


def _update_metadata(broker, other_port, states, controller_epoch=CONTROLLER_EPOCH):
    def endpoint(port):
        return [{"port": port, "host": "127.0.0.1", "listener": "PLAINTEXT", "security_protocol": 0}]

    return {"controller_id": OTHER, "controller_epoch": controller_epoch,
            "topic_states": [{"topic_name": TOPIC, "topic_id": TOPIC_ID, "partition_states": [
                {"partition_index": p, "controller_epoch": controller_epoch, "leader": leader,
                 "leader_epoch": epoch, "isr": isr, "zk_version": pe, "replicas": replicas, "offline_replicas": ()}
                for p, leader, epoch, isr, replicas, pe in states]}],
            "live_brokers": [{"id": ME, "endpoints": endpoint(broker.port), "rack": None},
                             {"id": OTHER, "endpoints": endpoint(other_port), "rack": "r2"}]}


def _leader_and_isr(other_port, states, controller_epoch=CONTROLLER_EPOCH):
    mine = [s for s in states if ME in s[4]]
    return {"controller_id": OTHER, "controller_epoch": controller_epoch,
            "topic_states": [{"topic_name": TOPIC, "topic_id": TOPIC_ID, "partition_states": [
                {"partition_index": p, "controller_epoch": controller_epoch, "leader": leader, "leader_epoch": epoch,
                 "isr": isr, "partition_epoch": pe, "replicas": replicas} for p, leader, epoch, isr, replicas, pe
                in mine]}],
            "live_leaders": [{"broker_id": OTHER, "host_name": "127.0.0.1", "port": other_port},
                             {"broker_id": ME, "host_name": "127.0.0.1", "port": 0}]}


def _produce(conn, partition, n=1):
    batch = build_batch([(b"k", b"v%d" % i, [], int(time.time() * 1000)) for i in range(n)])
    response = conn.call(PRODUCE, {"transactional_id": None, "acks": 1, "timeout": datetime.timedelta(seconds=5),
                                   "topic_data": [{"name": TOPIC, "partition_data": [
                                       {"index": partition, "records": batch}]}]}, version=9)
    p = response.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def _fetch(conn, partition, offset=0):
    response = conn.call(FETCH, {"max_wait": datetime.timedelta(0), "min_bytes": 0, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": partition, "fetch_offset": offset,
                                         "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": []},
        version=12)
    p = response.responses[0].partitions[0]
    return p.error_code, p.high_watermark, bytes(p.records or b"")


def _latest(conn, partition):
    response = conn.call(LIST_OFFSETS, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": partition, "timestamp": -1}]}]}, version=7)
    p = response.topics[0].partitions[0]
    return p.error_code, p.offset


def _errors(response):
    return {p.partition_index: p.error_code for t in response.topics for p in t.partition_errors}


def test_controller_requests_drive_what_the_broker_serves(broker):
    other_port = free_port()  # broker 2's listener: nothing there (its fetches just back off)
    conn = Connection(broker.port)
    try:
        assert conn.call(UPDATE_METADATA, _update_metadata(broker, other_port, STATES)).error_code == 0
        # The image lists the partitions, but no role is given yet.
        assert _produce(conn, 0)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        response = conn.call(LEADER_AND_ISR, _leader_and_isr(other_port, STATES))
        assert response.error_code == 0 and _errors(response) == {0: 0, 1: 0}
        assert (broker.log_dirs[0] / f"{TOPIC}-0").is_dir() and (broker.log_dirs[0] / f"{TOPIC}-1").is_dir()
        assert not (broker.log_dirs[0] / f"{TOPIC}-2").exists()
        # Cluster mode forks the fetchers; the child logs once it runs.
        wait_for(lambda: "replica fetcher 0 started" in broker.log_text(), 30, "the replica fetcher's start")
        # The leader accepts and serves; the follower and the partition
        # another broker hosts send the client elsewhere.
        assert _produce(conn, 0, 3) == (ErrorCode.NONE, 0)
        assert _produce(conn, 0, 2) == (ErrorCode.NONE, 3)
        code, high_watermark, records = _fetch(conn, 0)
        assert (code, high_watermark) == (ErrorCode.NONE, 5) and b"v1" in records
        assert _latest(conn, 0) == (ErrorCode.NONE, 5)
        for partition in (1, 2):
            assert _produce(conn, partition)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert _fetch(conn, partition)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert _latest(conn, 1)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # Metadata answers what UpdateMetadata said.
        md = conn.call(METADATA, {"topics": [{"name": TOPIC, "topic_id": None}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False}, version=12)
        assert md.controller_id == OTHER
        assert sorted((b.node_id, b.port, b.rack) for b in md.brokers) == [
            (ME, broker.port, None), (OTHER, other_port, "r2")]
        [topic] = md.topics
        assert (topic.error_code, topic.topic_id) == (0, TOPIC_ID)
        parts = {p.partition_index: (p.leader_id, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes),
                                     tuple(p.offline_replicas)) for p in topic.partitions}
        assert parts == {0: (ME, 1, (ME,), (ME,), ()), 1: (OTHER, 1, (OTHER, ME), (OTHER, ME), ()),
                         2: (OTHER, 1, (OTHER, GONE), (OTHER,), (GONE,))}
        # An older controller is refused, and changes nothing.
        stale = [(0, OTHER, 5, (OTHER,), (ME, OTHER), 5)]
        assert conn.call(UPDATE_METADATA, _update_metadata(broker, other_port, stale, 999)).error_code == \
            ErrorCode.STALE_CONTROLLER_EPOCH
        response = conn.call(LEADER_AND_ISR, _leader_and_isr(other_port, stale, 999))
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert _produce(conn, 0) == (ErrorCode.NONE, 5)
    finally:
        conn.close()

    # A restart: the logs come back with their slots, but no role is assumed.
    broker.restart()
    conn = Connection(broker.port)
    try:
        assert _produce(conn, 0)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # Nor does Metadata repeat what the image said before the restart: as
        # Kafka's empty metadata cache, no brokers, no controller, no leaders
        # until the controller's UpdateMetadata.
        md = conn.call(METADATA, {"topics": [{"name": TOPIC, "topic_id": None}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False}, version=12)
        assert (md.controller_id, list(md.brokers)) == (-1, [])
        assert {p.leader_id for t in md.topics for p in t.partitions} <= {-1}
        again = [(0, ME, 2, (ME,), (ME,), 1)]
        response = conn.call(LEADER_AND_ISR, _leader_and_isr(other_port, again))
        assert _errors(response) == {0: 0}
        assert _latest(conn, 0) == (ErrorCode.NONE, 6)  # everything produced before the restart
        assert _produce(conn, 0) == (ErrorCode.NONE, 6)
        # Topic deletion: StopReplica with delete takes the log away.
        response = conn.call(STOP_REPLICA, {"controller_id": OTHER, "controller_epoch": CONTROLLER_EPOCH,
                                            "topic_states": [{"topic_name": TOPIC, "partition_states": [
                                                {"partition_index": p, "leader_epoch": -2,
                                                 "delete_partition": True} for p in (0, 1)]}]})
        assert response.error_code == 0 and [e.error_code for e in response.partition_errors] == [0, 0]
        assert not (broker.log_dirs[0] / f"{TOPIC}-0").exists()
        assert _produce(conn, 0)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        conn.close()
