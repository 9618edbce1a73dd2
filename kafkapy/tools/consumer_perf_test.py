"""kafkapy-consumer-perf-test: consumer throughput (kafka-consumer-perf-test.sh).

Prints Kafka's ConsumerPerformance header and one row:

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    2024-05-01 10:00:00:000, 2024-05-01 10:00:02:500, 95.3674, 38.1470, 1000000, 400000.0000, 0, 2500, 38.1470, 400000.0000

Times use Kafka's default ``--date-format`` ``yyyy-MM-dd HH:mm:ss:SSS`` in
local time.  With ``--group`` the consumer subscribes (rebalance.time.ms is
the time to the first assignment); without it, it reads every partition of
the topic from the beginning (or the end with ``--from-latest``) by
assignment, so rebalance.time.ms is 0.  If no record arrives for
``--timeout`` ms (10 s) the tool prints Kafka's warning and still reports.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from typing import Optional, Sequence

from kafkapy.tools import _client
from kafkapy.tools._cli import ToolError, load_properties_file, parse_properties, parser, run

MB = 1024.0 * 1024.0
HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DETAILED_HEADER = ("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
POLL_SLICE_MS = 100


def java_date(fmt: str, epoch_s: float) -> str:
    """The subset of Java's SimpleDateFormat that Kafka's default format uses."""
    dt = datetime.fromtimestamp(epoch_s)
    out = fmt
    for token, value in (("yyyy", f"{dt.year:04d}"), ("MM", f"{dt.month:02d}"), ("dd", f"{dt.day:02d}"),
                         ("HH", f"{dt.hour:02d}"), ("mm", f"{dt.minute:02d}"), ("ss", f"{dt.second:02d}"),
                         ("SSS", f"{dt.microsecond // 1000:03d}")):
        out = out.replace(token, value)
    return out


def _build_parser():
    p = parser("kafkapy-consumer-perf-test", "This tool helps in performance test for the full zookeeper consumer")
    p.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server",
                   help="REQUIRED unless --broker-list(deprecated) is specified. The server(s) to connect to.")
    p.add_argument("--topic", help="REQUIRED: The topic to consume from.")
    p.add_argument("--messages", type=int, help="REQUIRED: The number of messages to send or consume")
    p.add_argument("--group", help="The group id to consume on.")
    p.add_argument("--fetch-size", type=int, default=1024 * 1024, help="The amount of data to fetch in a single request.")
    p.add_argument("--from-latest", action="store_true", help="If the consumer does not already have an established "
                   "offset to consume from, start with the latest message present in the log rather than the earliest.")
    p.add_argument("--socket-buffer-size", type=int, default=2 * 1024 * 1024, help="The size of the tcp RECV size.")
    p.add_argument("--timeout", type=int, default=10000,
                   help="The maximum allowed time in milliseconds between returned records. (default: 10000)")
    p.add_argument("--show-detailed-stats", action="store_true",
                   help="If set, stats are reported for each reporting interval as configured by reporting-interval")
    p.add_argument("--reporting-interval", type=int, default=5000,
                   help="Interval in milliseconds at which to print progress info.")
    p.add_argument("--date-format", default="yyyy-MM-dd HH:mm:ss:SSS",
                   help="The date format to use for formatting the time field.")
    p.add_argument("--hide-header", action="store_true", help="If set, skips printing the header for the stats")
    p.add_argument("--consumer.config", "--command-config", dest="consumer_config",
                   help="Consumer config properties file.")
    p.add_argument("--consumer-property", action="append", default=[], help="key=value consumer settings")
    p.add_argument("--print-metrics", action="store_true", help="accepted for compatibility; prints nothing extra")
    return p


def _row(fmt: str, start_s: float, end_s: float, total_bytes: int, count: int, rebalance_ms: int,
         fetch_ms: int, first: str) -> str:
    elapsed = max(end_s - start_s, 1e-9)
    total_mb = total_bytes / MB
    fetch_s = fetch_ms / 1000.0
    fetch_mb_s = total_mb / fetch_s if fetch_s > 0 else 0.0
    fetch_n_s = count / fetch_s if fetch_s > 0 else 0.0
    return (f"{first}, {total_mb:.4f}, {total_mb / elapsed:.4f}, {count}, {count / elapsed:.4f}, "
            f"{rebalance_ms}, {fetch_ms}, {fetch_mb_s:.4f}, {fetch_n_s:.4f}")


def _body(argv: Sequence[str]) -> int:
    args = _build_parser().parse_args(argv)
    if not args.bootstrap_server:
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    if not args.topic:
        raise ToolError("Missing required argument \"[topic]\"")
    if args.messages is None or args.messages <= 0:
        raise ToolError("Missing required argument \"[messages]\" (a positive number)")
    settings = load_properties_file(args.consumer_config)
    settings["auto.offset.reset"] = "latest" if args.from_latest else "earliest"
    settings["max.partition.fetch.bytes"] = str(args.fetch_size)
    settings.update(parse_properties(args.consumer_property, "consumer property"))
    out = sys.stdout
    clients = _client.connect(args.bootstrap_server)
    consumer = clients.consumer(settings, group_id=args.group)
    count = total_bytes = 0
    rebalance_ms = 0
    timed_out = False
    try:
        start_wall = time.time()
        start = time.monotonic()
        if args.group:
            consumer.subscribe([args.topic])
        else:
            partitions = consumer.partitions_for(args.topic)
            if not partitions:
                raise ToolError(f"Topic '{args.topic}' does not exist or has no partitions")
            tps = [_client.TopicPartition(args.topic, p) for p in partitions]
            consumer.assign(tps)
            (consumer.seek_to_end if args.from_latest else consumer.seek_to_beginning)(tps)
        if args.show_detailed_stats and not args.hide_header:
            out.write(DETAILED_HEADER + "\n")
        last_record = time.monotonic()
        first_record_at = None
        window_start, window_count, window_bytes = start, 0, 0
        while count < args.messages:
            batches = consumer.poll(timeout_ms=POLL_SLICE_MS, max_records=args.messages - count)
            now = time.monotonic()
            got = False
            for records in batches.values():
                for record in records:
                    if count >= args.messages:
                        break
                    size = (len(record.key) if record.key else 0) + (len(record.value) if record.value else 0)
                    count += 1
                    total_bytes += size
                    window_count += 1
                    window_bytes += size
                    got = True
            if got:
                if first_record_at is None:
                    first_record_at = now
                    if args.group:
                        rebalance_ms = int((now - start) * 1000)
                last_record = now
            elif (now - last_record) * 1000 > args.timeout:
                timed_out = True
                break
            if args.show_detailed_stats and (now - window_start) * 1000 >= args.reporting_interval:
                out.write(_row("", window_start, now, window_bytes, window_count, rebalance_ms,
                               int((now - window_start) * 1000),
                               f"{java_date(args.date_format, time.time())}, 0") + "\n")
                out.flush()
                window_start, window_count, window_bytes = now, 0, 0
        end = time.monotonic()
        end_wall = start_wall + (end - start)
    except _client.ClientError as exc:
        raise ToolError(f"Error while consuming: {_client.describe_error(exc)}") from None
    finally:
        consumer.close()
        clients.close()
    if timed_out:
        out.write(f"WARNING: Exiting before consuming the expected number of messages: timeout ({args.timeout} ms) "
                  "exceeded. You can use the --timeout option to increase the timeout.\n")
    fetch_ms = int((end - start) * 1000) - rebalance_ms
    if not args.show_detailed_stats:
        if not args.hide_header:
            out.write(HEADER + "\n")
        first = f"{java_date(args.date_format, start_wall)}, {java_date(args.date_format, end_wall)}"
        out.write(_row("", start, end, total_bytes, count, rebalance_ms, fetch_ms, first) + "\n")
    out.flush()
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
