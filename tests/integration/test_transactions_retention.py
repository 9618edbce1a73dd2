"""Transactions under retention and compaction (issue 11), on a real broker
with tiny segments and fast cleaner/retention/expiry timers:

* ``transactional.id.expiration.ms``: an idle id is tombstoned and forgotten
  (DescribeTransactions TRANSACTIONAL_ID_NOT_FOUND, not listed), ids with an
  open transaction are not; ``__transaction_state`` (compacted) is cleaned
  down to the last record per id, and after a SIGKILL restart the
  coordinator loads the same states from it; the expired id starts again
  with a new producer id.
* retention of a data topic with committed and aborted transactions: the
  oldest segments and their ``.txnindex`` files go, markers and aborted
  entries of the retained ones stay, so read_committed readers get exactly
  the retained committed records (also after a SIGKILL restart, which
  rebuilds the indexes) and the LSO equals the high watermark.
"""

from __future__ import annotations

import signal
import time

import pytest

from support.clients import create_topic
from support.raw_api import call
from support.transactions import list_offset, producer

from kafkapy.protocol.transaction_log import decode_key
from kafkapy.protocol.errors import ErrorCode as E

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.timeout(180)

TIMEOUT_S = 30
EXPIRATION_MS = 3000


def describe(bs, txn_id):
    (state,) = call(bs, 65, 0, {"transactional_ids": [txn_id]}).transaction_states
    return state


def listed(bs):
    r = call(bs, 66, 0, {"state_filters": [], "producer_id_filters": []})
    return {s.transactional_id for s in r.transaction_states}


