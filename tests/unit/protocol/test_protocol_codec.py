"""Round trips and kio cross-checks for every request/response class of the
APIs kafkapy serves, plus targeted codec cases.

``KAFKAPY_CODEC_EXAMPLES`` (default 4) sets Hypothesis examples per class;
raise it for a longer soak, e.g. ``KAFKAPY_CODEC_EXAMPLES=200``.
"""

from __future__ import annotations

import datetime
import io
import os
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer

from support.protocol_schema import all_classes, class_id, entities, to_kio, top_class
from kafkapy._core.types import FileRegion
from kafkapy.protocol.codec import (
    ZERO_UUID,
    DecodeError,
    Parts,
    RecordsRegions,
    decode,
    encode,
    encode_to_bytes,
    read_unsigned_varint,
    unsigned_varint_bytes,
)

EXAMPLES = int(os.environ.get("KAFKAPY_CODEC_EXAMPLES", "4"))
CLASSES = all_classes()
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def kio_encode(entity) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def test_class_inventory():
    # 20 APIs; every version kio 0.6.5 has, request and response each.
    assert len(CLASSES) == 2 * 152
    assert len({class_id(c) for c in CLASSES}) == len(CLASSES)


@pytest.mark.parametrize("cls", CLASSES, ids=class_id)
def test_round_trip_and_kio_agree(cls):
    @SETTINGS
    @given(entities(cls))
    def check(entity):
        data = encode_to_bytes(entity)
        decoded, end = decode(cls, data)
        assert end == len(data)
        assert decoded == entity
        # kio's writer, given the same values in its own domain, produces
        # the same bytes ...
        kio_entity = to_kio(entity)
        assert kio_encode(kio_entity) == data
        # ... our writer accepts kio's value types (timedelta, datetime,
        # ErrorCode, None uuids) and produces them too ...
        assert encode_to_bytes(kio_entity) == data
        # ... and kio's reader understands our bytes.
        kio_decoded, kio_end = entity_reader(cls)(data, 0)
        assert kio_end == len(data)
        assert encode_to_bytes(kio_decoded) == data
        # Trailing bytes are the caller's business.
        decoded2, end2 = decode(cls, data + b"\x01\x02", 0)
        assert end2 == len(data) and decoded2 == entity

    check()


# Kafka types that the 20 served APIs do not use (KIP-893 nullable structs,
# uuid arrays, float64, timedelta_i64, non-null datetime_i64, nullable bytes):
# the codec is generic, so it is checked on one API for each.
EXTRA_CLASSES = [
    top_class(api, version, kind)
    for api, version in (
        ("consumer_group_heartbeat", 0),
        ("broker_heartbeat", 1),
        ("broker_registration", 2),
        ("alter_client_quotas", 0),
        ("alter_client_quotas", 1),
        ("create_delegation_token", 1),
        ("create_delegation_token", 3),
        ("envelope", 0),
        ("list_transactions", 0),
    )
    for kind in ("request", "response")
]


@pytest.mark.parametrize("cls", EXTRA_CLASSES, ids=class_id)
def test_other_kafka_types_round_trip_and_kio_agree(cls):
    test_round_trip_and_kio_agree(cls)


def test_round_trip_at_offset_and_records_are_views():
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

    records = bytes(range(256)) * 4
    req = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=30000,
        topic_data=(TopicProduceData(name="t", partition_data=(PartitionProduceData(index=3, records=records),)),),
    )
    body = encode_to_bytes(req)
    frame = bytearray(b"HEAD" + body)
    decoded, end = decode(ProduceRequest, frame, 4)
    assert end == len(frame)
    view = decoded.topic_data[0].partition_data[0].records
    assert type(view) is memoryview and view == records
    # No copy: the view is a window on the request buffer.
    assert view.obj is frame
    assert decoded.timeout == 30000 and type(decoded.timeout) is int


def test_value_domain_types():
    from kio.schema.metadata.v12.response import MetadataResponse

    resp = MetadataResponse(
        throttle_time=datetime.timedelta(milliseconds=250), brokers=(), cluster_id=None, controller_id=1, topics=()
    )
    decoded, _ = decode(MetadataResponse, encode_to_bytes(resp))
    assert decoded.throttle_time == 250 and type(decoded.throttle_time) is int


