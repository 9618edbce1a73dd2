"""Durability against the real broker process: clean restart, SIGKILL of the
broker and of one child, torn segment tails, retention and segment roll.

Shape of every test (Kafka's produce-consume-validate): produce with a real
client recording what was acknowledged, inject the fault, consume everything
back with an independent raw Fetch client, check acknowledged <= consumed at
the acknowledged offsets and that offsets stay contiguous.

The verifying consumer is deliberately not a Kafka client library: it sends
Fetch v11 / ListOffsets v5 with ``tests/support/rawclient.py`` and walks the
returned batches with ``records_py.decode_records``, so it sees exactly what
the broker returns (no client-side retries, resets or de-duplication).
"""

from __future__ import annotations

import collections
import datetime
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.list_offsets.v5.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.list_offsets.v5.response import ListOffsetsResponse

from kafkapy._core import batch_py, records_py
from kafkapy.protocol.codec import decode, encode_to_bytes
from support.rawclient import RawClient

FETCH, LIST_OFFSETS = 1, 2
EARLIEST, LATEST = -2, -1
OFFSET_OUT_OF_RANGE = 1

# Every wait below is bounded; this is the bound for "the broker should have
# done it by now" on a loaded 2-core machine (normal latency is milliseconds).
SETTLE_S = 15.0


# Fewer processes than the defaults (8 handlers, 3 processors): each test
# starts its own broker, and forking 12 children is most of a start-up on a
# shared 2-core box.  Tests about the process model set their own counts.
pytestmark = pytest.mark.broker_config({"num.io.threads": 2, "num.network.threads": 1})

# ----------------------------------------------------------------- helpers


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10)
    for future in futures.values():
        future.result(timeout=SETTLE_S)


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes]], **conf) -> list[tuple[int, int, bytes]]:
    """Produce ``(partition, value)`` records with acks=all; returns the
    acknowledged ``(partition, offset, value)`` and fails on any error."""
    settings = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    settings.update(conf)
    producer = confluent_kafka.Producer(settings)
    acked, errors = [], []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    for partition, value in records:
        producer.produce(topic, value=value, partition=partition, on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(SETTLE_S)
    assert remaining == 0 and not errors, f"{remaining} undelivered, errors {errors[:3]}"
    return acked


def fetch_once(client: RawClient, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20):
    """One Fetch v11 (no wait) -> the partition's PartitionData."""
    request = FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=max_bytes),)),),
        forgotten_topics_data=(), rack_id="")
    body = client.request(FETCH, 11, encode_to_bytes(request), timeout_s=SETTLE_S)
    response, _ = decode(FetchResponse, body, 0)
    return response.responses[0].partitions[0]


def batches_of(records) -> list[tuple[object, bytes]]:
    """Split a fetched records blob into ``(BatchHeader, batch bytes)``; asserts
    every whole batch is valid (a trailing partial batch is allowed, as in Kafka)."""
    buf = bytes(records or b"")
    headers, end, error = batch_py.scan_batches(buf)
    if error:
        # Only a truncated last batch is legitimate in a fetch response.
        assert end + batch_py.LOG_OVERHEAD > len(buf) or \
            end + batch_py.read_header(buf, end).batch_length + 12 > len(buf), \
            f"corrupt batch in fetch response at {end}: error {error}"
    return [(h, buf[h.position:h.position + h.batch_length + 12]) for h in headers]


def consume_all(bootstrap: str, topic: str, partition: int, start: int = 0,
                timeout_s: float = SETTLE_S) -> tuple[list[tuple[int, bytes]], int]:
    """Every record from ``start`` to the high watermark: ``([(offset, value)], high_watermark)``."""
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    offset = start
    with RawClient.connect(bootstrap, timeout_s=timeout_s) as client:
        while True:
            data = fetch_once(client, topic, partition, offset)
            assert data.error_code == 0, f"fetch {topic}-{partition}@{offset}: error {data.error_code}"
            high_watermark = data.high_watermark
            for header, raw in batches_of(data.records):
                for record_offset, _ts, _key, value, _headers in records_py.decode_records(raw):
                    if record_offset >= offset:
                        out.append((record_offset, value))
                offset = max(offset, header.base_offset + header.last_offset_delta + 1)
            if offset >= high_watermark:
                return out, high_watermark
            assert time.monotonic() < deadline, f"could not read {topic}-{partition} up to {high_watermark}"


