"""Replica fetchers: followers copy their leaders' logs (Kafka's ReplicaFetcherThread
over AbstractFetcherThread and RemoteLeaderEndPoint).

In cluster mode the supervisor forks ``num.replica.fetchers`` children that
each run ``replica_fetcher_main``. Fetcher ``i`` owns the partitions the
metadata image says this broker replicates while another live broker leads
them, hashed to it as Kafka hashes them (``fetcher_id_for``); it recomputes
that set whenever the metadata generation moves. Per leader it holds one
blocking ``Connection`` (kafkapy.client.conn) to the leader's endpoint of
``inter.broker.listener.name``. A fetch goes to every leader at once and
the answers are read as they come, so one idle leader's long poll does not
hold up another's data; each connection has one request in flight.

Each fetch is Fetch v12 (diverging epochs, topic names) with ``replica_id`` =
this broker, Kafka's replica.fetch.* sizes and wait, and per partition:
``fetch_offset`` = the local log end offset, ``current_leader_epoch`` = the
image's leader epoch, ``last_fetched_epoch`` = the latest epoch of the local
leader-epoch cache. The local log is the fetch state: only this process
appends to or truncates a follower's log, so nothing else is kept per partition
but its leader, epoch and back-off.

Per leader the fetcher keeps a fetch session (KIP-227, Kafka's
FetchSessionHandler in ``FetcherSession``): the first fetch is full and asks
for a session (epoch 0); after it, each fetch names only the partitions whose
fields changed since the leader last saw them (a new fetch offset after an
append or truncation, a new leader epoch) and those that left
(``forgotten_topics_data``: reassigned, or backing off), and the leader answers
only partitions with news. A follower of ~30 partitions of one leader, most of
them idle (``__consumer_offsets``), sends and decodes one or two instead of all
on every round trip, on both ends. A session error (FETCH_SESSION_ID_NOT_FOUND,
INVALID_FETCH_SESSION_EPOCH: the leader restarted or evicted it), a failed
connection or a new leader endpoint starts over with a full fetch.

Per partition of the answer (Kafka's processFetchRequest):

* a ``diverging_epoch``: truncate (``truncation_offset``, Kafka's
  getOffsetTruncationState: the local end offset of that epoch, never past
  the leader's) and fetch again. Where Kafka's follower would send
  OffsetsForLeaderEpoch for an epoch it does not know, this one truncates to
  the end of its last epoch before it and lets the next fetch's
  ``last_fetched_epoch`` ask again (the KIP-595 follower's way);
* records: ``Partition.append_records_to_follower`` with the leader's high
  watermark and log start offset (offsets, epochs and timestamps kept; an
  empty log whose start falls inside the leader's first batch starts at that
  batch, as Kafka recovers from UnexpectedAppendOffsetException); then the
  processors' parked operations are woken;
* OFFSET_OUT_OF_RANGE: Kafka 3.9's fetchOffsetAndTruncate, through
  ListOffsets with ``replica_id`` (LATEST is the leader's log end offset for
  a replica): behind the leader's end, keep the log unless the leader's log
  start offset is past it (then start empty there); past the leader's end,
  truncate to it (an unclean election);
* FENCED_LEADER_EPOCH: the request's epoch is stale; the partition waits for
  new metadata (Kafka marks it failed until the next LeaderAndIsr);
* NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH (the leader has not had its
  LeaderAndIsr yet) and every other error: back off ``replica.fetch.backoff.ms``
  (a new leader or leader epoch in the metadata ends the back-off: the
  partition starts over);
* a connection error or timeout: the connection is closed, its partitions
  back off, and the next fetch connects again.

A diverging epoch or OFFSET_OUT_OF_RANGE whose handling changed nothing here
(log end and start offsets, latest epoch) backs off too, rather than fetching
at once into the same answer.

A partition whose log dir went offline (storage.log_dirs) is no longer
fetched: the replica manager stops handing it out at the next metadata
generation, which the failure moves (Kafka's removeFetcherForPartitions);
an append or truncation that meets the I/O error itself raises
KafkaStorageError (a StorageError: back off).

A partition is fetched only once its slot's role agrees with the image (this
broker's LeaderAndIsr handler made it a follower of that leader at that
epoch), and every append or truncation passes the epoch it fetched in, so
``Partition`` refuses it (NotFollower, a StorageError: back off) when a
LeaderAndIsr moved the role meanwhile: nothing is written to a log this
broker leads, or from a leader it no longer follows.

Every wait is bounded: one select of at most ``_TICK_S`` at a time, so
the supervisor's stop (which sets the stop flag) and new metadata are noticed within that;
a request still unanswered after ``replica.fetch.wait.max.ms`` +
``replica.socket.timeout.ms`` is abandoned with its connection, and a connect
waits at most 10 s (Kafka's socket.connection.setup.timeout.ms).

Ownership: one ``ReplicaFetcher`` per fetcher process, single-threaded; its
Partition objects come from that process's own Broker (``make_broker``).
"""

