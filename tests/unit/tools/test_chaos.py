"""kafkapy-chaos without a cluster: its validation (acknowledged ⊆ consumed,
duplicates, order per client and partition), the leadership-change count of
the timeline, the report's verdict and plot, and its option checks."""

from __future__ import annotations

import argparse

import pytest

from kafkapy.tools import chaos


def _run(name, acked):
    r = chaos.ClientRun(name)
    for p, values in acked.items():
        for n in values:
            r.ok(p, n)
    r.sent = sum(len(v) for v in acked.values())
    return r


def test_validate_counts_lost_duplicates_and_disorder_per_client():
    a = _run("a", {0: [0, 2, 4], 1: [1, 3]})
    b = _run("b", {0: [0, 1]})
    consumed = {0: [("a", 0), ("b", 0), ("a", 4), ("a", 2), ("b", 1), ("b", 1)], 1: [("a", 1)]}
    result = chaos.validate([a, b], consumed)
    # a: 3 acknowledged on partition 1 is missing; 4 before 2 is one inversion
    assert result["a"] == {"sent": 5, "acknowledged": 5, "errors": 0, "lost": 1, "duplicates": 0, "out_of_order": 1}
    assert result["b"]["duplicates"] == 1 and result["b"]["lost"] == 0
    # an unacknowledged value that made it into the log is no fault (a timed-out send may land)
    c = _run("c", {0: [0]})
    assert chaos.validate([c], {0: [("c", 0), ("c", 1)]})["c"]["lost"] == 0


def test_leadership_changes_skip_failed_samples():
    samples = [(1.0, {0: 1, 1: 2}, {}), (2.0, None, None), (3.0, {0: 3, 1: 2}, {}), (4.0, {0: 2, 1: 3}, {})]
    assert chaos.leadership_changes(samples) == [(3.0, 1), (4.0, 2)]


def test_report_verdict_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    args = argparse.Namespace(brokers=3, partitions=2, client_list=["a"], rate=10.0, session_timeout_ms=6000, seed=7)
    run = _run("a", {0: [0, 2], 1: [1]})
    faults = [chaos.FaultRecord("leader-kill", "broker 2", 1.0, 3.0, 4.5)]
    good = chaos.validate([run], {0: [("a", 0), ("a", 2)], 1: [("a", 1)]})
    assert chaos.write_report(tmp_path, args, [run], faults, [], good, run.ack_times[0] - 1, 5) == "PASS"
    text = (tmp_path / "report.md").read_text()
    assert "report: PASS" in text and "| leader-kill | broker 2 | 4.5 |" in text
    assert (tmp_path / "timeline.png").stat().st_size > 1000
    bad = chaos.validate([run], {0: [("a", 0)], 1: [("a", 1)]})
    assert chaos.write_report(tmp_path, args, [run], faults, [], bad, 0.0, 5) == "FAIL"


def test_options_are_checked(capsys):
    assert chaos.main(["--clients", "java"]) == 1
    assert "unknown client 'java'" in capsys.readouterr().err
    assert chaos.main(["--faults", "meteor"]) == 1
    assert chaos.main(["--duration", "5"]) == 1
