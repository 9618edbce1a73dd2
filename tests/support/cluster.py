"""A kafkapy cluster for system tests: a real ZooKeeper and N real brokers.

``Cluster`` starts each broker through its real entry point with
``zookeeper.connect`` (its own chroot on the given ZooKeeper), its own port
and log dir, and short session/lag timeouts so faults show within seconds.
Tests get the brokers by id, the bootstrap list, and bounded waits on what
the cluster reports through the Kafka protocol (Metadata via
confluent-kafka's AdminClient), never through broker internals.

``BackgroundProducer`` is the produce side of Kafka's produce-consume-validate
system tests: an idempotent ``acks=all`` producer in a thread sending numbered
values, recording which were acknowledged; ``consume_all`` reads a topic to
its end; ``validate`` checks acknowledged ⊆ consumed, no duplicates and
per-partition order.

Ownership: one ``Cluster`` per test, driven by the test's thread; it ends
only the processes it started (each ``BrokerProcess`` by its PID).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Mapping, Optional

from .broker import BrokerProcess

# Short enough that a SIGKILLed broker's registration and leaderships move in
# seconds (Kafka's defaults are 18 s and 30 s).
SESSION_TIMEOUT_MS = 4000
REPLICA_LAG_TIME_MAX_MS = 3000


def wait_for(predicate, timeout_s: float = 30.0, what: str = "condition", interval_s: float = 0.2):
    """Poll ``predicate`` until it returns something truthy (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:  # bounded by the deadline
        try:
            last = predicate()
        except Exception as exc:  # a broker mid-restart: try again
            last = exc
        else:
            if last:
                return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {last!r})")


class Cluster:
    def __init__(self, zookeeper, work_dir: Path, chroot: str, broker_ids=(1, 2, 3),
                 overrides: Optional[Mapping[str, object]] = None):
        self.zookeeper = zookeeper
        self.chroot = chroot
        base = {"zookeeper.connect": zookeeper.connect_string(chroot),
                "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                "replica.lag.time.max.ms": REPLICA_LAG_TIME_MAX_MS,
                "num.partitions": 1,
                "offsets.topic.replication.factor": min(3, len(broker_ids)),
                "default.replication.factor": 1}
        base.update(overrides or {})
        self.brokers = {i: BrokerProcess(Path(work_dir) / f"broker-{i}", {**base, "broker.id": i})
                        for i in broker_ids}

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> "Cluster":
        for b in self.brokers.values():
            b.start()
        self.wait_brokers(set(self.brokers))
        return self

    def close(self) -> None:
        for b in self.brokers.values():
            b.close()

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.running())

    def running(self) -> list:
        return [b for b in self.brokers.values() if b.running]

    # -- what the cluster reports ---------------------------------------------------
    def admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def metadata(self, topic: Optional[str] = None):
        return self.admin().list_topics(topic=topic, timeout=10)

    def wait_brokers(self, ids: set, timeout_s: float = 30.0):
        """Until Metadata from every running broker lists exactly ``ids`` and a controller."""
        def ok():
            for b in self.running():
                from confluent_kafka.admin import AdminClient

                md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=5)
                if set(md.brokers) != ids or md.controller_id not in ids:
                    return False
            return True

        return wait_for(ok, timeout_s, f"brokers {sorted(ids)} in every broker's metadata")

    def create_topic(self, name: str, partitions: int, replication_factor: int, config=None,
                     timeout_s: float = 30.0):
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # kept until the future resolves (destroying it fails the future)
        futures = admin.create_topics([NewTopic(name, partitions, replication_factor,
                                                config=dict(config or {}))], operation_timeout=10)
        futures[name].result(timeout=30)
        return self.wait_topic_ready(name, partitions, replication_factor, timeout_s)

    def partitions(self, topic: str) -> dict:
        """``{partition: (leader, replicas, isr)}`` as Metadata answers it."""
        t = self.metadata(topic).topics[topic]
        if t.error is not None:
            return {}
        return {p.id: (p.leader, tuple(p.replicas), tuple(p.isrs)) for p in t.partitions.values()}

    def wait_topic_ready(self, topic: str, partitions: int, replication_factor: int,
                         timeout_s: float = 30.0) -> dict:
        """Until every partition has a leader and a full ISR of ``replication_factor``."""
        def ok():
            parts = self.partitions(topic)
            if len(parts) != partitions:
                return None
            if all(leader >= 0 and len(replicas) == replication_factor and len(isr) == replication_factor
                   for leader, replicas, isr in parts.values()):
                return parts
            return None

        return wait_for(ok, timeout_s, f"topic {topic} led with full ISRs")

    def leader_of(self, topic: str, partition: int) -> int:
        return self.partitions(topic)[partition][0]


