"""The controller child: the broker's ZooKeeper session (cluster mode).

Forked by the supervisor when ``zookeeper.connect`` is set (docs/architecture.md,
"Cluster mode"). It owns the broker's one session, as Kafka's broker owns
its one KafkaZkClient:

* registers ``/brokers/ids/<broker.id>`` with the advertised endpoints; a
  broker id another live broker holds stops it (exit 1, which stops the
  broker: a dead child takes the broker down);
* runs the controller election: elected when ``/controller`` is absent,
  watching it to run again when it goes;
* on a lost session (kazoo opens a new one by itself), registers and runs
  the election again, as Kafka's broker does after a session expiry;
* on SIGTERM closes the session, so the registration and a held
  ``/controller`` go at once rather than at the session timeout.

The controller's own work (``kafkapy.controller.state``) is not wired yet:
an elected broker only holds the role.
"""

from __future__ import annotations

import logging
import signal
import threading

from kafkapy.coordination.zookeeper import BrokerIdInUse, ZkClient

log = logging.getLogger("kafkapy.controller")
_TICK_S = 0.2


def controller_main(config, broker_info, table=None, make_broker=None) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    client = ZkClient(config["zookeeper.connect"], config["zookeeper.session.timeout.ms"],
                      config["zookeeper.connection.timeout.ms"]).connect()
    try:
        new_session = threading.Event()
        controller_moved = threading.Event()
        client.on_new_session(new_session.set)
        try:
            client.register_broker(broker_info)
        except BrokerIdInUse as exc:
            log.error("%s; stopping", exc)
            raise SystemExit(1) from None
        log.info("registered broker %d in ZooKeeper", broker_info.broker_id)
        client.watch_controller(lambda _event: controller_moved.set())
        _elect(client, broker_info.broker_id)
        while not stop.wait(_TICK_S):
            if new_session.is_set():
                new_session.clear()
                log.warning("ZooKeeper session was lost; registering again")
                client.register_broker(broker_info)
                client.watch_controller(lambda _event: controller_moved.set())
                controller_moved.set()
            if controller_moved.is_set():
                controller_moved.clear()
                if client.controller_id() == -1:
                    _elect(client, broker_info.broker_id)
    finally:
        client.close()


def _elect(client, broker_id: int) -> None:
    result = client.try_elect_controller(broker_id)
    if result.elected:
        log.info("broker %d is the controller (epoch %d)", broker_id, result.controller_epoch)
    else:
        log.info("broker %d is the controller (epoch %d)", result.controller_id, result.controller_epoch)
