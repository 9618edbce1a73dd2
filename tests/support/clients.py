"""Helpers for integration tests that drive real Kafka clients against kafkapy.

Every client is normalised to the same two shapes so one checker serves them
all: a test describes what it produces as a list of ``Rec`` and each consumer
helper returns a list of ``Got``.  Consumers always use manual assignment (no
group): kafkapy has no group coordinator yet, and assignment from offset 0 is
what lets the tests assert offsets exactly.

Every wait is bounded in time (``timeout_s``) and every poll loop also in
iterations, so a broker that never answers fails a test instead of hanging it.

Ownership: the helpers own the client objects and subprocesses they create and
close them before returning; a ``module_broker`` owns its ``BrokerProcess``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from .broker import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# Kafka's compression ids in bits 0-2 of a v2 batch's attributes.
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CREATE_TIME, LOG_APPEND_TIME = "create", "log_append"

# Per-call bound for client work.  A few hundred records take well under a
# second end to end on this 2-core box; 30 s leaves room for a loaded CI run.
DEFAULT_TIMEOUT_S = 30.0
# One poll waits at most this long, so a loop of polls notices its deadline.
POLL_S = 0.5
# Client work is also bounded in iterations: deadline / POLL_S plus slack for
# polls that return early.
MAX_POLLS = 2000

KCAT = "/usr/bin/kcat"


# -- brokers -----------------------------------------------------------------------

@contextlib.contextmanager
def module_broker(tmp_path_factory, overrides=None, *, name: str = "broker", port=None,
                  before_start=None, **kwargs):
    """A broker shared by one test module (the module-scope form; ``broker`` and
    ``broker_factory`` are the per-test one), in ``tmp_path_factory.mktemp(name)``;
    ``port`` and ``kwargs`` (``command=``, ``env=``, ...) go to ``BrokerProcess``,
    ``before_start(broker)`` runs before it starts (e.g. to write SCRAM
    credentials into its log dir). Teardown fails if a child outlived it or the
    shutdown was unclean."""
    broker = BrokerProcess(tmp_path_factory.mktemp(name), overrides=overrides, port=port, **kwargs)
    if before_start is not None:
        before_start(broker)
    broker.start()
    try:
        yield broker
    finally:
        broker.close()
        assert not broker.leaked, f"broker processes outlived the module: {broker.leaked}"
        # A SIGTERM after the clients closed must be a clean shutdown (exit 0,
        # no child killed for overrunning kafkapy.shutdown.timeout.ms).
        assert broker.proc.returncode == 0 and "did not stop in time" not in broker.log_text(), \
            f"unclean shutdown (exit {broker.proc.returncode}); log tail:\n{broker.log_tail(30)}"


# -- records -----------------------------------------------------------------------

@dataclass(frozen=True)
class Rec:
    """A record as a test produces it (timestamp_ms None: the client picks)."""
    partition: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: tuple = ()  # ((name: str, value: bytes | None), ...)
    timestamp_ms: Optional[int] = None


@dataclass(frozen=True)
class Got:
    """A record as a consumer returned it, normalised across clients."""
    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: tuple
    timestamp_type: str
    timestamp_ms: int


def make_records(n: int, partitions: int, *, seed: int = 0, text: bool = False,
                 null_header_values: bool = True, base_timestamp_ms: Optional[int] = None) -> list[Rec]:
    """``n`` records spread round-robin over ``partitions`` with every edge case a
    record can have: null key (every 10th), empty key, empty value (every 13th),
    duplicate header names, empty and (optionally) null header values, binary
    bytes (unless ``text``) and sizes from 0 to ~3 KB so compressed batches hold
    both compressible and incompressible data.  Timestamps are distinct and
    recent (an hour-old base would be fine too; days old would meet retention)."""
    rng = random.Random(seed)
    if base_timestamp_ms is None:
        base_timestamp_ms = int(time.time() * 1000) - 60_000
    records = []
    for i in range(n):
        if i % 10 == 0:
            key = None
        elif i % 10 == 5:
            key = b""
        elif text:
            key = f"key-{i}".encode()
        else:
            key = f"key-{i}-".encode() + bytes(rng.randrange(256) for _ in range(rng.randrange(8)))
        if i % 13 == 0 and not (text and key is None):
            # (kcat skips empty lines: a text record needs a key or a value.)
            value = b""
        elif text:
            value = (f"value {i} " + "abcdefgh" * rng.randrange(200)).encode()
        elif i % 4 == 1:
            # Incompressible, on every partition: a partition holding only
            # random bytes would make librdkafka send its batches uncompressed
            # (it does when compression does not shrink the batch).
            value = rng.randbytes(rng.randrange(1, 3000))
        else:
            value = (f"value-{i}|" * rng.randrange(1, 150)).encode()
        headers = [("idx", str(i).encode()), ("dup", b"1"), ("dup", b"2"), ("empty", b"")]
        if null_header_values:
            headers.append(("null", None))
        if i % 7 == 0:
            headers = []
        records.append(Rec(i % partitions, key, value, tuple(headers), base_timestamp_ms + i))
    return records


def by_partition(items) -> dict[int, list]:
    out: dict[int, list] = {}
    for item in items:
        out.setdefault(item.partition, []).append(item)
    return out


def counts(records: Iterable[Rec]) -> dict[int, int]:
    return {p: len(rs) for p, rs in by_partition(records).items()}


def check_consumed(expected: list[Rec], got: list[Got], *, check_timestamps: bool = True,
                   timestamp_range_ms: Optional[tuple[int, int]] = None,
                   timestamp_type: str = CREATE_TIME, check_headers: bool = True) -> None:
    """Per partition: offsets 0..n-1 in order, and record i equal to what was
    produced i-th to that partition (key, value, headers, timestamp)."""
    want = by_partition(expected)
    have = by_partition(got)
    assert sorted(have) == sorted(want), f"partitions consumed {sorted(have)}, produced {sorted(want)}"
    for partition, recs in want.items():
        gots = have[partition]
        offsets = [g.offset for g in gots]
        assert offsets == list(range(len(recs))), \
            f"partition {partition}: offsets {offsets[:10]}... (n={len(offsets)}), want 0..{len(recs) - 1}"
        for i, (r, g) in enumerate(zip(recs, gots)):
            where = f"partition {partition} offset {i}"
            assert g.key == r.key, f"{where}: key {g.key!r}, produced {r.key!r}"
            assert g.value == r.value, f"{where}: value {g.value[:40]!r}..., produced {r.value[:40]!r}..."
            if check_headers:
                assert tuple(g.headers) == tuple(r.headers), f"{where}: headers {g.headers}, produced {r.headers}"
            assert g.timestamp_type == timestamp_type, f"{where}: timestamp type {g.timestamp_type}"
            if check_timestamps and r.timestamp_ms is not None:
                assert g.timestamp_ms == r.timestamp_ms, f"{where}: timestamp {g.timestamp_ms}, produced {r.timestamp_ms}"
            if timestamp_range_ms is not None:
                lo, hi = timestamp_range_ms
                assert lo <= g.timestamp_ms <= hi, f"{where}: timestamp {g.timestamp_ms} outside [{lo}, {hi}]"


def _norm_headers(headers) -> tuple:
    return tuple((k, None if v is None else bytes(v)) for k, v in (headers or ()))


# -- on-disk check -----------------------------------------------------------------

def batch_codecs(broker: BrokerProcess, topic: str, partition: int) -> list[int]:
    """The compression id of every batch in a partition's segment files, read
    straight from disk (v2 batch: baseOffset i64, batchLength i32, ..., attributes
    i16 at byte 21) so a client that silently fell back to no compression fails."""
    directory = broker.log_dirs[0] / f"{topic}-{partition}"
    codecs = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + 61 <= len(data):
            (batch_length,) = struct.unpack_from(">i", data, position + 8)
            if batch_length <= 0:
                break  # preallocated tail
            (attributes,) = struct.unpack_from(">h", data, position + 21)
            codecs.append(attributes & 7)
            position += 12 + batch_length
    return codecs


# -- admin (confluent) ---------------------------------------------------------------

def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: Optional[dict] = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    from confluent_kafka.admin import NewTopic

    # Keep the client referenced until the future resolves: a collected
    # AdminClient fails its pending futures with _DESTROY.
    client = admin(bootstrap)
    futures = client.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                   request_timeout=timeout_s)
    futures[name].result(timeout_s)


def topic_partition_counts(bootstrap: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, int]:
    client = admin(bootstrap)
    md = client.list_topics(timeout=timeout_s)
    return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}


# -- confluent-kafka ---------------------------------------------------------------

def produce_confluent(bootstrap: str, topic: str, records: list[Rec], *,
                      timeout_s: float = DEFAULT_TIMEOUT_S, **conf) -> list:
    """Produce and flush; returns the delivery reports' (error, partition, offset)
    in produce order.  ``conf`` keys use underscores for dots."""
    from confluent_kafka import Producer

    config = {"bootstrap.servers": bootstrap, "linger.ms": 20}
    config.update({k.replace("_", "."): v for k, v in conf.items()})
    producer = Producer(config)
    reports: list = [None] * len(records)

    def on_delivery(i):
        def cb(err, msg):
            reports[i] = (err, msg.partition(), msg.offset())
        return cb

    for i, r in enumerate(records):
        kwargs = {"value": r.value, "key": r.key, "partition": r.partition,
                  "on_delivery": on_delivery(i)}
        if r.headers:
            kwargs["headers"] = list(r.headers)
        if r.timestamp_ms is not None:
            kwargs["timestamp"] = r.timestamp_ms
        for _ in range(100):  # queue full: serve callbacks and retry, bounded
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(timeout_s)
    assert remaining == 0, f"{remaining} records not delivered within {timeout_s} s"
    return reports


def assert_delivered(reports: list) -> None:
    errors = [r[0] for r in reports if r is None or r[0] is not None]
    assert not errors, f"{len(errors)} delivery errors, first: {errors[0]}"


def confluent_consumer(bootstrap: str, **conf):
    from confluent_kafka import Consumer

    # librdkafka insists on a group.id even for assign(); nothing is committed.
    config = {"bootstrap.servers": bootstrap, "group.id": "kafkapy-itest-assign",
              "enable.auto.commit": False, "enable.auto.offset.store": False}
    config.update({k.replace("_", "."): v for k, v in conf.items()})
    return Consumer(config)


def _got_confluent(msg) -> Got:
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    ts_type, ts = msg.timestamp()
    return Got(msg.partition(), msg.offset(), msg.key(), msg.value(), _norm_headers(msg.headers()),
               LOG_APPEND_TIME if ts_type == TIMESTAMP_LOG_APPEND_TIME else CREATE_TIME, ts)


def consume_confluent(bootstrap: str, topic: str, want: dict[int, int], *, start_offset: int = 0,
                      timeout_s: float = DEFAULT_TIMEOUT_S, **conf) -> list[Got]:
    """Assign ``want``'s partitions from ``start_offset`` and read until each has
    its count (or the deadline)."""
    from confluent_kafka import TopicPartition

    consumer = confluent_consumer(bootstrap, **conf)
    try:
        consumer.assign([TopicPartition(topic, p, start_offset) for p in want])
        got: list[Got] = []
        total = sum(want.values())
        deadline = time.monotonic() + timeout_s
        for _ in range(MAX_POLLS):
            if len(got) >= total or time.monotonic() > deadline:
                break
            for msg in consumer.consume(500, POLL_S):
                assert not msg.error(), f"consumer error: {msg.error()}"
                got.append(_got_confluent(msg))
        return got
    finally:
        consumer.close()


# -- kafka-python ---------------------------------------------------------------------

def produce_kafka_python(bootstrap: str, topic: str, records: list[Rec], *,
                         timeout_s: float = DEFAULT_TIMEOUT_S, **conf) -> list:
    """Produce and wait for every future; returns the RecordMetadata in order."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, **conf)
    try:
        futures = [producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                 headers=list(r.headers) or None, timestamp_ms=r.timestamp_ms)
                   for r in records]
        producer.flush(timeout_s)
        return [f.get(timeout_s) for f in futures]
    finally:
        producer.close(timeout=timeout_s)


