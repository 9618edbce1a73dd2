"""LocalLog: the segments of one partition directory (Kafka's LocalLog)."""

from collections import namedtuple

DELETE_DIR_SUFFIX = "-delete"

FetchData = namedtuple("FetchData", ("regions", "size"))


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>`` -> (topic, partition); None for anything else (e.g. ``-delete`` dirs)."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def _active_fields(active) -> tuple:
    """The slot's active_base_offset .. bytes_since_last_index_entry for
    ``active`` (a LogSegment), in ``PartitionState.FIELDS`` order."""
    return (active.base_offset, active.size, active.offset_index.entries, active.time_index.entries,
            active.max_timestamp, active.offset_of_max_timestamp, active.bytes_since_last_index_entry)
