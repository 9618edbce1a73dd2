"""The prometheus_client side of metrics: definitions, real probes, /metrics.

Imported only when metrics are on, and only after ``PROMETHEUS_MULTIPROC_DIR``
is set (``kafkapy.metrics.configure`` does both), because prometheus_client
picks its value storage at import time.

Process model (docs/architecture.md): every broker process writes its own
``<type>_<pid>.db`` files in the multiprocess directory through its probes;
the supervisor's HTTP thread merges all of them at scrape time
(``MultiProcessCollector``) and adds what it can read itself (``BrokerCollector``:
request queue size, per-partition log gauges, partition counts).

Names follow Kafka's JMX beans, ``kafka_<domain>_<type>_<name>`` in
Prometheus style (see kafkapy/metrics/README.md for the mapping); times are
in seconds, Prometheus' base unit, where Kafka's are in ms.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import os
import shutil
import socket
import threading
import time
import typing

from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app, values
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from kafkapy.metrics.names import COUNTER, HISTOGRAM, PROCESS_METRICS
from kafkapy.metrics import probes
from kafkapy.metrics.probes import PUBLISH_INTERVAL_S

log = logging.getLogger("kafkapy.metrics")

# Request and flush time buckets, in seconds: 0.5 ms (a metadata request on
# an idle broker) up to 30 s (the default request.timeout.ms is 30 s).
TIME_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                  1.0, 2.5, 5.0, 10.0, 30.0)
_N_BUCKETS = len(TIME_BUCKETS_S) + 1  # + the +Inf bucket

# Kafka's group states (GroupState.scala), the label values of num_groups.
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")


def _check_multiprocess() -> None:
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        raise RuntimeError("PROMETHEUS_MULTIPROC_DIR must be set before metrics are used")
    if values.ValueClass is values.MutexValue:
        # prometheus_client was imported before the variable was set (e.g. by
        # a test in the same interpreter): choose the mmap storage now.
        values.ValueClass = values.get_value_class()


class Metrics:
    """Every metric the broker processes write (``names.PROCESS_METRICS``).

    Created in the supervisor before forking; children inherit the objects,
    and prometheus_client notices the new pid on the first write and
    switches to the child's own file.
    """

    def __init__(self):
        _check_multiprocess()
        for attr, kind, name, doc, labels, mode in PROCESS_METRICS:
            if kind == COUNTER:
                metric = Counter(name, doc, labels, registry=None)
            elif kind == HISTOGRAM:
                metric = Histogram(name, doc, labels, buckets=TIME_BUCKETS_S, registry=None)
            else:
                metric = Gauge(name, doc, labels, multiprocess_mode=mode, registry=None)
            setattr(self, attr, metric)


class _Hist:
    """A process-local histogram: bucket counts and a sum, published as deltas."""

    __slots__ = ("buckets", "sum")

    def __init__(self):
        self.buckets = [0] * _N_BUCKETS
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bucket (le).
        self.buckets[bisect.bisect_left(TIME_BUCKETS_S, value)] += 1
        self.sum += value

    def publish_to(self, child) -> None:
        # prometheus_client keeps one value per bucket (not cumulative) plus
        # the sum; adding our deltas there equals calling observe() for each
        # value, one mmap write per touched bucket instead of two per value.
        buckets = self.buckets
        for i in range(_N_BUCKETS):
            n = buckets[i]
            if n:
                child._buckets[i].inc(n)
                buckets[i] = 0
        child._sum.inc(self.sum)
        self.sum = 0.0


class _RequestStats:
    __slots__ = ("count", "a", "b")

    def __init__(self):
        self.count = 0
        self.a = _Hist()
        self.b = _Hist()


class _Publisher:
    """Shared publishing cadence and label-child caches (owned by one process)."""

    def __init__(self, metrics: Metrics, api_names: dict):
        self.m = metrics
        self.api_names = api_names
        self._next_publish = 0.0
        self._children: dict = {}

    def child(self, metric, *labels):
        key = (id(metric), labels)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = metric.labels(*labels)
        return c

    def api_name(self, api_key: int) -> str:
        name = self.api_names.get(api_key)
        return name if name is not None else str(api_key)

    def maybe_publish(self, now_s: float) -> None:
        """Publish every probe of this process (log probes have no loop of their own)."""
        if now_s >= self._next_publish:
            self._next_publish = now_s + PUBLISH_INTERVAL_S
            probes.publish()

    def publish(self) -> None:
        raise NotImplementedError

    def _publish_idle(self, gauge, label: str) -> None:
        """Set the idle-ratio gauge for the window since the last publish
        (``idle_s``, ``looped``, ``window_start`` are kept by the subclass)."""
        now = time.monotonic()
        elapsed = now - self.window_start
        if elapsed > 0 and self.looped:
            self.child(gauge, label).set(min(1.0, self.idle_s / elapsed))
        self.idle_s = 0.0
        self.window_start = now


class NetworkProbe(_Publisher):
    """A processor's probe: connections, total and send times, idle ratio."""

    def __init__(self, metrics, api_names, processor_id: str, listener_names: list[str]):
        super().__init__(metrics, api_names)
        self.processor_id = processor_id
        self.listener_names = listener_names
        self.stats: dict[int, _RequestStats] = {}
        self.open_by_listener: dict[int, int] = {}
        self.idle_s = 0.0
        self.window_start = time.monotonic()
        # Only the process whose loop reports idle time owns the idle gauge
        # of its id (every process has every probe).
        self.looped = False

    def _listener(self, listener: int) -> str:
        if 0 <= listener < len(self.listener_names):
            return self.listener_names[listener]
        return str(listener)

    def connection_opened(self, listener: int) -> None:
        n = self.open_by_listener.get(listener, 0) + 1
        self.open_by_listener[listener] = n
        name = self._listener(listener)
        self.child(self.m.connection_creation, name).inc()
        self.child(self.m.connection_count, name, self.processor_id).set(n)

    def connection_closed(self, listener: int) -> None:
        n = max(0, self.open_by_listener.get(listener, 0) - 1)
        self.open_by_listener[listener] = n
        self.child(self.m.connection_count, self._listener(listener), self.processor_id).set(n)

    def request_completed(self, api_key: int, total_s: float, send_s: float,
                          _bisect=bisect.bisect_left, _bounds=TIME_BUCKETS_S) -> None:
        # Inlined _Hist.observe: two method calls are a third of this probe's cost.
        s = self.stats.get(api_key)
        if s is None:
            s = self.stats[api_key] = _RequestStats()
        s.count += 1
        a = s.a
        a.buckets[_bisect(_bounds, total_s)] += 1
        a.sum += total_s
        b = s.b
        b.buckets[_bisect(_bounds, send_s)] += 1
        b.sum += send_s

    def selected(self, idle_s: float) -> None:
        self.idle_s += idle_s
        self.looped = True

    def publish(self) -> None:
        m = self.m
        for api_key, s in self.stats.items():
            if s.count:
                name = self.api_name(api_key)
                self.child(m.requests, name).inc(s.count)
                s.count = 0
                s.a.publish_to(self.child(m.total_time, name))
                s.b.publish_to(self.child(m.response_send_time, name))
        self._publish_idle(m.processor_idle, self.processor_id)