def consume_kafka_python(bootstrap: str, topic: str, want: dict[int, int], *, start_offset: int = 0,
                         timeout_s: float = DEFAULT_TIMEOUT_S, **conf) -> list[Got]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **conf)
    try:
        tps = [TopicPartition(topic, p) for p in want]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, start_offset)
        got: list[Got] = []
        total = sum(want.values())
        deadline = time.monotonic() + timeout_s
        for _ in range(MAX_POLLS):
            if len(got) >= total or time.monotonic() > deadline:
                break
            for tp, msgs in consumer.poll(int(POLL_S * 1000)).items():
                for m in msgs:
                    got.append(Got(m.partition, m.offset, m.key, m.value, _norm_headers(m.headers),
                                   LOG_APPEND_TIME if m.timestamp_type == 1 else CREATE_TIME, m.timestamp))
        return got
    finally:
        consumer.close()


# -- aiokafka -----------------------------------------------------------------------

def produce_aiokafka(bootstrap: str, topic: str, records: list[Rec], *,
                     timeout_s: float = DEFAULT_TIMEOUT_S, **conf) -> list:
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, **conf)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                           headers=list(r.headers) or None, timestamp_ms=r.timestamp_ms)
                       for r in records]
            return await asyncio.wait_for(asyncio.gather(*futures), timeout_s)
        finally:
            await producer.stop()

    return asyncio.run(run())


