"""The tools' client interface on confluent-kafka (fallback backend; see _client)."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Iterable, Optional

from kafkapy.tools._client_types import (
    DEFAULT_TIMEOUT_S,
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    ClientError,
    ConfigEntry,
    ConsumerRecord,
    GroupInfo,
    MemberInfo,
    PartitionInfo,
    TopicInfo,
    TopicPartition,
)

try:
    import confluent_kafka as ck
    from confluent_kafka import admin as ck_admin
except ImportError:  # pragma: no cover - only when neither client is installed
    ck = None

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# librdkafka's local (negative) codes that mean "no broker answered".
_TRANSPORT = {"_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE"}


def _error(exc) -> ClientError:
    if isinstance(exc, ClientError):
        return exc
    err = exc if ck is not None and isinstance(exc, ck.KafkaError) else \
        (exc.args[0] if getattr(exc, "args", None) else None)
    if ck is not None and isinstance(err, ck.KafkaError):
        name = err.name().lstrip("_") if err.code() < 0 else err.name()
        if err.name() in _TRANSPORT:
            name = "NETWORK_EXCEPTION" if err.name() != "_TIMED_OUT" else "REQUEST_TIMED_OUT"
        return ClientError(name, err.code(), err.str())
    if isinstance(exc, concurrent.futures.TimeoutError):
        return ClientError("REQUEST_TIMED_OUT", 7, "Timed out waiting for the broker")
    return ClientError(type(exc).__name__, -1, str(exc))


def _result(future, timeout_s: float = DEFAULT_TIMEOUT_S):
    try:
        return future.result(timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - normalised below
        raise _error(exc) from None


def _raise_unless(exc: BaseException, *ok_names: str) -> None:
    err = _error(exc)
    if err.name not in ok_names:
        raise err


class Clients:
    def __init__(self, bootstrap_servers: str, config: dict):
        if ck is None:
            raise ClientError("CLIENT_UNAVAILABLE", -1, "neither kafkapy.client nor confluent-kafka is installed")
        self.bootstrap_servers = bootstrap_servers
        self.config = dict(config)
        self._admin = None

    # -- lifecycle ---------------------------------------------------------------

    def _base(self, extra: Optional[dict] = None) -> dict:
        conf = {"bootstrap.servers": self.bootstrap_servers, "log_level": 0}
        conf.update(self.config)
        conf.update(extra or {})
        return conf

    @property
    def admin(self):
        if self._admin is None:
            try:
                self._admin = ck_admin.AdminClient(self._base())
            except ck.KafkaException as exc:
                raise _error(exc) from None
        return self._admin

    def close(self) -> None:
        self._admin = None

    # -- topics --------------------------------------------------------------------

    def topic_names(self) -> list[str]:
        try:
            metadata = self.admin.list_topics(timeout=DEFAULT_TIMEOUT_S)
        except ck.KafkaException as exc:
            raise _error(exc) from None
        return sorted(metadata.topics)

    def describe_topics(self, names: Iterable[str]) -> list[TopicInfo]:
        names = list(names)
        if not names:
            return []
        try:
            metadata = self.admin.list_topics(timeout=DEFAULT_TIMEOUT_S)
        except ck.KafkaException as exc:
            raise _error(exc) from None
        ids = {}
        try:
            futures = self.admin.describe_topics(ck.TopicCollection(names))
            for name, future in futures.items():
                # Kafka prints Uuids as URL-safe base64 without padding.
                ids[name] = str(_result(future).topic_id).replace("+", "-").replace("/", "_").rstrip("=")
        except Exception:  # noqa: BLE001 - topic ids are optional decoration
            pass
        out = []
        for name in names:
            topic = metadata.topics.get(name)
            if topic is None or (topic.error is not None and topic.error.code() == 3):
                raise ClientError("UNKNOWN_TOPIC_OR_PARTITION", 3, f"Topic '{name}' does not exist")
            parts = [PartitionInfo(p.id, p.leader, list(p.replicas), list(p.isrs))
                     for p in sorted(topic.partitions.values(), key=lambda p: p.id)]
            out.append(TopicInfo(name, ids.get(name), name in INTERNAL_TOPICS, parts))
        return out

    def create_topic(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                     configs: dict) -> None:
        topic = ck_admin.NewTopic(name, num_partitions=partitions if partitions is not None else -1,
                                  replication_factor=replication_factor if replication_factor is not None else -1,
                                  config=dict(configs))
        _result(self.admin.create_topics([topic], operation_timeout=DEFAULT_TIMEOUT_S)[name])

    def delete_topic(self, name: str) -> None:
        _result(self.admin.delete_topics([name], operation_timeout=DEFAULT_TIMEOUT_S)[name])

    def create_partitions(self, name: str, total: int) -> None:
        _result(self.admin.create_partitions([ck_admin.NewPartitions(name, total)])[name])

    # -- configs -------------------------------------------------------------------

    @staticmethod
    def _resource(entity_type: str, name: str):
        kind = ck_admin.ResourceType.TOPIC if entity_type == "topics" else ck_admin.ResourceType.BROKER
        return kind

    def describe_configs(self, entity_type: str, name: str) -> list[ConfigEntry]:
        resource = ck_admin.ConfigResource(self._resource(entity_type, name), name)
        result = _result(self.admin.describe_configs([resource])[resource])
        entries = []
        for entry in result.values():
            synonyms = [(s.name, s.value, _source_name(s.source))
                        for s in entry.synonyms.values()]
            entries.append(ConfigEntry(entry.name, entry.value, _source_name(entry.source), bool(entry.is_default),
                                       bool(entry.is_sensitive), bool(entry.is_read_only), synonyms))
        return sorted(entries, key=lambda e: e.name)

    def alter_configs(self, entity_type: str, name: str, set_configs: dict, delete_configs: Iterable[str]) -> None:
        ops = [ck_admin.ConfigEntry(k, v, incremental_operation=ck_admin.AlterConfigOpType.SET)
               for k, v in set_configs.items()]
        ops += [ck_admin.ConfigEntry(k, None, incremental_operation=ck_admin.AlterConfigOpType.DELETE)
                for k in delete_configs]
        resource = ck_admin.ConfigResource(self._resource(entity_type, name), name, incremental_configs=ops)
        _result(self.admin.incremental_alter_configs([resource])[resource])

    # -- offsets and records -------------------------------------------------------

    def list_offsets(self, specs: dict, read_committed: bool = False) -> dict:
        """``{TopicPartition: LATEST|EARLIEST|MAX_TIMESTAMP|timestamp_ms}`` -> ``{tp: offset}`` (-1: none)."""
        if not specs:
            return {}
        request = {}
        for tp, spec in specs.items():
            if spec == LATEST:
                offset_spec = ck_admin.OffsetSpec.latest()
            elif spec == EARLIEST:
                offset_spec = ck_admin.OffsetSpec.earliest()
            elif spec == MAX_TIMESTAMP:
                offset_spec = ck_admin.OffsetSpec.max_timestamp()
            else:
                offset_spec = ck_admin.OffsetSpec.for_timestamp(spec)
            request[ck.TopicPartition(tp.topic, tp.partition)] = offset_spec
        isolation = ck.IsolationLevel.READ_COMMITTED if read_committed else ck.IsolationLevel.READ_UNCOMMITTED
        futures = self.admin.list_offsets(request, isolation_level=isolation, request_timeout=DEFAULT_TIMEOUT_S)
        return {TopicPartition(k.topic, k.partition): _result(f).offset for k, f in futures.items()}

    def delete_records(self, offsets: dict) -> dict:
        """``{tp: before_offset}`` -> ``{tp: low_watermark or ClientError}``."""
        request = [ck.TopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
        futures = self.admin.delete_records(request, operation_timeout=DEFAULT_TIMEOUT_S)
        out = {}
        for k, f in futures.items():
            try:
                out[TopicPartition(k.topic, k.partition)] = _result(f).low_watermark
            except ClientError as exc:
                out[TopicPartition(k.topic, k.partition)] = exc
        return out

    # -- groups --------------------------------------------------------------------

    def list_groups(self) -> list[tuple[str, str]]:
        result = _result(self.admin.list_consumer_groups(request_timeout=DEFAULT_TIMEOUT_S))
        if result.errors:
            raise _error(result.errors[0])
        return sorted((g.group_id, _enum_name(g.state)) for g in result.valid)

    def describe_groups(self, group_ids: Iterable[str]) -> list[GroupInfo]:
        futures = self.admin.describe_consumer_groups(list(group_ids), request_timeout=DEFAULT_TIMEOUT_S)
        out = []
        for group_id, future in futures.items():
            d = _result(future)
            members = [MemberInfo(m.member_id, m.client_id, m.host, m.group_instance_id,
                                  [TopicPartition(tp.topic, tp.partition)
                                   for tp in (m.assignment.topic_partitions if m.assignment else [])])
                       for m in d.members]
            coordinator = (d.coordinator.id, d.coordinator.host, d.coordinator.port) if d.coordinator else None
            out.append(GroupInfo(d.group_id, _enum_name(d.state),
                                 "consumer" if not d.is_simple_consumer_group else "",
                                 d.partition_assignor or "", coordinator, members))
        return out

    def group_offsets(self, group_id: str) -> dict:
        request = [ck.ConsumerGroupTopicPartitions(group_id)]
        futures = self.admin.list_consumer_group_offsets(request, request_timeout=DEFAULT_TIMEOUT_S)
        result = _result(futures[group_id])
        return {TopicPartition(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
                if tp.offset >= 0}

    def alter_group_offsets(self, group_id: str, offsets: dict) -> None:
        tps = [ck.TopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
        request = [ck.ConsumerGroupTopicPartitions(group_id, tps)]
        futures = self.admin.alter_consumer_group_offsets(request, request_timeout=DEFAULT_TIMEOUT_S)
        result = _result(futures[group_id])
        for tp in result.topic_partitions:
            if tp.error is not None:
                raise _error(ck.KafkaException(tp.error))

    def delete_groups(self, group_ids: Iterable[str]) -> dict:
        futures = self.admin.delete_consumer_groups(list(group_ids), request_timeout=DEFAULT_TIMEOUT_S)
        out = {}
        for group_id, future in futures.items():
            try:
                _result(future)
                out[group_id] = None
            except ClientError as exc:
                out[group_id] = exc
        return out

    # -- producer and consumer -----------------------------------------------------

    def producer(self, settings: dict) -> "Producer":
        return Producer(self._base(settings))

    def consumer(self, settings: dict, group_id: Optional[str] = None) -> "Consumer":
        extra = dict(settings)
        extra.setdefault("enable.partition.eof", False)
        extra["group.id"] = group_id or extra.get("group.id") or "kafkapy-tools-unused"
        if not group_id and "group.id" not in settings:
            extra["enable.auto.commit"] = False
        return Consumer(self._base(extra), group_id is not None)


def _enum_name(value) -> str:
    name = getattr(value, "name", str(value))
    return {"PREPARING_REBALANCING": "PreparingRebalance", "COMPLETING_REBALANCING": "CompletingRebalance",
            "STABLE": "Stable", "DEAD": "Dead", "EMPTY": "Empty", "UNKNOWN": "Unknown"}.get(name, name)


_CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                   3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                   6: "DYNAMIC_BROKER_LOGGER_CONFIG"}


def _source_name(source) -> str:
    """Kafka's ConfigSource name; confluent hands out the wire code as an int."""
    if isinstance(source, int):
        return _CONFIG_SOURCES.get(source, "UNKNOWN")
    name = getattr(source, "name", str(source))
    return name[:-len("_CONFIG")] if name == "UNKNOWN_CONFIG" else name


