"""Delayed operations as data (Kafka's DelayedOperationPurgatory, DelayedFetch, DelayedProduce).

A request that cannot be answered yet — a fetch with less than ``min_bytes``
available, a produce with acks=-1 whose records the ISR has not all got —
becomes a ``DelayedOperation``: what it waits for (``watch``: shared-table
slot index -> (slot field, value it must reach)), its ``deadline_ms``, and
what finishes it. It is plain data (picklable, no references to logs or
sockets) because the worker that parks it is not the one that completes it:
the processor owning the connection keeps it in its ``Purgatory``, checks it
when a wake pipe says high watermarks moved and when its deadline passes,
and finishes it: a fetch goes back to the shared request queue to run again
in any worker, a produce is answered by the processor from its results.

* ``DelayedFetch`` completes when ANY watched partition reached its value
  (a consumer fetch: the high watermark moved past the one it saw) or at the
  deadline; it is finished by running the fetch again with the original
  deadline, since the processor still holds the request bytes.
* ``DelayedProduce`` completes when ALL watched partitions reached their
  value (the high watermark passed each partition's last appended offset)
  or lost their leadership (the slot's ``current_leader_epoch`` is no longer
  the one the records were appended at: LeaderAndIsr or StopReplica moved
  it, and woke the processors), or at the deadline; it carries the
  per-partition produce results: a partition whose leadership moved answers
  NOT_LEADER_OR_FOLLOWER (6) even if its high watermark passed the offset
  (leadership is looked at first: a follower's high watermark is the new
  leader's), one still short at expiry REQUEST_TIMED_OUT (7), as Kafka's
  DelayedProduce does (checkEnoughReplicasReachOffset).
  Re-running a produce would append twice.
* ``DelayedTxnMarkers`` is a ``DelayedProduce`` (Kafka writes transaction
  markers through the same appendRecords with acks=-1 and DelayedProduce):
  the same watch, completion and answering by the processor, with the
  per-partition results of a WriteTxnMarkers request; its ``KIND`` tells the
  processor which response to build.

* ``DelayedVerification`` is a transactional Produce waiting for the
  transaction coordinator's answer to KIP-890's partition verification
  (AddPartitionsToTxn v4 ``verify_only``, sent by the processor's
  ``server.txn_verification.AddPartitionsToTxnManager``): it watches no
  slot; the processor sets ``result`` when the answer comes and then runs
  the produce again with it (nothing was appended the first time).

Pure: no I/O, no imports from the server. ``Purgatory.poll`` is given a
``read_field(slot, field)`` function (the processor's reads the shared table).
A poll checks every parked operation: one processor parks at most its
connections (one request in flight each), ~0.6 us per single-partition fetch
(1,000 parked: 0.58 ms a wake).

Between processes an operation travels as its ``to_wire()`` tuple of plain
values, rebuilt by ``from_wire``: every caught-up consumer's fetch parks, and
pickling the object costs ~4.5 us a round trip (the class looked up by name
on load), the tuple ~0.9 us (the ``(deadline, {slot: hw})`` it replaces:
~0.7 us).
"""

from __future__ import annotations

from kafkapy.protocol.errors import ErrorCode

# to_wire()[0]: which kind of operation a wire tuple is.
FETCH = 0
PRODUCE = 1
TXN_MARKERS = 2
VERIFICATION = 3
# The slot field that says which leader epoch a partition's role is at
# (kafkapy.storage.shared; replication.Partition writes it).
LEADER_EPOCH = "current_leader_epoch"
# The fields a watch names (shared-table fields): an acks=all produce, a
# consumer's fetch and transaction markers wait on the high watermark, a
# follower's fetch on the log end offset.
HIGH_WATERMARK = "high_watermark"
LOG_END_OFFSET = "log_end_offset"


class DelayedOperation:
    __slots__ = ("watch", "deadline_ms")
    KIND = -1

    def __init__(self, watch: dict, deadline_ms: int):
        self.watch = watch  # slot index -> (field name, value it must reach)
        self.deadline_ms = deadline_ms

    def is_satisfied(self, read_field) -> bool:
        raise NotImplementedError

    def to_wire(self) -> tuple:
        """``(kind, watch, deadline_ms, ...)``: builtins only (see the module
        docstring); ``from_wire`` rebuilds the operation."""
        return (self.KIND, self.watch, self.deadline_ms)

    def __getstate__(self):
        return {name: getattr(self, name) for cls in type(self).__mro__
                for name in getattr(cls, "__slots__", ())}

    def __setstate__(self, state):
        for name, value in state.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(watch={self.watch}, deadline_ms={self.deadline_ms})"


class DelayedFetch(DelayedOperation):
    """Any watched partition reached its value (or the deadline): fetch again."""

    __slots__ = ()
    KIND = FETCH

    def is_satisfied(self, read_field) -> bool:
        for slot, (field, value) in self.watch.items():
            if read_field(slot, field) >= value:
                return True
        return False


