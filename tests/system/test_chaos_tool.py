"""kafkapy-chaos end to end, against its own local cluster (a three-node
ZooKeeper ensemble and the brokers it starts and stops), and the report it
writes. The default test runs every operation once (about 80 s here); the
long one a round of every fault and operation with four brokers and three
clients."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kafkapy.tools.chaos import FAULTS
from kafkapy.tools.chaos_operations import OPERATIONS
from support.broker import REPO_ROOT, free_port
from support.zookeeper import _skip_if_missing


def _free_ports(count: int, *offsets) -> int:
    """A base port with it, the next ``count - 1`` and each ``+ offset`` of those free a moment ago."""
    for _ in range(50):  # bounded: 50 candidates
        base = free_port()
        if base + count + max(offsets, default=0) > 65000:
            continue
        try:
            for port in [base + i + o for i in range(count) for o in (0, *offsets)][1:]:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise AssertionError(f"no {count} consecutive free ports")


def _chaos(out_dir: Path, *options, brokers: int, timeout_s: float):
    """Run the tool; ``(completed process, run.json, report.md)``."""
    out = subprocess.run(
        [sys.executable, "-m", "kafkapy.tools.chaos", *options, "--brokers", str(brokers), "--dir", str(out_dir),
         "--config", str(REPO_ROOT / "config" / "server.properties"),
         "--base-port", str(_free_ports(brokers)),
         # the ensemble's client ports, and their quorum and election ports 100 and 200 above
         "--zookeeper-port", str(_free_ports(3, 100, 200))],
        capture_output=True, text=True, timeout=timeout_s)
    report = (out_dir / "report.md").read_text() if (out_dir / "report.md").exists() else ""
    assert out.returncode == 0, (out.stdout[-4000:], out.stderr[-3000:])
    return out, json.loads((out_dir / "run.json").read_text()), report


def _check_clients(run: dict, names) -> None:
    for name in names:
        v = run["clients"][name]
        assert v["acknowledged"] > 1000 and v["consumed"] >= v["acknowledged"], v
        assert v["lost"] == v["duplicates"] == v["out_of_order"] == 0, v
    txn = run["transactional"]
    assert txn["committed"] > 20 and txn["aborted"] > 0, txn
    assert txn["committed_lost"] == txn["duplicates"] == txn["aborted_seen"] == txn["unknown_partial"] == 0, txn


@pytest.mark.timeout(300)
def test_every_operation_once_under_load_passes_and_reports(tmp_path):
    _skip_if_missing()
    out_dir = tmp_path / "run"
    out, run, report = _chaos(out_dir, "--duration", "30", "--rounds", "1", "--interval", "2", "--faults", "none",
                              "--clients", "confluent,kafkapy", "--rate", "100", "--transactional-rate", "40",
                              "--seed", "3", brokers=3, timeout_s=280)
    assert run["verdict"] == "PASS" and run["reasons"] == [] and "report: PASS" in report
    assert report.splitlines()[2].startswith("**PASS**: ")
    by_kind = {e["kind"]: e for e in run["events"]}
    assert sorted(by_kind) == sorted(OPERATIONS), by_kind
    assert all(e["category"] == "operation" and not e["failed"] and e["recovered_s"] is not None
               for e in run["events"]), run["events"]
    restart = by_kind["rolling-restart"]
    assert restart["note"].count("(exit 0)") == 3 and "last)" in restart["target"], restart
    churn = by_kind["topic-churn"]
    assert "records acknowledged" in churn["note"] and "its producer then (expected)" in churn["note"], churn
    assert by_kind["reassignment"]["note"].startswith("completed in"), by_kind["reassignment"]
    assert "serving again" in by_kind["zookeeper-node-bounce"]["note"]
    _check_clients(run, ("confluent", "kafkapy"))
    for kind in OPERATIONS:  # the timeline names every event, one row each
        assert f"| op | {kind} |" in report


@pytest.mark.long
@pytest.mark.timeout(900)
def test_a_round_of_every_fault_and_operation_with_four_brokers(tmp_path):
    _skip_if_missing()
    pytest.importorskip("matplotlib")
    out_dir = tmp_path / "run"
    out, run, report = _chaos(out_dir, "--duration", "60", "--rounds", "1", "--interval", "5",
                              "--clients", "confluent,kafka-python,kafkapy", "--rate", "100", "--seed", "11",
                              brokers=4, timeout_s=850)
    assert run["verdict"] == "PASS" and "report: PASS" in report
    kinds = sorted(e["kind"] for e in run["events"])
    assert kinds == sorted(FAULTS + OPERATIONS), kinds
    assert all(e["recovered_s"] is not None and not e["failed"] for e in run["events"]), run["events"]
    moved = next(e for e in run["events"] if e["kind"] == "reassignment")
    before, after = moved["target"].split(": ", 1)[1].split(" -> ")
    assert len(set(json.loads(before)) ^ set(json.loads(after))) == 2, moved  # a replica moved to the 4th broker
    _check_clients(run, ("confluent", "kafka-python", "kafkapy"))
    assert Path(out_dir / "timeline.png").stat().st_size > 10000
