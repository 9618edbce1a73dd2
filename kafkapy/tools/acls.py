"""kafkapy-acls: add, remove and list ACLs (Kafka's kafka-acls.sh, the
``--bootstrap-server`` mode: CreateAcls, DeleteAcls, DescribeAcls).

Options and output are Kafka 3.9's AclCommand:

    kafkapy-acls --bootstrap-server HOST:9092 --command-config admin.properties \\
        --add --allow-principal User:alice --operation Read --topic t
    Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:
     	(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

``--list`` prints ``Current ACLs for resource `...`:`` blocks (``--principal``
narrows them, under ``ACLs for principal `User:alice```); ``--remove``
asks ``Are you sure ...? (y/n)`` unless ``--force``. ``--producer`` is
Write, Describe and Create on the topics and Write, Describe on the
transactional ids (``--idempotent``: IdempotentWrite on the cluster);
``--consumer`` is Read, Describe on the topics and Read on the groups.
Hosts default to ``*`` for the principals given. ``--command-config`` takes
a Java client's security properties (``kafkapy.tools._secure_conn``).
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from kafkapy.protocol import acls as A
from kafkapy.tools._cli import ToolError, load_properties_file, parser, run
from kafkapy.tools._client import ClientError

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
_VERSION = 1  # the first with pattern types; non-flexible (Kafka 2.0+ and kafkapy serve it)
CLUSTER_FILTER = A.ResourcePatternFilter(A.CLUSTER, A.CLUSTER_NAME, A.LITERAL)
_PATTERN_TYPES = {"ANY": A.PT_ANY, "MATCH": A.MATCH, "LITERAL": A.LITERAL, "PREFIXED": A.PREFIXED}


def _build_parser():
    p = parser("kafkapy-acls", "This tool helps to manage acls on kafka.")
    p.add_argument("--bootstrap-server", help="A list of host/port pairs to use for establishing the connection "
                                              "to the Kafka cluster.")
    p.add_argument("--command-config", help="A property file containing configs to be passed to Admin Client.")
    p.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    p.add_argument("--remove", action="store_true", help="Indicates you are trying to remove ACLs.")
    p.add_argument("--list", action="store_true", help="List ACLs for the specified resource.")
    p.add_argument("--topic", action="append", help="topic to which ACLs should be added or removed.")
    p.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    p.add_argument("--group", action="append", help="Consumer Group to which the ACLs should be added or removed.")
    p.add_argument("--transactional-id", action="append", help="The transactionalId to which ACLs should be added "
                                                               "or removed.")
    p.add_argument("--delegation-token", action="append", help="Delegation token to which ACLs should be added "
                                                               "or removed.")
    p.add_argument("--resource-pattern-type", default="literal",
                   help="The type of the resource pattern or pattern filter: literal, prefixed, any, match.")
    p.add_argument("--operation", action="append", help="Operation that is being allowed or denied.")
    p.add_argument("--allow-principal", action="append", help="principal is in principalType:name format.")
    p.add_argument("--deny-principal", action="append", help="principal is in principalType:name format.")
    p.add_argument("--principal", action="append", help="List ACLs for the specified principal.")
    p.add_argument("--allow-host", action="append", help="Host from which principals listed in --allow-principal "
                                                         "will have access.")
    p.add_argument("--deny-host", action="append", help="Host from which principals listed in --deny-principal "
                                                        "will be denied access.")
    p.add_argument("--producer", action="store_true", help="Convenience option to add/remove ACLs for producer role.")
    p.add_argument("--consumer", action="store_true", help="Convenience option to add/remove ACLs for consumer role.")
    p.add_argument("--idempotent", action="store_true", help="Enable idempotence for the producer.")
    p.add_argument("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    return p


def _check(args) -> None:
    """AclCommandOptions.checkArgs."""
    if not args.bootstrap_server:
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    if sum((args.add, args.remove, args.list)) != 1:
        raise ToolError("Command must include exactly one action: --list, --add, --remove. ")
    if args.list and (args.producer or args.consumer or args.allow_host or args.allow_principal
                      or args.deny_host or args.deny_principal):
        raise ToolError("Option \"[list]\" can't be used with option \"[producer, consumer, allow-host, "
                        "allow-principal, deny-host, deny-principal]\"")
    if (args.producer or args.consumer) and (args.operation or args.deny_principal or args.deny_host):
        raise ToolError("Option \"[producer|consumer]\" can't be used with option \"[operation, deny-principal, "
                        "deny-host]\"")
    if args.principal and not args.list:
        raise ToolError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise ToolError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise ToolError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group or
                          (not args.producer and (args.cluster or args.transactional_id))):
        raise ToolError("With --consumer you must specify a --topic and a --group and no --cluster or "
                        "--transactional-id option should be specified.")


def _pattern_type(args) -> int:
    value = _PATTERN_TYPES.get(args.resource_pattern_type.strip().upper())
    if value is None:
        raise ToolError(f"Unknown resource-pattern-type: {args.resource_pattern_type}")
    return value


def _filters(args, pattern_type: int, die_if_none: bool = True) -> list:
    """AclCommand.getResourceFilter, in Kafka's order."""
    out = [A.ResourcePatternFilter(A.TOPIC, t.strip(), pattern_type) for t in args.topic or ()]
    if pattern_type == A.LITERAL and (args.cluster or args.idempotent):
        out.append(CLUSTER_FILTER)
    out += [A.ResourcePatternFilter(A.GROUP, g.strip(), pattern_type) for g in args.group or ()]
    out += [A.ResourcePatternFilter(A.TRANSACTIONAL_ID, t, pattern_type) for t in args.transactional_id or ()]
    out += [A.ResourcePatternFilter(A.DELEGATION_TOKEN, t.strip(), pattern_type) for t in args.delegation_token or ()]
    if not out and die_if_none:
        raise ToolError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
                        "--delegation-token <Delegation Token ID>")
    return list(dict.fromkeys(out))


