"""The tools' client interface on kafkapy's own client (the default backend; see _client).

Producer and consumer are kafkapy.client's own objects behind thin wrappers
(error mapping, the future callback convention); admin results are turned into
the records of ``_client``.  Settings keep Kafka's dotted names, which
``kafkapy.client`` accepts.
"""

from __future__ import annotations

import base64
import uuid
from typing import Iterable, Optional

from kafkapy import client as kc
from kafkapy.client import errors as kerrors
from kafkapy.tools._client_types import (
    ClientError,
    ConfigEntry,
    GroupInfo,
    MemberInfo,
    PartitionInfo,
    TopicInfo,
    TopicPartition,
)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_ZERO_UUID = uuid.UUID(int=0)


def _error(exc: BaseException) -> ClientError:
    if isinstance(exc, ClientError):
        return exc
    if isinstance(exc, kerrors.KafkaError):
        return ClientError(exc.name, exc.errno, str(getattr(exc, "message", None) or exc) or exc.name)
    if isinstance(exc, (ConnectionError, OSError, TimeoutError)):
        return ClientError("NETWORK_EXCEPTION", 13, str(exc) or type(exc).__name__)
    return ClientError(type(exc).__name__, -1, str(exc))


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except (kerrors.KafkaError, ConnectionError, OSError, TimeoutError) as exc:
        raise _error(exc) from None


def _topic_id(value) -> Optional[str]:
    # Kafka prints a Uuid as URL-safe base64 of its 16 bytes, without padding.
    if value is None:
        return None
    if isinstance(value, uuid.UUID):
        if value == _ZERO_UUID:
            return None
        return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
    return str(value)


class Clients:
    def __init__(self, bootstrap_servers: str, config: dict):
        self.bootstrap_servers = bootstrap_servers
        self.config = dict(config)
        self._admin = None

    @property
    def admin(self):
        if self._admin is None:
            self._admin = _call(kc.AdminClient, self.bootstrap_servers, **self.config)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # noqa: BLE001 - closing must not mask the tool's own result
                pass
            self._admin = None

    # -- topics --------------------------------------------------------------------

    def topic_names(self) -> list[str]:
        return sorted(_call(self.admin.list_topics, include_internal=True))

    def describe_topics(self, names: Iterable[str]) -> list[TopicInfo]:
        names = list(names)
        if not names:
            return []
        by_name = {d["topic"]: d for d in _call(self.admin.describe_topics, names)}
        out = []
        for name in names:
            d = by_name.get(name)
            if d is None or d["error_code"] == 3:
                raise ClientError("UNKNOWN_TOPIC_OR_PARTITION", 3, f"Topic '{name}' does not exist")
            parts = [PartitionInfo(p.partition, p.leader, list(p.replicas), list(p.isr))
                     for p in sorted(d["partitions"], key=lambda p: p.partition)]
            out.append(TopicInfo(name, _topic_id(d.get("topic_id")),
                                 bool(d.get("is_internal")) or name in INTERNAL_TOPICS, parts))
        return out

    def create_topic(self, name, partitions, replication_factor, configs) -> None:
        topic = kc.NewTopic(name, partitions if partitions is not None else -1,
                            replication_factor if replication_factor is not None else -1, dict(configs))
        _call(self.admin.create_topics, [topic])

    def delete_topic(self, name: str) -> None:
        _call(self.admin.delete_topics, [name])

    def create_partitions(self, name: str, total: int) -> None:
        _call(self.admin.create_partitions, {name: total})

    # -- configs -------------------------------------------------------------------

    @staticmethod
    def _resource(entity_type: str, name: str, configs=None):
        return kc.ConfigResource("topic" if entity_type == "topics" else "broker", name, configs)

    def describe_configs(self, entity_type: str, name: str) -> list[ConfigEntry]:
        result = _call(self.admin.describe_configs, [self._resource(entity_type, name)], include_synonyms=True)
        out = []
        for entries in result.values():
            for e in entries.values():
                synonyms = [(s.name, s.value, s.source) for s in getattr(e, "synonyms", ()) or ()]
                out.append(ConfigEntry(e.name, e.value, e.source, bool(e.is_default), bool(e.is_sensitive),
                                       bool(e.read_only), synonyms))
        return sorted(out, key=lambda e: e.name)

    def alter_configs(self, entity_type: str, name: str, set_configs: dict, delete_configs: Iterable[str]) -> None:
        configs = {k: ("set", v) for k, v in set_configs.items()}
        configs.update({k: ("delete", None) for k in delete_configs})
        _call(self.admin.incremental_alter_configs, [self._resource(entity_type, name, configs)])

    # -- offsets and records -------------------------------------------------------

    def list_offsets(self, specs: dict, read_committed: bool = False) -> dict:
        if not specs:
            return {}
        result = _call(self.admin.list_offsets, {tuple(tp): spec for tp, spec in specs.items()},
                       isolation_level="read_committed" if read_committed else "read_uncommitted")
        return {TopicPartition(tp[0], tp[1]): v.offset for tp, v in result.items()}

    def delete_records(self, offsets: dict) -> dict:
        out = {}
        # One partition per call so a failing partition does not hide the
        # others' results (the client raises the first per-partition error).
        for tp, offset in offsets.items():
            try:
                result = _call(self.admin.delete_records, {tuple(tp): offset})
                out[tp] = next(iter(result.values()))
            except ClientError as exc:
                out[tp] = exc
        return out

    # -- groups --------------------------------------------------------------------

    def list_groups(self) -> list[tuple[str, str]]:
        return sorted((g.group_id, g.state or "") for g in _call(self.admin.list_groups))

    def describe_groups(self, group_ids: Iterable[str]) -> list[GroupInfo]:
        out = []
        for d in _call(self.admin.describe_groups, list(group_ids)):
            members = [MemberInfo(m.member_id, m.client_id, m.client_host, m.group_instance_id,
                                  [TopicPartition(tp[0], tp[1]) for tp in (m.assignment or [])])
                       for m in d.members]
            out.append(GroupInfo(d.group_id, d.state, d.protocol_type, d.protocol or "",
                                 self._coordinator_address(d.coordinator), members))
        return out

    def _coordinator_address(self, node_id):
        try:
            for b in self.admin.describe_cluster()["brokers"]:
                if b.node_id == node_id:
                    return (b.node_id, b.host, b.port)
        except Exception:  # noqa: BLE001 - only decoration for --state
            pass
        return (node_id, "", -1) if node_id is not None else None

    def group_offsets(self, group_id: str) -> dict:
        result = _call(self.admin.list_consumer_group_offsets, group_id)
        return {TopicPartition(tp[0], tp[1]): om.offset for tp, om in result.items()}

    def alter_group_offsets(self, group_id: str, offsets: dict) -> None:
        _call(self.admin.alter_consumer_group_offsets, group_id, {tuple(tp): off for tp, off in offsets.items()})

    def delete_groups(self, group_ids: Iterable[str]) -> dict:
        result = _call(self.admin.delete_groups, list(group_ids), raise_errors=False)
        return {g: (None if e is None else _error(e)) for g, e in result.items()}

    # -- producer and consumer -----------------------------------------------------

    def producer(self, settings: dict) -> "Producer":
        return Producer(_call(kc.KafkaProducer, self.bootstrap_servers, **{**self.config, **settings}))

    def consumer(self, settings: dict, group_id: Optional[str] = None) -> "Consumer":
        conf = {**self.config, **settings}
        if group_id is None:
            conf.setdefault("enable.auto.commit", False)
        return Consumer(_call(kc.KafkaConsumer, bootstrap_servers=self.bootstrap_servers, group_id=group_id, **conf))


