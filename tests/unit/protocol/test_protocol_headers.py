"""Request/response header codecs and error codes."""

from __future__ import annotations

import pickle
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.request_header.v2.header import RequestHeader

from kafkapy._core.types import FileRegion
from kafkapy.protocol import (
    DecodeError,
    ErrorCode,
    KafkaError,
    RecordsRegions,
    decode,
    encode_response,
    encode_to_bytes,
    skip_tagged_fields,
)
from kafkapy.protocol.headers import RequestHeaderInfo, header_reader
from support.twins import import_core


@pytest.fixture(scope="module", params=["compiled", "twin"])
def read_request_header(request):
    """protocol.headers.read_request_header over _core.request_read, compiled or twin."""
    return header_reader(import_core("request_read", request.param))


def request_v1(api_key, version, correlation_id, client_id: bytes | None) -> bytes:
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return struct.pack(">hhi", api_key, version, correlation_id) + cid


def test_read_request_header_v1(read_request_header):
    buf = request_v1(3, 12, 42, b"rdkafka") + b"BODY"
    h = read_request_header(memoryview(buf))
    assert type(h) is RequestHeaderInfo and h == (3, 12, 42, "rdkafka", len(buf) - 4)
    assert read_request_header(bytearray(buf)) == h  # any bytes-like buffer
    assert read_request_header(request_v1(-1, -32768, -(1 << 31), "é".encode())) == (-1, -32768, -(1 << 31), "é", 12)
    assert buf[h.offset :] == b"BODY"
    assert read_request_header(request_v1(18, 0, -1, None)).client_id is None
    assert read_request_header(request_v1(18, 0, 1, b"")).client_id == ""


def test_read_request_header_v2_with_tags(read_request_header):
    buf = request_v1(3, 12, 42, b"c") + b"\x02\x00\x01x\x05\x00" + b"BODY"
    h = read_request_header(buf)
    end = skip_tagged_fields(memoryview(buf), h.offset)
    assert buf[end:] == b"BODY"
    # Same as decoding kio's RequestHeader v2 with our codec.
    header, end2 = decode(RequestHeader, buf)
    assert end2 == end and header.client_id == "c" and header.correlation_id == 42


@pytest.mark.parametrize(
    "buf,message",
    [
        (b"", "request of 0 bytes is shorter than a header"),
        (b"\x00\x03\x00\x0c\x00\x00", "request of 6 bytes is shorter than a header"),
        (request_v1(3, 12, 42, b"abc")[:-1], "client_id length 3 exceeds remaining bytes"),  # client id truncated
        (struct.pack(">hhih", 3, 12, 42, -2), "invalid client_id length -2"),  # negative length other than -1
        (request_v1(3, 12, 42, b"\xc3\x28"),  # invalid UTF-8
         "client_id is not UTF-8: 'utf-8' codec can't decode byte 0xc3 in position 0: invalid continuation byte"),
        (struct.pack(">hhi", 7, 0, 1), "request of 8 bytes is shorter than a header"),  # as before: 10 bytes, even for v0
    ],
)
def test_read_request_header_malformed(read_request_header, buf, message):
    with pytest.raises(DecodeError) as raised:
        read_request_header(buf)
    assert str(raised.value) == message


@settings(max_examples=500, deadline=None)
@given(head=st.tuples(st.sampled_from([0, 3, 7, 18]), st.sampled_from([0, 1, 12]), st.integers(-(1 << 31), (1 << 31) - 1)),
       client_id=st.one_of(st.none(), st.binary(max_size=12), st.text(max_size=6).map(str.encode)),
       length=st.one_of(st.none(), st.integers(-3, 20)), cut=st.integers(0, 30))
