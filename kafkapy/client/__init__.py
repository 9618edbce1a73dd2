"""kafkapy's own Kafka client: ``KafkaProducer``, ``KafkaConsumer``, ``KafkaAdminClient``.

Imports only ``kafkapy.protocol`` (codec, kio schemas via the API table) and
``kafkapy._core`` (record batches, murmur2), never the broker.
"""

from . import errors
from .errors import KafkaError
from .producer import KafkaProducer
from .structs import (
    BrokerMetadata,
    ConfigResource,
    ConsumerRecord,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "AdminClient",
    "BrokerMetadata",
    "ConfigResource",
    "ConsumerRecord",
    "KafkaAdminClient",
    "KafkaConsumer",
    "KafkaError",
    "KafkaProducer",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RecordMetadata",
    "TopicPartition",
    "errors",
]


def __getattr__(name):
    # Consumer and admin are imported lazily so the producer alone stays light.
    if name == "KafkaConsumer":
        from .consumer import KafkaConsumer
        return KafkaConsumer
    if name in ("KafkaAdminClient", "AdminClient"):
        from .admin import KafkaAdminClient
        return KafkaAdminClient
    raise AttributeError(name)
