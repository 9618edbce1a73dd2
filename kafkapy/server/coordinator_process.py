"""The group-coordinator process: the server's glue around the coordinator.

``kafkapy.coordinator`` is sans-IO (GroupCoordinator and its
GroupMetadataManager, their handlers, the offsets topic store); this module
is what makes it a process: it reads the
coordinator's request queue, decodes and encodes with the workers' own
``prepare_request`` / ``finish_request``, answers through the processors'
response pipes, and builds ``CoordinatorConfig`` from the broker config. It
lives in ``server`` so that ``coordinator`` never imports ``server``.

Group APIs (``owner="coordinator"`` in the API table) are routed by the
processors to ``channel.coordinator_requests`` instead of the shared queue, so
exactly one process holds group state in memory and can park JoinGroup /
SyncGroup responses until the rebalance completes (a connection has one
request in flight, so a parked request simply gets its SEND later).

Transactions (docs/architecture.md, "Transactions"): the same process owns
the transaction coordinator (``TransactionCoordinator`` over
``__transaction_state``, markers written by ``MarkerWriter``: local appends
on this thread, other leaders through one sender thread each; outcomes and
replication waits taken from the loop, never waited for). It serves
the ``__transaction_state`` partitions this broker leads (standalone: all of
them once the topic exists; FindCoordinator key type 1 creates it), followed
on every metadata generation change in both modes, before each transaction
request and from the loop; ``tick`` runs its timers (timed-out transactions
aborted, parked state writes and markers' outcomes taken, failed markers
retried; while markers are in flight or state writes wait for their
followers it asks to run again within 1-16 ms). TxnOffsetCommit is verified
with the producer's transaction coordinator first (KIP-890,
``txn_verification.OffsetCommitVerification``): this process's own in place,
another broker's through a sender thread whose answers the loop takes.

Single-threaded (coordinator state is this thread's; the marker senders'
threads touch only their own connections and queues): the loop runs due timers (session, rebalance, sync and
initial-delay timeouts, offset expiry; ``__consumer_offsets`` is compacted by
the log-cleaner process, as every compacted log),
completes the parked ``__consumer_offsets`` appends that settled
(``GroupMetadataManager.poll_appends``, through the coordinator: offset
commits, assignments,
KIP-848 records waiting for their followers, looked at every 1-16 ms while
any wait), then waits for the next request at most until the next deadline.

Start-up: if ``__consumer_offsets`` exists, its records are replayed in
steps; between steps requests are answered COORDINATOR_LOAD_IN_PROGRESS
(heartbeats NONE, as Kafka does), so a restarted broker never answers from
half-loaded state.

Cluster mode (Kafka's GroupCoordinator.onElection / onResignation): the
coordinator serves only the groups of the ``__consumer_offsets`` partitions
this broker leads. Whenever the metadata generation moves it compares the
partitions the metadata says this broker leads with those it serves: a new
one is loaded (its groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile, the
others are served between the load's steps), one it lost is unloaded (its
groups leave memory; members waiting in JoinGroup/SyncGroup and every later
request get NOT_COORDINATOR, so clients look the coordinator up again).
"""

from __future__ import annotations

import logging
import queue
import time

from kafkapy.coordinator.assignors import ASSIGNORS, normalize_assignor_name
from kafkapy.coordinator.group_coordinator import CoordinatorConfig, GroupCoordinator
from kafkapy.coordinator.handlers import HANDLERS, CoordinatorContext, client_host
from kafkapy.coordinator.offsets_topic import OFFSETS_TOPIC, OffsetsTopicStore
from kafkapy.coordinator.transaction.coordinator import TransactionCoordinatorState
from kafkapy.coordinator.transaction.handlers import TXN_HANDLERS
from kafkapy.coordinator.transaction.marker_channel import MarkerWriter, TransactionMarkerChannel
from kafkapy.protocol.transaction_log import TRANSACTION_STATE_TOPIC
from kafkapy.coordinator.transaction.state_store import TransactionStateStore
from kafkapy.coordinator.transaction.transaction_coordinator import TransactionCoordinator, txn_config
from kafkapy.controller.channel_manager import endpoint_for
from kafkapy.server.config.types import ConfigException
from kafkapy.server.reactor.channel import CLOSE
from kafkapy.server.txn_verification import OffsetCommitVerification

log = logging.getLogger("kafkapy.coordinator")

