"""Load generators for the suite, each run as a child process.

Run as ``_loadgens.py KIND '<json args>'``. Protocol with the driver (the
same as bench_broker's): the child connects, prints ``READY``, waits for a
line on stdin, runs its bounded timed loop and prints one JSON line. So
interpreter start-up and connection set-up stay out of the timed window and
out of the broker CPU sample.

Kinds:

* ``small``: the small-request test. One TCP connection, raw Kafka protocol,
  a Produce v8 request holding one batch of one 100-byte record, acks=1,
  encoded once with kafkapy's codec (kio's ProduceRequest) and
  ``records_py.build_batch``; only the correlation id is patched per request.
  ``inflight`` requests are kept outstanding (1 = strict request/response,
  the latency figure; 5 = librdkafka's max.in.flight default). A raw client
  costs a few microseconds per request, so the figure is the broker's.
* ``conns``: the same request over N connections from one process
  (``selectors``), one outstanding request per connection, for a fixed time.
* ``e2e_produce`` / ``e2e_consume``: end-to-end latency at a fixed rate. The
  producer (confluent-kafka, linger.ms=1, max.in.flight 5, acks=1) writes
  ``time.monotonic_ns()`` into the first 8 bytes of each value (CLOCK_MONOTONIC
  is one clock for every process on the host); the consumer subtracts it from
  its own clock on receipt and reports percentiles overall and per second.
  Both also report what tells client-side queueing from broker latency: the
  producer's produce()-to-acknowledgement percentiles, each side's CPU
  seconds (3 processes share 2 cores with the broker) and librdkafka's
  statistics (request rtt, time in the partition queue, time in the output
  buffer). ``producer_conf`` / ``consumer_conf`` in the args override
  client settings (for experiments; the suite passes none).
* ``kproduce``: kafkapy's own producer (``kafkapy.client.KafkaProducer``), if
  that module exists.

Every loop is bounded by a count and by ``timeout_s``.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import struct
import sys
import time

_SIZE = struct.Struct(">i")
_CORR = struct.Struct(">i")


def _wait_go() -> None:
    print("READY", flush=True)
    sys.stdin.readline()


def percentiles(samples_us: list[float]) -> dict:
    if not samples_us:
        return {"count": 0}
    s = sorted(samples_us)
    n = len(s)

    def pct(q):
        return round(s[min(n - 1, int(q * n))], 1)

    return {"count": n, "p50_us": pct(0.50), "p99_us": pct(0.99),
            "p999_us": pct(0.999), "max_us": round(s[-1], 1),
            "mean_us": round(sum(s) / n, 1)}


# ------------------------------------------------------------ raw produce

def produce_request(topic: str, partition: int, record_size: int,
                    acks: int = 1) -> bytes:
    """A size-prefixed Produce v8 request (header v1) with one record."""
    from kio.schema.produce.v8.request import (PartitionProduceData,
                                               ProduceRequest, TopicProduceData)
    from kafkapy._core.records_py import build_batch
    from kafkapy.protocol.codec import encode_to_bytes

    value = b"v" * record_size
    batch = build_batch([(None, value, [], int(time.time() * 1000))])
    body = encode_to_bytes(ProduceRequest(
        transactional_id=None, acks=acks,
        timeout=__import__("datetime").timedelta(milliseconds=30000),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=partition, records=batch),)),)))
    client_id = b"perf-small"
    # Header v1: api_key 0, api_version 8, correlation_id, client_id.
    header = struct.pack(">hhih", 0, 8, 0, len(client_id)) + client_id
    msg = header + body
    return _SIZE.pack(len(msg)) + msg


def _produce_errors(frame: bytes) -> int:
    """Partitions answered with an error in a Produce v8 response frame
    (correlation id first), every topic and partition read: a broker that
    fails some partitions of a request cannot post a good figure."""
    pos = 4
    bad = 0
    (topics,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + max(name_len, 0)
        (parts,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        for _ in range(parts):
            # index i32, error i16, base_offset i64, log_append_time i64,
            # log_start_offset i64, record_errors [batch_index i32, message
            # nullable string], error_message nullable string
            (error,) = struct.unpack_from(">h", frame, pos + 4)
            bad += error != 0
            pos += 4 + 2 + 8 + 8 + 8
            (n,) = struct.unpack_from(">i", frame, pos)
            pos += 4
            for _ in range(max(n, 0)):
                (m,) = struct.unpack_from(">h", frame, pos + 4)
                pos += 4 + 2 + max(m, 0)
            (m,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + max(m, 0)
    return bad


class _Conn:
    """One connection's framing state; owned by the generator's loop."""

    def __init__(self, sock: socket.socket, request: bytes):
        self.sock = sock
        self.request = bytearray(request)
        self.rbuf = bytearray()
        self.sent_at: dict[int, int] = {}
        self.next_corr = 0

    def send(self) -> None:
        corr = self.next_corr
        self.next_corr += 1
        _CORR.pack_into(self.request, 4 + 4, corr)
        self.sent_at[corr] = time.perf_counter_ns()
        self.sock.sendall(self.request)

    def responses(self, data: bytes):
        """Yield (correlation_id, latency_ns, partitions answered with an error) for complete frames."""
        self.rbuf += data
        now = time.perf_counter_ns()
        while len(self.rbuf) >= 4:
            (size,) = _SIZE.unpack_from(self.rbuf, 0)
            if len(self.rbuf) < 4 + size:
                break
            frame = bytes(self.rbuf[4:4 + size])
            del self.rbuf[:4 + size]
            (corr,) = _CORR.unpack_from(frame, 0)
            started = self.sent_at.pop(corr, now)
            yield corr, now - started, _produce_errors(frame)


def _connect(host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def gen_small(args: dict) -> dict:
    host, port = args["bootstrap"].split(":")
    request = produce_request(args["topic"], 0, args["record_size"])
    conn = _Conn(_connect(host, int(port)), request)
    count, inflight = args["requests"], args["inflight"]
    # Warm-up outside the timed window: the first requests pay for log
    # opening and any lazy imports in the broker.
    for _ in range(20):
        conn.send()
        while conn.sent_at:
            list(conn.responses(conn.sock.recv(65536)))
    _wait_go()
    lat_us: list[float] = []
    errors = 0
    done = 0
    deadline = time.monotonic() + args["timeout_s"]
    start = time.perf_counter()
    while done < count and time.monotonic() < deadline:
        while len(conn.sent_at) < inflight and done + len(conn.sent_at) < count:
            conn.send()
        data = conn.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("broker closed the connection")
        for _corr, ns, err in conn.responses(data):
            done += 1
            lat_us.append(ns / 1000)
            errors += err != 0
    wall_s = time.perf_counter() - start
    conn.sock.close()
    return {"wall_s": wall_s, "requests": done, "errors": errors,
            "requests_per_s": round(done / wall_s, 1),
            "latency": percentiles(lat_us), "timed_out": done < count}


def gen_conns(args: dict) -> dict:
    import resource

    n = args["connections"]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 256), hard))
    host, port = args["bootstrap"].split(":")
    request = produce_request(args["topic"], 0, args["record_size"])
    sel = selectors.DefaultSelector()
    conns = []
    for _ in range(n):
        c = _Conn(_connect(host, int(port)), request)
        c.sock.setblocking(False)
        sel.register(c.sock, selectors.EVENT_READ, c)
        conns.append(c)
    _wait_go()
    lat_us: list[float] = []
    errors = 0
    done = 0
    duration_s = args["duration_s"]
    start = time.perf_counter()
    end = start + duration_s
    for c in conns:
        c.send()
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        for key, _ in sel.select(timeout=min(0.1, end - now)):
            c = key.data
            try:
                data = c.sock.recv(1 << 16)
            except BlockingIOError:
                continue
            if not data:
                raise ConnectionError("broker closed a connection")
            for _corr, ns, err in c.responses(data):
                done += 1
                lat_us.append(ns / 1000)
                errors += err != 0
            if not c.sent_at:
                c.send()
    wall_s = time.perf_counter() - start
    for c in conns:
        c.sock.close()
    return {"wall_s": wall_s, "requests": done, "errors": errors,
            "requests_per_s": round(done / wall_s, 1),
            "latency": percentiles(lat_us), "timed_out": False}


# ------------------------------------------------------------ spread

def gen_spread(args: dict) -> dict:
    """One total rate spread over ``partitions`` partitions, open loop.

    Behaves like a producer with linger = ``tick_ms`` and max.in.flight =
    ``inflight`` that costs almost nothing per partition: every tick, the
    records due since the last one go out in one Produce v8 request (acks=1),
    record i to partition i mod ``partitions``, each partition's records one
    v2 batch (encoded once per record count and reused: the broker assigns
    offsets in its own copy). With ``inflight`` requests outstanding, due
    records wait in the generator, so a broker that falls behind shows as a
    lower achieved rate and a longer due-to-ack time, not as a slower
    generator. librdkafka cannot be that generator at 10,000 partitions: it
    spends ~28 us of CPU per record there (a timer and a queue per
    partition), ~37k rec/s at most on this machine whatever the broker.
    """
    from kafkapy._core.records_py import build_batch

    host, port = args["bootstrap"].split(":")
    sock = _connect(host, int(port))
    topic = args["topic"].encode()
    partitions, rate = args["partitions"], args["rate"]
    total = int(rate * args["seconds"])
    tick_s = args.get("tick_ms", 5) / 1000
    inflight = args.get("inflight", 5)
    value = b"v" * args["record_size"]
    now_ms = int(time.time() * 1000)
    batches: dict[int, bytes] = {}

    def batch(count: int) -> bytes:
        b = batches.get(count)
        if b is None:
            b = batches[count] = bytes(build_batch([(None, value, [], now_ms)] * count))
        return b

    client_id = b"perf-spread"
    # Header v1 (api_key 0, version 8, correlation id patched per request,
    # client id), then transactional_id null, acks 1, timeout, one topic.
    head = struct.pack(">hhih", 0, 8, 0, len(client_id)) + client_id + \
        struct.pack(">hhii", -1, 1, 30_000, 1) + struct.pack(">h", len(topic)) + topic
    # At most ~1 MiB per request (Kafka's max.request.size) when catching up.
    max_records = max(1, (1 << 20) // (args["record_size"] + 80))

    def request(corr: int, first: int, count: int) -> bytes:
        # Records first .. first+count-1; partition of record i is i % partitions.
        n_parts = min(count, partitions)
        base, extra = divmod(count, partitions)
        out = [head, struct.pack(">i", n_parts)]
        for j in range(n_parts):
            b = batch(base + (1 if j < extra else 0))
            out.append(struct.pack(">ii", (first + j) % partitions, len(b)))
            out.append(b)
        msg = bytearray(b"".join(out))
        _CORR.pack_into(msg, 4, corr)
        return _SIZE.pack(len(msg)) + msg

    _wait_go()
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    outstanding: dict[int, tuple[int, float, float]] = {}  # corr -> (records, sent_at, due_at)
    rbuf = bytearray()
    sent = acked = errors = corr = 0
    request_us: list[float] = []
    due_to_ack_us: list[float] = []
    cpu0 = _cpu_s()
    start = time.perf_counter()
    last_ack = start
    deadline = time.monotonic() + args["timeout_s"]
    while acked < total and time.monotonic() < deadline:
        now = time.perf_counter()
        # Records become due at tick boundaries (the linger).
        due = min(total, int(int((now - start) / tick_s) * tick_s * rate))
        if due > sent and len(outstanding) < inflight:
            count = min(due - sent, max_records)
            sock.sendall(request(corr, sent, count))
            # The first record of the request was due at sent / rate.
            outstanding[corr] = (count, now, start + sent / rate)
            sent += count
            corr += 1
        next_tick = start + (int((now - start) / tick_s) + 1) * tick_s
        for _ in sel.select(timeout=max(0.0, next_tick - time.perf_counter())):
            data = sock.recv(1 << 20)
            if not data:
                raise ConnectionError("broker closed the connection")
            rbuf += data
            t = time.perf_counter()
            while len(rbuf) >= 4:
                (size,) = _SIZE.unpack_from(rbuf, 0)
                if len(rbuf) < 4 + size:
                    break
                frame = bytes(rbuf[4:4 + size])
                del rbuf[:4 + size]
                (c,) = _CORR.unpack_from(frame, 0)
                count, sent_at, due_at = outstanding.pop(c)
                errors += _produce_errors(frame)
                acked += count
                last_ack = t
                request_us.append((t - sent_at) * 1e6)
                due_to_ack_us.append((t - due_at) * 1e6)
    sock.close()
    wall_s = last_ack - start
    return {"wall_s": wall_s, "records": acked, "offered_rate": rate,
            "achieved_rate": round(acked / wall_s, 1) if wall_s > 0 else 0.0,
            "requests": corr, "partition_errors": errors,
            "request_latency": percentiles(request_us),
            "due_to_ack": percentiles(due_to_ack_us), "cpu_s": round(_cpu_s() - cpu0, 3),
            "timed_out": acked < total}


# ------------------------------------------------------------ end-to-end

_TS = struct.Struct(">q")


def _cpu_s() -> float:
    """CPU seconds of this process so far (all threads: librdkafka's too)."""
    t = os.times()
    return t.user + t.system


class _RdStats:
    """The last librdkafka statistics (statistics.interval.ms) of the one broker.

    Kept: rtt (request round trip as librdkafka sees it), int_latency (time a
    message waits in the producer's partition queue before it is put in a
    request), outbuf_latency (a request's wait in the output buffer before the
    socket takes it), and the request counts, so a report can tell client-side
    queueing from broker-side latency.
    """

    def __init__(self):
        self.last: dict = {}

    def on_stats(self, raw: str) -> None:
        doc = json.loads(raw)
        for b in doc.get("brokers", {}).values():
            if b.get("nodeid", -1) < 0:
                continue  # the bootstrap connection
            self.last = {
                "tx_requests": b.get("tx"), "rx_responses": b.get("rx"),
                **{f"{k}_us": {q: b.get(k, {}).get(q) for q in ("p50", "p99", "max")}
                   for k in ("rtt", "int_latency", "outbuf_latency")}}


def gen_e2e_produce(args: dict) -> dict:
    from confluent_kafka import Producer

    stats = _RdStats()
    delivery_us: list[float] = []
    errors = [0]

    def on_delivery(err, msg):
        # Produce call to broker acknowledgement: the part of end-to-end
        # latency spent before the consumer can see the record.
        if err is not None:
            errors[0] += 1
            return
        (ts,) = _TS.unpack_from(msg.value(), 0)
        delivery_us.append((time.monotonic_ns() - ts) / 1000)

    conf = {"bootstrap.servers": args["bootstrap"], "acks": "1",
            "compression.type": "none",
            # linger 1 ms = the pacing quantum below: each 1 ms burst (10
            # records at 10k/s) goes out as one request, and 1 ms is 20 % of
            # the 5 ms p99 budget. With linger 0 librdkafka sends a request
            # per wake-up: at 10k rec/s that was 1,500 requests/s of ~6
            # records, measuring per-request cost rather than latency.
            "linger.ms": 1,
            # The Java producer's default. librdkafka's is 1,000,000: with
            # linger 0 it piled ~600 one-record requests into the broker's
            # socket (tx 4,530 vs rx 3,946 in 3 s, rtt p50 438 ms) while a
            # broker answers a connection's requests one at a time, as
            # Kafka does; the records' wait in that queue was the p99.
            "max.in.flight.requests.per.connection": 5,
            "on_delivery": on_delivery, "log_level": 3,
            "statistics.interval.ms": 1000, "stats_cb": stats.on_stats}
    conf.update(args.get("producer_conf", {}))
    p = Producer(conf)
    p.list_topics(args["topic"], timeout=10)
    _wait_go()
    rate, total = args["rate"], args["records"]
    pad = b"p" * (args["record_size"] - _TS.size)
    sent = 0
    cpu0 = _cpu_s()
    start = time.perf_counter()
    deadline = time.monotonic() + args["timeout_s"]
    while sent < total and time.monotonic() < deadline:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while sent < due:
            try:
                p.produce(args["topic"], _TS.pack(time.monotonic_ns()) + pad,
                          partition=0)
                sent += 1
            except BufferError:
                p.poll(0.001)
        p.poll(0)
        # Sleep until the next record is due (at most 1 ms): the pacing
        # quantum is 1 ms, i.e. bursts of rate/1000 records.
        ahead = (sent / rate) - (time.perf_counter() - start)
        if ahead > 0:
            time.sleep(min(ahead, 0.001))
    produce_s = time.perf_counter() - start
    unflushed = p.flush(10)
    wall_s = time.perf_counter() - start
    return {"wall_s": wall_s, "produce_s": round(produce_s, 3), "sent": sent,
            "unflushed": unflushed, "delivery_errors": errors[0],
            "offered_rate": rate, "achieved_rate": round(sent / wall_s, 1),
            "delivery": percentiles(delivery_us), "cpu_s": round(_cpu_s() - cpu0, 3),
            "rdkafka": stats.last, "timed_out": sent < total}


def gen_e2e_consume(args: dict) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    stats = _RdStats()
    conf = {"bootstrap.servers": args["bootstrap"],
            "group.id": "perf-e2e", "enable.auto.commit": False,
            "fetch.wait.max.ms": 100, "fetch.queue.backoff.ms": 10,
            "log_level": 3, "statistics.interval.ms": 1000, "stats_cb": stats.on_stats}
    conf.update(args.get("consumer_conf", {}))
    c = Consumer(conf)
    c.assign([TopicPartition(args["topic"], 0, OFFSET_BEGINNING)])
    c.list_topics(args["topic"], timeout=10)
    # Get the fetcher going (offset lookup, first empty long poll) before the
    # producer starts, so the first records do not wait for consumer set-up.
    for _ in range(3):
        c.consume(num_messages=1, timeout=0.3)
    _wait_go()
    total = args["records"]
    got = 0
    lat_us: list[float] = []
    per_second: dict[int, list[float]] = {}
    first_ns = None
    cpu0 = _cpu_s()
    deadline = time.monotonic() + args["timeout_s"]
    while got < total and time.monotonic() < deadline:
        # poll(), not consume(n, timeout): consume() waits until n records
        # or the timeout, which at 1k records/s would add the whole timeout
        # to every record's latency.
        msg = c.poll(0.1)
        if msg is not None:
            if msg.error():
                continue
            now = time.monotonic_ns()
            (ts,) = _TS.unpack_from(msg.value(), 0)
            first_ns = first_ns or ts
            us = (now - ts) / 1000
            # The first second is a warm-up (connection, first batches): kept
            # in the per-second series, left out of the overall percentiles.
            if ts - first_ns >= 1_000_000_000:
                lat_us.append(us)
            per_second.setdefault(int((ts - first_ns) // 1_000_000_000), []).append(us)
            got += 1
    cpu_s = _cpu_s() - cpu0
    c.poll(0)
    c.close()
    series = [{"second": s, **percentiles(v)} for s, v in sorted(per_second.items())]
    return {"records": got, "latency": percentiles(lat_us), "series": series,
            "cpu_s": round(cpu_s, 3), "rdkafka": stats.last, "timed_out": got < total}


# ------------------------------------------------------------ kafkapy client

def gen_kproduce(args: dict) -> dict:
    """kafkapy's own producer; its API is assumed kafka-python-like."""
    from kafkapy.client import KafkaProducer  # ImportError -> skipped by driver

    p = KafkaProducer(bootstrap_servers=args["bootstrap"], acks=(
        "all" if args["acks"] == "all" else int(args["acks"])),
        linger_ms=5, batch_size=1_000_000)
    _wait_go()
    value = b"x" * args["record_size"]
    partitions = args.get("partitions", 1)
    start = time.perf_counter()
    deadline = time.monotonic() + args["timeout_s"]
    sent = 0
    while sent < args["records"] and time.monotonic() < deadline:
        p.send(args["topic"], value=value, partition=sent % partitions)
        sent += 1
    p.flush()
    wall_s = time.perf_counter() - start
    close = getattr(p, "close", None)
    if close:
        close()
    return {"wall_s": wall_s, "sent": sent, "timed_out": sent < args["records"],
            "delivery_errors": 0, "unflushed": 0, "first_error": None}


KINDS = {"small": gen_small, "conns": gen_conns, "spread": gen_spread,
         "e2e_produce": gen_e2e_produce,
         "e2e_consume": gen_e2e_consume, "kproduce": gen_kproduce}


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = KINDS[sys.argv[1]](json.loads(sys.argv[2]))
    print(json.dumps(result), flush=True)
