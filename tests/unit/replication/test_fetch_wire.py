"""The replica fetcher's one-pass Fetch v12 encoder and decoder
(replication.fetch_wire) against the generic codec: the same request bytes,
and the same fields from the same answer bytes (tagged fields, aborted
transactions, null records included); malformed answers raise ValueError."""

import pytest

from kafkapy.client._schema import build
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import Parts, decode, encode
from kafkapy.protocol.entities import construct
from kafkapy.replication import fetch_wire

PARTITION_FIELDS = ("partition_index", "error_code", "high_watermark", "last_stable_offset", "log_start_offset",
                    "preferred_read_replica")


def _bytes(entity) -> bytes:
    out = Parts()
    encode(entity, out)
    return b"".join(bytes(part) for part in out.parts())


def _request(**over) -> dict:
    values = {"replica_id": 2, "max_wait": 500, "min_bytes": 1, "max_bytes": 10 << 20, "isolation_level": 0,
              "session_id": 77, "session_epoch": 3,
              "topics": [{"topic": "t", "partitions": [
                  {"partition": 0, "current_leader_epoch": 4, "fetch_offset": 123, "last_fetched_epoch": 4,
                   "log_start_offset": 0, "partition_max_bytes": 1 << 20},
                  {"partition": 7, "current_leader_epoch": -1, "fetch_offset": 2**40, "last_fetched_epoch": -1,
                   "log_start_offset": -1, "partition_max_bytes": 0}]},
                  {"topic": "é" * 200, "partitions": []}],
              "forgotten_topics_data": [{"topic": "x", "partitions": [1, 2]}], "rack_id": ""}
    values.update(over)
    return values


@pytest.mark.parametrize("over", [{}, {"topics": [], "forgotten_topics_data": [], "session_epoch": -1,
                                       "session_id": 0, "rack_id": "rack-1"}])
def test_the_request_is_what_the_codec_writes(over):
    values = _request(**over)
    expected = _bytes(build(API_TABLE[1].request_class(fetch_wire.VERSION), values))
    assert bytes(fetch_wire.encode_fetch_request(values)) == expected


def _response_bytes() -> bytes:
    cls = API_TABLE[1].response_class(fetch_wire.VERSION)
    records = bytes(range(256)) * 3
    return _bytes(construct(cls, {
        "throttle_time": 5, "error_code": 0, "session_id": 991, "responses": [
            {"topic": "orders", "partitions": [
                {"partition_index": 0, "error_code": 0, "high_watermark": 10, "last_stable_offset": 9,
                 "log_start_offset": 2, "aborted_transactions": None, "preferred_read_replica": -1,
                 "records": records},
                {"partition_index": 3, "error_code": 0, "high_watermark": 5, "last_stable_offset": 5,
                 "log_start_offset": 0, "diverging_epoch": {"epoch": 4, "end_offset": 17},
                 "current_leader": {"leader_id": 2, "leader_epoch": 6},
                 "snapshot_id": {"end_offset": 8, "epoch": 1},
                 "aborted_transactions": [{"producer_id": 12, "first_offset": 3},
                                          {"producer_id": 2**50, "first_offset": 0}],
                 "preferred_read_replica": 1, "records": None}]},
            {"topic": "π", "partitions": [
                {"partition_index": 1, "error_code": 74, "high_watermark": -1, "last_stable_offset": -1,
                 "log_start_offset": -1, "aborted_transactions": [], "preferred_read_replica": -1,
                 "records": b""}]}]}))


def test_the_answer_reads_as_the_codec_reads_it():
    body = _response_bytes()
    frame = bytearray(b"\0" * 5 + body)  # the response header's bytes come first
    expected, _ = decode(API_TABLE[1].response_class(fetch_wire.VERSION), bytes(frame), 5)
    got = fetch_wire.decode_fetch_response(frame, 5)
    assert (got.throttle_time, got.error_code, got.session_id) == (5, 0, 991)
    assert [t.topic for t in got.responses] == [t.topic for t in expected.responses] == ["orders", "π"]
    for gt, et in zip(got.responses, expected.responses):
        assert len(gt.partitions) == len(et.partitions)
        for g, e in zip(gt.partitions, et.partitions):
            for name in PARTITION_FIELDS:
                assert getattr(g, name) == getattr(e, name), name
            assert (None if g.records is None else bytes(g.records)) == \
                (None if e.records is None else bytes(e.records))
            assert (g.diverging_epoch.epoch, g.diverging_epoch.end_offset) == \
                (e.diverging_epoch.epoch, e.diverging_epoch.end_offset)
            assert (g.current_leader.leader_id, g.current_leader.leader_epoch) == \
                (e.current_leader.leader_id, e.current_leader.leader_epoch)
            assert (g.snapshot_id.end_offset, g.snapshot_id.epoch) == \
                (e.snapshot_id.end_offset, e.snapshot_id.epoch)
            if e.aborted_transactions is None:
                assert g.aborted_transactions is None
            else:
                assert [(a.producer_id, a.first_offset) for a in g.aborted_transactions] == \
                    [(a.producer_id, a.first_offset) for a in e.aborted_transactions]
    # Records are a view of the frame, not a copy.
    records = got.responses[0].partitions[0].records
    assert isinstance(records, memoryview) and records.obj is frame and len(records) == 768


def test_a_truncated_answer_raises_value_error():
    body = _response_bytes()
    for cut in (3, 12, 20, len(body) // 2, len(body) - 1):
        with pytest.raises(ValueError):
            fetch_wire.decode_fetch_response(body[:cut], 0)