class _PolledFuture(concurrent.futures.Future):
    """A future whose waiting serves librdkafka's delivery reports.

    confluent-kafka only runs delivery callbacks inside ``poll``/``flush`` on
    the caller's thread, so a plain Future waited on would never complete."""

    def __init__(self, producer):
        super().__init__()
        self._producer = producer

    def _drive(self, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done() and (deadline is None or time.monotonic() < deadline):
            self._producer.poll(0.05)

    def result(self, timeout=None):
        self._drive(timeout)
        return super().result(timeout=0)

    def exception(self, timeout=None):
        self._drive(timeout)
        return super().exception(timeout=0)


class Producer:
    """``send`` returns a ``concurrent.futures.Future`` of ``(partition, offset)``."""

    def __init__(self, conf: dict):
        try:
            self._producer = ck.Producer(conf)
        except (ck.KafkaException, ValueError, TypeError) as exc:
            raise ClientError("INVALID_CONFIG", -1, str(exc)) from None

    def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None):
        future = _PolledFuture(self._producer)

        def delivered(err, msg):
            if err is not None:
                future.set_exception(_error(ck.KafkaException(err)))
            else:
                future.set_result((msg.partition(), msg.offset()))

        kwargs = {"value": value, "key": key, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        if headers:
            kwargs["headers"] = list(headers)
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                break
            except BufferError:
                # Local queue full (queue.buffering.max.messages): serve
                # delivery reports until there is room, like max.block.ms.
                self._producer.poll(0.05)
            except ck.KafkaException as exc:
                raise _error(exc) from None
        self._producer.poll(0)
        return future

    def poll(self, timeout_s: float = 0.0) -> None:
        self._producer.poll(timeout_s)

    def flush(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
        return self._producer.flush(timeout_s)

    def close(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._producer.flush(timeout_s)


class Consumer:
    def __init__(self, conf: dict, uses_group: bool):
        try:
            self._consumer = ck.Consumer(conf)
        except (ck.KafkaException, ValueError, TypeError) as exc:
            raise ClientError("INVALID_CONFIG", -1, str(exc)) from None
        self._assigned: dict[TopicPartition, int] = {}
        self.uses_group = uses_group

    def partitions_for(self, topic: str) -> list[int]:
        metadata = self._consumer.list_topics(topic, timeout=DEFAULT_TIMEOUT_S)
        t = metadata.topics.get(topic)
        if t is None or (t.error is not None and t.error.code() == 3) or not t.partitions:
            return []
        return sorted(t.partitions)

    def subscribe(self, topics: list[str]) -> None:
        self._consumer.subscribe(list(topics))

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        self._assigned = {TopicPartition(tp.topic, tp.partition): ck.OFFSET_INVALID for tp in tps}
        self._reassign()

    def _reassign(self) -> None:
        self._consumer.assign([ck.TopicPartition(tp.topic, tp.partition, off) for tp, off in self._assigned.items()])

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._assigned[TopicPartition(tp.topic, tp.partition)] = offset
        self._reassign()

    def seek_to_beginning(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._assigned[TopicPartition(tp.topic, tp.partition)] = ck.OFFSET_BEGINNING
        self._reassign()

    def seek_to_end(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._assigned[TopicPartition(tp.topic, tp.partition)] = ck.OFFSET_END
        self._reassign()

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> dict:
        try:
            messages = self._consumer.consume(num_messages=max_records, timeout=timeout_ms / 1000.0)
        except ck.KafkaException as exc:
            raise _error(exc) from None
        out: dict = {}
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.code() == ck.KafkaError._PARTITION_EOF:
                    continue
                raise _error(ck.KafkaException(err))
            ts_type, ts = msg.timestamp()
            tp = TopicPartition(msg.topic(), msg.partition())
            out.setdefault(tp, []).append(ConsumerRecord(
                msg.topic(), msg.partition(), msg.offset(), ts, 1 if ts_type == ck.TIMESTAMP_LOG_APPEND_TIME else 0,
                msg.key(), msg.value(), msg.headers() or []))
        return out

    def commit(self) -> None:
        try:
            self._consumer.commit(asynchronous=False)
        except ck.KafkaException as exc:
            err = _error(exc)
            if err.name != "NO_OFFSET":
                raise err from None

    def close(self) -> None:
        self._consumer.close()
