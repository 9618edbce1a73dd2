"""kafkapy-transactions: list, describe and abort transactions (kafka-transactions.sh).

Commands and output are Kafka 3.9's TransactionsCommand (tables printed as
its ToolsUtils.prettyPrintTable: each column padded to its widest cell,
each cell followed by a tab):

* ``list [--duration-filter MS]``: ListTransactions to every broker; columns
  TransactionalId, Coordinator (the broker that answered), ProducerId,
  TransactionState.
* ``describe --transactional-id ID``: FindCoordinator (key type 1), then
  DescribeTransactions to it; columns CoordinatorId, TransactionalId,
  ProducerId, ProducerEpoch, TransactionState, TransactionTimeoutMs,
  CurrentTransactionStartTimeMs, TransactionDurationMs, TopicPartitions.
* ``describe-producers --topic T --partition P``: DescribeProducers to the
  partition's leader.
* ``abort --topic T --partition P --start-offset O`` (or ``--producer-id``,
  ``--producer-epoch``, ``--coordinator-epoch``): finds the producer whose
  open transaction starts at O on that partition (DescribeProducers), then
  sends WriteTxnMarkers (an ABORT marker for that producer, epoch and
  coordinator epoch) to the partition's leader, as Kafka's
  Admin.abortTransaction does.  A coordinator epoch below 0 is sent as 0,
  as Kafka's tool does.
* ``find-hanging (--broker-id B | --topic T [--partition P])
  [--max-transaction-timeout MIN]`` (KIP-664): the open transactions of the
  partitions searched (those with a replica on B, or of T) older than the
  timeout (minutes, default 15) by their producer's last timestamp
  (DescribeProducers, to B when given, else to each leader), whose producer
  id no coordinator lists (ListTransactions with a producer-id filter to
  every broker), or whose transactional id's coordinator does not know it
  (DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND) or does not have the
  partition in its transaction; columns Topic, Partition, ProducerId,
  ProducerEpoch, CoordinatorEpoch, StartOffset, LastTimestamp, Duration(min).
  Kafka 3.9's tool has no ``force-terminate`` (it came with KIP-939 after
  3.9); an id's open transaction is ended by its coordinator's timeout or by
  ``abort``.

It speaks the protocol with kafkapy's own client connections (``KafkaClient``),
so it works against any Kafka-compatible broker.  Errors: one line on stderr,
exit 1 (``_cli.run``).
"""

from __future__ import annotations

import sys
import time
from typing import Optional, Sequence

from kafkapy.client import conn as _conn
from kafkapy.client import errors
from kafkapy.tools._cli import ToolError, load_properties_file, parser, run

FIND_COORDINATOR, METADATA = 10, 3
WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 27, 61, 65, 66



def pretty_print_table(headers, rows, out) -> None:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    for row in [headers, *rows]:
        out.write("".join(cell.ljust(widths[i]) + "\t" for i, cell in enumerate(row)) + "\n")


def _ms(value) -> int:
    """kio gives durations as timedelta and instants as datetime; the wire has ms."""
    if hasattr(value, "total_seconds") and not hasattr(value, "year"):
        return round(value.total_seconds() * 1000)
    if hasattr(value, "timestamp"):
        return round(value.timestamp() * 1000)
    return int(value)


def _fail(message: str, error) -> ToolError:
    return ToolError(f"{message}: {error}. Enable debug logging for additional detail.")


def _check(code, message: str, text=None) -> None:
    if code:
        raise _fail(message, errors.for_code(code, text))