class RequestProbe(_Publisher):
    """A handler's probe: queue and local times, errors, bytes out, idle ratio."""

    def __init__(self, metrics, api_names, error_names: dict, handler_id: str):
        super().__init__(metrics, api_names)
        self.error_names = error_names
        self.handler_id = handler_id
        self.stats: dict[int, _RequestStats] = {}
        self.errors: dict[tuple[int, int], int] = {}
        self.bytes_out: dict[str, int] = {}
        self.conversions: dict[str, int] = {}
        self.conversion_time = _Hist()
        self._warned = False
        self.idle_s = 0.0
        self.window_start = time.monotonic()
        # Only the process whose loop reports idle time owns the idle gauge
        # of its id (every process has every probe).
        self.looped = False
        self.busy = False

    def request_handled(self, api_key: int, queue_s: float, local_s: float,
                        _bisect=bisect.bisect_left, _bounds=TIME_BUCKETS_S) -> None:
        s = self.stats.get(api_key)
        if s is None:
            s = self.stats[api_key] = _RequestStats()
        s.count += 1
        if queue_s >= 0:
            a = s.a
            a.buckets[_bisect(_bounds, queue_s)] += 1
            a.sum += queue_s
        b = s.b
        b.buckets[_bisect(_bounds, local_s)] += 1
        b.sum += local_s

    def response_built(self, api_key: int, response) -> None:
        try:
            counts = self.errors
            if api_key == 0:
                # Produce, the hot one: the generic walk costs ~5 us, this ~1 us.
                for t in response.responses:
                    for p in t.partition_responses:
                        key = (0, int(p.error_code))
                        counts[key] = counts.get(key, 0) + 1
                return
            for code in _error_codes(response):
                key = (api_key, code)
                counts[key] = counts.get(key, 0) + 1
        except Exception:
            # Metrics must never cost a request its answer.
            if not self._warned:
                self._warned = True
                log.exception("cannot count the response of api key %d", api_key)

    def fetched(self, topic: str, size_bytes: int) -> None:
        """Record bytes a Fetch answer carries for ``topic`` (BytesOutPerSec;
        the handler counts them, as it alone knows the names of Fetch v13+'s
        topic ids)."""
        out = self.bytes_out
        out[topic] = out.get(topic, 0) + size_bytes

    def converted(self, topic: str, records: int, seconds: float) -> None:
        """A Fetch v0-v3 partition's down-conversion: ``records`` converted
        (FetchMessageConversionsPerSec) in ``seconds`` (MessageConversionsTimeMs)."""
        self.conversions[topic] = self.conversions.get(topic, 0) + records
        self.conversion_time.observe(seconds)

    def waited(self, idle_s: float) -> None:
        self.idle_s += idle_s
        self.looped = True

    def publish(self) -> None:
        m = self.m
        for api_key, s in self.stats.items():
            if s.count:
                s.count = 0
                name = self.api_name(api_key)
                s.a.publish_to(self.child(m.request_queue_time, name))
                s.b.publish_to(self.child(m.local_time, name))
        if self.errors:
            for (api_key, code), n in self.errors.items():
                error = self.error_names.get(code) or str(code)
                self.child(m.errors, self.api_name(api_key), error).inc(n)
            self.errors.clear()
        if self.bytes_out:
            for topic, n in self.bytes_out.items():
                self.child(m.bytes_out, topic).inc(n)
            self.bytes_out.clear()
        if self.conversions:
            for topic, n in self.conversions.items():
                self.child(m.fetch_message_conversions, topic).inc(n)
            self.conversions.clear()
            self.conversion_time.publish_to(self.child(m.message_conversions_time, "Fetch"))
        self._publish_idle(m.handler_idle, self.handler_id)


