"""kafkapy-get-offsets: offsets of topic partitions by time (kafka-get-offsets.sh / GetOffsetShell).

Prints ``topic:partition:offset`` per partition, sorted by topic then
partition; a partition with no offset for the requested time prints
``topic:partition:`` with nothing after the colon, as Kafka's tool does.

``--time``: -1 or ``latest`` (log end offset), -2 or ``earliest`` (log start
offset), -3 or ``max-timestamp`` (offset of the record with the largest
timestamp), or a timestamp in ms (first offset whose timestamp is >= it).
``--topic`` is a regular expression; ``--partitions`` a list like ``0,2-4``;
``--topic-partitions`` Kafka's ``topic:0-2,other`` form.
"""

from __future__ import annotations

import re
import sys
from typing import Optional, Sequence

from kafkapy.tools import _client
from kafkapy.tools._cli import ToolError, load_properties_file, parser, run

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
_NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3}


def parse_partitions(text: str) -> list[tuple[int, Optional[int]]]:
    """``"0,2-4,7-"`` -> ``[(0, 0), (2, 4), (7, None)]`` (inclusive bounds, None: open)."""
    ranges = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        m = re.fullmatch(r"(\d+)?(-)?(\d+)?", item)
        if not m or (m.group(1) is None and m.group(3) is None):
            raise ToolError(f"Invalid partition '{item}' specified in partition list")
        low = int(m.group(1)) if m.group(1) else 0
        if m.group(2):
            high = int(m.group(3)) if m.group(3) else None
        else:
            high = low
        ranges.append((low, high))
    return ranges


def _in(ranges, partition: int) -> bool:
    return not ranges or any(low <= partition and (high is None or partition <= high) for low, high in ranges)


def parse_time(text: str) -> int:
    text = text.strip()
    if text in _NAMED_TIMES:
        return _NAMED_TIMES[text]
    try:
        value = int(text)
    except ValueError:
        raise ToolError(f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / "
                        "-3 or max-timestamp, or a specified long format timestamp") from None
    if value < -3:
        raise ToolError(f"Unsupported time argument {text}: -4 (earliest-local) and -5 (latest-tiered) need "
                        "tiered storage, which kafkapy does not have")
    return value


def _build_parser():
    p = parser("kafkapy-get-offsets", "An interactive shell for getting topic-partition offsets.")
    p.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server",
                   help="REQUIRED. The server(s) to connect to in the form HOST1:PORT1,HOST2:PORT2.")
    p.add_argument("--topic", help="The topic to get the offsets for. It also accepts a regular expression.")
    p.add_argument("--partitions", help="Comma separated list of partition ids to get the offsets for. If not "
                                        "present, all partitions of the authorized topics are queried.")
    p.add_argument("--topic-partitions", help="Comma separated list of topic-partition patterns to get the "
                                              "offsets for, e.g. 'topic:0-2,other'.")
    p.add_argument("--time", default="-1", help="timestamp of the offsets before that. [Note: No offset is returned "
                                                "if timestamp greater than recently committed record timestamp.]")
    p.add_argument("--exclude-internal-topics", action="store_true",
                   help="By default, internal topics are included. If specified, internal topics are excluded.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    return p


def _body(argv: Sequence[str]) -> int:
    args = _build_parser().parse_args(argv)
    if not args.bootstrap_server:
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    if args.topic_partitions and (args.topic or args.partitions):
        raise ToolError("Option topic-partitions cannot be used with --topic or --partitions")
    when = parse_time(args.time)
    filters = []  # (topic regex, partition ranges)
    if args.topic_partitions:
        for item in args.topic_partitions.split(","):
            if not item.strip():
                continue
            topic, _, parts = item.partition(":")
            filters.append((re.compile(topic.strip() or ".*"), parse_partitions(parts) if parts else []))
    else:
        filters.append((re.compile(args.topic or ".*"), parse_partitions(args.partitions or "")))

    clients = _client.connect(args.bootstrap_server, load_properties_file(args.command_config))
    try:
        names = [n for n in clients.topic_names()
                 if not (args.exclude_internal_topics and n in INTERNAL_TOPICS)]
        wanted = [n for n in names if any(rx.fullmatch(n) for rx, _ in filters)]
        specs = {}
        for info in clients.describe_topics(wanted):
            for part in info.partitions:
                if any(rx.fullmatch(info.name) and _in(ranges, part.partition) for rx, ranges in filters):
                    specs[_client.TopicPartition(info.name, part.partition)] = when
        offsets = clients.list_offsets(specs)
    except _client.ClientError as exc:
        raise ToolError(f"Error occurred: {_client.describe_error(exc)}") from None
    finally:
        clients.close()
    for tp in sorted(offsets):
        offset = offsets[tp]
        sys.stdout.write(f"{tp.topic}:{tp.partition}:{offset if offset is not None and offset >= 0 else ''}\n")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