class Admin:
    def __init__(self, bootstrap: str, timeout_ms: int):
        self.client = _conn.KafkaClient(bootstrap, "kafkapy-transactions", timeout_ms,
                                        allow_auto_topic_creation=False)
        self.client.refresh_metadata(topics=None)

    def close(self) -> None:
        self.client.close()

    def leader(self, topic: str, partition: int) -> int:
        self.client.refresh_metadata(topics=[topic])
        leader = self.client.metadata.leader_for(topic, partition)
        if leader is None or leader < 0:
            raise errors.UnknownTopicOrPartitionError(f"{topic}-{partition}")  # noqa: F821
        return leader

    def find_transaction_coordinator(self, transactional_id: str) -> int:
        conn = self.client.least_loaded_connection()
        response = conn.request(FIND_COORDINATOR, {"key": transactional_id, "key_type": 1,
                                                   "coordinator_keys": [transactional_id]})
        entry = response.coordinators[0] if conn.version(FIND_COORDINATOR) >= 4 else response
        _check(entry.error_code, "FindCoordinator", getattr(entry, "error_message", None))
        self.client.metadata.brokers[entry.node_id] = _conn.BrokerMetadata(entry.node_id, entry.host, entry.port)
        return entry.node_id

    def all_topics(self) -> list[str]:
        """Every topic, internal ones included (Kafka's listTopics with listInternal)."""
        conn = self.client.least_loaded_connection()
        response = conn.request(METADATA, _conn.metadata_request(None, False))
        self.client.metadata.update(response, None)
        return sorted(self.client.metadata.partitions)

    def describe_transaction(self, transactional_id: str, message: str):
        """``(coordinator node, TransactionState)`` of DescribeTransactions
        (FindCoordinator key type 1 first); a request failure is ``message``'s ToolError."""
        try:
            node = self.find_transaction_coordinator(transactional_id)
            response = self.client.request(node, DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]})
        except errors.KafkaError as exc:
            raise _fail(message, exc) from None
        return node, response.transaction_states[0]

    def describe_producers(self, topic: str, partition: int):
        node = self.leader(topic, partition)
        response = self.client.request(node, DESCRIBE_PRODUCERS,
                                       {"topics": [{"name": topic, "partition_indexes": [partition]}]})
        for t in response.topics:
            for p in t.partitions:
                if t.name == topic and p.partition_index == partition:
                    if p.error_code:
                        raise errors.for_code(p.error_code, p.error_message)
                    return p.active_producers
        raise errors.UnknownTopicOrPartitionError(f"{topic}-{partition}")  # noqa: F821


def cmd_list(admin: Admin, args, out) -> None:
    rows = []
    for node in sorted(admin.client.metadata.brokers):
        values = {"state_filters": [], "producer_id_filters": [],
                  "duration_filter": -1 if args.duration_filter is None else args.duration_filter}
        try:
            response = admin.client.request(node, LIST_TRANSACTIONS, values)
        except errors.KafkaError as exc:
            raise _fail("Failed to list transactions", exc) from None
        _check(response.error_code, "Failed to list transactions")
        for state in response.transaction_states:
            rows.append([state.transactional_id, str(node), str(state.producer_id), state.transaction_state])
    pretty_print_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows, out)


def cmd_describe(admin: Admin, args, out) -> None:
    txn_id = args.transactional_id
    message = f"Failed to describe transaction state of transactional-id `{txn_id}`"
    node, state = admin.describe_transaction(txn_id, message)
    _check(state.error_code, message)
    start_ms = _ms(state.transaction_start_time)
    if start_ms < 0:
        start, duration = "None", "None"
    else:
        start, duration = str(start_ms), str(int(time.time() * 1000) - start_ms)
    partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
    pretty_print_table(
        ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
         "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
        [[str(node), txn_id, str(state.producer_id), str(state.producer_epoch), state.transaction_state,
          str(_ms(state.transaction_timeout)), start, duration, partitions]], out)


def cmd_describe_producers(admin: Admin, args, out) -> None:
    try:
        producers = admin.describe_producers(args.topic, args.partition)
    except errors.KafkaError as exc:
        raise _fail(f"Failed to describe producers for partition {args.topic}-{args.partition} on leader",
                    exc) from None
    rows = [[str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
             str(_ms(p.last_timestamp)), "None" if p.current_txn_start_offset < 0 else str(p.current_txn_start_offset)]
            for p in producers]
    pretty_print_table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                        "CurrentTransactionStartOffset"], rows, out)