class LogProbe(_Publisher):
    """Appends and flushes of the logs this process touches."""

    def __init__(self, metrics):
        super().__init__(metrics, {})
        self.by_topic: dict[str, list] = {}  # topic -> [bytes, records]
        self.flush = _Hist()
        self.flushes = 0

    def appended(self, topic: str, size_bytes: int, records: int) -> None:
        c = self.by_topic.get(topic)
        if c is None:
            c = self.by_topic[topic] = [0, 0]
        c[0] += size_bytes
        c[1] += records

    def flushed(self, seconds: float) -> None:
        self.flush.observe(seconds)
        self.flushes += 1

    def cleaned(self, max_dirty_percent: int, max_clean_time_s: float, recopy_percent: int) -> None:
        """A log cleaner pass (rare): its three gauges are set at once."""
        m = self.m
        m.cleaner_max_dirty_percent.set(max_dirty_percent)
        m.cleaner_max_clean_time.set(max_clean_time_s)
        m.cleaner_recopy_percent.set(recopy_percent)

    def publish(self) -> None:
        m = self.m
        if self.by_topic:
            for topic, c in self.by_topic.items():
                if c[0] or c[1]:
                    self.child(m.bytes_in, topic).inc(c[0])
                    self.child(m.messages_in, topic).inc(c[1])
                    c[0] = c[1] = 0
        if self.flushes:
            self.flushes = 0
            self.flush.publish_to(m.flush_time)


class GroupProbe:
    """Group counts by state, written at once (they change rarely)."""

    def __init__(self, metrics):
        self.m = metrics
        self.children = {s: metrics.num_groups.labels(s) for s in GROUP_STATES}

    def set_group_counts(self, counts_by_state) -> None:
        for state, child in self.children.items():
            child.set(counts_by_state.get(state, 0))
        for state, n in counts_by_state.items():
            if state not in self.children:
                self.children[state] = self.m.num_groups.labels(state)
                self.children[state].set(n)


class ReplicaProbe:
    """ISR changes and the fetchers' lag (cluster mode), written at once:
    an ISR change is rare, a lag is set once per fetch response."""

    def __init__(self, metrics):
        self.m = metrics

    def isr_shrunk(self) -> None:
        self.m.isr_shrinks.inc()

    def isr_expanded(self) -> None:
        self.m.isr_expands.inc()

    def fetcher_lag(self, max_lag: int) -> None:
        self.m.replica_max_lag.set(max_lag)


# -- error codes in responses ---------------------------------------------------
# Kafka's ErrorsPerSec counts every error code of a response (errorCounts(),
# NONE included). The walk follows, per kio class, only the fields that can
# hold an error_code: a plan computed once per class.

_PLANS: dict[type, tuple] = {}