class DelayedProduce(DelayedOperation):
    """Every watched partition reached its value (or the deadline): answer.

    ``results``: ``[(topic, [(index, error_code, base_offset, log_append_time,
    log_start_offset, error_message, slot), ...]), ...]`` in request order;
    ``slot`` is -1 for a partition that answers at once (an error), else the
    key of its entry in ``watch``. ``correlation_id``, ``api_version`` say
    which request this answers (the processor that completes it encodes the
    response from them alone); ``throttle_ms``, the client quota's throttle
    time its answer carries (server/quotas/enforce.py).
    """

    __slots__ = ("correlation_id", "api_version", "results", "leader_epochs", "throttle_ms")
    KIND = PRODUCE

    def __init__(self, watch: dict, deadline_ms: int, correlation_id: int, api_version: int,
                 results: list, leader_epochs: dict | None = None, throttle_ms: int = 0):
        super().__init__(watch, deadline_ms)
        self.correlation_id = correlation_id
        self.api_version = api_version
        self.results = results
        # slot -> the leader epoch the records were appended at (none: not checked)
        self.leader_epochs = leader_epochs or {}
        self.throttle_ms = throttle_ms

    def to_wire(self) -> tuple:
        return (PRODUCE, self.watch, self.deadline_ms, self.correlation_id, self.api_version,
                self.results, self.leader_epochs, self.throttle_ms)

    def _moved(self, read_field, slot) -> bool:
        epoch = self.leader_epochs.get(slot)
        # StopReplica keeps the epochs but leaves no leader (leader_id -1): a
        # partition stopped or deleted here (reassigned away) answers at once,
        # as Kafka completes its DelayedProduce with NOT_LEADER_OR_FOLLOWER
        return epoch is not None and (read_field(slot, LEADER_EPOCH) != epoch or read_field(slot, "leader_id") < 0)

    def is_satisfied(self, read_field) -> bool:
        for slot, (field, value) in self.watch.items():
            if not self._moved(read_field, slot) and read_field(slot, field) < value:
                return False
        return True

    def final_results(self, read_field) -> list:
        """The results to answer with now: a partition whose leadership moved
        answers NOT_LEADER_OR_FOLLOWER whatever its high watermark (leadership
        first, as Kafka's checkEnoughReplicasReachOffset: a follower's high
        watermark is its new leader's, and the offsets it passed may hold the
        new leader's records, ours truncated); one still short of its value
        REQUEST_TIMED_OUT (the request expired)."""
        watch = self.watch
        out = []
        for topic, partitions in self.results:
            done = []
            for index, code, base_offset, append_time, start_offset, message, slot in partitions:
                if slot >= 0:
                    field, value = watch[slot]
                    moved = self._moved(read_field, slot)
                    if moved or read_field(slot, field) < value:
                        code = ErrorCode.NOT_LEADER_OR_FOLLOWER if moved else ErrorCode.REQUEST_TIMED_OUT
                        base_offset, append_time, start_offset, message = -1, -1, -1, None
                done.append((index, code, base_offset, append_time, start_offset, message, slot))
            out.append((topic, done))
        return out


