"""Fetch sessions (KIP-227) on the consume side of partition scaling.

One standalone kafkapy broker (perf/_brokers.py) advertises a byte-counting
TCP proxy on 127.0.0.1, so every client connection after bootstrap passes
through it. Topics of 100, 1,000 (and with ``--with-10k`` 10,000) partitions
get one record in every partition. Then, per partition count and per client:

* ``kafka-python`` (opens fetch sessions: full, then incremental requests)
* ``confluent-kafka`` (librdkafka sends Fetch without a session: session id
  0, epoch -1, every partition in every request) — the reference

is assigned every partition from the beginning, reads all records, stays
caught up and idle for ``--idle-s`` seconds, then one new record goes to each
of 10 partitions and the time until the consumer has seen all 10 is taken
(5 rounds, median and worst).

Figures: Fetch requests per second while idle, mean bytes per Fetch request
and response while idle (whole frames, size prefix included), the broker's
CPU seconds per idle second (whole process tree), the catch-up traffic, and
the time to see the 10 new records. A broker-only idle window (no consumer)
gives the baseline CPU, and raw Fetch v12 frames on one direct connection
give the broker CPU per empty incremental fetch of a session holding every
partition.

Every loop is bounded in count and time; only 127.0.0.1; the broker is the
only process started and ``BrokerProcess.stop`` signals only its own tree.
Run: ``.venv/bin/python perf/bench_fetch_sessions.py [--with-10k]
[--partitions 100,1000] [--idle-s 5] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "tests")]

from _brokers import free_port, make_kafkapy  # noqa: E402
from support.fetch import FETCH, Conn, RecordingProxy, fetch_request  # noqa: E402

NEW_RECORDS = 10
NEW_ROUNDS = 5


# ------------------------------------------------------------------ proxy

def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(5):
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise ValueError("varint too long")


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


class Exchange:
    __slots__ = ("sent", "version", "request_bytes", "session_id", "epoch",
                 "response_bytes", "error_code", "response_session_id")

    def __init__(self, sent, version, request_bytes, session_id, epoch):
        self.sent = sent
        self.version = version
        self.request_bytes = request_bytes
        self.session_id = session_id
        self.epoch = epoch
        self.response_bytes = 0
        self.error_code = 0
        self.response_session_id = 0


class ByteProxy(RecordingProxy):
    """The fetch tests' recording proxy (tests/support/fetch.py:
    accept, pump, ``close``), recording only what this benchmark needs from
    each Fetch exchange: frame sizes, the time the request passed, and the
    session id and epoch asked and answered, read from the fixed fields at
    the front of the frames, so a 10,000-partition Fetch costs the proxy no
    decoding. ``exchanges`` holds ``Exchange`` objects of this module.

    Ownership: the driver creates and closes it; its pump threads own their
    sockets and append to ``exchanges`` under ``lock``.
    """

    def _request(self, key, head: bytes) -> None:
        frame_bytes = 4 + len(head)
        api_key, version, correlation_id = struct.unpack_from(">hhi", head, 0)
        if api_key != FETCH:
            return
        (client_id_len,) = struct.unpack_from(">h", head, 8)
        pos = 10 + max(client_id_len, 0)
        if version >= 12:                    # flexible: request header v2
            pos = _skip_tags(head, pos)
        if version < 15:                     # replica_id left the top level in v15
            pos += 4
        pos += 4 + 4 + 4 + 1                 # max_wait, min_bytes, max_bytes, isolation
        session_id, epoch = struct.unpack_from(">ii", head, pos) if version >= 7 else (0, -1)
        exchange = Exchange(time.monotonic(), version, frame_bytes, session_id, epoch)
        with self.lock:
            self._pending[(key, correlation_id)] = exchange

    def _response(self, key, head: bytes) -> None:
        frame_bytes = 4 + len(head)
        (correlation_id,) = struct.unpack_from(">i", head, 0)
        with self.lock:
            exchange = self._pending.pop((key, correlation_id), None)
        if exchange is None:
            return
        pos = 4
        if exchange.version >= 12:           # response header v1
            pos = _skip_tags(head, pos)
        pos += 4                             # throttle_time_ms
        if exchange.version >= 7:
            exchange.error_code, exchange.response_session_id = struct.unpack_from(">hi", head, pos)
        exchange.response_bytes = frame_bytes
        with self.lock:
            self.exchanges.append(exchange)

    def since(self, start: float, end: float = float("inf")) -> list[Exchange]:
        with self.lock:
            return [e for e in self.exchanges if start <= e.sent < end]


# --------------------------------------------------------------- clients

class KafkaPythonConsumer:
    name = "kafka-python"

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        from kafka import KafkaConsumer, TopicPartition

        self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                               enable_auto_commit=False, auto_offset_reset="earliest",
                               max_poll_records=100_000,
                               request_timeout_ms=60_000)
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.c.assign(tps)
        self.c.seek_to_beginning(*tps)

    def poll(self, timeout_s: float) -> int:
        batches = self.c.poll(timeout_ms=int(timeout_s * 1000))
        return sum(len(v) for v in batches.values())

    def close(self) -> None:
        self.c.close()


class ConfluentConsumer:
    name = "confluent-kafka"

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        import confluent_kafka as ck

        self.c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-fs-unused",
                              "enable.auto.commit": False, "log_level": 2})
        self.c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING)
                       for p in range(partitions)])

    def poll(self, timeout_s: float) -> int:
        msgs = self.c.consume(num_messages=100_000, timeout=timeout_s)
        bad = [m.error() for m in msgs if m.error()]
        if bad:
            raise RuntimeError(f"consume error: {bad[0]}")
        return len(msgs)

    def close(self) -> None:
        self.c.close()


CLIENTS = {"kafka-python": KafkaPythonConsumer, "confluent-kafka": ConfluentConsumer}


# ---------------------------------------------------------------- workload

def _traffic(exchanges: list[Exchange], seconds: float) -> dict:
    n = len(exchanges)
    return {
        "fetches": n,
        "fetches_per_s": round(n / seconds, 2) if seconds else None,
        "request_bytes_mean": round(sum(e.request_bytes for e in exchanges) / n) if n else None,
        "response_bytes_mean": round(sum(e.response_bytes for e in exchanges) / n) if n else None,
        "request_bytes": sum(e.request_bytes for e in exchanges),
        "response_bytes": sum(e.response_bytes for e in exchanges),
        "versions": sorted({e.version for e in exchanges}),
        "sessions": len({e.response_session_id for e in exchanges if e.response_session_id}),
        "errors": sorted({e.error_code for e in exchanges if e.error_code}),
    }


def prepare_topic(broker, admin_bootstrap: str, topic: str, partitions: int,
                  timeout_s: float) -> float:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": admin_bootstrap, "log_level": 2,
                         "socket.timeout.ms": int(timeout_s * 1000)})
    t0 = time.monotonic()
    fs = admin.create_topics([NewTopic(topic, partitions, 1)],
                             operation_timeout=timeout_s, request_timeout=timeout_s)
    fs[topic].result(timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta and meta.error is None and len(meta.partitions) == partitions \
                and all(p.leader >= 0 for p in meta.partitions.values()):
            break
        time.sleep(0.2)
    else:
        raise TimeoutError(f"{topic}: no leaders after {timeout_s} s")
    created_s = time.monotonic() - t0
    producer = ck.Producer({"bootstrap.servers": admin_bootstrap, "linger.ms": 5,
                            "log_level": 2})
    for p in range(partitions):
        producer.produce(topic, value=b"x" * 100, partition=p)
        if p % 1000 == 999:
            producer.poll(0)
    if producer.flush(timeout_s):
        raise TimeoutError(f"{topic}: records not acknowledged in {timeout_s} s")
    return created_s


def run_client(broker, proxy: ByteProxy, producer, client: str, topic: str,
               partitions: int, idle_s: float, timeout_s: float) -> dict:
    res: dict = {"client": client, "partitions": partitions}
    t_start = time.monotonic()
    consumer = CLIENTS[client](proxy_bootstrap(proxy), topic, partitions)
    try:
        # Catch up: every partition holds one record.
        seen, deadline, polls = 0, t_start + timeout_s, 0
        while seen < partitions and time.monotonic() < deadline and polls < 100_000:
            seen += consumer.poll(0.2)
            polls += 1
        if seen < partitions:
            raise TimeoutError(f"caught up {seen}/{partitions} in {timeout_s} s")
        t_caught = time.monotonic()
        res["catch_up_s"] = round(t_caught - t_start, 2)
        res["catch_up"] = _traffic(proxy.since(t_start, t_caught), t_caught - t_start)
        # Settle 1 s (a fetch in flight at catch-up, the session's first
        # incremental round), then the idle window.
        extra = 0
        settle_end = t_caught + 1.0
        while time.monotonic() < settle_end:
            extra += consumer.poll(0.2)
        cpu0, t0 = broker.cpu_seconds(), time.monotonic()
        while time.monotonic() < t0 + idle_s:
            extra += consumer.poll(0.2)
        t1, cpu1 = time.monotonic(), broker.cpu_seconds()
        if extra:
            raise RuntimeError(f"{extra} unexpected records while idle")
        res["idle"] = _traffic(proxy.since(t0, t1), t1 - t0)
        res["broker_cpu_per_idle_s"] = round((cpu1 - cpu0) / (t1 - t0), 3)
        # Ten partitions, spread over the topic, get one record each; NEW_ROUNDS
        # rounds, started at different points of the consumer's long poll
        # (a pause of 0, 0.1, ... s before each), so the median and the
        # worst are not one sample of where the poll happened to be.
        step = max(1, partitions // NEW_RECORDS)
        seen_ms, acks_ms = [], []
        for rnd in range(NEW_ROUNDS):
            pause_end = time.monotonic() + 0.1 * rnd
            while time.monotonic() < pause_end:
                if consumer.poll(0.05):
                    raise RuntimeError("unexpected records between rounds")
            t_new = time.monotonic()
            for i in range(NEW_RECORDS):
                producer.produce(topic, value=b"n" * 100, partition=(i * step + rnd) % partitions)
            producer.flush(10)
            acks_ms.append((time.monotonic() - t_new) * 1000)
            got, deadline = 0, t_new + 30
            while got < NEW_RECORDS and time.monotonic() < deadline:
                got += consumer.poll(0.05)
            if got != NEW_RECORDS:
                raise TimeoutError(f"round {rnd}: saw {got}/{NEW_RECORDS} new records")
            seen_ms.append((time.monotonic() - t_new) * 1000)
        res["produce_ack_ms_median"] = round(statistics.median(acks_ms), 1)
        res["new_records_seen_ms_median"] = round(statistics.median(seen_ms), 1)
        res["new_records_seen_ms_max"] = round(max(seen_ms), 1)
    except Exception as exc:  # noqa: BLE001 - reported in the row
        res["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        consumer.close()
    return res


def proxy_bootstrap(proxy: ByteProxy) -> str:
    return f"127.0.0.1:{proxy.port}"


def broker_idle_cpu(broker, seconds: float) -> float:
    cpu0, t0 = broker.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    return round((broker.cpu_seconds() - cpu0) / (time.monotonic() - t0), 3)


def incremental_fetch_cpu(broker, topic: str, partitions: int, seconds: float = 3.0) -> dict:
    """Broker CPU (ms) per empty incremental fetch of a session holding every
    partition (all caught up at offset 1), raw Fetch v12 frames on one direct
    connection: with ``max_wait`` 0, and with a 500 ms long poll (the parked
    fetch is run again when its deadline passes). Each loop is bounded by
    ``seconds`` and 1,000 fetches."""
    out = {}
    with Conn(broker.bootstrap) as conn:
        full = conn.call(FETCH, 12, fetch_request(12, [(topic, [(p, 1) for p in range(partitions)])],
                                                  epoch=0, max_wait_ms=0))
        if full.error_code or not full.session_id:
            return {"error": f"no session: error {full.error_code}"}
        epoch = 1
        for max_wait in (0, 500):
            cpu0, t0, n = broker.cpu_seconds(), time.monotonic(), 0
            while time.monotonic() < t0 + seconds and n < 1_000:
                r = conn.call(FETCH, 12, fetch_request(12, [], session_id=full.session_id,
                                                       epoch=epoch, max_wait_ms=max_wait))
                epoch, n = epoch + 1, n + 1
                if r.error_code or r.responses:
                    return {"error": f"incremental fetch: error {r.error_code}, "
                                     f"{len(r.responses)} topics"}
            out[f"max_wait_{max_wait}_ms"] = round((broker.cpu_seconds() - cpu0) / n * 1000, 1)
        conn.call(FETCH, 12, fetch_request(12, [], session_id=full.session_id, epoch=-1))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", default="100,1000")
    ap.add_argument("--with-10k", action="store_true", help="add a 10,000-partition topic")
    ap.add_argument("--idle-s", type=float, default=5.0)
    ap.add_argument("--clients", default="kafka-python,confluent-kafka")
    ap.add_argument("--timeout-s", type=float, default=180.0)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    counts = [int(x) for x in args.partitions.split(",") if x]
    if args.with_10k and 10_000 not in counts:
        counts.append(10_000)
    clients = [c for c in args.clients.split(",") if c]

    import confluent_kafka as ck

    workdir = tempfile.mkdtemp(prefix="bench-fs-")
    proxy_port = free_port()
    broker = make_kafkapy(workdir, {
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}",
        "group.initial.rebalance.delay.ms": "0"})
    proxy = ByteProxy(broker.port, proxy_port)
    rows: list[dict] = []
    try:
        broker.start()
        broker.wait_ready(60)
        producer = ck.Producer({"bootstrap.servers": proxy_bootstrap(proxy), "linger.ms": 0,
                                "log_level": 2})
        for partitions in counts:
            topic = f"fs-{partitions}"
            created_s = prepare_topic(broker, proxy_bootstrap(proxy), topic, partitions,
                                      args.timeout_s)
            baseline = broker_idle_cpu(broker, args.idle_s)
            raw = incremental_fetch_cpu(broker, topic, partitions)
            print(f"{partitions:,} partitions: created+filled in {created_s:.1f} s, "
                  f"broker idle CPU without consumers {baseline} s/s; broker CPU per empty "
                  f"incremental fetch (raw frames) {raw}", flush=True)
            for client in clients:
                row = run_client(broker, proxy, producer, client, topic, partitions,
                                 args.idle_s, args.timeout_s)
                row["create_topic_s"] = round(created_s, 2)
                row["broker_cpu_per_idle_s_no_consumer"] = baseline
                row["incremental_fetch_cpu_ms"] = raw
                rows.append(row)
                idle = row.get("idle", {})
                print(f"  {client}: {row.get('error', '')} idle {idle.get('fetches_per_s')} "
                      f"fetch/s, req {idle.get('request_bytes_mean')} B, resp "
                      f"{idle.get('response_bytes_mean')} B, sessions {idle.get('sessions')}, "
                      f"v{idle.get('versions')}, broker CPU {row.get('broker_cpu_per_idle_s')} "
                      f"s/s; 10 new seen in {row.get('new_records_seen_ms_median')} ms median, "
                      f"{row.get('new_records_seen_ms_max')} max; catch-up "
                      f"{row.get('catch_up_s')} s", flush=True)
        del producer
    finally:
        broker.stop()
        proxy.close()
        shutil.rmtree(workdir, ignore_errors=True)
    if proxy.errors:
        print(f"proxy parse errors: {proxy.errors[:3]}", flush=True)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if any("error" in r for r in rows) or proxy.errors else 0


def print_table(rows: list[dict]) -> None:
    print("\n| partitions | client | session | idle fetch/s | idle B/request | idle B/response "
          "| broker CPU s per idle s (no consumer) | 10 new records seen ms, median / max of 5 | catch-up s, fetches, "
          "response MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        idle, cu = r.get("idle", {}), r.get("catch_up", {})
        print(f"| {r['partitions']:,} | {r['client']} | {'yes' if idle.get('sessions') else 'no'} "
              f"| {idle.get('fetches_per_s')} | {idle.get('request_bytes_mean')} "
              f"| {idle.get('response_bytes_mean')} | {r.get('broker_cpu_per_idle_s')} "
              f"({r.get('broker_cpu_per_idle_s_no_consumer')}) | {r.get('new_records_seen_ms_median')} "
              f"/ {r.get('new_records_seen_ms_max')} "
              f"| {r.get('catch_up_s')}, {cu.get('fetches')}, "
              f"{(cu.get('response_bytes') or 0) / 1e6:.2f} |"
              + (f" error: {r['error']}" if "error" in r else ""))
    raw = {r["partitions"]: r.get("incremental_fetch_cpu_ms") or {} for r in rows}
    print("\n| partitions | broker CPU ms per empty incremental fetch, max_wait 0 / 500 ms |")
    print("|---|---|")
    for partitions, cost in raw.items():
        print(f"| {partitions:,} | {cost.get('max_wait_0_ms')} / {cost.get('max_wait_500_ms')}"
              + (f" error: {cost['error']}" if "error" in cost else "") + " |")


if __name__ == "__main__":
    sys.exit(main())