from __future__ import annotations

import functools
import logging
import select
import time
from collections import OrderedDict

from kafkapy.client import errors as client_errors
from kafkapy.client.conn import Connection
from kafkapy.metrics import probes
from kafkapy.server import child_signals
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication import fetch_wire
from kafkapy.replication.quota import throttle_for
from kafkapy.server.fetch_session import INITIAL_EPOCH, next_epoch
from kafkapy.storage.errors import OffsetsOutOfOrder, StorageError

log = logging.getLogger("kafkapy.replica.fetcher")

FETCH = 1
LIST_OFFSETS = 2
FETCH_VERSION = 12  # diverging epochs (KIP-320 truncation on fetch); fetch_wire's version
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2
_TICK_S = 0.1  # longest single wait (see the module docstring)
# Kafka's socket.connection.setup.timeout.ms: a connect never waits longer.
_CONNECT_TIMEOUT_MS = 10_000
_INT_MASK = 0xFFFFFFFF


# -- pure decisions ------------------------------------------------------------------
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _INT_MASK
    return h - (1 << 32) if h & 0x80000000 else h


def fetcher_id_for(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's AbstractFetcherManager.getFetcherId:
    ``Utils.abs(31 * topic.hashCode + partition) % num.replica.fetchers``."""
    n = (31 * java_string_hash(topic) + partition) & _INT_MASK
    n = n - (1 << 32) if n & 0x80000000 else n
    return (0 if n == -(1 << 31) else abs(n)) % num_fetchers


def truncation_offset(leader_epoch: int, leader_end_offset: int, local_epoch_end, log_end_offset: int,
                      fetch_offset: int):
    """Kafka's getOffsetTruncationState: where a follower truncates when the
    leader answered ``(leader_epoch, leader_end_offset)`` for its last fetched
    epoch. ``local_epoch_end`` is the follower's own ``(epoch, end offset)``
    for ``leader_epoch`` (``(-1, -1)``: unknown). Returns ``(offset,
    completed)``; not completed means the follower did not know the leader's
    epoch, so it truncates to the end of its last epoch before it and asks
    again."""
    if leader_end_offset < 0:
        # The leader knows no end offset for that epoch: keep the fetch offset.
        return fetch_offset, True
    if leader_epoch < 0:
        return min(leader_end_offset, log_end_offset), True
    local_epoch, local_end_offset = local_epoch_end
    if local_end_offset < 0:
        # Below every epoch the follower tracks: the leader's offset alone.
        return min(leader_end_offset, log_end_offset), True
    if local_epoch != leader_epoch:
        return min(local_end_offset, log_end_offset), False
    return min(local_end_offset, leader_end_offset, log_end_offset), True


def whole_batches(records) -> memoryview | bytes:
    """``records`` up to the end of its last whole batch (a leader may cut the
    last one at its byte limit; Kafka's follower drops that part too)."""
    if not records:
        return b""
    view = memoryview(records)
    size = len(view)
    position = 0
    while size - position >= 12:  # base offset (8) + batch length (4)
        end = position + 12 + int.from_bytes(view[position + 8:position + 12], "big", signed=True)
        if end > size or end <= position + 12:
            break
        position = end
    return view if position == size else view[:position]


# -- the leader's end ----------------------------------------------------------------
class LeaderUnavailable(Exception):
    """The leader could not be reached, or did not answer in time."""


class LeaderEndPoint:
    """One leader's connection (Kafka's RemoteLeaderEndPoint over its
    BrokerBlockingSender): Fetch sent without waiting, ListOffsets blocking."""

    def __init__(self, leader_id: int, address, client_id: str, broker_id: int, timeout_ms: int, security=None):
        self.leader_id = leader_id
        self.address = address
        self.broker_id = broker_id
        self.conn = Connection(leader_id, address[0], address[1], client_id, request_timeout_ms=timeout_ms,
                               connect_timeout_ms=min(timeout_ms, _CONNECT_TIMEOUT_MS), security=security)

    def ensure_connected(self) -> None:
        if not self.conn.connected:
            try:
                self.conn.connect()
            except client_errors.KafkaError as exc:
                raise LeaderUnavailable(str(exc)) from None

    def send_fetch(self, values: dict, callback) -> None:
        self.ensure_connected()
        try:
            version = min(FETCH_VERSION, self.conn.version(FETCH))
            if version == fetch_wire.VERSION:
                # One pass each way (replication.fetch_wire), not the codec's entities.
                self.conn.send_encoded(FETCH, version, fetch_wire.encode_fetch_request(values), callback,
                                       fetch_wire.decode_fetch_response, True)
            else:
                self.conn.send(FETCH, values, callback, version=version)
        except client_errors.KafkaError as exc:
            raise LeaderUnavailable(str(exc)) from None

    def fileno(self) -> int:
        return self.conn.fileno()

    def on_readable(self) -> None:
        self.conn.on_readable()

    def fetch_offset(self, topic: str, partition: int, current_leader_epoch: int, timestamp: int) -> int:
        """ListOffsets as a replica (Kafka's fetchLatestOffset / fetchEarliestOffset);
        raises ``PartitionError`` for an error code, LeaderUnavailable."""
        values = {"replica_id": self.broker_id, "isolation_level": 0, "topics": [{
            "name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch":
                                           current_leader_epoch, "timestamp": timestamp,
                                           "max_num_offsets": 1}]}]}
        self.ensure_connected()
        try:
            response = self.conn.request(LIST_OFFSETS, values)
        except client_errors.KafkaError as exc:
            raise LeaderUnavailable(str(exc)) from None
        for t in response.topics:
            for p in t.partitions:
                if t.name == topic and p.partition_index == partition:
                    if p.error_code:
                        raise PartitionError(p.error_code)
                    return p.offset
        raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def close(self) -> None:
        self.conn.close()


