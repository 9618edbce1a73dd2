"""Plain types shared by the compiled modules and their twins."""

from collections import namedtuple

# One v2 record batch header as read from a buffer.  ``position`` is where the
# batch starts in that buffer; the batch occupies ``batch_length + 12`` bytes.
BatchHeader = namedtuple(
    "BatchHeader",
    (
        "position",
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    ),
)


# A byte range of a segment file that a processor sends with os.sendfile.
# ``inode`` guards against a path that was replaced (topic deleted and
# re-created) between the handler building the response and the send.
FileRegion = namedtuple("FileRegion", ("path", "inode", "position", "length"))


class AppendCheckError(Exception):
    """A produce request's batches fail ``check_append``: ``error_code`` is
    Kafka's (2, 10, 32, 87), ``str(error)`` the message for the response."""

    def __init__(self, error_code: int, message: str):
        super().__init__(message)
        self.error_code = error_code