def _principals(values) -> list:
    out = []
    for value in values or ():
        try:
            A.parse_principal(value.strip())
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        out.append(value.strip())
    return out


def _entries(args, operations) -> set:
    """AclCommand.getAcl: each allowed/denied principal x operation x host (hosts default to *)."""
    allowed, denied = _principals(args.allow_principal), _principals(args.deny_principal)
    allow_hosts = [h.strip() for h in args.allow_host] if args.allow_host else (["*"] if allowed else [])
    deny_hosts = [h.strip() for h in args.deny_host] if args.deny_host else (["*"] if denied else [])
    out = set()
    for principals, hosts, permission in ((allowed, allow_hosts, A.ALLOW), (denied, deny_hosts, A.DENY)):
        out.update(A.AccessControlEntry(p, h, op, permission) for p in principals for op in operations for h in hosts)
    return out


def _filter_to_entries(args, pattern_type: int) -> dict:
    """AclCommand.getResourceFilterToAcls: resource filter -> entries, with --producer/--consumer."""
    out: dict = {}
    if not args.producer and not args.consumer:
        operations = []
        for name in args.operation or ["All"]:
            op = A.operation_from_name(name)
            if op in (A.OP_UNKNOWN, A.OP_ANY):
                raise ToolError(f"Unknown operation: {name}")
            operations.append(op)
        entries = _entries(args, operations)
        out.update({f: set(entries) for f in _filters(args, pattern_type)})
    if args.producer:
        filters = _filters(args, pattern_type)
        for f in filters:
            if f.resource_type == A.TOPIC:
                out[f] = _entries(args, (A.WRITE, A.DESCRIBE, A.CREATE))
            elif f.resource_type == A.TRANSACTIONAL_ID:
                out[f] = _entries(args, (A.WRITE, A.DESCRIBE))
        if args.idempotent:
            out[CLUSTER_FILTER] = _entries(args, (A.IDEMPOTENT_WRITE,))
    if args.consumer:
        for f in _filters(args, pattern_type):
            if f.resource_type == A.TOPIC:
                out[f] = out.get(f, set()) | _entries(args, (A.READ, A.DESCRIBE))
            elif f.resource_type == A.GROUP:
                out[f] = out.get(f, set()) | _entries(args, (A.READ,))
    for f, entries in out.items():  # validateOperation
        valid = set(A.SUPPORTED_OPERATIONS[f.resource_type]) | {A.ALL}
        if any(e.operation not in valid for e in entries):
            names = ", ".join(A.OPERATION_NAME[op] for op in sorted(valid))
            raise ToolError(f"ResourceType {A.RESOURCE_TYPE_ENUM[f.resource_type]} only supports operations {names}")
    return out


def _block(title: str, entries) -> str:
    """Kafka's ``s"$title: $Newline ${acls.map("\\t" + _).mkString(Newline)} $Newline"``."""
    return f"{title}: \n " + "\n".join("\t" + str(e) for e in sorted(entries)) + " \n"


