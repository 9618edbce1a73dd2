"""The harness itself: the raw client against an in-test socket server, and
BrokerProcess against a fake broker (tests/support/fake_broker.py)."""

import os
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path

import pytest

from support import rawclient
from support.broker import (BrokerProcess, BrokerStartError, error_lines, errors_since, free_port, process_group_members,
                            server_start_command)
from support.rawclient import ConnectionClosed, FrameTimeout, RawClient

FAKE = [sys.executable, str(Path(__file__).with_name("fake_broker.py"))]


class ScriptedServer:
    """Accepts one connection and runs ``script(conn)`` on it in a thread."""

    def __init__(self, script):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self._script = script
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.sock.settimeout(5)
        conn, _ = self.sock.accept()
        with conn:
            self._script(self, conn)

    def read(self, conn, n):
        conn.settimeout(5)
        while len(self.received) < n:
            chunk = conn.recv(65536)
            if not chunk:
                break
            self.received += chunk

    def close(self):
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def scripted():
    servers = []

    def make(script):
        server = ScriptedServer(script)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


# ---------------------------------------------------------------- encoding


def test_api_versions_v0_request_bytes():
    data = rawclient.api_versions_v0_request(7, client_id="ab")
    assert data == struct.pack(">ihhih", 12, 18, 0, 7, 2) + b"ab"
    assert rawclient.encode_request_header_v1(3, 1, 9, None) == struct.pack(">hhih", 3, 1, 9, -1)


def test_parse_api_versions_response():
    body = struct.pack(">hi", 0, 2) + struct.pack(">hhh", 0, 0, 9) + struct.pack(">hhh", 18, 0, 3)
    assert rawclient.parse_api_versions_v0_response(body) == (0, [(0, 0, 9), (18, 0, 3)])
    with pytest.raises(ValueError):
        rawclient.parse_api_versions_v0_response(struct.pack(">hi", 0, 5))


# ---------------------------------------------------------------- raw client


def test_frame_split_across_sends(scripted):
    def script(server, conn):
        server.read(conn, 4)
        frame = struct.pack(">i", 42) + b"payload"
        data = struct.pack(">i", len(frame)) + frame
        for i in range(len(data)):  # one byte at a time
            conn.sendall(data[i:i + 1])
            time.sleep(0.001)

    server = scripted(script)
    with RawClient("127.0.0.1", server.port) as client:
        client.send(b"ping")
        assert client.recv_response(42) == b"payload"


def test_two_frames_in_one_send(scripted):
    def script(server, conn):
        server.read(conn, 1)
        conn.sendall(struct.pack(">i", 4) + struct.pack(">i", 1) + struct.pack(">i", 4) + struct.pack(">i", 2))
        time.sleep(0.2)

    server = scripted(script)
    with RawClient("127.0.0.1", server.port) as client:
        client.send(b"x")
        assert client.recv_response(1) == b""
        assert client.recv_response(2) == b""


def test_request_round_trip_and_correlation_check(scripted):
    def script(server, conn):
        server.read(conn, 4)
        size = struct.unpack(">i", server.received[:4])[0]
        server.read(conn, 4 + size)
        api_key, version, correlation_id = struct.unpack_from(">hhi", server.received, 4)
        body = struct.pack(">ihi", correlation_id, 0, 1) + struct.pack(">hhh", api_key, version, 3)
        conn.sendall(struct.pack(">i", len(body)) + body)
        conn.sendall(struct.pack(">ii", 4, 999))  # an unexpected correlation id
        time.sleep(0.2)

    server = scripted(script)
    with RawClient("127.0.0.1", server.port) as client:
        assert client.api_versions() == (0, [(18, 0, 3)])
        with pytest.raises(ValueError, match="correlation id 999"):
            client.recv_response(2)


def test_timeout_when_nothing_arrives(scripted):
    server = scripted(lambda server, conn: time.sleep(0.5))
    with RawClient("127.0.0.1", server.port) as client:
        started = time.monotonic()
        with pytest.raises(FrameTimeout):
            client.recv_frame(timeout_s=0.2)
        assert time.monotonic() - started < 2
        assert client.wait_closed(timeout_s=0.05) is False


