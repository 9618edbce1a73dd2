"""Errors raised by the storage layer, each carrying Kafka's error code.

Handlers turn ``error_code`` into the per-partition error of their response;
nothing here knows about requests.
"""

# Kafka's Errors enum (only the codes storage raises).
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
INVALID_TIMESTAMP = 32
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
KAFKA_STORAGE_ERROR = 56
INCONSISTENT_TOPIC_ID = 103
INVALID_RECORD = 87


class StorageError(Exception):
    """Base class; ``error_code`` is the Kafka error code to report."""

    error_code = KAFKA_STORAGE_ERROR

    def __init__(self, message: str = "", error_code: int | None = None):
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class RecordError(StorageError):
    """An append was rejected; nothing was written.  Raised as RecordError(code, message)."""

    def __init__(self, error_code: int, message: str = ""):
        super().__init__(message or f"record error {error_code}", error_code)


class OffsetOutOfRange(StorageError):
    """A fetch/offset outside [log_start_offset, log_end_offset] (Kafka error 1)."""

    error_code = OFFSET_OUT_OF_RANGE


class OffsetsOutOfOrder(StorageError):
    """A follower append whose batches do not continue the log (Kafka's
    UnexpectedAppendOffsetException / OffsetsOutOfOrderException)."""


class CorruptIndexError(StorageError):
    """An index file failed its sanity check; the segment must be rebuilt."""


class InconsistentTopicId(StorageError):
    """partition.metadata names another topic id than the one given (Kafka error 103)."""

    error_code = INCONSISTENT_TOPIC_ID


class InconsistentClusterId(StorageError):
    """meta.properties in a log dir belongs to another cluster or broker."""


class KafkaStorageError(StorageError):
    """An I/O error on a log dir (Kafka's KafkaStorageException): the dir is
    offline in this broker until it restarts, and every partition in it
    answers KAFKA_STORAGE_ERROR (56). ``log_dir``: the failed dir."""

    error_code = KAFKA_STORAGE_ERROR

    def __init__(self, message: str = "", log_dir: str | None = None):
        super().__init__(message)
        self.log_dir = log_dir
