"""kafkapy-leader-election: preferred or unclean leader elections (kafka-leader-election.sh).

Options as Kafka 3.9's LeaderElectionCommand: ``--bootstrap-server``,
``--election-type PREFERRED|UNCLEAN`` (either case), and one of ``--topic``
with ``--partition``, ``--all-topic-partitions``, ``--path-to-json-file``
(``{"partitions": [{"topic": "t", "partition": 0}]}``, duplicates refused);
``--admin.config`` is read for ``default.api.timeout.ms``. The ElectLeaders
request (v2, the version Kafka 3.9 serves) goes to the controller that
Metadata names; NOT_CONTROLLER (the controller moved) is tried again with
fresh metadata until the timeout. Output as Kafka's::

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: PREFERRED_LEADER_NOT_AVAILABLE: ...

and exit 1 with "N replica(s) could not be elected" when any failed.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from typing import Optional, Sequence

from kafkapy.protocol.errors import ErrorCode
from kafkapy.tools._cli import ToolError, load_properties_file, parser, run

METADATA, ELECT_LEADERS = 3, 43
_METADATA_VERSION, _ELECT_LEADERS_VERSION = 12, 2
ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
DEFAULT_TIMEOUT_MS = 30000  # Kafka's tool: default.api.timeout.ms unless the admin config sets it
_RETRY_BACKOFF_S = 0.5


def parse_election_json(text: str) -> list:
    """Kafka's parseReplicaElectionData: ``[(topic, partition)]``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolError(f"The input string is not a valid JSON: {exc}") from None
    if not data:
        raise ToolError("Replica election data is empty")
    if not isinstance(data, dict) or "partitions" not in data:
        raise ToolError("Replica election data is missing \"partitions\" field")
    partitions = []
    for item in data["partitions"]:
        try:
            partitions.append((str(item["topic"]), int(item["partition"])))
        except (KeyError, TypeError, ValueError):
            raise ToolError(f"Replica election data contains an invalid entry: {json.dumps(item)}") from None
    duplicates = sorted({tp for tp in partitions if partitions.count(tp) > 1})
    if duplicates:
        raise ToolError("Replica election data contains duplicate partitions: "
                        + ",".join(f"{t}-{p}" for t, p in duplicates))
    return sorted(set(partitions))


def _addresses(bootstrap: str) -> list:
    out = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ToolError(f"Invalid url in bootstrap.servers: {item.strip()}")
        out.append((host.strip("[]"), int(port)))
    return out


