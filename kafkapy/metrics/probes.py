"""Probes: the only way the broker reports metrics.

Code anywhere in the broker calls a method on one of the process-global probe
objects of this module::

    from kafkapy.metrics import probes
    probes.log.appended(topic, size_bytes, records)

With metrics off (``prometheus.port=0``, tests, tools) each object is a null
probe whose methods do nothing, and prometheus_client is never imported.
With metrics on, ``kafkapy.metrics.start_process`` replaces them, in each
forked child, with the accumulating probes of ``kafkapy.metrics.exporter``.

Ownership: every probe object is owned by the one process it lives in and is
not thread-safe (each broker process is single-threaded; the supervisor's
HTTP thread never touches probes). Real probes accumulate into plain Python
ints/lists and publish to prometheus_client's per-process mmap files at most
every ``PUBLISH_INTERVAL_S`` (and when the process stops): an update through
prometheus_client costs 1 us per counter and 2 us per histogram observation
(measured: 0.26.0, multiprocess mode, this machine class), about 9 us for the
five series a request touches, against 0.06 us for a list increment.

Probe API (the contract other modules code against):

* ``network`` (processors): ``connection_opened(listener)``,
  ``connection_closed(listener)`` (listener = index into ``listeners``),
  ``request_completed(api_key, total_s, send_s)``, ``selected(idle_s)``,
  ``maybe_publish(now_s)``.
* ``request`` (handler workers): ``request_handled(api_key, queue_s, local_s)``,
  ``response_built(api_key, response)`` (error codes; bytes out of Fetch),
  ``waited(idle_s)``, ``maybe_publish(now_s)``.
* ``log`` (storage, any process): ``appended(topic, size_bytes, records)``,
  ``flushed(seconds)``.
* ``group`` (the group coordinator): ``set_group_counts({state: count})``
  with Kafka's state names (``PreparingRebalance``, ``CompletingRebalance``,
  ``Stable``, ``Dead``, ``Empty``); states left out count 0.
* ``replica`` (cluster mode: the controller child's ISR job, the replica
  fetchers): ``isr_shrunk()``, ``isr_expanded()``, ``fetcher_lag(max_lag)``;
  rare or per fetch response, so written at once.

``publish()`` pushes whatever the current process accumulated (call it
before a process exits; the reactor loops call ``maybe_publish``).
"""

from __future__ import annotations

# How stale a scraped counter may be, at most, while a process is busy. Idle
# processes publish when their loops wake (processors: 0.5 s select timeout;
# workers: 0.5 s queue timeout), so a scrape sees every finished request
# within about 1 s.
PUBLISH_INTERVAL_S = 0.5


class NullNetworkProbe:
    __slots__ = ()

    def connection_opened(self, listener: int) -> None:
        pass

    def connection_closed(self, listener: int) -> None:
        pass

    def request_completed(self, api_key: int, total_s: float, send_s: float) -> None:
        pass

    def selected(self, idle_s: float) -> None:
        pass

    def maybe_publish(self, now_s: float) -> None:
        pass

    def publish(self) -> None:
        pass


class NullRequestProbe:
    __slots__ = ()

    def request_handled(self, api_key: int, queue_s: float, local_s: float) -> None:
        pass

    def response_built(self, api_key: int, response) -> None:
        pass

    def fetched(self, topic: str, size_bytes: int) -> None:
        pass

    def converted(self, topic: str, records: int, seconds: float) -> None:
        pass

    def waited(self, idle_s: float) -> None:
        pass

    def maybe_publish(self, now_s: float) -> None:
        pass

    def publish(self) -> None:
        pass


class NullLogProbe:
    __slots__ = ()

    def appended(self, topic: str, size_bytes: int, records: int) -> None:
        pass

    def flushed(self, seconds: float) -> None:
        pass

    def cleaned(self, max_dirty_percent: int, max_clean_time_s: float, recopy_percent: int) -> None:
        pass

    def publish(self) -> None:
        pass


class NullGroupProbe:
    __slots__ = ()

    def set_group_counts(self, counts_by_state) -> None:
        pass


class NullReplicaProbe:
    __slots__ = ()

    def isr_shrunk(self) -> None:
        pass

    def isr_expanded(self) -> None:
        pass

    def fetcher_lag(self, max_lag: int) -> None:
        pass


NULL_NETWORK = NullNetworkProbe()
NULL_REQUEST = NullRequestProbe()
NULL_LOG = NullLogProbe()
NULL_GROUP = NullGroupProbe()
NULL_REPLICA = NullReplicaProbe()

# The current process's probes (replaced by kafkapy.metrics.start_process).
network = NULL_NETWORK
request = NULL_REQUEST
log = NULL_LOG
group = NULL_GROUP
replica = NULL_REPLICA


def install(network_probe=None, request_probe=None, log_probe=None, group_probe=None,
            replica_probe=None) -> None:
    """Replace this process's probes (None = the null probe)."""
    global network, request, log, group, replica
    network = network_probe or NULL_NETWORK
    request = request_probe or NULL_REQUEST
    log = log_probe or NULL_LOG
    group = group_probe or NULL_GROUP
    replica = replica_probe or NULL_REPLICA


def publish() -> None:
    """Push everything this process accumulated to the shared metric files."""
    network.publish()
    request.publish()
    log.publish()
