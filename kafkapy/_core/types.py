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
