"""The systemd unit and its install command.

* ``systemd-analyze verify`` (Debian's systemd package) accepts the unit with
  ExecStart pointing at this installation's entry point;
* the unit's ExecStart line, run directly as the test's user with the paths
  substituted to temp dirs and ``RUNTIME_DIRECTORY`` set as systemd sets it,
  starts a broker that answers clients, keeps its metrics files in the
  runtime directory, and stops cleanly on SIGTERM within TimeoutStopSec;
* ``kafkapy-install-service --root`` lays the files out, re-runs safely,
  never overwrites an edited config, and uninstalls (``--purge`` too).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from support.broker import REPO_ROOT, free_port, server_start_command, write_properties
from support.rawclient import probe_api_versions

UNIT = REPO_ROOT / "systemd" / "kafkapy.service"


def unit_settings() -> dict[str, str]:
    settings = {}
    for line in UNIT.read_text().splitlines():
        m = re.match(r"^([A-Za-z]+)=(.*)$", line)
        if m:
            settings.setdefault(m.group(1), m.group(2))
    return settings


def seconds(value: str) -> float:
    m = re.fullmatch(r"(\d+)(s|min)?", value)
    assert m, value
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


def entry_point() -> str:
    argv, _ = server_start_command(Path("x"))
    if len(argv) != 2:
        pytest.skip("kafkapy-server-start is not installed beside the interpreter")
    return argv[0]


def test_unit_has_the_required_settings():
    s = unit_settings()
    assert s["User"] == "kafkapy"
    assert s["Restart"] == "on-failure"
    assert s["LimitNOFILE"] == "100000"
    assert s["RuntimeDirectory"] == "kafkapy"
    assert s["StandardOutput"] == "journal"
    assert s["ExecStart"].endswith("kafkapy-server-start /etc/kafkapy/server.properties")
    # TimeoutStopSec covers the default kafkapy.shutdown.timeout.ms (30 s) and then some.
    assert seconds(s["TimeoutStopSec"]) > 30
    assert "zookeeper.service" in UNIT.read_text()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="Debian's systemd package is not installed")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    from kafkapy.tools.install_service import unit_text

    unit = tmp_path / "kafkapy.service"
    unit.write_text(unit_text(entry_point()))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kafkapy.service" not in r.stdout + r.stderr, r.stdout + r.stderr


def test_exec_start_runs_a_broker_that_stops_cleanly_on_sigterm(tmp_path):
    s = unit_settings()
    argv = shlex.split(s["ExecStart"])
    assert argv[1] == "/etc/kafkapy/server.properties"
    port, metrics_port = free_port(), free_port()
    props = {
        line.split("=", 1)[0]: line.split("=", 1)[1]
        for line in (REPO_ROOT / "config" / "server.properties").read_text().splitlines()
        if line and not line.startswith("#") and "=" in line
    }
    props.update({"listeners": f"PLAINTEXT://127.0.0.1:{port}", "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                  "log.dirs": str(tmp_path / "data"), "prometheus.port": str(metrics_port),
                  "num.io.threads": "2", "num.network.threads": "1"})
    write_properties(tmp_path / "server.properties", props)
    argv = [entry_point(), str(tmp_path / "server.properties")]
    runtime = tmp_path / "run"
    runtime.mkdir()
    env = dict(os.environ, RUNTIME_DIRECTORY=str(runtime), PYTHONUNBUFFERED="1")
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log = open(tmp_path / "broker.log", "wb")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not probe_api_versions("127.0.0.1", port, 1, timeout_s=2.0):
            assert proc.poll() is None, (tmp_path / "broker.log").read_text()
            assert time.monotonic() < deadline, "broker did not answer"
            time.sleep(0.1)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
            assert b"kafka_server_app_info" in r.read()
        # The multiprocess files live in systemd's RuntimeDirectory.
        assert any(p.suffix == ".db" for p in (runtime / "metrics").iterdir())
        stop_limit = seconds(s["TimeoutStopSec"])
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)  # what systemd sends (KillMode=mixed: the main process only)
        code = proc.wait(stop_limit)
        assert code == 0, (tmp_path / "broker.log").read_text()[-3000:]
        assert time.monotonic() - started < stop_limit
        assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def test_install_service_lays_out_files_and_reruns_safely(tmp_path, capsys):
    from kafkapy.tools.install_service import main

    root = tmp_path / "root"
    exec_path = "/opt/kafkapy/bin/kafkapy-server-start"
    assert main(["--root", str(root), "--exec", exec_path]) == 0
    unit = root / "etc/systemd/system/kafkapy.service"
    config = root / "etc/kafkapy/server.properties"
    assert f"ExecStart={exec_path} /etc/kafkapy/server.properties" in unit.read_text()
    assert re.search(r"^log\.dirs=/var/lib/kafkapy$", config.read_text(), re.M)
    assert (root / "var/lib/kafkapy").is_dir()

    # An operator edits the config; a re-run keeps it and leaves the default beside it.
    config.write_text(config.read_text() + "\nnum.io.threads=16\n")
    edited = config.read_text()
    assert main(["--root", str(root), "--exec", exec_path]) == 0
    assert config.read_text() == edited
    assert (root / "etc/kafkapy/server.properties.dist").exists()
    (root / "var/lib/kafkapy/marker").write_text("data")

    assert main(["--root", str(root), "--uninstall"]) == 0
    assert not unit.exists()
    assert (root / "var/lib/kafkapy/marker").exists() and config.exists()
    assert main(["--root", str(root), "--uninstall", "--purge"]) == 0
    assert not (root / "var/lib/kafkapy").exists() and not config.exists()
