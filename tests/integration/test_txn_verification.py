"""KIP-890 partition verification (``transaction.partition.verification.enable``,
Kafka 3.9's default) on a real standalone broker, by raw frames and with
confluent-kafka.

A "late" transactional write (the producer's transaction does not hold the
partition: never added, or already committed) is refused INVALID_TXN_STATE
(TRANSACTION_ABORTABLE to Produce v11) and leaves no open transaction: the
partition's last stable offset stays at its high watermark and a
read_committed consumer reads on past it. With the setting off the same
write is appended and holds the LSO back (the old behaviour). The
coordinator answers AddPartitionsToTxn v4 ``verify_only`` per partition.
"""

from __future__ import annotations

import time

import pytest

from support.clients import create_topic, module_broker
from support.raw_api import call
from support.transactions import (
    TIMEOUT_S,
    add_offsets,
    consume,
    list_offset,
    producer,
    stable_offset,
    txn_offset_commit,
)

from kafkapy._core.records_py import build_batch
from kafkapy.protocol.errors import ErrorCode as E

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(180)

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@pytest.fixture(scope="module", params=["inline", "workers"])
def kbroker(request, tmp_path_factory):
    """Produce handled in the processor (the default) and by the handler
    workers (``kafkapy.network.inline.apis`` empty): the first run happens
    in either, the run after the answer always in the processor."""
    overrides = {} if request.param == "inline" else {"kafkapy.network.inline.apis": ""}
    with module_broker(tmp_path_factory, overrides) as broker:
        yield broker


def _init(bs: str, txn_id: str):
    """InitProducerId for ``txn_id`` once its coordinator is loaded (the first
    FindCoordinator creates ``__transaction_state``)."""
    assert call(bs, 10, 3, {"key": txn_id, "key_type": 1}).error_code == E.NONE
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        r = call(bs, 22, 4, {"transactional_id": txn_id, "transaction_timeout": 60000, "producer_id": -1,
                             "producer_epoch": -1})
        if r.error_code not in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert r.error_code == E.NONE
    return r.producer_id, r.producer_epoch


def _add(bs: str, txn_id: str, pid: int, epoch: int, topic: str, partitions) -> list:
    r = call(bs, 24, 3, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                         "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [
                             {"name": topic, "partitions": list(partitions)}]})
    return [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition]


