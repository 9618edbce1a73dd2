"""KafkaConsumer: assign or subscribe (classic group protocol), poll, commit.

Like Java's consumer it has no I/O thread: all network work happens inside
the caller's ``poll`` (and the other blocking calls), so an instance must be
used by one thread at a time (a guard raises on concurrent use).

Fetching (Java's Fetcher): one Fetch request per leader node for the
fetchable partitions that have a position, nothing buffered and no fetch in
flight.  Each partition's answer is parsed on demand into a buffer of
records; ``poll`` hands out up to ``max.poll.records`` of them and, before
returning, sends the next fetches so they travel while the caller processes
records (prefetch).  A fetch may start mid-batch: records below the position
are skipped; a partial batch at the end of the response (the broker cut at
``max.partition.fetch.bytes``) is dropped and fetched again next time.

Group membership (Java's ConsumerCoordinator, classic protocol):
FindCoordinator -> JoinGroup (MEMBER_ID_REQUIRED answered by rejoining with
the given id) -> the leader runs the assignor -> SyncGroup -> heartbeats from
``poll`` every ``heartbeat.interval.ms``; REBALANCE_IN_PROGRESS,
ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID trigger a rejoin.  Before rejoining
the consumer commits (auto-commit) and calls ``on_partitions_revoked``; after
SyncGroup, ``on_partitions_assigned``.
"""

from __future__ import annotations

import collections
import itertools
import logging
import re
import select
import threading
import time

from kafkapy._core import load

from . import assignors as _assignors
from . import config as _config
from . import errors
from .conn import Connection, KafkaClient
from .structs import ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

log = logging.getLogger("kafkapy.client")

_records = load("records")
_batch = load("batch")
decode_consumer_records = _records.decode_consumer_records
read_header = _batch.read_header

FETCH, LIST_OFFSETS, METADATA = 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14

EARLIEST, LATEST = -2, -1
_CLIENT_IDS = itertools.count(1)
_BATCH_HEADER = 61
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20

# Error codes handled specially.
OFFSET_OUT_OF_RANGE = 1
REBALANCE_IN_PROGRESS = 27
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
MEMBER_ID_REQUIRED = 79
COORDINATOR_ERRORS = frozenset((14, 15, 16))  # load in progress, not available, not coordinator


class _PartitionState:
    __slots__ = ("position", "paused", "high_watermark", "last_stable_offset", "log_start_offset",
                 "records", "index", "next_offset")

    def __init__(self):
        self.position = None
        self.paused = False
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.records = None  # buffered ConsumerRecords not yet returned
        self.index = 0
        self.next_offset = None  # offset after the last fetched batch


class ConsumerRebalanceListener:
    def on_partitions_revoked(self, revoked):
        pass

    def on_partitions_assigned(self, assigned):
        pass


