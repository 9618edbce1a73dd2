"""Replication between two real brokers, the roles driven by hand: the test
is the controller. Both brokers run through their real entry point in
cluster mode (a real ZooKeeper for membership); the test sends them
UpdateMetadata v8 and LeaderAndIsr v7 itself (kafkapy.protocol.schema, over
TCP, header v2), with a controller epoch above any real controller's so
nothing else moves the roles. Then:

* acks=all produce to the leader completes only through the follower's
  replica fetcher (the follower's fetch moves the high watermark and wakes
  the parked DelayedProduce), and the follower's segment file and
  leader-epoch checkpoint end up byte-equal to the leader's;
* leadership moves to the former follower at a new epoch: the former leader
  becomes the follower, fetches from it with its last fetched epoch (nothing
  diverged) and both logs stay equal;
* a diverged follower (KIP-101): the old leader wrote records no one else
  has, a new leader took over at a newer epoch and wrote others; the old
  leader, made follower, gets a diverging epoch, truncates its extra records
  and ends byte-equal to the new leader.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest

from kafkapy._core.records_py import decode_records
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.schema.leader_and_isr.v7 import request as lai_req
from kafkapy.protocol.schema.leader_and_isr.v7 import response as lai_resp
from kafkapy.protocol.schema.update_metadata.v8 import request as um_req
from kafkapy.protocol.schema.update_metadata.v8 import response as um_resp
from kafkapy.server.replica_fetcher import fetcher_id_for
from support.broker import BrokerProcess
from support.wait import wait_for
from support.zookeeper import chroot_for

confluent_kafka = pytest.importorskip("confluent_kafka")

CONTROLLER_EPOCH = 1000  # above any elected controller's: only this test moves roles
TOPIC = "replicated"
SEGMENT = "00000000000000000000.log"


def _send(port: int, request, response_cls, api_key: int, version: int, timeout_s: float = 10.0):
    """One request with header v2, its response (header v1) decoded."""
    client_id = b"kafkapy-test-controller"
    header = struct.pack(">hhih", api_key, version, 1, len(client_id)) + client_id + b"\x00"
    payload = header + encode_to_bytes(request)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _recv(s, 4))[0]
        frame = _recv(s, size)
    assert frame[4] == 0  # empty response header tag buffer
    response, _ = decode(response_cls, frame, 5)
    return response


def _recv(s, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:  # bounded by the socket timeout
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


class HandController:
    """What the elected controller would send, for one topic; ``states`` are
    ``{partition: (leader, leader_epoch, isr)}``, every partition on (1, 2)."""

    def __init__(self, brokers: dict, topic_id: uuid.UUID):
        self.brokers = brokers  # id -> BrokerProcess
        self.topic_id = topic_id

    def _live(self, live):
        return tuple(um_req.UpdateMetadataBroker(id=i, endpoints=(um_req.UpdateMetadataEndpoint(
            port=self.brokers[i].port, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0),))
            for i in sorted(live))

    def update_metadata(self, to: int, live, states: dict):
        request = um_req.UpdateMetadataRequest(
            controller_id=1, controller_epoch=CONTROLLER_EPOCH, broker_epoch=-1,
            live_brokers=self._live(live),
            topic_states=(um_req.UpdateMetadataTopicState(
                topic_name=TOPIC, topic_id=self.topic_id, partition_states=tuple(
                    um_req.UpdateMetadataPartitionState(
                        partition_index=p, controller_epoch=CONTROLLER_EPOCH, leader=leader,
                        leader_epoch=epoch, isr=tuple(isr), zk_version=epoch, replicas=(1, 2),
                        offline_replicas=())
                    for p, (leader, epoch, isr) in sorted(states.items()))),))
        response = _send(self.brokers[to].port, request, um_resp.UpdateMetadataResponse, 6, 8)
        assert response.error_code == 0

    def leader_and_isr(self, to: int, states: dict):
        request = lai_req.LeaderAndIsrRequest(
            controller_id=1, controller_epoch=CONTROLLER_EPOCH, broker_epoch=-1, type=0,
            topic_states=(lai_req.LeaderAndIsrTopicState(
                topic_name=TOPIC, topic_id=self.topic_id, partition_states=tuple(
                    lai_req.LeaderAndIsrPartitionState(
                        partition_index=p, controller_epoch=CONTROLLER_EPOCH, leader=leader,
                        leader_epoch=epoch, isr=tuple(isr), partition_epoch=epoch, replicas=(1, 2),
                        is_new=epoch == 1)
                    for p, (leader, epoch, isr) in sorted(states.items()))),),
            live_leaders=tuple(lai_req.LeaderAndIsrLiveLeader(broker_id=b, host_name="127.0.0.1",
                                                              port=self.brokers[b].port)
                               for b in sorted({leader for leader, _, _ in states.values()})))
        response = _send(self.brokers[to].port, request, lai_resp.LeaderAndIsrResponse, 4, 7)
        assert response.error_code == 0
        assert [p.error_code for t in response.topics for p in t.partition_errors] == [0] * len(states)

    def elect(self, states: dict, live=(1, 2), to=None):
        """Kafka's order: UpdateMetadata to the live brokers, then LeaderAndIsr
        to the replicas (``to``: only those, as to a broker that came back)."""
        for b in live:
            self.update_metadata(b, live, states)
        for b in live if to is None else to:
            self.leader_and_isr(b, states)


def one(leader: int, leader_epoch: int, isr) -> dict:
    return {0: (leader, leader_epoch, tuple(isr))}


def _props(zk, chroot: str, broker_id: int) -> dict:
    return {"zookeeper.connect": zk.connect_string(chroot), "broker.id": broker_id,
            "zookeeper.session.timeout.ms": 4000, "num.partitions": 1,
            "replica.fetch.wait.max.ms": 200, "replica.fetch.backoff.ms": 200,
            "offsets.topic.replication.factor": 1, "auto.create.topics.enable": False}


@pytest.fixture
def brokers(zookeeper, broker_factory, request):
    chroot = chroot_for(request)
    overrides = getattr(request, "param", {})  # indirect parametrization
    return {i: broker_factory({**_props(zookeeper, chroot, i), **overrides}) for i in (1, 2)}


def _produce(broker: BrokerProcess, values, acks: str, timeout_s: float = 30.0, partitions=(0,)):
    """Produce ``values`` (round robin over ``partitions``); returns the
    delivery errors (None each when acknowledged)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": acks,
                                         "linger.ms": 0, "message.timeout.ms": int(timeout_s * 1000),
                                         "enable.idempotence": False})
    results = []
    for i, v in enumerate(values):
        producer.produce(TOPIC, value=v, partition=partitions[i % len(partitions)],
                         on_delivery=lambda err, msg: results.append(err))
    assert producer.flush(timeout_s + 5) == 0
    return results


