"""kafkapy-configs: describe and alter topic, broker, user and client configs (kafka-configs.sh).

``--describe`` prints Kafka's ConfigCommand layout:

    Dynamic configs for topic t are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}

(``--all`` prints "All configs for ..." with every entry).  ``--alter``
applies ``--add-config k=v,k2=[a,b]`` and ``--delete-config k,k2`` with
IncrementalAlterConfigs and prints ``Completed updating config for topic t.``
Entities: ``--entity-type topics|brokers --entity-name X``, or the shortcuts
``--topic X`` / ``--broker N`` / ``--broker-defaults``.

Client quotas (``--entity-type users|clients``, both for a (user, client-id)
entity, each with ``--entity-name X`` or ``--entity-default``, in the order
given; or ``--user X`` / ``--client X`` / ``--user-defaults`` /
``--client-defaults``): ``--describe`` prints Kafka's ``Quota configs for
user-principal 'alice', client-id 'c1' are producer_byte_rate=1048576.0``
per matching entity (DescribeClientQuotas); ``--alter`` with the quota keys
(``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``) sends AlterClientQuotas and prints
``Completed updating config for user alice.`` (``... default config for
users in the cluster.`` for a default). IP entities (``--entity-type ips`` or ``--ip`` /
``--ip-defaults``) take ``connection_creation_rate``.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from kafkapy.tools import _client, _quotas
from kafkapy.tools._cli import ToolError, load_properties_file, parse_config_list, parser, run

ENTITY_TYPES = ("topics", "brokers", "users", "clients", "ips")
_SINGULAR = {"topics": "topic", "brokers": "broker"}
QUOTA_TYPES = ("users", "clients", "ips")
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
_WIRE_TYPE = {"users": "user", "clients": "client-id", "ips": "ip"}
IP_KEYS = ("connection_creation_rate",)


def _build_parser():
    p = parser("kafkapy-configs", "This tool helps to manipulate and describe entity config for a topic, client, "
                                  "user or broker")
    p.add_argument("--bootstrap-server", help="The Kafka servers to connect to.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    p.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument("--entity-type", action="append", help="Type of entity (topics/clients/users/brokers)")
    p.add_argument("--entity-name", action="append", help="Name of entity (topic name/client id/user principal "
                                                          "name/broker id)")
    p.add_argument("--entity-default", action="append_const", const="",
                   help="Default entity name for clients/users/brokers (applies to corresponding entity type)")
    p.add_argument("--user", help="The user's principal name.")
    p.add_argument("--client", help="The client's ID.")
    p.add_argument("--user-defaults", action="store_true", help="The config defaults for all users.")
    p.add_argument("--client-defaults", action="store_true", help="The config defaults for all clients.")
    p.add_argument("--ip", help="The IP address.")
    p.add_argument("--ip-defaults", action="store_true", help="The config defaults for all IPs.")
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


def _quota_entity(args, argv) -> Optional[list]:
    """``[(users|clients, name or "" for the default or None for all)]`` when the
    entity is a user and/or client (names in the order given, Kafka's
    ConfigCommandOptions.entityNames), else None."""
    types = list(args.entity_type or [])
    names = []
    given = iter(args.entity_name or [])
    for token in argv:
        if token == "--entity-name" or token.startswith("--entity-name="):
            names.append(next(given))
        elif token == "--entity-default":
            names.append("")
    flags = [("users", args.user), ("clients", args.client), ("ips", args.ip)]
    flags += [(t, "") for t, on in (("clients", args.client_defaults), ("users", args.user_defaults),
                                    ("ips", args.ip_defaults)) if on]
    flags = [(t, n) for t, n in flags if n is not None]
    if flags and (types or names):
        raise ToolError("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
    if flags:
        types, names = [t for t, _ in flags], [n for _, n in flags]
    if not types or not set(types) & set(QUOTA_TYPES):
        return None
    if len(types) != len(set(types)):
        raise ToolError(f"Duplicate entity type(s) specified: {','.join(sorted({t for t in types if types.count(t) > 1}))}")
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise ToolError("Only 'users' and 'clients' entity types may be specified together")
    if len(names) > len(types):
        raise ToolError("More entity names specified than entity types")
    return [(t, names[i] if i < len(names) else None) for i, t in enumerate(types)]


def _entity(args) -> tuple[str, Optional[str]]:
    """(entity type, name or None for all / "" for the broker default)."""
    if args.entity_type is not None:
        if len(args.entity_type) > 1:
            raise ToolError("Only 'users' and 'clients' entity types may be specified together")
        args.entity_type = args.entity_type[0]
    if args.entity_name is not None:
        args.entity_name = args.entity_name[-1]
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
                        f"{', '.join(ENTITY_TYPES)} (kafkapy has no ips or client-metrics configs)")
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
    quota_entity = _quota_entity(args, argv)
    if quota_entity is not None:
        try:
            if args.describe and quota_entity[0][0] == "ips":
                return _describe_quotas(args, quota_entity)
            if args.describe:
                return _describe_quotas(args, quota_entity) or _describe_scram(args, quota_entity)
            if _alter_scram(args, quota_entity):
                return 0
            return _alter_quotas(args, quota_entity)
        except (_client.ClientError, OSError) as exc:
            detail = _client.describe_error(exc) if isinstance(exc, _client.ClientError) else str(exc)
            raise ToolError(f"Error while executing config command with args '{' '.join(argv)}': {detail}") from None
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


def _requested(args) -> tuple[dict, list]:
    """(configs to add, keys to delete) of --add-config[-file] / --delete-config."""
    to_add = parse_config_list(args.add_config) if args.add_config else {}
    if args.add_config_file:
        to_add.update(load_properties_file(args.add_config_file))
    to_delete = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if not to_add and not to_delete:
        raise ToolError("At least one of --add-config, --add-config-file or --delete-config must be specified "
                        "with --alter")
    return to_add, to_delete


def _alter(clients, entity_type: str, name: str, args) -> int:
    to_add, to_delete = _requested(args)
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


def _java_double(value: float) -> str:
    from kafkapy.protocol.java_text import java_double  # Kafka prints Java's Double.toString

    return java_double(value)


def _describe_quotas(args, entity) -> int:
    components = [(_WIRE_TYPE[t], n) for t, n in entity]
    props = load_properties_file(args.command_config)
    for parts, values in _quotas.describe(args.bootstrap_server, props, components, strict=True):
        names = dict(parts)
        described = []
        for wire, label in (("user", "user-principal"), ("client-id", "client-id"), ("ip", "ip")):
            if wire in names:
                described.append(f"{label} '{names[wire]}'" if names[wire] is not None else f"the default {label}")
        values_text = ", ".join(f"{k}={_java_double(v)}" for k, v in sorted(values.items()))
        sys.stdout.write(f"Quota configs for {', '.join(described)} are {values_text}\n")
    return 0


def _alter_quotas(args, entity) -> int:
    if any(n is None for _, n in entity):
        raise ToolError("an entity name must be specified with --alter")
    to_add, to_delete = _requested(args)
    if entity[0][0] == "ips":
        unknown = [k for k in list(to_add) + to_delete if k not in IP_KEYS]
        if unknown:
            raise ToolError("Only connection quota configs can be added for 'ips' using --bootstrap-server. "
                            f"Unexpected config names: {','.join(unknown)}")
    unknown = [k for k in list(to_add) + to_delete if k not in QUOTA_KEYS + IP_KEYS]
    if unknown:
        # SCRAM credentials (SCRAM-SHA-256=[password=...]) go through AlterUserScramCredentials
        raise ToolError(f"Invalid config(s): {','.join(unknown)} (only client quota configs: {', '.join(QUOTA_KEYS)})")
    components = [(_WIRE_TYPE[t], n) for t, n in entity]
    props = load_properties_file(args.command_config)
    found = _quotas.describe(args.bootstrap_server, props, components, strict=True)
    current = found[0][1] if found else {}
    invalid = [k for k in to_delete if k not in current]
    if invalid:
        raise ToolError(f"Invalid config(s): {','.join(invalid)}")
    values = {}
    for key, value in to_add.items():
        try:
            values[key] = float(value)
        except ValueError:
            raise ToolError(f"Cannot parse quota configuration value for {key}: {value}") from None
    _quotas.alter(args.bootstrap_server, props, [(_WIRE_TYPE[t], n or None) for t, n in entity], values, to_delete)
    head_type, head_name = entity[0]
    if head_name:
        sys.stdout.write(f"Completed updating config for {head_type[:-1]} {head_name}.\n")
    else:
        sys.stdout.write(f"Completed updating default config for {head_type} in the cluster.\n")
    return 0


def _describe_scram(args, entity) -> int:
    """Users' SCRAM credentials after their quotas (Kafka: not with a client
    entity or a default user)."""
    from kafkapy.tools import _scram

    if any(t == "clients" or n == "" for t, n in entity):
        return 0
    props = load_properties_file(args.command_config)
    for line in _scram.describe(args.bootstrap_server, props, [n for _, n in entity if n is not None]):
        sys.stdout.write(line + "\n")
    return 0


def _alter_scram(args, entity) -> bool:
    """``SCRAM-SHA-256=[iterations=N,password=P]`` / ``--delete-config SCRAM-SHA-512``
    for one user (AlterUserScramCredentials); False when no SCRAM key is named."""
    from kafkapy.tools import _scram

    to_add = parse_config_list(args.add_config) if args.add_config else {}
    to_delete = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    scram_add = {k: v for k, v in to_add.items() if _scram.is_scram(k)}
    scram_delete = [k for k in to_delete if _scram.is_scram(k)]
    if not scram_add and not scram_delete:
        return False
    if any(t == "clients" for t, _ in entity):
        raise ToolError("Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config "
                        f"names: {','.join(list(scram_add) + scram_delete)}")
    if entity[0][1] in ("", None):
        raise ToolError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                        "Credentials using --bootstrap-server.")
    if len(scram_add) != len(to_add) or len(scram_delete) != len(to_delete):
        raise ToolError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
                        "--bootstrap-server.")
    try:
        _scram.alter(args.bootstrap_server, load_properties_file(args.command_config), entity[0][1],
                     scram_add, scram_delete)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    sys.stdout.write(f"Completed updating config for user {entity[0][1]}.\n")
    return True


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
