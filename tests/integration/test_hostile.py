"""Hostile input on raw sockets against one real broker.

Every test attacks on its own connection while ``bystander`` — a
well-behaved raw connection opened before the attack — must keep working
afterwards, and the records stored before the module started must still
read back unchanged.  At the end of every test the supervisor and all its
children must still be alive and the log must not mention a dead or crashed
child: a hostile client may lose its own connection, never the broker.

Kafka's rules being checked (SocketServer / RequestContext / KafkaApis):
a bad size prefix or an unparseable header closes the connection at once
without allocating the claimed size; an unknown API key or an unsupported
version of an API closes it, except ApiVersions, which is answered in v0
format with UNSUPPORTED_VERSION (35) and the broker's range; bad record
batches (and Produce v0-v2 message sets) are per-partition errors and
append nothing.
"""

from __future__ import annotations

import datetime
import os
import random
import socket
import struct
import time
from pathlib import Path

import pytest
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.metadata.v8.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v8.response import ProduceResponse

from kafkapy._core import batch_py, records_py
from kafkapy.protocol.codec import decode, encode_to_bytes
from support.clients import module_broker
from support.legacy_messages import message as legacy_message
from support.rawclient import (API_VERSIONS, ConnectionClosed, FrameTimeout, RawClient, encode_request,
                               parse_api_versions_v0_response)

PRODUCE, FETCH, METADATA = 0, 1, 3
NONE, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, UNSUPPORTED_VERSION, INVALID_RECORD = 0, 2, 10, 35, 87

# The broker's bound on a request (socket.request.max.bytes): above
# message.max.bytes (1 MiB + 12) so an oversized *batch* reaches the produce
# path, small enough that a size prefix just over it is cheap to send.
REQUEST_MAX_BYTES = 4 * 1024 * 1024
# "Promptly": a close or an answer for a request the broker has in full.
PROMPT_S = 5.0
KEEP_TOPIC, KEEP_PARTITIONS, KEEP_RECORDS = "keep", 2, 100


# ----------------------------------------------------------------- helpers


def batch(values, base_offset=0) -> bytes:
    now_ms = int(time.time() * 1000)
    return records_py.build_batch([(None, v, [], now_ms) for v in values], base_offset=base_offset)


def produce_body(topic: str, partition: int, records: bytes, acks: int = -1) -> bytes:
    return encode_to_bytes(ProduceRequest(
        transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=partition, records=records),)),)))


def produce(client: RawClient, topic: str, partition: int, records: bytes, acks: int = -1):
    """Produce v8 -> (error_code, base_offset)."""
    body = client.request(PRODUCE, 8, produce_body(topic, partition, records, acks), timeout_s=PROMPT_S)
    response, _ = decode(ProduceResponse, body, 0)
    part = response.responses[0].partition_responses[0]
    return int(part.error_code), part.base_offset


def fetch_body(topic: str, partition: int, offset: int, max_bytes: int = 1 << 20) -> bytes:
    return encode_to_bytes(FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=max_bytes),)),),
        forgotten_topics_data=(), rack_id=""))


def metadata_body(topics, auto_create: bool = False) -> bytes:
    return encode_to_bytes(MetadataRequest(
        topics=tuple(MetadataRequestTopic(name=t) for t in topics), allow_auto_topic_creation=auto_create,
        include_cluster_authorized_operations=False, include_topic_authorized_operations=False))


def ensure_topic(client: RawClient, topic: str) -> None:
    """Auto-create ``topic`` the way clients do (Metadata; Produce never creates, as in Kafka)."""
    client.request(METADATA, 8, metadata_body([topic], auto_create=True), timeout_s=PROMPT_S)


def read_partition(client: RawClient, topic: str, partition: int) -> tuple[list[tuple[int, bytes]], int]:
    """All records of a partition (bounded): ``([(offset, value)], high_watermark)``."""
    out, offset = [], 0
    for _ in range(1000):
        body = client.request(FETCH, 11, fetch_body(topic, partition, offset), timeout_s=PROMPT_S)
        response, _ = decode(FetchResponse, body, 0)
        data = response.responses[0].partitions[0]
        assert data.error_code == NONE, f"fetch {topic}-{partition}@{offset}: {data.error_code}"
        buf = bytes(data.records or b"")
        headers, _end, _err = batch_py.scan_batches(buf)
        for h in headers:
            raw = buf[h.position:h.position + h.batch_length + 12]
            out += [(o, v) for o, _t, _k, v, _h in records_py.decode_records(raw) if o >= offset]
            offset = h.base_offset + h.last_offset_delta + 1
        if offset >= data.high_watermark:
            return out, data.high_watermark
    raise AssertionError(f"could not read {topic}-{partition}")