# Longest wait for a request when no timer is due: bounds how late a timer
# scheduled by nothing but the clock (none today) could run.
_IDLE_WAIT_S = 1.0
# In a cluster the loop also follows leadership of __consumer_offsets
# partitions: a new leader starts loading within this long of LeaderAndIsr.
_CLUSTER_IDLE_WAIT_S = 0.2
# While a TxnOffsetCommit's verification is out to another broker, answers
# are looked for this often (an inter-broker round trip is ~1 ms here; its
# sender thread cannot wake the request queue's wait).
_VERIFICATION_POLL_MS = 2
TXN_OFFSET_COMMIT = 28


def _now_ms() -> int:
    return int(time.time() * 1000)


def coordinator_config(config) -> CoordinatorConfig:
    """The group coordinator's settings from the broker config, with Kafka's
    GroupCoordinatorConfig checks (ConfigException stops start-up)."""
    # Kafka's GroupCoordinatorConfig checks: each value within its
    # min/max, and heartbeats more often than the session expires.
    for what in ("heartbeat.interval", "session.timeout"):
        value = config[f"group.consumer.{what}.ms"]
        lo, hi = config[f"group.consumer.min.{what}.ms"], config[f"group.consumer.max.{what}.ms"]
        if not lo <= value <= hi:
            raise ConfigException(f"group.consumer.{what}.ms", value,
                                  f"must be between group.consumer.min.{what}.ms ({lo}) and "
                                  f"group.consumer.max.{what}.ms ({hi})")
    if config["group.consumer.heartbeat.interval.ms"] >= config["group.consumer.session.timeout.ms"]:
        raise ConfigException("group.consumer.heartbeat.interval.ms",
                              config["group.consumer.heartbeat.interval.ms"],
                              "must be less than group.consumer.session.timeout.ms")
    assignors = tuple(normalize_assignor_name(a) for a in config["group.consumer.assignors"])
    unknown = [a for a in assignors if a not in ASSIGNORS]
    if not assignors or unknown:
        raise ConfigException("group.consumer.assignors", ",".join(config["group.consumer.assignors"]),
                              f"supported assignors are {', '.join(ASSIGNORS)}")
    return CoordinatorConfig(
        consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
        consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
        consumer_assignors=assignors,
        consumer_max_size=config["group.consumer.max.size"],
        initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
        min_session_timeout_ms=config["group.min.session.timeout.ms"],
        max_session_timeout_ms=config["group.max.session.timeout.ms"],
        max_size=config["group.max.size"],
        offsets_retention_ms=config["offsets.retention.minutes"] * 60 * 1000,
        offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
        offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
    )


