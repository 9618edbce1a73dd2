"""kafkapy-topics: create, delete, describe, list and alter topics (kafka-topics.sh).

Options, messages and the ``--describe`` layout are Kafka's TopicCommand:

    Topic: t	TopicId: ...	PartitionCount: 2	ReplicationFactor: 1	Configs: retention.ms=1000
    	Topic: t	Partition: 0	Leader: 1	Replicas: 1	Isr: 1	Elr: N/A	LastKnownElr: N/A

``--topic`` is a regular expression (Kafka's IncludeList: commas mean "or",
surrounding quotes dropped, whole-name match) for every action but --create.
Errors print ``Error while executing topic command : <message>`` and exit 1.
"""

from __future__ import annotations

import re
import sys
from typing import Optional, Sequence

from kafkapy.tools import _client
from kafkapy.tools._cli import ToolError, load_properties_file, parse_properties, parser, run

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
_ACTIONS = ("create", "delete", "list", "describe", "alter")


def include_list(raw: str):
    pattern = raw.strip().replace(",", "|").strip("\"'")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"Error while executing topic command : Invalid regular expression '{raw}': {exc}") from None


def _fail(message: str) -> ToolError:
    return ToolError(f"Error while executing topic command : {message}")


def _matching(clients, topic: Optional[str], exclude_internal: bool) -> list[str]:
    names = clients.topic_names()
    if topic is not None:
        regex = include_list(topic)
        names = [n for n in names if regex.fullmatch(n)]
    if exclude_internal:
        names = [n for n in names if n not in INTERNAL_TOPICS]
    return sorted(names)


def _ensure_exists(found: list[str], topic: Optional[str], required: bool) -> None:
    if topic is not None and required and not found:
        raise _fail(f"Topic '{topic}' does not exist as expected")


def _build_parser():
    p = parser("kafkapy-topics", "Create, delete, describe, or change a topic.")
    actions = p.add_mutually_exclusive_group()
    actions.add_argument("--create", action="store_true", help="Create a new topic.")
    actions.add_argument("--delete", action="store_true", help="Delete a topic")
    actions.add_argument("--list", action="store_true", help="List all available topics.")
    actions.add_argument("--describe", action="store_true", help="List details for the given topics.")
    actions.add_argument("--alter", action="store_true",
                         help="Alter the number of partitions and replica assignment.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The Kafka server to connect to.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--topic", help="The topic to create, alter, describe or delete. It also accepts a regular "
                                   "expression, except for --create option.")
    p.add_argument("--partitions", type=int, help="The number of partitions for the topic being created or altered.")
    p.add_argument("--replication-factor", type=int,
                   help="The replication factor for each partition in the topic being created.")
    p.add_argument("--config", action="append", default=[],
                   help="A topic configuration override for the topic being created (key=value).")
    p.add_argument("--if-not-exists", action="store_true",
                   help="if set when creating topics, the action will only execute if the topic does not already exist.")
    p.add_argument("--if-exists", action="store_true",
                   help="if set when altering or deleting or describing topics, the action will only execute if the "
                        "topic exists.")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="if set when describing topics, only show under replicated partitions")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="if set when describing topics, only show partitions whose leader is not available")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="if set when describing topics, only show topics that have overridden configs")
    p.add_argument("--exclude-internal", action="store_true",
                   help="exclude internal topics when running list or describe command.")
    return p


