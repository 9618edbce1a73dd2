"""StopReplica request v3 (API key 5): stop replicating partitions, maybe delete them.

Written for kafkapy from the field list of Kafka 3.9's
``clients/src/main/resources/common/message/StopReplicaRequest.json`` (kio, generated
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
class StopReplicaPartitionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    delete_partition: bool = field(metadata={"kafka_type": "bool"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaTopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_states: tuple[StopReplicaPartitionState, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    topic_states: tuple[StopReplicaTopicState, ...] = ()
