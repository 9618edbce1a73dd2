"""kafkapy-consumer-groups: list, describe, reset and delete consumer groups (kafka-consumer-groups.sh).

Layouts are Kafka's ConsumerGroupCommand: ``--describe`` prints

    GROUP  TOPIC  PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID  HOST  CLIENT-ID

with "-" for unknown values, ``--members`` GROUP CONSUMER-ID HOST CLIENT-ID
#PARTITIONS, ``--state`` GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE
#MEMBERS; columns are left-aligned and at least 15 wide, wider when a value
is.  ``--reset-offsets`` prints GROUP TOPIC PARTITION NEW-OFFSET and changes
nothing unless ``--execute`` is given; it refuses a group with active members
as Kafka does.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime, timezone
from typing import Optional, Sequence

from kafkapy.tools import _client
from kafkapy.tools._cli import ToolError, load_properties_file, parser, run

INACTIVE_STATES = ("Empty", "Dead")


def _build_parser():
    p = parser("kafkapy-consumer-groups", "This tool helps to list all consumer groups, describe a consumer group, "
                                          "delete consumer group info, or reset consumer group offsets.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--group", action="append", default=[], help="The consumer group we wish to act on.")
    p.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    p.add_argument("--topic", action="append", default=[],
                   help="The topic whose consumer group information should be reset ('topic' or 'topic:0,1').")
    p.add_argument("--all-topics", action="store_true", help="Consider all topics assigned to a group in the "
                                                             "`reset-offsets` process.")
    p.add_argument("--list", action="store_true", help="List all consumer groups.")
    p.add_argument("--describe", action="store_true", help="Describe consumer group and list offset lag.")
    p.add_argument("--delete", action="store_true", help="Pass in groups to delete topic partition offsets and "
                                                         "ownership information over the entire consumer group.")
    p.add_argument("--reset-offsets", action="store_true", help="Reset offsets of consumer group.")
    p.add_argument("--members", action="store_true", help="Describe members of the group.")
    p.add_argument("--offsets", action="store_true", help="Describe the group and list all topic partitions "
                                                          "in the group along with their offset lag (default).")
    p.add_argument("--state", nargs="?", const="", default=None,
                   help="When specified with '--describe', includes the state of the group. With '--list', "
                        "shows the state, optionally filtered by a comma separated list of states.")
    p.add_argument("--verbose", action="store_true", help="Provide additional information, if any.")
    p.add_argument("--dry-run", action="store_true", help="Only show results without executing changes.")
    p.add_argument("--execute", action="store_true", help="Execute operation.")
    p.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    p.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    p.add_argument("--to-offset", type=int, help="Reset offsets to a specific offset.")
    p.add_argument("--shift-by", type=int, help="Reset offsets shifting current offset by 'n'.")
    p.add_argument("--to-datetime", help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'")
    p.add_argument("--timeout", type=int, default=5000, help="accepted for compatibility")
    return p


def _table(rows: list[tuple], headers: tuple, fixed: dict) -> str:
    """Kafka's printf layout: each column ``%-Ns`` with N = max(15, widest value) unless fixed."""
    widths = []
    for i, header in enumerate(headers):
        if i in fixed:
            widths.append(fixed[i])
        else:
            widths.append(max([15, len(str(header))] + [len(str(r[i])) for r in rows]))
    def line(values):
        cells = [f"{str(v):<{w}}" for v, w in zip(values[:-1], widths[:-1])]
        return " ".join(cells + [str(values[-1])])
    return "\n" + "\n".join(line(v) for v in [headers] + rows) + "\n"


def _dash(value) -> str:
    return "-" if value is None or value == "" else str(value)


