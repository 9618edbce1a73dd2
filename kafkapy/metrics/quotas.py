"""Quota and connection-limit metrics: Kafka's per-entity quota sensors and the
acceptor's blocked time.

* ``kafka_server_<Type>_<rate>{user, client_id}`` — the rate of a quota
  sensor, named as Kafka's ``kafka.server:type=<Type>,user=,client-id=``
  attributes (Produce ``byte-rate``, Fetch ``byte-rate``, Request
  ``request-time`` in percent of a thread, ControllerMutation
  ``mutation-rate``); the labels are the sensor's metric tags (an empty
  ``user`` or ``client_id`` where the quota entity has none), so a user
  quota shows once for all its clients, as in Kafka;
* ``kafka_server_<Type>_throttle_time{user, client_id}`` — the throttle time
  (ms) of the sensor's latest throttled request (Kafka reports the average
  over the quota window);
* ``kafka_network_Acceptor_AcceptorBlockedPercent{listener}`` — the share of
  the last half second the acceptor could not accept on the listener
  (max.connections, max.connection.creation.rate).

Values are set when a quota is recorded (only for clients some quota
applies to) and by the acceptor's loop; gauges keep the most recent value of
any process (prometheus_client's ``mostrecent`` mode). The probe of a process
is made on first use (``probe()``): the null probe unless metrics are on.
"""

from __future__ import annotations

import os

from kafkapy import metrics

RATE_NAMES = {"Produce": "byte_rate", "Fetch": "byte_rate", "Request": "request_time",
              "ControllerMutation": "mutation_rate"}


class NullQuotaProbe:
    __slots__ = ()

    def recorded(self, quota_type: str, user: str, client_id: str, rate: float) -> None:
        pass

    def throttled(self, quota_type: str, user: str, client_id: str, throttle_ms: int) -> None:
        pass

    def acceptor_blocked(self, listener: str, fraction: float) -> None:
        pass


NULL = NullQuotaProbe()


class QuotaProbe:
    """A process's gauges (owned by that process)."""

    def __init__(self):
        from prometheus_client import Gauge

        labels = ("user", "client_id")
        self.rates = {t: Gauge(f"kafka_server_{t}_{name}", f"Quota sensor {name} ({t}, Kafka's "
                               f"{name.replace('_', '-')})", labels, multiprocess_mode="mostrecent", registry=None)
                      for t, name in RATE_NAMES.items()}
        self.throttles = {t: Gauge(f"kafka_server_{t}_throttle_time", f"Throttle time (ms) of the latest "
                                   f"throttled {t} request (Kafka's throttle-time)", labels,
                                   multiprocess_mode="mostrecent", registry=None) for t in RATE_NAMES}
        self.blocked = Gauge("kafka_network_Acceptor_AcceptorBlockedPercent",
                             "Share of time the acceptor could not accept on the listener", ("listener",),
                             multiprocess_mode="mostrecent", registry=None)

    def recorded(self, quota_type: str, user: str, client_id: str, rate: float) -> None:
        self.rates[quota_type].labels(user, client_id).set(rate)

    def throttled(self, quota_type: str, user: str, client_id: str, throttle_ms: int) -> None:
        self.throttles[quota_type].labels(user, client_id).set(throttle_ms)

    def acceptor_blocked(self, listener: str, fraction: float) -> None:
        self.blocked.labels(listener).set(fraction)


_probe = NULL
_pid = None


def probe():
    """This process's probe."""
    global _probe, _pid
    if _pid != os.getpid():
        _pid = os.getpid()
        _probe = QuotaProbe() if metrics.enabled() else NULL
    return _probe