class BackgroundProducer:
    """An idempotent acks=all producer sending ``"<n>"`` values in a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate_per_s: float = 500.0,
                 max_messages: int = 100_000, config: Optional[Mapping[str, object]] = None):
        from confluent_kafka import Producer

        conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                "linger.ms": 5, "message.timeout.ms": 60000, "retry.backoff.ms": 100}
        conf.update(config or {})
        self.producer = Producer(conf)
        self.topic = topic
        self.partitions = partitions
        self.rate_per_s = rate_per_s
        self.max_messages = max_messages
        self.acked: dict[int, list[int]] = {}  # partition -> values in ack order
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="background-producer", daemon=True)

    def _delivered(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.setdefault(msg.partition(), []).append(int(msg.value()))

    def _run(self):
        interval = 1.0 / self.rate_per_s
        next_at = time.monotonic()
        while not self._stop.is_set() and self.sent < self.max_messages:  # bounded by max_messages
            value = self.sent
            self.producer.produce(self.topic, str(value).encode(), partition=value % self.partitions,
                                  on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def start(self) -> "BackgroundProducer":
        self._thread.start()
        return self

    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def halt(self) -> None:
        """Stop sending at once, without waiting for outstanding acknowledgements
        (a failing test's clean-up; ``stop`` is the checked end)."""
        self._stop.set()

    def stop(self, flush_timeout_s: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(30)
        remaining = self.producer.flush(flush_timeout_s)
        assert remaining == 0, f"{remaining} messages still unacknowledged after {flush_timeout_s} s"


def consume_all(bootstrap: str, topic: str, partitions: int, expected_end: Optional[dict] = None,
                timeout_s: float = 60.0) -> dict:
    """Read every partition of ``topic`` from the beginning to its high
    watermark (no group): ``{partition: [values in offset order]}``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"validate-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[int]] = {p: [] for p in range(partitions)}
        positions = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        while any(positions[p] < ends[p] for p in ends):  # bounded by the deadline below
            assert time.monotonic() < deadline, f"consumed {positions} of {ends} in {timeout_s} s"
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            out[msg.partition()].append(int(msg.value()))
            positions[msg.partition()] = msg.offset() + 1
        return out
    finally:
        consumer.close()


def validate(acked: dict, consumed: dict) -> None:
    """Kafka's produce-consume-validate: every acknowledged value was consumed,
    none twice, and in each partition the acknowledged ones in send order."""
    for partition, values in consumed.items():
        assert len(values) == len(set(values)), f"partition {partition}: duplicates"
    for partition, values in acked.items():
        got = consumed.get(partition, [])
        wanted = set(values)
        missing = wanted - set(got)
        assert not missing, f"partition {partition}: {len(missing)} acknowledged values lost, e.g. {sorted(missing)[:5]}"
        order = [v for v in got if v in wanted]
        assert order == sorted(order), f"partition {partition}: out of order"


# -- helpers for the fault and client system tests (tests/system/test_cluster_*.py) --

def controller_id(cluster: Cluster) -> int:
    """The controller as Metadata answers it (-1 while there is none)."""
    return cluster.metadata().controller_id


def wait_new_leader(cluster: Cluster, topic: str, partition: int, not_in, timeout_s: float = 30.0) -> int:
    """Until Metadata names a leader of ``topic-partition`` outside ``not_in`` (dead or old leaders)."""
    excluded = set(not_in) | {-1}
    return wait_for(lambda: (leader := cluster.leader_of(topic, partition)) not in excluded and leader,
                    timeout_s, f"a leader of {topic}-{partition} other than {sorted(excluded)}")


def log_batches(broker: BrokerProcess, topic: str, partition: int) -> list[bytes]:
    """Every batch of one replica's log as its bytes on disk, in offset order, read
    straight from the segment files (v2 framing: baseOffset i64, batchLength i32);
    a segment's preallocated or half-written tail is left out, and batches are
    compared across segments so where each replica rolled does not matter."""
    import struct

    directory = broker.log_dirs[0] / f"{topic}-{partition}"
    batches = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + 12 <= len(data):  # bounded by the file's size
            (batch_length,) = struct.unpack_from(">i", data, position + 8)
            if batch_length <= 0 or position + 12 + batch_length > len(data):
                break
            batches.append(data[position:position + 12 + batch_length])
            position += 12 + batch_length
    return batches


def wait_replicas_identical(cluster: Cluster, topic: str, partition: int, timeout_s: float = 30.0) -> list[bytes]:
    """Until every broker's replica of ``topic-partition`` holds the same batches
    (byte for byte); returns them."""
    def same():
        logs = [log_batches(b, topic, partition) for b in cluster.brokers.values()]
        return logs[0] if all(log == logs[0] for log in logs) and logs[0] else None

    try:
        return wait_for(same, timeout_s, f"identical replicas of {topic}-{partition}")
    except AssertionError:
        summary = {i: (len(bs := log_batches(b, topic, partition)),
                       [int.from_bytes(x[:8], "big") for x in bs[-3:]]) for i, b in cluster.brokers.items()}
        raise AssertionError(f"replicas of {topic}-{partition} differ: {{broker: (batches, last base offsets)}} "
                             f"{summary}") from None


def create_topic_assigned(cluster: Cluster, name: str, assignment: list, config=None,
                          timeout_s: float = 30.0) -> dict:
    """CreateTopics with a manual replica assignment (``[[leader, ...], ...]``: the
    first replica of each partition leads); returns ``partitions()`` once every
    partition has a leader and a full ISR."""
    from confluent_kafka.admin import NewTopic

    admin = cluster.admin()  # kept until the future resolves
    admin.create_topics([NewTopic(name, len(assignment), -1, replica_assignment=assignment, config=dict(config or {}))],
                        operation_timeout=10)[name].result(timeout=30)
    return cluster.wait_topic_ready(name, len(assignment), len(assignment[0]), timeout_s)


def zk_partition_state(zk, topic: str, partition: int) -> Optional[dict]:
    """The partition's state znode (Kafka's JSON: leader, leader_epoch, isr,
    controller_epoch) through a kazoo client on the cluster's chroot, or None."""
    import json

    from kafkapy.coordination import zk_data

    path = zk_data.partition_state_path(topic, partition)
    if zk.exists(path) is None:
        return None
    return json.loads(zk.get(path)[0])


def wait_full_isr(cluster: Cluster, zk, topic: str, partitions: int, replication_factor: int,
                  timeout_s: float = 60.0) -> dict:
    """Until every partition's ISR is full in ZooKeeper (the controller's and the
    leaders' ISR jobs' writes) and then in Metadata. ZooKeeper first: a broker
    just restarted answers Metadata from the image it had before it died until
    the controller's UpdateMetadata reaches it (~50 ms), which may show the
    ISR it left."""
    wait_for(lambda: all((s := zk_partition_state(zk, topic, p)) and len(s["isr"]) == replication_factor
                         for p in range(partitions)),
             timeout_s, f"{topic}'s ISRs full in ZooKeeper")
    return cluster.wait_topic_ready(topic, partitions, replication_factor, timeout_s)


def group_coordinated_outside(cluster: Cluster, avoid, offsets_partitions: int, prefix: str = "group",
                              timeout_s: float = 30.0) -> tuple:
    """``(group id, coordinator id)`` for a group whose coordinator, the leader of
    its ``__consumer_offsets`` partition (Kafka's ``abs(hashCode) % partitions``),
    is not in ``avoid``. The offsets topic is created first by a FindCoordinator
    (DescribeGroups of any group) and waited for with full ISRs."""
    from kafkapy.coordinator.records import partition_for

    admin = cluster.admin()  # kept while its futures are pending
    wait_for(lambda: admin.describe_consumer_groups(["probe"])["probe"].result(timeout=10), timeout_s,
             "a first FindCoordinator")
    offsets = cluster.wait_topic_ready("__consumer_offsets", offsets_partitions, len(cluster.brokers), timeout_s)
    for group in (f"{prefix}-{i}" for i in range(1000)):  # bounded: 1000 candidates
        coordinator = offsets[partition_for(group, offsets_partitions)][0]
        if coordinator not in avoid:
            return group, coordinator
    raise AssertionError(f"no group id coordinated outside {sorted(avoid)}")
