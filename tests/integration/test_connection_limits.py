"""Connection limits against a real broker (Kafka's ConnectionQuotas): a flood
of connections from one IP (127.0.0.4) is held to max.connections.per.ip while
another loopback address still connects and is served, per-IP overrides,
max.connections making new connections wait (not fail) until one closes,
max.connection.creation.rate spacing accepts out, and connections.max.idle.ms."""

from __future__ import annotations

import select
import socket
import struct
import sys
import time
from pathlib import Path

import pytest

from support.wait import wait_for
from support.rawclient import RawClient, api_versions_v0_request

pytestmark = pytest.mark.timeout(120)


def _open(broker, source: str, timeout_s: float = 5.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=timeout_s, source_address=(source, 0))
    return s


def _served(sock: socket.socket, timeout_s: float) -> bool:
    """True if an ApiVersions request on ``sock`` is answered within ``timeout_s``;
    False if the broker closed it or said nothing."""
    sock.settimeout(timeout_s)
    try:
        sock.sendall(api_versions_v0_request(7))
        head = sock.recv(4)
        if len(head) < 4:
            return False
        size = struct.unpack(">i", head)[0]
        got = 0
        while got < size:
            chunk = sock.recv(size - got)
            if not chunk:
                return False
            got += len(chunk)
        return True
    except (socket.timeout, ConnectionError, OSError):
        return False


