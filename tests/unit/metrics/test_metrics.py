"""Metrics without a broker: null probes, the exporter in a forked process tree,
the error-code walk, histogram publishing, and the Grafana dashboard.

prometheus_client chooses its value storage at import time, so everything that
needs multiprocess mode runs in a fresh interpreter (``_run``), never in the
pytest process.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from kafkapy.metrics import probes
from kafkapy.metrics.names import PROCESS_METRICS, exposed_sample_names

REPO = Path(__file__).resolve().parents[3]


def _run(code: str, tmp_path, env_extra=None) -> str:
    import os

    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("RUNTIME_DIRECTORY", None)
    env.update(env_extra or {})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=60, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_probes_are_null_unless_configured():
    from kafkapy import metrics

    assert metrics.configure("127.0.0.1", 0, {}, {}, []) is None
    metrics.start_process("handler-0")
    assert probes.request is probes.NULL_REQUEST and probes.log is probes.NULL_LOG
    # Null probes accept every call of the contract.
    probes.network.connection_opened(0)
    probes.network.request_completed(0, 0.1, 0.0)
    probes.request.request_handled(0, 0.1, 0.1)
    probes.log.appended("t", 10, 1)
    probes.log.flushed(0.01)
    probes.group.set_group_counts({"Stable": 1})
    probes.publish()


def test_multiproc_dir_choice(tmp_path):
    from kafkapy.metrics import multiproc_dir_for

    assert multiproc_dir_for({"PROMETHEUS_MULTIPROC_DIR": "/x", "RUNTIME_DIRECTORY": "/run/k"}) == ("/x", False)
    assert multiproc_dir_for({"RUNTIME_DIRECTORY": "/run/k:/run/other"}) == ("/run/k/metrics", False)
    path, owned = multiproc_dir_for({})
    assert owned and Path(path).is_dir()
    Path(path).rmdir()


def test_processes_publish_and_the_supervisor_aggregates(tmp_path):
    out = _run("""
        import json, os, urllib.request
        from kafkapy import metrics
        from kafkapy.metrics import probes
        import socket
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        server = metrics.configure("127.0.0.1", port, {0: "Produce", 1: "Fetch"}, {0: "NONE", 3: "UNKNOWN_TOPIC_OR_PARTITION"}, ["PLAINTEXT"])
        pids = []
        for name in ("handler-0", "handler-1", "processor-0"):
            pid = os.fork()
            if pid == 0:
                metrics.start_process(name)
                if name.startswith("handler"):
                    for v in (0.0004, 0.003, 0.003, 50.0):
                        probes.request.request_handled(0, v, v)
                    probes.request.waited(0.1)
                    probes.log.appended("t", 1000, 10)
                    probes.log.flushed(0.002)
                else:
                    probes.network.connection_opened(0)
                    probes.network.connection_opened(0)
                    probes.network.connection_closed(0)
                    probes.network.request_completed(0, 0.01, 0.001)
                    probes.network.selected(0.5)
                    probes.group.set_group_counts({"Stable": 2, "Empty": 1})
                probes.publish()
                os._exit(0)
            pids.append(pid)
        for pid in pids:
            os.waitpid(pid, 0)
        class Q:
            def size(self): return 3
        server.serve(Q(), 7, "test")
        text = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics").read().decode()
        for pid in pids:
            server.process_dead(pid)
        after = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics").read().decode()
        server.close()
        print(json.dumps({"before": text, "after": after}))
    """, tmp_path)
    texts = json.loads(out.strip().splitlines()[-1])

    def samples(text):
        found = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                found[key] = float(value)
        return found

    s = samples(texts["before"])
    assert s['kafka_server_brokertopicmetrics_bytes_in_total{topic="t"}'] == 2000
    assert s['kafka_server_brokertopicmetrics_messages_in_total{topic="t"}'] == 20
    # Histogram deltas land in the right cumulative buckets (le is inclusive).
    q = "kafka_network_requestmetrics_request_queue_time_seconds"
    assert s[f'{q}_bucket{{le="0.0005",request="Produce"}}'] == 2
    assert s[f'{q}_bucket{{le="0.0025",request="Produce"}}'] == 2
    assert s[f'{q}_bucket{{le="0.005",request="Produce"}}'] == 6
    assert s[f'{q}_bucket{{le="30.0",request="Produce"}}'] == 6
    assert s[f'{q}_bucket{{le="+Inf",request="Produce"}}'] == 8
    assert s[f'{q}_count{{request="Produce"}}'] == 8
    assert abs(s[f'{q}_sum{{request="Produce"}}'] - 2 * 50.0064) < 1e-9
    assert s['kafka_network_requestmetrics_requests_total{request="Produce"}'] == 1
    assert s["kafka_log_logflushstats_log_flush_time_seconds_count"] == 2
    assert s['kafka_server_socketservermetrics_connection_count{listener="PLAINTEXT",network_processor="0"}'] == 1
    assert s['kafka_server_socketservermetrics_connection_creation_total{listener="PLAINTEXT"}'] == 2
    assert s['kafka_coordinator_group_groupmetadatamanager_num_groups{state="Stable"}'] == 2
    assert 0.0 <= s['kafka_network_socketserver_network_processor_idle_ratio{network_processor="0"}'] <= 1.0
    assert 'kafka_server_kafkarequesthandlerpool_request_handler_idle_ratio{handler="1"}' in s
    # Only the processor reports a processor idle ratio (handlers have the probe too).
    assert not any(k.startswith("kafka_network_socketserver_network_processor_idle_ratio") and '"1"' in k for k in s)
    assert s["kafka_network_requestchannel_request_queue_size"] == 3
    assert s['kafka_server_app_info{broker_id="7",version="test"}'] == 1
    # Dead processes: their live gauges go, their counters stay.
    a = samples(texts["after"])
    assert not any(k.startswith("kafka_server_socketservermetrics_connection_count") for k in a)
    assert a['kafka_server_brokertopicmetrics_bytes_in_total{topic="t"}'] == 2000
    # Every declared name was exposed (the log gauges need partitions, the
    # per-dir one a log manager's dirs).
    names = {k.split("{")[0] for k in s}
    assert exposed_sample_names() - names <= {n for n in exposed_sample_names() if n.startswith("kafka_log_log_")} | {
        "kafka_server_brokertopicmetrics_bytes_out_total", "kafka_network_requestmetrics_errors_total",
        "kafka_log_logmanager_log_directory_offline",
        # written only by a Fetch v0-v3 (tests/integration/test_fetch_old_versions.py)
        "kafka_server_brokertopicmetrics_fetch_message_conversions_total",
        *(f"kafka_network_requestmetrics_message_conversions_time_seconds_{s}" for s in ("bucket", "count", "sum"))}


def test_error_codes_and_bytes_out_of_a_fetch_response(tmp_path):
    out = _run("""
        import json
        from kafkapy import metrics
        from kafkapy.metrics import exporter
        from kafkapy.protocol.api import API_TABLE
        from kafkapy.protocol.codec import RecordsRegions
        from kafkapy.server.handlers import construct
        import socket
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        server = metrics.configure("127.0.0.1", port, {}, {}, [])
        cls = API_TABLE[1].response_class(12)
        part = lambda i, code, records: {"partition_index": i, "error_code": code, "high_watermark": 0,
            "last_stable_offset": 0, "log_start_offset": 0, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": records}
        resp = construct(cls, {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": [
            {"topic": "a", "partitions": [part(0, 0, RecordsRegions([b"x" * 100], 100)), part(1, 1, b"")]},
            {"topic": "b", "partitions": [part(0, 0, b"y" * 7)]}]})
        codes = sorted(exporter._error_codes(resp))
        p = exporter.RequestProbe(exporter.Metrics(), {}, {}, "0")
        p.response_built(1, resp)
        p.response_built(1, object())  # garbage: counted as nothing, never raises
        # Bytes out are counted by the fetch handler, which knows the names
        # (Fetch v13+ answers carry topic ids only).
        p.fetched("a", 100)
        p.fetched("b", 7)
        # Fetch v0-v3's down-conversions: records per topic, and the time
        p.converted("a", 3, 0.001)
        p.converted("a", 2, 0.002)
        out, errors, conversions = dict(p.bytes_out), dict(p.errors), dict(p.conversions)
        p.publish()
        server.close()
        print(json.dumps({"codes": codes, "out": out, "errors": {f"{k[0]}/{k[1]}": v for k, v in errors.items()},
                          "conversions": conversions, "left": p.conversions}))
    """, tmp_path)
    r = json.loads(out.strip().splitlines()[-1])
    assert r["codes"] == [0, 0, 0, 1]  # top level + 3 partitions
    assert r["out"] == {"a": 100, "b": 7}
    assert r["errors"] == {"1/0": 3, "1/1": 1}
    assert (r["conversions"], r["left"]) == ({"a": 5}, {})


def test_grafana_dashboard_uses_only_exposed_metrics():
    dash = json.loads((REPO / "config" / "grafana-dashboard.json").read_text())
    assert dash["panels"] and dash["title"]
    exposed = exposed_sample_names()
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs.append(dash["templating"]["list"][1]["query"]["query"])
    assert len(exprs) >= 15
    promql_words = {"sum", "by", "rate", "avg", "topk", "histogram_quantile", "le", "label_values", "instance",
                    "topic", "request", "error", "listener", "state", "network_processor", "partition"}
    for expr in exprs:
        names = set(re.findall(r"\b(kafka_[a-z_]+)\b", expr))
        assert names, expr
        assert names <= exposed, f"{expr}: {names - exposed} not exposed"
        for word in re.findall(r"\b([a-z_]+)\s*\(", expr):
            assert word in promql_words, (word, expr)
    # Every metric family appears on some panel.
    families = {name for _a, _k, name, *_ in PROCESS_METRICS}
    used = " ".join(exprs)
    assert all(f in used for f in families), sorted(f for f in families if f not in used)
