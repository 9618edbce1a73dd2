"""Writing transaction markers (Kafka's TransactionMarkerChannelManager and
its completion handler), for the transaction coordinator's one thread.

``TransactionMarkerChannel`` keeps, per transaction, the partitions whose
COMMIT/ABORT marker is not written yet and which of them are in flight.
``send`` starts them all; ``poll`` takes the outcomes that came back since
(the coordinator calls it from its loop); ``retry`` starts again, in one
pass, every pending transaction's partitions that failed (the coordinator
calls it every 100 ms). Each partition's outcome is Kafka's: written,
dropped (its topic is gone, or the marker format is not supported), retried
(no leader here yet, not enough replicas, timed out) or fatal for the whole
transaction's sending (the coordinator or the producer was fenced: a newer
coordinator owns the transaction now). When every partition is written the
transaction is ``done`` and the coordinator persists CompleteCommit /
CompleteAbort.

Nothing here blocks the coordinator's thread on another broker or on
replication (a frozen leader or a slow follower must not stall every other
transaction the coordinator owns). The writer's contract, all calls on that
thread:

* ``begin([(markers, [(topic, partition), ...]), ...]) -> [{tp: error_code}, ...]``
  starts a pass and returns the outcomes known at once; a partition missing
  from its dict is in flight;
* ``poll() -> [(markers, tp, error_code), ...]``: outcomes that came in since;
* ``outstanding``: how many partitions were started whose outcome ``poll``
  has not returned yet (the coordinator polls while it is not 0);
* ``forget(keep)``: drop queued work whose ``markers`` ``keep`` rejects;
* ``close()``.

``MarkerWriter`` appends to the partitions this broker leads on the calling
thread (``LocalMarkerWriter.begin``; standalone, every partition: no request
is sent) and hands the others to one sender thread per leader
(``_Destination``: ONE WriteTxnMarkers request at a time holding every
marker queued for that leader, as Kafka's channel drains a destination's
queue into one request with one request in flight per connection); the
leader's handler makes the same local appends. A partition without a live
leader answers NOT_LEADER_OR_FOLLOWER and is retried (docs/architecture.md,
"Transactions"). A plain ``write_marker(topic, partition, markers) ->
error_code`` callable is accepted too (one partition at a time, answered at
once; the unit tests' writers).
"""

from __future__ import annotations

import collections
import logging
import time

from kafkapy.coordinator.transaction.coordinator import WriteMarkers
from kafkapy.client.blocking import request
from kafkapy.client.sender_thread import SenderThread, stop_all
from kafkapy.protocol.errors import ErrorCode as E

log = logging.getLogger("kafkapy.coordinator")

# Kafka's TransactionMarkerRequestCompletionHandler, per partition error.
_RETRY = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR,
                    E.COORDINATOR_NOT_AVAILABLE})
_ABORT_SENDING = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED, E.PRODUCER_FENCED})
_SKIP = frozenset({E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})


class _OneByOne:
    """The writer contract over a per-partition ``write_marker`` callable
    (every outcome known at once)."""

    outstanding = 0

    def __init__(self, write_marker):
        self.write_marker = write_marker

    def begin(self, batch):
        return [{tp: self.write_marker(tp[0], tp[1], markers) for tp in tps} for markers, tps in batch]

    def poll(self):
        return []

    def forget(self, keep) -> None:
        pass

    def close(self) -> None:
        pass


class _Pending:
    """One transaction's markers: the partitions not written yet, and those
    of them in flight (started, outcome not back)."""

    __slots__ = ("markers", "remaining", "in_flight")

    def __init__(self, markers: WriteMarkers):
        self.markers = markers
        self.remaining = set(markers.partitions)
        self.in_flight = set()


