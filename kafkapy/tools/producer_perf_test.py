"""kafkapy-producer-perf-test: producer throughput and latency (kafka-producer-perf-test.sh).

Same options and output as Kafka's ProducerPerformance: every 5 s a line

    N records sent, X records/sec (Y MB/sec), Z ms avg latency, W ms max latency.

and at the end

    N records sent, X records/sec (Y MB/sec), Z ms avg latency, W ms max latency, A ms 50th, B ms 95th, C ms 99th, D ms 99.9th.

Latency is from ``send`` to the delivery callback.  Like Kafka we keep at most
500,000 latency samples (every k-th record, k = num-records / 500,000 rounded
up) so memory stays bounded on long runs, and take percentile p as sample
``int(p * n)`` of the sorted samples.  MB is 1024 * 1024 bytes.
"""

from __future__ import annotations

import random
import sys
import time
from typing import Optional, Sequence

from kafkapy.tools import _client
from kafkapy.tools._cli import ToolError, load_properties_file, parse_properties, parser, run

REPORTING_INTERVAL_MS = 5000
MAX_SAMPLES = 500_000
MB = 1024.0 * 1024.0


class Stats:
    """Kafka's ProducerPerformance.Stats, fed from delivery callbacks.

    Owned by the tool's main thread: the callbacks run there too (inside
    send/poll/flush for confluent; kafkapy.client resolves futures on its
    sender thread, so ``record`` only does int/list updates that are atomic
    under the GIL and the window is reported from the main thread)."""

    def __init__(self, num_records: int, out, reporting_interval_ms: int = REPORTING_INTERVAL_MS):
        self.start = time.monotonic()
        self.window_start = self.start
        self.sampling = max(1, -(-num_records // MAX_SAMPLES))
        self.latencies: list[int] = []
        self.out = out
        self.reporting_interval_ms = reporting_interval_ms
        self.count = self.bytes = self.total_latency = self.max_latency = 0
        self.window_count = self.window_bytes = self.window_total_latency = self.window_max_latency = 0
        self.iteration = 0

    def record(self, latency_ms: int, size: int) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency += latency_ms
        self.window_max_latency = max(self.window_max_latency, latency_ms)
        if self.iteration % self.sampling == 0 and len(self.latencies) < MAX_SAMPLES:
            self.latencies.append(latency_ms)
        self.iteration += 1

    def maybe_report(self) -> None:
        now = time.monotonic()
        if (now - self.window_start) * 1000 >= self.reporting_interval_ms:
            self.print_window(now)
            self.window_start = now
            self.window_count = self.window_bytes = self.window_total_latency = self.window_max_latency = 0

    def print_window(self, now: float) -> None:
        elapsed = max(now - self.window_start, 1e-9)
        rate = self.window_count / elapsed
        mb = self.window_bytes / MB / elapsed
        avg = self.window_total_latency / self.window_count if self.window_count else 0.0
        self.out.write(f"{self.window_count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
                       f"{avg:.1f} ms avg latency, {float(self.window_max_latency):.1f} ms max latency.\n")
        self.out.flush()

    def percentiles(self, *points: float) -> list[int]:
        ordered = sorted(self.latencies)
        if not ordered:
            return [0 for _ in points]
        return [ordered[min(int(p * len(ordered)), len(ordered) - 1)] for p in points]

    def print_total(self) -> None:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = self.count / elapsed
        mb = self.bytes / MB / elapsed
        avg = self.total_latency / self.count if self.count else 0.0
        p50, p95, p99, p999 = self.percentiles(0.5, 0.95, 0.99, 0.999)
        self.out.write(f"{self.count} records sent, {rate:f} records/sec ({mb:.2f} MB/sec), {avg:.2f} ms avg latency, "
                       f"{float(self.max_latency):.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, "
                       f"{p99} ms 99th, {p999} ms 99.9th.\n")
        self.out.flush()


class Throttler:
    """Kafka's ThroughputThrottler: sleep so that sent/elapsed stays at the target rate."""

    def __init__(self, target_per_sec: float, start: float):
        self.target = target_per_sec
        self.start = start

    def throttle(self, sent: int) -> None:
        if self.target <= 0:
            return
        ahead_s = sent / self.target - (time.monotonic() - self.start)
        if ahead_s > 0:
            time.sleep(ahead_s)


def _payloads(args) -> list[bytes]:
    if args.record_size is not None:
        rng = random.Random()
        # Kafka fills one buffer with random uppercase letters (65 + nextInt(26)) and reuses it.
        return [bytes(rng.randrange(65, 91) for _ in range(args.record_size))]
    try:
        with open(args.payload_file, "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except OSError as exc:
        raise ToolError(f"File does not exist or cannot be read: {args.payload_file} ({exc.strerror})") from None
    delimiter = args.payload_delimiter.encode().decode("unicode_escape")
    payloads = [p.encode("utf-8") for p in data.split(delimiter) if p]
    if not payloads:
        raise ToolError("No payloads found in the payload file")
    return payloads


def _build_parser():
    p = parser("kafkapy-producer-perf-test", "This tool is used to verify the producer performance.")
    p.add_argument("--bootstrap-server", help="The server(s) to connect to (overrides bootstrap.servers in the props).")
    p.add_argument("--topic", required=True, help="produce messages to this topic")
    p.add_argument("--num-records", type=int, required=True, help="number of messages to produce")
    p.add_argument("--record-size", type=int, help="message size in bytes.")
    p.add_argument("--payload-file", help="file to read the message payloads from.")
    p.add_argument("--payload-delimiter", default="\\n", help="delimiter to split the payload file (default: \\n)")
    p.add_argument("--payload-monotonic", action="store_true",
                   help="payload is filled with a monotonically increasing integer as a string.")
    p.add_argument("--throughput", type=float, required=True,
                   help="throttle maximum message throughput to *approximately* THROUGHPUT messages/sec. Set this "
                        "to -1 to disable throttling.")
    p.add_argument("--producer-props", nargs="+", default=[], help="kafka producer related configuration "
                                                                   "properties like bootstrap.servers,client.id etc.")
    p.add_argument("--producer.config", "--command-config", dest="producer_config",
                   help="producer config properties file.")
    p.add_argument("--print-metrics", action="store_true", help="accepted for compatibility; prints nothing extra")
    p.add_argument("--reporting-interval", type=int, default=REPORTING_INTERVAL_MS,
                   help="interval in ms between progress lines (default 5000)")
    return p


def _body(argv: Sequence[str]) -> int:
    args = _build_parser().parse_args(argv)
    sources = sum(x is not None and x is not False for x in (args.record_size, args.payload_file)) + \
        (1 if args.payload_monotonic else 0)
    if sources != 1:
        raise ToolError("Exactly one of --record-size, --payload-file or --payload-monotonic is required")
    if args.num_records <= 0:
        raise ToolError("--num-records should be greater than zero")
    if args.record_size is not None and args.record_size <= 0:
        raise ToolError("--record-size should be greater than zero")
    props = load_properties_file(args.producer_config)
    props.update(parse_properties(args.producer_props, "producer property"))
    bootstrap = args.bootstrap_server or props.pop("bootstrap.servers", None)
    props.pop("bootstrap.servers", None)
    if not bootstrap:
        raise ToolError("Either --bootstrap-server or bootstrap.servers in --producer-props must be specified")
    for java_only in ("key.serializer", "value.serializer"):
        props.pop(java_only, None)
    payloads = None if args.payload_monotonic else _payloads(args)

    clients = _client.connect(bootstrap)
    producer = clients.producer(props)
    out = sys.stdout
    stats = Stats(args.num_records, out, args.reporting_interval)
    throttler = Throttler(args.throughput, stats.start)
    failures: list[BaseException] = []
    try:
        for i in range(args.num_records):
            if payloads is None:
                value = str(i).encode()
            elif len(payloads) == 1:
                value = payloads[0]
            else:
                value = payloads[random.randrange(len(payloads))]
            sent_at = time.monotonic()
            future = producer.send(args.topic, value=value)
            future.add_done_callback(_callback(stats, sent_at, len(value), failures))
            if failures:
                break
            stats.maybe_report()
            throttler.throttle(i + 1)
        producer.flush()
    finally:
        producer.close()
        clients.close()
    if failures:
        exc = failures[0]
        message = _client.describe_error(exc) if isinstance(exc, _client.ClientError) else str(exc)
        raise ToolError(f"Error when sending message to topic {args.topic}: {message}")
    stats.print_total()
    return 0


def _callback(stats: Stats, sent_at: float, size: int, failures: list):
    def done(future) -> None:
        exc = future.exception()
        if exc is not None:
            failures.append(exc)
            return
        stats.record(int((time.monotonic() - sent_at) * 1000), size)
    return done


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