def test_closed_connection_detected(scripted):
    def script(server, conn):
        conn.sendall(struct.pack(">i", 10) + b"abc")  # a truncated frame, then close

    server = scripted(script)
    with RawClient("127.0.0.1", server.port) as client:
        with pytest.raises(ConnectionClosed) as exc:
            client.recv_frame(timeout_s=2)
        assert exc.value.partial == struct.pack(">i", 10) + b"abc"


def test_wait_closed(scripted):
    def script(server, conn):
        server.read(conn, 3)

    server = scripted(script)
    with RawClient("127.0.0.1", server.port) as client:
        client.send(b"bad")
        assert client.wait_closed(timeout_s=2) is True


def test_oversized_frame_refused(scripted):
    server = scripted(lambda server, conn: (conn.sendall(struct.pack(">i", 2**31 - 1)), time.sleep(0.2)))
    with RawClient("127.0.0.1", server.port) as client:
        with pytest.raises(ValueError, match="frame size"):
            client.recv_frame(timeout_s=2)


def test_probe_fails_fast_on_closed_port():
    assert rawclient.probe_api_versions("127.0.0.1", free_port(), timeout_s=0.5) is False


# ---------------------------------------------------------------- BrokerProcess


def test_free_port_is_bindable_and_outside_the_ephemeral_range():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    port = free_port()
    assert port < low  # no outgoing connection can take it
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_start_command_next_to_interpreter_or_module(tmp_path):
    argv, env = server_start_command(tmp_path / "p")
    script = Path(sys.executable).parent / "kafkapy-server-start"
    if script.exists():
        assert argv == [str(script), str(tmp_path / "p")]
    else:
        assert argv == [sys.executable, "-m", "kafkapy", str(tmp_path / "p")]
        assert "PYTHONPATH" in env


def test_properties_written_with_port_dirs_and_overrides(tmp_path):
    b = BrokerProcess(tmp_path, overrides={"num.io.threads": 2, "log.preallocate": True, "num.partitions": None},
                      command=FAKE)
    text = b.props_path.read_text()
    assert f"listeners=PLAINTEXT://127.0.0.1:{b.port}" in text
    assert f"advertised.listeners=PLAINTEXT://127.0.0.1:{b.port}" in text
    assert f"log.dirs={tmp_path / 'logs'}" in text
    assert "num.io.threads=2" in text and "log.preallocate=true" in text
    assert "num.partitions=" not in text
    assert "broker.id=0" in text  # from config/server.properties
    assert b.log_dirs == [tmp_path / "logs"]
    assert b.bootstrap == f"127.0.0.1:{b.port}"


def test_fake_broker_lifecycle(tmp_path):
    b = BrokerProcess(tmp_path, command=FAKE)
    try:
        b.start()
        assert b.running
        with RawClient.connect(b.bootstrap) as client:
            assert client.api_versions() == (0, [])
        first_pid = b.pid
        assert b.stop() == 0
        assert not b.running
        b.restart()
        assert b.pid != first_pid and b.running
        with RawClient.connect(b.bootstrap) as client:
            assert client.api_versions() == (0, [])
        assert b.kill() == -signal.SIGKILL
        assert "===== start 2" in b.log_text() and "fake broker starting" in b.log_text()
    finally:
        b.close()
    assert b.leaked == []


def test_start_failure_reports_log_tail(tmp_path):
    b = BrokerProcess(tmp_path, overrides={"fake.exit.code": 3}, command=FAKE)
    with pytest.raises(BrokerStartError, match="(?s)exited with code 3.*failing on purpose"):
        b.start()
    b.close()