class TransactionMarkerChannel:
    """Owned by the coordinator's thread (every method)."""

    def __init__(self, writer, on_written=None):
        self.writer = writer if hasattr(writer, "begin") else _OneByOne(writer)
        # The writer's ``begin``, called once per pass (a seam for the tests).
        self.write_all = self.writer.begin
        # (topic, partition), markers -> None, after each marker is written:
        # the group coordinator's seam for TxnOffsetCommit (Kafka's
        # handleTxnCompletion: a marker on a __consumer_offsets partition
        # makes the producer's pending offsets committed or drops them).
        self.on_written = on_written
        self.pending: dict[str, _Pending] = {}  # transactional id -> its markers being written
        # Transactional ids with partitions neither written nor in flight:
        # what the next ``retry`` starts again.
        self.unsent: set[str] = set()
        # A retriable outcome came in (the coordinator reads and clears it to
        # schedule the retry), and something was started or came back (it
        # polls again soon).
        self.failed = False
        self.activity = False

    @property
    def in_flight(self) -> bool:
        return self.writer.outstanding > 0

    def send(self, markers: WriteMarkers) -> bool:
        """Start writing ``markers``; True when all are written now."""
        txn_id = markers.transactional_id
        replaced = txn_id in self.pending
        self.pending[txn_id] = _Pending(markers)
        if replaced:
            self._forget_stale()
        return bool(self._attempt([txn_id]))

    def retry(self) -> list[WriteMarkers]:
        """Start every pending transaction's failed partitions again (one
        pass: one request per leader); the transactions now complete."""
        if not self.unsent:
            return []
        return self._attempt([t for t in self.pending if t in self.unsent])

    def poll(self) -> list[WriteMarkers]:
        """Apply the outcomes that came back; the transactions now complete."""
        done = []
        for markers, tp, error in self.writer.poll():
            self.activity = True
            entry = self.pending.get(markers.transactional_id)
            if entry is None or entry.markers is not markers:
                continue  # fenced, unloaded or replaced meanwhile
            if self._settle(entry, tp, error) and not entry.remaining:
                del self.pending[markers.transactional_id]
                done.append(markers)
        return done

    def _attempt(self, txn_ids) -> list[WriteMarkers]:
        batch, entries = [], []
        unsent, pending = self.unsent, self.pending
        for txn_id in txn_ids:
            unsent.discard(txn_id)
            entry = pending[txn_id]
            tps = sorted(entry.remaining - entry.in_flight if entry.in_flight else entry.remaining)
            if tps:
                batch.append((entry.markers, tps))
                entries.append(entry)
        if not batch:
            return []
        done = []
        for entry, (_, tps), answered in zip(entries, batch, self.write_all(batch)):
            for tp in tps:
                error = answered.get(tp)
                if error is None:
                    entry.in_flight.add(tp)
                    self.activity = True
                elif not self._settle(entry, tp, error):
                    break
            else:
                if not entry.remaining:
                    del self.pending[entry.markers.transactional_id]
                    done.append(entry.markers)
        return done

    def _settle(self, entry: _Pending, tp, error: int) -> bool:
        """One partition's outcome; False when the transaction's sending stopped."""
        entry.in_flight.discard(tp)
        markers = entry.markers
        if error == E.NONE:
            entry.remaining.discard(tp)
            if self.on_written is not None:
                self.on_written(tp, markers)
        elif error in _SKIP:
            entry.remaining.discard(tp)
        elif error in _ABORT_SENDING:
            log.warning("markers of %s stop at %s-%d: %s (a newer coordinator or producer epoch owns it)",
                        markers.transactional_id, tp[0], tp[1], E(error).name)
            del self.pending[markers.transactional_id]
            self.unsent.discard(markers.transactional_id)
            self._forget_stale()
            return False
        else:
            if error not in _RETRY:
                # Kafka treats the rest as a bug (IllegalStateException); a
                # marker is never dropped silently: log and retry.
                log.error("marker of %s for %s-%d failed with %s; retrying", markers.transactional_id,
                          tp[0], tp[1], error)
            self.unsent.add(markers.transactional_id)
            self.failed = True
        return True

    def _forget_stale(self) -> None:
        """Let the writer drop queued work of markers no longer pending."""
        pending = self.pending

        def keep(markers):
            entry = pending.get(markers.transactional_id)
            return entry is not None and entry.markers is markers

        self.writer.forget(keep)

    def remove_for(self, still_owned) -> None:
        """Forget the transactions ``still_owned(transactional_id)`` rejects
        (their ``__transaction_state`` partition was unloaded); outcomes of
        their markers still in flight are ignored when they come back."""
        gone = [t for t in self.pending if not still_owned(t)]
        for txn_id in gone:
            del self.pending[txn_id]
            self.unsent.discard(txn_id)
        if gone:
            self._forget_stale()

    def close(self) -> None:
        self.writer.close()


