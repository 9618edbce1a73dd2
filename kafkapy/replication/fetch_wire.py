"""The replica fetcher's Fetch v12 on the wire, in one pass each way.

The generic codec (kafkapy.protocol.codec) builds a request entity from the
fetcher's dicts and walks a schema plan to encode it, and decodes the answer
into dataclass entities field by field through per-type readers; on a
follower's every round that was about a tenth of the fetcher's CPU (in-process,
1 x 224 KiB: ~8 us to build and encode, ~11 us to decode; at 16 partitions
~40 and ~46 us). These two functions do the same for the one version the
fetcher sends (``FETCH_VERSION``; another version negotiated with an older
leader goes through the codec), byte for byte what the codec writes and
accepts (tests/unit/replication/test_fetch_wire.py checks both against it):

* ``encode_fetch_request(values)``: the FetchRequest v12 body for the dict
  ``ReplicaFetcher.build_fetch`` makes (no ``cluster_id`` tag: the fetcher
  sends none);
* ``decode_fetch_response(frame, offset)``: a FetchResponse v12 body into
  light objects with the attributes the fetcher reads (``error_code``,
  ``session_id``, ``responses[].topic``, ``.partitions[]`` with
  ``partition_index``, ``error_code``, ``high_watermark``,
  ``last_stable_offset``, ``log_start_offset``, ``aborted_transactions``,
  ``preferred_read_replica``, ``records`` (a view of ``frame``, not a copy;
  None when null), ``diverging_epoch`` (``epoch``/``end_offset``, -1/-1 when
  absent, as the codec's default), ``current_leader``, ``snapshot_id``).
  Unknown tagged fields are skipped; a truncated or malformed body raises
  ValueError (the connection closes it as the codec's errors).
"""

from __future__ import annotations

import struct

from kafkapy.protocol.codec import DecodeError
from kafkapy.protocol.codec import read_unsigned_varint as _read_uvarint
from kafkapy.protocol.headers import skip_tagged_fields as _skip_tags

VERSION = 12

_REQUEST_HEAD = struct.Struct(">iiiibii")  # replica_id .. session_epoch
_REQUEST_PARTITION = struct.Struct(">iiqiqi")  # partition .. partition_max_bytes (+ empty tags)
_I32 = struct.Struct(">i")
_RESPONSE_HEAD = struct.Struct(">ihi")  # throttle_time, error_code, session_id
_PARTITION_HEAD = struct.Struct(">ihqqq")  # partition_index .. log_start_offset
_ABORTED = struct.Struct(">qq")
_EPOCH_END = struct.Struct(">iq")  # diverging_epoch: epoch, end_offset
_LEADER = struct.Struct(">ii")  # current_leader: leader_id, leader_epoch
_SNAPSHOT = struct.Struct(">qi")  # snapshot_id: end_offset, epoch