class CoordinatorServer:
    """Glue between the request channel and ``GroupCoordinator``."""

    def __init__(self, broker, channel, config, clock_ms=_now_ms):
        self.broker = broker
        self.channel = channel
        self.config = config
        self.clock_ms = clock_ms
        self.store = OffsetsTopicStore(broker, config, clock_ms)
        self.coordinator = GroupCoordinator(coordinator_config(config), self.store,
                                            clock_ms)
        self.arenas = [a.view for a in channel.arenas]
        self.pipes = channel.response_pipes
        self.stopping = False
        self.cluster_mode = bool(config["zookeeper.connect"])
        if self.cluster_mode:
            self.coordinator.owned_partitions = set()
        self._seen_generation = None  # the metadata generation leadership was last followed at
        self.txn = build_transaction_coordinator(broker, config, clock_ms, self.coordinator)
        self._txn_generation = None  # likewise for __transaction_state
        from kafkapy.server.security.inter_broker import client_security

        self.verification = OffsetCommitVerification(
            broker, self.txn.state, f"broker-{broker.broker_id}-txn-offset-verification".encode(),
            client_security(config))

    # -- requests ---------------------------------------------------------------
    def handle(self, req) -> None:
        from kafkapy.server.reactor.worker import Decoded, finish_request, prepare_request

        conn_id = req.conn_id
        buf = req.view(self.arenas)
        pipe = self.pipes[req.processor_id]
        decoded = prepare_request(buf)
        if not isinstance(decoded, Decoded):
            pipe.send((conn_id, *decoded))
            return
        header = decoded.header
        handler = HANDLERS.get(header.api_key)
        if handler is None:
            log.error("no coordinator handler for api key %d", header.api_key)
            pipe.send((conn_id, CLOSE, None))
            return

        def send(response_entity):
            try:
                kind, payload = finish_request(decoded, response_entity)
            except Exception:
                log.exception("%s v%d response failed to encode; closing the connection",
                              decoded.spec.name, decoded.version)
                kind, payload = CLOSE, None
            pipe.send((conn_id, kind, payload))

        ctx = CoordinatorContext(self.coordinator, self.store, header.api_key, decoded.version,
                                 header.correlation_id, header.client_id, send)
        ctx.txn = self.txn
        ctx.verification = self.verification
        ctx.client_host = client_host(req.peer_host)
        ctx.authorizer = getattr(self.broker, "authorizer", None)
        ctx.principal = req.principal
        ctx.peer_host = ctx.client_host[1:]  # Kafka's host address form, for ACL host matching
        try:
            if self.coordinator.txn_marker_scan:
                self.coordinator.poll_txn_markers()
            if header.api_key in TXN_HANDLERS or header.api_key == TXN_OFFSET_COMMIT:
                # TxnOffsetCommit may ask this process's transaction coordinator (KIP-890).
                self.follow_txn_leadership()
            handler(ctx, decoded.request)
        except Exception:
            # One bad request costs its connection, never the coordinator
            # (whose death stops the broker).
            log.exception("%s v%d request failed; closing the connection", decoded.spec.name,
                          decoded.version)
            if not ctx.replied:
                ctx.replied = True
                pipe.send((conn_id, CLOSE, None))

    def _serve_pending(self, timeout_s: float) -> bool:
        """Handle at most one request; False when told to stop."""
        try:
            req = self.channel.coordinator_requests.get(0, timeout_s)
        except queue.Empty:
            return True
        if req is None:
            return False
        self.handle(req)
        return True

    # -- start-up ---------------------------------------------------------------
    def load(self, partitions=None) -> bool:
        """Replay __consumer_offsets (``partitions`` of it: default all, as a
        standalone broker does at start); False if told to stop meanwhile."""
        if not self.store.exists():
            return True
        coordinator = self.coordinator
        if partitions is None:
            coordinator.loading = True
        else:
            coordinator.loading_partitions |= set(partitions)
        started = time.monotonic()
        records = []
        try:
            for item in self.store.replay(partitions):
                if item is None:
                    # Let waiting clients hear COORDINATOR_LOAD_IN_PROGRESS.
                    for _ in range(100):
                        if not self._serve_pending(0):
                            return False
                        if self.channel.coordinator_requests.size() == 0:
                            break
                    continue
                records.append(item)
            coordinator.load(records)
            coordinator.load_open_transactions(self.store.open_transactions)
            self.store.open_transactions.clear()
            if partitions is not None:
                coordinator.owned_partitions |= set(partitions)
        finally:
            coordinator.loading = False
            if partitions is not None:
                coordinator.loading_partitions -= set(partitions)
        log.info("loaded %d records of %s%s in %.2f s", len(records), OFFSETS_TOPIC,
                 "" if partitions is None else f" partitions {sorted(partitions)}",
                 time.monotonic() - started)
        return True

    def follow_leadership(self) -> bool:
        """Cluster mode: serve the __consumer_offsets partitions this broker
        leads now (load the new ones, unload the lost ones); checked when the
        metadata generation moved. False if told to stop while loading."""
        md = self.broker.metadata()
        generation = self.broker.store.generation
        if generation == self._seen_generation:
            return True
        self._seen_generation = generation
        info = md.topics.get(OFFSETS_TOPIC)
        broker_id = self.broker.broker_id
        led = set() if info is None else {
            p for p, state in enumerate(md.partition_states(info)) if state.leader == broker_id}
        coordinator = self.coordinator
        if info is not None:
            self.store.num_partitions = info.num_partitions
        for p in sorted(coordinator.owned_partitions - led):
            gone = coordinator.unload_partition(p)
            log.info("no longer the leader of %s-%d: unloaded %d groups", OFFSETS_TOPIC, p, gone)
        new = led - coordinator.owned_partitions
        return self.load(new) if new else True

    def follow_txn_leadership(self) -> None:
        """Serve the ``__transaction_state`` partitions this broker leads now,
        a newly led one at its leader epoch (the coordinator epoch of its
        markers), and unload the lost ones; one still led keeps its load and
        coordinator epoch across leader-epoch bumps
        (``TransactionCoordinator.follow``, as Kafka's onElection)."""
        md = self.broker.metadata()
        generation = self.broker.store.generation
        if generation == self._txn_generation:
            return
        self._txn_generation = generation
        info = md.topics.get(TRANSACTION_STATE_TOPIC)
        broker_id = self.broker.broker_id
        led = {} if info is None else {
            p: state.leader_epoch for p, state in enumerate(md.partition_states(info)) if state.leader == broker_id}
        txn = self.txn
        if info is not None:
            txn.store.num_partitions = info.num_partitions
            txn.state.set_num_partitions(info.num_partitions)
        unloaded, loaded = txn.follow(led)
        for p, epoch, gone in unloaded:
            log.info("no longer the coordinator of %s-%d at epoch %d: unloaded %d transactional ids",
                     TRANSACTION_STATE_TOPIC, p, epoch, gone)
        for p, epoch in loaded:
            log.info("loaded %s-%d (coordinator epoch %d): %d transactional ids", TRANSACTION_STATE_TOPIC,
                     p, epoch, len(txn.state.partitions.get(p, ())))

    def _txn_tick(self) -> int:
        """The transaction coordinator's timers; the next deadline (ms)."""
        self.follow_txn_leadership()
        return self.txn.tick()

    def run(self) -> None:
        if not self.cluster_mode and not self.load():
            return
        coordinator = self.coordinator
        coordinator.schedule_offset_expiry()
        timers = coordinator.timers
        while True:
            if self.cluster_mode and not self.follow_leadership():
                return
            now = self.clock_ms()
            try:
                timers.run_due(now)
            except Exception:
                # A timer bug must not stop the broker (the supervisor stops
                # everything when the coordinator dies); log it and go on.
                log.exception("coordinator timer failed")
            try:
                if coordinator.txn_marker_scan:
                    coordinator.poll_txn_markers()
                txn_deadline = self._txn_tick()
            except Exception:
                log.exception("transaction coordinator timer failed")
                txn_deadline = now + 1000
            try:  # __consumer_offsets appends that waited for their followers
                parked_deadline = coordinator.poll_appends(now)
            except Exception:
                log.exception("completing parked group appends failed")
                parked_deadline = now + 16
            try:  # TxnOffsetCommits whose verification another broker answered
                if self.verification.poll():
                    txn_deadline = min(txn_deadline, now + _VERIFICATION_POLL_MS)
            except Exception:
                log.exception("completing verified transactional offset commits failed")
            deadline = timers.next_deadline_ms()
            deadline = txn_deadline if deadline is None else min(deadline, txn_deadline)
            if parked_deadline is not None:
                deadline = min(deadline, parked_deadline)
            idle = _CLUSTER_IDLE_WAIT_S if self.cluster_mode else _IDLE_WAIT_S
            wait_s = idle if deadline is None else min(idle, max(0.0, (deadline - now) / 1000))
            if not self._serve_pending(wait_s):
                return