def test_the_compiled_header_read_and_its_twin_agree(head, client_id, length, cut):
    # The same header, or the same error with the same message.
    buf = request_v1(*head, client_id)
    if length is not None:
        buf = buf[:8] + struct.pack(">h", length) + buf[10:]
    buf = buf[:cut]

    def outcome(implementation):
        try:
            return header_reader(import_core("request_read", implementation))(buf)
        except DecodeError as exc:
            return str(exc)

    compiled, twin = outcome("compiled"), outcome("twin")
    assert compiled == twin and type(compiled) is type(twin)


@pytest.mark.parametrize(
    "tags",
    [b"", b"\x01", b"\x01\x00\x05ab", b"\xff\xff\xff\xff\x0f", b"\x01\x00\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80"],
)
def test_skip_tagged_fields_malformed(tags):
    with pytest.raises(DecodeError):
        skip_tagged_fields(memoryview(tags), 0)


def test_encode_response_v0_and_v1():
    body = HeartbeatResponse(throttle_time=0, error_code=KioErrorCode.none)
    body_bytes = encode_to_bytes(body)
    v0 = encode_response(7, body, flexible_header=False)
    assert v0 == [struct.pack(">ii", 4 + len(body_bytes), 7) + body_bytes]
    v1 = encode_response(7, body, flexible_header=True)
    assert v1 == [struct.pack(">ii", 5 + len(body_bytes), 7) + b"\x00" + body_bytes]


def test_encode_response_api_versions_v0_header():
    body = ApiVersionsResponseV0(error_code=KioErrorCode.unsupported_version, api_keys=(ApiVersionV0(api_key=18, min_version=0, max_version=4),))
    (frame,) = encode_response(1, body, flexible_header=False)
    size, corr = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4 and corr == 1
    assert frame[8:10] == b"\x00\x23"  # UNSUPPORTED_VERSION


def test_encode_response_with_file_regions():
    from kio.schema.fetch.v12.response import FetchResponse, FetchableTopicResponse, PartitionData

    region = FileRegion("/data/t-0/00000000000000000000.log", 99, 0, 4096)
    body = FetchResponse(
        throttle_time=0, error_code=0, session_id=0,
        responses=(FetchableTopicResponse(topic="t", partitions=(PartitionData(
            partition_index=0, error_code=0, high_watermark=10, last_stable_offset=10,
            log_start_offset=0, aborted_transactions=None, records=RecordsRegions([region], 4096)),)),),
    )
    parts = encode_response(5, body, flexible_header=True)
    assert len(parts) == 3 and parts[1] is region
    total = len(parts[0]) + 4096 + len(parts[2])
    assert struct.unpack_from(">i", parts[0])[0] == total - 4


def test_error_codes():
    assert ErrorCode.NONE == 0
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1
    assert ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.MEMBER_ID_REQUIRED == 79
    assert ErrorCode.INVALID_RECORD == 87
    assert ErrorCode.TRANSACTION_ABORTABLE == 120
    assert all(v in {int(e) for e in ErrorCode} for v in range(-1, 121))
    # Same numbering as kio's copy of Kafka's Errors.
    for e in KioErrorCode:
        assert ErrorCode[e.name.upper()] == int(e)
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and not ErrorCode.INVALID_REQUEST.retriable


def test_kafka_error():
    e = KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor 3 > 1 broker")
    assert e.error_code is ErrorCode.INVALID_REPLICATION_FACTOR and "replication factor" in str(e)
    assert KafkaError(39).error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert KafkaError(9999).error_code == 9999
    again = pickle.loads(pickle.dumps(e))
    assert again.error_code == e.error_code and again.message == e.message


def test_controlled_shutdown_v0_has_request_header_v0(read_request_header):
    # Kafka's one request with header v0: no client id, the body right after the correlation id.
    frame = struct.pack(">hhi", 7, 0, 42) + struct.pack(">i", 3)
    header = read_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id, header.offset) \
        == (7, 0, 42, None, 8)
    assert read_request_header(struct.pack(">hhih", 7, 1, 42, 1) + b"c").client_id == "c"
