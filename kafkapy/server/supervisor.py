"""The supervisor: start-up, the children, periodic log maintenance, shutdown.

Owned by the process ``kafkapy-server-start`` runs. Order of start-up:
configuration -> listening sockets (a port conflict fails before anything
forks) -> log-dir lock -> shared partition table -> load and recover every
log -> metadata and the slot map -> channel -> fork acceptor, processors, workers.
Cluster mode (``zookeeper.connect``) differs there: the logs found on disk
claim their slots by their topic ids, the metadata image is left to the
controller and no partition is led until LeaderAndIsr says so; the
``controller`` child (the broker's ZooKeeper session) and
``num.replica.fetchers`` ``replica-fetcher-<i>`` children are forked too;
with ``log.cleaner.enable``, the ``log-cleaner`` child (compaction) in both modes.

It then waits on the children's sentinels, waking for log maintenance
(retention, flush, checkpoints) on Kafka's intervals. If a child dies the
broker does not carry on half-alive: it says which child died, stops the
others and exits 1 *without* the clean-shutdown marker, so the next start
re-validates the logs. SIGTERM/SIGINT (to the supervisor or to every process
of the broker alike: server/child_signals.py): acceptor first (no new connections),
then processors (they finish in-flight requests, bounded), then workers,
then logs are flushed, checkpoints and ``.kafka_cleanshutdown`` written, exit 0.
"""

from __future__ import annotations

import copy
import fcntl
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import time

from kafkapy import __version__, metrics
from kafkapy.metadata.embedded import EmbeddedMetadataStore, TopicInfo
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.model import NO_BROKER
from kafkapy.server import child_signals
from kafkapy.server.broker import Broker
from kafkapy.server.config.topic_keys import log_config_for
from kafkapy.server.quotas.connections import ConnectionLimits
from kafkapy.server.reactor.acceptor import acceptor_main
from kafkapy.server.reactor.channel import Arena, RequestQueue, ResponsePipe, WakePipe
from kafkapy.server.reactor.processor import processor_main
from kafkapy.server.reactor.worker import warm_up, worker_main
from kafkapy.storage.errors import InconsistentClusterId
from kafkapy.storage.shared import SharedPartitionTable

log = logging.getLogger("kafkapy.server")

# Arena ring per processor: big enough for a few default-sized (1 MiB) produce
# requests from each of many connections; pages are only touched when used.
# The mapping also holds one request of socket.request.max.bytes.
ARENA_BYTES = 64 * 1024 * 1024
TABLE_CAPACITY = 100_000
_TICK_S = 1.0


class Channel:
    """Everything processes use to talk; created before forking."""

    def __init__(self, ctx, config, slots: int = 0):
        n = config.num_network_threads
        self.requests = RequestQueue(ctx, config["queued.max.requests"], config.num_io_threads)
        # Group APIs go to the one coordinator process (docs/architecture.md).
        self.coordinator_requests = RequestQueue(ctx, config["queued.max.requests"])
        arena_bytes = max(ARENA_BYTES, config["socket.request.max.bytes"])
        self.arenas = [Arena(arena_bytes, ARENA_BYTES) for _ in range(n)]
        self.response_pipes = [ResponsePipe(ctx) for _ in range(n)]
        self.wake_pipes = [WakePipe(ctx, slots) for _ in range(n)]


def bind_listeners(config) -> list[socket.socket]:
    from kafkapy.server.config.types import ConfigException
    from kafkapy.server.security import listener_securities

    try:
        # Each processor builds its own; built here first so a bad key store,
        # trust store or JAAS configuration fails start-up before anything binds.
        listener_securities(config)
        if hasattr(config, "advertised_listeners"):  # the broker's own client side (inter-broker)
            from kafkapy.server.security.inter_broker import client_security

            client_security(config)
    except ConfigException as exc:
        raise SystemExit(f"invalid security configuration: {exc}") from None
    socks = []
    for ep in config.listeners:
        family = socket.AF_INET6 if ep.host and ":" in ep.host else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((ep.host, ep.port))
        s.listen(config["socket.listen.backlog.size"])
        socks.append(s)
    return socks