def _add(conn, args) -> None:
    pattern_type = _pattern_type(args)
    if pattern_type not in (A.LITERAL, A.PREFIXED):
        raise ToolError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type.upper()}' is not valid "
                        "when adding acls.")
    for f, entries in _filter_to_entries(args, pattern_type).items():
        if not entries:
            raise ToolError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    for f, entries in _filter_to_entries(args, pattern_type).items():
        resource = A.ResourcePattern(f.resource_type, f.name, f.pattern_type)
        print(_block(f"Adding ACLs for resource `{resource}`", entries))
        entries = sorted(entries)
        answer = conn.request(CREATE_ACLS, _VERSION, {"creations": [
            {"resource_type": resource.resource_type, "resource_name": resource.name,
             "resource_pattern_type": resource.pattern_type, "principal": e.principal, "host": e.host,
             "operation": e.operation, "permission_type": e.permission_type} for e in entries]})
        for result in answer.results:
            if result.error_code:
                raise ClientError.from_code(result.error_code, result.error_message)


def _describe(conn, f: A.ResourcePatternFilter) -> dict:
    answer = conn.request(DESCRIBE_ACLS, _VERSION, {
        "resource_type_filter": f.resource_type, "resource_name_filter": f.name, "pattern_type_filter": f.pattern_type,
        "principal_filter": None, "host_filter": None, "operation": A.OP_ANY, "permission_type": A.PERM_ANY})
    if answer.error_code:
        raise ClientError.from_code(answer.error_code, answer.error_message)
    out: dict = {}
    for r in answer.resources:
        resource = A.ResourcePattern(r.resource_type, r.resource_name, r.pattern_type)
        out.setdefault(resource, set()).update(
            A.AccessControlEntry(a.principal, a.host, a.operation, a.permission_type) for a in r.acls)
    return out


def _list(conn, args) -> None:
    filters = _filters(args, _pattern_type(args), die_if_none=False) or \
        [A.ResourcePatternFilter(A.RT_ANY, None, A.PT_ANY)]
    found: dict = {}
    for f in filters:
        for resource, entries in _describe(conn, f).items():
            found.setdefault(resource, set()).update(entries)
    principals = _principals(args.principal)
    if not principals:
        for resource, entries in sorted(found.items()):
            print(_block(f"Current ACLs for resource `{resource}`", entries))
        return
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        for resource, entries in sorted(found.items()):
            mine = [e for e in entries if e.principal == principal]
            if mine:
                print(_block(f"Current ACLs for resource `{resource}`", mine))


def _confirm(args, message: str) -> bool:
    if args.force:
        return True
    print(message)
    return sys.stdin.readline().strip().lower() == "y"


def _remove(conn, args) -> None:
    pattern_type = _pattern_type(args)
    for f, entries in _filter_to_entries(args, pattern_type).items():
        if not entries:
            if not _confirm(args, f"Are you sure you want to delete all ACLs for resource filter `{f}`? (y/n)"):
                continue
            wire = [(None, None, A.OP_ANY, A.PERM_ANY)]
        else:
            listed = "\n".join("\t" + str(e) for e in sorted(entries))
            if not _confirm(args, f"Are you sure you want to remove ACLs: \n {listed} \n from resource filter `{f}`? "
                                  "(y/n)"):
                continue
            wire = sorted(entries)
        answer = conn.request(DELETE_ACLS, _VERSION, {"filters": [
            {"resource_type_filter": f.resource_type, "resource_name_filter": f.name,
             "pattern_type_filter": f.pattern_type, "principal_filter": principal, "host_filter": host,
             "operation": op, "permission_type": permission} for principal, host, op, permission in wire]})
        for result in answer.filter_results:
            if result.error_code:
                raise ClientError.from_code(result.error_code, result.error_message)


def _body(argv: Sequence[str]) -> int:
    from kafkapy.tools._secure_conn import SecureConnection

    args = _build_parser().parse_args(argv)
    _check(args)
    props = load_properties_file(args.command_config)
    try:
        with SecureConnection(args.bootstrap_server, props, "kafkapy-acls") as conn:
            if args.add:
                _add(conn, args)
            elif args.remove:
                _remove(conn, args)
            else:
                _list(conn, args)
    except ClientError as exc:
        print(f"Error while executing ACL command: {exc.message or exc.name}")
        return 1
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
