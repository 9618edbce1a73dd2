"""``kafkapy-local-cluster`` (``make cluster``): ZooKeeper and three brokers
from one command, stopped cleanly by SIGTERM (what Ctrl-C does too)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from kazoo.client import KazooClient

from support.broker import free_port
from support.zookeeper import _skip_if_missing

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_local_cluster_starts_three_registered_brokers_and_stops_on_sigterm(tmp_path):
    _skip_if_missing()
    zk_port, base = free_port(), None
    # Consecutive ports from base are what the tool uses: find three free in a row.
    for candidate in range(20000, 20100, 3):  # bounded search
        if all(_free(candidate + i) for i in range(3)):
            base = candidate
            break
    assert base is not None, "no three consecutive free ports in 20000-20099"
    ports = [base, base + 1, base + 2]
    proc = subprocess.Popen([sys.executable, "-m", "kafkapy.tools.local_cluster", "--dir", str(tmp_path / "lc"),
                             "--base-port", str(base), "--zookeeper-port", str(zk_port),
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
                    zk = KazooClient(hosts=f"127.0.0.1:{zk_port}/kafkapy", timeout=5)
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


def _free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False
