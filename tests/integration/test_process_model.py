"""The multi-process broker behaves like one Kafka broker.

Handler workers are separate processes sharing partitions through the shared
partition table (docs/architecture.md), so the risks checked here are the
ones a process model adds: two workers assigning the same offset, responses
of one connection overtaking each other, acks=0 wedging a muted connection,
and a SIGTERM that cannot finish while clients are connected.
"""

from __future__ import annotations

import datetime
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.metadata.v8.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v8.response import ProduceResponse

from kafkapy._core import batch_py, records_py
from kafkapy.protocol.codec import decode, encode_to_bytes
from support.rawclient import API_VERSIONS, RawClient, encode_request
from support.wait import wait_for

PRODUCE, FETCH, METADATA = 0, 1, 3
SETTLE_S = 15.0

# Several handlers (so two requests of one connection *could* be handled
# concurrently and overtake each other) but fewer than the default 8, which
# would make each start-up slow on a shared 2-core box.  Tests that need
# other counts set their own.
pytestmark = pytest.mark.broker_config({"num.io.threads": 3, "num.network.threads": 2})

# Each producer process appends "partition offset value" per acknowledged
# record to its file and exits after `count` records (bounded by max_s).
PRODUCER_SCRIPT = textwrap.dedent("""
    import sys, time
    import confluent_kafka
    bootstrap, topic, acked_path, prefix, count = sys.argv[1:6]
    count, max_s = int(count), 60.0
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
                                         "batch.num.messages": 50, "log_level": 2})
    out = open(acked_path, "w", buffering=1)
    def on_delivery(err, msg):
        if err is None:
            out.write("%d %d %s\\n" % (msg.partition(), msg.offset(), msg.value().decode()))
        else:
            out.write("ERR %s %s\\n" % (msg.value().decode(), err))
    started = time.monotonic()
    for i in range(count):
        if time.monotonic() - started > max_s:
            break
        while True:
            try:
                producer.produce(topic, value=("%s-%06d" % (prefix, i)).encode(), partition=0,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    out.write("DONE %d\\n" % producer.flush(30))
""")


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=SETTLE_S)


def fetch_body(topic: str, partition: int, offset: int, max_wait_ms: int = 0, min_bytes: int = 0,
               max_bytes: int = 1 << 20) -> bytes:
    return encode_to_bytes(FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes,
        max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=max_bytes),)),),
        forgotten_topics_data=(), rack_id=""))


def produce_body(topic: str, partition: int, records: bytes, acks: int) -> bytes:
    return encode_to_bytes(ProduceRequest(
        transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=partition, records=records),)),)))


def metadata_body(topics) -> bytes:
    return encode_to_bytes(MetadataRequest(
        topics=tuple(MetadataRequestTopic(name=t) for t in topics), allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False, include_topic_authorized_operations=False))


def read_partition(bootstrap: str, topic: str, partition: int) -> tuple[list[tuple[int, bytes]], int]:
    out, offset = [], 0
    deadline = time.monotonic() + SETTLE_S
    with RawClient.connect(bootstrap) as client:
        while time.monotonic() < deadline:
            body = client.request(FETCH, 11, fetch_body(topic, partition, offset), timeout_s=SETTLE_S)
            response, _ = decode(FetchResponse, body, 0)
            data = response.responses[0].partitions[0]
            assert data.error_code == 0, data.error_code
            buf = bytes(data.records or b"")
            headers, _, _ = batch_py.scan_batches(buf)
            for h in headers:
                raw = buf[h.position:h.position + h.batch_length + 12]
                out += [(o, v) for o, _t, _k, v, _h in records_py.decode_records(raw) if o >= offset]
                offset = h.base_offset + h.last_offset_delta + 1
            if offset >= data.high_watermark:
                return out, data.high_watermark
    raise AssertionError(f"could not read {topic}-{partition} in {SETTLE_S} s")


def batch(values) -> bytes:
    now_ms = int(time.time() * 1000)
    return records_py.build_batch([(None, v, [], now_ms) for v in values])


# ----------------------------------------------------------------- concurrent producers