def test_error_code_enum_and_plain_int_encode_alike():
    from kio.schema.heartbeat.v4.response import HeartbeatResponse
    from kafkapy.protocol.errors import ErrorCode

    a = encode_to_bytes(HeartbeatResponse(throttle_time=0, error_code=KioErrorCode.rebalance_in_progress))
    b = encode_to_bytes(HeartbeatResponse(throttle_time=0, error_code=27))
    c = encode_to_bytes(HeartbeatResponse(throttle_time=0, error_code=ErrorCode.REBALANCE_IN_PROGRESS))
    assert a == b == c == b"\x00\x00\x00\x00\x00\x1b\x00"


def test_stand_in_objects_encode():
    from types import SimpleNamespace

    from kio.schema.find_coordinator.v0.response import FindCoordinatorResponse

    stand_in = SimpleNamespace(error_code=0, node_id=1, host="localhost", port=9092)
    real = FindCoordinatorResponse(error_code=KioErrorCode.none, node_id=1, host="localhost", port=9092)
    assert encode_to_bytes(stand_in, FindCoordinatorResponse) == encode_to_bytes(real)


def test_request_header_client_id_is_legacy_in_v2():
    from kio.schema.request_header.v2.header import RequestHeader

    h = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=7, client_id="abc")
    data = encode_to_bytes(h)
    assert data == b"\x00\x12\x00\x03\x00\x00\x00\x07\x00\x03abc\x00"
    assert decode(RequestHeader, data) == (h, len(data))
    assert kio_encode(h) == data


# --- tagged fields ---------------------------------------------------------


def test_default_tagged_fields_are_not_written():
    from kio.schema.api_versions.v3.response import ApiVersionsResponse, ApiVersion

    resp = ApiVersionsResponse(
        error_code=KioErrorCode.none,
        api_keys=(ApiVersion(api_key=18, min_version=0, max_version=3),),
        throttle_time=0,
    )
    data = encode_to_bytes(resp)
    # error_code, api_keys(count 2, one entry + its empty tag buffer),
    # throttle_time, and an EMPTY top-level tag buffer: finalized_features_epoch
    # = -1 and zk_migration_ready = False are defaults.
    assert data == b"\x00\x00" + b"\x02\x00\x12\x00\x00\x00\x03\x00" + b"\x00\x00\x00\x00" + b"\x00"


def test_non_default_tagged_fields_written_in_tag_order():
    from kio.schema.api_versions.v3.response import ApiVersionsResponse

    resp = ApiVersionsResponse(
        error_code=KioErrorCode.none,
        api_keys=(),
        throttle_time=0,
        finalized_features_epoch=5,
        zk_migration_ready=True,
    )
    data = encode_to_bytes(resp)
    tags = data[len(b"\x00\x00\x01\x00\x00\x00\x00"):]
    # Kafka's tags: 0 SupportedFeatures, 1 FinalizedFeaturesEpoch,
    # 2 FinalizedFeatures, 3 ZkMigrationReady.  Two differ from the default.
    assert tags == b"\x02" + b"\x01\x08" + struct.pack(">q", 5) + b"\x03\x01\x01"
    assert decode(ApiVersionsResponse, data)[0] == resp
    assert kio_encode(to_kio(resp)) == data


def test_unknown_tags_are_skipped_and_known_tags_read():
    from kio.schema.fetch.v12.request import FetchRequest

    req = FetchRequest(
        cluster_id="cid",
        replica_id=-1,
        max_wait=500,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(),
        forgotten_topics_data=(),
        rack_id="",
    )
    data = encode_to_bytes(req)
    # The top-level tag buffer is the tail: count 1, tag 0 (cluster_id), size 4, b"\x04cid".
    assert data.endswith(b"\x01\x00\x04\x04cid")
    head = data[: -len(b"\x01\x00\x04\x04cid")]
    # Add unknown tags 7 and 300 around the known one (tags are uvarints).
    tail = b"\x03" + b"\x00\x04\x04cid" + b"\x07\x02zz" + unsigned_varint_bytes(300) + b"\x00"
    decoded, end = decode(FetchRequest, head + tail)
    assert end == len(head + tail)
    assert decoded == req
    # Absent tag -> default.
    decoded, _ = decode(FetchRequest, head + b"\x00")
    assert decoded.cluster_id is None


def test_tagged_field_cannot_overread_its_size():
    from kio.schema.fetch.v12.request import FetchRequest

    req = FetchRequest(
        cluster_id="cid", replica_id=-1, max_wait=0, min_bytes=0, max_bytes=0, isolation_level=0,
        session_id=0, session_epoch=0, topics=(), forgotten_topics_data=(), rack_id="",
    )
    data = encode_to_bytes(req)
    bad = data[:-6] + b"\x00\x02\x04cid"  # tag 0 claims 2 bytes but the string needs 4
    with pytest.raises(DecodeError):
        decode(FetchRequest, bad)