def _produce(bs: str, txn_id, pid: int, epoch: int, seq: int, topic: str, partition: int, value: bytes,
             version: int = 9):
    batch = build_batch([(None, value, [], int(time.time() * 1000))], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, is_transactional=True)
    r = call(bs, 0, version, {"acks": -1, "timeout": 10000, "transactional_id": txn_id, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": bytes(batch)}]}]})
    return r.responses[0].partition_responses[0]


def _end(bs: str, txn_id: str, pid: int, epoch: int, commit: bool) -> int:
    return call(bs, 26, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                            "committed": commit}).error_code


def _wait_stable(bs: str, topic: str, partition: int) -> None:
    """Until the coordinator's marker made the LSO reach the high watermark."""
    deadline = time.monotonic() + 10
    while list_offset(bs, topic, partition, READ_COMMITTED) != list_offset(bs, topic, partition, READ_UNCOMMITTED) \
            and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_late_write_is_refused_and_leaves_no_open_transaction(kbroker):
    bs = kbroker.bootstrap
    topic = "verify-late"
    create_topic(bs, topic, 2)
    pid, epoch = _init(bs, "verify-late")
    assert _add(bs, "verify-late", pid, epoch, topic, [0]) == [E.NONE]
    # The added partition: verified by the coordinator, appended.
    assert _produce(bs, "verify-late", pid, epoch, 0, topic, 0, b"in").error_code == E.NONE
    # The other was never added: refused, with Kafka's message, nothing written.
    refused = _produce(bs, "verify-late", pid, epoch, 0, topic, 1, b"stray")
    assert (refused.error_code, refused.error_message) == (E.INVALID_TXN_STATE,
                                                           "Partition was not added to the transaction")
    assert _produce(bs, "verify-late", pid, epoch, 0, topic, 1, b"stray", version=11).error_code \
        == E.TRANSACTION_ABORTABLE  # Produce v11 knows the abortable error
    assert list_offset(bs, topic, 1, READ_UNCOMMITTED) == 0
    assert _end(bs, "verify-late", pid, epoch, True) == E.NONE
    _wait_stable(bs, topic, 0)
    # Late: the transaction that held partition 0 is committed; the producer's
    # next batch there comes without AddPartitionsToTxn.
    late = _produce(bs, "verify-late", pid, epoch, 1, topic, 0, b"late")
    assert late.error_code == E.INVALID_TXN_STATE
    hw = list_offset(bs, topic, 0, READ_UNCOMMITTED)
    assert hw == 2  # the record and its COMMIT marker: nothing after them
    assert list_offset(bs, topic, 0, READ_COMMITTED) == hw  # no hanging transaction
    # A non-transactional record after it: read_committed reads past.
    p = confluent_kafka.Producer({"bootstrap.servers": bs})
    p.produce(topic, value=b"after", partition=0)
    assert p.flush(TIMEOUT_S) == 0
    assert consume(bs, topic, 2, "read_committed", want=2) == [b"in", b"after"]


def test_a_batch_repeating_an_aborted_transactions_sequences_is_its_duplicate(kbroker):
    """Kafka's duplicate rule looks past transaction markers (its
    ProducerStateEntry keeps a producer's last batches until its epoch
    changes): a batch of the same epoch and sequence numbers as an aborted
    one is acknowledged with the aborted batch's offsets and nothing is
    appended, verified partition or not. So a client that reuses sequence
    numbers after an abort (librdkafka 2.16 does for messages it purged as
    never written) commits a transaction with nothing in it: what the
    bounce test's copiers ran into (tests/support/transactions.py)."""
    bs = kbroker.bootstrap
    topic = txn_id = "verify-reused-sequences"
    create_topic(bs, topic, 1)
    pid, epoch = _init(bs, txn_id)
    assert _add(bs, txn_id, pid, epoch, topic, [0]) == [E.NONE]
    aborted = _produce(bs, txn_id, pid, epoch, 0, topic, 0, b"aborted")
    assert aborted.error_code == E.NONE
    assert _end(bs, txn_id, pid, epoch, False) == E.NONE
    _wait_stable(bs, topic, 0)
    assert _add(bs, txn_id, pid, epoch, topic, [0]) == [E.NONE]
    again = _produce(bs, txn_id, pid, epoch, 0, topic, 0, b"committed")
    assert (again.error_code, again.base_offset) == (E.NONE, aborted.base_offset)
    assert _end(bs, txn_id, pid, epoch, True) == E.NONE
    _wait_stable(bs, topic, 0)
    assert list_offset(bs, topic, 0, READ_UNCOMMITTED) == 3  # the record and two markers
    assert consume(bs, topic, 1, "read_committed") == []


def test_a_produce_without_transactional_id_is_never_appended_unverified(kbroker):
    """Kafka's append check: a transactional batch of a producer with no
    open transaction needs a verification, whatever the request says."""
    bs = kbroker.bootstrap
    topic = "verify-no-id"
    create_topic(bs, topic, 1)
    pid, epoch = _init(bs, "verify-no-id")
    assert _add(bs, "verify-no-id", pid, epoch, topic, [0]) == [E.NONE]
    assert _produce(bs, None, pid, epoch, 0, topic, 0, b"x").error_code == E.INVALID_TXN_STATE
    assert _produce(bs, "verify-no-id", pid, epoch, 0, topic, 0, b"y").error_code == E.NONE
    # Open now: a batch of the same transaction needs no verification.
    assert _produce(bs, None, pid, epoch, 1, topic, 0, b"z").error_code == E.NONE
    assert _end(bs, "verify-no-id", pid, epoch, False) == E.NONE
    _wait_stable(bs, topic, 0)
    assert list_offset(bs, topic, 0, READ_COMMITTED) == list_offset(bs, topic, 0, READ_UNCOMMITTED) == 3


def test_fenced_and_unknown_producers_are_refused(kbroker):
    bs = kbroker.bootstrap
    topic = "verify-fenced"
    create_topic(bs, topic, 1)
    pid, epoch = _init(bs, "verify-fenced")
    pid2, epoch2 = _init(bs, "verify-fenced")  # bumps the epoch: the first is fenced
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert _produce(bs, "verify-fenced", pid, epoch, 0, topic, 0, b"zombie").error_code == E.INVALID_PRODUCER_EPOCH
    assert _produce(bs, "verify-fenced", pid + 1000, 0, 0, topic, 0, b"who").error_code == \
        E.INVALID_PRODUCER_ID_MAPPING
    assert list_offset(bs, topic, 0, READ_UNCOMMITTED) == 0


def test_verify_only_answers_per_partition(kbroker):
    bs = kbroker.bootstrap
    topic = "verify-only"
    create_topic(bs, topic, 3)
    pid, epoch = _init(bs, "verify-only")
    assert _add(bs, "verify-only", pid, epoch, topic, [0, 1]) == [E.NONE, E.NONE]

    def verify(txn_id, producer_id, producer_epoch, topics):
        r = call(bs, 24, 4, {"transactions": [{
            "transactional_id": txn_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "verify_only": True, "topics": [{"name": t, "partitions": ps} for t, ps in topics]}]})
        assert r.error_code == E.NONE
        (t,) = r.results_by_transaction
        return {(tr.name, p.partition_index): p.partition_error_code
                for tr in t.topic_results for p in tr.results_by_partition}

    assert verify("verify-only", pid, epoch, [(topic, [0, 1, 2])]) == {
        (topic, 0): E.NONE, (topic, 1): E.NONE, (topic, 2): E.TRANSACTION_ABORTABLE}
    assert set(verify("verify-only", pid, epoch + 1, [(topic, [0])]).values()) == {E.PRODUCER_FENCED}
    assert set(verify("verify-only", pid + 1, epoch, [(topic, [0])]).values()) == {E.INVALID_PRODUCER_ID_MAPPING}
    assert verify("verify-only", pid, epoch, [(topic, [0]), ("verify-only-none", [0])]) == {
        (topic, 0): E.OPERATION_NOT_ATTEMPTED, ("verify-only-none", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    # verify_only adds nothing: partition 2 is still not in the transaction.
    assert verify("verify-only", pid, epoch, [(topic, [2])]) == {(topic, 2): E.TRANSACTION_ABORTABLE}
    assert _end(bs, "verify-only", pid, epoch, False) == E.NONE


def test_transactional_clients_still_work(kbroker):
    """Every partition's first batch of each transaction is verified."""
    bs = kbroker.bootstrap
    topic = "verify-client"
    create_topic(bs, topic, 3)
    p = producer(bs, "verify-client")
    for n in range(3):
        p.begin_transaction()
        for i in range(9):
            p.produce(topic, value=b"%d-%d" % (n, i), partition=i % 3)
        if n == 1:
            p.flush(TIMEOUT_S)
            p.abort_transaction(TIMEOUT_S)
        else:
            p.commit_transaction(TIMEOUT_S)
    got = consume(bs, topic, 3, "read_committed", want=18)
    assert sorted(got) == sorted(b"%d-%d" % (n, i) for n in (0, 2) for i in range(9))


def test_verification_off_restores_the_old_behaviour_and_is_dynamic(broker_factory):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    b = broker_factory({"transaction.partition.verification.enable": "false"})
    bs = b.bootstrap
    topic = "verify-off"
    create_topic(bs, topic, 2)
    pid, epoch = _init(bs, "verify-off")
    # Never added: appended anyway, and the transaction it opens hangs.
    assert _produce(bs, "verify-off", pid, epoch, 0, topic, 0, b"stray").error_code == E.NONE
    assert list_offset(bs, topic, 0, READ_UNCOMMITTED) == 1
    assert list_offset(bs, topic, 0, READ_COMMITTED) == 0
    # Turned on at run time (a dynamic broker key, as in Kafka): the next stray write is refused.
    admin = AdminClient({"bootstrap.servers": bs})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry("transaction.partition.verification.enable", "true",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
    # AlterConfigs is answered once the change is stored; every process reads
    # it with the metadata generation it checks on each request.
    assert _produce(bs, "verify-off", pid, epoch, 0, topic, 1, b"stray").error_code == E.INVALID_TXN_STATE
    assert list_offset(bs, topic, 1, READ_UNCOMMITTED) == 0


# --- TxnOffsetCommit (Kafka 3.6+: GroupCoordinator.handleTxnCommitOffsets verifies too) ---

def _group_partition_stable(bs: str, group: str) -> bool:
    """The group's __consumer_offsets partition has no open transaction (LSO = HW)."""
    from kafkapy.coordinator.records import partition_for

    p = partition_for(group, 50)
    return list_offset(bs, "__consumer_offsets", p, READ_COMMITTED) \
        == list_offset(bs, "__consumer_offsets", p, READ_UNCOMMITTED)


def _offsets_ready(bs: str, txn_id: str, group: str):
    """The transactional id's producer, its group coordinator loaded (the
    first FindCoordinator creates __consumer_offsets)."""
    assert call(bs, 10, 3, {"key": group, "key_type": 0}).error_code == E.NONE
    deadline = time.monotonic() + TIMEOUT_S
    while call(bs, 9, 7, {"group_id": group, "topics": None, "require_stable": True}).error_code \
            in (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _init(bs, txn_id)


def _wait_offset(bs: str, group: str, topic: str, want: int) -> tuple[int, int]:
    deadline = time.monotonic() + 10
    got = stable_offset(bs, group, topic)
    while got != (want, E.NONE) and time.monotonic() < deadline:
        time.sleep(0.05)
        got = stable_offset(bs, group, topic)
    return got


def test_a_late_txn_offset_commit_is_refused_and_leaves_nothing_pending(kbroker):
    bs = kbroker.bootstrap
    topic, group, txn = "verify-oc", "verify-oc-group", "verify-oc"
    create_topic(bs, topic, 1)
    pid, epoch = _offsets_ready(bs, txn, group)
    assert add_offsets(bs, txn, pid, epoch, group) == E.NONE
    assert txn_offset_commit(bs, txn, pid, epoch, group, topic, 5) == E.NONE
    assert stable_offset(bs, group, topic)[1] == E.UNSTABLE_OFFSET_COMMIT  # pending until the marker
    # Already open on the group's partition: the next commit of the transaction asks nobody.
    assert txn_offset_commit(bs, txn, pid, epoch, group, topic, 6) == E.NONE
    assert _end(bs, txn, pid, epoch, True) == E.NONE
    assert _wait_offset(bs, group, topic, 6) == (6, E.NONE)
    # Late: the transaction that held the group's partition is committed.
    assert txn_offset_commit(bs, txn, pid, epoch, group, topic, 9) == E.INVALID_TXN_STATE
    assert txn_offset_commit(bs, txn, pid, epoch, group, topic, 9, version=4) == E.TRANSACTION_ABORTABLE
    assert stable_offset(bs, group, topic) == (6, E.NONE)  # nothing pending: no UNSTABLE_OFFSET_COMMIT
    assert _group_partition_stable(bs, group)
    # After an abort, likewise.
    assert add_offsets(bs, txn, pid, epoch, group) == E.NONE
    assert txn_offset_commit(bs, txn, pid, epoch, group, topic, 7) == E.NONE
    assert _end(bs, txn, pid, epoch, False) == E.NONE
    deadline = time.monotonic() + 10
    while not _group_partition_stable(bs, group) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert txn_offset_commit(bs, txn, pid, epoch, group, topic, 8) == E.INVALID_TXN_STATE
    assert stable_offset(bs, group, topic) == (6, E.NONE)
    assert _group_partition_stable(bs, group)
    # A fenced producer (another InitProducerId bumped the epoch).
    pid2, epoch2 = _init(bs, txn)
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert txn_offset_commit(bs, txn, pid, epoch, group, topic, 8) == E.INVALID_PRODUCER_EPOCH
    assert stable_offset(bs, group, topic) == (6, E.NONE)


def test_a_late_txn_offset_commit_hangs_with_verification_off(broker_factory):
    """The old behaviour, as Kafka before 3.6: the late commit is appended,
    opens a transaction on the group's partition that nobody ends, and its
    offsets stay unstable."""
    b = broker_factory({"transaction.partition.verification.enable": "false"})
    bs = b.bootstrap
    topic, group, txn = "verify-oc-off", "verify-oc-off-group", "verify-oc-off"
    create_topic(bs, topic, 1)
    pid, epoch = _offsets_ready(bs, txn, group)
    assert txn_offset_commit(bs, txn, pid, epoch, group, topic, 3) == E.NONE
    assert stable_offset(bs, group, topic) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    assert not _group_partition_stable(bs, group)


@pytest.mark.parametrize("enabled", ["true", "false"])
def test_send_offsets_to_transaction_works_either_way(broker_factory, java_client, enabled):
    """confluent-kafka's and the Java client's transactional copiers
    (consume, produce, send_offsets_to_transaction, commit; every third
    transaction aborted) with the setting on and off: every record copied
    once, each group's offset at the input's end."""
    from support.transactions import Copier

    b = broker_factory({"transaction.partition.verification.enable": enabled})
    bs = b.bootstrap
    per_partition = 30
    create_topic(bs, "verify-copy-in", 2)
    create_topic(bs, "verify-copy-out", 2)
    p = confluent_kafka.Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    for i in range(2 * per_partition):
        p.produce("verify-copy-in", value=b"%d" % i, partition=i % 2)
    assert p.flush(TIMEOUT_S) == 0
    java = java_client.copy(bs, "verify-copy-in", "verify-copy-out", 0, "verify-copy-java", "verify-copy-java",
                            transaction_size=10, abort_every=3, timeout_ms=90000)
    try:
        c = Copier(bs, "verify-copy-in", "verify-copy-out", 1, per_partition, "verify-copy-rdkafka",
                   "verify-copy-rdkafka", transaction_size=10, abort_every=3, timeout_s=90).start()
        c.join(100)
        result = java.wait(100)
    except BaseException:
        java.kill()
        raise
    assert result.returncode == 0, result.describe()
    assert result.done[3] == result.done[4] == str(per_partition), result.done
    assert c.error is None and c.position == per_partition and c.aborts >= 1, (c.error, c.position, c.aborts)
    got = consume(bs, "verify-copy-out", 2, "read_committed", want=2 * per_partition)
    assert sorted(got) == sorted(b"%d" % i for i in range(2 * per_partition))
    for group, partition in (("verify-copy-java", 0), ("verify-copy-rdkafka", 1)):
        r = call(bs, 9, 7, {"group_id": group, "topics": [{"name": "verify-copy-in",
                                                           "partition_indexes": [partition]}],
                            "require_stable": True})
        (part,) = r.topics[0].partitions
        assert (part.committed_offset, part.error_code) == (per_partition, E.NONE), group
