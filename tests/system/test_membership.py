"""Cluster membership through a real ZooKeeper (issue 15, first step): three
kafkapy brokers started through their real entry point with
``zookeeper.connect`` check ``/cluster/id`` against their log dirs, register
with Kafka's JSON and elect exactly one controller; the controller's SIGKILL
moves the role with a higher epoch; a duplicate broker id and a log dir of
another cluster are refused; a SIGTERMed broker leaves at once."""

from __future__ import annotations

import pytest

from kafkapy.metadata.zk import data as zk_data
from support.broker import BrokerStartError
from support.wait import wait_for
from support.zookeeper import chroot_for

SESSION_MS = 4000  # a killed broker's registration goes after this
WAIT_S = 20.0


def _props(zk, chroot, broker_id):
    return {"zookeeper.connect": zk.connect_string(chroot), "broker.id": broker_id,
            "zookeeper.session.timeout.ms": SESSION_MS}


def _registered(zk_client):
    return {int(c) for c in zk_client.get_children("/brokers/ids")}


def _controller(zk_client):
    try:
        data, _ = zk_client.get("/controller")
    except Exception:
        return None
    return zk_data.decode_controller(data).broker_id


@pytest.fixture
def cluster(zookeeper, broker_factory, request):
    chroot = chroot_for(request)
    brokers = [broker_factory(_props(zookeeper, chroot, i)) for i in (1, 2, 3)]
    client = zookeeper.client(chroot)
    try:
        yield brokers, client
    finally:
        client.stop()
        client.close()


def test_three_brokers_register_and_elect_one_controller(cluster):
    brokers, zk = cluster
    wait_for(lambda: _registered(zk) == {1, 2, 3}, WAIT_S, "three registrations")
    for b, broker_id in zip(brokers, (1, 2, 3)):
        data, stat = zk.get(f"/brokers/ids/{broker_id}")
        reg = zk_data.decode_broker_registration(broker_id, data)
        assert (reg.broker.host, reg.broker.port) == ("127.0.0.1", b.port) and stat.ephemeralOwner
    cluster_id = zk_data.decode_cluster_id(zk.get("/cluster/id")[0])
    for b in brokers:
        meta = (b.log_dirs[0] / "meta.properties").read_text()
        assert f"cluster.id={cluster_id}" in meta
    controller = wait_for(lambda: _controller(zk), WAIT_S, "a controller")
    assert controller in (1, 2, 3)
    epoch = zk_data.decode_controller_epoch(zk.get("/controller_epoch")[0])
    assert epoch >= 1
    # The controller's SIGKILL: after its session times out another broker
    # takes the role, with a higher epoch.
    brokers[controller - 1].kill()
    new = wait_for(lambda: (c := _controller(zk)) not in (None, controller) and c, SESSION_MS / 1000 + 15,
                   "a new controller")
    assert new != controller
    assert zk_data.decode_controller_epoch(zk.get("/controller_epoch")[0]) > epoch
    assert wait_for(lambda: _registered(zk) == {1, 2, 3} - {controller}, WAIT_S, "the registration to go")
    # The killed broker restarts and registers again.
    brokers[controller - 1].start()
    wait_for(lambda: _registered(zk) == {1, 2, 3}, WAIT_S, "the restarted broker")
    # SIGTERM closes the session: the registration goes at once, not after the timeout.
    survivor = next(b for i, b in enumerate(brokers, 1) if i != new)
    survivor_id = brokers.index(survivor) + 1
    assert survivor.stop() == 0
    wait_for(lambda: survivor_id not in _registered(zk), 3, "a prompt deregistration")


def test_duplicate_broker_id_is_refused(zookeeper, broker_factory, request):
    chroot = chroot_for(request)
    first = broker_factory(_props(zookeeper, chroot, 7))
    second = broker_factory(_props(zookeeper, chroot, 7), start=False)
    try:
        second.start()
    except BrokerStartError:
        pass
    code = wait_for(lambda: second.proc.poll() is not None and [second.proc.returncode], WAIT_S,
                    "the duplicate to exit")[0]
    assert code != 0
    assert "broker id 7 is already registered" in second.log_text()
    assert first.running


def test_log_dir_of_another_cluster_is_refused(zookeeper, broker_factory, request):
    chroot = chroot_for(request)
    standalone = broker_factory({"broker.id": 5})
    assert standalone.stop() == 0
    old = (standalone.log_dirs[0] / "meta.properties").read_text()
    stored = next(line.split("=", 1)[1] for line in old.splitlines() if line.startswith("cluster.id="))
    # The standalone broker's log dir, on the standalone broker's port.
    joining = broker_factory({**_props(zookeeper, chroot, 5), "log.dirs": standalone.log_dirs[0]},
                             port=standalone.port, start=False)
    with pytest.raises(BrokerStartError):
        joining.start()
    log = joining.log_text()
    client = zookeeper.client(chroot)
    try:
        zk_id = zk_data.decode_cluster_id(client.get("/cluster/id")[0])
    finally:
        client.stop()
        client.close()
    assert stored in log and zk_id in log and "wrong cluster" in log


def test_unreachable_zookeeper_stops_start_up_with_a_message(broker_factory):
    from support.broker import free_port

    port = free_port()  # nothing listens there
    broker = broker_factory({"zookeeper.connect": f"127.0.0.1:{port}/kp",
                             "zookeeper.connection.timeout.ms": 2000}, start=False)
    with pytest.raises(BrokerStartError):
        broker.start()
    assert broker.proc.returncode not in (None, 0)
    assert f"cannot use ZooKeeper at zookeeper.connect=127.0.0.1:{port}/kp" in broker.log_text()
    assert "Traceback" not in broker.log_text()