def _entity_type(tp):
    """The kio entity class a field holds: (cls, many) or None."""
    if dataclasses.is_dataclass(tp):
        return tp, False
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is tuple and args and dataclasses.is_dataclass(args[0]):
        return args[0], True
    if args and origin is not tuple:  # Optional[Entity] and other unions
        for a in args:
            if dataclasses.is_dataclass(a):
                return a, False
    return None


def _plan(cls) -> tuple:
    has_error = False
    nested = []
    for f in dataclasses.fields(cls):
        if f.name == "error_code":
            has_error = True
            continue
        et = _entity_type(f.type)
        if et is not None and _may_hold_errors(et[0], set()):
            nested.append((f.name, et[1]))
    plan = (has_error, tuple(nested))
    _PLANS[cls] = plan
    return plan


def _may_hold_errors(cls, seen) -> bool:
    if cls in seen:
        return False
    seen.add(cls)
    for f in dataclasses.fields(cls):
        if f.name == "error_code":
            return True
        et = _entity_type(f.type)
        if et is not None and _may_hold_errors(et[0], seen):
            return True
    return False


def _error_codes(entity):
    """Yield every error_code in a response entity (ints)."""
    stack = [entity]
    while stack:
        obj = stack.pop()
        plan = _PLANS.get(type(obj))
        if plan is None:
            plan = _plan(type(obj))
        has_error, nested = plan
        if has_error:
            yield int(obj.error_code)
        for name, many in nested:
            v = getattr(obj, name)
            if v is None:
                continue
            if many:
                stack.extend(v)
            else:
                stack.append(v)


# -- the supervisor side ----------------------------------------------------------

class PartitionSnapshot:
    """Per-partition log gauges, refreshed by the supervisor's main thread.

    ``rows`` is replaced whole (never mutated), so the HTTP thread reads a
    consistent list without a lock.
    """

    def __init__(self):
        # (topic, partition, size_bytes, segments, leo, lso, leader_id,
        #  replica_count, isr_count, min_insync_replicas)
        self.rows: list[tuple] = []
        self.refreshed_at = 0.0
        self._next = 0.0
        # Set by the supervisor: the current cluster metadata (for the
        # controller's gauges); None reports as a standalone broker.
        self.metadata = None
        # [(log dir, 1 if offline else 0)]: the LogManager's failure channel
        # (storage.log_dirs), read at each refresh.
        self.log_dirs: list[tuple] = []

    def maybe_refresh(self, log_manager, now_s: float) -> None:
        if now_s < self._next:
            return
        started = time.monotonic()
        rows = []
        for (topic, partition), lg in list(log_manager.logs.items()):
            if lg.closed:
                continue
            try:
                with lg.lock(1.0):
                    segments = lg.segments()
                    leader_id, _epoch, _partition_epoch, replica_count, isr_mask = lg.state.role()
                    rows.append((topic, partition, sum(s.size for s in segments), len(segments),
                                 lg.log_end_offset, lg.log_start_offset, leader_id, replica_count,
                                 isr_mask.bit_count(), lg.config.min_insync_replicas))
            except Exception as exc:  # a partition deleted meanwhile, a lock timeout
                log.debug("no log metrics for %s-%d: %s", topic, partition, exc)
        self.rows = rows
        channel = getattr(log_manager, "failure_channel", None)
        if channel is not None:
            offline = set(channel.offline_dirs())
            self.log_dirs = [(d, int(d in offline)) for d in channel.log_dirs]
        took = time.monotonic() - started
        # Every second, or less often when a refresh is slow (thousands of
        # partitions): at most ~10% of the supervisor's time goes here.
        self._next = now_s + max(1.0, 10 * took)
        self.refreshed_at = time.time()


