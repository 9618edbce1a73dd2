"""Checks shared by the tests of the one-pass readers and writers
(protocol/produce_wire.py, protocol/fetch_request_wire.py): each is held to
the generic codec, byte for byte and entity for entity."""

from kafkapy.protocol import writers
from kafkapy.protocol.api import API_TABLE, schema_version
from kafkapy.protocol.codec import DecodeError, Parts, decode, encode
from kafkapy.protocol.entities import construct


def body(api_key: int, version: int, values: dict) -> bytes:
    """The request of ``values`` as the codec encodes it."""
    out = Parts()
    encode(construct(API_TABLE[api_key].request_class(version), values), out)
    return b"".join(bytes(part) for part in out.parts())


def both(wire, api_key: int, version: int, buf: bytes):
    """``(one-pass entity or None, the codec's entity or DecodeError)`` of ``buf``."""
    cls = API_TABLE[api_key].request_class(version)
    fast = wire.decode_request(cls, version, memoryview(buf), 0)
    try:
        slow, _ = decode(cls, memoryview(buf), 0)
    except DecodeError:
        slow = DecodeError
    return fast, slow


def mutated(buf: bytes, cut: int, flips) -> bytes:
    """``buf`` with bytes set by ``flips`` ((position, value) pairs, positions
    wrapped), then cut to ``cut`` bytes."""
    buf = bytearray(buf)
    for at, value in flips:
        if buf:
            buf[at % len(buf)] = value
    return bytes(buf[:cut])


def both_responses(handler, wire, cls, response):
    """``response`` written by the one-pass writer the handler installs for
    ``cls`` and by the codec's, each after a prefix: ``(one-pass Parts,
    codec Parts, the responses the one-pass writer left to the codec)``."""
    handler._response_classes(cls)  # the handler's first answer in a version installs the one-pass writer
    plan = writers._write_plan(cls)
    assert getattr(plan.writer, "one_pass", False), f"{handler.__name__} installs its writer"
    generic = writers._make_entity_writer(plan)
    fallbacks = []

    def codec_writer(out, buf, entity):
        fallbacks.append(entity)
        generic(out, buf, entity)

    one_pass = wire._response_writer(cls, codec_writer)
    fast, slow = Parts(), Parts()
    fast.buf += b"prefix"  # written after what is already there, and only that undone on a fallback
    slow.buf += b"prefix"
    one_pass(fast, fast.buf, response)
    generic(slow, slow.buf, response)
    return fast, slow, fallbacks


def assert_older_versions_keep_the_codecs_writer(api_key: int, handler, first_version: int) -> None:
    for version in range(0, first_version):
        cls = API_TABLE[api_key].response_class(version)
        assert schema_version(cls) == version
        handler._response_classes(cls)
        assert not getattr(writers._write_plan(cls).writer, "one_pass", False)
