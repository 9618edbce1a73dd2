"""kafkapy-configs: describe and alter topic and broker configs (kafka-configs.sh).

``--describe`` prints Kafka's ConfigCommand layout:

    Dynamic configs for topic t are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}

(``--all`` prints "All configs for ..." with every entry).  ``--alter``
applies ``--add-config k=v,k2=[a,b]`` and ``--delete-config k,k2`` with
IncrementalAlterConfigs and prints ``Completed updating config for topic t.``
Entities: ``--entity-type topics|brokers --entity-name X``, or the shortcuts
``--topic X`` / ``--broker N`` / ``--broker-defaults``.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from kafkapy.tools import _client
from kafkapy.tools._cli import ToolError, load_properties_file, parse_config_list, parser, run

ENTITY_TYPES = ("topics", "brokers")
_SINGULAR = {"topics": "topic", "brokers": "broker"}


def _build_parser():
    p = parser("kafkapy-configs", "This tool helps to manipulate and describe entity config for a topic or broker")
    p.add_argument("--bootstrap-server", help="The Kafka servers to connect to.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    p.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument("--entity-type", help="Type of entity (topics/brokers)")
    p.add_argument("--entity-name", help="Name of entity (topic name/broker id)")
    p.add_argument("--entity-default", action="store_true", help="Default entity name for brokers")
    p.add_argument("--topic", help="The topic's name.")
    p.add_argument("--broker", help="The broker's ID.")
    p.add_argument("--broker-defaults", action="store_true", help="The config defaults for all brokers.")
    p.add_argument("--add-config", help="Key Value pairs of configs to add. Square brackets can be used to group "
                                        "values which contain commas: 'k1=v1,k2=[v1,v2,v2],k3=v3'.")
    p.add_argument("--add-config-file", help="Path to a properties file with configs to add.")
    p.add_argument("--delete-config", help="config keys to remove 'k1,k2'")
    p.add_argument("--all", action="store_true", help="List all configs for the given entity, including static "
                                                      "configs if available.")
    return p


def _entity(args) -> tuple[str, Optional[str]]:
    """(entity type, name or None for all / "" for the broker default)."""
    if args.topic is not None:
        return "topics", args.topic
    if args.broker is not None:
        return "brokers", args.broker
    if args.broker_defaults:
        return "brokers", ""
    if args.entity_type is None:
        raise ToolError("At least one of --entity-type, --topic, --broker or --broker-defaults must be specified")
    if args.entity_type not in ENTITY_TYPES:
        raise ToolError(f"Invalid entity type {args.entity_type}, the entity type must be one of "
                        f"{', '.join(ENTITY_TYPES)} (kafkapy has no users, clients, ips or client-metrics quotas)")
    if args.entity_default:
        if args.entity_type != "brokers":
            raise ToolError("--entity-default is only valid with --entity-type brokers")
        return "brokers", ""
    return args.entity_type, args.entity_name


def _body(argv: Sequence[str]) -> int:
    args = _build_parser().parse_args(argv)
    if args.describe == args.alter:
        raise ToolError("Command must include exactly one action: --describe, --alter")
    if not args.bootstrap_server:
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    entity_type, name = _entity(args)
    clients = _client.connect(args.bootstrap_server, load_properties_file(args.command_config))
    try:
        if args.describe:
            return _describe(clients, entity_type, name, args.all)
        if name is None:
            raise ToolError("an entity name must be specified with --alter")
        return _alter(clients, entity_type, name, args)
    except _client.ClientError as exc:
        raise ToolError(f"Error while executing config command with args '{' '.join(argv)}': "
                        f"{_client.describe_error(exc)}") from None
    finally:
        clients.close()


def _describe(clients, entity_type: str, name: Optional[str], show_all: bool) -> int:
    out = sys.stdout
    if name is None:
        names = clients.topic_names() if entity_type == "topics" else \
            [str(b) for b in sorted({r for t in clients.describe_topics(clients.topic_names())
                                     for p in t.partitions for r in p.replicas})] + [""]
    else:
        names = [name]
    for entity_name in names:
        resource_name = entity_name
        if entity_type == "topics":
            wanted = {"DYNAMIC_TOPIC_CONFIG"}
            label = f"topic {entity_name}"
        elif entity_name == "":
            wanted = {"DYNAMIC_DEFAULT_BROKER_CONFIG"}
            label = "the broker default"
        else:
            wanted = {"DYNAMIC_BROKER_CONFIG"}
            label = f"broker {entity_name}"
        entries = clients.describe_configs(entity_type, resource_name)
        if not show_all:
            entries = [e for e in entries if e.source in wanted]
        out.write(f"{'All' if show_all else 'Dynamic'} configs for {label} are:\n")
        for e in entries:
            value = "null" if e.is_sensitive or e.value is None else e.value
            synonyms = ", ".join(f"{source}:{sname}={'null' if e.is_sensitive or svalue is None else svalue}"
                                 for sname, svalue, source in e.synonyms)
            out.write(f"  {e.name}={value} sensitive={'true' if e.is_sensitive else 'false'} synonyms={{{synonyms}}}\n")
    return 0


def _alter(clients, entity_type: str, name: str, args) -> int:
    to_add = parse_config_list(args.add_config) if args.add_config else {}
    if args.add_config_file:
        to_add.update(load_properties_file(args.add_config_file))
    to_delete = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if not to_add and not to_delete:
        raise ToolError("At least one of --add-config, --add-config-file or --delete-config must be specified "
                        "with --alter")
    both = sorted(set(to_add) & set(to_delete))
    if both:
        raise ToolError(f"Invalid entity config: the same config(s) cannot be both added and deleted: {','.join(both)}")
    if entity_type == "topics" and to_delete:
        current = {e.name for e in clients.describe_configs("topics", name) if e.source == "DYNAMIC_TOPIC_CONFIG"}
        invalid = [k for k in to_delete if k not in current]
        if invalid:
            raise ToolError(f"Invalid config(s): {','.join(invalid)}")
    clients.alter_configs(entity_type, name, to_add, to_delete)
    if entity_type == "brokers" and name == "":
        sys.stdout.write("Completed updating default config for brokers in the cluster.\n")
    else:
        sys.stdout.write(f"Completed updating config for {_SINGULAR[entity_type]} {name}.\n")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
