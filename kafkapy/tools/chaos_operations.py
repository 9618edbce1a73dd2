"""``kafkapy-chaos``'s operations: what operators do to a live cluster,
mixed with the faults. Each runs from the runner's main thread, fills in the
``Event`` it is given (target, note; ``failed`` when the operation did not do
what it should, which fails the run) and returns when it is done:

* ``rolling-restart``: SIGTERM each broker in turn, the controller last (a
  clean, controlled shutdown), start it again and wait for every ISR to be
  full before the next;
* ``reassignment``: AlterPartitionReassignments for one partition of the
  client topic (a replica swapped for a broker outside the set when there is
  one, else the replica order rotated, which moves its preferred leader),
  then ListPartitionReassignments until it is no longer ongoing and Metadata
  shows the new replicas;
* ``preferred-election``: ElectLeaders (PREFERRED) for every partition of the
  client topic, then Metadata until each is led by its first replica;
* ``topic-churn``: create a topic, produce to it and read it back, then
  delete it while a producer still writes to it; that producer's errors
  after the deletion are expected and counted apart;
* ``zookeeper-node-bounce``: SIGTERM one node of the ZooKeeper ensemble, start
  it again, wait until it serves.

They stand on the tools' client code (``reassign_partitions.Cluster``,
``leader_election.elect``) and confluent-kafka, as an operator's would.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from kafkapy.tools.chaos_cluster import (RDKAFKA_LOG, RECOVERY_TIMEOUT_S, TOPIC, ChaosCluster, admin,
                                         answered_view, cluster_view, consume_to_end, create_topic,
                                         wait_recovered)

OPERATIONS = ("rolling-restart", "reassignment", "preferred-election", "topic-churn", "zookeeper-node-bounce")
CHURN_PARTITIONS = 3
CHURN_RECORDS = 300
OPERATION_TIMEOUT_S = 90.0
ZOOKEEPER_DOWN_S = 5.0


@dataclass
class Event:
    """One fault or operation on the timeline (times in seconds since the load started)."""

    kind: str
    category: str  # "fault" or "operation"
    started: float
    target: str = ""
    ended: float = 0.0
    recovered_s: float | None = None
    note: str = ""
    failed: str = ""  # why an operation did not do its job ("" when it did)


def _poll(check, timeout_s: float, step_s: float = 0.5):
    """``check()``'s first truthy value within ``timeout_s``, else None (errors count as not yet)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # bounded by timeout_s
        try:
            value = check()
            if value:
                return value
        except Exception:
            pass
        time.sleep(step_s)
    return None


def rolling_restart(cluster: ChaosCluster, rng: random.Random, ev: Event) -> None:
    controller = answered_view(cluster.bootstrap)["controller"]
    order = [i for i in cluster.ports if i != controller] + ([controller] if controller in cluster.ports else [])
    ev.target = "brokers " + ", ".join(str(i) for i in order) + f" (controller {controller} last)"
    steps = []
    for broker_id in order:
        stop_s, code = cluster.stop_broker_cleanly(broker_id)
        cluster.start_broker(broker_id)
        back = wait_recovered(cluster)
        steps.append(f"{broker_id}: stopped {stop_s:.1f} s (exit {code}), ISR full "
                     + ("-" if back is None else f"{back:.1f} s"))
        if code != 0:
            ev.failed = ev.failed or f"broker {broker_id} did not stop cleanly (exit {code})"
        if back is None:
            ev.failed = ev.failed or f"ISRs not full {RECOVERY_TIMEOUT_S:.0f} s after broker {broker_id} restarted"
            break
    ev.note = "; ".join(steps)