def test_tagged_entity_default_not_written_and_non_default_written():
    from kio.schema.fetch.v12.response import (
        EpochEndOffset, FetchResponse, FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
    )

    def resp(**kw):
        return FetchResponse(
            throttle_time=0, error_code=0, session_id=0,
            responses=(FetchableTopicResponse(topic="t", partitions=(PartitionData(
                partition_index=0, error_code=0, high_watermark=10, last_stable_offset=10,
                log_start_offset=0, aborted_transactions=None, records=None, **kw),)),),
        )

    plain = encode_to_bytes(resp())
    # A fresh but equal default object is still recognised as the default.
    assert encode_to_bytes(resp(current_leader=LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1))) == plain
    with_leader = encode_to_bytes(resp(current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=4)))
    assert len(with_leader) == len(plain) + 1 + 1 + 9  # tag, size, (i32, i32, empty tag buffer)
    decoded = decode(FetchResponse, with_leader)[0]
    p = decoded.responses[0].partitions[0]
    assert p.current_leader.leader_id == 1 and p.diverging_epoch == EpochEndOffset(epoch=-1, end_offset=-1)


# --- records, Parts, RecordsRegions ----------------------------------------


def test_records_regions_and_parts():
    from kio.schema.fetch.v12.response import FetchResponse, FetchableTopicResponse, PartitionData

    region = FileRegion("/x/00000000000000000000.log", 12, 100, 1000)
    regions = RecordsRegions([b"abc", region, b"de"], 1005)

    def resp(records):
        return FetchResponse(
            throttle_time=0, error_code=0, session_id=0,
            responses=(FetchableTopicResponse(topic="t", partitions=(PartitionData(
                partition_index=0, error_code=0, high_watermark=10, last_stable_offset=10,
                log_start_offset=0, aborted_transactions=None, records=records),)),),
        )

    out = Parts()
    encode(resp(regions), out)
    parts = out.parts()
    assert len(parts) == 3 and parts[1] is region
    assert out.size == len(parts[0]) + 1000 + len(parts[2])
    # Same framing as if the region's bytes were inline.
    inline = encode_to_bytes(resp(b"abc" + b"R" * 1000 + b"de"))
    assert parts[0] + b"R" * 1000 + parts[2] == inline
    assert parts[0].endswith(unsigned_varint_bytes(1006) + b"abc")

    with pytest.raises(ValueError):
        encode(resp(RecordsRegions([b"abc"], 4)), Parts())
    with pytest.raises(ValueError):
        encode_to_bytes(resp(regions))


def test_parts_merges_adjacent_bytes():
    p = Parts()
    assert p.parts() == [] and p.size == 0
    p.write(b"ab")
    p.write(memoryview(b"cd"))
    r1 = FileRegion("f", 1, 0, 5)
    r2 = FileRegion("f", 1, 5, 5)
    p.region(r1)
    p.region(r2)
    p.write(b"e")
    assert p.parts() == [b"abcd", r1, r2, b"e"]
    assert p.size == 15


def test_legacy_records_memoryview_input():
    from kio.schema.produce.v3.request import PartitionProduceData, ProduceRequest, TopicProduceData

    payload = memoryview(bytearray(b"xyz" * 10))[3:9]
    req = ProduceRequest(
        transactional_id="tx", acks=1, timeout=5,
        topic_data=(TopicProduceData(name="t", partition_data=(PartitionProduceData(index=0, records=payload),)),),
    )
    data = encode_to_bytes(req)
    assert struct.pack(">i", 6) + b"xyzxyz" in data
    assert decode(ProduceRequest, data)[0].topic_data[0].partition_data[0].records == b"xyzxyz"


# --- primitives and malformed input ----------------------------------------


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**28, 2**32 - 1])
def test_unsigned_varint(value):
    data = unsigned_varint_bytes(value)
    assert read_unsigned_varint(data, 0) == (value, len(data))


def test_unsigned_varint_limits():
    with pytest.raises(DecodeError):
        read_unsigned_varint(b"\x80\x80\x80\x80\x80\x01", 0)  # 6 bytes
    with pytest.raises(DecodeError):
        read_unsigned_varint(b"\x80\x80", 0)  # truncated
    with pytest.raises(DecodeError):
        read_unsigned_varint(b"", 0)


def _heartbeat_v0(group: bytes) -> bytes:
    return group + struct.pack(">i", 1) + b"\x00\x01m"