class Supervisor:
    def __init__(self, config):
        self.config = config
        self.ctx = multiprocessing.get_context("fork")
        self.children: dict = {}  # sentinel -> (name, Process)
        self.stopping = False

    # -- start-up ---------------------------------------------------------------
    def run(self) -> int:
        config = self.config
        from kafkapy.server.config.broker_keys import BROKER_CONFIGS, NOT_IN_EFFECT

        for key, reason in NOT_IN_EFFECT.items():
            # Kafka's own server.properties sets some of these to their
            # defaults: only a value that asks for something is worth a warning.
            if config.is_set(key) and config[key] != BROKER_CONFIGS[key].default:
                log.warning("%s=%s has no effect: %s", key, config.originals[key], reason)
        _raise_open_file_limit()
        _keep_large_buffers_on_the_heap()
        from kafkapy.storage import file_cache

        file_cache.configure()  # its cap follows the (now raised) descriptor limit
        listen = bind_listeners(config)
        # Before forking: binds prometheus.port, sets PROMETHEUS_MULTIPROC_DIR.
        self.metrics = configure_metrics(config)
        self._lock_log_dirs()
        from kafkapy.storage.log_manager import LogManager

        first_dir = config.log_dirs[0]
        self.table = SharedPartitionTable(TABLE_CAPACITY, os.path.join(first_dir, ".kafkapy-partition-locks"))
        cluster_id = self._zookeeper_cluster_id() if config["zookeeper.connect"] else None
        try:
            self.log_manager = LogManager(config.log_dirs, log_config_for(config, {}), config.broker_id,
                                          cluster_id)
        except InconsistentClusterId as exc:
            # Kafka's InconsistentClusterIdException: this log dir was written
            # by a broker of another cluster.
            raise SystemExit(f"{exc}: the broker is trying to join the wrong cluster; the "
                             f"configured zookeeper.connect may be wrong") from None
        # Offline log dirs live in the shared table: every child sees a failure any of them met.
        from kafkapy.metadata.store import METADATA_GENERATION

        self.log_manager.share_offline_dirs(self.table, METADATA_GENERATION)
        self.cluster_mode = bool(config["zookeeper.connect"])
        started = time.monotonic()
        if self.cluster_mode:
            # The image the controller feeds (read only here).
            self.store = MetadataImage(first_dir, self.table)
            self._load_logs_in_cluster()
        else:
            self.store = EmbeddedMetadataStore(first_dir, self.table)
            from kafkapy.server.security.scram_store import migrate_credentials_file

            if migrate_credentials_file(first_dir, self.store):
                log.info("moved the SCRAM credentials of %s into the metadata store", first_dir)
            self._load_logs()
        if self.log_manager.failure_channel.offline_mask() and self._log_dir_failure_is_fatal():
            raise SystemExit(1)  # every log dir, or the first, failed to load
        warm_up()  # before the children fork: they share the loaded schemas
        self.channel = Channel(self.ctx, config, TABLE_CAPACITY)
        self.broker = Broker(config, self.table, self.log_manager, self.channel.wake_pipes,
                             self.log_manager.cluster_id)
        if not self.cluster_mode:
            self._make_leaders(self.store.current())
        log.info("loaded %d partitions in %.2f s", len(self.loaded), time.monotonic() - started)
        _check_open_file_budget(len(self.loaded))

        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        n = config.num_network_threads
        pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(n)]
        for i in range(n):
            pairs[i][1].setblocking(False)
            self._spawn(f"processor-{i}", processor_main,
                        (i, config, self.channel, self.table, pairs[i][1], self._worker_broker))
        for i in range(config.num_io_threads):
            self._spawn(f"handler-{i}", worker_main, (i, self._worker_broker, self.channel))
        from kafkapy.server.coordinator_process import coordinator_main

        self._spawn("group-coordinator", coordinator_main,
                    (self._worker_broker, self.channel, config))
        # Connection limits (server/quotas/connections.py), counted in shared memory.
        limits = ConnectionLimits(config, config.listeners, self.broker.connection_quotas, self.broker.quotas.table,
                                  self.store)
        if config["log.cleaner.enable"]:
            from kafkapy.server.cleaner_process import cleaner_main

            self._spawn("log-cleaner", cleaner_main, (self._worker_broker,))
        self._spawn("acceptor", acceptor_main, (listen, [p[0] for p in pairs], limits))
        if self.cluster_mode:
            self._spawn_replica_fetchers()
            from kafkapy.server.broker import local_broker_info
            from kafkapy.server.controller_process import controller_main

            # The shared table and a Broker factory (as a worker's) for the
            # controller child's own partition work (the ISR job).
            self._spawn("controller", controller_main,
                        (config, local_broker_info(config, self.broker.broker_id), self.table,
                         self._worker_broker))
        for s in listen:
            s.close()
        for a, b in pairs:
            a.close()
            b.close()
        metrics.start_process("supervisor")
        if self.metrics and self.cluster_mode:
            # The controller gauges read the image (their own store object:
            # the HTTP thread must not share this thread's caches).
            self.metrics.snapshot.metadata = MetadataImage(first_dir, self.table).current
        if self.metrics:
            self.metrics.serve(self.channel.requests, self.broker.broker_id, __version__)
        addresses = ", ".join(f"{ep.name}://{ep.host}:{ep.port}" for ep in config.listeners)
        log.info("kafkapy started (broker.id=%d) listening on %s", self.broker.broker_id, addresses)
        try:
            return self._watch()
        finally:
            if self.metrics:
                metrics.probes.publish()
                self.metrics.close()

    def _worker_broker(self, worker_id):
        return Broker(self.config, self.table, self.log_manager, self.channel.wake_pipes,
                      self.log_manager.cluster_id)

    def _lock_log_dirs(self):
        # Kafka's .lock: two brokers on one log dir would corrupt it.
        self._dir_locks = []
        for d in self.config.log_dirs:
            os.makedirs(d, exist_ok=True)
            fd = os.open(os.path.join(d, ".lock"), os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SystemExit(f"log dir {d} is in use by another broker (its .lock is held)")
            self._dir_locks.append(fd)

    def _load_logs(self):
        """Recover every log and claim each partition's slot in the shared table's slot map."""
        md = copy.deepcopy(self.store.current())  # current() is shared: read-only
        logs = self.log_manager.load_logs(self._state_for_new_log, self._configs_for(md))
        self.loaded = logs
        by_topic: dict[str, dict[int, object]] = {}
        for lg in logs.values():
            by_topic.setdefault(lg.topic, {})[lg.partition] = lg
        for name, parts in by_topic.items():
            info = md.topics.get(name)
            if info is None:
                # A partition dir the metadata does not know (metadata lost):
                # adopt it with the topic id from partition.metadata.
                any_log = next(iter(parts.values()))
                info = md.topics[name] = TopicInfo(name, any_log.topic_uuid(), max(parts) + 1, {})
                log.warning("adopted topic %s found on disk but missing from metadata", name)
            info.num_partitions = max(info.num_partitions, max(parts) + 1)
        for name, info in list(md.topics.items()):
            parts = by_topic.get(name, {})
            for p in range(info.num_partitions):
                lg = parts.get(p)
                if lg is None and self.log_manager.is_log_offline(name, p):
                    continue  # its log dir failed to load: served after a start that loads it
                if lg is None:
                    slot = self.table.claim(info.topic_id, p)
                    self.log_manager.create_log(name, p, log_config_for(self.config, info.configs),
                                                self.table.slot(slot), info.topic_id.bytes)
                    log.warning("partition %s-%d had no directory; created it empty", name, p)
                else:
                    self.table.claim(info.topic_id, p, lg.state_slot)  # allocated by load_logs
        self.store.replace(md)

    def _load_logs_in_cluster(self) -> None:
        """Cluster mode: recover every log found on disk and claim its slot
        under the topic id of its partition.metadata. The image is not
        touched (the controller's UpdateMetadata fills it) and no role is
        taken: LeaderAndIsr gives each partition its leader and epoch, as
        Kafka's broker waits for it after a start. A log without a topic id
        cannot be matched to a topic: it is left on disk, unused."""
        md = copy.deepcopy(self.store.current())  # current() is shared: read-only
        logs = self.log_manager.load_logs(self._state_for_new_log, self._configs_for(md))
        self.loaded = {}
        for key, lg in logs.items():
            topic_id = lg.topic_uuid()
            if topic_id is None:
                log.warning("%s has no topic id (partition.metadata); not serving it", lg.dir)
                self.log_manager.logs.pop(key).release()
                self.table.free(lg.state_slot)
                continue
            self.table.claim(topic_id, lg.partition, lg.state_slot)
            self.loaded[key] = lg
        # What the image says of the cluster's live state is from before this
        # start: Kafka's broker starts with an empty metadata cache and learns
        # brokers, the controller and leaders from the controller's first
        # UpdateMetadata. Until then it names no broker, controller or leader
        # (clients retry LEADER_NOT_AVAILABLE), instead of its old leaderships.
        self.store.apply(forget_live_state)

    def _spawn_replica_fetchers(self) -> None:
        """Cluster mode: ``num.replica.fetchers`` replica-fetcher children
        (Kafka's ReplicaFetcherThreads), each building its own Broker as a
        worker does (docs/architecture.md, "Cluster mode")."""
        import importlib.util

        if importlib.util.find_spec("kafkapy.server.replica_fetcher") is None:
            log.warning("no replica fetcher module: followers will not replicate")
            return
        from kafkapy.server.replica_fetcher import replica_fetcher_main

        for i in range(max(1, self.config["num.replica.fetchers"])):
            self._spawn(f"replica-fetcher-{i}", replica_fetcher_main, (i, self.config, self._worker_broker))

    def _make_leaders(self, md) -> None:
        """This broker leads every partition it loaded, at epoch 0 with the
        ISR itself alone, so its whole log is committed (Kafka's makeLeader:
        the high watermark becomes the log end offset when the ISR is just
        the leader)."""
        replica_manager = self.broker.replica_manager
        for name, info in md.topics.items():
            for p in range(info.num_partitions):
                partition = replica_manager.get_partition(name, p)
                me = (self.broker.broker_id,)
                partition.make_leader(0, me, me, 0)  # ISR = replicas = [this broker]

    def _zookeeper_cluster_id(self) -> str:
        """``/cluster/id``, created now if this is the cluster's first broker
        (Kafka's getOrGenerateClusterId at start-up); the session ends here,
        the controller child opens the broker's own."""
        from kafkapy.server.security.zookeeper import zk_client
        from kafkapy.storage.log_manager import new_cluster_id

        config = self.config
        client = zk_client(config)  # a bad zookeeper.ssl.* or JAAS setting: ConfigException, as any key
        try:
            with client:
                return client.get_or_create_cluster_id(new_cluster_id)
        except Exception as exc:  # kazoo's timeouts and connection errors
            raise SystemExit(f"cannot use ZooKeeper at zookeeper.connect={config['zookeeper.connect']}: "
                             f"{type(exc).__name__}: {exc}") from None

    def _state_for_new_log(self):
        slot = self.table.allocate()
        return slot, self.table.slot(slot)

    def _configs_for(self, md):
        return {name: log_config_for(self.config, info.configs) for name, info in md.topics.items()}

    def _spawn(self, name, target, args):
        proc = self.ctx.Process(target=_child, args=(name, target, args, os.getpid()), name=name,
                                daemon=False)
        proc.start()
        self.children[proc.sentinel] = (name, proc)

    # -- running ------------------------------------------------------------------
    def _on_term(self, *_):
        self.stopping = True

    def _watch(self) -> int:
        config = self.config
        retention_every = config["log.retention.check.interval.ms"] / 1000
        checkpoint_every = config["log.flush.offset.checkpoint.interval.ms"] / 1000
        start_checkpoint_every = config["log.flush.start.offset.checkpoint.interval.ms"] / 1000
        flush_every = min(config["log.flush.scheduler.interval.ms"], 2**31) / 1000
        now = time.monotonic()
        next_retention = now + retention_every
        next_checkpoint = now + checkpoint_every
        next_start_checkpoint = now + start_checkpoint_every
        next_flush = now + flush_every
        woken = child_signals.wake_on_signal()  # after the forks: a SIGTERM costs no tick
        while not self.stopping:
            ready = multiprocessing.connection.wait([woken, *self.children], timeout=_TICK_S)
            if woken in ready:
                ready.remove(woken)
                child_signals.drain(woken)
            if ready and not self.stopping:
                for sentinel in ready:
                    name, proc = self.children[sentinel]
                    # The sentinel fires as the child exits, a moment before
                    # it can be reaped: wait briefly for the real exit code.
                    proc.join(1.0)
                    log.error("%s (pid %d) died with exit code %s; stopping the broker",
                              name, proc.pid, proc.exitcode)
                self._kill_children()
                return 1
            now = time.monotonic()
            if self.log_manager.failure_channel.offline_mask() and self._log_dir_failure_is_fatal():
                self._kill_children()
                return 1
            try:
                self.broker.replica_manager.sync_partitions()
                if now >= next_retention:
                    next_retention = now + retention_every
                    self.log_manager.cleanup(int(time.time() * 1000))
                if now >= next_flush:
                    next_flush = now + flush_every
                    self.log_manager.flush_dirty_logs(int(time.time() * 1000))
                if now >= next_checkpoint:
                    next_checkpoint = now + checkpoint_every
                    self.log_manager.checkpoint_recovery_points()
                    self.log_manager.checkpoint_high_watermarks()
                if now >= next_start_checkpoint:
                    next_start_checkpoint = now + start_checkpoint_every
                    self.log_manager.checkpoint_log_start_offsets()
            except Exception:
                log.exception("log maintenance failed")
            if self.metrics:
                metrics.probes.publish()
                self.metrics.snapshot.maybe_refresh(self.log_manager, now)
        log.info("shutting down")
        if self.cluster_mode and config["controlled.shutdown.enable"]:
            # Kafka's controlledShutdown, first: leaderships move while everything still serves.
            from kafkapy.server.controller_channel import controlled_shutdown

            controlled_shutdown(config, self.broker.broker_id, self.store.current)
        clean = self._stop_children()
        if not clean:
            log.error("children did not stop cleanly; not writing the clean-shutdown marker")
            return 1
        self.log_manager.shutdown()
        log.info("shut down cleanly")
        return 0

    def _log_dir_failure_is_fatal(self) -> bool:
        """Kafka's handleLogDirFailure halts the broker when every log dir
        failed, or the metadata log dir did: here the first log dir, which
        holds the metadata store or image and the partition lock file."""
        channel = self.log_manager.failure_channel
        if channel.all_offline():
            log.error("Shutdown broker because all log dirs in %s have failed", ", ".join(channel.log_dirs))
            return True
        if channel.is_offline(channel.log_dirs[0]):
            log.error("Shutdown broker because the metadata log dir %s has failed", channel.log_dirs[0])
            return True
        return False

    def _kill_children(self) -> None:
        """After a child died: no clean shutdown is possible (it may have died
        mid-append or holding a queue lock), so end the rest at once. The
        next start recovers the logs from their recovery points."""
        for _, proc in self.children.values():
            if proc.is_alive():
                proc.kill()
        for _, proc in self.children.values():
            proc.join(5)

    def _stop_children(self) -> bool:
        """Stop acceptor, processors, workers in that order; True if all exited 0."""
        timeout_s = self.config["kafkapy.shutdown.timeout.ms"] / 1000
        deadline = time.monotonic() + timeout_s
        procs = [p for _, p in self.children.values()]
        groups = [
            [p for p in procs if p.name == "acceptor"],
            [p for p in procs if p.name.startswith("processor-")],
            # Followers stop appending, and the cleaner swapping, before the logs are closed.
            [p for p in procs if p.name.startswith("replica-fetcher-") or p.name == "log-cleaner"],
        ]
        ok = True
        for group in groups:
            for p in group:
                if p.is_alive():
                    child_signals.stop_child(p.pid)
            for p in group:
                p.join(max(0.1, deadline - time.monotonic()))
        workers = [p for p in procs if p.name.startswith("handler-")]
        # One stop per live worker, counted before sending: a worker that
        # takes a stop exits at once, so checking is_alive() while sending
        # would send too few.
        for _ in range(sum(1 for p in workers if p.is_alive())):
            self.channel.requests.put_stop()
        coordinators = [p for p in procs if p.name == "group-coordinator"]
        for p in coordinators:
            if p.is_alive():
                self.channel.coordinator_requests.put_stop()
        workers += coordinators
        for p in workers:
            p.join(max(0.1, deadline - time.monotonic()))
        # Last, the ZooKeeper session: its stop closes it, so the broker's
        # registration (and a held /controller) go at once.
        for p in procs:
            if p.name == "controller" and p.is_alive():
                child_signals.stop_child(p.pid)
                p.join(max(0.1, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                log.error("%s (pid %d) did not stop in time; killing it", p.name, p.pid)
                p.kill()
                p.join(5)
                ok = False
            elif p.exitcode != 0:
                # Named, so a stop that comes too early for one child kind can be found.
                log.error("%s (pid %d) exited with %s", p.name, p.pid, p.exitcode)
                ok = False
            if self.metrics:
                self.metrics.process_dead(p.pid)
        return ok


def _raise_open_file_limit() -> None:
    """Lift the soft RLIMIT_NOFILE to the hard limit, as Kafka's scripts rely
    on ulimit: every partition keeps about 3 files open in each process that
    uses it (segment .log, .index, .timeindex), so 10,000 partitions need
    ~30,000 descriptors where the usual soft default is 1,024."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d: %s", soft, exc)


def _check_open_file_budget(partitions: int) -> None:
    """Segment files are opened lazily and bounded per process by
    storage.file_cache (the limit less a reserve), so the limit only decides
    how many partitions stay open between uses; below ~1 descriptor per
    partition, producing to all of them reopens files on every request."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = partitions + 1024
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning("open-file limit %d is below the ~%d that %d partitions need; raise "
                    "LimitNOFILE (systemd/kafkapy.service sets 100000) or ulimit -n",
                    soft, needed, partitions)


# glibc's mallopt parameters
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Buffers up to this size come from the heap rather than their own mmap.
# Requests are at most socket.request.max.bytes (100 MiB) but nearly all are
# under message.max.bytes / replica.fetch.response.max.bytes (1-10 MiB).
MMAP_THRESHOLD_BYTES = 16 << 20
# Free heap kept before it is returned to the kernel, per process.
TRIM_THRESHOLD_BYTES = 64 << 20


def _keep_large_buffers_on_the_heap() -> None:
    """Make glibc serve the broker's megabyte buffers (produce requests,
    replica fetch answers, frames cut from receive buffers) from the heap.

    By default each allocation over 128 KiB-32 MiB (the threshold adapts) is
    its own mmap, and the heap's free top is trimmed past 2x that: every such
    buffer is fresh pages, faulted in and zeroed by the kernel, then unmapped.
    For a follower copying 1 MiB fetch answers that was a third of its CPU
    (page faults, clear_page); measured on one 1 MiB bytes() round trip:
    1.1 CPU s per GB by default, 0.05 with these settings. Set before the
    children fork, so every process inherits it.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    except (OSError, AttributeError):
        pass  # not glibc: its defaults stay


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this child when the supervisor dies.

    A SIGKILLed supervisor runs no clean-up, and children left running would
    keep the port and the log dirs busy: the broker must not live on half
    alive. The check after prctl closes the race with a parent that died
    before the call.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:
        os._exit(1)


def configure_metrics(config):
    """The MetricsServer for prometheus.host/port, or None when the port is 0."""
    from kafkapy.protocol.api import API_TABLE
    from kafkapy.protocol.errors import ErrorCode

    return metrics.configure(config["prometheus.host"], config["prometheus.port"],
                             {key: spec.name for key, spec in API_TABLE.items()},
                             {int(code): code.name for code in ErrorCode},
                             [ep.listener_name for ep in config.listeners])


def _child(name, target, args, parent_pid):
    _die_with_parent(parent_pid)
    metrics.start_process(name)
    # Children must not run the supervisor's signal handlers, nor stop on an
    # operator's signal by themselves (server/child_signals.py).
    child_signals.install_in_child(parent_pid)
    try:
        import setproctitle  # a dependency; ps shows "kafkapy handler-3"

        setproctitle.setproctitle(f"kafkapy {name}")
    except ImportError:
        pass
    try:
        target(*args)
    except Exception:
        logging.getLogger("kafkapy.server").exception("%s crashed", name)
        os._exit(1)
    os._exit(0)


def forget_live_state(md) -> None:
    """A cluster-mode image at start-up: no live brokers, no controller, no
    partition leader; the assignments (which partitions this broker hosts)
    and the controller epoch seen stay."""
    from dataclasses import replace

    md.brokers = {}
    md.controller_id = NO_BROKER
    for info in md.topics.values():
        info.partitions = {p: replace(state, leader=NO_BROKER) for p, state in info.partitions.items()}