def _body(argv: Sequence[str]) -> int:
    args = _build_parser().parse_args(argv)
    action = next((a for a in _ACTIONS if getattr(args, a)), None)
    if action is None:
        raise ToolError("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    if not args.bootstrap_server:
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    if action in ("create", "alter", "delete") and not args.topic:
        raise ToolError(f"Missing required argument \"[topic]\" for --{action}")
    if args.config and action != "create":
        raise ToolError("Option \"[config]\" can't be used with option \"[%s]\"" % action)
    if action == "alter" and args.partitions is None:
        raise ToolError("Missing required argument \"[partitions]\" for --alter")
    configs = parse_properties(args.config, "topic config")
    clients = _client.connect(args.bootstrap_server, load_properties_file(args.command_config))
    try:
        return _dispatch(action, args, clients, configs)
    except _client.ClientError as exc:
        raise _fail(_message(exc, args.topic)) from None
    finally:
        clients.close()


def _message(exc: _client.ClientError, topic: Optional[str]) -> str:
    if exc.name == "TOPIC_ALREADY_EXISTS":
        return f"Topic '{topic}' already exists."
    return _client.describe_error(exc)


def _dispatch(action: str, args, clients, configs: dict) -> int:
    out = sys.stdout
    if action == "create":
        if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
            raise _fail("The replication factor must be between 1 and 32767 inclusive")
        if args.partitions is not None and args.partitions < 1:
            raise _fail("The partitions must be greater than 0")
        if "." in args.topic and "_" in args.topic:
            out.write("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                      "could collide. To avoid issues it is best to use either, but not both.\n")
        try:
            clients.create_topic(args.topic, args.partitions, args.replication_factor, configs)
        except _client.ClientError as exc:
            if exc.name == "TOPIC_ALREADY_EXISTS" and args.if_not_exists:
                return 0
            raise
        out.write(f"Created topic {args.topic}.\n")
        return 0

    if action == "list":
        for name in _matching(clients, args.topic, args.exclude_internal):
            out.write(name + "\n")
        return 0

    topics = _matching(clients, args.topic, args.exclude_internal and action == "describe")
    _ensure_exists(topics, args.topic, not args.if_exists)

    if action == "delete":
        internal = [t for t in topics if t in INTERNAL_TOPICS]
        if internal:
            raise _fail(f"Topic {internal[0]} is a kafka internal topic and is not allowed to be marked for deletion.")
        for name in topics:
            clients.delete_topic(name)
        return 0

    if action == "alter":
        for info in clients.describe_topics(topics):
            if args.partitions <= len(info.partitions):
                raise _fail(f"Topic currently has {len(info.partitions)} partitions, which is higher than the "
                            f"requested {args.partitions}.")
            clients.create_partitions(info.name, args.partitions)
        return 0

    _describe(clients, topics, args, out)
    return 0


def _describe(clients, topics: list[str], args, out) -> None:
    report_filters = args.under_replicated_partitions or args.unavailable_partitions
    describe_configs = not report_filters
    live = None
    for info in clients.describe_topics(topics):
        overrides = []
        if describe_configs or args.topics_with_overrides:
            try:
                overrides = [e for e in clients.describe_configs("topics", info.name) if not e.is_default]
            except _client.ClientError as exc:
                # A broker without DescribeConfigs still gets the rest of the
                # description, with an empty Configs field.
                if exc.name not in ("UNSUPPORTED_VERSION", "INVALID_REQUEST", "NETWORK_EXCEPTION"):
                    raise
        replication_factor = len(info.partitions[0].replicas) if info.partitions else 0
        if describe_configs and (not args.topics_with_overrides or overrides):
            line = f"Topic: {info.name}"
            if info.topic_id and info.topic_id != "AAAAAAAAAAAAAAAAAAAAAA":
                line += f"\tTopicId: {info.topic_id}"
            line += f"\tPartitionCount: {len(info.partitions)}\tReplicationFactor: {replication_factor}"
            line += "\tConfigs: " + ",".join(f"{e.name}={'' if e.value is None else e.value}" for e in overrides)
            out.write(line + "\n")
        if args.topics_with_overrides:
            continue
        for part in info.partitions:
            if args.under_replicated_partitions and not len(part.replicas) - len(part.isr) > 0:
                continue
            if args.unavailable_partitions:
                if live is None:
                    live = {b for p in info.partitions for b in p.isr}
                if part.leader >= 0 and part.leader in live:
                    continue
            out.write(f"\tTopic: {info.name}\tPartition: {part.partition}"
                      f"\tLeader: {part.leader if part.leader >= 0 else 'none'}"
                      f"\tReplicas: {','.join(map(str, part.replicas))}"
                      f"\tIsr: {','.join(map(str, part.isr))}\tElr: N/A\tLastKnownElr: N/A\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