def list_offset(bootstrap: str, topic: str, partition: int, timestamp: int) -> int:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
        name=topic, partitions=(ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                                     timestamp=timestamp),)),))
    with RawClient.connect(bootstrap, timeout_s=SETTLE_S) as client:
        body = client.request(LIST_OFFSETS, 5, encode_to_bytes(request), timeout_s=SETTLE_S)
    response, _ = decode(ListOffsetsResponse, body, 0)
    part = response.topics[0].partitions[0]
    assert part.error_code == 0, f"ListOffsets {topic}-{partition} {timestamp}: error {part.error_code}"
    return part.offset


def partition_dir(broker, topic: str, partition: int) -> Path:
    return broker.log_dirs[0] / f"{topic}-{partition}"


def segment_bases(path: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in path.iterdir() if p.name.endswith(".log") and p.name[:20].isdigit())


def wait_for(predicate, timeout_s: float = SETTLE_S, interval_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval_s)


def assert_acked_present(bootstrap, topic, partitions, acked):
    """acknowledged <= consumed at the acknowledged offsets; offsets contiguous from 0."""
    consumed = {}
    for p in range(partitions):
        records, high_watermark = consume_all(bootstrap, topic, p)
        offsets = [o for o, _ in records]
        assert offsets == list(range(high_watermark)), f"{topic}-{p}: offsets not contiguous 0..{high_watermark - 1}"
        consumed[p] = dict(records)
    for p, o, value in acked:
        assert consumed[p].get(o) == value, f"acknowledged {value!r} at {topic}-{p}@{o}, found {consumed[p].get(o)!r}"
    seen = {}
    for p, o, value in acked:
        assert (p, o) not in seen, f"offset {p}@{o} acknowledged twice ({seen[(p, o)]!r}, {value!r})"
        seen[(p, o)] = value
    return consumed


# ----------------------------------------------------------------- clean restart