def _files(broker: BrokerProcess, partition: int = 0):
    d = broker.log_dirs[0] / f"{TOPIC}-{partition}"
    seg = d / SEGMENT
    epochs = d / "leader-epoch-checkpoint"
    return (seg.read_bytes() if seg.exists() else b"", epochs.read_text() if epochs.exists() else "")


def _values(segment: bytes) -> list:
    """The record values of a segment's batches, in order."""
    values = []
    position = 0
    while len(segment) - position >= 12:
        end = position + 12 + struct.unpack_from(">i", segment, position + 8)[0]
        values += [record[3] for record in decode_records(segment[position:end])]
        position = end
    return values


def _same_logs(brokers, partition: int = 0):
    a, b = _files(brokers[1], partition), _files(brokers[2], partition)
    return a[0] and a == b and a


def test_acks_all_completes_through_the_follower_and_logs_are_equal(brokers):
    control = HandController(brokers, uuid.uuid4())
    control.elect(one(1, 1, (1, 2)))
    started = time.monotonic()
    errors = _produce(brokers[1], [b"v%d" % i for i in range(50)], acks="all")
    assert errors == [None] * 50
    assert time.monotonic() - started < 20
    segment, epochs = wait_for(lambda: _same_logs(brokers), what="equal logs")
    assert segment.count(b"v49") == 1
    assert epochs.splitlines()[2:] == ["1 0"]  # version, count, then epoch 1 from offset 0

    # Leadership moves to broker 2 at epoch 2; broker 1 follows it.
    control.elect(one(2, 2, (1, 2)))
    errors = _produce(brokers[2], [b"w%d" % i for i in range(20)], acks="all")
    assert errors == [None] * 20
    segment, epochs = wait_for(lambda: _same_logs(brokers), what="equal logs after the move")
    assert segment.count(b"w19") == 1 and segment.count(b"v49") == 1
    assert epochs.splitlines()[2:] == ["1 0", "2 50"]
    # The new follower's fetches are not a consumer's: it is not told to
    # truncate (nothing diverged) and fetches no record twice.
    assert "truncating" not in brokers[1].log_text()
    # SIGTERM stops the fetching follower at once (every fetcher wait is
    # bounded by a 0.1 s tick, the leader's long poll included).
    started = time.monotonic()
    assert brokers[1].stop(timeout=10) == 0
    assert time.monotonic() - started < 5


