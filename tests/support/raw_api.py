"""Any request of any version in the API table as raw frames, for tests that
check a broker's answers version by version.

A request is built from a plain dict with the version's schema (kio's, or
kafkapy's own for the versions kio lacks; fields the version lacks are
dropped), framed with the request header of that version (v2 for flexible
versions, v1 otherwise, v0 for ControlledShutdown v0) and sent on its own connection. The answer must
carry the request's correlation id (``RawClient.recv_response`` checks it)
and decode at that version with the response header Kafka uses for it (v1
for flexible versions, ApiVersions always v0), leaving no byte over.
"""

from __future__ import annotations

import itertools
import struct

from kafkapy.protocol.api import API_TABLE, API_VERSIONS_KEY
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.protocol.headers import CONTROLLED_SHUTDOWN_KEY
from .rawclient import RawClient, encode_request_header_v1

TIMEOUT_S = 15.0
_correlation_ids = itertools.count(100)


def call_raw(bootstrap: str, api_key: int, version: int, body: bytes, timeout_s: float = TIMEOUT_S) -> bytes:
    """Frame ``body`` behind a request header v1 (v0 for ControlledShutdown v0; a flexible version's body
    starts with the header's empty tag byte); the answer after its
    correlation id."""
    cid = next(_correlation_ids)
    if (api_key, version) == (CONTROLLED_SHUTDOWN_KEY, 0):
        header = struct.pack(">hhi", api_key, version, cid)  # request header v0: no client id
    else:
        header = encode_request_header_v1(api_key, version, cid)
    payload = header + body
    with RawClient.connect(bootstrap, timeout_s=timeout_s) as client:
        client.send(struct.pack(">i", len(payload)) + payload)
        return client.recv_response(cid, timeout_s)


def call(bootstrap: str, api_key: int, version: int, data: dict, timeout_s: float = TIMEOUT_S):
    """One request on its own connection -> the decoded response entity."""
    spec = API_TABLE[api_key]
    flexible = spec.is_flexible(version)
    body = encode_to_bytes(construct(spec.request_class(version), data))
    raw = call_raw(bootstrap, api_key, version, (b"\x00" if flexible else b"") + body, timeout_s)
    if flexible and api_key != API_VERSIONS_KEY:
        assert raw[0] == 0, f"{spec.name} v{version}: response header tags {raw[0]}"
        raw = raw[1:]
    response, end = decode(spec.response_class(version), memoryview(raw), 0)
    assert end == len(raw), f"{spec.name} v{version}: {len(raw) - end} bytes left after the body"
    assert response.__version__ == version
    return response


def transaction_states(bootstrap: str, txn_ids) -> list:
    """DescribeTransactions at ``bootstrap``: each id's state name, or
    ``"error <code>"``."""
    r = call(bootstrap, 65, 0, {"transactional_ids": list(txn_ids)}, timeout_s=5)
    return [s.transaction_state if s.error_code == 0 else f"error {s.error_code}" for s in r.transaction_states]


def leaders_known(bootstrap: str, topics) -> bool:
    """Whether the broker at ``bootstrap`` knows a leader for every partition
    of ``topics`` in its own metadata (what its AddPartitionsToTxn checks)."""
    r = call(bootstrap, 3, 4, {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False})
    return all(t.error_code == 0 and t.partitions and all(q.leader_id >= 0 for q in t.partitions) for t in r.topics)
