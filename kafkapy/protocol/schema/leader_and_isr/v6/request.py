"""LeaderAndIsr request v6 (API key 4): the controller's leader and ISR decisions.

Written for kafkapy from the field list of Kafka 3.9's
``clients/src/main/resources/common/message/LeaderAndIsrRequest.json`` (kio, generated
from Kafka 4.x, has no schemas for the ZooKeeper-mode inter-broker APIs);
same shape as kio's classes so ``kafkapy.protocol.codec`` reads and writes it.
"""

import uuid  # noqa: F401

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64  # noqa: F401


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrPartitionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(4)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    isr: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    partition_epoch: i32 = field(metadata={"kafka_type": "int32"})
    replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    adding_replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    removing_replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    is_new: bool = field(metadata={"kafka_type": "bool"}, default=False)
    leader_recovery_state: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrTopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(4)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_name: str = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_states: tuple[LeaderAndIsrPartitionState, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrLiveLeader:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(4)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
    host_name: str = field(metadata={"kafka_type": "string"})
    port: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(4)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    type: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    topic_states: tuple[LeaderAndIsrTopicState, ...] = ()
    live_leaders: tuple[LeaderAndIsrLiveLeader, ...] = ()
