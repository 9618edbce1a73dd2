"""A Produce handler's partition answers, built through the codec's slot
setters (``produce._response_classes``), are the entities the codec itself
builds from the same values, and encode to the same bytes, in every version."""

import dataclasses

import pytest

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.server.handlers.produce import _PARTITION_ARGUMENTS, _response_classes

PRODUCE = API_TABLE[0]
CASES = [(3, 0, 41, -1, 7, None), (0, 6, -1, -1, -1, "This server is not the leader"),
         (2, 87, -1, -1, -1, "Produce request has no records"), (1, 0, 0, 1_700_000_000_000, 0, None)]


@pytest.mark.parametrize("version", range(PRODUCE.min_version, PRODUCE.max_version + 1))
def test_partition_answers_equal_the_codecs_in_every_version(version):
    cls = PRODUCE.response_class(version)
    topic_cls, partition, response = _response_classes(cls)
    built = [partition(*case) for case in CASES]
    part_cls = type(built[0])
    names = {f.name for f in dataclasses.fields(part_cls)}
    wanted = [{k: v for k, v in zip(_PARTITION_ARGUMENTS, case) if k in names} for case in CASES]
    for entity, values in zip(built, wanted):
        expected = construct(part_cls, values)
        assert entity == expected
        assert repr(entity) == repr(expected)
    ours = response((topic_cls(name="t", partition_responses=tuple(built)),))
    theirs = {"responses": [{"name": "t", "partition_responses": wanted}]}
    if any(f.name == "throttle_time" for f in dataclasses.fields(cls)):
        theirs["throttle_time"] = 0
    assert encode_to_bytes(ours) == encode_to_bytes(construct(cls, theirs))