def test_start_timeout(tmp_path):
    # A "broker" that never listens: `sleep`, given the props path as its argument.
    b = BrokerProcess(tmp_path, command=[sys.executable, "-c", "import time; time.sleep(30)"],
                      start_timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(BrokerStartError, match="not ready"):
        b.start()
    assert time.monotonic() - started < 10
    assert not b.running
    b.close()


def test_stop_timeout_kills(tmp_path):
    b = BrokerProcess(tmp_path, overrides={"fake.ignore.sigterm": "true"}, command=FAKE)
    b.start()
    with pytest.raises(AssertionError, match="did not exit"):
        b.stop(timeout=0.3)
    assert not b.running
    b.close()


def test_orphaned_child_is_detected_and_killed(tmp_path):
    b = BrokerProcess(tmp_path, overrides={"fake.orphan": "true"}, command=FAKE)
    b.child_exit_grace_s = 0.3
    b.start()
    pgid = b.pgid
    assert len(process_group_members(pgid)) == 2
    b.stop()
    assert b.leaked and "pid" in b.leaked[0]
    assert process_group_members(pgid) == []


def test_broker_factory_fixture(broker_factory):
    b1 = broker_factory(command=FAKE)
    b2 = broker_factory({"num.io.threads": 1}, command=FAKE)
    assert b1.port != b2.port and b1.running and b2.running
    assert b2.props["num.io.threads"] == "1"
    unstarted = broker_factory(start=False, command=FAKE)
    assert not unstarted.running


def test_process_group_members_sees_own_group():
    assert any(pid == os.getpid() for pid, _, _ in process_group_members(os.getpgrp()))


# ---------------------------------------------------------------- the real entry point


def test_real_broker_start_stop_restart(broker):
    """The harness against kafkapy-server-start: ready means ApiVersions answers;
    SIGTERM exits 0 within the bound; a restart reuses port and log dirs."""
    with RawClient.connect(broker.bootstrap) as client:
        error_code, apis = client.api_versions()
    assert error_code == 0 and any(api_key == 18 for api_key, _, _ in apis)
    port, dirs = broker.port, broker.log_dirs
    assert broker.stop() == 0
    assert (dirs[0] / ".kafka_cleanshutdown").exists()
    broker.restart()
    assert (broker.port, broker.log_dirs) == (port, dirs)
    with RawClient.connect(broker.bootstrap) as client:
        assert client.api_versions()[0] == 0


def test_a_first_start_on_a_taken_port_moves_to_a_free_one(tmp_path):
    """The race the harness closes: its free port is taken before the broker
    binds it (here by a socket the test holds). The real broker exits with
    EADDRINUSE; the harness starts it again on a new port, written to the
    properties, and the broker answers there."""
    b = BrokerProcess(tmp_path)
    taken = b.port
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        b.start()
        assert b.port != taken and b.starts == 1
        assert f"listeners=PLAINTEXT://127.0.0.1:{b.port}" in b.props_path.read_text()
        assert "Address already in use" in b.log_text()
        with RawClient.connect(b.bootstrap) as client:
            assert client.api_versions()[0] == 0
    finally:
        holder.close()
        b.close()
    assert b.leaked == []


def test_real_broker_sigkill_leaves_no_children(broker):
    """SIGKILL of the supervisor (a crash) must take its children with it
    within the harness's grace period, and the broker must start again."""
    pgid = broker.pgid
    assert broker.kill() == -signal.SIGKILL
    assert broker.leaked == [], "children outlived their SIGKILLed supervisor"
    assert process_group_members(pgid) == []
    broker.restart()


def test_a_failed_tests_report_carries_its_brokers_errors_with_their_tracebacks(tmp_path):
    """conftest's report hook: a broker's ERROR records and their tracebacks,
    nothing else, from brokers whose log was written since the test began."""
    log = ("[2026-11-30 01:00:00,000] INFO started (kafkapy.server)\n"
           "[2026-11-30 01:00:01,000] ERROR Creating topic t failed (kafkapy.admin)\n"
           "Traceback (most recent call last):\n"
           "SessionExpiredError\n"
           "[2026-11-30 01:00:02,000] WARNING slow (kafkapy.network)\n"
           "  not a traceback\n")
    assert error_lines(log) == ("[2026-11-30 01:00:01,000] ERROR Creating topic t failed (kafkapy.admin)\n"
                                "Traceback (most recent call last):\nSessionExpiredError")
    assert error_lines(log, limit=1) == "SessionExpiredError"
    b = BrokerProcess(tmp_path / "b", command=FAKE)
    began = time.time()
    b.log_path.write_text(log)
    assert [errors for name, errors in errors_since(began) if name.startswith("b ")] == [error_lines(log)]
    assert not [name for name, _ in errors_since(time.time() + 60) if name.startswith("b ")]
