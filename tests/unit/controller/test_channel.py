"""The controller's channel to a broker (Kafka's ControllerChannelManager)
against a small real TCP peer on 127.0.0.1 that decodes each request with
kafkapy's codec and answers it: request header v2 with the controller's
client id, answers in order to the callbacks, a refused connection and a
connection closed before the answer retried with back-off, a removed broker's
queue dropped."""

from __future__ import annotations

import socket
import struct
import threading
import time

from kafkapy.metadata.model import BrokerInfo, EndPoint
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, read_unsigned_varint
from kafkapy.protocol.entities import construct
from kafkapy.protocol.headers import encode_response
from kafkapy.controller.channel_manager import STOP_REPLICA, UPDATE_METADATA, ControllerChannelManager, endpoint_for
from kafkapy.server.controller_channel import CONTROLLED_SHUTDOWN, LocalDoor, ask_controller, controlled_shutdown
from support.wait import wait_for


def _recv(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError
        data += chunk
    return data


class Peer:
    """Answers UpdateMetadata/StopReplica; ``drop_first`` closes the first
    connection after reading one request, without answering."""

    def __init__(self, port=0, drop_first=False, answer=True):
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.drop_first = drop_first
        self.answer = answer
        self.seen = []  # (api_key, version, client_id, request)
        self.remaining_answers = 0  # ControlledShutdown answers listing a partition still led
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():  # bounded by close()
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.settimeout(5)
            try:
                while not self.stop.is_set():
                    size = struct.unpack(">i", _recv(conn, 4))[0]
                    frame = _recv(conn, size)
                    api_key, version, correlation_id, n = struct.unpack_from(">hhih", frame)
                    client_id = frame[10:10 + n].decode()
                    tags, offset = read_unsigned_varint(frame, 10 + n)
                    assert tags == 0
                    spec = API_TABLE[api_key]
                    request, _ = decode(spec.request_class(version), frame, offset)
                    self.seen.append((api_key, version, client_id, request))
                    if self.drop_first and self.connections == 1:
                        break
                    if not self.answer:
                        continue
                    body = {"error_code": 0}
                    if api_key == CONTROLLED_SHUTDOWN and len(self.seen) <= self.remaining_answers:
                        body["remaining_partitions"] = [{"topic_name": "t", "partition_index": 0}]
                    if api_key == STOP_REPLICA:
                        body["partition_errors"] = [{"topic_name": t.topic_name, "partition_index": p.partition_index,
                                                     "error_code": 0} for t in request.topic_states
                                                    for p in t.partition_states]
                    response = construct(spec.response_class(version), body)
                    conn.sendall(b"".join(bytes(p) for p in encode_response(correlation_id, response, True)))
            except (ConnectionError, OSError):
                pass
            finally:
                conn.close()

    def close(self):
        self.stop.set()
        self.listener.close()
        self.thread.join(5)


def _broker(port, broker_id=1):
    return BrokerInfo(broker_id, "127.0.0.1", 1, None, (EndPoint("127.0.0.1", 1, "EXTERNAL"),
                                                        EndPoint("127.0.0.1", port, "INTERNAL")))


def _update_metadata(epoch):
    return {"controller_id": 7, "controller_epoch": epoch, "topic_states": [], "live_brokers": []}


def test_endpoint_of_the_inter_broker_listener():
    info = _broker(9093)
    assert endpoint_for(info, "INTERNAL") == ("127.0.0.1", 9093)
    assert endpoint_for(info, "OTHER") is None
    assert endpoint_for(BrokerInfo(2, "h", 5), "INTERNAL") == ("h", 5)


def test_requests_go_in_order_with_header_v2_and_answers_reach_the_callbacks():
    peer = Peer()
    channel = ControllerChannelManager(7, "INTERNAL", 5000)
    answers = []
    try:
        channel.add_broker(_broker(peer.port))
        for epoch in (1, 2, 3):
            assert channel.send(1, UPDATE_METADATA, _update_metadata(epoch), answers.append)
        stop = {"controller_id": 7, "controller_epoch": 3, "topic_states": [
            {"topic_name": "t", "partition_states": [{"partition_index": 0, "leader_epoch": -2,
                                                      "delete_partition": True}]}]}
        channel.send(1, STOP_REPLICA, stop, answers.append)
        wait_for(lambda: len(answers) == 4, 10, "four answers", 0.02)
        assert [(k, v, c) for k, v, c, _ in peer.seen] == [(6, 8, "kafkapy-controller-7")] * 3 + [
            (5, 4, "kafkapy-controller-7")]
        assert [r.controller_epoch for _, _, _, r in peer.seen] == [1, 2, 3, 3]
        assert answers[3].partition_errors[0].topic_name == "t" and peer.connections == 1
        assert not channel.send(2, UPDATE_METADATA, _update_metadata(1))  # not a live broker
    finally:
        channel.shutdown()
        peer.close()


def test_a_refused_and_a_dropped_connection_are_retried():
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there yet
    channel = ControllerChannelManager(7, "INTERNAL", 5000)
    answers = []
    peer = None
    try:
        channel.add_broker(_broker(port))
        channel.send(1, UPDATE_METADATA, _update_metadata(1), answers.append)
        time.sleep(0.3)  # a few refused attempts
        assert answers == []
        peer = Peer(port, drop_first=True)
        wait_for(lambda: len(answers) == 1, 10, "an answer", 0.02)
        # The first connection was closed without an answer: sent again on a second one.
        assert peer.connections == 2 and len(peer.seen) == 2
    finally:
        channel.shutdown()
        if peer is not None:
            peer.close()


def test_a_removed_broker_drops_its_queue():
    peer = Peer(answer=False)
    channel = ControllerChannelManager(7, "INTERNAL", 5000)
    answers = []
    try:
        channel.add_broker(_broker(peer.port))
        for epoch in (1, 2, 3):
            channel.send(1, UPDATE_METADATA, _update_metadata(epoch), answers.append)
        wait_for(lambda: len(peer.seen) == 1, 10, "a request", 0.02)  # one in flight, unanswered
        sender = channel.brokers[1]
        channel.remove_broker(1)
        sender.join(5)
        assert not sender.thread.is_alive() and not sender.queue
        assert answers == [] and len(peer.seen) == 1
    finally:
        channel.shutdown()
        peer.close()


class _Config(dict):
    inter_broker_listener_name = "INTERNAL"

    def __init__(self, log_dir="/tmp/kafkapy-test-door", **values):
        super().__init__({"controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": 500,
                          "request.timeout.ms": 5000, **values})
        self.log_dirs = [log_dir]


class _Metadata:
    def __init__(self, brokers, controller_id):
        self.brokers, self.controller_id = brokers, controller_id


def test_controlled_shutdown_tries_again_while_partitions_remain():
    peer = Peer()
    peer.remaining_answers = 1
    sleeps = []
    try:
        md = _Metadata({7: _broker(peer.port, 7)}, 7)
        assert controlled_shutdown(_Config(), 3, lambda: md, sleep=sleeps.append) is True
        assert [(k, v, r.broker_id, r.broker_epoch) for k, v, _c, r in peer.seen] == [(7, 3, 3, -1)] * 2
        assert sleeps == [0.5]  # one back-off, after the answer that listed t-0
    finally:
        peer.close()
    # no controller known: max.retries tries, a back-off between each, then False
    sleeps.clear()
    assert controlled_shutdown(_Config(), 3, lambda: _Metadata({}, -1), sleep=sleeps.append) is False
    assert sleeps == [0.5, 0.5]


def test_local_door_round_trip(tmp_path):
    config = _Config(log_dir=str(tmp_path))
    assert ask_controller(config, ("ping", 1000), 2) == ("not_controller",)  # no door open
    door = LocalDoor(config, lambda message: ("echo",) + tuple(message)).start()
    try:
        assert ask_controller(config, ("elect_leaders", True, [["t", 0]], 1000), 2) == \
            ("echo", "elect_leaders", True, [["t", 0]], 1000)
    finally:
        door.stop()