class DelayedTxnMarkers(DelayedProduce):
    """A WriteTxnMarkers request whose markers wait for the ISR (Kafka's
    handleWriteTxnMarkersRequest: appendRecords with requiredAcks=-1, the
    response sent from the DelayedProduce's completion).

    ``results``: ``[(producer_id, [(topic, [(index, error_code, slot,
    required_offset), ...]), ...]), ...]`` in request order; ``slot`` -1 for a
    partition answered at once (its append failed, or the high watermark had
    passed it already), else the key of its entry in ``watch``, whose value
    is the largest ``required_offset`` of the slot (two producers' markers
    for one partition wait for the later). ``min_isr``: slot -> the
    effective min.insync.replicas at append time: a partition whose high
    watermark passed its marker with a smaller ISR answers
    NOT_ENOUGH_REPLICAS_AFTER_APPEND (19 is before the append, 20 after),
    as checkEnoughReplicasReachOffset. ``throttle_ms`` is never set: Kafka
    sends this response exempt from throttling.
    """

    __slots__ = ("min_isr",)
    KIND = TXN_MARKERS

    def __init__(self, watch: dict, deadline_ms: int, correlation_id: int, api_version: int,
                 results: list, leader_epochs: dict | None = None, throttle_ms: int = 0,
                 min_isr: dict | None = None):
        super().__init__(watch, deadline_ms, correlation_id, api_version, results, leader_epochs, throttle_ms)
        self.min_isr = min_isr or {}

    def to_wire(self) -> tuple:
        return (TXN_MARKERS, self.watch, self.deadline_ms, self.correlation_id, self.api_version,
                self.results, self.leader_epochs, self.throttle_ms, self.min_isr)

    def final_results(self, read_field) -> list:
        """``[(producer_id, [(topic, [(index, error_code), ...]), ...]), ...]``:
        a waiting partition whose leadership moved answers
        NOT_LEADER_OR_FOLLOWER (whether or not its high watermark passed the
        marker: Kafka looks at leadership first), one still short
        REQUEST_TIMED_OUT (the coordinator retries it), one whose ISR shrank
        below min.insync.replicas NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
        out = []
        for producer_id, topics in self.results:
            answered = []
            for topic, partitions in topics:
                codes = []
                for index, code, slot, required_offset in partitions:
                    if slot >= 0:
                        if self._moved(read_field, slot):
                            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                        elif read_field(slot, "high_watermark") < required_offset:
                            code = ErrorCode.REQUEST_TIMED_OUT
                        elif read_field(slot, "isr_mask").bit_count() < self.min_isr.get(slot, 1):
                            code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                    codes.append((index, int(code)))
                answered.append((topic, codes))
            out.append((producer_id, answered))
        return out


class DelayedVerification(DelayedOperation):
    """A Produce whose transactional partitions wait for the coordinator's
    verification. ``partitions``: ``[(topic, partition, token), ...]``, the
    partitions to verify and the token each took
    (``Partition.maybe_start_transaction_verification``); ``result``, set
    by the processor that parked it (never on the wire): ``{(topic,
    partition): error_code}`` of the produce errors the answer left (empty:
    every partition verified)."""

    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "partitions", "result")
    KIND = VERIFICATION

    def __init__(self, watch: dict, deadline_ms: int, transactional_id: str, producer_id: int,
                 producer_epoch: int, partitions: list):
        super().__init__(watch, deadline_ms)
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.partitions = partitions
        self.result = None

    def to_wire(self) -> tuple:
        return (VERIFICATION, self.watch, self.deadline_ms, self.transactional_id, self.producer_id,
                self.producer_epoch, self.partitions)

    def is_satisfied(self, read_field) -> bool:
        return self.result is not None

    def verified(self) -> dict:
        """``{(topic, partition): (error_code, token)}`` for the produce's second run."""
        result = self.result or {}
        return {(t, p): (result.get((t, p), 0), token) for t, p, token in self.partitions}


def from_wire(wire: tuple) -> DelayedOperation:
    """The operation a ``to_wire()`` tuple describes."""
    return _KINDS[wire[0]](*wire[1:])


_KINDS = {FETCH: DelayedFetch, PRODUCE: DelayedProduce, TXN_MARKERS: DelayedTxnMarkers,
          VERIFICATION: DelayedVerification}


class Purgatory:
    """The delayed operations one processor holds, by key (its connection id).

    The earliest deadline is kept (``_earliest``; None: none parked, or the
    one that had it left and it is found again when asked), so the
    processor's loop, which asks for it and for expired operations on every
    turn, looks at every parked operation only when one may be due."""

    __slots__ = ("_parked", "_earliest")

    def __init__(self):
        self._parked: dict = {}  # key -> DelayedOperation
        self._earliest = None

    def __len__(self) -> int:
        return len(self._parked)

    def __contains__(self, key) -> bool:
        return key in self._parked

    def park(self, key, op: DelayedOperation) -> None:
        if key in self._parked:
            raise ValueError(f"{key!r} has an operation parked already")
        self._parked[key] = op
        if len(self._parked) == 1:
            self._earliest = op.deadline_ms
        elif self._earliest is not None and op.deadline_ms < self._earliest:
            self._earliest = op.deadline_ms

    def get(self, key) -> DelayedOperation | None:
        return self._parked.get(key)

    def cancel(self, key) -> DelayedOperation | None:
        """Forget ``key``'s operation (its connection closed); it is never returned."""
        op = self._parked.pop(key, None)
        if op is not None and op.deadline_ms == self._earliest:
            self._earliest = None
        return op

    def next_deadline_ms(self):
        """The earliest deadline parked, or None."""
        if not self._parked:
            return None
        if self._earliest is None:
            self._earliest = min(op.deadline_ms for op in self._parked.values())
        return self._earliest

    def poll(self, read_field, now_ms: float, check_watches: bool = True) -> list:
        """``[(key, op, expired)]`` of the operations to complete now, removed
        from the purgatory: satisfied ones (``expired`` False; checked only
        when ``check_watches``, i.e. after a wake) and those whose deadline
        passed (``expired`` True unless also satisfied)."""
        parked = self._parked
        if not parked or (not check_watches and now_ms < self.next_deadline_ms()):
            return []
        ready = []
        for key, op in list(parked.items()):
            satisfied = check_watches and op.is_satisfied(read_field)
            if satisfied or now_ms >= op.deadline_ms:
                del parked[key]
                ready.append((key, op, not satisfied))
        if ready:
            self._earliest = None
        return ready

    def expire_all(self) -> list:
        """Every parked operation, removed, as expired (shutdown answers them all)."""
        ready = [(key, op, True) for key, op in self._parked.items()]
        self._parked.clear()
        self._earliest = None
        return ready
