"""kafkapy's ZooKeeper client against a real ZooKeeper (Debian's, started by
the harness): chroot creation, Kafka's persistent paths, /cluster/id created
once, broker registration (ephemeral, a duplicate id refused, gone with the
session), and controller election fenced by /controller_epoch's version."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest

from kafkapy.metadata.zk import data as zk_data
from kafkapy.metadata.model import BrokerInfo, EndPoint
from kafkapy.metadata.zk.client import BrokerIdInUse, ZkClient


def _broker(broker_id, port=9092):
    ep = EndPoint("127.0.0.1", port)
    return BrokerInfo(broker_id, "127.0.0.1", port, None, (ep,))


def _client(server, chroot, session_ms=4000):
    return ZkClient(server.connect_string(chroot), session_timeout_ms=session_ms).connect()


def test_chroot_paths_and_cluster_id(zookeeper):
    a = _client(zookeeper, "/kp1")
    b = _client(zookeeper, "/kp1")
    try:
        for path in zk_data.PERSISTENT_PATHS:
            assert a.zk.exists(path) is not None, path
        raw = zookeeper.client()
        try:
            assert raw.exists("/kp1/brokers/ids") is not None  # under the chroot
        finally:
            raw.stop()
            raw.close()
        first = a.get_or_create_cluster_id(lambda: "cluster-A")
        second = b.get_or_create_cluster_id(lambda: "cluster-B")
        assert first == second == "cluster-A"
        data, _ = a.zk.get("/cluster/id")
        assert zk_data.decode_cluster_id(data) == "cluster-A"
    finally:
        a.close()
        b.close()


def test_registration_is_ephemeral_and_unique(zookeeper):
    a = _client(zookeeper, "/kp2")
    b = _client(zookeeper, "/kp2")
    try:
        a.register_broker(_broker(1, 9101), timestamp_ms=1234)
        a.register_broker(_broker(1, 9101))  # the same session again: kept
        data, stat = a.zk.get(zk_data.broker_path(1))
        reg = zk_data.decode_broker_registration(1, data)
        assert (reg.broker.host, reg.broker.port, stat.ephemeralOwner) == ("127.0.0.1", 9101, a.session_id)
        with pytest.raises(BrokerIdInUse, match="broker id 1 is already registered"):
            b.register_broker(_broker(1, 9102))
        b.register_broker(_broker(2, 9102))
        assert sorted(b.live_brokers()) == [1, 2]
    finally:
        a.close()
    try:
        # a's session closed: its ephemeral registration is gone, 1 may register again.
        assert sorted(b.live_brokers()) == [2]
        b.register_broker(_broker(1, 9103))
    finally:
        b.close()


def test_registering_again_waits_for_the_old_sessions_node_to_go(zookeeper):
    # A kafkapy-chaos run paused the whole ensemble past the session timeout:
    # each broker saw its session expire and registered again in a new one
    # while ZooKeeper had not yet expired the old session (it does so only
    # after resuming), so its own old /brokers/ids/<id> was still there. That
    # was BrokerIdInUse and the controller process's exit, three brokers of
    # four gone. Registering again now waits for the old node to go.
    old = _client(zookeeper, "/kp9")
    new = _client(zookeeper, "/kp9")
    try:
        old.register_broker(_broker(1, 9101))
        with pytest.raises(BrokerIdInUse):
            new.register_broker(_broker(1, 9101))  # no wait: refused at once, as at startup
        closer = threading.Timer(1.0, old.close)  # the old session ends a second later
        closer.start()
        began = time.monotonic()
        new.register_broker(_broker(1, 9101), wait_s=20.0)
        closer.join(5)
        _, stat = new.zk.get(zk_data.broker_path(1))
        assert stat.ephemeralOwner == new.session_id and 0.5 < time.monotonic() - began < 20
        with pytest.raises(BrokerIdInUse):  # still refused once the wait is spent
            old2 = _client(zookeeper, "/kp9")
            try:
                old2.register_broker(_broker(1, 9101), wait_s=1.0)
            finally:
                old2.close()
    finally:
        old.close()
        new.close()


def test_one_controller_at_a_time_and_the_epoch_fence(zookeeper):
    a = _client(zookeeper, "/kp3")
    b = _client(zookeeper, "/kp3")
    try:
        won = a.try_elect_controller(1)
        assert (won.elected, won.controller_id, won.controller_epoch) == (True, 1, 1)
        lost = b.try_elect_controller(2)
        assert (lost.elected, lost.controller_id, lost.controller_epoch) == (False, 1, 1)
        data, _ = b.zk.get("/controller")
        assert zk_data.decode_controller(data).broker_id == 1
        # The controller goes (its session ends): the next one bumps the epoch.
        events = []
        b.watch_controller(events.append)
        a.close()
        deadline = time.monotonic() + 10
        while b.controller_id() != -1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b.controller_id() == -1
        second = b.try_elect_controller(2)
        assert (second.elected, second.controller_epoch) == (True, 2)
        # A stale contender that read epoch 2's version cannot win: the znode
        # version moved with the write.
        _, version = b.controller_epoch()
        b.zk.delete("/controller")
        b.zk.set("/controller_epoch", zk_data.encode_controller_epoch(7), version=version)
        third = b.try_elect_controller(3)
        assert (third.elected, third.controller_epoch) == (True, 8)
        assert events, "the controller watch never fired"
    finally:
        a.close()
        b.close()


def test_unknown_host_fails_within_the_connection_timeout():
    client = ZkClient(f"127.0.0.1:1/{uuid.uuid4().hex}", session_timeout_ms=2000, connection_timeout_ms=1000)
    started = time.monotonic()
    with pytest.raises(Exception):
        client.connect()
    assert time.monotonic() - started < 10
    client.close()


class _Gate:
    """A TCP forwarder from a loopback port to ZooKeeper that can be shut
    (connections reset, new ones refused) and opened again on the same port:
    an outage with no ZooKeeper restart in it (a restarting ZooKeeper takes
    connections before it serves them, and a client caught in that window
    waits out its connect timeout whatever its retry policy)."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.port = 0
        self.listener = None
        self.sockets: list = []
        self.threads: list = []
        self.open()

    def open(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        t = threading.Thread(target=self._accept, args=(self.listener,), daemon=True)
        self.threads.append(t)
        t.start()

    def shut(self) -> None:
        listener, self.listener = self.listener, None
        for s in [listener, *self.sockets]:
            try:
                s.close()
            except OSError:
                pass
        self.sockets = []
        for t in self.threads:
            t.join(5)
        self.threads = []

    def _accept(self, listener) -> None:
        while self.listener is listener:  # until shut
            try:
                client, _ = listener.accept()
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                continue
            self.sockets += [client, server]
            for src, dst in ((client, server), (server, client)):
                t = threading.Thread(target=self._pump, args=(src, dst, listener), daemon=True)
                self.threads.append(t)
                t.start()

    def _pump(self, src, dst, listener) -> None:
        src.settimeout(0.2)
        while self.listener is listener:  # until shut
            try:
                chunk = src.recv(1 << 16)
            except socket.timeout:
                continue
            except OSError:
                return
            if not chunk:
                return
            try:
                dst.sendall(chunk)
            except OSError:
                return


def _cut_client(server, chroot: str, session_ms: int):
    """``(gate, client, its session id)``: a client connected through a ``_Gate``,
    the gate shut and the client seen disconnected (the caller opens it again
    and closes both)."""
    from kazoo.client import KazooState

    from support.wait import wait_for

    gate = _Gate(server.port)
    client = ZkClient(f"127.0.0.1:{gate.port}{chroot}", session_timeout_ms=session_ms).connect()
    session = client.session_id
    gate.shut()
    wait_for(lambda: client.zk.state != KazooState.CONNECTED, 10, "the client to see the connection go")
    return gate, client, session


def test_a_lost_connection_is_tried_again_at_most_about_a_second_apart(zookeeper_factory):
    """ZooKeeper's Java client (Kafka's) sleeps a random 0-1 s between
    reconnection attempts; kazoo's default doubles its sleep (6.4 s after 7 s
    without a server, up to an hour), so a broker came back seconds after
    ZooKeeper did (minutes after a long outage) and a restored session could
    expire meanwhile. After 15 s of refused connections, kafkapy's client is
    connected again within ~1 s of the server being reachable (2.5 s allowed
    for a loaded machine), on the same session."""
    from kazoo.client import KazooState

    from support.wait import wait_for

    zookeeper = zookeeper_factory(tick_time_ms=4000)  # sessions up to 80 s: this one outlives the outage
    gate, client, session = _cut_client(zookeeper, "/reconnect", 40000)
    try:
        time.sleep(15)  # kazoo's default sleeps would be 6.4 s then 12.8 s (x0.6-1.4) by now
        gate.open()
        back = time.monotonic()
        wait_for(lambda: client.zk.state == KazooState.CONNECTED, 20, "the client connected again")
        waited = time.monotonic() - back
        assert waited < 2.5, f"connected again {waited:.1f} s after the server was reachable"
        assert client.session_id == session
    finally:
        client.close()
        gate.shut()


def test_an_admin_request_held_across_a_session_expiry_is_sent_again_on_the_new_session(zookeeper):
    """A request made while ZooKeeper is unreachable waits in kazoo; when the
    connection comes back after the session timeout, the server refuses the
    old session and kazoo fails what it held with SessionExpiredError. The
    admin path (``until_connected``) sends it again on kazoo's new session:
    the write lands, it does not fail with UNKNOWN_SERVER_ERROR."""
    gate, client, session = _cut_client(zookeeper, "/expiry", 4000)
    try:
        result = {}

        def admin_write():
            try:
                result["path"] = client.until_connected(lambda: client.zk.create("/written", b"x"))
            except Exception as exc:  # the assertion below reports it
                result["error"] = exc

        writer = threading.Thread(target=admin_write, daemon=True)
        writer.start()
        time.sleep(4000 / 1000 + 2)  # past the session timeout: the server expires the session
        assert writer.is_alive(), f"the request did not wait for the connection: {result}"
        gate.open()
        writer.join(20)
        assert not writer.is_alive(), "the request was not answered after the connection came back"
        assert result == {"path": "/written"}, result
        assert client.session_id != session  # it landed on a new session
        assert client.zk.get("/written")[0] == b"x"
    finally:
        client.close()
        gate.shut()
