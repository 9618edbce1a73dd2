"""kafkapy-delete-records: move log start offsets forward (kafka-delete-records.sh).

Reads Kafka's offset JSON file::

    {"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}

(offset -1: up to the high watermark) and prints, as DeleteRecordsCommand does::

    Executing records delete operation
    Records delete operation completed:
    partition: t-0	low_watermark: 10
    partition: t-1	error: OFFSET_OUT_OF_RANGE: ...

Exit status 0 even if some partitions failed (Kafka's behaviour: the per
partition lines are the result); 1 for a bad file or an unreachable broker.
"""

from __future__ import annotations

import json
import sys
from typing import Optional, Sequence

from kafkapy.tools import _client
from kafkapy.tools._cli import ToolError, load_properties_file, parser, run


def parse_offset_json(text: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolError(f"The input string is not a valid JSON: {exc}") from None
    if not isinstance(data, dict) or "partitions" not in data:
        raise ToolError("Offset json file doesn't contain any partitions")
    version = data.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    offsets: dict = {}
    duplicates = []
    for item in data["partitions"]:
        try:
            tp = _client.TopicPartition(str(item["topic"]), int(item["partition"]))
            offset = int(item["offset"])
        except (KeyError, TypeError, ValueError):
            raise ToolError(f"Offset json file contains an invalid partition entry: {json.dumps(item)}") from None
        if tp in offsets:
            duplicates.append(f"{tp.topic}-{tp.partition}")
        offsets[tp] = offset
    if duplicates:
        raise ToolError(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    if not offsets:
        raise ToolError("Offset json file doesn't contain any partitions")
    return offsets


def _body(argv: Sequence[str]) -> int:
    p = parser("kafkapy-delete-records", "This tool helps to delete records of the given partitions down to the "
                                         "specified offset.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server to connect to.")
    p.add_argument("--offset-json-file", help="REQUIRED: The JSON file with offset per partition. The format to use is:\n"
                                              "{\"partitions\":\n  [{\"topic\": \"foo\", \"partition\": 1, "
                                              "\"offset\": 1}],\n \"version\":1\n}")
    p.add_argument("--command-config", help="A property file containing configs to be passed to Admin Client.")
    args = p.parse_args(argv)
    if not args.bootstrap_server:
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    if not args.offset_json_file:
        raise ToolError("Missing required argument \"[offset-json-file]\"")
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            offsets = parse_offset_json(f.read())
    except OSError as exc:
        raise ToolError(f"Cannot read {args.offset_json_file}: {exc.strerror}") from None
    out = sys.stdout
    out.write("Executing records delete operation\n")
    out.flush()
    clients = _client.connect(args.bootstrap_server, load_properties_file(args.command_config))
    try:
        results = clients.delete_records(offsets)
    except _client.ClientError as exc:
        raise ToolError(f"Error while deleting records: {_client.describe_error(exc)}") from None
    finally:
        clients.close()
    out.write("Records delete operation completed:\n")
    for tp in sorted(results):
        result = results[tp]
        if isinstance(result, BaseException):
            message = _client.describe_error(result) if isinstance(result, _client.ClientError) else str(result)
            name = getattr(result, "name", type(result).__name__)
            out.write(f"partition: {tp.topic}-{tp.partition}\terror: {name}: {message}\n")
        else:
            out.write(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {result}\n")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
