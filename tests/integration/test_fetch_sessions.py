"""Fetch sessions (KIP-227) against a real broker: raw frames for the session
rules (creation, incremental answers holding only what changed, epochs,
forgotten partitions, the session errors, long polls, topic-id sessions,
sessions shared by handler workers, Kafka's eviction), then real clients that
use sessions: Apache's Java client 3.9 (Fetch v17) and kafka-python (v12).
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from support.clients import (
    Rec,
    consume_kafka_python,
    create_topic,
    module_broker,
    produce_confluent,
)
from support.fetch import (
    FETCH,
    LIST_OFFSETS,
    Conn,
    RecordingProxy,
    fetch_request,
    partitions_of,
    record_count,
    topic_id,
)

from kafkapy.server.fetch_session import SESSION_ID_RANGE
from support.broker import free_port

pytestmark = pytest.mark.timeout(180)

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
UNKNOWN_TOPIC_ID = 100
FETCH_SESSION_TOPIC_ID_ERROR = 106


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    # Two handler workers: a session created by one must serve the other.
    with module_broker(tmp_path_factory, {"num.io.threads": 2, "num.network.threads": 2}) as b:
        yield b


def _produce(bootstrap, topic, partition, n, tag="v"):
    reports = produce_confluent(bootstrap, topic, [Rec(partition, b"k", b"%s-%d" % (tag.encode(), i))
                                                   for i in range(n)])
    assert all(err is None for err, _, _ in reports), reports


def _summary(response) -> dict:
    """{(topic, partition): (error, high watermark, records)}"""
    return {k: (p.error_code, p.high_watermark, record_count(p.records))
            for k, p in partitions_of(response).items()}


def test_full_then_incremental_fetches_answer_only_what_changed(kbroker):
    b = kbroker.bootstrap
    create_topic(b, "inc", 4)
    _produce(b, "inc", 0, 5)
    _produce(b, "inc", 1, 3)
    with Conn(b) as c:
        full = c.call(FETCH, 12, fetch_request(12, [("inc", [(p, 0) for p in range(4)])], epoch=0))
        assert full.error_code == 0 and full.session_id > 0
        assert _summary(full) == {("inc", 0): (0, 5, 5), ("inc", 1): (0, 3, 3),
                                  ("inc", 2): (0, 0, 0), ("inc", 3): (0, 0, 0)}
        sid = full.session_id
        # The consumer moved its positions: nothing new, nothing to answer.
        r = c.call(FETCH, 12, fetch_request(12, [("inc", [(0, 5), (1, 3)])], session_id=sid, epoch=1))
        assert (r.error_code, r.session_id, r.responses) == (0, sid, ())
        # New records in partition 2 only: the answer holds partition 2 only.
        _produce(b, "inc", 2, 2)
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=2))
        assert (r.error_code, r.session_id) == (0, sid)
        assert _summary(r) == {("inc", 2): (0, 2, 2)}
        # Not moving partition 2's offset: its records come again (Kafka's rule).
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=3))
        assert _summary(r) == {("inc", 2): (0, 2, 2)}
        # The same epoch again: a duplicate.
        again = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=3))
        assert (again.error_code, again.session_id, again.responses) == (INVALID_FETCH_SESSION_EPOCH, 0, ())
        # Forget partition 2, then write to it and to 3: only 3 is answered.
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=4, forgotten=[("inc", [2])]))
        assert r.responses == ()
        _produce(b, "inc", 2, 1)
        _produce(b, "inc", 3, 1)
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=5))
        assert _summary(r) == {("inc", 3): (0, 1, 1)}
        # An added partition of an unknown topic: in every answer, as errors are.
        for epoch in (6, 7):
            add = [("no-such-topic", [(0, 0)])] if epoch == 6 else []
            r = c.call(FETCH, 12, fetch_request(12, add, session_id=sid, epoch=epoch))
            assert ("no-such-topic", 0) in _summary(r) and _summary(r)[("no-such-topic", 0)][0] == 3
        # Wrong ids and a closed session.
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid + 1, epoch=1))
        assert (r.error_code, r.session_id) == (FETCH_SESSION_ID_NOT_FOUND, 0)
        closed = c.call(FETCH, 12, fetch_request(12, [("inc", [(0, 0)])], session_id=sid, epoch=-1))
        assert (closed.error_code, closed.session_id) == (0, 0) and _summary(closed)[("inc", 0)][2] == 5
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=8))
        assert r.error_code == FETCH_SESSION_ID_NOT_FOUND
        # Sessionless fetches are unchanged.
        r = c.call(FETCH, 6, fetch_request(6, [("inc", [(0, 0)])]))
        assert _summary(r) == {("inc", 0): (0, 5, 5)}


def test_partitions_that_returned_records_go_to_the_end_of_the_session(kbroker):
    """With max_bytes cutting after the first batch (KIP-74), Kafka's session
    order makes the others come first next time: a partition that returned
    records moves to the end."""
    b = kbroker.bootstrap
    create_topic(b, "order", 3)
    for p in range(3):
        _produce(b, "order", p, 3, tag=f"p{p}")
    with Conn(b) as c:
        full = c.call(FETCH, 12, fetch_request(12, [("order", [(p, 0) for p in range(3)])], epoch=0,
                                               max_bytes=1))
        sid = full.session_id
        assert sid and [k for k, p in partitions_of(full).items() if record_count(p.records)] == [("order", 0)]
        # Partition 0 read: partition 1 is next and gets the batch.
        r = c.call(FETCH, 12, fetch_request(12, [("order", [(0, 3)])], session_id=sid, epoch=1, max_bytes=1))
        assert _summary(r) == {("order", 1): (0, 3, 3)}
        # Partition 1 did not move its offset, but it went to the end: partition 2 comes first.
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=2, max_bytes=1))
        assert _summary(r) == {("order", 2): (0, 3, 3)}
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=3, max_bytes=1))
        assert _summary(r) == {("order", 1): (0, 3, 3)}


def test_forgetting_every_partition_closes_the_session(kbroker):
    b = kbroker.bootstrap
    create_topic(b, "forget", 1)
    with Conn(b) as c:
        sid = c.call(FETCH, 12, fetch_request(12, [("forget", [(0, 0)])], epoch=0)).session_id
        assert sid > 0
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=1, forgotten=[("forget", [0])]))
        assert (r.error_code, r.session_id, r.responses) == (0, 0, ())
        assert c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=2)).error_code == \
            FETCH_SESSION_ID_NOT_FOUND


def test_incremental_long_poll_answers_the_partition_that_got_records(kbroker):
    b = kbroker.bootstrap
    create_topic(b, "poll", 3)
    with Conn(b) as c:
        sid = c.call(FETCH, 12, fetch_request(12, [("poll", [(p, 0) for p in range(3)])], epoch=0)).session_id
        assert sid > 0
        # Nothing to read: the incremental fetch parks for its max wait.
        started = time.monotonic()
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=1, max_wait_ms=600))
        assert r.responses == () and time.monotonic() - started >= 0.5
        # A parked fetch changed nothing: the next epoch is 2. Records arrive while it waits.
        timer = threading.Timer(0.3, _produce, (b, "poll", 1, 2))
        timer.start()
        try:
            started = time.monotonic()
            r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=2, max_wait_ms=10000))
            waited = time.monotonic() - started
        finally:
            timer.join()
        assert _summary(r) == {("poll", 1): (0, 2, 2)} and waited < 5


def test_topic_id_sessions_v17(kbroker):
    b = kbroker.bootstrap
    create_topic(b, "ids", 2)
    _produce(b, "ids", 0, 4)
    with Conn(b) as c:
        tid = topic_id(c, "ids")
        unknown = uuid.uuid4()
        full = c.call(FETCH, 17, fetch_request(17, [(tid, [(0, 0), (1, 0)]), (unknown, [(0, 0)])], epoch=0))
        assert full.session_id > 0
        assert _summary(full) == {(tid, 0): (0, 4, 4), (tid, 1): (0, 0, 0), (unknown, 0): (UNKNOWN_TOPIC_ID, -1, 0)}
        sid = full.session_id
        # A topic-id session fetched below v13: Kafka's FETCH_SESSION_TOPIC_ID_ERROR.
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sid, epoch=1))
        assert r.error_code == FETCH_SESSION_TOPIC_ID_ERROR
        r = c.call(FETCH, 17, fetch_request(17, [(tid, [(0, 4)])], session_id=sid, epoch=1,
                                             forgotten=[(unknown, [0])]))
        assert (r.error_code, r.responses) == (0, ())
        _produce(b, "ids", 1, 1)
        r = c.call(FETCH, 17, fetch_request(17, [], session_id=sid, epoch=2))
        assert _summary(r) == {(tid, 1): (0, 1, 1)}


def test_sessions_are_shared_by_handler_workers(kbroker):
    """Four sessions fetched concurrently from four connections each (two
    processors, two workers): every incremental fetch finds its session and
    epoch, whichever worker handles it, and every record comes once."""
    b = kbroker.bootstrap
    create_topic(b, "shared", 4)
    errors = []
    got = {p: 0 for p in range(4)}
    rounds = 15

    def run(p):
        conns = [Conn(b) for _ in range(4)]
        try:
            r = conns[0].call(FETCH, 12, fetch_request(12, [("shared", [(p, 0)])], epoch=0))
            sid, offset = r.session_id, 0
            for epoch in range(1, rounds + 1):
                _produce(b, "shared", p, 1, tag=f"{p}-{epoch}")
                r = conns[epoch % 4].call(FETCH, 12, fetch_request(
                    12, [("shared", [(p, offset)])], session_id=sid, epoch=epoch, max_wait_ms=2000))
                if r.error_code:
                    errors.append((p, epoch, r.error_code))
                    return
                for (_, _), part in partitions_of(r).items():
                    n = record_count(part.records)
                    got[p] += n
                    offset += n
        finally:
            for conn in conns:
                conn.close()

    threads = [threading.Thread(target=run, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert got == {p: rounds for p in range(4)}


def test_eviction_follows_kafkas_rules(broker_factory):
    """8 slots = Kafka's 8 shards of one; a new session takes the next shard
    and may evict only there: a stale session, or a smaller evictable one."""
    eviction_ms = 1000
    b = broker_factory({"max.incremental.fetch.session.cache.slots": 8,
                        "min.incremental.fetch.session.eviction.ms": eviction_ms})
    create_topic(b.bootstrap, "ev", 2)
    one, two = [("ev", [(0, 0)])], [("ev", [(0, 0), (1, 0)])]
    with Conn(b.bootstrap) as c:
        def create(topics):
            return c.call(FETCH, 12, fetch_request(12, topics, epoch=0)).session_id

        sessions = [create(one) for _ in range(8)]
        assert [s // SESSION_ID_RANGE for s in sessions] == list(range(8))
        assert create(one) == 0  # shard 0: full, nothing evictable yet
        time.sleep(eviction_ms / 1000 + 0.2)
        for s in sessions[1:]:  # used again now: not stale, but older than the eviction time
            assert c.call(FETCH, 12, fetch_request(12, [], session_id=s, epoch=1)).error_code == 0
        assert create(one) == 0  # shard 1: same size, not more valuable
        new = create(two)  # shard 2: two partitions beat one
        assert new // SESSION_ID_RANGE == 2
        r = c.call(FETCH, 12, fetch_request(12, [], session_id=sessions[2], epoch=2))
        assert r.error_code == FETCH_SESSION_ID_NOT_FOUND
        # Shard 3's session is left unused past the eviction time: stale.
        time.sleep(eviction_ms / 1000 + 0.2)
        for s in sessions[4:]:
            assert c.call(FETCH, 12, fetch_request(12, [], session_id=s, epoch=2)).error_code == 0
        assert create(one) // SESSION_ID_RANGE == 3
        assert c.call(FETCH, 12, fetch_request(12, [], session_id=sessions[3], epoch=2)).error_code == \
            FETCH_SESSION_ID_NOT_FOUND
        # Shard 0's session is stale too, but only a creation in its shard evicts it.
        assert c.call(FETCH, 12, fetch_request(12, [], session_id=sessions[0], epoch=1)).error_code == 0


def test_java_client_consumes_through_fetch_sessions(broker_factory, java_client):
    """Kafka's own consumer through a recording proxy: Fetch v17 in one
    session (a full fetch, then incremental ones of a few bytes), ListOffsets
    v9, every record once and in order, also those written after its session
    began."""
    partitions = 200
    proxy_port = free_port()
    b = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"}, start=False)
    proxy = RecordingProxy(b.port, port=proxy_port)
    try:
        b.start()
        create_topic(b.bootstrap, "java-sessions", partitions)
        produce_confluent(b.bootstrap, "java-sessions", [Rec(p, b"k", b"first") for p in range(partitions)])
        result = {}
        consumer = threading.Thread(target=lambda: result.update(r=java_client.consume(
            proxy.bootstrap, "java-sessions", "java-sessions-group", 2 * partitions, timeout_ms=40000)))
        consumer.start()
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not any(e.api_key == FETCH and e.epoch > 0 for e in proxy.exchanges):
            time.sleep(0.1)
        produce_confluent(b.bootstrap, "java-sessions", [Rec(p, b"k", b"second") for p in range(partitions)])
        consumer.join(60)
    finally:
        proxy.close()
    consumed = result["r"]
    assert consumed.returncode == 0, consumed.describe()
    offsets = sorted((r.partition, r.offset) for r in consumed.records)
    assert offsets == [(p, o) for p in range(partitions) for o in (0, 1)], consumed.describe()
    assert not proxy.errors
    fetches = [e for e in proxy.exchanges if e.api_key == FETCH]
    assert {e.version for e in fetches} == {17}
    assert {e.version for e in proxy.exchanges if e.api_key == LIST_OFFSETS} <= {9}
    assert all(e.error_code == 0 for e in fetches), fetches
    created = [e for e in fetches if e.epoch == 0 and e.response_session_id]
    incremental = [e for e in fetches if e.epoch > 0]
    assert created and incremental, fetches
    session = created[0].response_session_id
    assert {e.session_id for e in incremental} == {session}
    assert {e.response_session_id for e in incremental} == {session}
    # The partitions that got records after the session began came in incremental answers.
    assert sum(e.response_partitions for e in incremental) >= partitions
    full, idle = created[0], min(incremental, key=lambda e: e.request_bytes)
    assert full.partitions == partitions and idle.request_bytes < full.request_bytes / 20
    print(f"\nJava 3.9 consumer, {partitions} partitions: full fetch {full.request_bytes} B -> "
          f"{full.response_bytes} B; smallest incremental {idle.request_bytes} B -> {idle.response_bytes} B; "
          f"{len(incremental)} incremental fetches")


def test_kafka_python_consumes_through_fetch_sessions(kbroker):
    """kafka-python 3 keeps a fetch session per broker (Fetch v12)."""
    b = kbroker.bootstrap
    create_topic(b, "kp-sessions", 3)
    for p in range(3):
        _produce(b, "kp-sessions", p, 40, tag=f"p{p}")
    got = consume_kafka_python(b, "kp-sessions", {p: 40 for p in range(3)})
    assert sorted((g.partition, g.offset) for g in got) == [(p, o) for p in range(3) for o in range(40)]
