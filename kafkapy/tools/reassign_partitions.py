"""kafkapy-reassign-partitions: move partition replicas (kafka-reassign-partitions.sh).

Actions and options as Kafka 3.9's ReassignPartitionsCommand (exactly one
action; the options each action permits):

* ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: prints the
  current assignment of the topics (``{"topics":[{"topic":"t"}],"version":1}``)
  and a proposed one over the brokers listed, placed as Kafka's
  AdminUtils.assignReplicasToBrokers does (same partition count and
  replication factor; ``--disable-rack-aware`` ignores racks);
* ``--execute --reassignment-json-file F [--throttle B/s] [--additional]``:
  prints the current assignment (save it for a rollback), with ``--throttle``
  sets ``leader.replication.throttled.replicas`` (partition:source broker) and
  ``follower.replication.throttled.replicas`` (partition:destination broker)
  on the topics and both ``*.replication.throttled.rate`` on every broker
  involved, then sends AlterPartitionReassignments. Refused while another
  reassignment runs unless ``--additional`` (which also changes a throttle by
  resubmitting). ``--replica-alter-log-dirs-throttle`` is accepted and said
  unsupported: kafkapy has no replica moves between log dirs (a
  ``log_dirs`` entry other than ``any`` is refused);
* ``--verify --reassignment-json-file F [--preserve-throttles]``: per
  partition completed / still in progress / "no active reassignment ... but
  replica set is ..."; once nothing is in progress the throttles are
  removed from every broker and the file's topics (Kafka's clearAllThrottles);
* ``--cancel --reassignment-json-file F [--preserve-throttles]``: cancels the
  partitions' reassignments (Kafka's rule: those not only adding replicas),
  then clears the throttles;
* ``--list``: the reassignments in progress.

Requests: Metadata (v12) to the bootstrap brokers, AlterPartitionReassignments
and ListPartitionReassignments (v0) to the controller Metadata names (tried
again on NOT_CONTROLLER, as Kafka's admin client does, until
``default.api.timeout.ms`` of ``--command-config``, 30 s by default),
IncrementalAlterConfigs (v1) for broker configs to each broker, for topic
configs to any. ``--timeout`` (log dir moves) is accepted and unused.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from typing import Optional, Sequence

from kafkapy.protocol.errors import ErrorCode
from kafkapy.tools._cli import ToolError, load_properties_file, parser, run

METADATA, INCREMENTAL_ALTER_CONFIGS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 3, 44, 45, 46
_METADATA_VERSION = 12
CLIENT_ID = "reassign-partitions-tool"
DEFAULT_TIMEOUT_MS = 30000
_RETRY_BACKOFF_S = 0.5
TOPIC, BROKER = 2, 4  # ConfigResource types
SET, DELETE = 0, 1  # AlterConfigOp types
ANY_LOG_DIR = "any"
BROKER_LEVEL_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                          "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_LEVEL_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")

CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used "
    "to change the throttle by resubmitting the current reassignment.")
YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle "
    "is removed.")
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
REQUIRED = {"verify": ("reassignment_json_file",), "generate": ("topics_to_move_json_file", "broker_list"),
            "execute": ("reassignment_json_file",), "cancel": ("reassignment_json_file",), "list": ()}
PERMITTED = {"verify": ("bootstrap_server", "command_config", "preserve_throttles"),
             "generate": ("bootstrap_server", "broker_list", "command_config", "disable_rack_aware"),
             "execute": ("additional", "bootstrap_server", "command_config", "throttle",
                         "replica_alter_log_dirs_throttle", "timeout"),
             "cancel": ("bootstrap_server", "command_config", "preserve_throttles", "timeout"),
             "list": ("bootstrap_server", "command_config")}
_OPTION_DEFAULTS = {"throttle": -1, "replica_alter_log_dirs_throttle": -1, "timeout": 10000}


# -- JSON files and text, as Kafka's -------------------------------------------------------
def tp_name(tp) -> str:
    return f"{tp[0]}-{tp[1]}"


def format_reassignment_json(parts: dict) -> str:
    """Kafka's formatAsReassignmentJson (no log dir moves: every entry "any")."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": [ANY_LOG_DIR] * len(r)}
        for (t, p), r in sorted(parts.items())]}, separators=(",", ":"))