class LocalMarkerWriter:
    """Appends markers to partitions this broker leads
    (``Partition.append_control_batch_to_leader``: a produce's leader and
    min.insync.replicas checks, acks=-1 as Kafka's coordinator writes it).

    ``begin`` (the coordinator's channel) appends every marker of the pass and
    answers at once those whose high watermark already passed them (with the
    ISR the leader alone, a standalone broker: all); the others wait for the
    followers without blocking anyone: ``poll`` looks at their high
    watermarks again (Kafka completes them in the produce purgatory), and
    answers REQUEST_TIMED_OUT after ``timeout_ms``. ``append`` alone is the
    WriteTxnMarkers handler's (the processor parks its wait). Owned by its
    caller's thread."""

    def __init__(self, broker, timeout_ms: int = 30000, clock=time.monotonic):
        self.broker = broker
        self.timeout_ms = timeout_ms
        self.clock = clock
        # Appended, waiting for the high watermark: [deadline, markers, tp, partition, offset].
        self._waiting: list = []

    @property
    def outstanding(self) -> int:
        return len(self._waiting)

    def append(self, topic: str, partition_id: int, markers: WriteMarkers):
        """``(error_code, partition, offset the high watermark must pass)``;
        partition None when there is nothing to wait for."""
        info = self.broker.metadata().topics.get(topic)
        if info is None or partition_id >= info.num_partitions:
            # Deleted with its data: there is nothing to mark (Kafka drops it).
            return E.NONE, None, 0
        partition = self.broker.replica_manager.get_partition(topic, partition_id)
        if partition is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, None, 0
        error, result = partition.append_control_batch_to_leader(
            markers.producer_id, markers.producer_epoch, markers.coordinator_epoch, markers.commit)
        if error:
            return error, None, 0
        return E.NONE, partition, result.last_offset + 1

    def begin(self, batch) -> list[dict]:
        results = []
        slots = []
        waits = False
        for markers, tps in batch:
            errors = {}
            for tp in tps:
                error, partition, offset = self.append(tp[0], tp[1], markers)
                if partition is not None:
                    slots.append(partition.slot)
                    done, error = partition.check_enough_replicas_reach_offset(offset)
                    if not (done or error):
                        self._waiting.append((self.clock() + self.timeout_ms / 1000, markers, tp, partition, offset))
                        waits = True
                        continue
                errors[tp] = error
            results.append(errors)
        if slots:
            # A marker moves the log end offset and, with the leader alone in
            # the ISR, the high watermark and last stable offset at once:
            # wake the fetches parked on them (a read_committed consumer
            # waiting at the LSO, followers), as Kafka's append completes its
            # delayed fetches. Otherwise they sleep out max_wait_ms.
            self.broker.replica_manager.wake_delayed_operations(slots)
        if waits:
            # The followers' fetches parked on the old log end offset (as
            # offsets_topic.await_replication wakes them for offset commits).
            self.broker.replica_manager.wake_delayed_operations()
        return results

    def poll(self) -> list:
        if not self._waiting:
            return []
        now = self.clock()
        out, still = [], []
        for item in self._waiting:
            deadline, markers, tp, partition, offset = item
            done, error = partition.check_enough_replicas_reach_offset(offset)
            if done or error:
                out.append((markers, tp, error))
            elif now >= deadline:
                out.append((markers, tp, E.REQUEST_TIMED_OUT))
            else:
                still.append(item)
        self._waiting = still
        return out

    def forget(self, keep) -> None:
        self._waiting = [w for w in self._waiting if keep(w[1])]

    def close(self) -> None:
        self._waiting = []


WRITE_TXN_MARKERS = 27
_WRITE_TXN_MARKERS_VERSION = 0  # Kafka 3.9 brokers serve 0-1; v0 has no tagged fields to frame
# One WriteTxnMarkers round trip at most this long (the leader's handler
# waits up to 10 s for its high watermark, write_txn_markers.MARKER_WAIT_MS).
REMOTE_TIMEOUT_S = 15.0


