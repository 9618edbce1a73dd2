"""A Produce waiting for KIP-890's verification holds no handler
(``server/txn_verification.py``; Kafka parks it the same way: the append
runs from the AddPartitionsToTxn response's callback).

Three brokers on a real ZooKeeper, each with ONE handler worker and Produce
sent to the workers (``kafkapy.network.inline.apis`` empty: the first run of
the verified produce happens in the worker, the second in the processor).
``__transaction_state`` has one partition, led by broker C; the data
partition is led by L, not C. A transactional id is initialised and its
partition added by raw frames, C is SIGSTOPped, and the producer's first
batch goes to L: L asks C whether the partition is in the transaction, and
C does not answer. Meanwhile another client's produce and fetch on L (the
same worker, another topic) must each be answered within ``BOUND_S``: a
verification that waited in the handler would hold L's only worker for the
whole freeze. After SIGCONT the parked produce is verified and appended,
and the transaction commits.
"""

from __future__ import annotations

import time

import pytest

from support.cluster import Frozen, PinnedClient, controller_id, create_topic_assigned
from support.raw_api import call, leaders_known, transaction_states
from support.transactions import consume
from support.wait import wait_for

from kafkapy._core.records_py import build_batch
from kafkapy.protocol.errors import ErrorCode as E

pytestmark = pytest.mark.timeout(150)

FREEZE_S = 4.0  # inside C's ZooKeeper session: its leadership stays
BOUND_S = 1.5  # each of the other client's requests on L while C is frozen (a few ms)


@pytest.fixture
def cluster(make_cluster):
    c, _ = make_cluster(**{
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
        "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
        "num.io.threads": 1, "kafkapy.network.inline.apis": "", "zookeeper.session.timeout.ms": 10000})
    return c


def test_a_produce_waiting_for_verification_holds_no_worker(cluster):
    bs = cluster.bootstrap
    txn_id = "vp"
    some = cluster.brokers[min(cluster.brokers)].bootstrap
    wait_for(lambda: call(some, 10, 3, {"key": txn_id, "key_type": 1}).error_code == E.NONE, 30,
             "FindCoordinator (it creates __transaction_state)")
    coordinator = wait_for(lambda: max(cluster.partitions("__transaction_state").get(0, (-1,))[0], 0),
                           30, "a leader of __transaction_state-0")  # broker ids start at 1
    controller = controller_id(cluster)
    leader = next(i for i in sorted(cluster.brokers) if i not in (coordinator, controller))
    create_topic_assigned(cluster, "vp-data", [[leader]])
    create_topic_assigned(cluster, "vp-other", [[leader]])
    c_bs, l_bs = cluster.brokers[coordinator].bootstrap, cluster.brokers[leader].bootstrap
    wait_for(lambda: leaders_known(c_bs, ["vp-data"]), 30, "the topic in the coordinator's metadata")
    init = wait_for(lambda: (r := call(c_bs, 22, 4, {"transactional_id": txn_id, "transaction_timeout": 60000,
                                                      "producer_id": -1, "producer_epoch": -1})).error_code == 0
                    and r, 30, "InitProducerId")
    pid, epoch = init.producer_id, init.producer_epoch
    r = call(c_bs, 24, 3, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                           "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [
                               {"name": "vp-data", "partitions": [0]}]})
    assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == E.NONE
    batch = build_batch([(None, b"verified", [], int(time.time() * 1000))], producer_id=pid,
                        producer_epoch=epoch, base_sequence=0, is_transactional=True)

    def produce():
        r = call(l_bs, 0, 9, {"acks": 1, "timeout": 30000, "transactional_id": txn_id, "topic_data": [
            {"name": "vp-data", "partition_data": [{"index": 0, "records": bytes(batch)}]}]}, timeout_s=60)
        return r.responses[0].partition_responses[0].error_code

    probe = PinnedClient(cluster.brokers[leader], timeout_s=30)
    assert probe.produce("vp-other", 0, [0])[0] == 0  # connected, the topic led by L
    latencies: list = []
    errors: list = []
    with Frozen(cluster.brokers[coordinator]) as f:
        frozen_at = time.monotonic()
        f.in_background(produce, settle_s=0.3)  # L asks the frozen C
        probe.round_trips("vp-other", frozen_at + FREEZE_S, latencies, errors, acks=1)
        waited = f.still_waiting()
    outcome = f.join(40)
    probe.close()
    print(f"coordinator {coordinator}, leader {leader}: the verified produce {outcome}; other client's "
          f"{len(latencies)} requests on the leader while frozen: max {max(latencies, default=-1):.3f} s")
    assert waited, outcome  # it was parked for the answer, not refused
    assert not errors, errors
    assert len(latencies) >= 20, latencies
    assert max(latencies) < BOUND_S, sorted(latencies)[-5:]
    assert isinstance(outcome, tuple) and outcome[0] == E.NONE, outcome
    r = call(c_bs, 26, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                           "committed": True})
    assert r.error_code == E.NONE
    wait_for(lambda: transaction_states(c_bs, [txn_id]) == ["CompleteCommit"], 30, "CompleteCommit",
             interval_s=0.3)
    assert consume(bs, "vp-data", 1, "read_committed", want=1) == [b"verified"]
