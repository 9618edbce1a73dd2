"""ControlledShutdown request v0 (API key 7): a broker asks the controller to move its leaderships.

Written for kafkapy from the field list of Kafka 3.9's
``clients/src/main/resources/common/message/ControlledShutdownRequest.json`` (kio, generated
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
class ControlledShutdownRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(7)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
