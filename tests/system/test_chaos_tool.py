"""kafkapy-chaos end to end (long): a short run with two faults against its
own local cluster (ZooKeeper and three brokers it starts and stops), two
clients, and the report it writes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from support.broker import REPO_ROOT, free_port
from support.zookeeper import _skip_if_missing

pytestmark = [pytest.mark.long, pytest.mark.timeout(400)]


def _three_free_ports() -> int:
    """A base port with it and the next two free a moment ago."""
    for _ in range(50):  # bounded: 50 candidates
        base = free_port()
        if base > 65000:
            continue
        try:
            for port in (base + 1, base + 2):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise AssertionError("no three consecutive free ports")


def test_a_short_chaos_run_passes_and_reports(tmp_path):
    _skip_if_missing()
    pytest.importorskip("matplotlib")
    out_dir = tmp_path / "run"
    out = subprocess.run(
        [sys.executable, "-m", "kafkapy.tools.chaos", "--duration", "45", "--interval", "15",
         "--faults", "leader-pause,zookeeper-restart", "--clients", "confluent,kafkapy", "--rate", "100",
         "--seed", "3", "--dir", str(out_dir), "--config", str(REPO_ROOT / "config" / "server.properties"),
         "--base-port", str(_three_free_ports()), "--zookeeper-port", str(free_port())],
        capture_output=True, text=True, timeout=380)
    report = (out_dir / "report.md").read_text() if (out_dir / "report.md").exists() else ""
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    run = json.loads((out_dir / "run.json").read_text())
    assert run["verdict"] == "PASS" and "report: PASS" in report
    kinds = sorted(f["kind"] for f in run["faults"])
    assert kinds == ["leader-pause", "zookeeper-restart"], kinds
    assert all(f["recovered_s"] is not None for f in run["faults"])
    for name in ("confluent", "kafkapy"):
        v = run["clients"][name]
        assert v["acknowledged"] > 1000 and v["lost"] == v["duplicates"] == v["out_of_order"] == 0, v
    assert Path(out_dir / "timeline.png").stat().st_size > 10000
