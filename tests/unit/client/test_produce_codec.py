"""client._produce: the hand-written Produce codec agrees with the generic kio codec, v3-v9."""

import pytest

from kafkapy.client import _produce
from kafkapy.client._schema import build
from kafkapy.client.conn import CLIENT_APIS
from kafkapy.protocol.codec import decode, encode_to_bytes

PRODUCE = CLIENT_APIS[0]
VERSIONS = range(PRODUCE.min_version, PRODUCE.max_version + 1)
TOPICS = [("t", [(0, b"batch-zero"), (3, b"")]), ("\u00fcber", [(1, b"x" * 300)])]


@pytest.mark.parametrize("txn_id", [None, "txn-\u00e9"])
@pytest.mark.parametrize("version", VERSIONS)
def test_request_matches_generic_encoder(version, txn_id):
    values = {
        "transactional_id": txn_id,
        "acks": -1,
        "timeout": 30000,
        "topic_data": [{"name": name, "partition_data": [{"index": i, "records": r} for i, r in parts]}
                       for name, parts in TOPICS],
    }
    expected = encode_to_bytes(build(PRODUCE.request_class(version), values))
    assert bytes(_produce.encode_request(version, -1, 30000, TOPICS,
                                         None if txn_id is None else txn_id.encode())) == expected


def _response(version, record_errors=False):
    cls = PRODUCE.response_class(version)
    partition = {"index": 2, "error_code": 0, "base_offset": 1 << 40, "log_append_time": 1700000000000,
                 "log_start_offset": 7, "record_errors": [], "error_message": None}
    failed = dict(partition, index=5, error_code=10, base_offset=-1, log_append_time=-1,
                  error_message="too big",
                  record_errors=[{"batch_index": 0, "batch_index_error_message": "r0"},
                                 {"batch_index": 1, "batch_index_error_message": None}] if record_errors else [])
    values = {"responses": [{"name": "t", "partition_responses": [partition, failed]},
                            {"name": "u", "partition_responses": []}],
              "throttle_time": 12}
    return encode_to_bytes(build(cls, values))


@pytest.mark.parametrize("version", VERSIONS)
def test_response_matches_generic_decoder(version):
    body = b"junk" + _response(version, record_errors=version >= 8)
    ours = _produce.decode_response(version, body, 4)
    theirs, _ = decode(PRODUCE.response_class(version), body, 4)
    assert ours.throttle_time == theirs.throttle_time == 12
    assert [t.name for t in ours.responses] == [t.name for t in theirs.responses] == ["t", "u"]
    for mine, generic in zip(ours.responses[0].partition_responses, theirs.responses[0].partition_responses):
        assert (mine.index, mine.error_code, mine.base_offset, mine.log_append_time) == (
            generic.index, generic.error_code, generic.base_offset, generic.log_append_time)
        if version >= 5:
            assert mine.log_start_offset == generic.log_start_offset == 7
        if version >= 8:
            assert mine.error_message == generic.error_message


@pytest.mark.parametrize("version", [3, 8, 9])
def test_truncated_response_raises_value_error(version):
    body = _response(version, record_errors=version >= 8)
    for cut in range(0, len(body) - 1, 3):
        with pytest.raises(ValueError):
            _produce.decode_response(version, body[:cut], 0)
