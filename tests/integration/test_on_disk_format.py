"""What the real broker leaves on disk is in Kafka's formats, byte for byte.

After producing through a real client (plain and compressed batches, several
partitions, segments rolled by a small segment.bytes, an index entry every
few hundred bytes) and a clean stop, every file is parsed twice where it
matters: with ``kafkapy._core.batch_py.scan_batches`` and with an
independent parser written here from Kafka's format description, so a bug
shared by the broker and its own scanner cannot hide.

Formats (Kafka 3.x/4.0, all integers big-endian):
* ``%020d.log``: consecutive v2 record batches; baseOffset i64, batchLength
  i32 (bytes after this field), partitionLeaderEpoch i32, magic i8 = 2, crc
  u32 = CRC-32C of everything from attributes (byte 21) to the end,
  attributes i16, lastOffsetDelta i32, ..., recordsCount i32 at byte 57.
* ``%020d.index``: 8-byte entries (offset relative to the segment base i32,
  file position i32) ascending; each position is the start of a batch.
* ``%020d.timeindex``: 12-byte entries (timestamp i64, relative offset i32),
  timestamps strictly increasing.
* ``partition.metadata``: ``version: 0\\ntopic_id: <base64url uuid>``.
* ``leader-epoch-checkpoint``: ``0\\n<n>\\n<epoch> <start offset>\\n``.
* ``recovery-point-offset-checkpoint`` etc.: ``0\\n<n>\\n<topic> <partition> <offset>\\n``.
* ``meta.properties``: java properties with version, broker.id, cluster.id.
"""

from __future__ import annotations

import base64
import re
import struct
from pathlib import Path

import confluent_kafka
import crc32c
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkapy._core import batch_py

TOPIC, PARTITIONS = "formats", 3
RECORDS_PER_PARTITION = 300
BASE_TIMESTAMP_MS = 1_700_000_000_000
SEGMENT_BYTES = 2048
INDEX_INTERVAL_BYTES = 256


# ----------------------------------------------------------------- an independent parser


def parse_log(data: bytes) -> list[dict]:
    """Walk v2 batches by hand; assert each is whole and its CRC is right."""
    batches, position = [], 0
    while position < len(data):
        assert len(data) - position >= 61, f"truncated batch header at {position}"
        base_offset, batch_length, leader_epoch, magic, crc = struct.unpack_from(">qiibI", data, position)
        end = position + 12 + batch_length
        assert magic == 2, f"magic {magic} at {position}"
        assert 49 <= batch_length and end <= len(data), f"bad batchLength {batch_length} at {position}"
        assert crc32c.crc32c(data[position + 21:end]) == crc, f"bad CRC at {position}"
        attributes, last_offset_delta, base_ts, max_ts = struct.unpack_from(">hiqq", data, position + 21)
        (records_count,) = struct.unpack_from(">i", data, position + 57)
        batches.append({"position": position, "base_offset": base_offset, "size": end - position,
                        "leader_epoch": leader_epoch, "attributes": attributes,
                        "last_offset": base_offset + last_offset_delta, "max_timestamp": max_ts,
                        "records_count": records_count})
        position = end
    return batches


def parse_entries(data: bytes, entry_size: int, fmt: str) -> list[tuple]:
    assert len(data) % entry_size == 0, f"index of {len(data)} bytes is not whole {entry_size}-byte entries"
    return [struct.unpack_from(fmt, data, i) for i in range(0, len(data), entry_size)]


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    text = path.read_text()
    lines = text.split("\n")
    assert lines[0] == "0", f"{path.name}: version line {lines[0]!r}"
    count = int(lines[1])
    assert text.endswith("\n") and len(lines) == count + 3, f"{path.name}: {text!r}"
    out = {}
    for line in lines[2:2 + count]:
        topic, partition, offset = line.split(" ")
        out[(topic, int(partition))] = int(offset)
    return out


# ----------------------------------------------------------------- the broker's files