def _body(argv: Sequence[str]) -> int:
    args = _build_parser().parse_args(argv)
    actions = [a for a in ("list", "describe", "delete", "reset_offsets") if getattr(args, a)]
    if len(actions) != 1:
        raise ToolError("Command must include exactly one action: --list, --describe, --delete, --reset-offsets")
    if not args.bootstrap_server:
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    action = actions[0]
    if action != "list" and not args.group and not args.all_groups:
        raise ToolError(f"Option [{action.replace('_', '-')}] takes one of these options: [all-groups], [group]")
    clients = _client.connect(args.bootstrap_server, load_properties_file(args.command_config))
    try:
        if action == "list":
            return _list(clients, args)
        groups = [g for g, _ in clients.list_groups()] if args.all_groups else args.group
        if action == "describe":
            return _describe(clients, groups, args)
        if action == "delete":
            return _delete(clients, groups)
        return _reset(clients, groups, args)
    except _client.ClientError as exc:
        raise ToolError(f"Error: Executing consumer group command failed due to {_client.describe_error(exc)}") \
            from None
    finally:
        clients.close()


def _list(clients, args) -> int:
    groups = clients.list_groups()
    out = sys.stdout
    if args.state is None:
        for group_id, _state in groups:
            out.write(group_id + "\n")
        return 0
    wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
    rows = [(g, s) for g, s in groups if not wanted or s.lower() in wanted]
    width = max([15] + [len(g) for g, _ in rows])
    out.write(f"{'GROUP':<{width}} STATE\n")
    for group_id, state in rows:
        out.write(f"{group_id:<{width}} {state}\n")
    return 0


