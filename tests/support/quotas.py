"""Raw AlterClientQuotas / DescribeClientQuotas / Produce for the quota tests, with
a chosen client id (raw_api's calls use one fixed id) and timing of each answer."""

from __future__ import annotations

import itertools
import struct
import time

from kafkapy._core.records_py import build_batch
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct
from .raw_api import call
from .rawclient import RawClient, encode_request_header_v1

_ids = itertools.count(1000)


def alter(bootstrap: str, entity: dict, ops: dict, validate_only: bool = False, version: int = 1):
    """``entity`` {"user": name or None, "client-id": ...}; ``ops`` {key: value or None to remove}."""
    return call(bootstrap, 49, version, {"entries": [{
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
        "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None} for k, v in ops.items()]}],
        "validate_only": validate_only})


def describe(bootstrap: str, components, strict: bool = False, version: int = 1):
    """``components`` [(type, match type, match)] -> (error code, {((type, name), ...): {key: value}})."""
    r = call(bootstrap, 48, version, {"components": [
        {"entity_type": t, "match_type": m, "match": n} for t, m, n in components], "strict": strict})
    found = {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
             for entry in r.entries or ()}
    return r.error_code, found


class Connection:
    """One raw connection with a client id: requests of any version, answers timed."""

    def __init__(self, bootstrap: str, client_id: str, timeout_s: float = 30.0):
        self.client = RawClient.connect(bootstrap, timeout_s=timeout_s)
        self.client_id = client_id
        self.timeout_s = timeout_s

    def send(self, api_key: int, version: int, data: dict) -> int:
        spec = API_TABLE[api_key]
        flexible = spec.is_flexible(version)
        cid = next(_ids)
        payload = encode_request_header_v1(api_key, version, cid, self.client_id) + (b"\x00" if flexible else b"")
        payload += encode_to_bytes(construct(spec.request_class(version), data))
        self.client.send(struct.pack(">i", len(payload)) + payload)
        return cid

    def receive(self, api_key: int, version: int, cid: int):
        spec = API_TABLE[api_key]
        raw = self.client.recv_response(cid, self.timeout_s)
        if spec.is_flexible(version) and api_key != 18:
            raw = raw[1:]
        return decode(spec.response_class(version), memoryview(raw), 0)[0]

    def call(self, api_key: int, version: int, data: dict):
        """(response, seconds to its answer)."""
        started = time.monotonic()
        cid = self.send(api_key, version, data)
        response = self.receive(api_key, version, cid)
        return response, time.monotonic() - started

    def close(self) -> None:
        self.client.close()


def produce_request(topic: str, value_bytes: int, records: int = 1) -> dict:
    now = int(time.time() * 1000)
    value = b"q" * value_bytes
    batch = bytes(build_batch([(None, value, [], now) for _ in range(records)]))
    return {"acks": 1, "timeout": 10000, "transactional_id": None,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
