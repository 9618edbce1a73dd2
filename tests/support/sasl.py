"""Helpers of the SASL tests: raw SaslHandshake v1 / SaslAuthenticate v2
frames (the exact answers, error messages and session lifetimes) and a
confluent-kafka produce-then-consume-in-a-group round trip."""

from __future__ import annotations

import struct
import time

from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from kafkapy.protocol.codec import decode, encode_to_bytes


def handshake(client, mechanism, version=1):
    """SaslHandshake v1 (the decoded response) or v0 (its error code)."""
    body = encode_to_bytes(SaslHandshakeRequest(mechanism=mechanism)) if version == 1 else \
        struct.pack(">h", len(mechanism)) + mechanism.encode()
    raw = client.request(17, version, body)
    if version == 1:
        return decode(SaslHandshakeResponse, memoryview(raw), 0)[0]
    return struct.unpack_from(">h", raw)[0]


def flexible_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """A size-prefixed request with a flexible header (v2: client id "raw", no tags)."""
    payload = struct.pack(">hhih", api_key, version, correlation_id, 3) + b"raw" + b"\x00" + body
    return struct.pack(">i", len(payload)) + payload


def authenticate_frame(correlation_id: int, token: bytes) -> bytes:
    """A size-prefixed SaslAuthenticate v2 request."""
    return flexible_frame(36, 2, correlation_id, encode_to_bytes(SaslAuthenticateRequest(auth_bytes=token)))


def decode_authenticate(frame: bytes):
    return decode(SaslAuthenticateResponse, memoryview(frame), 5)[0]  # header v1: a tag byte


def flexible_request(client, api_key: int, version: int, body: bytes) -> bytes:
    """Round trip of a flexible-version request: the response frame (with
    its correlation id, checked, and the header's empty tag byte)."""
    correlation_id = client._next_correlation_id
    client._next_correlation_id += 1
    client.send(flexible_frame(api_key, version, correlation_id, body))
    frame = client.recv_frame(timeout_s=5)
    assert struct.unpack_from(">i", frame)[0] == correlation_id
    return frame


def authenticate(client, token):
    """SaslAuthenticate v2 round trip: the decoded response."""
    return decode_authenticate(flexible_request(client, 36, 2, encode_to_bytes(SaslAuthenticateRequest(auth_bytes=token))))


def confluent_round_trip(bootstrap, conf, topic, count=20):
    """Produce ``count`` records with confluent-kafka, then consume them in
    group ``g-<topic>`` from the beginning and commit."""
    import confluent_kafka

    conf = {"bootstrap.servers": bootstrap, **conf}
    producer = confluent_kafka.Producer(conf)
    errors = []
    for i in range(count):
        producer.produce(topic, b"v%d" % i, on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors
    consumer = confluent_kafka.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == [b"v%d" % i for i in range(count)]


def serve_then_check_log(module_broker, secrets):
    """A module fixture's body: yield the broker of ``module_broker`` (a
    ``support.clients.module_broker(...)`` context, which stops it and checks
    the shutdown); at teardown fail if its log shows any of ``secrets`` (passwords)."""
    with module_broker as broker:
        yield broker
    log = broker.log_text()
    for secret in secrets:
        assert secret not in log, f"the broker log shows a password ({secret})"
