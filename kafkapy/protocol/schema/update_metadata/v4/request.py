"""UpdateMetadata request v4 (API key 6): the controller's metadata for every broker.

Written for kafkapy from the field list of Kafka 3.9's
``clients/src/main/resources/common/message/UpdateMetadataRequest.json`` (kio, generated
from Kafka 4.x, has no schemas for the ZooKeeper-mode inter-broker APIs);
same shape as kio's classes so ``kafkapy.protocol.codec`` reads and writes it.
"""

import uuid  # noqa: F401

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.request_header.v1.header import RequestHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64  # noqa: F401


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataPartitionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    isr: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    zk_version: i32 = field(metadata={"kafka_type": "int32"})
    replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    offline_replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataEndpoint:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    port: i32 = field(metadata={"kafka_type": "int32"})
    host: str = field(metadata={"kafka_type": "string"})
    listener: str = field(metadata={"kafka_type": "string"})
    security_protocol: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataBroker:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    id: i32 = field(metadata={"kafka_type": "int32"})
    endpoints: tuple[UpdateMetadataEndpoint, ...] = ()
    rack: str | None = field(metadata={"kafka_type": "string"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    ungrouped_partition_states: tuple[UpdateMetadataPartitionState, ...] = ()
    live_brokers: tuple[UpdateMetadataBroker, ...] = ()