def test_sigterm_restart_keeps_everything(broker):
    topic, partitions, n = "durable", 3, 600
    create_topic(broker.bootstrap, topic, partitions)
    acked = produce(broker.bootstrap, topic, [(i % partitions, b"rec-%05d" % i) for i in range(n)])
    assert len(acked) == n
    before = {p: consume_all(broker.bootstrap, topic, p) for p in range(partitions)}

    assert broker.stop() == 0
    assert (broker.log_dirs[0] / ".kafka_cleanshutdown").exists()
    log_size = len(broker.log_text())
    broker.start()
    restart_log = broker.log_text()[log_size:]
    assert "recover" not in restart_log.lower() and "truncat" not in restart_log.lower(), restart_log

    for p in range(partitions):
        records, high_watermark = consume_all(broker.bootstrap, topic, p)
        assert (records, high_watermark) == before[p]
        assert high_watermark == n // partitions
        assert list_offset(broker.bootstrap, topic, p, LATEST) == high_watermark
        assert list_offset(broker.bootstrap, topic, p, EARLIEST) == 0
    assert_acked_present(broker.bootstrap, topic, partitions, acked)

    more = produce(broker.bootstrap, topic, [(p, b"after-%d" % p) for p in range(partitions)])
    assert sorted((p, o) for p, o, _ in more) == [(p, n // partitions) for p in range(partitions)]


# ----------------------------------------------------------------- SIGKILL of the broker

# The producer runs as its own process so the broker's death cannot disturb
# the test's bookkeeping: it appends one line per acknowledged record to a
# file, flushed per line, and stops when the stop file appears (or after
# max_s, a safety bound).
PRODUCER_SCRIPT = textwrap.dedent("""
    import os, sys, time
    import confluent_kafka
    bootstrap, topic, partitions, acked_path, stop_path, prefix, idempotent = sys.argv[1:8]
    partitions = int(partitions)
    max_s, max_records = 60.0, 200_000
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
        "enable.idempotence": idempotent == "1",
        "message.timeout.ms": 45000, "retry.backoff.ms": 50, "retry.backoff.max.ms": 200,
        "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
        "queue.buffering.max.messages": 5000, "log_level": 2,
    })
    out = open(acked_path, "a", buffering=1)
    def on_delivery(err, msg):
        if err is None:
            out.write("%d %d %s\\n" % (msg.partition(), msg.offset(), msg.value().decode()))
        else:
            out.write("ERR %s %s\\n" % (msg.value().decode(), err))
    started = time.monotonic()
    i = 0
    while not os.path.exists(stop_path) and time.monotonic() - started < max_s and i < max_records:
        try:
            producer.produce(topic, value=("%s-%07d" % (prefix, i)).encode(), partition=i % partitions,
                             on_delivery=on_delivery)
            i += 1
        except BufferError:
            producer.poll(0.05)
            continue
        if i % 50 == 0:
            # About 10k records/s at most: enough to keep requests in flight
            # at the kill, small enough to verify quickly.
            producer.poll(0.005)
    left = producer.flush(30)
    out.write("DONE %d %d\\n" % (i, left))
    out.close()
""")


def _read_acked(path: Path) -> tuple[list[tuple[int, int, bytes]], list[str], str]:
    """What the producer child wrote, whole lines only: read while the child
    runs, the file may end inside a line it is writing (CI read "p o" with
    the value not yet there), which is taken on the next read."""
    acked, errors, done = [], [], ""
    text = path.read_text()
    for line in text[:text.rfind("\n") + 1].splitlines():
        if line.startswith("ERR "):
            errors.append(line)
        elif line.startswith("DONE "):
            done = line
        elif line:
            p, o, value = line.split(" ", 2)
            acked.append((int(p), int(o), value.encode()))
    return acked, errors, done


def _run_kill_cycles(broker, tmp_path, topic, partitions, delays_s, idempotent):
    create_topic(broker.bootstrap, topic, partitions)
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER_SCRIPT)
    all_acked = []
    for cycle, delay_s in enumerate(delays_s):
        acked_path = tmp_path / f"acked-{cycle}.txt"
        stop_path = tmp_path / f"stop-{cycle}"
        acked_path.touch()
        proc = subprocess.Popen(
            [sys.executable, str(script), broker.bootstrap, topic, str(partitions), str(acked_path),
             str(stop_path), f"c{cycle}", "1" if idempotent else "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # Kill only once acknowledgements are flowing, so the crash lands mid-stream.
            assert wait_for(lambda: acked_path.stat().st_size > 2000), "producer made no progress"
            time.sleep(delay_s)
            assert broker.kill() == -signal.SIGKILL
            acked_at_kill = len(_read_acked(acked_path)[0])
            broker.start()
            # Let the producer reconnect and carry on for a while after the restart.
            wait_for(lambda: len(_read_acked(acked_path)[0]) > acked_at_kill + 500, timeout_s=10)
            stop_path.touch()
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        acked, errors, done = _read_acked(acked_path)
        assert done, f"producer did not finish: {stderr.decode()[-2000:]}"
        assert len(acked) > acked_at_kill, "nothing acknowledged after the restart"
        all_acked.extend(acked)
        consumed = assert_acked_present(broker.bootstrap, topic, partitions, all_acked)
        if idempotent:
            # Retries of batches written before the crash must be de-duplicated
            # from the producer state the broker rebuilt from its log.
            for p, records in consumed.items():
                dups = [v for v, n in collections.Counter(records.values()).items() if n > 1]
                assert not dups, f"{topic}-{p}: duplicated records {sorted(dups)[:5]}"
    # Offsets continue after the last restart.
    more = produce(broker.bootstrap, topic, [(0, b"final")])
    assert more[0][1] == consume_all(broker.bootstrap, topic, 0)[1] - 1


@pytest.mark.broker_config({"num.io.threads": 2, "num.network.threads": 2})
def test_sigkill_during_acks_all_production(broker, tmp_path):
    _run_kill_cycles(broker, tmp_path, "crashy", 3, delays_s=(0.2, 0.9, 1.6), idempotent=False)


@pytest.mark.broker_config({"num.io.threads": 2, "num.network.threads": 2})
def test_sigkill_during_idempotent_production(broker, tmp_path):
    _run_kill_cycles(broker, tmp_path, "crashy-idem", 2, delays_s=(0.5, 1.2), idempotent=True)


# ----------------------------------------------------------------- SIGKILL of one child


def children_of(pid: int) -> list[int]:
    pids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            pids += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return sorted(pids)


# The supervisor's bound for stopping the surviving children.
SHUTDOWN_S = 5


@pytest.mark.broker_config({"num.io.threads": 2, "num.network.threads": 2,
                            "kafkapy.shutdown.timeout.ms": SHUTDOWN_S * 1000})
def test_sigkill_of_a_handler_worker_stops_the_broker(broker):
    topic = "halfalive"
    create_topic(broker.bootstrap, topic, 2)
    acked = produce(broker.bootstrap, topic, [(i % 2, b"v%d" % i) for i in range(200)])
    # The supervisor forks processor-0..1, then handler-0..1, then the rest
    # (coordinator, acceptor; supervisor.run), so in pid order the third child
    # is handler-0; the log line checked below confirms the name.
    children = children_of(broker.pid)
    assert len(children) >= 2 + 2 + 1, children
    victim = children[2]
    os.kill(victim, signal.SIGKILL)
    try:
        broker.proc.wait(SHUTDOWN_S + 5)
    except subprocess.TimeoutExpired:
        pytest.fail(f"broker kept running {SHUTDOWN_S + 5} s after handler pid {victim} was killed:\n"
                    f"{broker.log_tail()}")
    assert broker.proc.returncode not in (0, None)
    log = broker.log_text()
    assert f"handler-0 (pid {victim}) died with exit code -9" in log, log[-3000:]
    assert not (broker.log_dirs[0] / ".kafka_cleanshutdown").exists()
    broker.stop()  # reap the group
    broker.start()
    assert_acked_present(broker.bootstrap, topic, 2, acked)
    assert produce(broker.bootstrap, topic, [(0, b"next")])[0][1] == 100


@pytest.mark.broker_config({"num.io.threads": 2, "num.network.threads": 2,
                            "kafkapy.shutdown.timeout.ms": SHUTDOWN_S * 1000})
def test_sigkill_of_a_processor_stops_the_broker(broker):
    children = children_of(broker.pid)
    victim = children[0]  # processor-0
    os.kill(victim, signal.SIGKILL)
    try:
        broker.proc.wait(SHUTDOWN_S + 5)
    except subprocess.TimeoutExpired:
        pytest.fail(f"broker kept running {SHUTDOWN_S + 5} s after processor pid {victim} was killed")
    assert broker.proc.returncode not in (0, None)
    assert f"processor-0 (pid {victim}) died with exit code -9" in broker.log_text()


# ----------------------------------------------------------------- torn tail


def _valid_batch(base_offset: int, n: int) -> bytes:
    now_ms = int(time.time() * 1000)
    return records_py.build_batch([(None, b"torn-%d" % i, [], now_ms) for i in range(n)],
                                  base_offset=base_offset, partition_leader_epoch=0)


def _flip(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0xFF]) + data[position + 1:]


@pytest.mark.parametrize("tail", ["partial-header", "partial-records", "bad-crc", "zeros"])
@pytest.mark.parametrize("how", ["sigkill", "sigterm-marker-removed"])
@pytest.mark.broker_config({"num.io.threads": 1, "num.network.threads": 1})
def test_torn_tail_is_truncated_on_recovery(broker, tail, how):
    topic, n = "torn", 50
    create_topic(broker.bootstrap, topic, 1)
    acked = produce(broker.bootstrap, topic, [(0, b"ok-%d" % i) for i in range(n)])
    if how == "sigkill":
        broker.kill()
    else:
        assert broker.stop() == 0
        # Removing the marker makes the restart equivalent to one after a crash.
        (broker.log_dirs[0] / ".kafka_cleanshutdown").unlink()
    segment = partition_dir(broker, topic, 0) / f"{0:020d}.log"
    good_size = segment.stat().st_size
    batch = _valid_batch(n, 5)
    garbage = {
        "partial-header": batch[:30],
        "partial-records": batch[:len(batch) - 7],
        "bad-crc": _flip(batch, len(batch) - 3),
        "zeros": b"\0" * 200,
    }[tail]
    with open(segment, "ab") as f:
        f.write(garbage)
    log_size = len(broker.log_text())
    broker.start()
    restart_log = broker.log_text()[log_size:]
    assert "truncated" in restart_log and str(len(garbage)) in restart_log, restart_log
    assert segment.stat().st_size == good_size
    records, high_watermark = consume_all(broker.bootstrap, topic, 0)
    assert high_watermark == n
    assert records == [(o, v) for _, o, v in acked]
    more = produce(broker.bootstrap, topic, [(0, b"next-%d" % i) for i in range(3)])
    assert [o for _, o, _ in more] == [n, n + 1, n + 2]
    records, high_watermark = consume_all(broker.bootstrap, topic, 0)
    assert high_watermark == n + 3 and records[-1] == (n + 2, b"next-2")


# ----------------------------------------------------------------- retention and roll


def _produce_one_per_batch(bootstrap, topic, count, size, partition=0, timestamp_ms=0):
    """``count`` records of ``size`` bytes, each in its own batch (linger 0, one in flight)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                                         "max.in.flight.requests.per.connection": 1,
                                         "batch.num.messages": 1})
    acked = []
    for i in range(count):
        producer.produce(topic, value=(b"%06d" % i).ljust(size, b"x"), partition=partition, timestamp=timestamp_ms,
                         on_delivery=lambda err, msg: acked.append((err, msg.offset())))
        producer.flush(SETTLE_S)
    assert [e for e, _ in acked if e is not None] == []
    return [o for _, o in acked]


@pytest.mark.broker_config({"log.retention.check.interval.ms": 500})
def test_time_retention_deletes_old_segments(broker):
    topic = "short-lived"
    create_topic(broker.bootstrap, topic, 1, {"retention.ms": "600000", "segment.bytes": "1024",
                                              "file.delete.delay.ms": "0"})
    # Records stamped an hour ago are past retention.ms (10 min) at once;
    # the 10 stamped now keep the segments holding them.
    hour_ago_ms = int(time.time() * 1000) - 3600_000
    offsets = _produce_one_per_batch(broker.bootstrap, topic, 30, 200, timestamp_ms=hour_ago_ms)
    offsets += _produce_one_per_batch(broker.bootstrap, topic, 10, 200)
    assert offsets == list(range(40))
    path = partition_dir(broker, topic, 0)
    # The check runs every 0.5 s; segments whose newest record is old go.
    start = wait_for(lambda: list_offset(broker.bootstrap, topic, 0, EARLIEST) or None)
    assert start, f"log start offset still 0; segments {segment_bases(path)}\n{broker.log_tail()}"
    assert 0 < start <= 30
    assert wait_for(lambda: segment_bases(path)[0] == start), (start, segment_bases(path))
    assert list_offset(broker.bootstrap, topic, 0, LATEST) == 40
    records, high_watermark = consume_all(broker.bootstrap, topic, 0, start)
    assert [o for o, _ in records] == list(range(start, 40))

    with RawClient.connect(broker.bootstrap) as client:
        data = fetch_once(client, topic, 0, 0)
        assert data.error_code == OFFSET_OUT_OF_RANGE
        assert data.log_start_offset == start
    _check_auto_offset_reset(broker.bootstrap, topic, start, 40)


def _check_auto_offset_reset(bootstrap, topic, log_start_offset, log_end_offset):
    """kafka-python without a group: a position below the log start offset is
    reset by auto_offset_reset=earliest to the log start offset."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=3000,
                             request_timeout_ms=10000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = []
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline and (not got or got[-1] < log_end_offset - 1):
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.offset for r in records]
        assert got and got[0] == log_start_offset and got == list(range(log_start_offset, log_end_offset))
    finally:
        consumer.close()


@pytest.mark.broker_config({"log.retention.check.interval.ms": 500})
def test_size_retention_deletes_oldest_segments(broker):
    topic = "bounded"
    create_topic(broker.bootstrap, topic, 1, {"retention.bytes": "2048", "segment.bytes": "1024",
                                              "file.delete.delay.ms": "0"})
    _produce_one_per_batch(broker.bootstrap, topic, 40, 200)
    path = partition_dir(broker, topic, 0)

    def size_ok():
        total = sum((path / f"{b:020d}.log").stat().st_size for b in segment_bases(path))
        return total <= 2048 + 1024 and list_offset(broker.bootstrap, topic, 0, EARLIEST) > 0

    assert wait_for(size_ok), f"segments {segment_bases(path)}\n{broker.log_tail()}"
    start = list_offset(broker.bootstrap, topic, 0, EARLIEST)
    assert start == segment_bases(path)[0]
    records, high_watermark = consume_all(broker.bootstrap, topic, 0, start)
    assert high_watermark == 40 and [o for o, _ in records] == list(range(start, 40))
    with RawClient.connect(broker.bootstrap) as client:
        assert fetch_once(client, topic, 0, start - 1).error_code == OFFSET_OUT_OF_RANGE
        assert fetch_once(client, topic, 0, 41).error_code == OFFSET_OUT_OF_RANGE
    # Retention survives a restart: the log start offset is checkpointed.
    assert broker.stop() == 0
    broker.start()
    assert list_offset(broker.bootstrap, topic, 0, EARLIEST) == start


def test_segment_roll_names_and_base_offsets(broker):
    topic = "rolling"
    create_topic(broker.bootstrap, topic, 1, {"segment.bytes": "1024"})
    offsets = _produce_one_per_batch(broker.bootstrap, topic, 25, 300)
    assert offsets == list(range(25))
    path = partition_dir(broker, topic, 0)
    bases = segment_bases(path)
    assert len(bases) >= 5 and bases[0] == 0, bases
    names = {p.name for p in path.iterdir()}
    for base in bases:
        for suffix in (".log", ".index", ".timeindex"):
            assert f"{base:020d}{suffix}" in names
        data = (path / f"{base:020d}.log").read_bytes()
        headers, end, error = batch_py.scan_batches(data)
        assert error == 0 and end == len(data)
        assert headers and headers[0].base_offset == base
        # A segment rolls before a batch would take it over segment.bytes (unless it is its first batch).
        assert len(data) <= 1024 or len(headers) == 1
    # Each segment starts where the previous one ended.
    for prev, nxt in zip(bases, bases[1:]):
        data = (path / f"{prev:020d}.log").read_bytes()
        last = batch_py.scan_batches(data)[0][-1]
        assert last.base_offset + last.last_offset_delta + 1 == nxt
    records, high_watermark = consume_all(broker.bootstrap, topic, 0)
    assert high_watermark == 25 and [o for o, _ in records] == list(range(25))
