"""A log directory written by another implementation is served as-is.

The segment below is written with kafka-python's own v2 batch builder (not
kafkapy's code), with Kafka's file names and only what Kafka's format needs
(`.log` + `partition.metadata`; the index files are missing, as after a crash
that lost them): kafkapy must recover it, rebuild the indexes, and serve every
record with its original offsets, keys, values, headers and timestamps.
"""

import base64
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder

TOPIC = "foreign"
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _batch(base_offset, records, codec):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for offset_delta, (ts, key, value, headers) in enumerate(records):
        b.append(offset_delta, timestamp=ts, key=key, value=value, headers=headers)
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base_offset)  # baseOffset is outside the CRC
    return bytes(data)


@pytest.mark.parametrize("codec", list(CODECS))
def test_segment_from_another_writer_is_served(broker_factory, codec):
    broker = broker_factory(start=False)
    log_dir = broker.log_dirs[0]
    part_dir = log_dir / f"{TOPIC}-0"
    part_dir.mkdir(parents=True)
    now = int(time.time() * 1000)
    expected = []
    segment = bytearray()
    offset = 0
    for b in range(5):
        records = [(now + offset + i, f"k{offset + i}".encode(), f"v{offset + i}".encode() * 20,
                    [("h", f"{offset + i}".encode())]) for i in range(7)]
        segment += _batch(offset, records, CODECS[codec])
        expected += [(offset + i, r) for i, r in enumerate(records)]
        offset += len(records)
    (part_dir / f"{0:020d}.log").write_bytes(bytes(segment))
    topic_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    (part_dir / "partition.metadata").write_text(f"version: 0\ntopic_id: {topic_id}")
    broker.start()

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(expected) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.append(m)
    c.close()
    assert [m.offset() for m in got] == [o for o, _ in expected]
    for m, (_, (ts, key, value, headers)) in zip(got, expected):
        assert (m.key(), m.value(), m.timestamp()[1]) == (key, value, ts)
        assert m.headers() == headers
    # The missing indexes were rebuilt in Kafka's format.
    assert (part_dir / f"{0:020d}.index").exists()
    assert (part_dir / f"{0:020d}.timeindex").exists()