def reassignment(cluster: ChaosCluster, rng: random.Random, ev: Event) -> None:
    from kafkapy.tools.reassign_partitions import Cluster as ReassignClient

    view = answered_view(cluster.bootstrap)
    partition = rng.choice(sorted(view["replicas"]))
    current = view["replicas"][partition]
    outside = sorted(set(cluster.ports) - set(current))
    if outside:
        wanted = list(current)
        wanted[rng.randrange(len(wanted))] = rng.choice(outside)
    else:
        wanted = current[1:] + current[:1]
    ev.target = f"{TOPIC}-{partition}: {current} -> {wanted}"
    client = ReassignClient(cluster.bootstrap, 30000)
    errors = client.alter({(TOPIC, partition): wanted})
    if errors:
        ev.failed = f"AlterPartitionReassignments: {errors}"
        return
    began = time.monotonic()

    def done():
        return (not client.ongoing([(TOPIC, partition)])
                and cluster_view(cluster.bootstrap)["replicas"].get(partition) == wanted)

    if _poll(done, OPERATION_TIMEOUT_S) is None:
        ev.failed = f"not complete within {OPERATION_TIMEOUT_S:.0f} s"
    else:
        ev.note = f"completed in {time.monotonic() - began:.1f} s"


def preferred_election(cluster: ChaosCluster, rng: random.Random, ev: Event) -> None:
    from kafkapy.protocol.errors import ErrorCode
    from kafkapy.tools.leader_election import ELECTION_TYPES, elect

    view = answered_view(cluster.bootstrap)
    parts = sorted(view["replicas"])
    off = [p for p in parts if view["leaders"].get(p) != view["replicas"][p][0]]
    ev.target = f"{TOPIC}, {len(parts)} partitions ({len(off)} not led by their preferred replica)"
    results = elect(cluster.bootstrap, ELECTION_TYPES["PREFERRED"], [(TOPIC, p) for p in parts], 30000)
    elected = [p for (_t, p), (code, _m) in results.items() if code == ErrorCode.NONE]
    # Kafka's answer when the preferred replica is not in the ISR just then
    # (a follower lagging again on a loaded box): an operator tries later.
    unavailable = sorted(p for (_t, p), (code, _m) in results.items()
                         if code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
    bad = {p: ErrorCode(code).name for (_t, p), (code, _m) in results.items()
           if code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)}
    ev.note = (f"elected {len(elected)}, already preferred {len(parts) - len(elected) - len(bad) - len(unavailable)}"
               + (f", preferred replica not in the ISR: {TOPIC}-" + f", {TOPIC}-".join(map(str, unavailable))
                  if unavailable else ""))
    if bad:
        ev.failed = f"ElectLeaders errors {bad}"
        return

    def preferred():
        v = cluster_view(cluster.bootstrap)
        return all(v["leaders"].get(p) == v["replicas"][p][0] for p in parts if p not in unavailable)

    if _poll(preferred, 30.0) is None:
        ev.failed = "Metadata did not show every partition led by its preferred replica within 30 s"


