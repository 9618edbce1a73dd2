"""kafkapy-chaos without a cluster: its validation (acknowledged ⊆ consumed,
duplicates, order per client and partition; the transactional promises), the
leadership-change count of the timeline, the error kinds and stalls, the
report's verdict with its reasons and plot, and its option checks."""

from __future__ import annotations

import argparse
import json

import pytest

from kafkapy.tools import chaos
from kafkapy.tools.chaos_operations import Event
from kafkapy.tools.chaos_transactions import TxnRun, validate_transactions


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
    assert result["a"] == {"sent": 5, "acknowledged": 5, "consumed": 4, "errors": 0, "errors_by_kind": {},
                           "lost": 1, "duplicates": 0, "out_of_order": 1, "lost_values": [(1, 3)]}
    assert result["b"]["duplicates"] == 1 and result["b"]["lost"] == 0
    # an unacknowledged value that made it into the log is no fault (a timed-out send may land)
    c = _run("c", {0: [0]})
    assert chaos.validate([c], {0: [("c", 0), ("c", 1)]})["c"]["lost"] == 0


def test_leadership_changes_skip_failed_samples():
    samples = [(1.0, {0: 1, 1: 2}, {}), (2.0, None, None), (3.0, {0: 3, 1: 2}, {}), (4.0, {0: 2, 1: 3}, {})]
    assert chaos.leadership_changes(samples) == [(3.0, 1), (4.0, 2)]


def _args(**kw):
    base = dict(brokers=4, zookeeper_nodes=3, partitions=2, client_list=["a"], rate=10.0, session_timeout_ms=6000,
                seed=7, transactional_rate=50.0)
    return argparse.Namespace(**{**base, **kw})


def test_report_verdict_reasons_timeline_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    run = _run("a", {0: [0, 2], 1: [1]})
    events = [Event("leader-kill", "fault", 1.0, "broker 2", 3.0, 4.5),
              Event("reassignment", "operation", 5.0, "chaos-1: [1, 2, 3] -> [4, 2, 3]", 7.0, 0.2,
                    note="completed in 1.9 s")]
    good = chaos.validate([run], {0: [("a", 0), ("a", 2)], 1: [("a", 1)]})
    assert chaos.write_report(tmp_path, _args(), [run], events, [], good, run.ack_times[0] - 1, 5) == "PASS"
    text = (tmp_path / "report.md").read_text()
    assert "report: PASS" in text and "| fault | leader-kill | broker 2 | 4.5 |" in text
    assert "| op | reassignment | chaos-1: [1, 2, 3] -> [4, 2, 3] | 0.2 | completed in 1.9 s |" in text
    assert (tmp_path / "timeline.png").stat().st_size > 1000
    bad = chaos.validate([run], {0: [("a", 0)], 1: [("a", 1)]})
    events.append(Event("topic-churn", "operation", 9.0, "topic x", 12.0, None, failed="3 records not read back"))
    assert chaos.write_report(tmp_path, _args(), [run], events, [], bad, 0.0, 5) == "FAIL"
    text = (tmp_path / "report.md").read_text()
    first = text.splitlines()[2]
    assert first.startswith("**FAIL**: a: 1 acknowledged records lost; topic-churn at 9 s failed: 3 records "
                            "not read back; ISRs not full within 90 s after topic-churn at 9 s"), first
    run_json = json.loads((tmp_path / "run.json").read_text())
    assert run_json["verdict"] == "FAIL" and len(run_json["reasons"]) == 3
    assert "- a: chaos-0:2" in text  # the lost value, where to look for it
    assert [e["category"] for e in run_json["events"]] == ["fault", "operation", "operation"]


def test_transactions_every_committed_once_no_aborted_unknown_all_or_nothing():
    r = TxnRun(committed=[[0, 1], [2, 3]], aborted=[[4, 5]], unknown=[[6, 7], [8, 9]])
    clean = {0: ["txn:0", "txn:2", "txn:6"], 1: ["txn:1", "txn:3", "txn:7"]}
    v = validate_transactions(r, clean)
    assert (v["committed_lost"], v["duplicates"], v["aborted_seen"], v["unknown_partial"]) == (0, 0, 0, 0)
    assert v["unknown_landed"] == 1 and v["transactions"] == 5 and v["committed_records"] == 4
    broken = {0: ["txn:0", "txn:0", "txn:4", "txn:8"], 1: ["txn:1"]}
    v = validate_transactions(r, broken)
    assert (v["committed_lost"], v["duplicates"], v["aborted_seen"], v["unknown_partial"]) == (2, 1, 1, 1)
    reasons = chaos.verdict_reasons({}, v, [])
    assert len(reasons) == 4 and reasons[0] == ("transactional: 2 committed records not read under "
                                                "read_committed"), reasons


def test_error_kinds_and_stalls():
    assert chaos.error_kind('KafkaError{code=_MSG_TIMED_OUT,val=-192,str="Local: Message timed out"}') \
        == "_MSG_TIMED_OUT"
    assert chaos.error_kind("send: BufferError('Local: Queue full')") == "BufferError"
    assert chaos.error_kind("KafkaTimeoutError('Batch expired')") == "KafkaTimeoutError"
    assert chaos.errors_by_kind([(0, "A(x)"), (1, "B: y"), (2, "B: z")]) == {"B": 2, "A": 1}
    assert chaos.max_stall([10.5, 11.0, 14.0], 10.0, 15.0) == pytest.approx(3.0)
    assert chaos.max_stall([], 10.0, 12.0) == pytest.approx(2.0)


def test_options_are_checked(capsys):
    assert chaos.main(["--clients", "java"]) == 1
    assert "unknown client 'java'" in capsys.readouterr().err
    assert chaos.main(["--faults", "meteor"]) == 1
    assert chaos.main(["--duration", "5"]) == 1
    assert chaos.main(["--operations", "rebalance"]) == 1
    assert "unknown operation 'rebalance'" in capsys.readouterr().err
    assert chaos.main(["--operations", "zookeeper-node-bounce", "--zookeeper-nodes", "1"]) == 1
    assert "needs an ensemble" in capsys.readouterr().err


def test_the_default_mix_is_every_fault_and_operation_in_a_seeded_order(tmp_path):
    args = chaos._parse(["--config", str(tmp_path), "--seed", "4"])
    assert args.zookeeper_nodes == 3 and args.brokers == 4 and args.transactional_rate > 0
    first, second = [], []
    for out in (first, second):
        rng, order = chaos.random.Random(args.seed), []
        out += [chaos._next_event(order, args, rng) for _ in range(24)]
    assert first == second  # seeded
    kinds = set(chaos.FAULTS) | set(chaos.OPERATIONS)
    assert sorted(first[:12]) == sorted(kinds) and sorted(first[12:]) == sorted(kinds)
    standalone = chaos._parse(["--config", str(tmp_path), "--zookeeper-nodes", "1"])
    assert "zookeeper-node-bounce" not in standalone.operation_list
