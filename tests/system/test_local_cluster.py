"""``kafkapy-local-cluster`` (``make cluster``): ZooKeeper (one server, or a
three-node ensemble: ``make cluster ZK=3``) and three brokers from one
command, stopped cleanly by SIGTERM (what Ctrl-C does too)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from kazoo.client import KazooClient

from support.zookeeper import _skip_if_missing

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("zookeeper_nodes", [1, 3])
def test_local_cluster_starts_three_registered_brokers_and_stops_on_sigterm(tmp_path, zookeeper_nodes):
    _skip_if_missing()
    # Consecutive ports are what the tool uses: three for the brokers, and for
    # ZooKeeper one client port a node, with quorum and election ports 100 and 200 above.
    base = _free_run(20000, 3, (0,))
    zk_port = _free_run(21000, zookeeper_nodes, (0, 100, 200))
    ports = [base, base + 1, base + 2]
    hosts = ",".join(f"127.0.0.1:{zk_port + n}" for n in range(zookeeper_nodes))
    proc = subprocess.Popen([sys.executable, "-m", "kafkapy.tools.local_cluster", "--dir", str(tmp_path / "lc"),
                             "--base-port", str(base), "--zookeeper-port", str(zk_port),
                             "--zookeeper-nodes", str(zookeeper_nodes),
                             "--config", os.path.join(REPO, "config", "server.properties"),
                             "--override", "zookeeper.session.timeout.ms=6000"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        zk = None
        deadline = time.monotonic() + 60
        registered = set()
        while time.monotonic() < deadline and registered != {1, 2, 3}:  # bounded by the deadline
            assert proc.poll() is None, proc.stdout.read()
            try:
                if zk is None:
                    zk = KazooClient(hosts=f"{hosts}/kafkapy", timeout=5)
                    zk.start(timeout=5)
                registered = {int(c) for c in zk.get_children("/brokers/ids")}
            except Exception:
                if zk is not None:
                    zk.stop()
                    zk.close()
                zk = None
            time.sleep(0.3)
        assert registered == {1, 2, 3}
        ports_registered = sorted(json.loads(zk.get(f"/brokers/ids/{i}")[0])["port"] for i in (1, 2, 3))
        assert ports_registered == ports
        if zookeeper_nodes > 1:  # every node of the ensemble holds the registrations
            for n in range(zookeeper_nodes):
                node = KazooClient(hosts=f"127.0.0.1:{zk_port + n}/kafkapy", timeout=5, read_only=False)
                node.start(timeout=5)
                try:
                    node.sync("/brokers/ids")
                    assert sorted(node.get_children("/brokers/ids")) == ["1", "2", "3"]
                finally:
                    node.stop()
                    node.close()
        zk.stop()
        zk.close()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert f"bootstrap.servers=127.0.0.1:{ports[0]},127.0.0.1:{ports[1]},127.0.0.1:{ports[2]}" in out
        for i in (1, 2, 3):  # every broker stopped cleanly (SIGTERM, not the SIGKILL fallback)
            broker_dir = tmp_path / "lc" / f"broker-{i}"
            assert (broker_dir / "data" / ".kafka_cleanshutdown").exists()
            assert "shut down cleanly" in (broker_dir / "server.log").read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _free_run(start: int, count: int, offsets) -> int:
    """The first port from ``start`` (in steps of 10, at most 90 tries) with
    ``port + i + offset`` free for every i below ``count`` and every offset."""
    for candidate in range(start, start + 900, 10):  # bounded search
        if all(_free(candidate + i + off) for i in range(count) for off in offsets):
            return candidate
    raise AssertionError(f"no free run of {count} ports from {start}")


def _free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False