def test_malformed_strings():
    from kio.schema.heartbeat.v0.request import HeartbeatRequest

    ok = _heartbeat_v0(b"\x00\x01g")
    assert decode(HeartbeatRequest, ok)[0].group_id == "g"
    for bad in (
        _heartbeat_v0(b"\xff\xff"),  # null for non-nullable
        _heartbeat_v0(b"\xff\xfe"),  # negative length
        _heartbeat_v0(b"\x00\x02\xc3\x28"),  # invalid UTF-8
        _heartbeat_v0(b"\x7f\xff"),  # longer than the buffer
        b"\x00",
        b"",
    ):
        with pytest.raises(DecodeError):
            decode(HeartbeatRequest, bad)


def test_nullable_legacy_array_and_non_nullable_null():
    from kio.schema.metadata.v1.request import MetadataRequest
    from kio.schema.metadata.v0.request import MetadataRequest as MetadataRequestV0

    assert decode(MetadataRequest, b"\xff\xff\xff\xff")[0].topics is None
    with pytest.raises(DecodeError):
        decode(MetadataRequestV0, b"\xff\xff\xff\xff")  # v0 topics are not nullable
    with pytest.raises(DecodeError):
        decode(MetadataRequest, b"\xff\xff\xff\xfe")


def test_huge_compact_count_in_tiny_request_is_rejected_fast():
    # The kio-killer: a 9-byte Metadata v12 body whose topics count is
    # 0xFFFFFFFF - 1 (compact: n + 1).  kio allocates tens of GiB here.
    from kio.schema.metadata.v12.request import MetadataRequest

    body = b"\xff\xff\xff\xff\x0f" + b"\x00" * 4
    with pytest.raises(DecodeError):
        decode(MetadataRequest, body)


def test_uuid_zero_and_none():
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    req = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="t"),), include_topic_authorized_operations=False)
    decoded = decode(MetadataRequest, encode_to_bytes(req))[0]
    assert decoded.topics[0].topic_id == ZERO_UUID
    u = uuid.uuid4()
    req = MetadataRequest(topics=(MetadataRequestTopic(topic_id=u, name=None),), include_topic_authorized_operations=False)
    assert decode(MetadataRequest, encode_to_bytes(req))[0].topics[0].topic_id == u


def test_encode_rejects_null_for_non_nullable():
    from kio.schema.heartbeat.v0.request import HeartbeatRequest
    from types import SimpleNamespace

    with pytest.raises(TypeError):
        encode_to_bytes(SimpleNamespace(group_id=None, generation_id=1, member_id="m"), HeartbeatRequest)


def test_nullable_datetime_encodes_minus_one():
    from kio.schema.produce.v7.response import PartitionProduceResponse

    p = PartitionProduceResponse(index=0, error_code=KioErrorCode.none, base_offset=5, log_append_time=None, log_start_offset=0)
    data = encode_to_bytes(p)
    assert struct.pack(">q", -1) in data
    assert decode(PartitionProduceResponse, data)[0].log_append_time == -1


@pytest.mark.parametrize("ms", [2**63 - 1, -(2**63), 0, -1, 4_480_250_522_178_387])
def test_time_types_take_any_int64(ms):
    # kio cannot represent these as timedelta/datetime exactly; our int
    # domain can, and Kafka uses e.g. Long.MAX_VALUE-like sentinels.
    from kio.schema.offset_commit.v2.request import OffsetCommitRequest

    req = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=1, member_id="m", retention_time=ms, topics=())
    data = encode_to_bytes(req)
    assert struct.pack(">q", ms) in data
    assert decode(OffsetCommitRequest, data)[0].retention_time == ms


def test_nullable_struct_marker():
    from kio.schema.consumer_group_heartbeat.v0.response import Assignment, ConsumerGroupHeartbeatResponse

    def resp(assignment):
        return ConsumerGroupHeartbeatResponse(
            throttle_time=0, error_code=0, error_message=None, member_id=None,
            member_epoch=1, heartbeat_interval=5000, assignment=assignment,
        )

    null = encode_to_bytes(resp(None))
    assert null.endswith(b"\xff\x00")  # KIP-893 marker -1, then the tag buffer
    assert decode(ConsumerGroupHeartbeatResponse, null)[0].assignment is None
    present = encode_to_bytes(resp(Assignment(topic_partitions=())))
    assert present.endswith(b"\x01\x01\x00\x00")  # marker 1, empty array, tags, tags
    assert decode(ConsumerGroupHeartbeatResponse, present)[0].assignment == Assignment(topic_partitions=())