class _ChurnProducer(threading.Thread):
    """Writes to the churned topic until told to stop; counts acks and errors, before and after the deletion."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(name="chaos-churn", daemon=True)
        from confluent_kafka import Producer

        self.topic = topic
        self.stop_event = threading.Event()
        self.deleted_at = None
        self.acked: list = []
        self.errors_before: list = []
        self.errors_after: list = []
        self.p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                           "linger.ms": 5, "message.timeout.ms": 5000, "allow.auto.create.topics": False,
                           "client.id": "chaos-churn", "logger": RDKAFKA_LOG})

    def _done(self, err, msg):
        if err is None:
            self.acked.append(msg.value().decode())
        else:
            (self.errors_before if self.deleted_at is None else self.errors_after).append(err.name())

    def run(self) -> None:
        n = 0
        while not self.stop_event.wait(0.01):  # bounded by the stop event (the operation's end)
            try:
                self.p.produce(self.topic, f"churn:{n}".encode(), partition=n % CHURN_PARTITIONS,
                               on_delivery=self._done)
                n += 1
            except Exception as exc:  # the topic gone from the client's metadata: an expected refusal
                (self.errors_before if self.deleted_at is None else self.errors_after).append(type(exc).__name__)
                self.stop_event.wait(0.2)
            self.p.poll(0)

    def finish(self) -> None:
        self.stop_event.set()
        self.join(10)
        self.p.flush(20)
        self.p.purge()
        self.p.poll(0)


def topic_churn(cluster: ChaosCluster, rng: random.Random, ev: Event) -> None:
    name = f"chaos-churn-{rng.randrange(1 << 20):05x}"
    ev.target = f"topic {name} ({CHURN_PARTITIONS} partitions, RF 3)"
    began = time.monotonic()
    create_topic(cluster.bootstrap, name, CHURN_PARTITIONS)
    if _poll(lambda: wait_recovered(cluster, 5.0, topics=(name,)) is not None, 60.0) is None:
        ev.failed = "the new topic's partitions were not led with full ISRs within 60 s"
    producer = _ChurnProducer(cluster.bootstrap, name)
    producer.start()
    _poll(lambda: len(producer.acked) >= CHURN_RECORDS, 60.0, 0.2)
    acked_before = list(producer.acked)
    created_s = time.monotonic() - began
    try:
        got = consume_to_end(cluster.bootstrap, name, CHURN_PARTITIONS, timeout_s=60.0)
        read = {v for values in got.values() for v in values}
        missing = len(set(acked_before) - read)
    except Exception as exc:
        read, missing = set(), -1
        ev.failed = ev.failed or f"reading it back: {exc}"
    if missing > 0:
        ev.failed = ev.failed or f"{missing} acknowledged records not read back"
    if len(acked_before) < CHURN_RECORDS:
        ev.failed = ev.failed or f"only {len(acked_before)} of {CHURN_RECORDS} records acknowledged in 60 s"
    producer.deleted_at = time.monotonic()
    deleting = time.monotonic()
    client = admin(cluster.bootstrap)  # held until the result (a destroyed client fails its futures)
    client.delete_topics([name], operation_timeout=30)[name].result(timeout=60)
    gone = _poll(lambda: name not in cluster_view(cluster.bootstrap)["topics"], 60.0)
    deleted_s = time.monotonic() - deleting
    producer.finish()
    if gone is None:
        ev.failed = ev.failed or "the topic was still in Metadata 60 s after its deletion"
    kinds: dict = {}
    for e in producer.errors_after:
        kinds[e] = kinds.get(e, 0) + 1
    ev.note = (f"created and {len(acked_before)} records acknowledged in {created_s:.1f} s, {len(read)} read back; "
               f"deleted in {deleted_s:.1f} s; its producer then (expected): "
               + (", ".join(f"{k} ×{n}" for k, n in sorted(kinds.items())) or "no errors")
               + (f"; errors before the deletion: {len(producer.errors_before)}" if producer.errors_before else ""))


def zookeeper_node_bounce(cluster: ChaosCluster, rng: random.Random, ev: Event) -> None:
    node = rng.randrange(1, len(cluster.zks) + 1)
    mode = cluster.zookeeper_mode(node)
    ev.target = f"ZooKeeper node {node} ({mode}), SIGTERM, {ZOOKEEPER_DOWN_S:.0f} s down"
    back = cluster.bounce_zookeeper_node(node, ZOOKEEPER_DOWN_S)
    if back is None:
        ev.failed = "the node did not serve again within 60 s"
    else:
        ev.note = f"serving again {back:.1f} s after its start, now {cluster.zookeeper_mode(node)}"


RUN = {"rolling-restart": rolling_restart, "reassignment": reassignment, "preferred-election": preferred_election,
       "topic-churn": topic_churn, "zookeeper-node-bounce": zookeeper_node_bounce}


def operate(kind: str, cluster: ChaosCluster, rng: random.Random, t0: float) -> Event:
    ev = Event(kind, "operation", time.monotonic() - t0)
    try:
        RUN[kind](cluster, rng, ev)
    except Exception as exc:  # a refused request or a client error: the operation failed, the run goes on
        ev.failed = ev.failed or f"{type(exc).__name__}: {exc}"[:300]
    ev.ended = time.monotonic() - t0
    return ev