def read_from_start(bs, topic, isolation, partitions=1):
    """``(partition, offset, value, key)`` of everything a reader gets from the
    earliest offset to the end (the high watermark, or the last stable offset
    read_committed): read until every partition reported its end after its
    last record, not until a quiet spell (a loaded machine's first fetch can
    come later than any spell)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"ret-{topic}-{isolation}", "isolation.level": isolation,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
    got = []
    at_end = set()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline and len(at_end) < partitions:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is None:
                got.append((m.partition(), m.offset(), m.value(), m.key()))
                at_end.discard(m.partition())
            elif m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                at_end.add(m.partition())
    finally:
        c.close()
    assert len(at_end) == partitions, f"{topic}: the end of {partitions - len(at_end)} partitions not reached"
    return got


def state_records(bs):
    """(transactional id, is tombstone) of every record now in __transaction_state."""
    return [(decode_key(key), value is None)
            for _, _, value, key in read_from_start(bs, "__transaction_state", "read_uncommitted")]


def test_expired_ids_go_and_compacted_transaction_state_loads_the_same(broker_factory):
    b = broker_factory({
        "transactional.id.expiration.ms": str(EXPIRATION_MS),
        "transaction.remove.expired.transaction.cleanup.interval.ms": "300",
        "transaction.state.log.num.partitions": "1",
        "transaction.state.log.segment.bytes": "2048",
        "log.cleaner.backoff.ms": "200",
        "log.cleaner.min.cleanable.ratio": "0.01",
        "log.cleaner.delete.retention.ms": "60000",
    })
    bs = b.bootstrap
    create_topic(bs, "ret-data", 2)
    gone = producer(bs, "ret-gone")
    gone.begin_transaction()
    gone.produce("ret-data", value=b"gone", partition=0)
    gone.commit_transaction(TIMEOUT_S)
    gone_pid = describe(bs, "ret-gone").producer_id
    del gone

    keepers = {t: producer(bs, t, **{"transaction.timeout.ms": 120000}) for t in ("ret-keep-a", "ret-keep-b")}
    for i in range(15):  # ~4 state records a transaction: many 2 KB segments
        for t, p in keepers.items():
            p.begin_transaction()
            p.produce("ret-data", value=b"%s-%d" % (t.encode(), i), partition=i % 2)
            p.commit_transaction(TIMEOUT_S)
    for t, p in keepers.items():  # left open: Ongoing ids never expire
        p.begin_transaction()
        p.produce("ret-data", value=b"%s-open" % t.encode(), partition=1)
        p.flush(TIMEOUT_S)
    before = {t: describe(bs, t) for t in keepers}
    assert all(s.transaction_state == "Ongoing" for s in before.values())

    # The idle id expires; the open ones stay.
    deadline = time.monotonic() + 30
    while describe(bs, "ret-gone").error_code != E.TRANSACTIONAL_ID_NOT_FOUND and time.monotonic() < deadline:
        time.sleep(0.2)
    assert describe(bs, "ret-gone").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    assert listed(bs) == set(keepers)
    time.sleep(EXPIRATION_MS / 1000 + 1)
    assert all(describe(bs, t).transaction_state == "Ongoing" for t in keepers)

    # The cleaner compacts __transaction_state: at most the last record per id
    # below the active segment (Kafka's offset map stops at the first
    # uncleanable offset; the active segment keeps what it holds).
    state_dir = b.log_dirs[0] / "__transaction_state-0"

    def below_active():
        active = max(int(f.name.split(".")[0]) for f in state_dir.glob("*.log"))  # before the read: it only grows
        got = [(decode_key(key), offset) for _, offset, _, key in
               read_from_start(bs, "__transaction_state", "read_uncommitted")]
        return {t: sum(1 for k, o in got if k == t and o < active) for t in ("ret-keep-a", "ret-keep-b")}

    per_id = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        per_id = below_active()
        if max(per_id.values()) <= 1:
            break
        time.sleep(0.5)
    assert set(per_id.values()) == {1}, per_id
    records = state_records(bs)
    assert [tomb for k, tomb in records if k == "ret-gone"][-1:] == [True]  # its tombstone is the last word

    b.restart(signal.SIGKILL)
    for t, s in before.items():
        after = describe(bs, t)
        assert (after.error_code, after.transaction_state, after.producer_id, after.producer_epoch,
                [(x.topic, list(x.partitions)) for x in after.topics]) == \
            (0, "Ongoing", s.producer_id, s.producer_epoch, [(x.topic, list(x.partitions)) for x in s.topics])
    assert describe(bs, "ret-gone").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    keepers["ret-keep-a"].commit_transaction(TIMEOUT_S)
    keepers["ret-keep-b"].abort_transaction(TIMEOUT_S)
    values = sorted(v for _, _, v, _ in read_from_start(bs, "ret-data", "read_committed", 2))
    assert values == sorted([b"gone", b"ret-keep-a-open"] + [b"%s-%d" % (t.encode(), i)
                                                            for t in keepers for i in range(15)])
    again = producer(bs, "ret-gone")  # a new producer id after expiry (Kafka's)
    again.begin_transaction()
    again.produce("ret-data", value=b"again", partition=0)
    again.commit_transaction(TIMEOUT_S)
    assert describe(bs, "ret-gone").producer_id not in (-1, gone_pid)


RETENTION_BYTES = 6000


def test_retention_drops_old_segments_and_keeps_transactions_right(broker_factory):
    b = broker_factory({"log.retention.check.interval.ms": "300", "log.segment.delete.delay.ms": "0"})
    bs = b.bootstrap
    topic = "ret-txn"
    create_topic(bs, topic, 1, config={"segment.bytes": "2048", "retention.bytes": str(RETENTION_BYTES)})
    p = producer(bs, "ret-txn-p")
    outcome = {}
    for r in range(24):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, value=b"r%02d-%d-" % (r, i) + b"x" * 80, partition=0)
        p.flush(TIMEOUT_S)
        outcome[r] = r % 3 != 1
        (p.commit_transaction if outcome[r] else p.abort_transaction)(TIMEOUT_S)
    part_dir = b.log_dirs[0] / f"{topic}-0"

    def earliest():
        r = call(bs, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]})
        return r.topics[0].partitions[0].offset

    def retention_done() -> bool:
        """Size retention has nothing more to delete (Kafka's rule: the oldest
        segment goes while the log less that segment still holds
        retention.bytes). Until then a check pass may move the log start
        between two reads of this test: one pass need not take every segment
        a busy machine's producer left over the limit."""
        sizes = [f.stat().st_size for f in sorted(part_dir.glob("*.log"))]
        return len(sizes) == 1 or sum(sizes) - sizes[0] < RETENTION_BYTES

    deadline = time.monotonic() + 30
    while not (retention_done() and earliest() > 0) and time.monotonic() < deadline:
        time.sleep(0.2)
    start = earliest()
    assert start > 0 and retention_done()

    def check():
        bases = {f.name.split(".")[0] for f in part_dir.glob("*.log")}
        indexes = {f.name.split(".")[0] for f in part_dir.glob("*.txnindex")}
        assert indexes and indexes <= bases, (sorted(indexes), sorted(bases))  # none left of a deleted segment
        assert min(int(x) for x in bases) == start  # whole segments went
        everything = read_from_start(bs, topic, "read_uncommitted")
        assert everything and everything[0][1] >= start
        committed = read_from_start(bs, topic, "read_committed")
        assert [v for _, _, v, _ in committed] == [v for _, _, v, _ in everything if outcome[int(v[1:3])]]
        assert committed and all(outcome[int(v[1:3])] for _, _, v, _ in committed)
        assert any(not outcome[int(v[1:3])] for _, _, v, _ in everything)  # aborted data retained, dropped above
        assert list_offset(bs, topic, 0, 1) == list_offset(bs, topic, 0, 0)
        return committed

    first = check()
    b.restart(signal.SIGKILL)  # recovery rebuilds the retained segments' .txnindex
    assert check() == first
