"""The transaction coordinator's I/O loop half (Kafka's TransactionCoordinator
with its TransactionStateManager's appends and loads and its marker channel).

``TransactionCoordinator`` runs the sans-IO decisions of
``TransactionCoordinatorState`` against a store (``state_store.
TransactionStateStore``: ``persist``, ``replay``) and a marker channel
(``marker_channel.TransactionMarkerChannel``), all on the one thread of the
group-coordinator process (docs/architecture.md, "Transactions"): a request
is decided, its transition written with acks=-1, completed, answered, and its
markers started, in order. Neither the transition's replication nor the
markers block this thread (a frozen follower or leader holds only its own
transactions): a write whose high watermark has not passed it yet is parked
with the rest of its request (the transactional id answers
CONCURRENT_TRANSACTIONS meanwhile: its transition is pending), and ``tick``
completes the parked writes that settled, takes the markers' outcomes
(persisting CompleteCommit / CompleteAbort for the transactions whose
markers are all written) and runs the timed work (timed-out transactions
aborted, expired ids removed, failed markers retried).

Built and driven by the group-coordinator process
(``server.coordinator_process``: ``build_transaction_coordinator``, which
follows ``__transaction_state`` leadership and calls ``tick``); the API
table routes the transaction APIs there (``handlers.TXN_HANDLERS``).
"""

from __future__ import annotations

import logging

from kafkapy.coordinator.transaction.coordinator import Answer, Persist, Result, TransactionCoordinatorState, TxnConfig
from kafkapy.protocol.errors import ErrorCode as E

log = logging.getLogger("kafkapy.coordinator")

# Kafka's defaults for transaction.abort.timed.out.transaction.cleanup.interval.ms
# and transaction.remove.expired.transaction.cleanup.interval.ms (the
# broker config's values are passed in), and how often unwritten markers are
# retried (Kafka's marker channel backs off retry.backoff.ms, 100 ms).
ABORT_TIMED_OUT_INTERVAL_MS = 10_000
REMOVE_EXPIRED_INTERVAL_MS = 3_600_000
MARKER_RETRY_INTERVAL_MS = 100
# While markers are in flight or state writes parked the loop looks for their
# outcomes this often: every millisecond after something was started or came
# back (a remote leader answers in ~1-3 ms: its append and one follower fetch
# round; a state write's followers likewise), then backing off to
# MARKER_POLL_MAX_MS while nothing comes back (a frozen leader's request
# waits up to 15 s, a frozen follower holds a state write until it leaves the
# ISR: ~60 looks a second, not 1,000).
MARKER_POLL_MIN_MS = 1
MARKER_POLL_MAX_MS = 16


def txn_config(config, num_partitions: int | None = None) -> TxnConfig:
    """The decisions' settings from the broker config; ``num_partitions``:
    ``__transaction_state``'s partition count once the topic exists."""
    return TxnConfig(
        num_partitions=num_partitions or config["transaction.state.log.num.partitions"],
        transaction_max_timeout_ms=config["transaction.max.timeout.ms"],
        transactional_id_expiration_ms=config["transactional.id.expiration.ms"])