class PartitionError(Exception):
    """A partition's error code in the leader's answer."""

    def __init__(self, error_code: int):
        try:
            name = ErrorCode(error_code).name
        except ValueError:
            name = f"error {error_code}"
        super().__init__(name)
        self.error_code = error_code


# -- the fetcher -----------------------------------------------------------------------
class FetcherSession:
    """This fetcher's fetch session with one leader (Kafka's FetchSessionHandler):
    the session id and epoch the next fetch carries, and each partition's
    fields as the leader's session holds them (what was last sent)."""

    __slots__ = ("session_id", "epoch", "partitions")

    def __init__(self):
        self.session_id = 0
        self.epoch = INITIAL_EPOCH  # the next fetch is full and asks for a session
        self.partitions: dict[tuple, tuple] = {}

    def build(self, wanted: dict) -> tuple:
        """``(session_id, epoch, {key: fields} to send, [keys forgotten])``
        for a fetch of ``wanted`` (key -> fields)."""
        if self.session_id == 0:
            return 0, INITIAL_EPOCH, wanted, []
        had = self.partitions
        send = {key: fields for key, fields in wanted.items() if had.get(key) != fields}
        return self.session_id, self.epoch, send, [key for key in had if key not in wanted]

    def answered(self, session_id: int, wanted: dict) -> None:
        """The leader answered the fetch of ``wanted`` without a top-level error."""
        if self.session_id == 0:
            self.session_id = session_id  # 0: none was created, the next fetch is full again
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id else INITIAL_EPOCH
        else:
            self.epoch = next_epoch(self.epoch)
        self.partitions = wanted if self.session_id else {}

    def reset(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.partitions = {}


class PartitionFetchState:
    """What this fetcher keeps per partition besides the log itself."""

    __slots__ = ("topic", "partition", "leader_id", "leader_epoch", "delayed_until", "fenced")

    def __init__(self, topic: str, partition: int, leader_id: int, leader_epoch: int):
        self.topic = topic
        self.partition = partition
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch  # the image's: sent as current_leader_epoch
        self.delayed_until = 0.0  # monotonic seconds: backing off until then
        self.fenced = False  # FENCED_LEADER_EPOCH: wait for new metadata

    def __repr__(self) -> str:
        return (f"PartitionFetchState({self.topic}-{self.partition}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch})")


class ReplicaFetcher:
    def __init__(self, fetcher_id: int, broker, config, endpoint_factory=LeaderEndPoint,
                 clock=time.monotonic):
        self.fetcher_id = fetcher_id
        self.broker = broker
        self.broker_id = broker.broker_id
        self.num_fetchers = max(1, config["num.replica.fetchers"])
        self.listener_name = config.inter_broker_listener_name
        self.max_wait_ms = config["replica.fetch.wait.max.ms"]
        self.min_bytes = config["replica.fetch.min.bytes"]
        self.max_bytes = config["replica.fetch.response.max.bytes"]
        self.partition_max_bytes = config["replica.fetch.max.bytes"]
        self.backoff_s = config["replica.fetch.backoff.ms"] / 1000
        self.socket_timeout_ms = config["replica.socket.timeout.ms"]
        if endpoint_factory is LeaderEndPoint:
            # TLS/SASL of the inter-broker listener (None: PLAINTEXT).
            from kafkapy.server.security.inter_broker import client_security

            security = client_security(config)
            if security is not None:
                endpoint_factory = functools.partial(LeaderEndPoint, security=security)
        self.endpoint_factory = endpoint_factory
        self.clock = clock
        self.stopping = False
        # (topic, partition) -> state, per leader, in fetch order (rotated
        # so a busy partition does not starve the others of max_bytes).
        self.by_leader: dict[int, OrderedDict] = {}
        self.states: dict[tuple, PartitionFetchState] = {}
        self.endpoints: dict[int, LeaderEndPoint] = {}
        self.in_flight: dict[int, tuple] = {}  # leader -> (sent at, {key: (state, fetch_offset)}, wanted)
        self.sessions: dict[int, FetcherSession] = {}
        self.answers: list = []  # (leader, sent, wanted, response, error) read but not processed yet
        self._generation = None
        self._hash_cache: dict = {}
        # (topic, partition) -> records behind the leader's high watermark
        # after its last fetch answer (the MaxLag metric)
        self.lags: dict[tuple, int] = {}
        self.throttle = None  # the follower Throttle of this metadata generation (send_fetches)
        self._throttle_generation = object()  # never a generation: looked up on the first round

    # -- which partitions ----------------------------------------------------------
    def _mine(self, topic: str, partition: int) -> bool:
        if self.num_fetchers == 1:
            return True
        key = (topic, partition)
        owner = self._hash_cache.get(key)
        if owner is None:
            owner = self._hash_cache[key] = fetcher_id_for(topic, partition, self.num_fetchers)
        return owner == self.fetcher_id

    def maybe_update_assignment(self) -> bool:
        """Recompute this fetcher's partitions if the metadata generation
        moved; True if it did."""
        md = self.broker.metadata()
        generation = self.broker.store.generation
        if generation == self._generation:
            return False
        self._generation = generation
        me = self.broker_id
        wanted = {}
        addresses = {}
        for name, info in md.topics.items():
            for p, state in enumerate(md.partition_states(info)):
                leader = state.leader
                if leader < 0 or leader == me or me not in state.replicas or not self._mine(name, p):
                    continue
                address = addresses.get(leader)
                if address is None:
                    address = addresses[leader] = self._address(md, leader)
                if address is not None:
                    wanted[(name, p)] = state
        old = self.states
        self.states = {}
        self.by_leader = {}
        for key, state in wanted.items():
            current = old.get(key)
            if current is None or (current.leader_id, current.leader_epoch) != (state.leader, state.leader_epoch):
                log.info("fetcher %d: fetching %s-%d from broker %d (leader epoch %d)", self.fetcher_id,
                         key[0], key[1], state.leader, state.leader_epoch)
                current = PartitionFetchState(key[0], key[1], state.leader, state.leader_epoch)
            self.states[key] = current
            self.by_leader.setdefault(state.leader, OrderedDict())[key] = current
        for key in old.keys() - wanted.keys():
            log.info("fetcher %d: stopped fetching %s-%d", self.fetcher_id, *key)
            self.lags.pop(key, None)
        for leader, endpoint in list(self.endpoints.items()):
            if leader not in self.by_leader or endpoint.address != addresses.get(leader):
                self._drop_endpoint(leader)
        for leader, address in addresses.items():
            if leader in self.by_leader and leader not in self.endpoints:
                self.endpoints[leader] = self.endpoint_factory(
                    leader, address, f"ReplicaFetcherThread-{self.fetcher_id}-{leader}", self.broker_id,
                    self.socket_timeout_ms)
        return True

    def _address(self, md, broker_id: int):
        """The live broker's endpoint of the inter-broker listener, or None."""
        info = md.brokers.get(broker_id)
        if info is None:
            return None
        for ep in info.endpoints:
            if ep.listener_name == self.listener_name:
                return ep.host, ep.port
        if not info.endpoints:
            return info.host, info.port
        log.warning("broker %d has no endpoint for listener %s", broker_id, self.listener_name)
        return None

    def _drop_endpoint(self, leader: int) -> None:
        endpoint = self.endpoints.pop(leader, None)
        self.in_flight.pop(leader, None)
        self.sessions.pop(leader, None)
        if endpoint is not None:
            endpoint.close()

    # -- fetching --------------------------------------------------------------------
    def _local(self, state: PartitionFetchState):
        """The local partition if its slot's role agrees with the image: this
        broker follows ``state.leader_id`` at ``state.leader_epoch``; else None."""
        partition = self.broker.replica_manager.get_partition(state.topic, state.partition)
        if partition is None or partition.leader_id != state.leader_id or \
                partition.leader_epoch != state.leader_epoch:
            return None
        return partition

    def build_fetch(self, leader: int, now: float):
        """``(request values, {key: (state, fetch_offset)}, wanted)`` for the
        ready partitions of ``leader`` (``wanted``: key -> the fields the
        leader's session holds once it answers), or None if none is ready.
        Only what the session does not hold yet goes in the request."""
        sent = {}
        wanted = {}
        throttle = self.throttle
        for key, state in self.by_leader.get(leader, {}).items():
            if state.fenced or state.delayed_until > now:
                continue
            partition = self._local(state)
            if partition is None:
                continue
            if throttle is not None and self.lags.get(key, 1) > 0 and throttle.is_throttled(*key) \
                    and throttle.exceeded():
                continue  # Kafka's shouldFollowerThrottle: behind, throttled, over the quota
            fetch_offset = partition.log_end_offset
            sent[key] = (state, fetch_offset)
            # The slot mirrors the latest epoch of the local leader-epoch cache.
            wanted[key] = (state.leader_epoch, fetch_offset, partition.state.leader_epoch,
                           partition.log_start_offset)
        if not sent:
            return None
        session = self.sessions.setdefault(leader, FetcherSession())
        session_id, epoch, send, forgotten = session.build(wanted)
        topics: dict[str, list] = {}
        for (topic, index), (leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset) in send.items():
            topics.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": leader_epoch, "fetch_offset": fetch_offset,
                "last_fetched_epoch": last_fetched_epoch, "log_start_offset": log_start_offset,
                "partition_max_bytes": self.partition_max_bytes})
        gone: dict[str, list] = {}
        for topic, index in forgotten:
            gone.setdefault(topic, []).append(index)
        values = {"replica_id": self.broker_id, "max_wait": self.max_wait_ms, "min_bytes": self.min_bytes,
                  "max_bytes": self.max_bytes, "isolation_level": 0, "session_id": session_id,
                  "session_epoch": epoch, "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
                  "forgotten_topics_data": [{"topic": t, "partitions": p} for t, p in gone.items()],
                  "rack_id": ""}
        return values, sent, wanted

    def send_fetches(self) -> None:
        now = self.clock()
        # follower.replication.throttled.rate (replication/quota.py): None
        # unless set. Looked up again only when the metadata generation moved
        # (dynamic configs and the throttled-replica lists travel with it).
        if self._throttle_generation != self._generation:
            self._throttle_generation = self._generation
            self.throttle = throttle_for(self.broker, leader=False)
        for leader, endpoint in list(self.endpoints.items()):
            if leader in self.in_flight:
                continue
            built = self.build_fetch(leader, now)
            if built is None:
                continue
            values, sent, wanted = built

            def done(response, error, leader=leader, sent=sent, wanted=wanted):
                self.answers.append((leader, sent, wanted, response, error))

            try:
                endpoint.send_fetch(values, done)
            except LeaderUnavailable as exc:
                self._leader_failed(leader, sent, exc)
                continue
            self.in_flight[leader] = (now, sent)

    def wait(self, timeout_s: float) -> None:
        """Read what the leaders answered, waiting at most ``timeout_s``;
        a request unanswered for too long fails its connection."""
        waiting = {self.endpoints[leader].fileno(): leader for leader in self.in_flight
                   if leader in self.endpoints and self.endpoints[leader].fileno() >= 0}
        if not waiting:
            time.sleep(timeout_s)
            return
        try:
            readable, _, _ = select.select(list(waiting), [], [], timeout_s)
        except (OSError, ValueError):
            readable = []
        for fd in readable:
            self.endpoints[waiting[fd]].on_readable()  # calls done(): answers or errors
        limit = (self.max_wait_ms + self.socket_timeout_ms) / 1000
        now = self.clock()
        for leader, (sent_at, _sent) in list(self.in_flight.items()):
            if now - sent_at > limit and not any(a[0] == leader for a in self.answers):
                self.endpoints[leader].conn.close(client_errors.KafkaTimeoutError(
                    f"fetch from broker {leader} got no answer in {limit:.1f} s"))

    def process_answers(self) -> None:
        answers, self.answers = self.answers, []
        appended = []
        for leader, sent, wanted, response, error in answers:
            if self.in_flight.get(leader, (0, None))[1] is sent:
                del self.in_flight[leader]
            if error is not None:
                self._leader_failed(leader, sent, error)
                continue
            session = self.sessions.get(leader)
            if session is not None:
                if getattr(response, "error_code", 0):
                    session.reset()  # the leader lost it (or never had it): start over in full
                else:
                    session.answered(response.session_id, wanted)
            appended += self.process_fetch_response(leader, sent, response)
        if appended:
            # Only operations parked on these partitions are woken (on a
            # follower, usually none).
            self.broker.replica_manager.wake_delayed_operations(appended)

    def _leader_failed(self, leader: int, sent: dict, error) -> None:
        log.warning("fetch from broker %d failed: %s; retrying in %.1f s", leader, error, self.backoff_s)
        session = self.sessions.get(leader)
        if session is not None:
            session.reset()
        endpoint = self.endpoints.get(leader)
        if endpoint is not None:
            endpoint.close()
        self._delay(state for state, _ in sent.values())

    def _delay(self, states) -> None:
        until = self.clock() + self.backoff_s
        for state in states:
            state.delayed_until = until

    def process_fetch_response(self, leader: int, sent: dict, response) -> list:
        """Apply one leader's answer; the slots of the partitions appended to."""
        if getattr(response, "error_code", 0):
            log.warning("fetch from broker %d answered %s", leader, ErrorCode(response.error_code).name)
            self._delay(state for state, _ in sent.values())
            return []
        appended = []
        order = self.by_leader.get(leader)
        for topic in response.responses:
            for part in topic.partitions:
                key = (topic.topic, part.partition_index)
                entry = sent.get(key)
                if entry is None:
                    continue
                state, fetch_offset = entry
                if self.states.get(key) is not state:
                    continue  # reassigned while the fetch was out
                partition = self._local(state)
                if partition is None or partition.log_end_offset != fetch_offset:
                    continue
                try:
                    if self.process_partition(state, partition, fetch_offset, part, key):
                        appended.append(partition.slot)
                        if order is not None and key in order:
                            order.move_to_end(key)
                except (PartitionError, LeaderUnavailable, StorageError) as exc:
                    log.warning("%s-%d: %s; retrying in %.1f s", state.topic, state.partition, exc,
                                self.backoff_s)
                    self._delay((state,))
        if self.lags:
            probes.replica.fetcher_lag(max(self.lags.values()))
        return appended

    def process_partition(self, state, partition, fetch_offset: int, part, key=None) -> bool:
        """One partition of a fetch answer (the module docstring); True if
        records were appended. ``fetch_offset`` is the local log end offset
        (the caller checked it after the fetch came back)."""
        code = part.error_code
        if code == ErrorCode.NONE:
            diverging = getattr(part, "diverging_epoch", None)
            if diverging is not None and diverging.epoch >= 0 and diverging.end_offset >= 0:
                self._changing(state, partition, self.truncate_on_fetch_response, state, partition,
                               fetch_offset, diverging.epoch, diverging.end_offset)
                return False
            records = whole_batches(part.records)
            high_watermark = part.high_watermark
            if key is None:
                key = (state.topic, state.partition)
            if not records:
                # Nothing new (the high watermark or log start offset moved):
                # no append, only the leader's high watermark and start.
                self.append(state, partition, records, high_watermark, part.log_start_offset)
                self.lags[key] = max(0, high_watermark - fetch_offset)
                return False
            end = self.append(state, partition, records, high_watermark, part.log_start_offset)
            if self.throttle is not None and self.throttle.is_throttled(state.topic, state.partition):
                self.throttle.record(len(records))  # in sync or not, as Kafka's processPartitionData
            self.lags[key] = max(0, high_watermark - end)
            return end > fetch_offset
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._changing(state, partition, self.fetch_offset_and_truncate, state, partition)
            return False
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            log.info("%s-%d: leader epoch %d is fenced; waiting for new metadata", state.topic,
                     state.partition, state.leader_epoch)
            state.fenced = True
            return False
        raise PartitionError(code)

    @staticmethod
    def append(state, partition, records, high_watermark: int, log_start_offset: int) -> int:
        """``Partition.append_records_to_follower`` in the epoch fetched in, and
        Kafka's one recovery from UnexpectedAppendOffsetException: an empty log
        whose start falls inside the leader's first batch (the leader's log
        start moved there by DeleteRecords) starts at that batch's base offset.
        Returns the log end offset after it."""
        epoch = state.leader_epoch
        try:
            result = partition.append_records_to_follower(records, high_watermark, log_start_offset,
                                                          leader_epoch=epoch)
            # The leader's offsets are kept: the last batch's last offset + 1.
            return result.last_offset + 1 if result.last_offset >= 0 else partition.log_end_offset
        except OffsetsOutOfOrder:
            log_end_offset = partition.log_end_offset
            first = int.from_bytes(records[0:8], "big", signed=True)
            last = first + int.from_bytes(records[23:27], "big", signed=True)  # + lastOffsetDelta
            if log_end_offset != partition.log_start_offset or not first < log_end_offset <= last:
                raise
            log.info("%s-%d: the leader's first batch starts at %d, before this empty log's start %d: "
                     "starting the log there", state.topic, state.partition, first, log_end_offset)
            partition.truncate_fully_and_start_at(first, leader_epoch=epoch)
            partition.append_records_to_follower(records, high_watermark, log_start_offset, leader_epoch=epoch)
            return partition.log_end_offset

    def truncate_on_fetch_response(self, state, partition, fetch_offset: int, epoch: int,
                                   end_offset: int) -> None:
        """Kafka's truncateOnFetchResponse for a diverging epoch."""
        log_end_offset = partition.log_end_offset
        offset, completed = truncation_offset(epoch, end_offset, partition.last_offset_for_leader_epoch(epoch),
                                              log_end_offset, fetch_offset)
        log.info("%s-%d: the leader's epoch %d ends at %d; truncating to %d%s", state.topic, state.partition,
                 epoch, end_offset, offset, "" if completed else " and asking again")
        high_watermark = partition.high_watermark
        if offset < high_watermark:
            # Kafka's ReplicaFetcherThread warns so too: records every ISR
            # member had are going (an unclean election, or a leader elected
            # short of what the old one counted as replicated).
            log.warning("%s-%d: truncating to %d, below the high watermark %d", state.topic, state.partition,
                        offset, high_watermark)
        partition.truncate_to(offset, leader_epoch=state.leader_epoch)

    def _changing(self, state, partition, fix, *args) -> None:
        """Run ``fix`` (a truncation the leader's answer asked for); if it left
        the log end offset and the latest epoch as they were, the next fetch
        would get the same answer at once: back off instead of spinning."""
        before = (partition.log_end_offset, partition.log_start_offset, partition.state.leader_epoch)
        fix(*args)
        if (partition.log_end_offset, partition.log_start_offset, partition.state.leader_epoch) == before:
            log.warning("%s-%d: the leader's answer changed nothing here; retrying in %.1f s", state.topic,
                        state.partition, self.backoff_s)
            self._delay((state,))

    def fetch_offset_and_truncate(self, state, partition) -> None:
        """Kafka 3.9's fetchOffsetAndTruncate after OFFSET_OUT_OF_RANGE."""
        endpoint = self.endpoints[state.leader_id]
        log_end_offset = partition.log_end_offset
        leader_end_offset = endpoint.fetch_offset(state.topic, state.partition, state.leader_epoch,
                                                  LATEST_TIMESTAMP)
        if leader_end_offset < log_end_offset:
            # An unclean election: the new leader has less than this replica.
            log.warning("%s-%d: truncating from %d to the leader's end offset %d", state.topic,
                        state.partition, log_end_offset, leader_end_offset)
            partition.truncate_to(leader_end_offset, leader_epoch=state.leader_epoch)
            return
        leader_start_offset = endpoint.fetch_offset(state.topic, state.partition, state.leader_epoch,
                                                    EARLIEST_TIMESTAMP)
        if leader_start_offset > log_end_offset:
            log.warning("%s-%d: the leader's log starts at %d, past this replica's end %d: starting "
                        "empty there", state.topic, state.partition, leader_start_offset, log_end_offset)
            partition.truncate_fully_and_start_at(leader_start_offset, leader_epoch=state.leader_epoch)

    # -- the loop ----------------------------------------------------------------------
    def run_once(self, timeout_s: float = _TICK_S) -> None:
        self.maybe_update_assignment()
        self.send_fetches()
        self.wait(timeout_s)
        self.process_answers()

    def run(self) -> None:
        # A dead supervisor SIGKILLs its children (supervisor._die_with_parent).
        while not self.stopping:
            self.run_once()

    def stop(self) -> None:
        self.stopping = True

    def close(self) -> None:
        for leader in list(self.endpoints):
            self._drop_endpoint(leader)


def replica_fetcher_main(fetcher_id: int, config, make_broker) -> None:
    """The replica-fetcher child's entry (forked by the supervisor in cluster
    mode): fetch until the supervisor's stop (``child_signals.on_stop``)."""
    broker = make_broker(-1)
    fetcher = ReplicaFetcher(fetcher_id, broker, config)
    child_signals.on_stop(fetcher.stop)
    log.info("replica fetcher %d started", fetcher_id)
    try:
        fetcher.run()
    finally:
        fetcher.close()
        broker.close()