def _describe(clients, groups: list[str], args) -> int:
    out = sys.stdout
    infos = clients.describe_groups(groups)
    for info in infos:
        if info.state == "Dead":
            sys.stderr.write(f"Error: Consumer group '{info.group_id}' does not exist.\n")
            continue
        if args.state is not None:
            coordinator = f"{info.coordinator[1]}:{info.coordinator[2]}  ({info.coordinator[0]})" \
                if info.coordinator else "-"
            out.write(_table([(info.group_id, coordinator, info.protocol or "", info.state, len(info.members))],
                             ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"), {}))
            continue
        if not info.members and info.state in INACTIVE_STATES:
            out.write(f"\nConsumer group '{info.group_id}' has no active members.\n")
        if args.members:
            rows = [(info.group_id, m.member_id, m.host, m.client_id, len(m.assignment)) for m in info.members]
            headers = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
            if args.verbose:
                rows = [r + (",".join(f"{tp.topic}:{tp.partition}" for tp in m.assignment) or "-",)
                        for r, m in zip(rows, info.members)]
                headers += ("ASSIGNMENT",)
            if rows:
                out.write(_table(rows, headers, {}))
            continue
        committed = clients.group_offsets(info.group_id)
        owners = {}
        for m in info.members:
            for tp in m.assignment:
                owners[tp] = m
        tps = sorted(set(committed) | set(owners))
        ends = clients.list_offsets({tp: _client.LATEST for tp in tps}) if tps else {}
        rows = []
        for tp in tps:
            current = committed.get(tp)
            end = ends.get(tp)
            lag = end - current if current is not None and end is not None and end >= 0 else None
            m = owners.get(tp)
            rows.append((info.group_id, tp.topic, tp.partition, _dash(current), _dash(end), _dash(lag),
                         _dash(m.member_id if m else None), _dash(m.host if m else None),
                         _dash(m.client_id if m else None)))
        if rows:
            out.write(_table(rows, ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                    "CONSUMER-ID", "HOST", "CLIENT-ID"), {2: 10}))
        elif info.members:
            out.write(f"\nConsumer group '{info.group_id}' has no committed offsets.\n")
    return 0


def _delete(clients, groups: list[str]) -> int:
    results = clients.delete_groups(groups)
    failed = {g: e for g, e in results.items() if e is not None}
    ok = [g for g in groups if results.get(g) is None]
    out = sys.stdout
    if ok:
        out.write("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in ok) + ") was successful.\n")
    if failed:
        out.write("Deletion of some consumer groups failed:\n")
        for group_id, exc in failed.items():
            text = _client.describe_error(exc) if isinstance(exc, _client.ClientError) else str(exc)
            out.write(f"* Group '{group_id}' could not be deleted due to: {text}\n")
        return 1
    return 0


def parse_datetime_ms(text: str) -> int:
    """Kafka's --to-datetime: 'YYYY-MM-DDTHH:mm:SS.sss' with an optional zone (Z, +hh:mm); local time otherwise."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"):
        try:
            dt = datetime.strptime(value, fmt)
            break
        except ValueError:
            continue
    else:
        raise ToolError(f"Error parsing timestamp '{text}'. It does not conform to the format "
                        "'YYYY-MM-DDTHH:mm:SS.sss' (optionally followed by a zone such as Z or +01:00)")
    if dt.tzinfo is None:
        dt = dt.astimezone()
    return int(dt.astimezone(timezone.utc).timestamp() * 1000)


def _reset(clients, groups: list[str], args) -> int:
    scenarios = [s for s in ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime")
                 if getattr(args, s) is not None and getattr(args, s) is not False]
    if len(scenarios) != 1:
        raise ToolError("Option [reset-offsets] takes exactly one of these options: [to-datetime], [to-earliest], "
                        "[to-latest], [shift-by], [to-offset], [to-current]")
    if not args.topic and not args.all_topics:
        raise ToolError("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
    if args.dry_run and args.execute:
        raise ToolError("Option [reset-offsets] takes at most one of these options: [dry-run], [execute]")
    if not args.dry_run and not args.execute:
        sys.stdout.write("WARN: No action will be performed as the --execute option is missing. In a future major "
                         "release, the default behavior of this command will be to prompt the user before executing "
                         "the reset rather than doing a dry run. You should add the --dry-run option explicitly if "
                         "you are scripting this command and want to keep the current default behavior without "
                         "prompting.\n")
    scenario = scenarios[0]
    rows = []
    for info in clients.describe_groups(groups):
        if info.state not in INACTIVE_STATES:
            raise ToolError(f"Error: Assignments can only be reset if the group '{info.group_id}' is inactive, "
                            f"but the current state is {info.state}.")
        committed = clients.group_offsets(info.group_id)
        tps = _reset_partitions(clients, args, committed)
        if not tps:
            continue
        earliest = clients.list_offsets({tp: _client.EARLIEST for tp in tps})
        latest = clients.list_offsets({tp: _client.LATEST for tp in tps})

        def clamp(tp, offset):
            return max(earliest[tp], min(latest[tp], offset))

        if scenario == "to_earliest":
            new = dict(earliest)
        elif scenario == "to_latest":
            new = dict(latest)
        elif scenario == "to_current":
            new = {tp: committed.get(tp, latest[tp]) for tp in tps}
        elif scenario == "to_offset":
            new = {tp: clamp(tp, args.to_offset) for tp in tps}
        elif scenario == "shift_by":
            new = {tp: clamp(tp, committed.get(tp, latest[tp]) + args.shift_by) for tp in tps}
        else:
            by_time = clients.list_offsets({tp: parse_datetime_ms(args.to_datetime) for tp in tps})
            new = {tp: (off if off is not None and off >= 0 else latest[tp]) for tp, off in by_time.items()}
        if args.execute:
            clients.alter_group_offsets(info.group_id, new)
        rows += [(info.group_id, tp.topic, tp.partition, new[tp]) for tp in sorted(new)]
    if rows:
        # Kafka prints this table with fixed widths: %-30s %-30s %-10s %-15s.
        out = ["", f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}"]
        out += [f"{g:<30} {t:<30} {str(p):<10} {str(o):<15}" for g, t, p, o in rows]
        sys.stdout.write("\n".join(out) + "\n")
    return 0


def _reset_partitions(clients, args, committed: dict) -> list:
    if args.all_topics:
        return sorted(committed)
    tps = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        if parts:
            tps += [_client.TopicPartition(topic, int(p)) for p in re.split(r"\s*,\s*", parts) if p]
        else:
            info = clients.describe_topics([topic])[0]
            tps += [_client.TopicPartition(topic, p.partition) for p in info.partitions]
    return sorted(set(tps))


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