def _request_markers(items) -> list:
    """One WritableTxnMarker per transaction of ``items`` (``(markers, tp)``), in their order."""
    grouped: dict[int, tuple] = {}  # id(markers) -> (markers, {topic: [partitions]})
    for markers, (topic, p) in items:
        grouped.setdefault(id(markers), (markers, {}))[1].setdefault(topic, []).append(p)
    return [{"producer_id": m.producer_id, "producer_epoch": m.producer_epoch, "transaction_result": m.commit,
             "coordinator_epoch": m.coordinator_epoch,
             "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
            for m, topics in grouped.values()]


class _Destination(SenderThread):
    """One leader's sender thread (Kafka's marker channel keeps a queue per
    destination broker): every item queued for the leader (``(markers,
    tp)``) goes in ONE WriteTxnMarkers request, and ``(items, errors)`` to
    ``completions`` (a deque the coordinator's thread drains). A failed
    connection answers REQUEST_TIMED_OUT for the request's items and for
    those queued behind them, so the coordinator routes them again (to a
    new leader if there is one) instead of leaving them behind a dead one."""

    def __init__(self, broker_id: int, client_id: bytes, security, completions):
        super().__init__(f"txn-marker-sender-{broker_id}", client_id, security, REMOTE_TIMEOUT_S)
        self.broker_id = broker_id
        self.completions = completions
        self.start()

    def failed(self, items, exc) -> None:
        if isinstance(exc, (OSError, ValueError)):
            log.warning("WriteTxnMarkers to broker %d for %d partition(s) failed: %s", self.broker_id,
                        len(items), exc)
        else:
            log.error("WriteTxnMarkers to broker %d failed", self.broker_id, exc_info=exc)
        self.completions.append((items, [E.REQUEST_TIMED_OUT] * len(items)))

    def done(self, items, errors) -> None:
        self.completions.append((items, errors))

    def exchange(self, address, items) -> list[int]:
        """Send ``items`` in one request and read the answer: their errors, in order."""
        sock = self.socket(address)
        requested = _request_markers(items)
        response = request(sock, WRITE_TXN_MARKERS, _WRITE_TXN_MARKERS_VERSION, {"markers": requested},
                           self.next_correlation_id(), self.client_id)
        if len(response.markers) != len(requested):
            raise ValueError("WriteTxnMarkers answer with another number of markers")
        errors = {}
        for asked, answered in zip(requested, response.markers):
            for t in answered.topics:
                for p in t.partitions:
                    errors[asked["producer_id"], t.name, p.partition_index] = p.error_code
        return [errors.get((m.producer_id, tp[0], tp[1]), E.REQUEST_TIMED_OUT) for m, tp in items]


class MarkerWriter:
    """Where each marker goes (Kafka's TransactionMarkerChannelManager
    destinations): a partition this broker leads is appended here
    (``LocalMarkerWriter``, on the caller's thread), those led by another
    live broker go to that broker's sender thread (``_Destination``;
    ``address_of(broker_id)`` is its inter-broker endpoint or None); no live
    leader: NOT_LEADER_OR_FOLLOWER, retried. Owned by the coordinator's
    thread; the sender threads touch only their own connections, queues and
    the completions deque, never the broker or its partitions."""

    def __init__(self, broker, address_of, local=None, security=None):
        self.broker = broker
        self.address_of = address_of
        # The inter-broker listener's TLS/SASL (kafkapy.client.security.ClientSecurity,
        # for kafkapy.client.blocking.open_socket); None: PLAINTEXT.
        self.security = security
        self.local = local or LocalMarkerWriter(broker)
        self.destinations: dict[int, _Destination] = {}
        self._completions: collections.deque = collections.deque()
        self._remote_outstanding = 0
        self._client_id = f"transaction-coordinator-{broker.broker_id}".encode()

    @property
    def outstanding(self) -> int:
        return self._remote_outstanding + self.local.outstanding

    def begin(self, batch) -> list[dict]:
        metadata = self.broker.metadata()
        results = [{} for _ in batch]
        local = []
        remote: dict[int, list] = {}  # leader -> [(markers, tp)]
        for i, (markers, tps) in enumerate(batch):
            mine = []
            for tp in tps:
                state = metadata.partition_state(*tp)
                if state is None or state.leader == self.broker.broker_id:
                    mine.append(tp)
                elif state.leader < 0 or self.address_of(state.leader) is None:
                    results[i][tp] = E.NOT_LEADER_OR_FOLLOWER
                else:
                    remote.setdefault(state.leader, []).append((markers, tp))
            if mine:
                local.append((i, markers, mine))
        # Handed to the senders first: the leaders write while this one appends.
        for leader, items in remote.items():
            destination = self.destinations.get(leader)
            if destination is None:
                destination = self.destinations[leader] = _Destination(leader, self._client_id, self.security,
                                                                       self._completions)
            self._remote_outstanding += len(items)
            destination.enqueue(self.address_of(leader), items)
        if local:
            for (i, _, _), errors in zip(local, self.local.begin([(m, tps) for _, m, tps in local])):
                results[i].update(errors)
        return results

    def poll(self) -> list:
        out = self.local.poll()
        completions = self._completions
        while completions:
            items, errors = completions.popleft()
            self._remote_outstanding -= len(items)
            out.extend((markers, tp, error) for (markers, tp), error in zip(items, errors))
        return out

    def forget(self, keep) -> None:
        self.local.forget(keep)
        for destination in self.destinations.values():
            self._remote_outstanding -= destination.forget(lambda item: keep(item[0]))

    def close(self) -> None:
        """Stop every sender thread (their connections closed)."""
        destinations, self.destinations = list(self.destinations.values()), {}
        stop_all(destinations)
        self.local.close()
        self._completions.clear()
        self._remote_outstanding = 0