def cmd_abort(admin: Admin, args, out) -> None:
    topic, partition = args.topic, args.partition
    tp = f"{topic}-{partition}"
    if args.start_offset is None and args.producer_id is None:
        raise ToolError("The transaction to abort must be identified either with --start-offset (for brokers on "
                        "3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older "
                        "brokers)")
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise ToolError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise ToolError("Missing required argument --coordinator-epoch")
        producer_id, producer_epoch, coordinator_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    else:
        try:
            producers = admin.describe_producers(topic, partition)
        except errors.KafkaError as exc:
            raise _fail(f"Failed to validate producer state for partition {tp}", exc) from None
        found = next((p for p in producers if p.current_txn_start_offset == args.start_offset), None)
        if found is None:
            raise ToolError(f"Could not find any open transactions starting at offset {args.start_offset} "
                            f"on partition {tp}")
        producer_id, producer_epoch, coordinator_epoch = found.producer_id, found.producer_epoch, \
            found.coordinator_epoch
    coordinator_epoch = max(0, coordinator_epoch)
    spec = (f"AbortTransactionSpec(topicPartition={tp}, producerId={producer_id}, "
            f"producerEpoch={producer_epoch}, coordinatorEpoch={coordinator_epoch})")
    try:
        node = admin.leader(topic, partition)
        response = admin.client.request(node, WRITE_TXN_MARKERS, {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": False,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
    except errors.KafkaError as exc:
        raise _fail(f"Failed to abort transaction {spec}", exc) from None
    for marker in response.markers:
        for t in marker.topics:
            for p in t.partitions:
                _check(p.error_code, f"Failed to abort transaction {spec}")


# find-hanging: Kafka's FindHangingTransactionsCommand (KIP-664).
FIND_HANGING_BATCH = 500  # partitions per DescribeProducers, as Kafka's MAX_BATCH_SIZE
HANGING_HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)"]


def _partitions_to_search(admin: Admin, topic, partition, broker_id) -> list[tuple[str, int]]:
    try:
        if topic is not None:
            admin.client.refresh_metadata(topics=[topic])  # the leaders DescribeProducers goes to
            topics = [topic]
        else:
            topics = admin.all_topics()
    except errors.KafkaError as exc:
        raise _fail("Failed to list topics", exc) from None
    if topic is not None and partition is not None:
        return [(topic, partition)]
    found = []
    for name in topics:
        code = admin.client.metadata.topic_errors.get(name)
        if code:
            raise _fail(f"Failed to describe {len(topics)} topics", errors.for_code(code))
        for p, meta in sorted(admin.client.metadata.partitions.get(name, {}).items()):
            if broker_id is None or broker_id in meta.replicas:
                found.append((name, p))
    return found


def _open_transactions(admin: Admin, partitions, broker_id, max_timeout_ms: int) -> list:
    """``(topic, partition, producer state)`` of each open transaction whose
    producer wrote nothing for longer than ``max_timeout_ms``."""
    by_node: dict[int, list] = {}
    for topic, p in partitions:
        node = broker_id if broker_id is not None else admin.client.metadata.leader_for(topic, p)
        by_node.setdefault(node, []).append((topic, p))
    where = f"Optional[{broker_id}]" if broker_id is not None else "Optional.empty"
    found = []
    for node, tps in sorted(by_node.items()):
        for i in range(0, len(tps), FIND_HANGING_BATCH):
            batch = tps[i:i + FIND_HANGING_BATCH]
            message = f"Failed to describe producers for {len(batch)} partitions on broker {where}"
            if node is None or node < 0:
                raise _fail(message, errors.for_code(6))  # NOT_LEADER_OR_FOLLOWER: no leader
            topics: dict[str, list[int]] = {}
            for topic, p in batch:
                topics.setdefault(topic, []).append(p)
            try:
                response = admin.client.request(node, DESCRIBE_PRODUCERS, {"topics": [
                    {"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
            except errors.KafkaError as exc:
                raise _fail(message, exc) from None
            now_ms = int(time.time() * 1000)
            for t in response.topics:
                for p in t.partitions:
                    _check(p.error_code, message, p.error_message)
                    for state in p.active_producers:
                        if state.current_txn_start_offset >= 0 and now_ms - _ms(state.last_timestamp) > max_timeout_ms:
                            found.append((t.name, p.partition_index, state))
    return found


def _transactional_ids(admin: Admin, producer_ids) -> dict[int, str]:
    """producer id -> transactional id, from every broker's ListTransactions."""
    out = {}
    for node in sorted(admin.client.metadata.brokers):
        try:
            response = admin.client.request(node, LIST_TRANSACTIONS, {
                "state_filters": [], "producer_id_filters": sorted(producer_ids), "duration_filter": -1})
        except errors.KafkaError as exc:
            raise _fail(f"Failed to list transactions for {len(producer_ids)} producers", exc) from None
        _check(response.error_code, f"Failed to list transactions for {len(producer_ids)} producers")
        for state in response.transaction_states:
            if state.producer_id in producer_ids:
                out[state.producer_id] = state.transactional_id
    return out


def _transaction_partitions(admin: Admin, txn_id: str):
    """The partitions of ``txn_id``'s transaction by its coordinator, or
    None when the coordinator does not know the id."""
    message = "Failed to describe 1 transactions"
    _node, state = admin.describe_transaction(txn_id, message)
    if state.error_code == 105:  # TRANSACTIONAL_ID_NOT_FOUND
        return None
    _check(state.error_code, message)
    return {(t.topic, p) for t in state.topics for p in t.partitions}


def cmd_find_hanging(admin: Admin, args, out) -> None:
    if args.topic is None and args.broker_id is None:
        raise ToolError("The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
                        "the search")
    if args.partition is not None and args.topic is None:
        raise ToolError("The --partition argument requires --topic to be provided")
    partitions = _partitions_to_search(admin, args.topic, args.partition, args.broker_id)
    candidates = _open_transactions(admin, partitions, args.broker_id, args.max_transaction_timeout * 60_000)
    hanging = []
    if candidates:
        txn_ids = _transactional_ids(admin, {state.producer_id for _, _, state in candidates})
        described = {txn_id: _transaction_partitions(admin, txn_id) for txn_id in sorted(set(txn_ids.values()))}
        for topic, p, state in candidates:
            txn_id = txn_ids.get(state.producer_id)
            in_txn = described.get(txn_id) if txn_id is not None else None
            # The coordinator still lists the partition (Ongoing, or its
            # marker not written yet): it will write the marker itself.
            if in_txn is None or (topic, p) not in in_txn:
                hanging.append((topic, p, state))
    now_ms = int(time.time() * 1000)
    rows = [[topic, str(p), str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch),
             str(s.current_txn_start_offset), str(_ms(s.last_timestamp)),
             str((now_ms - _ms(s.last_timestamp)) // 60_000)] for topic, p, s in hanging]
    pretty_print_table(HANGING_HEADERS, rows, out)


COMMANDS = {"list": cmd_list, "describe": cmd_describe, "describe-producers": cmd_describe_producers,
            "abort": cmd_abort, "find-hanging": cmd_find_hanging}


def _body(argv: Sequence[str]) -> int:
    p = parser("kafkapy-transactions", "This tool is used to analyze the transactional state of producers in the "
                                       "cluster. It can be used to detect and recover from hanging transactions.")
    p.add_argument("--bootstrap-server", required=True,
                   help="hostname and port for the broker to connect to, in the form `host:port`")
    p.add_argument("--command-config", help="property file containing configs to be passed to admin client")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    sp = sub.add_parser("list", help="list transactions")
    sp.add_argument("--duration-filter", type=int,
                    help="Duration (in millis) to filter by: if < 0, all transactions will be returned; otherwise, "
                         "only transactions running longer than this duration will be returned")
    sp = sub.add_parser("describe", help="describe the state of an active transactional-id")
    sp.add_argument("--transactional-id", required=True, help="transactional id")
    sp = sub.add_parser("describe-producers", help="describe the states of active producers for a topic partition")
    sp.add_argument("--topic", required=True, help="topic name")
    sp.add_argument("--partition", type=int, required=True, help="partition number")
    sp = sub.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)")
    sp.add_argument("--topic", required=True, help="topic name")
    sp.add_argument("--partition", type=int, required=True, help="partition number")
    sp.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    sp.add_argument("--producer-id", type=int, help="producer id")
    sp.add_argument("--producer-epoch", type=int, help="producer epoch")
    sp.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")
    sp = sub.add_parser("find-hanging", help="find hanging transactions")
    sp.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    sp.add_argument("--max-transaction-timeout", type=int, default=15,
                    help="maximum transaction timeout in minutes to limit the scope of the search (15 minutes by "
                         "default)")
    sp.add_argument("--topic", help="topic name to limit search to (required if --partition is specified)")
    sp.add_argument("--partition", type=int, help="partition number")
    args = p.parse_args(argv)
    props = load_properties_file(args.command_config)
    timeout_ms = int(props.get("request.timeout.ms", 30000))
    try:
        admin = Admin(args.bootstrap_server, timeout_ms)
    except errors.KafkaError as exc:
        raise ToolError(f"Cannot connect to {args.bootstrap_server}: {exc}") from None
    try:
        COMMANDS[args.command](admin, args, sys.stdout)
    finally:
        admin.close()
    sys.stdout.flush()
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
