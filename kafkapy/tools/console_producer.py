"""kafkapy-console-producer: send stdin lines as records (kafka-console-producer.sh).

Each line is one record's value.  Kafka's LineMessageReader properties work
through ``--property``: ``parse.key=true`` with ``key.separator`` (default a
tab) splits key from value, ``parse.headers=true`` with ``headers.delimiter``
(tab), ``headers.separator`` (",") and ``headers.key.separator`` (":") reads
headers in front of the key, ``null.marker`` turns a matching key, value or
header value into null, and ``ignore.error=true`` sends a line without a key
separator as a value instead of failing.

Like Kafka's tool the default is asynchronous sending with ``acks=-1``
(``--request-required-acks``) and ``linger.ms=1000`` (``--timeout``);
``--sync`` waits for each record.  A send error stops the tool with one line
on stderr and exit 1.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from kafkapy.tools import _client
from kafkapy.tools._cli import ToolError, load_properties_file, parse_properties, parser, run

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class LineReader:
    """Kafka's LineMessageReader: one stdin line -> (key, value, headers)."""

    def __init__(self, props: dict):
        self.parse_key = props.get("parse.key", "false").strip().lower() == "true"
        self.key_separator = props.get("key.separator", "\t")
        self.ignore_error = props.get("ignore.error", "false").strip().lower() == "true"
        self.parse_headers = props.get("parse.headers", "false").strip().lower() == "true"
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.null_marker = props.get("null.marker")
        if self.null_marker is not None and self.null_marker in ("",):
            self.null_marker = None
        if self.parse_key and self.key_separator == "":
            raise ToolError("key.separator must not be empty")
        self.line_number = 0

    def _nullable(self, text: str) -> Optional[bytes]:
        return None if self.null_marker is not None and text == self.null_marker else text.encode("utf-8")

    def read(self, line: str):
        self.line_number += 1
        headers = []
        if self.parse_headers:
            head, sep, rest = line.partition(self.headers_delimiter)
            if not sep:
                if not self.ignore_error:
                    raise ToolError(f"No headers delimiter found on line number {self.line_number}: '{line}'")
                rest = line
            else:
                for item in head.split(self.headers_separator) if head else ():
                    hkey, hsep, hvalue = item.partition(self.headers_key_separator)
                    if self.null_marker is not None and hkey == self.null_marker:
                        raise ToolError(f"Header keys should not be equal to the null marker '{self.null_marker}'"
                                        f" as they can't be null. Line number {self.line_number}")
                    headers.append((hkey, self._nullable(hvalue) if hsep else None))
            line = rest
        key = None
        if self.parse_key:
            key_text, sep, value_text = line.partition(self.key_separator)
            if not sep:
                if not self.ignore_error:
                    raise ToolError(f"No key separator found on line number {self.line_number}: '{line}'")
                return None, self._nullable(line), headers
            return self._nullable(key_text), self._nullable(value_text), headers
        return key, self._nullable(line), headers


def _build_parser():
    p = parser("kafkapy-console-producer", "This tool helps to read data from standard input and publish it to Kafka.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--topic", help="REQUIRED: The topic id to produce messages to.")
    p.add_argument("--property", action="append", default=[],
                   help="A mechanism to pass user-defined properties in the form key=value to the message reader.")
    p.add_argument("--reader-property", action="append", default=[], dest="reader_property",
                   help="Same as --property.")
    p.add_argument("--producer-property", action="append", default=[],
                   help="A mechanism to pass user-defined properties in the form key=value to the producer.")
    p.add_argument("--producer.config", "--command-config", dest="producer_config",
                   help="Producer config properties file.")
    p.add_argument("--compression-codec", nargs="?", const="gzip",
                   help="The compression codec: either 'none', 'gzip', 'snappy', 'lz4', or 'zstd'. "
                        "If specified without value, then it defaults to 'gzip'")
    p.add_argument("--sync", action="store_true", help="If set message send requests to the brokers are synchronously.")
    p.add_argument("--request-required-acks", default="-1", help="The required acks of the producer requests")
    p.add_argument("--timeout", type=int, default=1000,
                   help="If set and the producer is running in asynchronous mode, this gives the maximum amount of "
                        "time a message will queue awaiting sufficient batch size. The value is given in ms.")
    p.add_argument("--batch-size", type=int, help="Number of messages to send in a single batch.")
    p.add_argument("--message-send-max-retries", type=int, help="Number of retries.")
    p.add_argument("--max-block-ms", type=int, help="The max time that the producer will block for during a send request.")
    return p


def _body(argv: Sequence[str]) -> int:
    args = _build_parser().parse_args(argv)
    if not args.bootstrap_server:
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    if not args.topic:
        raise ToolError("Missing required argument \"[topic]\"")
    settings = load_properties_file(args.producer_config)
    settings["acks"] = args.request_required_acks
    settings["linger.ms"] = str(args.timeout)
    if args.compression_codec is not None:
        if args.compression_codec not in CODECS:
            raise ToolError(f"Invalid compression codec '{args.compression_codec}'; expected one of {', '.join(CODECS)}")
        settings["compression.type"] = args.compression_codec
    if args.batch_size is not None:
        settings["batch.size"] = str(args.batch_size)
    if args.message_send_max_retries is not None:
        settings["retries"] = str(args.message_send_max_retries)
    if args.max_block_ms is not None:
        settings["max.block.ms"] = str(args.max_block_ms)
    settings.update(parse_properties(args.producer_property, "producer property"))
    reader = LineReader(parse_properties(args.property + args.reader_property))

    clients = _client.connect(args.bootstrap_server)
    producer = clients.producer(settings)
    failures: list[BaseException] = []
    pending = []
    try:
        for raw in sys.stdin.buffer:
            line = raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
            key, value, headers = reader.read(line)
            future = producer.send(args.topic, value=value, key=key, headers=headers or None)
            if args.sync:
                _wait(future)
            else:
                pending.append(future)
                # Reap finished sends so memory stays bounded on long inputs.
                if len(pending) >= 10000:
                    _reap(pending, failures)
                    if failures:
                        break
        producer.flush()
        _reap(pending, failures, wait=True)
    finally:
        producer.close()
        clients.close()
    if failures:
        raise failures[0]
    return 0


def _wait(future) -> None:
    try:
        future.result(timeout=_client.DEFAULT_TIMEOUT_S)
    except _client.ClientError as exc:
        raise ToolError(f"Error when sending message to topic: {_client.describe_error(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - kafkapy.client raises its own KafkaError
        raise ToolError(f"Error when sending message to topic: {exc}") from None


def _reap(pending: list, failures: list, wait: bool = False) -> None:
    still = []
    for future in pending:
        if not wait and not future.done():
            still.append(future)
            continue
        try:
            _wait(future)
        except ToolError as exc:
            failures.append(exc)
            break
    pending[:] = still


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