def _closed_now(sock: socket.socket) -> bool:
    """Whether the broker has closed ``sock`` (without waiting: nothing else is sent to it)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def _closed_by_broker(sock: socket.socket, timeout_s: float) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


FLOOD_IP = "127.0.0.4"


@pytest.mark.broker_config({"max.connections.per.ip": 5,
                            "max.connections.per.ip.overrides": "127.0.0.3:8"})
def test_per_ip_limit_holds_against_a_flood_while_other_ips_connect(broker):
    # From an address nothing else used: the harness's readiness probe came
    # from 127.0.0.1, and a processor may count its closed connection out
    # after the flood has begun (a sixth connection of that address, for a moment).
    flood = [_open(broker, FLOOD_IP) for _ in range(20)]
    try:
        # the acceptor closes what is over the limit right after accepting it
        wait_for(lambda: sum(_closed_now(s) for s in flood) >= 15, 10, "the flood's extra connections closed")
        time.sleep(0.3)  # and no more than that
        closed = [s for s in flood if _closed_now(s)]
        assert len(closed) == 15, len(closed)  # over the limit: closed right after accept
        kept = [s for s in flood if s not in closed]
        served = [_served(s, 5.0) for s in kept]
        assert all(served), served
        other = _open(broker, "127.0.0.2")
        assert _served(other, 5.0)  # another address is not affected
        other.close()
        override = [_open(broker, "127.0.0.3") for _ in range(10)]
        wait_for(lambda: sum(_closed_now(s) for s in override) >= 2, 10, "two over the override closed")
        time.sleep(0.3)
        assert sum(not _closed_now(s) for s in override) == 8
        for s in override:
            s.close()
        # a slot freed by a close is there again for the flooding address
        kept[0].close()
        deadline = time.monotonic() + 10
        served_again = False
        while not served_again and time.monotonic() < deadline:  # until the processor counts it out
            again = _open(broker, FLOOD_IP)
            served_again = _served(again, 5.0)  # False at once when the acceptor closes it
            again.close()
        assert served_again
    finally:
        for s in flood:
            s.close()


@pytest.mark.broker_config({"max.connections": 4})
def test_max_connections_makes_new_connections_wait_for_a_slot(broker):
    held = [_open(broker, "127.0.0.1") for _ in range(4)]
    try:
        assert all(_served(s, 5.0) for s in held)
        waiting = _open(broker, "127.0.0.2")  # the kernel's backlog takes it
        assert not _served(waiting, 1.0)  # not accepted while at the limit
        assert not _closed_by_broker(waiting, 0.1)
        held.pop().close()
        waiting.settimeout(5.0)
        head = waiting.recv(4)  # the answer to the request sent while it waited
        assert len(head) == 4
        waiting.recv(struct.unpack(">i", head)[0])
        waiting.close()
    finally:
        for s in held:
            s.close()


@pytest.mark.broker_config({"max.connection.creation.rate": 5})
def test_connection_creation_rate_spaces_accepts(broker):
    # a bucket of (11 - 1) windows x 5/s lets 50 in at once; the next wait ~1/5 s each
    socks = []
    try:
        for _ in range(50):
            socks.append(_open(broker, "127.0.0.1"))
        assert _served(socks[-1], 10.0)
        started = time.monotonic()
        for _ in range(6):
            socks.append(_open(broker, "127.0.0.1"))
            assert _served(socks[-1], 10.0)
        took = time.monotonic() - started
        assert took >= 0.9, took  # held about 1/5 s each
    finally:
        for s in socks:
            s.close()


@pytest.mark.broker_config({"connections.max.idle.ms": 1000})
def test_idle_connections_are_closed(broker):
    with RawClient.connect(broker.bootstrap) as client:
        client.sock.sendall(api_versions_v0_request(1))
        client.recv_frame(5.0)
        started = time.monotonic()
        assert _closed_by_broker(client.sock, 5.0)
        assert 0.9 <= time.monotonic() - started <= 4.0


def test_quota_and_acceptor_metrics(broker_factory):
    from support.broker import free_port

    from support.quotas import Connection, alter, produce_request

    port = free_port()
    broker = broker_factory({"prometheus.port": port, "max.connections": 2})
    alter(broker.bootstrap, {"client-id": "metered"}, {"producer_byte_rate": 50_000})
    conn = Connection(broker.bootstrap, "metered")
    waiting = None
    try:
        create = conn.call(19, 7, {"topics": [{"name": "mt", "num_partitions": 1, "replication_factor": 1}],
                                   "timeout": 10000})[0]
        assert create.topics[0].error_code == 0
        response, _ = conn.call(0, 9, produce_request("mt", 100_000, records=7))
        assert response.responses[0].partition_responses[0].error_code == 0
        other = _open(broker, "127.0.0.2")
        assert _served(other, 5.0)  # two connections: the limit
        waiting = _open(broker, "127.0.0.3")
        time.sleep(1.5)
        samples = _scrape(port)
        assert samples['kafka_server_Produce_byte_rate{client_id="metered",user=""}'] > 50_000
        assert samples['kafka_server_Produce_throttle_time{client_id="metered",user=""}'] > 0
        assert samples['kafka_network_Acceptor_AcceptorBlockedPercent{listener="PLAINTEXT"}'] > 0.5
        # connection-count: the two served, not the one waiting for a slot
        assert sum(v for k, v in samples.items() if k.startswith("kafka_server_socketservermetrics_connection_count{")
                   and 'listener="PLAINTEXT"' in k) == 2
        other.close()
    finally:
        conn.close()
        if waiting is not None:
            waiting.close()


def _scrape(port: int) -> dict:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def test_quota_metrics_per_user_and_client_entity(broker_factory):
    """Fetch byte-rate, Request request-time and ControllerMutation
    mutation-rate sensors of a (user, client-id) quota entity (PLAINTEXT's
    principal is User:ANONYMOUS), each labelled with both names, beside
    their throttle times."""
    from support.broker import free_port

    from support.quotas import Connection, alter, produce_request

    port = free_port()
    broker = broker_factory({"prometheus.port": port})
    alter(broker.bootstrap, {"user": "ANONYMOUS", "client-id": "metered-u"},
          {"consumer_byte_rate": 20_000, "request_percentage": 0.01, "controller_mutation_rate": 1})
    conn = Connection(broker.bootstrap, "metered-u")
    try:
        create = conn.call(19, 7, {"topics": [{"name": "mu", "num_partitions": 1, "replication_factor": 1}],
                                   "timeout": 10000})[0]
        assert create.topics[0].error_code == 0
        produced = conn.call(0, 9, produce_request("mu", 100_000))[0]
        assert produced.responses[0].partition_responses[0].error_code == 0
        fetch = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                 "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                 "topics": [{"topic": "mu", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                            "fetch_offset": 0, "log_start_offset": -1,
                                                            "partition_max_bytes": 1 << 20}]}],
                 "forgotten_topics_data": [], "rack_id": ""}
        fetched = conn.call(1, 11, fetch)[0]
        assert fetched.responses[0].partitions[0].error_code == 0
        labels = '{client_id="metered-u",user="ANONYMOUS"}'
        wanted = [f"kafka_server_{name}{labels}" for name in (
            "Fetch_byte_rate", "Fetch_throttle_time", "Request_request_time", "ControllerMutation_mutation_rate")]
        samples = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(samples.get(w, 0) > 0 for w in wanted):
            samples = _scrape(port)
            time.sleep(0.2)
        assert all(samples.get(w, 0) > 0 for w in wanted), {k: v for k, v in samples.items() if "metered-u" in k}
    finally:
        conn.close()


def test_ip_connection_creation_rate_quota(broker):
    """connection_creation_rate on an IP entity (KIP-612): past its burst a new
    connection from that IP is closed after its throttle, another IP's are not;
    set and shown with kafkapy-configs --entity-type ips."""
    import subprocess

    tool = Path(sys.executable).parent / "kafkapy-configs"
    p = subprocess.run([str(tool), "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type", "ips",
                        "--entity-name", "127.0.0.4", "--add-config", "connection_creation_rate=2"],
                       capture_output=True, text=True, timeout=60)
    assert p.stdout == "Completed updating config for ip 127.0.0.4.\n", p.stderr
    p = subprocess.run([str(tool), "--bootstrap-server", broker.bootstrap, "--describe", "--ip", "127.0.0.4"],
                       capture_output=True, text=True, timeout=60)
    assert p.stdout == "Quota configs for ip '127.0.0.4' are connection_creation_rate=2.0\n", p.stderr
    socks = []
    try:
        # a bucket of (11 - 1) windows x 2/s: 20 connections, then closed
        for _ in range(24):
            socks.append(_open(broker, "127.0.0.4"))
        wait_for(lambda: sum(_closed_now(s) for s in socks) >= 3, 10, "connections over the IP's rate closed")
        assert sum(_served(s, 5.0) for s in socks[:20]) == 20
        other = _open(broker, "127.0.0.5")
        assert _served(other, 5.0)
        other.close()
    finally:
        for s in socks:
            s.close()


def _alter_broker(bootstrap: str, name: str, configs: dict):
    """kafkapy-configs --entity-type brokers (``name`` "" = --entity-default):
    --add-config the non-None values, --delete-config the None ones; the
    completed process."""
    import subprocess

    tool = Path(sys.executable).parent / "kafkapy-configs"
    argv = [str(tool), "--bootstrap-server", bootstrap, "--alter", "--entity-type", "brokers"]
    argv += ["--entity-default"] if name == "" else ["--entity-name", name]
    added = ",".join(f"{k}=[{v}]" if "," in v else f"{k}={v}" for k, v in configs.items() if v is not None)
    deleted = ",".join(k for k, v in configs.items() if v is None)
    argv += (["--add-config", added] if added else []) + (["--delete-config", deleted] if deleted else [])
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def _altered(bootstrap: str, name: str, configs: dict) -> None:
    p = _alter_broker(bootstrap, name, configs)
    assert p.returncode == 0 and p.stdout.startswith("Completed updating"), (p.stdout, p.stderr)


@pytest.mark.broker_config({"max.connections.per.ip": 3})
def test_connection_limits_change_at_run_time(broker):
    """Kafka's DynamicConnectionQuota: max.connections.per.ip (and its overrides)
    set with IncrementalAlterConfigs apply to the next connection, per broker
    over the cluster default over the file; connections already open stay."""
    def accepted(n: int, source: str = "127.0.0.1") -> int:
        """How many of ``n`` new connections from ``source`` are served."""
        socks = [_open(broker, source) for _ in range(n)]
        try:
            return sum(_served(s, 3.0) for s in socks)
        finally:
            for s in socks:
                s.close()

    def settles(n: int, want: int, source: str = "127.0.0.1") -> None:
        # the acceptor reads the limits when the metadata moves; counts of closed
        # connections are released by their processors: both are asynchronous
        wait_for(lambda: accepted(n, source) == want, 15, f"{want} of {n} connections from {source} served")

    settles(5, 3)
    _altered(broker.bootstrap, "", {"max.connections.per.ip": "5"})
    settles(7, 5)
    # the broker's own value wins over the cluster default
    _altered(broker.bootstrap, "0", {"max.connections.per.ip": "2"})
    settles(4, 2)
    # an override for one address
    _altered(broker.bootstrap, "0", {"max.connections.per.ip.overrides": "127.0.0.4:6"})
    settles(8, 6, "127.0.0.4")
    settles(4, 2)
    # a bad overrides list is refused and changes nothing
    p = _alter_broker(broker.bootstrap, "0", {"max.connections.per.ip.overrides": "127.0.0.4:many"})
    assert p.returncode != 0 and "Invalid entry in max.connections.per.ip.overrides" in p.stdout + p.stderr
    settles(8, 6, "127.0.0.4")
    # connections already open stay when the limit drops under their count
    # (from 127.0.0.7; the tool, which opens two connections, from 127.0.0.1 with an override)
    held = [_open(broker, "127.0.0.7") for _ in range(2)]
    try:
        assert all(_served(s, 3.0) for s in held)
        _altered(broker.bootstrap, "0", {"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "127.0.0.1:9"})
        wait_for(lambda: accepted(1, "127.0.0.7") == 0, 15, "a third connection refused at the new limit of 1")
        assert all(_served(s, 3.0) for s in held)
    finally:
        for s in held:
            s.close()
    # deleting the broker's values falls back to the cluster default (5)
    _altered(broker.bootstrap, "0", {"max.connections.per.ip": None, "max.connections.per.ip.overrides": None})
    settles(7, 5)


def test_listener_max_connections_raised_at_run_time_releases_waiting_connections(broker_factory):
    """listener.name.<l>.max.connections changed at run time (Kafka allows the
    listener-prefixed form dynamically): a connection waiting in the backlog of
    the full listener is accepted at once; the ADMIN listener, not limited,
    carries the change."""
    from support.certs import named_listeners

    port, ports, listeners = named_listeners(["ADMIN"], {"ADMIN": "PLAINTEXT"})
    broker = broker_factory({**listeners, "listener.name.plaintext.max.connections": 3}, port=port)
    held = [_open(broker, "127.0.0.1") for _ in range(3)]
    waiting = None
    try:
        assert all(_served(s, 5.0) for s in held)
        waiting = _open(broker, "127.0.0.2")
        assert not _served(waiting, 1.0)  # not accepted while at the limit
        _altered(f"127.0.0.1:{ports['ADMIN']}", "0", {"listener.name.plaintext.max.connections": "5"})
        waiting.settimeout(10.0)
        head = waiting.recv(4)  # the request sent while it waited is answered now
        assert len(head) == 4
    finally:
        for s in held + ([waiting] if waiting else []):
            s.close()
