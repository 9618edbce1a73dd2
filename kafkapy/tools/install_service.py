"""``kafkapy-install-service``: install (or remove) kafkapy as a systemd service.

Install, each step skipped when already done, so re-running is safe:

1. the system user and group ``kafkapy`` (``useradd --system``);
2. ``/etc/kafkapy/server.properties`` from the repository's
   ``config/server.properties`` (or rendered from the config table) with
   ``log.dirs=/var/lib/kafkapy`` -- never overwriting an existing file: an
   edited config is the operator's; the new default goes beside it as
   ``server.properties.dist`` when they differ;
3. ``/var/lib/kafkapy`` (owned by kafkapy, mode 0750) for ``log.dirs``;
4. ``/etc/systemd/system/kafkapy.service`` from ``systemd/kafkapy.service``
   with ExecStart pointing at this installation's ``kafkapy-server-start``;
5. ``systemctl enable kafkapy`` (works without a running systemd: it only
   makes the symlink) and, when systemd is PID 1, ``daemon-reload`` (and
   ``start`` with ``--start``). In a container without systemd the unit is
   installed and enabled but nothing is started; the tool says so.

``--uninstall`` stops and disables the service and removes the unit; data
(``/var/lib/kafkapy``), config and user stay unless ``--purge``.

``--root DIR`` installs under DIR instead of ``/`` and skips everything that
touches the system (useradd, chown, systemctl): for packaging and tests.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

USER = "kafkapy"
UNIT_NAME = "kafkapy.service"
CONFIG_PATH = "etc/kafkapy/server.properties"
DATA_DIR = "var/lib/kafkapy"
UNIT_PATH = "etc/systemd/system/" + UNIT_NAME
REPO = Path(__file__).resolve().parents[2]


def _say(msg: str) -> None:
    print(f"kafkapy-install-service: {msg}")


def systemd_running() -> bool:
    """systemd is PID 1 (sd_booted(3)'s test); false in most containers."""
    return os.path.isdir("/run/systemd/system")


def server_start_path() -> str:
    """This installation's kafkapy-server-start (beside the interpreter first)."""
    beside = Path(sys.executable).parent / "kafkapy-server-start"
    if beside.exists():
        return str(beside)
    found = shutil.which("kafkapy-server-start")
    if found:
        return found
    raise SystemExit("kafkapy-server-start not found: install kafkapy first (pip install .)")


def unit_text(exec_path: str, source: Path | None = None) -> str:
    source = source or REPO / "systemd" / UNIT_NAME
    text = source.read_text()
    return re.sub(r"^ExecStart=\S+", f"ExecStart={exec_path}", text, count=1, flags=re.M)


def default_config_text(data_dir: str) -> str:
    source = REPO / "config" / "server.properties"
    if source.exists():
        text = source.read_text()
    else:
        from kafkapy.server.config.properties import render_properties

        text = render_properties({})
    if re.search(r"^log\.dirs=", text, flags=re.M):
        return re.sub(r"^log\.dirs=.*$", f"log.dirs={data_dir}", text, count=1, flags=re.M)
    return text + f"\nlog.dirs={data_dir}\n"


def _run(argv: list[str], check: bool = True) -> int:
    _say("$ " + " ".join(argv))
    return subprocess.run(argv, check=check).returncode


def _write_if_changed(path: Path, text: str, mode: int = 0o644) -> bool:
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return True


def install(root: Path, exec_path: str, start: bool) -> None:
    system = root == Path("/")
    if system and os.geteuid() != 0:
        raise SystemExit("run as root (or with sudo)")
    if system:
        if subprocess.run(["getent", "passwd", USER], capture_output=True).returncode != 0:
            _run(["useradd", "--system", "--user-group", "--home-dir", "/" + DATA_DIR,
                  "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
        else:
            _say(f"user {USER} exists")

    data = root / DATA_DIR
    data.mkdir(parents=True, exist_ok=True)
    os.chmod(data, 0o750)
    if system:
        shutil.chown(data, USER, USER)

    config = root / CONFIG_PATH
    wanted = default_config_text("/" + DATA_DIR)
    if config.exists():
        if config.read_text() != wanted:
            dist = config.with_name(config.name + ".dist")
            _write_if_changed(dist, wanted)
            _say(f"kept {config} (edited); the default is in {dist}")
        else:
            _say(f"{config} is up to date")
    else:
        _write_if_changed(config, wanted)
        _say(f"wrote {config}")

    unit = root / UNIT_PATH
    if _write_if_changed(unit, unit_text(exec_path)):
        _say(f"wrote {unit} (ExecStart={exec_path} {'/' + CONFIG_PATH})")
    else:
        _say(f"{unit} is up to date")
    if not system:
        return
    if shutil.which("systemctl") is None:
        _say("no systemctl: unit installed, not enabled")
        return
    if systemd_running():
        _run(["systemctl", "daemon-reload"])
    _run(["systemctl", "enable", UNIT_NAME], check=False)
    if not systemd_running():
        _say("systemd is not PID 1 here (a container?): the unit is installed and enabled "
             "but not started; start the broker with the unit's ExecStart line meanwhile")
    elif start:
        _run(["systemctl", "restart", UNIT_NAME])
    else:
        _say(f"start it with: systemctl start {UNIT_NAME}")


def uninstall(root: Path, purge: bool) -> None:
    system = root == Path("/")
    if system and os.geteuid() != 0:
        raise SystemExit("run as root (or with sudo)")
    unit = root / UNIT_PATH
    if system and shutil.which("systemctl"):
        if systemd_running():
            _run(["systemctl", "stop", UNIT_NAME], check=False)
        _run(["systemctl", "disable", UNIT_NAME], check=False)
    if unit.exists():
        unit.unlink()
        _say(f"removed {unit}")
    if system and systemd_running():
        _run(["systemctl", "daemon-reload"], check=False)
    if not purge:
        _say(f"kept {root / DATA_DIR} and {root / CONFIG_PATH} (--purge removes them)")
        return
    for path in (root / DATA_DIR, (root / CONFIG_PATH).parent):
        if path.exists():
            shutil.rmtree(path)
            _say(f"removed {path}")
    if system and subprocess.run(["getent", "passwd", USER], capture_output=True).returncode == 0:
        _run(["userdel", USER], check=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kafkapy-install-service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--uninstall", action="store_true", help="stop, disable and remove the unit")
    parser.add_argument("--purge", action="store_true", help="with --uninstall: also remove data, config and user")
    parser.add_argument("--start", action="store_true", help="(re)start the service after installing")
    parser.add_argument("--root", default="/", help="install under this directory, touching nothing else")
    parser.add_argument("--exec", dest="exec_path", help="kafkapy-server-start path for ExecStart")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    if args.uninstall:
        uninstall(root, args.purge)
    else:
        install(root, args.exec_path or server_start_path(), args.start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