@pytest.fixture(scope="module")
def stopped_broker(tmp_path_factory):
    """A broker that took RECORDS_PER_PARTITION records per partition (p0 plain,
    p1 lz4, p2 gzip; explicit increasing timestamps), rolled segments, and was
    stopped cleanly.  Yields ``(broker, acked, topic_id, cluster_id, rolled_while_running)``."""
    from support.clients import module_broker

    with module_broker(tmp_path_factory, {"num.io.threads": 2, "num.network.threads": 1},
                       name="formats") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config={
            "segment.bytes": str(SEGMENT_BYTES), "index.interval.bytes": str(INDEX_INTERVAL_BYTES)})])
        for future in futures.values():
            future.result(timeout=15)
        acked = {p: [] for p in range(PARTITIONS)}
        for partition, compression in enumerate(("none", "lz4", "gzip")):
            producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                                                 "linger.ms": 2, "batch.num.messages": 7,
                                                 "compression.type": compression})
            for i in range(RECORDS_PER_PARTITION):
                producer.produce(TOPIC, key=b"k%d" % i, value=(b"value-%d-%d-" % (partition, i)) * 20,
                                 partition=partition, timestamp=BASE_TIMESTAMP_MS + i,
                                 on_delivery=lambda err, msg, p=partition: acked[p].append(
                                     (err, msg.offset(), msg.timestamp()[1])))
                if i % 20 == 0:
                    producer.flush(15)  # many requests, so many batches
            assert producer.flush(15) == 0
        for p in range(PARTITIONS):
            assert [e for e, _, _ in acked[p] if e is not None] == []
        topic_id = admin.describe_topics(
            confluent_kafka.TopicCollection([TOPIC]))[TOPIC].result(timeout=15).topic_id
        cluster_id = admin.describe_cluster().result(timeout=15).cluster_id
        # Segments rolled while the broker runs (not the active one) are
        # already final: Kafka trims their indexes when it rolls.
        rolled = {}
        for p in range(PARTITIONS):
            path = broker.log_dirs[0] / f"{TOPIC}-{p}"
            bases = sorted(int(f.name[:20]) for f in path.glob("*.log"))
            rolled[p] = {base: ((path / f"{base:020d}.index").read_bytes(),
                                (path / f"{base:020d}.timeindex").read_bytes()) for base in bases[:-1]}
        assert broker.stop() == 0
        yield broker, acked, str(topic_id), cluster_id, rolled


def partition_path(broker, partition: int) -> Path:
    return broker.log_dirs[0] / f"{TOPIC}-{partition}"


def segment_bases(path: Path) -> list[int]:
    return sorted(int(f.name[:20]) for f in path.iterdir() if re.fullmatch(r"\d{20}\.log", f.name))


@pytest.mark.parametrize("partition", range(PARTITIONS))
def test_log_segments_are_contiguous_v2_batches(stopped_broker, partition):
    broker, acked, _, _, _ = stopped_broker
    path = partition_path(broker, partition)
    bases = segment_bases(path)
    assert len(bases) >= 2, f"expected rolled segments with segment.bytes={SEGMENT_BYTES}: {bases}"
    next_offset = 0
    for base in bases:
        data = (path / f"{base:020d}.log").read_bytes()
        mine = parse_log(data)
        headers, end, error = batch_py.scan_batches(data)
        assert (error, end) == (0, len(data))
        assert [(h.position, h.base_offset, h.batch_length + 12) for h in headers] == \
            [(b["position"], b["base_offset"], b["size"]) for b in mine]
        assert mine[0]["base_offset"] == base, "a segment is named after its first offset"
        for b in mine:
            assert b["base_offset"] == next_offset, f"gap or overlap at {b['base_offset']} (expected {next_offset})"
            assert b["leader_epoch"] == 0
            assert b["attributes"] & 0x07 == {0: 0, 1: 3, 2: 1}[partition], "codec kept as produced"
            assert b["records_count"] == b["last_offset"] - b["base_offset"] + 1
            next_offset = b["last_offset"] + 1
        # segment.bytes: a segment only exceeds it with its first batch.
        assert len(data) <= SEGMENT_BYTES or len(mine) == 1
    assert next_offset == RECORDS_PER_PARTITION
    assert sorted(o for _, o, _ in acked[partition]) == list(range(RECORDS_PER_PARTITION))