def build_transaction_coordinator(broker, config, clock_ms, group_coordinator) -> TransactionCoordinator:
    """The process's transaction coordinator: decisions over
    ``__transaction_state``, markers appended here or sent to their
    partitions' leaders (WriteTxnMarkers); each marker written to
    a ``__consumer_offsets`` partition completes the producer's pending
    transactional offsets there (Kafka's handleTxnCompletion)."""
    store = TransactionStateStore(broker, config, clock_ms)
    state = TransactionCoordinatorState(txn_config(config, store.num_partitions),
                                        broker.producer_id_manager.generate_producer_id, clock_ms)
    def address_of(broker_id: int):
        info = broker.metadata().brokers.get(broker_id)
        return endpoint_for(info, config.inter_broker_listener_name) if info is not None else None

    from kafkapy.server.security.inter_broker import client_security

    channel = TransactionMarkerChannel(MarkerWriter(broker, address_of, security=client_security(config)),
                                       on_written=group_coordinator.on_txn_marker)
    txn = TransactionCoordinator(state, store, channel,
                                 config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                                 config["transaction.remove.expired.transaction.cleanup.interval.ms"])
    return txn


def coordinator_main(broker_factory, channel, config) -> None:
    broker = broker_factory(-1)
    server = None
    try:
        server = CoordinatorServer(broker, channel, config)
        server.run()
    finally:
        if server is not None:
            server.txn.close()  # the marker senders' threads and connections
            server.verification.close()
        broker.close()
