"""kafkapy-console-consumer: print records to stdout (kafka-console-consumer.sh).

Output is Kafka's DefaultMessageFormatter: per record, in this order and each
only if enabled with ``--property print.X=true``: ``CreateTime:<ts>``,
``Partition:<n>``, ``Offset:<n>``, headers (``k:v,k2:v2`` or ``NO_HEADERS``),
the key, then the value (``print.value`` defaults to true), separated by
``key.separator`` (a tab) and ended by ``line.separator`` (a newline); a null
key or value prints as ``null.literal`` ("null").  On exit it prints
``Processed a total of N messages`` on stderr, as Kafka does.

Where the records come from:

* ``--group G``: subscribe with that group (needs the broker's group
  coordinator); offsets are committed on exit.
* no group: Kafka's tool would invent a ``console-consumer-NNNNN`` group; we
  assign all partitions (or ``--partition``) directly instead, so the tool
  works against any broker and leaves no group behind.  The start is
  ``--offset`` (``earliest``, ``latest`` or a number, only with
  ``--partition``), ``--from-beginning``, or the log end.

``--timeout-ms``: stop when no record arrived for that long (exit 0, as
Kafka's tool does); ``--max-messages``: stop after that many.

Transactions: ``--isolation-level read_committed`` shows committed records
only; control records (transaction markers) are never shown, as the Java
consumer under Kafka's tool skips them too (``kafkapy-dump-log`` shows them).
``--formatter org.apache.kafka.tools.consumer.TransactionLogMessageFormatter``
prints ``__transaction_state`` records as Kafka's formatter does (one JSON
object per record, ``{"key":{"version":..,"data":{..}},"value":{..}}``, the
data fields named as Kafka's TransactionLogKey/Value JSON converters name
them); Kafka's formatter ends no line, this one ends each with a newline.
"""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Optional, Sequence

from kafkapy.tools import _client
from kafkapy.tools._cli import ToolError, load_properties_file, parse_properties, parser, run

# One poll waits at most this long, so --timeout-ms and Ctrl-C are noticed
# within 200 ms even on an idle topic.
POLL_SLICE_MS = 200


def _unescape(text: str) -> str:
    # Kafka reads these properties with Java escapes, so "\t" on the command line is a tab.
    return text.encode("utf-8").decode("unicode_escape") if "\\" in text else text


class Formatter:
    """Kafka's DefaultMessageFormatter."""

    def __init__(self, props: dict):
        def flag(name: str, default: bool = False) -> bool:
            return props.get(name, "true" if default else "false").strip().lower() == "true"

        self.print_timestamp = flag("print.timestamp")
        self.print_partition = flag("print.partition")
        self.print_offset = flag("print.offset")
        self.print_headers = flag("print.headers")
        self.print_key = flag("print.key")
        self.print_value = flag("print.value", True)
        self.key_separator = _unescape(props.get("key.separator", "\t"))
        self.line_separator = _unescape(props.get("line.separator", "\n"))
        self.headers_separator = _unescape(props.get("headers.separator", ","))
        self.null_literal = props.get("null.literal", "null")

    def _text(self, data) -> str:
        if data is None:
            return self.null_literal
        if isinstance(data, str):
            return data
        return bytes(data).decode("utf-8", "replace")

    def format(self, record) -> str:
        fields = []
        if self.print_timestamp:
            if record.timestamp is None or record.timestamp < 0:
                fields.append("NO_TIMESTAMP")
            else:
                kind = "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"
                fields.append(f"{kind}:{record.timestamp}")
        if self.print_partition:
            fields.append(f"Partition:{record.partition}")
        if self.print_offset:
            fields.append(f"Offset:{record.offset}")
        if self.print_headers:
            headers = record.headers or []
            fields.append(self.headers_separator.join(f"{k}:{self._text(v)}" for k, v in headers)
                          if headers else "NO_HEADERS")
        if self.print_key:
            fields.append(self._text(record.key))
        if self.print_value:
            fields.append(self._text(record.value))
        return self.key_separator.join(fields) + self.line_separator


