"""Micro-benchmark: kafkapy._core compiled modules against their twins.

    python perf/bench_core.py [--seconds 0.3] [--only TEXT]

Each figure is the best of 5 timed rounds, each round bounded by --seconds/5,
timed in process CPU time so that other processes on a shared 2-core machine
inflate it less than wall time would.  Most batches hold one record, so the
per-batch cost (header decode, CRC call, BatchHeader tuple) dominates; one
case uses 16 KiB batches, where the CRC-32C (hardware, ~20 GB/s in the
crc32c package) is shared by both variants and the ratio shrinks.

``request_read`` is measured per 1000 requests, through what the broker calls
(``protocol.headers.read_request_header``, ``protocol.produce_wire.
decode_request``) over each implementation: a header with a 12-character
client id, and Produce v8 bodies of one and of 16 partitions, each one
batch of one 100 B record.

The client's modules are measured per record or per call: ``records``
(BatchBuilder.append, decode_records), ``producer`` (FastSend.send into an
open batch, the path of ~148 of 149 ``KafkaProducer.send`` calls) and
``gil_io`` (one send_nowait + io_wait + recv_into_nowait round on a
socketpair, the sender's per-request syscalls).
"""

import argparse
import importlib
import os
import random
import select
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kafkapy._core.records_py import build_batch  # noqa: E402

MIB = 1 << 20


