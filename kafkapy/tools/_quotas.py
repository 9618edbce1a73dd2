"""DescribeClientQuotas and AlterClientQuotas for kafkapy-configs, as raw requests.

Neither confluent-kafka (librdkafka has no client-quota admin API) nor
kafkapy's own admin client speaks them, so the tool sends them itself over
one blocking PLAINTEXT connection to the first bootstrap server, v1
(flexible; Kafka 2.8+ and kafkapy answer it), with kafkapy's codec and the
broker's API table. Errors come back as ``ClientError`` with Kafka's error
name, as from the tool's client seam.
"""

from __future__ import annotations

import socket
import struct

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.entities import construct
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.headers import skip_tagged_fields
from kafkapy.tools._client import ClientError

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
_VERSION = 1
_SIZE = struct.Struct(">i")


def _error(code: int, message) -> ClientError:
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = str(code)
    return ClientError(name, code, message or "")


def _call(bootstrap: str, api_key: int, data: dict, timeout_s: float):
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    spec = API_TABLE[api_key]
    body = encode_to_bytes(construct(spec.request_class(_VERSION), data))
    client_id = b"kafkapy-configs"
    header = struct.pack(">hhih", api_key, _VERSION, 1, len(client_id)) + client_id + b"\x00"
    frame = header + body
    with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=timeout_s) as sock:
        sock.sendall(_SIZE.pack(len(frame)) + frame)
        size = _SIZE.unpack(_recv(sock, 4))[0]
        raw = memoryview(_recv(sock, size))
    offset = skip_tagged_fields(raw, 4)  # correlation id, then the header's tags (v1 header)
    response, _ = decode(spec.response_class(_VERSION), raw, offset)
    return response


def _recv(sock, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ClientError("NETWORK_EXCEPTION", -1, "the broker closed the connection")
        out += chunk
    return bytes(out)


def describe(bootstrap: str, components, strict: bool, timeout_s: float = 30.0) -> list:
    """``[([(entity type, name or None)], {key: float})]``; ``components``:
    ``[(entity type, name or "" for the default or None for any)]``."""
    wire = []
    for entity_type, name in components:
        if name is None:
            wire.append({"entity_type": entity_type, "match_type": 2, "match": None})
        elif name == "":
            wire.append({"entity_type": entity_type, "match_type": 1, "match": None})
        else:
            wire.append({"entity_type": entity_type, "match_type": 0, "match": name})
    response = _call(bootstrap, DESCRIBE_CLIENT_QUOTAS, {"components": wire, "strict": strict}, timeout_s)
    if response.error_code:
        raise _error(response.error_code, response.error_message)
    return [([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: v.value for v in entry.values})
            for entry in response.entries or ()]


def alter(bootstrap: str, entity, to_set: dict, to_delete, validate_only: bool = False,
          timeout_s: float = 30.0) -> None:
    """One entity ``[(entity type, name or None for the default)]``."""
    ops = [{"key": k, "value": float(v), "remove": False} for k, v in to_set.items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in to_delete]
    data = {"entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "ops": ops}],
            "validate_only": validate_only}
    response = _call(bootstrap, ALTER_CLIENT_QUOTAS, data, timeout_s)
    for entry in response.entries:
        if entry.error_code:
            raise _error(entry.error_code, entry.error_message)