class TransactionLogFormatter:
    """Kafka's TransactionLogMessageFormatter (ApiMessageFormatter over the
    TransactionLogKey / TransactionLogValue JSON converters)."""

    @staticmethod
    def _version(data) -> int:
        return int.from_bytes(bytes(data[:2]), "big", signed=True)

    def format(self, record) -> str:
        from kafkapy.protocol.transaction_log import RecordFormatError, decode_key, decode_value

        def decoded(data, decode):
            try:
                return decode(bytes(data))
            except RecordFormatError:
                return None

        out: dict = {}
        key, value = record.key, record.value
        if key is None:
            out["key"] = None
        else:
            transactional_id = decoded(key, decode_key)
            out["key"] = {"version": self._version(key),
                          "data": "unknown" if transactional_id is None else {"transactionalId": transactional_id}}
        if value is None:
            out["value"] = None
        else:
            txn = decoded(value, decode_value)
            if txn is None:
                data = "unknown"
            else:
                by_topic: dict = {}
                for topic, partition in txn.partitions:
                    by_topic.setdefault(topic, []).append(partition)
                data = {"producerId": txn.producer_id, "producerEpoch": txn.producer_epoch,
                        "transactionTimeoutMs": txn.transaction_timeout_ms, "transactionStatus": txn.status,
                        "transactionPartitions": None if txn.status == 0 and not by_topic else [
                            {"topic": t, "partitionIds": sorted(ps)} for t, ps in sorted(by_topic.items())],
                        "transactionLastUpdateTimestampMs": txn.last_update_timestamp_ms,
                        "transactionStartTimestampMs": txn.start_timestamp_ms}
            out["value"] = {"version": self._version(value), "data": data}
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False) + "\n"


_FORMATTERS = {
    "kafka.tools.DefaultMessageFormatter": None,
    "org.apache.kafka.tools.consumer.DefaultMessageFormatter": None,
    "org.apache.kafka.tools.consumer.TransactionLogMessageFormatter": TransactionLogFormatter,
    "kafka.coordinator.transaction.TransactionLog$TransactionLogMessageFormatter": TransactionLogFormatter,
}


def _build_parser():
    p = parser("kafkapy-console-consumer", "This tool helps to read data from Kafka topics and outputs it to "
                                           "standard output.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--topic", help="The topic to consume on.")
    p.add_argument("--include", help="Regular expression specifying list of topics to include for consumption.")
    p.add_argument("--partition", type=int, help="The partition to consume from.")
    p.add_argument("--offset", default=None,
                   help="The offset to consume from (a non-negative number), or 'earliest' which means from "
                        "beginning, or 'latest' which means from end (default: latest)")
    p.add_argument("--from-beginning", action="store_true",
                   help="If the consumer does not already have an established offset to consume from, start with "
                        "the earliest message present in the log rather than the latest message.")
    p.add_argument("--group", help="The consumer group id of the consumer.")
    p.add_argument("--max-messages", type=int, help="The maximum number of messages to consume before exiting.")
    p.add_argument("--timeout-ms", type=int, help="If specified, exit if no message is available for consumption "
                                                  "for the specified interval.")
    p.add_argument("--formatter", default="org.apache.kafka.tools.consumer.DefaultMessageFormatter",
                   help="The name of a class to use for formatting kafka messages for display: "
                        + ", ".join(_FORMATTERS))
    p.add_argument("--property", action="append", default=[],
                   help="The properties to initialize the message formatter.")
    p.add_argument("--formatter-config", help="Config properties file to initialize the message formatter.")
    p.add_argument("--consumer-property", action="append", default=[],
                   help="A mechanism to pass user-defined properties in the form key=value to the consumer.")
    p.add_argument("--consumer.config", "--command-config", dest="consumer_config",
                   help="Consumer config properties file.")
    p.add_argument("--isolation-level", default="read_uncommitted",
                   help="Set to read_committed in order to filter out transactional messages which are not "
                        "committed. Set to read_uncommitted to read all messages. (default: read_uncommitted)")
    p.add_argument("--skip-message-on-error", action="store_true",
                   help="If there is an error when processing a message, skip it instead of halt.")
    return p