def high_watermark(client: RawClient, topic: str, partition: int) -> int:
    body = client.request(FETCH, 11, fetch_body(topic, partition, 0, max_bytes=1), timeout_s=PROMPT_S)
    response, _ = decode(FetchResponse, body, 0)
    return response.responses[0].partitions[0].high_watermark


def raw_socket(broker) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=PROMPT_S)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def closed_promptly(client: RawClient, timeout_s: float = PROMPT_S) -> bool:
    """True if the broker closes the connection within ``timeout_s`` without sending a frame."""
    closed = client.wait_closed(timeout_s)
    return closed and not client._buffer


def answers_or_closes(client: RawClient, probe_correlation_id: int, timeout_s: float) -> str:
    """After a (possibly bad) request and an ApiVersions probe with
    ``probe_correlation_id`` on the same connection: "answered" once the
    probe's response arrives, "closed" if the broker closes first. Raises
    FrameTimeout if neither happens in time (a hang)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            frame = client.recv_frame(max(0.01, deadline - time.monotonic()))
        except ConnectionClosed:
            return "closed"
        except ValueError:
            return "closed"  # a frame size we refuse to buffer would be a broker bug, caught by the probe below
        if len(frame) >= 4 and struct.unpack_from(">i", frame)[0] == probe_correlation_id:
            return "answered"


def group_rss_kb(pgid: int) -> int:
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat[stat.rindex(")") + 2:].split()[2]) != pgid:
                continue
            for line in Path(f"/proc/{entry}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total


def children_of(pid: int) -> list[int]:
    pids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            pids += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return sorted(pids)


# ----------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def hostile_broker(tmp_path_factory):
    with module_broker(tmp_path_factory, {
            "num.io.threads": 2, "num.network.threads": 2, "num.partitions": 2,
            "socket.request.max.bytes": REQUEST_MAX_BYTES}, name="hostile") as broker:
        with RawClient.connect(broker.bootstrap) as client:
            kept = {}
            ensure_topic(client, KEEP_TOPIC)  # num.partitions=2
            for p in range(KEEP_PARTITIONS):
                assert produce(client, KEEP_TOPIC, p, batch([b"keep-%d-%d" % (p, i) for i in range(50)])) == (NONE, 0)
                assert produce(client, KEEP_TOPIC, p, batch(
                    [b"keep-%d-%d" % (p, i) for i in range(50, KEEP_RECORDS)])) == (NONE, 50)
                kept[p] = read_partition(client, KEEP_TOPIC, p)
                assert [o for o, _ in kept[p][0]] == list(range(KEEP_RECORDS))
        broker.kept = kept
        broker.children_at_start = children_of(broker.pid)
        yield broker


@pytest.fixture
def bystander(hostile_broker):
    """A well-behaved connection opened before the attack; checked after it."""
    client = RawClient.connect(hostile_broker.bootstrap)
    assert client.api_versions()[0] == NONE
    yield client
    try:
        assert hostile_broker.running, f"broker died:\n{hostile_broker.log_tail()}"
        assert client.api_versions(timeout_s=PROMPT_S)[0] == NONE
        for p, expected in hostile_broker.kept.items():
            assert read_partition(client, KEEP_TOPIC, p) == expected
        with RawClient.connect(hostile_broker.bootstrap) as fresh:
            assert fresh.api_versions(timeout_s=PROMPT_S)[0] == NONE
        assert children_of(hostile_broker.pid) == hostile_broker.children_at_start
        log = hostile_broker.log_text()
        assert " died " not in log and "crashed" not in log and "Traceback" not in log, \
            hostile_broker.log_tail()
    finally:
        client.close()


# ----------------------------------------------------------------- framing


def test_garbage_header_closes(hostile_broker, bystander):
    with RawClient.connect(hostile_broker.bootstrap) as client:
        client.send(struct.pack(">i", 12) + bytes.fromhex("deadbeefcafebabe01020304"))
        assert closed_promptly(client)
    # Pure random bytes: whatever the broker makes of them, it closes or waits for more.
    rng = random.Random(7)
    for _ in range(20):
        with RawClient.connect(hostile_broker.bootstrap) as client:
            client.send(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))))


@pytest.mark.parametrize("size", [-1, -5, -2**31])
def test_negative_frame_length_closes(hostile_broker, bystander, size):
    with RawClient.connect(hostile_broker.bootstrap) as client:
        client.send(struct.pack(">i", size) + b"\0" * 16)
        assert closed_promptly(client)


@pytest.mark.parametrize("size", [REQUEST_MAX_BYTES + 1, 2**31 - 1])
def test_oversized_frame_length_closes_without_allocating(hostile_broker, bystander, size):
    rss_before_kb = group_rss_kb(hostile_broker.pgid)
    clients = []
    try:
        # Ten at once: if each made the broker reserve `size` bytes it would show.
        for _ in range(10):
            client = RawClient.connect(hostile_broker.bootstrap)
            clients.append(client)
            client.send(struct.pack(">i", size) + b"\0" * 64)
        for client in clients:
            assert closed_promptly(client)
    finally:
        for client in clients:
            client.close()
    grown_kb = group_rss_kb(hostile_broker.pgid) - rss_before_kb
    assert grown_kb < 32 * 1024, f"broker RSS grew by {grown_kb} KiB"


def test_truncated_frame_then_close(hostile_broker, bystander):
    for cut in (2, 4, 10, 30):
        request = encode_request(METADATA, 8, 77, metadata_body([KEEP_TOPIC]))
        with RawClient.connect(hostile_broker.bootstrap) as client:
            client.send(request[:cut])
    # And a frame whose body never completes, left open while others work.
    lingering = RawClient.connect(hostile_broker.bootstrap)
    try:
        lingering.send(struct.pack(">i", 1000) + b"\0" * 100)
        assert bystander.api_versions(timeout_s=PROMPT_S)[0] == NONE
    finally:
        lingering.close()


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x00\x12\x00", b"\x00\x12\x00\x00\x00\x00\x00",
                                     b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x05ab"])
def test_frame_shorter_than_request_header_closes(hostile_broker, bystander, payload):
    with RawClient.connect(hostile_broker.bootstrap) as client:
        client.send(struct.pack(">i", len(payload)) + payload)
        assert closed_promptly(client)


@pytest.mark.parametrize("api_key", [999, 32767, -1, 10_000])
def test_unknown_api_key_closes(hostile_broker, bystander, api_key):
    with RawClient.connect(hostile_broker.bootstrap) as client:
        client.send_request(api_key, 0, b"")
        assert closed_promptly(client)


@pytest.mark.parametrize("api_key,version", [(METADATA, 99), (FETCH, 18), (FETCH, 99), (PRODUCE, 99), (FETCH, -1)])
def test_unsupported_version_closes(hostile_broker, bystander, api_key, version):
    with RawClient.connect(hostile_broker.bootstrap) as client:
        client.send_request(api_key, version, b"\0" * 32)
        assert closed_promptly(client)


@pytest.mark.parametrize("version", [5, 99, 32767])
def test_api_versions_unsupported_version_answered_in_v0(hostile_broker, bystander, version):
    with RawClient.connect(hostile_broker.bootstrap) as client:
        # A future ApiVersions version may carry any body: the broker cannot parse it.
        correlation_id = client.send_request(API_VERSIONS, version, b"\x02\x05\x00\x00\x00")
        body = client.recv_response(correlation_id, timeout_s=PROMPT_S)
        error_code, apis = parse_api_versions_v0_response(body)
        assert error_code == UNSUPPORTED_VERSION
        ranges = {key: (lo, hi) for key, lo, hi in apis}
        assert ranges[API_VERSIONS][0] == 0 and ranges[API_VERSIONS][1] >= 3
        # v0 format: exactly error_code + array, nothing after (no throttle, no tags).
        assert len(body) == 2 + 4 + 6 * len(apis)
        # The connection stays usable: the client retries with a version it knows.
        assert client.api_versions(timeout_s=PROMPT_S)[0] == NONE


# ----------------------------------------------------------------- bad produce requests


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_corrupt_message_sets_append_nothing(hostile_broker, bystander, version):
    topic = "old-produce"
    with RawClient.connect(hostile_broker.bootstrap) as client:
        ensure_topic(client, topic)
        assert produce(client, topic, 0, batch([b"seed"]))[0] == NONE
        before = high_watermark(client, topic, 0)
        good = legacy_message(1, b"k", b"v", int(time.time() * 1000))
        name = topic.encode()
        # Message format v0/v1 (up-converted on append): a flipped CRC, a size
        # below the v0 overhead, a gzip wrapper of garbage.
        for records, code in ((good[:-1] + bytes([good[-1] ^ 0xFF]), CORRUPT_MESSAGE),
                              (struct.pack(">qi", 0, 3) + b"\x00" * 3, CORRUPT_MESSAGE),
                              (legacy_message(1, None, b"not gzip", 1, attributes=1), CORRUPT_MESSAGE)):
            # Produce v0-v2: acks i16, timeout i32, [topic string, [partition i32, message_set bytes]].
            body = (struct.pack(">hii", -1, 5000, 1) + struct.pack(">h", len(name)) + name
                    + struct.pack(">iii", 1, 0, len(records)) + records)
            correlation_id = client.send_request(PRODUCE, version, body)
            frame = client.recv_frame(PROMPT_S)
            assert struct.unpack_from(">i", frame)[0] == correlation_id
            # v0-v2 response: [topic: name, [partition: index i32, error i16, base_offset i64, ...]]
            (n_topics,) = struct.unpack_from(">i", frame, 4)
            (name_len,) = struct.unpack_from(">h", frame, 8)
            _n_parts, _index, error_code, base_offset = struct.unpack_from(">iihq", frame, 10 + name_len)
            assert (n_topics, error_code, base_offset) == (1, code, -1)
    with RawClient.connect(hostile_broker.bootstrap) as client:
        assert high_watermark(client, topic, 0) == before


@pytest.fixture
def produce_target(hostile_broker):
    """A fresh partition for bad produces, with one good batch in it."""
    topic = f"bad-produce-{time.monotonic_ns()}"
    with RawClient.connect(hostile_broker.bootstrap) as client:
        ensure_topic(client, topic)
        assert produce(client, topic, 0, batch([b"good-0", b"good-1"])) == (NONE, 0)
    return topic


def _flip(data: bytes, position: int) -> bytes:
    position %= len(data)
    return data[:position] + bytes([data[position] ^ 0x5A]) + data[position + 1:]


def _set_magic(data: bytes, magic: int) -> bytes:
    return data[:16] + bytes([magic]) + data[17:]


BAD_BATCHES = {
    # name: (records bytes, acceptable error codes)
    "bad-crc": (lambda: _flip(batch([b"a", b"b", b"c"]), -3), {CORRUPT_MESSAGE}),
    "bad-crc-field": (lambda: _flip(batch([b"a"]), 18), {CORRUPT_MESSAGE}),
    "magic-1": (lambda: _set_magic(batch([b"a"]), 1), {INVALID_RECORD, CORRUPT_MESSAGE}),
    "magic-0": (lambda: _set_magic(batch([b"a"]), 0), {INVALID_RECORD, CORRUPT_MESSAGE}),
    "truncated": (lambda: batch([b"a", b"b"])[:-10], {CORRUPT_MESSAGE, INVALID_RECORD}),
    "header-only": (lambda: batch([b"a"])[:40], {CORRUPT_MESSAGE, INVALID_RECORD}),
    "good-then-bad": (lambda: batch([b"a"]) + _flip(batch([b"b"]), -2), {CORRUPT_MESSAGE}),
    "length-too-small": (lambda: batch([b"a"])[:8] + struct.pack(">i", 10) + batch([b"a"])[12:],
                         {CORRUPT_MESSAGE, INVALID_RECORD}),
    "too-large": (lambda: batch([os.urandom(1_100_000)]), {MESSAGE_TOO_LARGE}),
}


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_bad_batch_is_rejected_and_nothing_appended(hostile_broker, bystander, produce_target, case):
    make, allowed = BAD_BATCHES[case]
    with RawClient.connect(hostile_broker.bootstrap) as client:
        before = read_partition(client, produce_target, 0)
        error, base_offset = produce(client, produce_target, 0, make())
        assert error in allowed, f"{case}: error {error}, expected one of {allowed}"
        assert base_offset == -1
        assert read_partition(client, produce_target, 0) == before
        # The partition still takes good data at the next offset.
        assert produce(client, produce_target, 0, batch([b"after"])) == (NONE, before[1])


# ----------------------------------------------------------------- fuzzing


def _valid_requests() -> list[tuple[int, int, bytes]]:
    return [
        (PRODUCE, 8, produce_body("fuzz", 0, batch([b"fuzz-%d" % i for i in range(5)]))),
        (PRODUCE, 8, produce_body("fuzz", 0, batch([b"x"]), acks=1)),
        (FETCH, 11, fetch_body(KEEP_TOPIC, 0, 10)),
        (FETCH, 11, fetch_body("fuzz", 0, 0)),
        (METADATA, 8, metadata_body([KEEP_TOPIC, "fuzz"])),
        (METADATA, 8, encode_to_bytes(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                      include_cluster_authorized_operations=False,
                                                      include_topic_authorized_operations=False))),
    ]


FUZZ_CASES = 300
FUZZ_BUDGET_S = 60.0


def test_random_byte_flips_never_crash_or_hang(hostile_broker, bystander):
    rng = random.Random(20240601)
    templates = _valid_requests()
    client = RawClient.connect(hostile_broker.bootstrap)
    ensure_topic(client, "fuzz")
    outcomes = {"answered": 0, "closed": 0}
    started = time.monotonic()
    try:
        for case in range(FUZZ_CASES):
            if time.monotonic() - started > FUZZ_BUDGET_S:
                break
            api_key, version, body = rng.choice(templates)
            # Header (after the size prefix) + body; flips never touch the size
            # prefix, so the broker always has the whole frame and must decide.
            payload = bytearray(encode_request(api_key, version, 1000 + case, body)[4:])
            for _ in range(rng.choice((1, 1, 2, 3, 8))):
                payload[rng.randrange(len(payload))] ^= rng.randrange(1, 256)
            probe_id = 900_000 + case
            try:
                client.send(struct.pack(">i", len(payload)) + bytes(payload))
                # The probe proves the connection is not wedged (it also covers
                # a flip that turned acks into 0, which gets no response).
                client.send(encode_request(API_VERSIONS, 0, probe_id, b""))
            except OSError:
                outcome = "closed"
            else:
                try:
                    outcome = answers_or_closes(client, probe_id, PROMPT_S)
                except FrameTimeout:
                    pytest.fail(f"case {case}: no answer and no close within {PROMPT_S} s for "
                                f"{bytes(payload[:64]).hex()}")
            outcomes[outcome] += 1
            if outcome == "closed":
                client.close()
                client = RawClient.connect(hostile_broker.bootstrap)
            assert hostile_broker.running, f"broker died at case {case}:\n{hostile_broker.log_tail()}"
    finally:
        client.close()
    print("fuzz outcomes", outcomes, f"in {time.monotonic() - started:.1f} s")
    assert sum(outcomes.values()) >= 100, outcomes
    assert outcomes["answered"] > 0 and outcomes["closed"] > 0, outcomes


# ----------------------------------------------------------------- connection abuse


def test_200_connections_dropped_abruptly(hostile_broker, bystander):
    linger_rst = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close sends RST
    request = encode_request(METADATA, 8, 5, metadata_body([KEEP_TOPIC]))
    socks = []
    try:
        for i in range(200):
            s = raw_socket(hostile_broker)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_rst)
            if i % 3 == 1:
                s.sendall(request)  # a response will find the peer gone
            elif i % 3 == 2:
                s.sendall(request[:7])
            socks.append(s)
        # Mid-way the broker still serves others.
        assert bystander.api_versions(timeout_s=PROMPT_S)[0] == NONE
    finally:
        for s in socks:
            s.close()
    time.sleep(0.5)
    with RawClient.connect(hostile_broker.bootstrap) as client:
        assert client.api_versions(timeout_s=PROMPT_S)[0] == NONE


def test_client_that_never_reads_does_not_block_others(hostile_broker, bystander):
    topic = "big"
    with RawClient.connect(hostile_broker.bootstrap) as client:
        ensure_topic(client, topic)
        for _ in range(4):
            assert produce(client, topic, 0, batch([os.urandom(900_000)]))[0] == NONE
    slow = raw_socket(hostile_broker)
    try:
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # Requests back to back, never reading: ~3.6 MB of responses pile up
        # behind a full socket buffer in the broker's processor.
        for i in range(4):
            slow.sendall(encode_request(FETCH, 11, 100 + i, fetch_body(topic, 0, 0, max_bytes=4 << 20)))
        time.sleep(0.5)
        # Everyone else is still served, and quickly.
        for _ in range(20):
            t0 = time.monotonic()
            assert bystander.api_versions(timeout_s=PROMPT_S)[0] == NONE
            assert time.monotonic() - t0 < 3.0  # generous: a shared 2-core box; blocked would be "never"
        with RawClient.connect(hostile_broker.bootstrap) as other:
            records, _ = read_partition(other, KEEP_TOPIC, 0)
            assert len(records) == KEEP_RECORDS
    finally:
        slow.close()