def consume_aiokafka(bootstrap: str, topic: str, want: dict[int, int], *, start_offset: int = 0,
                     timeout_s: float = DEFAULT_TIMEOUT_S, **conf) -> list[Got]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **conf)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in want]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, start_offset)
            got: list[Got] = []
            total = sum(want.values())
            deadline = time.monotonic() + timeout_s
            for _ in range(MAX_POLLS):
                if len(got) >= total or time.monotonic() > deadline:
                    break
                for tp, msgs in (await consumer.getmany(timeout_ms=int(POLL_S * 1000))).items():
                    for m in msgs:
                        got.append(Got(m.partition, m.offset, m.key, m.value, _norm_headers(m.headers),
                                       LOG_APPEND_TIME if m.timestamp_type == 1 else CREATE_TIME,
                                       m.timestamp))
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


# -- kcat ---------------------------------------------------------------------------

def produce_kcat(bootstrap: str, topic: str, records: list[Rec], *, codec: str = "none",
                 headers: tuple = (), timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Produce text records with kcat, one kcat run per partition (``-p``).

    kcat reads one record per line and splits key from value at the first
    ``\\t`` (``-K``): a line without a tab has a null key.  ``-H`` headers apply
    to every record of a run, so ``headers`` (name, text value) are per call
    and each Rec's own headers and timestamp are ignored."""
    for partition, recs in sorted(by_partition(records).items()):
        lines = []
        for r in recs:
            assert r.value is not None and b"\n" not in r.value and b"\t" not in r.value
            lines.append(r.value if r.key is None else r.key + b"\t" + r.value)
        argv = [KCAT, "-P", "-b", bootstrap, "-t", topic, "-p", str(partition), "-K", "\t",
                "-z", codec, "-X", "linger.ms=20"]
        for name, value in headers:
            argv += ["-H", f"{name}={value}"]
        proc = subprocess.run(argv, input=b"\n".join(lines) + b"\n", capture_output=True,
                              timeout=timeout_s)
        assert proc.returncode == 0, f"kcat -P failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}"


def consume_kcat(bootstrap: str, topic: str, want: dict[int, int], *,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Got]:
    """Consume each partition from the beginning to its end (``-e``) as JSON
    envelopes (text keys/values only)."""
    got: list[Got] = []
    for partition in sorted(want):
        argv = [KCAT, "-C", "-b", bootstrap, "-t", topic, "-p", str(partition), "-o", "beginning",
                "-e", "-J", "-c", str(want[partition])]
        proc = subprocess.run(argv, capture_output=True, timeout=timeout_s)
        assert proc.returncode == 0, f"kcat -C failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}"
        for line in proc.stdout.decode().splitlines():
            if not line.strip():
                continue
            m = json.loads(line)
            flat = m.get("headers") or []
            headers = tuple((flat[i], None if flat[i + 1] is None else flat[i + 1].encode())
                            for i in range(0, len(flat), 2))
            got.append(Got(m["partition"], m["offset"],
                           None if m["key"] is None else m["key"].encode(),
                           None if m["payload"] is None else m["payload"].encode(),
                           headers, LOG_APPEND_TIME if m["tstype"] == "logappend" else CREATE_TIME,
                           m["ts"]))
    return got


def now_ms() -> int:
    return int(time.time() * 1000)


def log_dir(broker: BrokerProcess, topic: str, partition: int) -> Path:
    return broker.log_dirs[0] / f"{topic}-{partition}"