class TransactionCoordinator:
    def __init__(self, state: TransactionCoordinatorState, store, channel,
                 abort_interval_ms: int = ABORT_TIMED_OUT_INTERVAL_MS,
                 expire_interval_ms: int = REMOVE_EXPIRED_INTERVAL_MS):
        self.state = state
        self.store = store
        self.channel = channel
        self.abort_interval_ms = abort_interval_ms
        self.expire_interval_ms = expire_interval_ms
        now = state.clock_ms()
        self._next_abort_ms = now + abort_interval_ms
        self._next_expire_ms = now + expire_interval_ms
        # When unwritten markers are tried again: at most every
        # MARKER_RETRY_INTERVAL_MS however often ``tick`` runs (the process
        # calls it before every request), as Kafka's marker channel backs off.
        self._next_retry_ms = now
        self._poll_ms = MARKER_POLL_MIN_MS  # how soon ``tick`` wants to run again for markers in flight
        # State writes waiting for their followers, in append order:
        # (the store's pending handle, the Persist, the request's reply not
        # used yet or None). Owned by this thread, as all of this object.
        self._parked: list[tuple[object, Persist, object]] = []
        self._parked_activity = False  # something parked or settled since the last tick
        # CompleteCommit / CompleteAbort writes that failed with
        # COORDINATOR_NOT_AVAILABLE (min.insync.replicas not met, a write
        # timed out): written again every MARKER_RETRY_INTERVAL_MS, the
        # transaction pending meanwhile (Kafka's txnLogAppendRetryQueue).
        self._complete_retries: list[Persist] = []
        # __transaction_state partition -> its log end offset as this
        # coordinator last left it (loaded, or after its own latest write):
        # while it leads, only it writes there.
        self._log_ends: dict[int, int | None] = {}

    # ------------------------------------------------------------ running decisions

    def run(self, result: Result, reply=None) -> None:
        """Carry ``result`` out: write what it persists, complete it, answer
        ``reply(Answer)`` once (if given and there is an answer), write its
        markers and, once they are all written, persist the completion.
        A write the followers have not replicated yet parks the rest (its
        completion, the answer if not given, what follows) until ``tick``
        sees it settled; standalone every write settles at once."""
        state = self.state
        while result is not None:
            if result.answer is not None and reply is not None:
                reply(result.answer)
                reply = None
            follow = None
            if result.markers is not None:
                if self.channel.send(result.markers):
                    follow = state.markers_written(result.markers)
                elif self.channel.failed:
                    self.channel.failed = False
                    self._retry_later()
            if result.persist is not None:
                outcome = self.store.persist(result.persist)
                self._log_ends[result.persist.partition] = self.store.log_end_offset(result.persist.partition)
                if not isinstance(outcome, int):  # waiting for the followers (Kafka's DelayedProduce)
                    self._parked.append((outcome, result.persist, reply))
                    self._parked_activity = True
                    return
                follow = self._completed(result.persist, outcome)
            result = follow

    def _completed(self, persist: Persist, error: int) -> Result:
        if error:
            log.warning("writing %s of %s to __transaction_state failed: error %d",
                        persist.kind, persist.transactional_id, error)
            if persist.kind == "complete" and error == E.COORDINATOR_NOT_AVAILABLE:
                # The markers are written: only the completion is missing, and
                # it is retried (completing the failure would leave the
                # transaction in PrepareX until the partition is reloaded).
                self._complete_retries.append(persist)
                self._retry_later()
                return Result()
        return self.state.complete(persist, error)

    def _settle_parked(self) -> None:
        """Carry on the parked requests whose write settled (replicated, or
        failed: leadership moved, request.timeout.ms ran out), in append
        order; the others stay parked, ahead of any their chains park."""
        parked, self._parked = self._parked, []
        waiting = []
        for item in parked:
            pending, persist, reply = item
            error = self.store.poll_persist(pending)
            if error is None:
                waiting.append(item)
                continue
            self._parked_activity = True
            self._resume(lambda: self._completed(persist, error), reply)
        self._parked[:0] = waiting

    def _resume(self, continuation, reply) -> None:
        """``run`` for a parked request's continuation (``continuation()``:
        completing its write, which gives what follows): a reply that raises
        (say its pipe) costs that answer only, never its transaction's next
        steps nor the other parked requests; a continuation that raises
        answers UNKNOWN_SERVER_ERROR if the request was not answered yet."""
        answered = []

        def answer(value):
            answered.append(value)
            try:
                reply(value)
            except Exception:
                log.exception("answering a parked transaction request failed")
        try:
            self.run(continuation(), None if reply is None else answer)
        except Exception:
            log.exception("continuing a parked transaction request failed")
            if reply is not None and not answered:
                # As a request that fails before parking: an error, never silence.
                answer(Answer(int(E.UNKNOWN_SERVER_ERROR)))

    def _drop_parked(self, which) -> list:
        """Take the parked requests whose Persist ``which`` picks out of the list."""
        taken = [item for item in self._parked if which(item[1])]
        if taken:
            self._parked = [item for item in self._parked if not which(item[1])]
        return taken

    # ------------------------------------------------------------ requests

    def init_producer_id(self, transactional_id, timeout_ms, producer_id, producer_epoch, reply) -> None:
        self.run(self.state.init_producer_id(transactional_id, timeout_ms, producer_id, producer_epoch), reply)

    def add_partitions(self, transactional_id, producer_id, producer_epoch, partitions, reply) -> None:
        self.run(self.state.add_partitions(transactional_id, producer_id, producer_epoch, partitions), reply)

    def end_txn(self, transactional_id, producer_id, producer_epoch, commit, reply) -> None:
        self.run(self.state.end_txn(transactional_id, producer_id, producer_epoch, commit), reply)

    # ------------------------------------------------------------ leadership

    def follow(self, led: dict) -> tuple[list, list]:
        """Serve the ``__transaction_state`` partitions this broker leads now
        (``led``: partition -> its leader epoch): load those it did not lead
        at the last look, at that leader epoch (their coordinator epoch),
        unload those it no longer leads. A partition led both times stays
        loaded at the coordinator epoch it was loaded with, whatever its
        leader epoch is now: Kafka's ``makeLeader`` reports a broker that
        already led the partition as no new leader, so a same-leader epoch
        bump (ZooKeeper mode: the controller taking a dead follower out of
        the ISR) never reaches ``TransactionCoordinator.onElection``. Reloading
        there would drop the requests parked on the partition's writes with
        NOT_COORDINATOR: an EndTxn whose PrepareCommit was in the log would be
        answered CONCURRENT_TRANSACTIONS until every marker is written, which
        a frozen leader holds up indefinitely. But a partition whose log
        moved since this coordinator last wrote it (``_log_ends``) was led by
        another broker meanwhile, between two looks (this broker paused, or
        its loop busy loading): it is unloaded and loaded again at its leader
        epoch now, as Kafka's onResignation then onElection would have done
        for the LeaderAndIsr requests in between; kept, its state would be
        what it was before the other leader's writes (a transaction that
        leader completed and the producer's next one unknown here: an
        EndTxn(commit) of that one answered INVALID_TXN_STATE from the
        previous transaction's CompleteAbort). Returns ``(unloaded, loaded)``:
        ``[(partition, coordinator epoch, ids dropped)]``, ``[(partition,
        coordinator epoch)]``."""
        served = dict(self.state.coordinator_epochs)
        moved = {p for p in served.keys() & led.keys() if self.store.log_end_offset(p) != self._log_ends.get(p)}
        unloaded = [(p, served[p], self.unload(p)) for p in sorted((served.keys() - led.keys()) | moved)]
        for p in moved:
            del served[p]
        loaded = []
        for p in sorted(led.keys() - served.keys()):
            self.load(p, led[p])
            loaded.append((p, led[p]))
        return unloaded, loaded

    def load(self, partition: int, coordinator_epoch: int) -> None:
        """Serve ``__transaction_state`` partition ``partition`` (newly led):
        replay it, then resend the markers of transactions left in
        PrepareCommit / PrepareAbort. Its ids answer
        COORDINATOR_LOAD_IN_PROGRESS until the replay is done."""
        self.state.begin_load(partition)
        # (the end first: a replay reads at least to it, and nothing else writes here while this broker leads)
        self._log_ends[partition] = self.store.log_end_offset(partition)
        records = [(key, value) for item in self.store.replay([partition]) if item is not None
                   for _p, key, value in (item,)]
        for markers in self.state.load_partition(partition, coordinator_epoch, records):
            self.run(Result(markers=markers))

    def unload(self, partition: int) -> int:
        dropped = self.state.unload_partition(partition)
        self._log_ends.pop(partition, None)
        # Requests parked on this partition's writes end now: completing a
        # write of an unloaded partition answers NOT_COORDINATOR (init, add,
        # end, fence) or nothing, whatever the code, and changes nothing.
        for _pending, persist, reply in self._drop_parked(lambda persist: persist.partition == partition):
            self._resume(lambda: self.state.complete(persist, E.NOT_COORDINATOR), reply)
        self._complete_retries = [p for p in self._complete_retries if p.partition != partition]
        owned = self.state.partitions
        self.channel.remove_for(lambda txn_id: self.state.partition_for(txn_id) in owned)
        return dropped

    def close(self) -> None:
        """Stop the marker channel's senders (the process is stopping).
        Parked requests are dropped unanswered: the processors, which own
        their connections, are stopped before this process
        (``supervisor._stop_children``) and closed those connections, and
        this process ends only with the broker; a write that was in the log
        is loaded by the partition's next leader, as Kafka's would be."""
        self._parked = []
        self.channel.close()

    # ------------------------------------------------------------ timers

    def _retry_later(self) -> None:
        """Markers are left unwritten: try them again after the interval
        (an earlier retry already due is kept, so a stream of failing
        transactions cannot postpone the older ones')."""
        now = self.state.clock_ms()
        if self._next_retry_ms <= now:
            self._next_retry_ms = now + MARKER_RETRY_INTERVAL_MS

    def tick(self) -> int:
        """Run what is due; returns when to call again (ms, the state's clock)."""
        now = self.state.clock_ms()
        channel = self.channel
        if self._parked:
            self._settle_parked()
        if channel.in_flight:
            for markers in channel.poll():
                self.run(self.state.markers_written(markers))
        if channel.failed:
            channel.failed = False
            self._retry_later()
        if channel.unsent and now >= self._next_retry_ms:
            self._next_retry_ms = now + MARKER_RETRY_INTERVAL_MS
            for markers in channel.retry():
                self.run(self.state.markers_written(markers))
            channel.failed = False  # this pass's failures wait for the next interval
        if self._complete_retries and now >= self._next_retry_ms:
            self._next_retry_ms = now + MARKER_RETRY_INTERVAL_MS
            retries, self._complete_retries = self._complete_retries, []
            for persist in retries:
                self.run(Result(persist=persist))
        if now >= self._next_abort_ms:
            self._next_abort_ms = now + self.abort_interval_ms
            for result in self.state.abort_timed_out_transactions():
                self.run(result)
        if now >= self._next_expire_ms:
            self._next_expire_ms = now + self.expire_interval_ms
            for persist in self.state.expire_transactional_ids():
                self.run(Result(persist=persist))
        nearest = min(self._next_abort_ms, self._next_expire_ms)
        if channel.unsent or self._complete_retries:
            nearest = min(nearest, max(now, self._next_retry_ms))
        if channel.in_flight or self._parked:
            if channel.activity or self._parked_activity:
                channel.activity = self._parked_activity = False
                self._poll_ms = MARKER_POLL_MIN_MS
            else:
                self._poll_ms = min(self._poll_ms * 2, MARKER_POLL_MAX_MS)
            nearest = min(nearest, now + self._poll_ms)
        return nearest