@pytest.mark.parametrize("partition", range(PARTITIONS))
def test_offset_index_entries_point_at_batch_starts(stopped_broker, partition):
    broker, _, _, _, rolled = stopped_broker
    path = partition_path(broker, partition)
    total_entries = 0
    for base in segment_bases(path):
        batches = parse_log((path / f"{base:020d}.log").read_bytes())
        starts = {b["position"]: b for b in batches}
        raw = (path / f"{base:020d}.index").read_bytes()
        if base in rolled[partition]:
            assert rolled[partition][base][0] == raw, "a rolled segment's index changed after the roll"
        entries = parse_entries(raw, 8, ">ii")
        total_entries += len(entries)
        previous = (-1, -1)
        for relative_offset, position in entries:
            assert relative_offset > previous[0] and position > previous[1], f"not ascending: {entries}"
            previous = (relative_offset, position)
            assert position in starts, f"index position {position} is not a batch start"
            # The entry's offset is inside the batch (Kafka indexes the last
            # offset of the append at that position): a lookup of it must land
            # on or before the batch holding it.
            offset = base + relative_offset
            assert starts[position]["base_offset"] <= offset
            holder = next(b for b in batches if b["base_offset"] <= offset <= b["last_offset"])
            assert holder["position"] >= position
        # One entry per index.interval.bytes of data, roughly (Kafka adds one
        # after more than that many bytes since the last).
        size = sum(b["size"] for b in batches)
        assert len(entries) <= size // INDEX_INTERVAL_BYTES + 1
    assert total_entries > 0


@pytest.mark.parametrize("partition", range(PARTITIONS))
def test_time_index_entries(stopped_broker, partition):
    broker, _, _, _, rolled = stopped_broker
    path = partition_path(broker, partition)
    for base in segment_bases(path):
        batches = parse_log((path / f"{base:020d}.log").read_bytes())
        raw = (path / f"{base:020d}.timeindex").read_bytes()
        if base in rolled[partition]:
            assert rolled[partition][base][1] == raw, "a rolled segment's time index changed after the roll"
        entries = parse_entries(raw, 12, ">qi")
        assert entries, f"segment {base} has no time index entry"
        previous_ts = -1
        for timestamp, relative_offset in entries:
            assert timestamp > previous_ts
            previous_ts = timestamp
            offset = base + relative_offset
            # (timestamp, offset): the largest timestamp so far and where it is.
            holder = next(b for b in batches if b["base_offset"] <= offset <= b["last_offset"])
            assert holder["max_timestamp"] == timestamp
            assert max(b["max_timestamp"] for b in batches if b["base_offset"] <= offset) == timestamp
        # The last entry covers the segment's largest timestamp (Kafka appends
        # it when the segment is rolled or closed).
        assert entries[-1][0] == max(b["max_timestamp"] for b in batches)


def test_partition_metadata(stopped_broker):
    broker, _, topic_id, _, _ = stopped_broker
    for p in range(PARTITIONS):
        text = (partition_path(broker, p) / "partition.metadata").read_text()
        match = re.fullmatch(r"version: 0\ntopic_id: ([A-Za-z0-9_-]{22})\n?", text)
        assert match, repr(text)
        # Kafka's Uuid.toString is base64url; librdkafka prints standard base64.
        on_disk = base64.urlsafe_b64decode(match.group(1) + "==")
        assert len(on_disk) == 16 and on_disk == base64.b64decode(topic_id + "==")


def test_leader_epoch_checkpoint(stopped_broker):
    broker, _, _, _, _ = stopped_broker
    for p in range(PARTITIONS):
        assert (partition_path(broker, p) / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"


@pytest.mark.parametrize("name,expected", [
    ("recovery-point-offset-checkpoint", RECORDS_PER_PARTITION),
    ("replication-offset-checkpoint", RECORDS_PER_PARTITION),
    ("log-start-offset-checkpoint", 0),
])
def test_offset_checkpoints(stopped_broker, name, expected):
    broker, _, _, _, _ = stopped_broker
    offsets = read_offset_checkpoint(broker.log_dirs[0] / name)
    ours = {k: v for k, v in offsets.items() if k[0] == TOPIC}
    if name == "log-start-offset-checkpoint" and not ours:
        return  # Kafka writes only log start offsets above the first segment's base
    assert ours == {(TOPIC, p): expected for p in range(PARTITIONS)}


def test_meta_properties_and_clean_shutdown_marker(stopped_broker):
    broker, _, _, cluster_id, _ = stopped_broker
    log_dir = broker.log_dirs[0]
    props = {}
    for line in (log_dir / "meta.properties").read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    assert props.get("version") in ("0", "1"), props
    assert props.get("broker.id", props.get("node.id")) == "0"
    assert props["cluster.id"] == cluster_id
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
    assert (log_dir / ".kafka_cleanshutdown").exists()
    assert (log_dir / ".kafka_cleanshutdown").stat().st_size == 0
    # No temporary files left behind by atomic checkpoint writes.
    assert not list(log_dir.rglob("*.tmp"))