class BrokerCollector:
    """Series the supervisor computes at scrape time."""

    def __init__(self, request_queue, snapshot: PartitionSnapshot, broker_id: int, version: str):
        self.request_queue = request_queue
        self.snapshot = snapshot
        self.broker_id = broker_id
        self.version = version

    def collect(self):
        g = GaugeMetricFamily
        info = g("kafka_server_app_info", "Broker version and id", labels=["version", "broker_id"])
        info.add_metric([self.version, str(self.broker_id)], 1)
        yield info
        size = self.request_queue.size() if self.request_queue is not None else 0
        yield g("kafka_network_requestchannel_request_queue_size", "Requests waiting for a handler (RequestQueueSize)", value=size)
        rows = self.snapshot.rows
        led = [r for r in rows if r[6] == self.broker_id]
        yield g("kafka_server_replicamanager_partition_count", "Partitions on this broker (PartitionCount)", value=len(rows))
        yield g("kafka_server_replicamanager_leader_count", "Partitions led by this broker (LeaderCount)", value=len(led))
        # Kafka counts both on the leader only: its ISR against its replicas
        # and against the topic's min.insync.replicas capped at the replica
        # count (effectiveMinIsr).
        yield g("kafka_server_replicamanager_under_replicated_partitions", "Partitions led here whose ISR is smaller than the replica set (UnderReplicatedPartitions)",
                value=sum(1 for r in led if r[8] < r[7]))
        yield g("kafka_server_replicamanager_under_min_isr_partition_count", "Partitions led here whose ISR is smaller than min.insync.replicas (UnderMinIsrPartitionCount)",
                value=sum(1 for r in led if r[8] < min(r[9], max(r[7], 1))))
        active, offline = self._controller_gauges()
        yield g("kafka_controller_kafkacontroller_offline_partitions_count", "Partitions without a live leader, on the active controller (OfflinePartitionsCount)", value=offline)
        yield g("kafka_controller_kafkacontroller_active_controller_count", "1 on the active controller (ActiveControllerCount)", value=active)
        dirs = self.snapshot.log_dirs
        yield g("kafka_log_logmanager_offline_log_directory_count", "Log dirs offline after an I/O error (OfflineLogDirectoryCount)",
                value=sum(offline for _d, offline in dirs))
        per_dir = g("kafka_log_logmanager_log_directory_offline", "1 if the log dir is offline (LogDirectoryOffline)",
                    labels=["log_directory"])
        for d, offline in dirs:
            per_dir.add_metric([d], offline)
        yield per_dir
        labels = ["topic", "partition"]
        fams = [g("kafka_log_log_size", "Bytes of the partition's segments (Size)", labels=labels),
                g("kafka_log_log_num_log_segments", "Segments of the partition (NumLogSegments)", labels=labels),
                g("kafka_log_log_log_end_offset", "Log end offset (LogEndOffset)", labels=labels),
                g("kafka_log_log_log_start_offset", "Log start offset (LogStartOffset)", labels=labels)]
        for topic, partition, size_bytes, segments, leo, lso, *_role in rows:
            lv = [topic, str(partition)]
            fams[0].add_metric(lv, size_bytes)
            fams[1].add_metric(lv, segments)
            fams[2].add_metric(lv, leo)
            fams[3].add_metric(lv, lso)
        yield from fams


    def _controller_gauges(self) -> tuple:
        """``(ActiveControllerCount, OfflinePartitionsCount)``: a standalone
        broker is its own controller with nothing offline; in a cluster only
        the controller reports, counting partitions with no leader."""
        md = self.snapshot.metadata() if self.snapshot.metadata is not None else None
        if md is None or not md.cluster_mode:
            return 1, 0
        if md.controller_id != self.broker_id:
            return 0, 0
        offline = sum(1 for info in md.topics.values() for state in md.partition_states(info)
                      if state.leader < 0)
        return 1, offline


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - scrapes are not news
        pass


class MetricsServer:
    """The /metrics endpoint in the supervisor (an HTTP thread).

    Owned by the supervisor: the socket is bound when this object is made
    (before forking, so a port conflict fails start-up like a listener's);
    ``serve`` starts the thread after the children are forked (a thread must
    not exist across fork); ``process_dead`` for every child that exits;
    ``close`` at the end.
    """

    def __init__(self, host: str, port: int, multiproc_dir: str, owns_dir: bool):
        self.host = host
        self.multiproc_dir = multiproc_dir
        self.owns_dir = owns_dir
        self.snapshot = PartitionSnapshot()
        self.registry = CollectorRegistry()
        MultiProcessCollector(self.registry, multiproc_dir)
        server_class = ThreadingWSGIServer
        if ":" in host:
            server_class = type("ThreadingWSGIServer6", (ThreadingWSGIServer,), {"address_family": socket.AF_INET6})
        self._httpd = make_server(host, port, make_wsgi_app(self.registry), server_class,
                                  handler_class=_QuietHandler)
        self.port = self._httpd.server_address[1]
        self._thread = None

    def serve(self, request_queue, broker_id: int, version: str) -> None:
        self.registry.register(BrokerCollector(request_queue, self.snapshot, broker_id, version))
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()
        log.info("serving Prometheus metrics on http://%s:%d/metrics", self.host, self.port)

    def process_dead(self, pid: int) -> None:
        try:
            mark_process_dead(pid, self.multiproc_dir)
        except OSError:
            pass

    def close(self) -> None:
        if self._httpd is not None:
            if self._thread is not None:
                self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self.owns_dir:
            shutil.rmtree(self.multiproc_dir, ignore_errors=True)
