"""Micro-benchmark: kafkapy's codec vs kio's own entity_writer/entity_reader.

Run: .venv/bin/python tests/unit/protocol/bench_codec.py (the installed
kafkapy; PYTHONPATH=. for another checkout's), not collected by pytest.
Prints the best of 5 repeats, in microseconds per message.
"""

from __future__ import annotations

import datetime
import io
import timeit
import uuid

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer

from kafkapy._core.types import FileRegion
from kafkapy.protocol.codec import Parts, RecordsRegions, decode, encode, encode_to_bytes


def best_us(fn, number):
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def kio_write(entity):
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def metadata_v12(kio_values: bool):
    from kio.schema.metadata.v12.response import (
        MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    )

    none = KioErrorCode.none if kio_values else 0
    topics = tuple(
        MetadataResponseTopic(
            error_code=none, name=f"topic-{t}", topic_id=uuid.UUID(int=t + 1), is_internal=False,
            partitions=tuple(
                MetadataResponsePartition(
                    error_code=none, partition_index=p, leader_id=1, leader_epoch=0,
                    replica_nodes=(1,), isr_nodes=(1,), offline_replicas=(),
                )
                for p in range(10)
            ),
            topic_authorized_operations=-2147483648,
        )
        for t in range(100)
    )
    return MetadataResponse(
        throttle_time=datetime.timedelta(0) if kio_values else 0,
        brokers=(MetadataResponseBroker(node_id=1, host="localhost", port=9092, rack=None),),
        cluster_id="kafkapy-cluster", controller_id=1, topics=topics,
    )


def fetch_v12(records, kio_values: bool):
    from kio.schema.fetch.v12.response import FetchResponse, FetchableTopicResponse, PartitionData

    none = KioErrorCode.none if kio_values else 0
    return FetchResponse(
        throttle_time=datetime.timedelta(0) if kio_values else 0, error_code=none, session_id=0,
        responses=tuple(
            FetchableTopicResponse(topic=f"topic-{t}", partitions=tuple(
                PartitionData(
                    partition_index=p, error_code=none, high_watermark=1000, last_stable_offset=1000,
                    log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                    records=records(t, p),
                )
                for p in range(10)
            ))
            for t in range(10)
        ),
    )


def produce_v9(record_bytes: int):
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

    return ProduceRequest(
        transactional_id=None, acks=-1, timeout=30000,
        topic_data=(TopicProduceData(name="topic", partition_data=(
            PartitionProduceData(index=0, records=bytes(record_bytes)),)),),
    )


def main():
    rows = []

    md_ours, md_kio = metadata_v12(False), metadata_v12(True)
    assert encode_to_bytes(md_ours) == kio_write(md_kio) == encode_to_bytes(md_kio)
    rows.append(("encode Metadata v12 resp 100x10", best_us(lambda: encode_to_bytes(md_ours), 20),
                 best_us(lambda: kio_write(md_kio), 5)))

    def regions(t, p):
        return RecordsRegions([FileRegion("/d/x.log", 1, 4096 * p, 4096)], 4096)

    def small(t, p):
        return b"\x00" * 100

    f_regions = fetch_v12(regions, False)
    f_small_ours, f_small_kio = fetch_v12(small, False), fetch_v12(small, True)
    assert encode_to_bytes(f_small_ours) == kio_write(f_small_kio)

    def enc_regions():
        out = Parts()
        encode(f_regions, out)
        return out.parts()

    rows.append(("encode Fetch v12 resp 10x10, RecordsRegions", best_us(enc_regions, 200), None))
    rows.append(("encode Fetch v12 resp 10x10, 100 B records", best_us(lambda: encode_to_bytes(f_small_ours), 200),
                 best_us(lambda: kio_write(f_small_kio), 50)))

    data = encode_to_bytes(produce_v9(1024))
    from kio.schema.produce.v9.request import ProduceRequest

    read_kio = entity_reader(ProduceRequest)
    view = memoryview(data)
    assert decode(ProduceRequest, view)[0].topic_data[0].partition_data[0].records == read_kio(data, 0)[0].topic_data[0].partition_data[0].records
    rows.append(("decode Produce v9 req 1 KiB records", best_us(lambda: decode(ProduceRequest, view), 5000),
                 best_us(lambda: read_kio(data, 0), 5000)))

    md_data = encode_to_bytes(md_ours)
    from kio.schema.metadata.v12.response import MetadataResponse

    read_md = entity_reader(MetadataResponse)
    rows.append(("decode Metadata v12 resp 100x10", best_us(lambda: decode(MetadataResponse, md_data), 20),
                 best_us(lambda: read_md(md_data, 0), 20)))

    print(f"{'case':48} {'kafkapy us':>11} {'kio us':>11} {'speedup':>8}")
    for name, ours, theirs in rows:
        t = f"{theirs:11.1f}" if theirs else f"{'n/a':>11}"
        s = f"{theirs / ours:7.1f}x" if theirs else ""
        print(f"{name:48} {ours:11.1f} {t} {s}")


if __name__ == "__main__":
    main()