class KafkaConsumer:
    """``KafkaConsumer(*topics, bootstrap_servers=..., group_id=None, **settings)``."""

    def __init__(self, *topics, bootstrap_servers=None, group_id=None, **settings):
        if bootstrap_servers is not None:
            settings["bootstrap.servers"] = bootstrap_servers
        if group_id is not None:
            settings["group.id"] = group_id
        cfg = _config.resolve(_config.CONSUMER, settings, "KafkaConsumer")
        self.config = cfg
        self.client_id = cfg["client.id"] or f"consumer-{cfg['group.id'] or ''}-{next(_CLIENT_IDS)}"
        self.group_id = cfg["group.id"]
        self._client = KafkaClient(cfg["bootstrap.servers"], self.client_id, int(cfg["request.timeout.ms"]),
                                   int(cfg["retry.backoff.ms"]), int(cfg["metadata.max.age.ms"]),
                                   bool(cfg["allow.auto.create.topics"]), _config.security(cfg))
        self._metadata = self._client.metadata
        self._key_deserializer = cfg["key.deserializer"]
        self._value_deserializer = cfg["value.deserializer"]
        reset = str(cfg["auto.offset.reset"]).lower()
        if reset in ("smallest", "beginning"):
            reset = "earliest"
        if reset in ("largest", "end"):
            reset = "latest"
        if reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto.offset.reset must be earliest, latest or none; got {reset!r}")
        self._reset_strategy = reset
        level = cfg["isolation.level"]
        self._isolation_level = 1 if level in ("read_committed", 1) else 0
        self._fetch_min_bytes = int(cfg["fetch.min.bytes"])
        self._fetch_max_wait_ms = int(cfg["fetch.max.wait.ms"])
        self._fetch_max_bytes = int(cfg["fetch.max.bytes"])
        self._partition_max_bytes = int(cfg["max.partition.fetch.bytes"])
        self._max_poll_records = int(cfg["max.poll.records"])
        self._retry_backoff_ms = int(cfg["retry.backoff.ms"])
        self._request_timeout_ms = int(cfg["request.timeout.ms"])
        self._auto_commit = bool(cfg["enable.auto.commit"]) and self.group_id is not None
        self._auto_commit_interval_ms = int(cfg["auto.commit.interval.ms"])
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval_ms / 1000
        self._session_timeout_ms = int(cfg["session.timeout.ms"])
        self._heartbeat_interval_ms = int(cfg["heartbeat.interval.ms"])
        self._rebalance_timeout_ms = int(cfg["rebalance.timeout.ms"] or cfg["max.poll.interval.ms"])
        strategies = cfg["partition.assignment.strategy"]
        if isinstance(strategies, str):
            strategies = [s.strip() for s in strategies.split(",") if s.strip()]
        self._assignors = [_assignors.lookup(s) for s in strategies]
        self._consumer_timeout_ms = cfg["consumer_timeout_ms"]

        self._states: dict[TopicPartition, _PartitionState] = {}
        self._subscription: set[str] | None = None
        self._pattern = None
        self._listener = None
        self._user_assigned = False
        self._completed = collections.deque()
        self._fetching_nodes: set[int] = set()
        self._closed = False
        self._owner = None
        self._iterator = None
        self._pending_async_commits = []

        # Group state (owned by the polling thread).
        self._coordinator: Connection | None = None
        self._member_id = ""
        self._generation_id = -1
        self._protocol = None
        self._rejoin_needed = True
        self._last_heartbeat = 0.0
        self._heartbeat_in_flight = False

        if topics:
            self.subscribe(topics)

    # ------------------------------------------------------------ guards

    def _acquire(self):
        if self._closed:
            raise errors.IllegalStateError("This consumer has already been closed.")
        me = threading.get_ident()
        if self._owner is not None and self._owner != me:
            raise errors.IllegalStateError("KafkaConsumer is not safe for multi-threaded access")
        self._owner = me

    def _release(self):
        self._owner = None

    # ------------------------------------------------------------ subscription

    def assign(self, partitions) -> None:
        self._acquire()
        try:
            if self._subscription is not None:
                raise errors.IllegalStateError("Subscription to topics and manual assignment are mutually exclusive")
            partitions = [TopicPartition(*tp) for tp in partitions]
            self._user_assigned = bool(partitions)
            self._set_assignment(partitions)
            self._client.topics = {tp.topic for tp in partitions}
        finally:
            self._release()

    def _set_assignment(self, partitions):
        old = self._states
        self._states = {tp: old.get(tp) or _PartitionState() for tp in partitions}
        self._completed = collections.deque(c for c in self._completed if c[0] in self._states)

    def assignment(self) -> set:
        return set(self._states)

    def subscribe(self, topics=(), pattern=None, listener=None) -> None:
        if self._user_assigned:
            raise errors.IllegalStateError("Subscription to topics and manual assignment are mutually exclusive")
        if self.group_id is None:
            raise errors.IllegalStateError("subscribe() needs a group.id")
        if isinstance(topics, str):
            topics = [topics]
        topics = list(topics)
        if any(not t for t in topics):
            raise ValueError("topic names must be non-empty")
        if pattern is not None:
            self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self._subscription = set()
        else:
            self._pattern = None
            if not topics:
                self.unsubscribe()
                return
            self._subscription = set(topics)
        self._listener = listener
        self._client.topics = set(self._subscription) if self._pattern is None else None
        self._rejoin_needed = True

    def subscription(self):
        return set(self._subscription) if self._subscription is not None else None

    def unsubscribe(self) -> None:
        if self._subscription is not None and self._member_id:
            self._leave_group()
        self._subscription = None
        self._pattern = None
        self._user_assigned = False
        self._set_assignment([])

    # ------------------------------------------------------------ metadata helpers

    def topics(self) -> dict:
        self._refresh_all()
        return {t: set(parts) for t, parts in self._metadata.partitions.items()}

    def _refresh_all(self):
        conn = self._client.least_loaded_connection()
        from .conn import metadata_request
        response = conn.request(METADATA, metadata_request(None, False))
        self._metadata.update(response, None)
        return response

    def partitions_for_topic(self, topic: str):
        if topic not in self._metadata.partitions:
            self._client.refresh_metadata([topic])
        parts = self._metadata.partitions.get(topic)
        return set(parts) if parts else None

    def _leader(self, tp) -> int:
        leader = self._metadata.leader_for(tp.topic, tp.partition)
        if leader < 0:
            self._client.topics = (self._client.topics or set()) | {tp.topic} if self._client.topics is not None else None
            self._client.refresh_metadata(None if self._client.topics is None else self._client.topics | {tp.topic})
            leader = self._metadata.leader_for(tp.topic, tp.partition)
        return leader

    # ------------------------------------------------------------ poll

    def poll(self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True) -> dict:
        """Records fetched since the last poll: ``{TopicPartition: [ConsumerRecord]}``."""
        self._acquire()
        try:
            if self._subscription is None and not self._states:
                raise errors.IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
            max_records = max_records or self._max_poll_records
            deadline = time.monotonic() + max(0, timeout_ms) / 1000
            while True:
                if self._subscription is not None:
                    self._coordinator_poll(deadline)
                self._update_positions()
                records = self._collect(max_records)
                if records:
                    self._send_fetches()  # prefetch while the caller works
                    return records
                self._send_fetches()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return {}
                wait = remaining
                if self._subscription is not None:
                    wait = min(wait, self._heartbeat_interval_ms / 1000)
                self._wait(wait)
                if not self._completed and time.monotonic() >= deadline:
                    return self._collect(max_records)
        finally:
            self._release()

    def __iter__(self):
        return self

    def __next__(self):
        deadline = None
        if self._consumer_timeout_ms is not None:
            deadline = time.monotonic() + self._consumer_timeout_ms / 1000
        while True:
            if self._iterator:
                return self._iterator.popleft()
            if deadline is not None and time.monotonic() >= deadline:
                raise StopIteration
            timeout = 1000 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            batch = self.poll(timeout_ms=min(timeout, 1000))
            self._iterator = collections.deque(r for records in batch.values() for r in records)

    def _connections(self):
        conns = [c for c in self._client.connections.values() if c.connected and c.in_flight]
        if self._coordinator is not None and self._coordinator.connected and self._coordinator.in_flight:
            conns.append(self._coordinator)
        return conns

    def _wait(self, timeout_s: float) -> None:
        conns = self._connections()
        if not conns:
            time.sleep(min(timeout_s, self._retry_backoff_ms / 1000))
            return
        try:
            readable, _, _ = select.select(conns, [], [], max(0.0, timeout_s))
        except (OSError, ValueError):
            return
        for conn in readable:
            conn.on_readable()

    # ------------------------------------------------------------ positions

    def _update_positions(self) -> None:
        missing = [tp for tp, st in self._states.items() if st.position is None]
        if not missing:
            return
        if self.group_id is not None:
            committed = self._fetch_committed(missing)
            for tp, offset in committed.items():
                if offset is not None and offset.offset >= 0:
                    self._states[tp].position = offset.offset
            missing = [tp for tp in missing if self._states[tp].position is None]
        if not missing:
            return
        if self._reset_strategy == "none":
            raise errors.NoOffsetForPartitionError(f"no committed offset for {missing} and auto.offset.reset=none")
        self._reset_positions(missing, EARLIEST if self._reset_strategy == "earliest" else LATEST)

    def _reset_positions(self, partitions, timestamp) -> None:
        offsets = self._list_offsets({tp: timestamp for tp in partitions})
        for tp, (offset, _ts) in offsets.items():
            if tp in self._states and offset is not None and offset >= 0:
                st = self._states[tp]
                st.position = offset
                st.records = None
                st.next_offset = None

    def _list_offsets(self, timestamps: dict) -> dict:
        """``{tp: (offset, timestamp)}`` from ListOffsets, grouped by leader; retries retriable errors."""
        result = {}
        pending = dict(timestamps)
        deadline = time.monotonic() + self._request_timeout_ms / 1000
        while pending:
            by_node: dict[int, dict] = {}
            for tp, ts in pending.items():
                by_node.setdefault(self._leader(tp), {})[tp] = ts
            retry = {}
            for node, parts in by_node.items():
                if node < 0:
                    retry.update(parts)
                    continue
                topics: dict[str, list] = {}
                for tp, ts in parts.items():
                    topics.setdefault(tp.topic, []).append(
                        {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": ts,
                         "max_num_offsets": 1})
                values = {"replica_id": -1, "isolation_level": self._isolation_level,
                          "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}
                response = self._client.request(node, LIST_OFFSETS, values)
                for topic in response.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.name, part.partition_index)
                        if part.error_code:
                            err = errors.for_code(part.error_code, f"ListOffsets {tp}")
                            if not err.retriable:
                                raise err
                            retry[tp] = parts[tp]
                        else:
                            result[tp] = (part.offset, part.timestamp)
            pending = retry
            if pending:
                if time.monotonic() > deadline:
                    raise errors.KafkaTimeoutError(f"ListOffsets for {sorted(pending)} did not succeed in time")
                time.sleep(self._retry_backoff_ms / 1000)
                self._client.refresh_metadata()
        return result

    def seek(self, partition, offset: int) -> None:
        tp = TopicPartition(*partition)
        if tp not in self._states:
            raise errors.IllegalStateError(f"No current assignment for partition {tp}")
        if offset < 0:
            raise ValueError("seek offset must be >= 0")
        st = self._states[tp]
        st.position = offset
        st.records = None
        st.next_offset = None

    def seek_to_beginning(self, *partitions) -> None:
        self._seek_to(partitions, EARLIEST)

    def seek_to_end(self, *partitions) -> None:
        self._seek_to(partitions, LATEST)

    def _seek_to(self, partitions, timestamp):
        partitions = [TopicPartition(*tp) for tp in partitions] or list(self._states)
        for tp in partitions:
            if tp not in self._states:
                raise errors.IllegalStateError(f"No current assignment for partition {tp}")
        self._reset_positions(partitions, timestamp)

    def position(self, partition) -> int:
        tp = TopicPartition(*partition)
        if tp not in self._states:
            raise errors.IllegalStateError(f"No current assignment for partition {tp}")
        if self._states[tp].position is None:
            self._update_positions()
        return self._states[tp].position

    def beginning_offsets(self, partitions) -> dict:
        return {tp: off for tp, (off, _) in self._list_offsets({TopicPartition(*tp): EARLIEST for tp in partitions}).items()}

    def end_offsets(self, partitions) -> dict:
        return {tp: off for tp, (off, _) in self._list_offsets({TopicPartition(*tp): LATEST for tp in partitions}).items()}

    def offsets_for_times(self, timestamps: dict) -> dict:
        """``{tp: OffsetAndTimestamp or None}``: the earliest offset whose timestamp >= the given ms."""
        found = self._list_offsets({TopicPartition(*tp): int(ts) for tp, ts in timestamps.items()})
        return {tp: (OffsetAndTimestamp(off, ts) if off is not None and off >= 0 else None)
                for tp, (off, ts) in found.items()}

    def pause(self, *partitions) -> None:
        for tp in partitions:
            st = self._states.get(TopicPartition(*tp))
            if st is None:
                raise errors.IllegalStateError(f"No current assignment for partition {tp}")
            st.paused = True

    def resume(self, *partitions) -> None:
        for tp in partitions:
            st = self._states.get(TopicPartition(*tp))
            if st is not None:
                st.paused = False

    def paused(self) -> set:
        return {tp for tp, st in self._states.items() if st.paused}

    def highwater(self, partition):
        st = self._states.get(TopicPartition(*partition))
        return None if st is None or st.high_watermark < 0 else st.high_watermark

    # ------------------------------------------------------------ fetching

    def _send_fetches(self) -> None:
        by_node: dict[int, list] = {}
        in_flight = {c[0] for c in self._completed}
        for tp, st in self._states.items():
            if st.position is None or st.paused or st.records is not None or tp in in_flight:
                continue
            leader = self._metadata.leader_for(tp.topic, tp.partition)
            if leader < 0:
                self._metadata.request_update()
                continue
            if leader in self._fetching_nodes:
                continue
            by_node.setdefault(leader, []).append((tp, st.position))
        if self._metadata.need_update:
            try:
                self._client.refresh_metadata()
            except errors.KafkaError as exc:
                log.warning("metadata refresh failed: %s", exc)
        for node, parts in by_node.items():
            topics: dict[str, list] = {}
            for tp, offset in parts:
                topics.setdefault(tp.topic, []).append({
                    "partition": tp.partition, "current_leader_epoch": -1, "fetch_offset": offset,
                    "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": self._partition_max_bytes})
            values = {
                "replica_id": -1, "max_wait": self._fetch_max_wait_ms, "min_bytes": self._fetch_min_bytes,
                "max_bytes": self._fetch_max_bytes, "isolation_level": self._isolation_level,
                "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
                "forgotten_topics_data": [], "rack_id": "",
            }
            offsets = dict(parts)
            try:
                conn = self._client.connection(node)
                conn.send(FETCH, values, lambda resp, err, node=node, offsets=offsets:
                          self._on_fetch(node, offsets, resp, err))
            except errors.KafkaError as exc:
                log.warning("fetch from node %s failed: %s", node, exc)
                self._metadata.request_update()
                continue
            self._fetching_nodes.add(node)

    def _on_fetch(self, node, offsets, response, error) -> None:
        self._fetching_nodes.discard(node)
        if error is not None:
            log.debug("fetch from node %s failed: %s", node, error)
            self._metadata.request_update()
            return
        for topic in response.responses:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition_index)
                fetch_offset = offsets.get(tp)
                if fetch_offset is not None:
                    self._completed.append((tp, fetch_offset, part))

    def _parse(self, tp, fetch_offset, part) -> None:
        st = self._states.get(tp)
        if st is None or st.position != fetch_offset or st.paused:
            return  # reassigned, sought or paused since the fetch was sent
        code = part.error_code
        if code:
            if code == OFFSET_OUT_OF_RANGE:
                if self._reset_strategy == "none":
                    raise errors.OffsetOutOfRangeError(f"{tp} offset {fetch_offset}")  # noqa: F821
                st.position = None
                return
            err = errors.for_code(code, f"fetch {tp}")
            if err.retriable:
                self._metadata.request_update()
                return
            raise err
        st.high_watermark = part.high_watermark
        st.last_stable_offset = getattr(part, "last_stable_offset", -1)
        st.log_start_offset = getattr(part, "log_start_offset", -1)
        data = part.records
        if not data:
            return
        view = data if isinstance(data, memoryview) else memoryview(data)
        aborted = None
        if self._isolation_level == 1 and getattr(part, "aborted_transactions", None):
            aborted = sorted((a.first_offset, a.producer_id) for a in part.aborted_transactions)
        aborting: set = set()
        records = []
        position = 0
        size = len(view)
        next_offset = None
        while size - position >= _BATCH_HEADER:
            header = read_header(view, position)
            batch_size = header.batch_length + 12
            if batch_size > size - position:
                break  # a partial trailing batch: fetched again next time
            last_offset = header.base_offset + header.last_offset_delta
            attributes = header.attributes
            batch_view = view[position:position + batch_size]
            position += batch_size
            next_offset = last_offset + 1
            if last_offset < fetch_offset:
                continue
            if aborted is not None:
                while aborted and aborted[0][0] <= last_offset:
                    aborting.add(aborted.pop(0)[1])
            if attributes & _ATTR_CONTROL:
                if aborted is not None or aborting:
                    aborting.discard(header.producer_id)
                continue
            if aborting and attributes & _ATTR_TRANSACTIONAL and header.producer_id in aborting:
                continue
            records.extend(decode_consumer_records(batch_view, tp.topic, tp.partition, fetch_offset, ConsumerRecord))
        if next_offset is None:
            return
        if self._key_deserializer is not None or self._value_deserializer is not None:
            kd, vd = self._key_deserializer, self._value_deserializer
            records = [r._replace(key=kd(r.key) if kd and r.key is not None else r.key,
                                  value=vd(r.value) if vd and r.value is not None else r.value)
                       for r in records]
        st.records = records
        st.index = 0
        st.next_offset = max(next_offset, fetch_offset)

    def _collect(self, max_records: int) -> dict:
        while self._completed:
            tp, fetch_offset, part = self._completed.popleft()
            self._parse(tp, fetch_offset, part)
        out = {}
        remaining = max_records
        for tp, st in self._states.items():
            if remaining <= 0:
                break
            records = st.records
            if records is None or st.paused:
                continue
            start = st.index
            end = min(len(records), start + remaining)
            if end > start:
                chunk = records[start:end] if start or end < len(records) else records
                out[tp] = chunk
                remaining -= end - start
                st.position = chunk[-1].offset + 1
            st.index = end
            if end >= len(records):
                if st.next_offset is not None and st.next_offset > st.position:
                    st.position = st.next_offset
                st.records = None
                st.next_offset = None
        return out

    # ------------------------------------------------------------ commits

    def _commit_values(self, offsets):
        def values(version):
            topics: dict[str, list] = {}
            for tp, om in offsets.items():
                if not isinstance(om, OffsetAndMetadata):
                    om = OffsetAndMetadata(int(om))
                topics.setdefault(tp.topic, []).append({
                    "partition_index": tp.partition, "committed_offset": om.offset,
                    "committed_leader_epoch": om.leader_epoch, "commit_timestamp": -1,
                    "committed_metadata": om.metadata or ""})
            in_group = self._subscription is not None and self._generation_id >= 0
            return {
                "group_id": self.group_id,
                "generation_id_or_member_epoch": self._generation_id if in_group else -1,
                "member_id": self._member_id if in_group else "",
                "group_instance_id": None,
                "retention_time": -1,
                "topics": [{"name": t, "partitions": p} for t, p in topics.items()],
            }
        return values

    def _consumed_offsets(self):
        return {tp: OffsetAndMetadata(st.position) for tp, st in self._states.items() if st.position is not None}

    def commit(self, offsets=None) -> None:
        """Synchronous commit of ``offsets`` (default: the current positions)."""
        if self.group_id is None:
            raise errors.IllegalStateError("commit needs a group.id")
        offsets = self._consumed_offsets() if offsets is None else {TopicPartition(*tp): o for tp, o in offsets.items()}
        if not offsets:
            return
        deadline = time.monotonic() + self._request_timeout_ms / 1000
        while True:
            conn = self._ensure_coordinator(deadline)
            response = conn.request(OFFSET_COMMIT, self._commit_values(offsets))
            retry = False
            for topic in response.topics:
                for part in topic.partitions:
                    code = part.error_code
                    if not code:
                        continue
                    if code in COORDINATOR_ERRORS:
                        self._coordinator_dead()
                        retry = True
                    elif code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
                        self._rejoin_needed = True
                        raise errors.CommitFailedError(
                            "Commit cannot be completed since the group has already rebalanced "
                            f"({errors.for_code(code).name})")
                    else:
                        err = errors.for_code(code, f"OffsetCommit {topic.name}-{part.partition_index}")
                        if not err.retriable:
                            raise err
                        retry = True
            if not retry:
                return
            if time.monotonic() > deadline:
                raise errors.KafkaTimeoutError("OffsetCommit did not succeed in time")
            time.sleep(self._retry_backoff_ms / 1000)

    def commit_async(self, offsets=None, callback=None) -> None:
        """Send an OffsetCommit without waiting; ``callback(offsets, exception)`` runs in a later poll."""
        if self.group_id is None:
            raise errors.IllegalStateError("commit needs a group.id")
        offsets = self._consumed_offsets() if offsets is None else {TopicPartition(*tp): o for tp, o in offsets.items()}
        if not offsets:
            return
        try:
            conn = self._ensure_coordinator(time.monotonic() + self._request_timeout_ms / 1000)
        except errors.KafkaError as exc:
            if callback:
                callback(offsets, exc)
            return

        def done(response, error):
            if error is None:
                for topic in response.topics:
                    for part in topic.partitions:
                        if part.error_code:
                            error = errors.for_code(part.error_code, "OffsetCommit")
                            if part.error_code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
                                self._rejoin_needed = True
                            break
            if callback:
                callback(offsets, error)
            elif error is not None:
                log.warning("async commit failed: %s", error)

        conn.send(OFFSET_COMMIT, self._commit_values(offsets), done)

    def group_metadata(self):
        """This member's group, generation and member id, for a transactional
        producer's ``send_offsets_to_transaction`` (Java's groupMetadata())."""
        from .transaction_manager import GroupMetadata
        return GroupMetadata(self.group_id, self._generation_id, self._member_id)

    def committed(self, partition, metadata: bool = False):
        """The last committed offset of ``partition`` (None if there is none)."""
        tp = TopicPartition(*partition)
        found = self._fetch_committed([tp]).get(tp)
        if found is None or found.offset < 0:
            return None
        return found if metadata else found.offset

    def _fetch_committed(self, partitions) -> dict:
        topics: dict[str, list] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        values = {"group_id": self.group_id, "require_stable": True,
                  "topics": [{"name": t, "partition_indexes": p} for t, p in topics.items()]}
        deadline = time.monotonic() + self._request_timeout_ms / 1000
        while True:
            conn = self._ensure_coordinator(deadline)
            response = conn.request(OFFSET_FETCH, values)
            code = getattr(response, "error_code", 0)
            if code in COORDINATOR_ERRORS:
                self._coordinator_dead()
            elif code:
                raise errors.for_code(code, "OffsetFetch")
            else:
                out = {}
                retry = False
                for topic in response.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.name, part.partition_index)
                        if part.error_code:
                            err = errors.for_code(part.error_code, f"OffsetFetch {tp}")
                            if not err.retriable:
                                raise err
                            retry = True
                            continue
                        out[tp] = OffsetAndMetadata(part.committed_offset, part.metadata or "",
                                                    getattr(part, "committed_leader_epoch", -1))
                if not retry:
                    return out
            if time.monotonic() > deadline:
                raise errors.KafkaTimeoutError("OffsetFetch did not succeed in time")
            time.sleep(self._retry_backoff_ms / 1000)

    # ------------------------------------------------------------ group coordination

    def _coordinator_dead(self):
        if self._coordinator is not None:
            self._coordinator.close()
        self._coordinator = None

    def _ensure_coordinator(self, deadline: float) -> Connection:
        while self._coordinator is None or not self._coordinator.connected:
            try:
                conn = self._client.least_loaded_connection()
                version = conn.version(FIND_COORDINATOR)
                response = conn.request(FIND_COORDINATOR, {
                    "key": self.group_id, "key_type": 0, "coordinator_keys": [self.group_id]})
                if version >= 4:
                    entry = response.coordinators[0]
                else:
                    entry = response
                if entry.error_code:
                    err = errors.for_code(entry.error_code, f"FindCoordinator {self.group_id}")
                    if not err.retriable:
                        raise err
                else:
                    coordinator = Connection(entry.node_id, entry.host, entry.port, self.client_id,
                                             self._request_timeout_ms, security=self._client.security)
                    coordinator.connect()
                    self._coordinator = coordinator
                    return coordinator
            except errors.KafkaError as exc:
                if not exc.retriable or time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise errors.KafkaTimeoutError(f"coordinator of group {self.group_id} not found in time")
            time.sleep(self._retry_backoff_ms / 1000)
        return self._coordinator

    def _coordinator_poll(self, deadline: float) -> None:
        if self._pattern is not None:
            self._match_pattern()
        if self._rejoin_needed or self._generation_id < 0:
            # Joining may legitimately take up to the rebalance timeout
            # (the coordinator waits for every member).
            self._join_group(time.monotonic() + self._rebalance_timeout_ms / 1000 + 5)
        now = time.monotonic()
        if not self._heartbeat_in_flight and now - self._last_heartbeat >= self._heartbeat_interval_ms / 1000:
            self._send_heartbeat()
        if self._auto_commit and now >= self._next_auto_commit:
            self._next_auto_commit = now + self._auto_commit_interval_ms / 1000
            self.commit_async()

    def _match_pattern(self):
        now = time.monotonic()
        if getattr(self, "_pattern_checked", 0) + self._metadata_refresh_s() > now and self._subscription:
            return
        self._pattern_checked = now
        self._refresh_all()
        matched = {t for t in self._metadata.partitions
                   if self._pattern.fullmatch(t) and t not in self._metadata.internal_topics}
        if matched != self._subscription:
            self._subscription = matched
            self._rejoin_needed = True

    def _metadata_refresh_s(self):
        return int(self.config["metadata.max.age.ms"]) / 1000

    def _send_heartbeat(self):
        try:
            conn = self._ensure_coordinator(time.monotonic() + self._request_timeout_ms / 1000)
        except errors.KafkaError:
            return
        self._heartbeat_in_flight = True
        self._last_heartbeat = time.monotonic()

        def done(response, error):
            self._heartbeat_in_flight = False
            if error is not None:
                self._coordinator_dead()
                return
            code = response.error_code
            if code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
                if code != REBALANCE_IN_PROGRESS:
                    self._member_id = "" if code == UNKNOWN_MEMBER_ID else self._member_id
                    self._generation_id = -1
                self._rejoin_needed = True
            elif code in COORDINATOR_ERRORS:
                self._coordinator_dead()
            elif code:
                log.warning("heartbeat failed: %s", errors.for_code(code).name)

        conn.send(HEARTBEAT, {"group_id": self.group_id, "generation_id": self._generation_id,
                              "member_id": self._member_id, "group_instance_id": None}, done)

    def _join_group(self, deadline: float) -> None:
        # onJoinPrepare: commit what was consumed, tell the listener.
        if self._generation_id >= 0 and self._states:
            if self._auto_commit:
                try:
                    self.commit()
                except errors.KafkaError as exc:
                    log.warning("auto-commit before rebalance failed: %s", exc)
            if self._listener is not None:
                self._listener.on_partitions_revoked(set(self._states))
        elif self._listener is not None and self._states:
            self._listener.on_partitions_revoked(set(self._states))
        self._set_assignment([])
        while True:
            if time.monotonic() > deadline:
                raise errors.KafkaTimeoutError(f"joining group {self.group_id} did not complete in time")
            conn = self._ensure_coordinator(deadline)
            # A JoinGroup may sit at the coordinator for the rebalance
            # timeout, so it is allowed that long plus the request timeout.
            wait_ms = self._rebalance_timeout_ms + self._request_timeout_ms
            metadata = _assignors.encode_subscription(self._subscription)
            try:
                response = conn.request(JOIN_GROUP, {
                    "group_id": self.group_id, "session_timeout": self._session_timeout_ms,
                    "rebalance_timeout": self._rebalance_timeout_ms, "member_id": self._member_id,
                    "group_instance_id": None, "protocol_type": "consumer", "reason": None,
                    "protocols": [{"name": a.name, "metadata": metadata} for a in self._assignors],
                }, timeout_ms=wait_ms)
            except errors.KafkaConnectionError:
                self._coordinator_dead()
                continue
            code = response.error_code
            if code == MEMBER_ID_REQUIRED:
                self._member_id = response.member_id
                continue
            if code == UNKNOWN_MEMBER_ID:
                self._member_id = ""
                continue
            if code in COORDINATOR_ERRORS:
                self._coordinator_dead()
                time.sleep(self._retry_backoff_ms / 1000)
                continue
            if code == REBALANCE_IN_PROGRESS:
                continue
            if code:
                raise errors.for_code(code, f"JoinGroup {self.group_id}")
            self._member_id = response.member_id
            generation = response.generation_id
            protocol = response.protocol_name
            assignments = []
            if response.leader == response.member_id:
                assignments = self._perform_assignment(protocol, response.members)
            try:
                sync = conn.request(SYNC_GROUP, {
                    "group_id": self.group_id, "generation_id": generation, "member_id": self._member_id,
                    "group_instance_id": None, "protocol_type": "consumer", "protocol_name": protocol,
                    "assignments": assignments}, timeout_ms=wait_ms)
            except errors.KafkaConnectionError:
                self._coordinator_dead()
                continue
            if sync.error_code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
                if sync.error_code == UNKNOWN_MEMBER_ID:
                    self._member_id = ""
                continue
            if sync.error_code in COORDINATOR_ERRORS:
                self._coordinator_dead()
                continue
            if sync.error_code:
                raise errors.for_code(sync.error_code, f"SyncGroup {self.group_id}")
            self._generation_id = generation
            self._protocol = protocol
            self._rejoin_needed = False
            self._last_heartbeat = time.monotonic()
            assigned = _assignors.decode_assignment(sync.assignment)
            self._set_assignment(assigned)
            self._client.topics = {tp.topic for tp in assigned} | set(self._subscription or ())
            if self._listener is not None:
                self._listener.on_partitions_assigned(set(assigned))
            return

    def _perform_assignment(self, protocol, members):
        assignor = next((a for a in self._assignors if a.name == protocol), None)
        if assignor is None:
            raise errors.IllegalStateError(f"Coordinator selected invalid assignment protocol: {protocol}")
        subscriptions = {m.member_id: set(_assignors.decode_subscription(m.metadata)) for m in members}
        all_topics = set().union(*subscriptions.values()) if subscriptions else set()
        self._client.refresh_metadata(all_topics)
        partitions_per_topic = {t: self._metadata.partition_count(t) for t in all_topics
                                if self._metadata.partition_count(t)}
        result = assignor.assign(partitions_per_topic, subscriptions)
        return [{"member_id": m, "assignment": _assignors.encode_assignment(parts)} for m, parts in result.items()]

    def _leave_group(self):
        if self._coordinator is None or not self._member_id:
            return
        try:
            self._coordinator.request(LEAVE_GROUP, {
                "group_id": self.group_id, "member_id": self._member_id,
                "members": [{"member_id": self._member_id, "group_instance_id": None, "reason": "consumer closed"}]},
                timeout_ms=5000)
        except errors.KafkaError as exc:
            log.debug("LeaveGroup failed: %s", exc)
        self._member_id = ""
        self._generation_id = -1

    # ------------------------------------------------------------ close

    def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        if self._closed:
            return
        try:
            if autocommit and self._auto_commit and self._states:
                try:
                    self.commit()
                except errors.KafkaError as exc:
                    log.warning("commit on close failed: %s", exc)
            if self._subscription is not None:
                if self._listener is not None and self._states:
                    try:
                        self._listener.on_partitions_revoked(set(self._states))
                    except Exception:
                        log.exception("rebalance listener raised on close")
                self._leave_group()
        finally:
            self._closed = True
            if self._coordinator is not None:
                self._coordinator.close()
            self._client.close()

    def metrics(self) -> dict:
        return {"assigned-partitions": len(self._states)}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