def _controller_address(bootstraps: list, timeout_s: float):
    from kafkapy.client.blocking import request_once

    last = None
    for address in bootstraps:
        try:
            md = request_once(address, METADATA, _METADATA_VERSION, {
                "topics": (), "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}, timeout_s, "kafkapy-leader-election")
        except (OSError, ValueError) as exc:
            last = exc
            continue
        for b in md.brokers:
            if b.node_id == md.controller_id:
                return b.host, b.port
        last = "no controller in the metadata"
    raise ToolError(f"Cannot find the controller through {','.join(f'{h}:{p}' for h, p in bootstraps)}: {last}")


def elect(bootstrap: str, election_type: int, partitions, timeout_ms: int) -> dict:
    """``{(topic, partition): (error code, message)}`` from the controller."""
    from kafkapy.client.blocking import request_once

    bootstraps = _addresses(bootstrap)
    deadline = time.monotonic() + timeout_ms / 1000
    values = {"election_type": election_type, "timeout": datetime.timedelta(milliseconds=timeout_ms),
              "topic_partitions": None if partitions is None else [
                  {"topic": t, "partitions": sorted(p for tt, p in partitions if tt == t)}
                  for t in sorted({t for t, _ in partitions})]}
    while True:  # bounded by the deadline
        remaining_s = max(1.0, deadline - time.monotonic())
        try:
            response = request_once(_controller_address(bootstraps, remaining_s), ELECT_LEADERS,
                                    _ELECT_LEADERS_VERSION, values, remaining_s + 5, "kafkapy-leader-election")
        except (OSError, ValueError) as exc:
            raise ToolError(f"Error while making request: {exc}") from None
        results = {(r.topic, p.partition_id): (p.error_code, p.error_message)
                   for r in response.replica_election_results for p in r.partition_result}
        moved = response.error_code == ErrorCode.NOT_CONTROLLER or any(
            e == ErrorCode.NOT_CONTROLLER for e, _ in results.values())
        if moved and time.monotonic() < deadline:
            time.sleep(_RETRY_BACKOFF_S)
            continue
        if response.error_code == ErrorCode.REQUEST_TIMED_OUT or any(
                e == ErrorCode.REQUEST_TIMED_OUT for e, _ in results.values()):
            print("Timeout waiting for election results")
            raise ToolError("Timeout waiting for election results")
        if response.error_code != ErrorCode.NONE:
            raise ToolError(f"Error while making request: {ErrorCode(response.error_code).name}")
        return results


def _body(argv: Sequence[str]) -> int:
    p = parser("kafkapy-leader-election", "This tool attempts to elect a new leader for a set of topic "
                                          "partitions. The type of elections supported are preferred replicas "
                                          "and unclean replicas.")
    p.add_argument("--bootstrap-server", help="A hostname and port for the broker to connect to, in the form "
                                              "host:port. Multiple comma separated URLs can be given. REQUIRED.")
    p.add_argument("--admin.config", dest="admin_config",
                   help="Configuration properties files to pass to the admin client")
    p.add_argument("--path-to-json-file", help="The JSON file with the list of partition for which leader "
                                               "elections should be performed.")
    p.add_argument("--topic", help="Name of topic for which to perform an election.")
    p.add_argument("--partition", type=int, help="Partition id for which to perform an election. REQUIRED if "
                                                 "--topic is specified.")
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="Perform election on all of the eligible topic partitions.")
    p.add_argument("--election-type", help="Type of election to attempt: preferred or unclean. REQUIRED.")
    args = p.parse_args(argv)
    missing = [name for name, value in (("bootstrap-server", args.bootstrap_server),
                                        ("election-type", args.election_type)) if not value]
    if missing:
        raise ToolError("Missing required option(s): " + ", ".join(missing))
    election = args.election_type.strip().upper()
    if election not in ELECTION_TYPES:
        raise ToolError(f"Value for option election-type must be one of [PREFERRED, UNCLEAN], got "
                        f"{args.election_type}")
    chosen = sum(1 for x in (args.topic is not None, args.all_topic_partitions,
                             args.path_to_json_file is not None) if x)
    if chosen != 1:
        raise ToolError("One and only one of the following options is required: topic, all-topic-partitions, "
                        "path-to-json-file")
    if args.topic is not None and args.partition is None:
        raise ToolError("Missing required option(s): partition")
    if args.topic is None and args.partition is not None:
        raise ToolError("Option partition is only allowed if topic is used")
    partitions = None
    if args.path_to_json_file is not None:
        try:
            with open(args.path_to_json_file, encoding="utf-8") as f:
                partitions = parse_election_json(f.read())
        except OSError as exc:
            raise ToolError(f"Cannot read {args.path_to_json_file}: {exc.strerror}") from None
    elif args.topic is not None:
        partitions = [(args.topic, args.partition)]
    props = load_properties_file(args.admin_config)
    timeout_ms = int(props.get("default.api.timeout.ms", DEFAULT_TIMEOUT_MS))
    results = elect(args.bootstrap_server, ELECTION_TYPES[election], partitions, timeout_ms)
    succeeded = [tp for tp, (e, _) in sorted(results.items()) if e == ErrorCode.NONE]
    noop = [tp for tp, (e, _) in sorted(results.items()) if e == ErrorCode.ELECTION_NOT_NEEDED]
    failed = {tp: r for tp, r in sorted(results.items()) if r[0] not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)}
    out = sys.stdout
    if succeeded:
        out.write(f"Successfully completed leader election ({election}) for partitions "
                  f"{', '.join(f'{t}-{p}' for t, p in succeeded)}\n")
    if noop:
        out.write(f"Valid replica already elected for partitions {', '.join(f'{t}-{p}' for t, p in noop)}\n")
    for (t, p), (error, message) in failed.items():
        name = ErrorCode(error).name if error in ErrorCode._value2member_map_ else str(error)
        out.write(f"Error completing leader election ({election}) for partition: {t}-{p}: {name}"
                  f"{': ' + message if message else ''}\n")
    out.flush()
    if failed:
        raise ToolError(f"{len(failed)} replica(s) could not be elected")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