class _Future:
    """kafkapy.client's send future with the concurrent.futures names the tools use."""

    __slots__ = ("_future",)

    def __init__(self, future):
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout=None):
        try:
            return self._future.result(timeout)
        except kerrors.KafkaError as exc:
            raise _error(exc) from None

    def exception(self, timeout=None):
        exc = self._future.exception(timeout)
        return None if exc is None else _error(exc)

    def add_done_callback(self, fn) -> None:
        self._future.add_both(lambda _value: fn(self))


class Producer:
    def __init__(self, producer):
        self._producer = producer

    def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None):
        return _Future(_call(self._producer.send, topic, value=value, key=key, partition=partition,
                             timestamp_ms=timestamp_ms, headers=headers))

    def flush(self, timeout_s: float = 30.0) -> None:
        _call(self._producer.flush, timeout_s)

    def close(self, timeout_s: float = 30.0) -> None:
        _call(self._producer.close, timeout_s)


class Consumer:
    def __init__(self, consumer):
        self._consumer = consumer

    def partitions_for(self, topic: str) -> list[int]:
        return sorted(_call(self._consumer.partitions_for_topic, topic) or [])

    def subscribe(self, topics) -> None:
        _call(self._consumer.subscribe, list(topics))

    def assign(self, tps) -> None:
        _call(self._consumer.assign, [kc.TopicPartition(tp.topic, tp.partition) for tp in tps])

    def seek(self, tp, offset: int) -> None:
        _call(self._consumer.seek, kc.TopicPartition(tp.topic, tp.partition), offset)

    def seek_to_beginning(self, tps) -> None:
        _call(self._consumer.seek_to_beginning, *[kc.TopicPartition(tp.topic, tp.partition) for tp in tps])

    def seek_to_end(self, tps) -> None:
        _call(self._consumer.seek_to_end, *[kc.TopicPartition(tp.topic, tp.partition) for tp in tps])

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> dict:
        return _call(self._consumer.poll, timeout_ms=timeout_ms, max_records=max_records)

    def commit(self) -> None:
        _call(self._consumer.commit)

    def close(self) -> None:
        try:
            self._consumer.close()
        except Exception:  # noqa: BLE001 - closing must not mask the tool's own result
            pass