def _log_of(record_bytes, total_bytes=MIB, records_per_batch=1):
    one = build_batch([(None, b"x" * record_bytes, [], 1_700_000_000_000)] * records_per_batch)
    count = max(1, total_bytes // len(one))
    return bytearray(one * count), count


def _best_seconds_per_call(function, budget_seconds, rounds=5):
    """Best per-call time over ``rounds`` rounds, each at most ~budget/rounds."""
    function()  # warm up
    best = float("inf")
    for _ in range(rounds):
        calls = 0
        started = time.process_time()
        deadline = started + budget_seconds / rounds
        while True:
            function()
            calls += 1
            now = time.process_time()
            if now >= deadline or calls >= 100_000:
                break
        best = min(best, (now - started) / calls)
    return best


def _client_cases(records_c, records_py, producer_c, producer_py, gil_io_c, gil_io_py):
    """(label, compiled, twin, bytes) cases for the client's records, producer and gil_io."""
    value = b"x" * 100
    calls = 1000
    cases = []

    def make_append(records):
        def run():
            append = records.BatchBuilder(0, 1 << 20).append
            for _ in range(calls):
                append(1_700_000_000_000, None, value)
        return run

    cases.append((f"BatchBuilder.append x{calls}, 100 B value", make_append(records_c), make_append(records_py), 0))

    # The client's batch: 16 KiB of 100 B records = 148 records.
    full_batch = build_batch([(None, value, [], 1_700_000_000_000 + i) for i in range(148)])
    cases.append(("decode_records, 148 x 100 B batch",
                  lambda: records_c.decode_records(full_batch), lambda: records_py.decode_records(full_batch), 0))

    class Metadata:
        partitions = {"t": {0: None}}

    def make_send(producer, records):
        # FastSend over one open sticky batch large enough for every call;
        # the batch is made anew per run (~2 us of the figure).
        lock = threading.Lock()

        def run():
            batch = producer.ProducerBatchBase(("t", 0), records.BatchBuilder(0, 1 << 20), None)
            send = producer.FastSend(Metadata, {"t": 0}, {"t": [batch]}, None, None, None,
                                     1 << 20, 1 << 20, lock, None).send
            for _ in range(calls):
                send("t", value)
        return run

    cases.append((f"FastSend.send x{calls}, 100 B value, null key, open batch",
                  make_send(producer_c, records_c), make_send(producer_py, records_py), 0))

    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    epoll = select.epoll()
    epoll.register(b.fileno(), select.EPOLLIN)
    scratch = bytearray(4096)

    def make_round(gil_io):
        def run():
            gil_io.send_nowait(a, b"x")
            gil_io.io_wait(epoll, 1.0)
            gil_io.recv_into_nowait(b, scratch)
        return run

    cases.append(("send_nowait + io_wait + recv_into_nowait, 1 B on a socketpair",
                  make_round(gil_io_c), make_round(gil_io_py), 0))
    return cases


def _request_read_cases(request_read_c, request_read_py):
    """(label, compiled, twin, bytes) cases for the broker's reads of a request."""
    from kafkapy.protocol import headers, produce_wire
    from kafkapy.protocol.api import API_TABLE
    from kafkapy.protocol.codec import Parts, encode
    from kafkapy.protocol.entities import construct

    calls = 1000  # per figure: one call is below the timer's own cost
    frame = memoryview(bytearray(struct.pack(">hhih", 0, 8, 7, 12) + b"rdkafka-prod"))

    # Each result is dropped before the next call, as the broker drops a
    # request once handled: keeping the 1000 in a list (16,000 partitions and
    # their records views alive) made the compiled 16-partition figure
    # 5.1-7.9 us a call against 2.9 us (3.6 us of it with the cyclic GC off:
    # its passes over them, and fresh memory for each).
    def make_header(module):
        read = headers.header_reader(module)

        def run():
            for _ in range(calls):
                read(frame)
        return run

    cases = [(f"read_request_header x{calls}, 12-character client id",
              make_header(request_read_c), make_header(request_read_py), 0)]
    version = 8
    cls = API_TABLE[0].request_class(version)
    batch = build_batch([(None, b"x" * 100, [], 1_700_000_000_000)])
    for partitions in (1, 16):
        out = Parts()
        encode(construct(cls, {"transactional_id": None, "acks": -1, "timeout": 30000, "topic_data": [
            {"name": "bench-topic", "partition_data": [{"index": i, "records": batch} for i in range(partitions)]}]}), out)
        body = memoryview(bytearray(b"".join(bytes(part) for part in out.parts())))

        def make_produce(module, body=body):
            decode_request = produce_wire.request_decoder(module)

            def run():
                for _ in range(calls):
                    decode_request(cls, version, body, 0)
            return run

        cases.append((f"decode_request x{calls}, Produce v{version}, {partitions} partition(s) x 1 record of 100 B",
                      make_produce(request_read_c), make_produce(request_read_py), 0))
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="time budget per figure")
    parser.add_argument("--only", default="", help="only the cases whose label contains this text")
    args = parser.parse_args()

    try:
        batch_c, index_c, records_c, producer_c, gil_io_c, request_read_c = (
            importlib.import_module(f"kafkapy._core.{name}")
            for name in ("batch", "index", "records", "producer", "gil_io", "request_read"))
    except ImportError:
        sys.exit("compiled modules not built: python setup.py build_ext --inplace")
    batch_py = importlib.import_module("kafkapy._core.batch_py")
    records_py = importlib.import_module("kafkapy._core.records_py")
    producer_py = importlib.import_module("kafkapy._core.producer_py")
    gil_io_py = importlib.import_module("kafkapy._core.gil_io_py")
    index_py = importlib.import_module("kafkapy._core.index_py")
    request_read_py = importlib.import_module("kafkapy._core.request_read_py")

    cases = []
    for record_bytes, per_batch in ((1024, 1), (100, 1), (1024, 16)):
        log, count = _log_of(record_bytes, records_per_batch=per_batch)
        frozen = bytes(log)
        label = f"scan_batches 1 MiB: {count} batches of {per_batch} x {record_bytes} B, CRC on"

        def make_scan(module, buf=frozen):
            return lambda: module.scan_batches(buf)

        cases.append((label, make_scan(batch_c), make_scan(batch_py), len(frozen)))

    log, count = _log_of(100)
    headers = batch_c.scan_batches(log)[0]
    for log_append_time_ms, what in ((-1, "CreateTime"), (1_700_000_000_123, "LogAppendTime (re-CRC)")):
        label = f"assign_offsets {count} batches, {what}"

        def make_assign(module, log_append_time_ms=log_append_time_ms):
            return lambda: module.assign_offsets(log, headers, 1000, 5, log_append_time_ms)

        cases.append((label, make_assign(batch_c), make_assign(batch_py), len(log)))

    rng = random.Random(1)
    for entry_size, entries in ((8, 1 << 16), (12, 1 << 16)):
        fmt = ">ii" if entry_size == 8 else ">qi"
        keys = sorted(rng.sample(range(1 << 30), entries))
        buf = b"".join(struct.pack(fmt, key, 0) for key in keys)
        tail_targets = [rng.randint(keys[-500], keys[-1]) for _ in range(1000)]
        cold_targets = [rng.randint(0, keys[-1]) for _ in range(1000)]
        for targets, where in ((tail_targets, "warm tail"), (cold_targets, "anywhere")):
            label = f"index_lookup x1000, {entries} entries of {entry_size} B, {where}"

            def make_lookup(module, buf=buf, targets=targets, entry_size=entry_size, entries=entries):
                lookup = module.index_lookup
                return lambda: [lookup(buf, entries, entry_size, t) for t in targets]

            cases.append((label, make_lookup(index_c), make_lookup(index_py), 0))

    cases += _request_read_cases(request_read_c, request_read_py)
    cases += _client_cases(records_c, records_py, producer_c, producer_py, gil_io_c, gil_io_py)

    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}, "
        f"best of 5 rounds, {args.seconds}s CPU per figure"
    )
    print(f"{'operation':<72} {'compiled':>11} {'twin':>11} {'twin/comp':>9}")
    for label, compiled, twin, nbytes in cases:
        if args.only not in label:
            continue
        c = _best_seconds_per_call(compiled, args.seconds)
        t = _best_seconds_per_call(twin, args.seconds)
        extra = f"   ({nbytes / c / 1e9:.1f} vs {nbytes / t / 1e9:.2f} GB/s)" if nbytes else ""
        print(f"{label:<72} {c * 1e6:>9.1f}us {t * 1e6:>9.1f}us {t / c:>8.1f}x{extra}")


if __name__ == "__main__":
    main()