def _uvarint(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _compact_string(s: str, out: bytearray) -> None:
    data = s.encode()
    _uvarint(len(data) + 1, out)
    out += data


def encode_fetch_request(values: dict) -> bytearray:
    """The FetchRequest v12 body of ``values`` (the codec's dict for it)."""
    out = bytearray(_REQUEST_HEAD.pack(values["replica_id"], values["max_wait"], values["min_bytes"],
                                       values["max_bytes"], values["isolation_level"], values["session_id"],
                                       values["session_epoch"]))
    topics = values["topics"]
    _uvarint(len(topics) + 1, out)
    pack = _REQUEST_PARTITION.pack
    for topic in topics:
        _compact_string(topic["topic"], out)
        partitions = topic["partitions"]
        _uvarint(len(partitions) + 1, out)
        for p in partitions:
            out += pack(p["partition"], p["current_leader_epoch"], p["fetch_offset"], p["last_fetched_epoch"],
                        p["log_start_offset"], p["partition_max_bytes"])
            out.append(0)  # tagged fields
        out.append(0)
    forgotten = values["forgotten_topics_data"]
    _uvarint(len(forgotten) + 1, out)
    for topic in forgotten:
        _compact_string(topic["topic"], out)
        indexes = topic["partitions"]
        _uvarint(len(indexes) + 1, out)
        for index in indexes:
            out += _I32.pack(index)
        out.append(0)
    _compact_string(values["rack_id"], out)
    out.append(0)  # tagged fields (no cluster_id)
    return out


class EpochEndOffset:
    __slots__ = ("epoch", "end_offset")

    def __init__(self, epoch: int = -1, end_offset: int = -1):
        self.epoch = epoch
        self.end_offset = end_offset


class LeaderIdAndEpoch:
    __slots__ = ("leader_id", "leader_epoch")

    def __init__(self, leader_id: int = -1, leader_epoch: int = -1):
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch


class SnapshotId:
    __slots__ = ("end_offset", "epoch")

    def __init__(self, end_offset: int = -1, epoch: int = -1):
        self.end_offset = end_offset
        self.epoch = epoch


class AbortedTransaction:
    __slots__ = ("producer_id", "first_offset")

    def __init__(self, producer_id: int, first_offset: int):
        self.producer_id = producer_id
        self.first_offset = first_offset


_NO_DIVERGENCE = EpochEndOffset()
_NO_LEADER = LeaderIdAndEpoch()
_NO_SNAPSHOT = SnapshotId()


class PartitionData:
    __slots__ = ("partition_index", "error_code", "high_watermark", "last_stable_offset", "log_start_offset",
                 "diverging_epoch", "current_leader", "snapshot_id", "aborted_transactions",
                 "preferred_read_replica", "records")


class FetchableTopicResponse:
    __slots__ = ("topic", "partitions")

    def __init__(self, topic: str, partitions: list):
        self.topic = topic
        self.partitions = partitions


class FetchResponse:
    __slots__ = ("throttle_time", "error_code", "session_id", "responses")

    def __init__(self, throttle_time: int, error_code: int, session_id: int, responses: list):
        self.throttle_time = throttle_time
        self.error_code = error_code
        self.session_id = session_id
        self.responses = responses


def decode_fetch_response(frame, offset: int) -> FetchResponse:
    """A FetchResponse v12 body starting at ``offset`` of ``frame`` (after the
    response header), the way ``Connection._dispatch`` calls a decoder."""
    try:
        return _decode(memoryview(frame), offset)
    except (IndexError, struct.error, DecodeError) as exc:
        raise ValueError(f"truncated FetchResponse v{VERSION}: {exc}") from None


def _decode(buf: memoryview, position: int) -> FetchResponse:
    end = len(buf)
    throttle_time, error_code, session_id = _RESPONSE_HEAD.unpack_from(buf, position)
    position += _RESPONSE_HEAD.size
    n, position = _read_uvarint(buf, position)
    topics = []
    partition_head = _PARTITION_HEAD.unpack_from
    for _ in range(n - 1 if n else 0):
        size, position = _read_uvarint(buf, position)
        if size == 0:
            raise ValueError("null topic name")
        name = str(buf[position:position + size - 1], "utf-8")
        position += size - 1
        count, position = _read_uvarint(buf, position)
        partitions = []
        for _ in range(count - 1 if count else 0):
            p = PartitionData()
            (p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
             p.log_start_offset) = partition_head(buf, position)
            position += _PARTITION_HEAD.size
            aborted, position = _read_uvarint(buf, position)
            if aborted == 0:
                p.aborted_transactions = None
            else:
                entries = []
                for _ in range(aborted - 1):
                    entries.append(AbortedTransaction(*_ABORTED.unpack_from(buf, position)))
                    position = _skip_tags(buf, position + _ABORTED.size)
                p.aborted_transactions = entries
            (p.preferred_read_replica,) = _I32.unpack_from(buf, position)
            position += 4
            size, position = _read_uvarint(buf, position)
            if size == 0:
                p.records = None
            else:
                if position + size - 1 > end:
                    raise ValueError("records past the end of the frame")
                p.records = buf[position:position + size - 1]
                position += size - 1
            p.diverging_epoch, p.current_leader, p.snapshot_id = _NO_DIVERGENCE, _NO_LEADER, _NO_SNAPSHOT
            tags, position = _read_uvarint(buf, position)
            for _ in range(tags):
                tag, position = _read_uvarint(buf, position)
                size, position = _read_uvarint(buf, position)
                if tag == 0:
                    p.diverging_epoch = EpochEndOffset(*_EPOCH_END.unpack_from(buf, position))
                elif tag == 1:
                    p.current_leader = LeaderIdAndEpoch(*_LEADER.unpack_from(buf, position))
                elif tag == 2:
                    p.snapshot_id = SnapshotId(*_SNAPSHOT.unpack_from(buf, position))
                position += size
            partitions.append(p)
        position = _skip_tags(buf, position)
        topics.append(FetchableTopicResponse(name, partitions))
    position = _skip_tags(buf, position)
    if position > end:
        raise ValueError("FetchResponse past the end of the frame")
    return FetchResponse(throttle_time, error_code, session_id, topics)
