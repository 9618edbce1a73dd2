"""Prometheus metrics: the only package that imports prometheus_client.

The rest of the broker reports through ``kafkapy.metrics.probes`` (null
probes unless metrics are on). The supervisor drives the rest:

1. ``server = configure(host, port, api_names, error_names, listener_names)``
   before forking (None when ``port`` is 0): chooses and clears the
   multiprocess directory, sets ``PROMETHEUS_MULTIPROC_DIR`` (children must
   inherit it before they import prometheus_client) and defines the metrics.
2. ``start_process(name)`` first thing in each child (``processor-<i>``,
   ``handler-<i>``, ``group-coordinator``, ...) and in the supervisor after
   forking: installs fresh probes for this process.
3. ``server.serve(request_queue, broker_id, version)`` after forking (the
   HTTP thread must not exist across fork), ``server.snapshot.maybe_refresh``
   on the supervisor's tick, ``server.process_dead(pid)`` for every child
   that exits, ``server.close()`` at the end.

The multiprocess directory is ``$PROMETHEUS_MULTIPROC_DIR`` if set, else
``$RUNTIME_DIRECTORY/metrics`` (systemd's ``RuntimeDirectory=kafkapy``),
else a fresh temporary directory removed at exit. Only ``*.db`` files are
removed at start-up: a directory the operator pointed us at is never wiped.
"""

from __future__ import annotations

import glob
import os
import tempfile

from kafkapy.metrics import probes

# Set by configure() in the supervisor and inherited by forked children.
_state: dict | None = None


def multiproc_dir_for(environ=os.environ) -> tuple[str, bool]:
    """(directory, owned): owned = a temp dir we created and remove at exit."""
    explicit = environ.get("PROMETHEUS_MULTIPROC_DIR")
    if explicit:
        return explicit, False
    runtime = environ.get("RUNTIME_DIRECTORY")
    if runtime:
        # systemd may pass several colon-separated directories; ours is first.
        return os.path.join(runtime.split(":")[0], "metrics"), False
    return tempfile.mkdtemp(prefix="kafkapy-metrics-"), True


def clear_dir(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    for f in glob.glob(os.path.join(path, "*.db")):
        try:
            os.remove(f)
        except FileNotFoundError:
            pass


def configure(host: str, port: int, api_names: dict, error_names: dict, listener_names: list):
    """Turn metrics on for this process tree; returns the MetricsServer or None."""
    global _state
    if not port:
        return None
    path, owned = multiproc_dir_for()
    clear_dir(path)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    from kafkapy.metrics import exporter

    _state = {
        "metrics": exporter.Metrics(),
        "api_names": dict(api_names),
        "error_names": dict(error_names),
        "listener_names": list(listener_names),
    }
    return exporter.MetricsServer(host, port, path, owned)


def enabled() -> bool:
    return _state is not None


def start_process(name: str) -> None:
    """Install this process's probes (fresh ones: never a forked parent's)."""
    if _state is None:
        probes.install()
        return
    from kafkapy.metrics import exporter

    m = _state["metrics"]
    api_names = _state["api_names"]
    ident = name.rsplit("-", 1)[-1] if "-" in name else name
    probes.install(
        exporter.NetworkProbe(m, api_names, ident, _state["listener_names"]),
        exporter.RequestProbe(m, api_names, _state["error_names"], ident),
        exporter.LogProbe(m),
        exporter.GroupProbe(m),
        exporter.ReplicaProbe(m),
    )


def disable() -> None:
    """Back to null probes (tests)."""
    global _state
    _state = None
    probes.install()