def _body(argv: Sequence[str]) -> int:
    args = _build_parser().parse_args(argv)
    if not args.bootstrap_server:
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    if bool(args.topic) == bool(args.include):
        raise ToolError("Exactly one of --include/--topic is required.")
    if args.partition is not None and not args.topic:
        raise ToolError("The topic is required when partition is specified.")
    if args.offset is not None and args.partition is None:
        raise ToolError("The partition is required when offset is specified.")
    if args.from_beginning and args.offset is not None:
        raise ToolError("Options from-beginning and offset cannot be specified together.")
    if args.group and args.partition is not None:
        raise ToolError("Options group and partition cannot be specified together.")
    if args.isolation_level not in ("read_committed", "read_uncommitted"):
        raise ToolError(f"Invalid value for --isolation-level: {args.isolation_level}")
    start = "latest"
    if args.from_beginning:
        start = "earliest"
    if args.offset is not None:
        offset = args.offset.strip().lower()
        if offset in ("earliest", "latest"):
            start = offset
        else:
            try:
                start = int(offset)
            except ValueError:
                raise ToolError(f"The provided offset value '{args.offset}' is incorrect. Valid values are "
                                "'earliest', 'latest', or a non-negative long.") from None
            if start < 0:
                raise ToolError(f"The provided offset value '{args.offset}' is incorrect. Valid values are "
                                "'earliest', 'latest', or a non-negative long.")

    formatter_props = load_properties_file(args.formatter_config)
    formatter_props.update(parse_properties(args.property))
    if args.formatter not in _FORMATTERS:
        raise ToolError(f"Unknown formatter {args.formatter}; kafkapy knows {', '.join(_FORMATTERS)}")
    formatter_class = _FORMATTERS[args.formatter]
    formatter = Formatter(formatter_props) if formatter_class is None else formatter_class()
    settings = load_properties_file(args.consumer_config)
    settings["isolation.level"] = args.isolation_level
    settings["auto.offset.reset"] = "earliest" if start == "earliest" else "latest"
    settings.update(parse_properties(args.consumer_property, "consumer property"))

    clients = _client.connect(args.bootstrap_server)
    consumer = clients.consumer(settings, group_id=args.group)
    count = 0
    out = sys.stdout
    try:
        _position(clients, consumer, args, start)
        idle_deadline = None if args.timeout_ms is None else time.monotonic() + args.timeout_ms / 1000.0
        while args.max_messages is None or count < args.max_messages:
            wait_ms = POLL_SLICE_MS
            if idle_deadline is not None:
                remaining_ms = int((idle_deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0:
                    break
                wait_ms = min(wait_ms, remaining_ms)
            batches = consumer.poll(timeout_ms=wait_ms)
            got = False
            for records in batches.values():
                for record in records:
                    if args.max_messages is not None and count >= args.max_messages:
                        break
                    out.write(formatter.format(record))
                    count += 1
                    got = True
            if got:
                out.flush()
                if idle_deadline is not None:
                    idle_deadline = time.monotonic() + args.timeout_ms / 1000.0
        if args.group:
            consumer.commit()
    except _client.ClientError as exc:
        raise ToolError(f"Error processing message, terminating consumer process: {_client.describe_error(exc)}") \
            from None
    finally:
        try:
            out.flush()
        finally:
            sys.stderr.write(f"Processed a total of {count} messages\n")
            consumer.close()
            clients.close()
    return 0


def _position(clients, consumer, args, start) -> None:
    if args.group:
        if args.topic:
            consumer.subscribe([args.topic])
        else:
            regex = re.compile(args.include.replace(",", "|"))
            consumer.subscribe([t for t in clients.topic_names() if regex.fullmatch(t)])
        return
    if args.topic:
        topics = [args.topic]
    else:
        regex = re.compile(args.include.replace(",", "|"))
        topics = [t for t in clients.topic_names() if regex.fullmatch(t)]
    tps = []
    # Ask the admin side first: a consumer's metadata request may auto-create
    # the topic (allow.auto.create.topics), which a reader should never do.
    existing = set(clients.topic_names())
    for topic in topics:
        partitions = consumer.partitions_for(topic) if topic in existing else []
        if not partitions:
            raise ToolError(f"Topic '{topic}' does not exist or has no partitions")
        if args.partition is not None:
            if args.partition not in partitions:
                raise ToolError(f"Partition {args.partition} of topic '{topic}' does not exist")
            partitions = [args.partition]
        tps += [_client.TopicPartition(topic, p) for p in partitions]
    consumer.assign(tps)
    if start == "earliest":
        consumer.seek_to_beginning(tps)
    elif start == "latest":
        consumer.seek_to_end(tps)
    else:
        for tp in tps:
            consumer.seek(tp, start)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