@pytest.mark.broker_config({"num.io.threads": 4, "num.network.threads": 3})
def test_concurrent_producers_one_partition_offsets_exactly_once(broker, tmp_path):
    topic, producers, per_producer = "contended", 4, 3000
    create_topic(broker.bootstrap, topic)
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER_SCRIPT)
    procs, files = [], []
    for i in range(producers):
        path = tmp_path / f"acked-{i}.txt"
        files.append(path)
        procs.append(subprocess.Popen([sys.executable, str(script), broker.bootstrap, topic, str(path),
                                       f"p{i}", str(per_producer)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    try:
        for proc in procs:
            _, stderr = proc.communicate(timeout=90)
            assert proc.returncode == 0, stderr.decode()[-2000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    acked = {}
    for path in files:
        lines = path.read_text().splitlines()
        assert lines[-1] == "DONE 0", lines[-3:]
        errors = [line for line in lines if line.startswith("ERR")]
        assert not errors, errors[:3]
        for line in lines[:-1]:
            p, o, value = line.split(" ", 2)
            assert int(o) not in acked, f"offset {o} acknowledged twice: {acked[int(o)]!r} and {value!r}"
            acked[int(o)] = value.encode()
    total = producers * per_producer
    assert len(acked) == total
    records, high_watermark = read_partition(broker.bootstrap, topic, 0)
    assert high_watermark == total
    assert [o for o, _ in records] == list(range(total))
    assert dict(records) == acked
    # Each producer's records keep their send order (one connection, in-order responses).
    for i in range(producers):
        prefix = b"p%d-" % i
        mine = [v for _, v in records if v.startswith(prefix)]
        assert mine == sorted(mine) and len(mine) == per_producer


# ----------------------------------------------------------------- one connection, in order


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for the connection-ordering tests (they only read its state)."""
    from support.clients import module_broker

    with module_broker(tmp_path_factory, {"num.io.threads": 3, "num.network.threads": 2}, name="ordering") as broker:
        yield broker


def test_pipelined_requests_answered_in_order(shared_broker):
    broker = shared_broker
    topic = "pipeline"
    create_topic(broker.bootstrap, topic)
    with RawClient.connect(broker.bootstrap) as client:
        frames = []
        expected = []
        for i in range(10):
            correlation_id = 5000 + i
            expected.append(correlation_id)
            if i % 2:
                frames.append(encode_request(API_VERSIONS, 0, correlation_id))
            else:
                frames.append(encode_request(METADATA, 8, correlation_id, metadata_body([topic])))
        client.send(b"".join(frames))  # all at once, nothing read yet
        got = [struct.unpack_from(">i", client.recv_frame(SETTLE_S))[0] for _ in expected]
        assert got == expected


def test_pipelined_small_and_large_requests_split_at_every_kind_of_boundary(shared_broker):
    """Requests sent back to back and cut into pieces at odd places: inside a
    size prefix, inside a small (inline) body, inside a large (arena) body,
    several small ones in one piece. The processor reads a connection in one
    buffer and keeps what it read past a request for later: every request
    must be answered once, in order, and the records land in order."""
    broker = shared_broker
    topic = "pipeline-split"
    create_topic(broker.bootstrap, topic)
    big_values = [bytes([65 + i]) * 40_000 for i in range(2)]  # > 16 KiB: arena path
    frames, expected = [], []
    for i in range(12):
        correlation_id = 7000 + i
        expected.append(correlation_id)
        if i in (3, 8):
            body = produce_body(topic, 0, batch([big_values[i == 8]]), acks=1)
            frames.append(encode_request(PRODUCE, 8, correlation_id, body))
        elif i % 3 == 0:
            frames.append(encode_request(PRODUCE, 8, correlation_id,
                                         produce_body(topic, 0, batch([b"small-%d" % i]), acks=1)))
        else:
            frames.append(encode_request(API_VERSIONS, 0, correlation_id))
    stream = b"".join(frames)
    cuts = [1, 3, 7, 60, 61, 200, 5000, 17_000, 30_000, 45_000, 47_000, 70_000, len(stream)]
    with RawClient.connect(broker.bootstrap) as client:
        start = 0
        for cut in cuts:
            if cut > start:
                client.send(stream[start:cut])
                time.sleep(0.01)  # separate reads on the broker side
            start = cut
        got = [struct.unpack_from(">i", client.recv_frame(SETTLE_S))[0] for _ in expected]
        assert got == expected
    records, _ = read_partition(broker.bootstrap, topic, 0)
    values = [v for _, v in records]
    assert values == [b"small-0", big_values[0], b"small-6", big_values[1], b"small-9"]


def test_bad_size_after_a_good_request_answers_it_then_closes(shared_broker):
    """A valid request and, in the same write, a negative size prefix: the
    first is answered (it arrived whole), then the connection is closed; the
    broker keeps serving others."""
    broker = shared_broker
    with RawClient.connect(broker.bootstrap) as client:
        client.send(encode_request(API_VERSIONS, 0, 11) + struct.pack(">i", -5) + b"junk")
        assert struct.unpack_from(">i", client.recv_frame(SETTLE_S))[0] == 11
        assert client.wait_closed(SETTLE_S)
    with RawClient.connect(broker.bootstrap) as client:
        client.send(encode_request(API_VERSIONS, 0, 12))
        assert struct.unpack_from(">i", client.recv_frame(SETTLE_S))[0] == 12


def test_delayed_fetch_is_not_overtaken_by_later_requests(shared_broker):
    """A long-poll fetch parks the connection; the ApiVersions sent right after
    it must still be answered after the fetch (Kafka mutes the connection)."""
    broker = shared_broker
    topic = "parked"
    create_topic(broker.bootstrap, topic)
    with RawClient.connect(broker.bootstrap) as client:
        started = time.monotonic()
        client.send(encode_request(FETCH, 11, 1, fetch_body(topic, 0, 0, max_wait_ms=800, min_bytes=1))
                    + encode_request(API_VERSIONS, 0, 2)
                    + encode_request(METADATA, 8, 3, metadata_body([topic])))
        first = client.recv_frame(SETTLE_S)
        waited_s = time.monotonic() - started
        assert struct.unpack_from(">i", first)[0] == 1
        assert 0.6 <= waited_s < 5, waited_s  # the fetch really waited for max_wait
        assert struct.unpack_from(">i", client.recv_frame(SETTLE_S))[0] == 2
        assert struct.unpack_from(">i", client.recv_frame(SETTLE_S))[0] == 3


def test_acks_0_produce_gets_no_response_and_connection_continues(shared_broker):
    broker = shared_broker
    topic = "fire-and-forget"
    create_topic(broker.bootstrap, topic)
    with RawClient.connect(broker.bootstrap) as client:
        for i in range(5):
            client.send(encode_request(PRODUCE, 8, 100 + i, produce_body(topic, 0, batch([b"a0-%d" % i]), acks=0)))
        client.send(encode_request(API_VERSIONS, 0, 200))
        # The first frame back is the ApiVersions answer: no produce responses.
        assert struct.unpack_from(">i", client.recv_frame(SETTLE_S))[0] == 200
        # And the connection keeps working for acks=1 afterwards.
        client.send(encode_request(PRODUCE, 8, 300, produce_body(topic, 0, batch([b"a1"]), acks=1)))
        frame = client.recv_frame(SETTLE_S)
        assert struct.unpack_from(">i", frame)[0] == 300
        response, _ = decode(ProduceResponse, frame[4:], 0)
        part = response.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, 5)
    records, high_watermark = read_partition(broker.bootstrap, topic, 0)
    assert records == [(i, b"a0-%d" % i) for i in range(5)] + [(5, b"a1")]


# ----------------------------------------------------------------- shutdown with clients


SHUTDOWN_TIMEOUT_MS = 5000


@pytest.mark.broker_config({"kafkapy.shutdown.timeout.ms": SHUTDOWN_TIMEOUT_MS, "num.io.threads": 2,
                            "num.network.threads": 2})
def test_sigterm_with_clients_connected_exits_cleanly(broker, tmp_path):
    topic = "busy"
    create_topic(broker.bootstrap, topic)
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER_SCRIPT)
    acked_path = tmp_path / "acked.txt"
    producer = subprocess.Popen([sys.executable, str(script), broker.bootstrap, topic, str(acked_path),
                                 "busy", "1000000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    clients = []
    try:
        idle = RawClient.connect(broker.bootstrap)
        clients.append(idle)
        partial = RawClient.connect(broker.bootstrap)
        clients.append(partial)
        partial.send(struct.pack(">i", 500) + b"\0" * 20)  # a request that never completes
        parked = RawClient.connect(broker.bootstrap)
        clients.append(parked)
        parked.send(encode_request(FETCH, 11, 9, fetch_body("busy", 0, 10**9, max_wait_ms=30000, min_bytes=1)))
        unread = RawClient.connect(broker.bootstrap)
        clients.append(unread)
        for i in range(50):
            unread.send(encode_request(METADATA, 8, i, metadata_body([topic])))
        deadline = time.monotonic() + SETTLE_S
        # Stop mid-stream: once acknowledgements are flowing.
        while time.monotonic() < deadline and not (acked_path.exists() and acked_path.stat().st_size > 5000):
            time.sleep(0.05)
        started = time.monotonic()
        code = broker.stop(signal.SIGTERM, timeout=SHUTDOWN_TIMEOUT_MS / 1000 + 5)
        took_s = time.monotonic() - started
    finally:
        for client in clients:
            client.close()
        producer.terminate()
        producer.wait(30)
    assert code == 0, broker.log_tail()
    assert took_s < SHUTDOWN_TIMEOUT_MS / 1000 + 3, took_s  # its bound, plus flush and checkpoints
    assert (broker.log_dirs[0] / ".kafka_cleanshutdown").exists()
    assert "did not stop in time" not in broker.log_text()
    # Everything acknowledged before the stop is there after the restart.
    acked = [line.split(" ", 2) for line in acked_path.read_text().splitlines()
             if line and line[0].isdigit()]
    assert acked, "the producer got nothing acknowledged before the stop"
    broker.start()
    records = dict(read_partition(broker.bootstrap, topic, 0)[0])
    for _p, o, value in acked:
        assert records.get(int(o)) == value.encode()


@pytest.mark.parametrize("target", ["group", "processor", "handler"])
def test_sigterm_to_any_of_its_processes_is_the_ordered_shutdown(broker, target):
    """Operators' tools signal the supervisor alone or the whole process group
    (``kill -- -PGID``, a container runtime); either way, and a SIGTERM to one
    child too, the broker runs its one ordered shutdown (server/child_signals.py):
    every child stops when the supervisor says, the broker exits 0 and writes
    the clean-shutdown marker, and no child logs a crash or an early exit."""
    from support.broker import process_group_members

    create_topic(broker.bootstrap, "sig")
    started = time.monotonic()
    if target == "group":
        os.killpg(broker.pgid, signal.SIGTERM)
    else:
        name = {"processor": "kafkapy processor-0", "handler": "kafkapy handler-0"}[target]
        child = [pid for pid, _state, cmd in process_group_members(broker.pgid) if cmd == name]
        assert len(child) == 1, process_group_members(broker.pgid)
        os.kill(child[0], signal.SIGTERM)
    try:  # it stops by itself: no second signal
        broker.proc.wait(SHUTDOWN_TIMEOUT_MS / 1000 + 5)
    except subprocess.TimeoutExpired:
        pass
    took_s = time.monotonic() - started
    assert broker.stop() == 0, broker.log_tail()  # (reaps it; SIGKILLs and fails if it still runs)
    assert took_s < SHUTDOWN_TIMEOUT_MS / 1000 + 3, took_s
    assert (broker.log_dirs[0] / ".kafka_cleanshutdown").exists()
    text = broker.log_text()
    assert "died with exit code" not in text and "crashed" not in text, broker.log_tail(40)
    assert "shut down cleanly" in text


def test_a_test_process_that_dies_takes_its_broker_with_it(tmp_path):
    """The harness starts brokers with a parent-death signal
    (support.broker.dies_with_the_tests): a pytest SIGKILLed or crashed in
    the middle of a test leaves no broker process tree behind."""
    script = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from support.broker import BrokerProcess
        broker = BrokerProcess(Path({str(tmp_path / "b")!r})).start()
        print(broker.pgid, flush=True)
        time.sleep(120)
    """)
    # tests/ on the runner's path, as pytest's pythonpath puts it on ours.
    tests_dir = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (tests_dir, os.environ.get("PYTHONPATH")) if p))
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    pgid = None
    try:
        pgid = int(runner.stdout.readline())
        assert _group_alive(pgid)
        runner.kill()
        runner.wait(10)
        wait_for(lambda: not _group_alive(pgid), 20, "the broker to die with the process that started it", 0.1)
    finally:
        runner.kill()
        if pgid is not None and _group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
