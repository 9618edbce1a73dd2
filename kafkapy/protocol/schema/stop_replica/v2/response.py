"""StopReplica response v2 (API key 5): stop replicating partitions, maybe delete them.

Written for kafkapy from the field list of Kafka 3.9's
``clients/src/main/resources/common/message/StopReplicaResponse.json`` (kio, generated
from Kafka 4.x, has no schemas for the ZooKeeper-mode inter-broker APIs);
same shape as kio's classes so ``kafkapy.protocol.codec`` reads and writes it.
"""

import uuid  # noqa: F401

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64  # noqa: F401


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionError:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: i16 = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: i16 = field(metadata={"kafka_type": "error_code"})
    partition_errors: tuple[StopReplicaPartitionError, ...] = ()