def _json_v1(text: str) -> dict:
    """A JSON object whose ``version`` (default 1) is 1, the only one Kafka reads."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolError(f"The input string is not a valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ToolError("The input string is not a valid JSON")
    version = data.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    return data


def parse_topics_json(text: str) -> list:
    """Kafka's parseTopicsData (version 1)."""
    data = _json_v1(text)
    try:
        return [str(t["topic"]) for t in data.get("topics", [])]
    except (KeyError, TypeError):
        raise ToolError("Topics data contains an invalid entry") from None


def parse_reassignment_json(text: str) -> list:
    """Kafka's parsePartitionReassignmentData (version 1): ``[((topic, p), replicas)]``,
    duplicates kept for the checks; a log dir other than "any" is refused."""
    data = _json_v1(text)
    out = []
    for entry in data.get("partitions", []):
        try:
            tp = (str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
            log_dirs = [str(d) for d in entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))]
        except (KeyError, TypeError, ValueError):
            raise ToolError(f"Partition reassignment data contains an invalid entry: {json.dumps(entry)}") from None
        if len(log_dirs) != len(replicas):
            raise ToolError(f"Size of replicas list {replicas} is different from size of log dirs list {log_dirs} "
                            f"for partition {tp_name(tp)}")
        if any(d != ANY_LOG_DIR for d in log_dirs):
            raise ToolError("Moving replicas between log directories (log_dirs) is not supported by kafkapy")
        out.append((tp, replicas))
    return out


def check_execute_args(parts: list) -> dict:
    """Kafka's parseExecuteAssignmentArgs checks."""
    if not parts:
        raise ToolError("Partition reassignment list cannot be empty")
    if any(not r for _tp, r in parts):
        raise ToolError("Partition replica list cannot be empty")
    seen = [tp for tp, _ in parts]
    dup = sorted({tp for tp in seen if seen.count(tp) > 1})
    if dup:
        raise ToolError("Partition reassignment contains duplicate topic partitions: " + ",".join(map(tp_name, dup)))
    dups = [(tp, sorted({b for b in r if r.count(b) > 1})) for tp, r in parts]
    dups = [(tp, d) for tp, d in dups if d]
    if dups:
        raise ToolError("Partition replica lists may not contain duplicate entries: " + ". ".join(
            f"{tp_name(tp)} contains multiple entries for {','.join(map(str, d))}" for tp, d in dups))
    return dict(parts)


def current_assignment_text(proposed: dict, current: dict) -> str:
    """Kafka's currentPartitionReplicaAssignmentToString."""
    return ("Current partition replica assignment\n\n"
            + format_reassignment_json({tp: r for tp, r in current.items() if tp in proposed})
            + "\n\nSave this to use as the --reassignment-json-file option during rollback")


def reassignments_text(ongoing: dict) -> str:
    """Kafka's curReassignmentsToString."""
    lines = []
    for tp, (replicas, adding, removing) in sorted(ongoing.items()):
        lines.append(f"{tp_name(tp)}: replicas: {','.join(map(str, replicas))}."
                     + (f" adding: {','.join(map(str, adding))}." if adding else "")
                     + (f" removing: {','.join(map(str, removing))}." if removing else ""))
    return "Current partition reassignments:\n" + "\n".join(lines) if lines else "No partition reassignments found."


def move_map(ongoing: dict, proposed: dict, current: dict) -> dict:
    """Kafka's calculateProposedMoveMap: ``{topic: {partition: (sources, destinations)}}``."""
    moves: dict = {}
    for (t, p), (replicas, adding, _removing) in ongoing.items():
        moves.setdefault(t, {})[p] = (set(replicas) - set(adding), set(adding))
    for (t, p), replicas in proposed.items():
        part_moves = moves.setdefault(t, {})
        if p in part_moves:
            sources = part_moves[p][0]
        elif (t, p) in current:
            sources = set(current[(t, p)])
        else:
            raise ToolError(f"Trying to reassign a topic partition {t}-{p} with 0 replicas")
        part_moves[p] = (sources, set(replicas) - sources)
    return moves