def test_diverged_follower_truncates_to_the_new_leaders_log(brokers):
    control = HandController(brokers, uuid.uuid4())
    control.elect(one(1, 1, (1, 2)))
    assert _produce(brokers[1], [b"a%d" % i for i in range(10)], acks="all") == [None] * 10
    wait_for(lambda: _same_logs(brokers), what="equal logs")
    # Broker 2 goes away; broker 1 (leader of epoch 1, ISR now itself alone)
    # writes records broker 2 never gets.
    brokers[2].stop()
    control.update_metadata(1, (1,), one(1, 1, (1,)))
    assert _produce(brokers[1], [b"lost%d" % i for i in range(5)], acks="1") == [None] * 5
    # Broker 1 goes away; broker 2 returns and is elected uncleanly at epoch 2.
    brokers[1].stop()
    brokers[2].start()
    control.update_metadata(2, (2,), one(2, 2, (2,)))
    control.leader_and_isr(2, one(2, 2, (2,)))
    assert _produce(brokers[2], [b"b%d" % i for i in range(7)], acks="1") == [None] * 7
    # Broker 1 returns as broker 2's follower (the controller's LeaderAndIsr
    # to the returning broker only): diverging epoch 1 ends at 10.
    brokers[1].start()
    control.elect(one(2, 2, (2,)), to=(1,))
    segment, epochs = wait_for(lambda: _same_logs(brokers), what="equal logs after truncation")
    assert b"lost" not in segment and segment.count(b"b6") == 1 and segment.count(b"a9") == 1
    assert epochs.splitlines()[2:] == ["1 0", "2 10"]
    # It got there by the leader's diverging epoch, not by starting over.
    assert "the leader's epoch 1 ends at 10; truncating to 10" in brokers[1].log_text()
    assert "OFFSET_OUT_OF_RANGE" not in brokers[1].log_text()


@pytest.mark.parametrize("brokers", [{"num.replica.fetchers": 2}], indirect=True)
def test_each_broker_leads_some_partitions_and_follows_the_rest_with_two_fetchers(brokers):
    control = HandController(brokers, uuid.uuid4())
    states = {p: (1 + p % 2, 1, (1, 2)) for p in range(8)}  # leaders 1, 2, 1, 2, ...
    control.elect(states)
    errors = _produce(brokers[1], [b"m%d" % i for i in range(160)], acks="all", partitions=range(8))
    assert errors == [None] * 160
    for p in range(8):
        segment, _ = wait_for(lambda p=p: _same_logs(brokers, p), what=f"equal logs of partition {p}")
        assert _values(segment) == [b"m%d" % i for i in range(160) if i % 8 == p]
    # Each follower partition was fetched by the fetcher Kafka's hash gives it.
    for broker_id, b in brokers.items():
        text = b.log_text()
        for p in range(8):
            if states[p][0] != broker_id:
                fid = fetcher_id_for(TOPIC, p, 2)
                assert f"fetcher {fid}: fetching {TOPIC}-{p} from broker {states[p][0]}" in text


def test_a_follower_that_led_an_epoch_without_records_catches_up(brokers):
    control = HandController(brokers, uuid.uuid4())
    control.elect(one(1, 1, (1, 2)))
    assert _produce(brokers[1], [b"a%d" % i for i in range(10)], acks="all") == [None] * 10
    wait_for(lambda: _same_logs(brokers), what="equal logs")
    # Broker 2 leads epoch 2 and nobody produces; broker 1 leads again at 3.
    control.elect(one(2, 2, (1, 2)))
    control.elect(one(1, 3, (1, 2)))
    assert _produce(brokers[1], [b"b%d" % i for i in range(10)], acks="all") == [None] * 10
    segment, epochs = wait_for(lambda: _same_logs(brokers), what="equal logs")
    assert segment.count(b"b9") == 1
    # Broker 2's empty epoch 2 went with the diverging epoch's truncation
    # (at its log end offset: Kafka's truncateTo keeps no epoch starting there).
    assert epochs.splitlines()[2:] == ["1 0", "3 10"]
    assert "the leader's epoch 1 ends at 10; truncating to 10" in brokers[2].log_text()
