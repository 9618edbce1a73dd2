"""Shared fixtures: real broker processes for integration tests.

One broker form and one cluster form per scope (no test constructs
``BrokerProcess`` or ``Cluster`` itself):

* per test: ``broker`` (overrides via
  ``@pytest.mark.broker_config({"num.io.threads": 2})``) and
  ``broker_factory(overrides=None, port=None, start=True, **kwargs)`` for as
  many as a test needs; ``make_cluster(**overrides)`` / ``lab_cluster``
  (support.cluster) for clusters, each in a chroot of its own;
* per module: ``support.clients.module_broker(tmp_path_factory, ...)`` and
  ``support.cluster.running_cluster(...)``, context managers a module-scoped
  fixture enters.

Each ends every process it started and fails if any broker child outlived
its supervisor.  ``zookeeper`` (one server per session), ``zookeeper_factory``
and ``zookeeper_ensemble`` come from support.zookeeper.
"""

from __future__ import annotations

import pytest

from support.broker import BrokerProcess, free_port
# The shared fixtures, offered to every test from here (a module imports none).
from support.cluster import lab_cluster, make_cluster, network_lab, zookeeper_lab, zookeeper_lab_cluster  # noqa: F401
from support.java_client import java_client  # noqa: F401
from support.zookeeper import zookeeper, zookeeper_ensemble, zookeeper_factory  # noqa: F401

__all__ = ["BrokerProcess", "free_port"]

_TEST_STARTED_AT = pytest.StashKey[float]()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "broker_config(overrides): server.properties overrides for the `broker` fixture")
    config.addinivalue_line(
        "markers", "long: a fault or system test that takes more than ~30 s; skipped unless selected "
                   "with -m long (or any -m naming it) or KAFKAPY_LONG_TESTS=1")


def pytest_collection_modifyitems(config, items):
    """The default run (CI's) is the representative set: ``long`` tests only on request."""
    import os

    if "long" in (config.getoption("markexpr") or "") or os.environ.get("KAFKAPY_LONG_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="long test: run with -m long or KAFKAPY_LONG_TESTS=1")
    for item in items:
        if item.get_closest_marker("long") is not None:
            item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    import time

    item.stash[_TEST_STARTED_AT] = time.time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries the errors its brokers logged (CI keeps no broker logs)."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and _TEST_STARTED_AT in item.stash:
        from support.broker import errors_since

        for name, errors in errors_since(item.stash[_TEST_STARTED_AT]):
            report.sections.append((f"errors logged by broker {name}", errors))


@pytest.fixture
def broker_factory(tmp_path_factory):
    """``make(overrides=None, port=None, start=True, **kwargs) -> BrokerProcess``."""
    started: list[BrokerProcess] = []

    def make(overrides=None, port=None, start=True, **kwargs) -> BrokerProcess:
        work_dir = tmp_path_factory.mktemp("broker")
        broker = BrokerProcess(work_dir, overrides=overrides, port=port, **kwargs)
        started.append(broker)
        if start:
            broker.start()
        return broker

    yield make

    leaks = []
    for broker in started:
        broker.close()
        if broker.leaked:
            leaks.append(f"{broker!r}: " + "; ".join(broker.leaked) + f"\nlog tail:\n{broker.log_tail()}")
    assert not leaks, "broker processes outlived their test:\n" + "\n".join(leaks)


@pytest.fixture
def broker(request, broker_factory) -> BrokerProcess:
    marker = request.node.get_closest_marker("broker_config")
    overrides = dict(marker.args[0]) if marker and marker.args else {}
    return broker_factory(overrides)