def leader_throttles(moves: dict) -> dict:
    return {t: ",".join(sorted({f"{p}:{s}" for p, (srcs, _d) in pm.items() for s in srcs})) for t, pm in moves.items()}


def follower_throttles(moves: dict) -> dict:
    return {t: ",".join(sorted({f"{p}:{d}" for p, (srcs, dsts) in pm.items() for d in dsts if d not in srcs}))
            for t, pm in moves.items()}


# -- the requests ----------------------------------------------------------------------------
class Cluster:
    """The tool's connection: bootstrap addresses, a deadline per call."""

    def __init__(self, bootstrap: str, timeout_ms: int):
        from kafkapy.tools.leader_election import _addresses

        self.bootstraps = _addresses(bootstrap)
        self.timeout_s = timeout_ms / 1000

    def _request(self, address, api_key: int, version: int, values: dict):
        from kafkapy.client.blocking import request_once

        try:
            return request_once(address, api_key, version, values, self.timeout_s, CLIENT_ID)
        except (OSError, ValueError) as exc:
            raise ToolError(f"Error while making request to {address[0]}:{address[1]}: {exc}") from None

    def metadata(self, topics=None):
        last = None
        for address in self.bootstraps:
            try:
                return self._request(address, METADATA, _METADATA_VERSION, {
                    "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
                    "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
            except ToolError as exc:
                last = exc
        raise last

    def brokers(self) -> dict:
        return {b.node_id: (b.host, b.port) for b in self.metadata([]).brokers}

    def assignments(self, topics) -> dict:
        """``{(topic, p): replicas}``; a topic not found raises (Kafka's describeTopics)."""
        out = {}
        for t in self.metadata(sorted(set(topics))).topics:
            if t.error_code != ErrorCode.NONE:
                raise ToolError(f"Topic {t.name} not found." if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                                else f"{t.name}: {ErrorCode(t.error_code).name}")
            for p in t.partitions:
                out[(t.name, p.partition_index)] = list(p.replica_nodes)
        return out

    def to_controller(self, api_key: int, values: dict):
        """A request to the controller, again on NOT_CONTROLLER until the deadline."""
        deadline = time.monotonic() + self.timeout_s
        while True:  # bounded by the deadline
            md = self.metadata([])
            address = next(((b.host, b.port) for b in md.brokers if b.node_id == md.controller_id), None)
            response = self._request(address, api_key, 0, values) if address is not None else None
            if response is not None and response.error_code != ErrorCode.NOT_CONTROLLER:
                if response.error_code != ErrorCode.NONE:
                    raise ToolError(f"Error while making request: {ErrorCode(response.error_code).name}"
                                    + (f": {response.error_message}" if response.error_message else ""))
                return response
            if time.monotonic() >= deadline:
                raise ToolError("Timed out waiting for the controller")
            time.sleep(_RETRY_BACKOFF_S)

    def ongoing(self, partitions=None) -> dict:
        """ListPartitionReassignments: ``{(topic, p): (replicas, adding, removing)}``."""
        topics = None
        if partitions is not None:
            topics = [{"name": t, "partition_indexes": sorted(p for tt, p in partitions if tt == t)}
                      for t in sorted({t for t, _ in partitions})]
        response = self.to_controller(LIST_REASSIGNMENTS, {
            "timeout": datetime.timedelta(milliseconds=int(self.timeout_s * 1000)), "topics": topics})
        return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                for t in response.topics for p in t.partitions}

    def alter(self, wanted: dict) -> dict:
        """AlterPartitionReassignments ``{(topic, p): replicas or None}`` -> the errors
        ``{(topic, p): text}``."""
        topics = [{"name": t, "partitions": [{"partition_index": p, "replicas": None if r is None else tuple(r)}
                                             for (tt, p), r in sorted(wanted.items()) if tt == t]}
                  for t in sorted({t for t, _ in wanted})]
        response = self.to_controller(ALTER_REASSIGNMENTS, {
            "timeout": datetime.timedelta(milliseconds=int(self.timeout_s * 1000)), "topics": topics})
        errors = {}
        for t in response.responses:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    errors[(t.name, p.partition_index)] = p.error_message or _describe(p.error_code)
        return errors

    def alter_configs(self, resources: list) -> None:
        """IncrementalAlterConfigs: ``[(type, name, [(key, op, value)])]``; broker
        resources go to that broker, topic ones to any."""
        brokers = None
        for rtype, name, ops in resources:
            if rtype == BROKER:
                brokers = brokers if brokers is not None else self.brokers()
                if int(name) not in brokers:
                    continue  # Kafka's admin client fails the unknown node's future; nothing to change there
                addresses = [brokers[int(name)]]
            else:
                addresses = self.bootstraps
            values = {"resources": [{"resource_type": rtype, "resource_name": name, "configs": [
                {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}], "validate_only": False}
            response = None
            for address in addresses:
                try:
                    response = self._request(address, INCREMENTAL_ALTER_CONFIGS, 1, values)  # flexible: header v1
                    break
                except ToolError:
                    if address == addresses[-1]:
                        raise
            for r in response.responses:
                if r.error_code != ErrorCode.NONE:
                    raise ToolError(f"Error altering the configs of {name}: {ErrorCode(r.error_code).name}"
                                    + (f": {r.error_message}" if r.error_message else ""))


def _describe(code: int) -> str:
    name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
    return {"NO_REASSIGNMENT_IN_PROGRESS": "No reassignment is in progress for this partition.",
            "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
            "INVALID_REPLICA_ASSIGNMENT": "The replica assignment is invalid."}.get(name, name)


# -- actions ---------------------------------------------------------------------------------
def generate(c: Cluster, topics_json: str, broker_list: str, rack_aware: bool) -> tuple:
    from kafkapy.metadata.assignment import BrokerMetadata, assign_replicas_to_brokers

    try:
        brokers = [int(b) for b in broker_list.split(",")]
    except ValueError:
        raise ToolError(f"Invalid broker list: {broker_list}") from None
    dup = sorted({b for b in brokers if brokers.count(b) > 1})
    if dup:
        raise ToolError(f"Broker list contains duplicate entries: {dup}")
    topics = parse_topics_json(topics_json)
    dup_topics = sorted({t for t in topics if topics.count(t) > 1})
    if dup_topics:
        raise ToolError(f"List of topics to reassign contains duplicate entries: {dup_topics}")
    current = c.assignments(topics)
    known = {b.node_id: b.rack for b in c.metadata([]).brokers}
    metas = [BrokerMetadata(b, known[b] if rack_aware else None) for b in brokers if b in known]
    if rack_aware and 0 < sum(1 for m in metas if m.rack is None) < len(metas):
        raise ToolError("Not all brokers have rack information. Add --disable-rack-aware in command line to make "
                        "replica assignment without rack information.")
    proposed = {}
    for topic in sorted({t for t, _ in current}):
        parts = sorted(p for t, p in current if t == topic)
        try:
            placed = assign_replicas_to_brokers(metas, len(parts), len(current[(topic, parts[0])]))
        except Exception as exc:  # Kafka's InvalidReplicationFactorException and friends
            raise ToolError(f"Error: {getattr(exc, 'message', exc)}") from None
        proposed.update({(topic, p): list(r) for p, r in placed.items()})
    print("Current partition replica assignment\n" + format_reassignment_json(current) + "\n")
    print("Proposed partition reassignment configuration\n" + format_reassignment_json(proposed))
    return proposed, current


def execute(c: Cluster, reassignment_json: str, additional: bool, throttle: int, log_dir_throttle: int) -> None:
    proposed = check_execute_args(parse_reassignment_json(reassignment_json))
    ongoing = c.ongoing()
    if not additional and ongoing:
        raise ToolError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE)
    known = c.brokers()
    unknown = next((b for _tp, r in sorted(proposed.items()) for b in r if b not in known), None)
    if unknown is not None:
        raise ToolError(f"Unknown broker id {unknown}")
    current = c.assignments({t for t, _ in proposed})
    missing = sorted(set(proposed) - set(current))
    if missing:
        raise ToolError("Unable to find partition: " + ", ".join(map(tp_name, missing)))
    print(current_assignment_text(proposed, current))
    if throttle >= 0 or log_dir_throttle >= 0:
        print(YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE)
        if throttle >= 0:
            moves = move_map(ongoing, proposed, current)
            leaders, followers = leader_throttles(moves), follower_throttles(moves)
            c.alter_configs([(TOPIC, t, [(TOPIC_LEVEL_THROTTLES[0], SET, leaders[t]),
                                         (TOPIC_LEVEL_THROTTLES[1], SET, followers[t])])
                             for t in sorted(moves)])
            brokers = sorted({b for pm in moves.values() for s, d in pm.values() for b in s | d})
            c.alter_configs([(BROKER, str(b), [(BROKER_LEVEL_THROTTLES[0], SET, str(throttle)),
                                               (BROKER_LEVEL_THROTTLES[1], SET, str(throttle))]) for b in brokers])
            print(f"The inter-broker throttle limit was set to {throttle} B/s")
        if log_dir_throttle >= 0:
            print("Warning: --replica-alter-log-dirs-throttle is not supported by kafkapy (no replica moves "
                  "between log directories); it was not set")
    errors = c.alter(proposed)
    if errors:
        raise ToolError("Error reassigning partition(s):\n" + "\n".join(
            f"{tp_name(tp)}: {text}" for tp, text in sorted(errors.items())))
    print(f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for "
          + ",".join(map(tp_name, sorted(proposed))))


def verify(c: Cluster, reassignment_json: str, preserve_throttles: bool) -> bool:
    """Prints Kafka's status lines; True if nothing is in progress any more."""
    targets = parse_reassignment_json(reassignment_json)
    ongoing = c.ongoing()
    lines = ["Status of partition reassignment:"]
    unknown_topics = {t for (t, _p), _r in targets if (t, _p) not in ongoing}
    current = {}
    if unknown_topics:
        for t in c.metadata(sorted(unknown_topics)).topics:
            if t.error_code == ErrorCode.NONE:
                current.update({(t.name, p.partition_index): list(p.replica_nodes) for p in t.partitions})
    for tp, target in sorted(targets):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {tp_name(tp)} is still in progress.")
        else:
            replicas = current.get(tp, [])
            if replicas == list(target):
                lines.append(f"Reassignment of partition {tp_name(tp)} is completed.")
            else:
                lines.append(f"There is no active reassignment of partition {tp_name(tp)}, but replica set is "
                             f"{','.join(map(str, replicas))} rather than {','.join(map(str, target))}.")
    print("\n".join(lines))
    print()  # Kafka's (empty) replica log dir move states
    done = not ongoing
    if done and not preserve_throttles:
        clear_all_throttles(c, targets)
    return done


def cancel(c: Cluster, reassignment_json: str, preserve_throttles: bool) -> None:
    targets = parse_reassignment_json(reassignment_json)
    ongoing = c.ongoing([tp for tp, _ in targets])
    # Kafka's rule: cancel those not only adding replicas
    cancelling = sorted(tp for tp, (_r, adding, removing) in ongoing.items() if not adding or removing)
    if cancelling:
        errors = c.alter({tp: None for tp in cancelling})
        if errors:
            raise ToolError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n"
                            + "\n".join(f"{tp_name(tp)}: {text}" for tp, text in sorted(errors.items())))
        print(f"Successfully cancelled partition reassignment{'' if len(cancelling) == 1 else 's'} for: "
              + ",".join(map(tp_name, cancelling)))
    else:
        print("None of the specified partition reassignments are active.")
    # Kafka prints this without a line end, so the next line follows on it
    sys.stdout.write("None of the specified partition moves are active.")
    if not preserve_throttles:
        clear_all_throttles(c, targets)


def clear_all_throttles(c: Cluster, targets: list) -> None:
    """Kafka's clearAllThrottles: every broker known and named, every topic of the file."""
    brokers = sorted(set(c.brokers()) | {b for _tp, r in targets for b in r})
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          + ",".join(map(str, brokers)))
    c.alter_configs([(BROKER, str(b), [(k, DELETE, None) for k in BROKER_LEVEL_THROTTLES]) for b in brokers])
    topics = sorted({t for (t, _p), _r in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} " + ",".join(topics))
    c.alter_configs([(TOPIC, t, [(k, DELETE, None) for k in TOPIC_LEVEL_THROTTLES]) for t in topics])


# -- the command line ------------------------------------------------------------------------
def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ToolError(f"Cannot read {path}: {exc.strerror}") from None


def _body(argv: Sequence[str]) -> int:
    p = parser("kafkapy-reassign-partitions", "This tool helps to move topic partitions between replicas.")
    for action, text in (("generate", "Generate a candidate partition reassignment configuration."),
                         ("execute", "Kick off the reassignment as specified by the --reassignment-json-file option."),
                         ("verify", "Verify if the reassignment completed as specified by the "
                                    "--reassignment-json-file option."),
                         ("cancel", "Cancel an active reassignment."),
                         ("list", "List all active partition reassignments.")):
        p.add_argument("--" + action, action="store_true", help=text)
    p.add_argument("--bootstrap-server", help="REQUIRED: the server(s) to use for bootstrapping.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--reassignment-json-file", help="The JSON file with the partition reassignment configuration.")
    p.add_argument("--topics-to-move-json-file", help="Generate a reassignment configuration to move the "
                                                      "partitions of the specified topics to the list of brokers.")
    p.add_argument("--broker-list", help="The list of brokers to which the partitions need to be reassigned.")
    p.add_argument("--disable-rack-aware", action="store_true", help="Disable rack aware replica assignment")
    p.add_argument("--throttle", type=int, help="The movement of partitions between brokers will be throttled to "
                                                "this value (bytes/sec).")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int,
                   help="The movement of replicas between log directories on the same broker will be throttled "
                        "to this value (bytes/sec); not supported by kafkapy (accepted, not set).")
    p.add_argument("--timeout", type=int, help="The maximum time in ms to wait for log directory replica "
                                               "assignment to begin.")
    p.add_argument("--additional", action="store_true", help="Execute this reassignment in addition to any other "
                                                             "ongoing ones.")
    p.add_argument("--preserve-throttles", action="store_true", help="Do not modify broker or topic throttles.")
    args = p.parse_args(argv)
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise ToolError("Command must include exactly one action: --generate, --execute, --verify, --cancel, "
                        "--list")
    action = actions[0]
    if not args.bootstrap_server:
        raise ToolError("Please specify --bootstrap-server")
    missing = [o for o in REQUIRED[action] if getattr(args, o) in (None, False)]
    if missing:
        raise ToolError("Missing required argument \"[" + ", ".join(o.replace("_", "-") for o in missing) + "]\"")
    for name, value in vars(args).items():
        if name in ACTIONS or value in (None, False) or name in REQUIRED[action] or name in PERMITTED[action]:
            continue
        raise ToolError(f"Option \"[{name.replace('_', '-')}]\" can't be used with action \"[{action}]\"")
    props = load_properties_file(args.command_config)
    c = Cluster(args.bootstrap_server, int(props.get("default.api.timeout.ms", DEFAULT_TIMEOUT_MS)))
    opt = {k: (getattr(args, k) if getattr(args, k) is not None else d) for k, d in _OPTION_DEFAULTS.items()}
    if action == "generate":
        generate(c, _read(args.topics_to_move_json_file), args.broker_list, not args.disable_rack_aware)
    elif action == "execute":
        execute(c, _read(args.reassignment_json_file), args.additional, opt["throttle"],
                opt["replica_alter_log_dirs_throttle"])
    elif action == "verify":
        verify(c, _read(args.reassignment_json_file), args.preserve_throttles)
    elif action == "cancel":
        cancel(c, _read(args.reassignment_json_file), args.preserve_throttles)
    else:
        print(reassignments_text(c.ongoing()))
    sys.stdout.flush()
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
