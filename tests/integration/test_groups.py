"""Consumer groups with real clients against the real broker (issue 3).

One broker per module for the group tests that do not restart it; restart
tests start their own. Session timeouts are short (group.min.session.timeout.ms
lowered) so take-overs happen in seconds; every wait is bounded by a deadline.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
import uuid

import pytest

from support.clients import module_broker
from support.groups import N_RECORDS, PARTITIONS, Member, committed, make_topic, wait_split
from support.rawclient import RawClient

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.codec import decode, encode_to_bytes
from kafkapy.protocol.errors import ErrorCode as E

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

OVERRIDES = {"group.min.session.timeout.ms": 1000, "offsets.topic.num.partitions": 5}
DEADLINE_S = 30
CLASSIC_MEMBER = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 200}


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    with module_broker(tmp_path_factory, OVERRIDES) as b:
        yield b


def _check_split(assignments: list[set], partitions=PARTITIONS):
    union = set().union(*assignments)
    assert union == set(range(partitions)), assignments
    assert sum(len(a) for a in assignments) == partitions, f"a partition owned twice: {assignments}"


def _check_live_split(live: dict, members: int) -> None:
    """The split checked on the members' assignments as they stand together
    (``live``: each running member's current assignment), once every member
    holds a share: not on what each reports when it stops, as members stopped
    one after another leave one after another, and the first to leave hands
    its share to the rest (a loaded run saw [{2, 3}, {4, 5}, {0, 1, 2, 3, 4,
    5}] in the members' last words). Waited for, as the rebalances' time
    depends on the load; a partition owned twice for good fails the wait."""

    def split() -> int:
        shares = list(live.values())
        return int(len(shares) == members and all(shares) and set().union(*shares) == set(range(PARTITIONS))
                   and sum(map(len, shares)) == PARTITIONS)

    assert _wait_all(split, 1), live
    _check_split(list(live.values()))


# ---------------------------------------------------------------- three-member groups


def _confluent_member(broker, group, topic, out, stop, extra=None, live=None):
    """A confluent-kafka member consuming and committing until ``stop``; its last
    assignment and what it saw go to ``out``; with ``live`` (a dict), its
    current assignment is published there after every poll, under its thread id."""
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 3000, "heartbeat.interval.ms": 300}
    conf.update(extra or {})
    c = ck.Consumer(conf)
    c.subscribe([topic])
    seen, commit_failures = [], []
    # Past the test's own waits (each DEADLINE_S): a member never ends before
    # the test has stopped it, whatever the machine's load.
    deadline = time.monotonic() + 3 * DEADLINE_S
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            m = c.poll(0.2)
            if live is not None:
                live[threading.get_ident()] = {tp.partition for tp in c.assignment()}
            if m is None or m.error():
                continue
            seen.append((m.partition(), m.offset()))
            try:
                c.commit(m, asynchronous=False)
            except ck.KafkaException as exc:
                # A commit meeting a rebalance (REBALANCE_IN_PROGRESS,
                # ILLEGAL_GENERATION) fails as it would for any consumer, which
                # commits again after the rebalance: so does this member.
                commit_failures.append(str(exc))
        out.append({"assignment": {tp.partition for tp in c.assignment()}, "seen": seen,
                    "commit_failures": commit_failures})
    finally:
        if live is not None:
            live.pop(threading.get_ident(), None)
        c.close()


def _stable_members(broker, group) -> int:
    """Members of a Stable ``group`` that hold an assignment (0 while it rebalances)."""
    from confluent_kafka import ConsumerGroupState

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(timeout=10)
    if described.state != ConsumerGroupState.STABLE:
        return 0
    return sum(1 for m in described.members if m.assignment.topic_partitions)


def _wait_all(results_fn, expected, timeout_s=DEADLINE_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if results_fn() >= expected:
            return True
        time.sleep(0.1)
    return False


def test_confluent_three_members_share_partitions(gbroker):
    topic = make_topic(gbroker, "g")
    group = f"cg-{uuid.uuid4().hex[:6]}"
    out, stop, live = [], threading.Event(), {}
    threads = [threading.Thread(target=_confluent_member, args=(gbroker, group, topic, out, stop, None, live))
               for _ in range(3)]
    for t in threads:
        t.start()
    assert _wait_all(lambda: sum(committed(gbroker, group, topic).get(p, -1) for p in range(PARTITIONS)),
                     N_RECORDS)
    # The records can all be consumed and committed before the third member
    # joined: stop the members only once the group is Stable with all three
    # assigned, so the assignments they report are one generation's.
    assert _wait_all(lambda: _stable_members(gbroker, group) == 3, 1)
    _check_live_split(live, 3)
    stop.set()
    for t in threads:
        t.join(DEADLINE_S)
    consumed = {pos for o in out for pos in o["seen"]}
    assert len(consumed) == N_RECORDS
    assert committed(gbroker, group, topic) == {p: N_RECORDS // PARTITIONS for p in range(PARTITIONS)}


def test_kafka_python_three_members_share_partitions(gbroker):
    kafka = pytest.importorskip("kafka")
    topic = make_topic(gbroker, "g")
    group = f"kp-{uuid.uuid4().hex[:6]}"
    out, stop, live = [], threading.Event(), {}

    def member():
        c = kafka.KafkaConsumer(topic, bootstrap_servers=gbroker.bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=3000, heartbeat_interval_ms=300)
        seen = []
        deadline = time.monotonic() + DEADLINE_S
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                for tp, msgs in c.poll(200).items():
                    seen += [(tp.partition, m.offset) for m in msgs]
                    if msgs:
                        c.commit()
                live[threading.get_ident()] = {tp.partition for tp in c.assignment()}
            out.append({"seen": seen})
        finally:
            live.pop(threading.get_ident(), None)
            c.close()

    threads = [threading.Thread(target=member) for _ in range(3)]
    for t in threads:
        t.start()
    ok = _wait_all(lambda: sum(max(committed(gbroker, group, topic).get(p, -1), 0)
                               for p in range(PARTITIONS)), N_RECORDS)
    # The split is checked on the members' assignments as they stand together,
    # not on their last words: members stopped one after another leave one
    # after another, and the last one left is handed every partition (CI saw
    # [{4, 5}, {2, 3}, {0, 1, 2, 3, 4, 5}]).
    try:
        assert ok, out
        _check_live_split(live, 3)
    finally:
        stop.set()
        for t in threads:
            t.join(DEADLINE_S)
    assert len({pos for o in out for pos in o["seen"]}) == N_RECORDS


def test_aiokafka_three_members_share_partitions(gbroker):
    aiokafka = pytest.importorskip("aiokafka")
    topic = make_topic(gbroker, "g")
    group = f"ak-{uuid.uuid4().hex[:6]}"

    async def member(seen):
        c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=gbroker.bootstrap, group_id=group,
                                      auto_offset_reset="earliest", enable_auto_commit=False,
                                      session_timeout_ms=3000, heartbeat_interval_ms=300)
        await c.start()
        return c

    async def main():
        seen = set()
        consumers = await asyncio.gather(*(member(seen) for _ in range(3)))
        try:
            deadline = time.monotonic() + DEADLINE_S
            while len(seen) < N_RECORDS and time.monotonic() < deadline:
                for c in consumers:
                    batches = await c.getmany(timeout_ms=100)
                    for tp, msgs in batches.items():
                        seen.update((tp.partition, m.offset) for m in msgs)
                    if batches:
                        await c.commit()
            # Let the group settle so every member reports its final share.
            settle = time.monotonic() + 10
            while time.monotonic() < settle:
                assignments = [{tp.partition for tp in c.assignment()} for c in consumers]
                if sum(len(a) for a in assignments) == PARTITIONS and all(assignments):
                    break
                await asyncio.sleep(0.2)
            return seen, assignments
        finally:
            for c in consumers:
                await c.stop()

    seen, assignments = asyncio.run(main())
    assert len(seen) == N_RECORDS
    _check_split(assignments)
    assert committed(gbroker, group, topic) == {p: N_RECORDS // PARTITIONS for p in range(PARTITIONS)}


def test_cooperative_sticky_group_rebalances(gbroker):
    topic = make_topic(gbroker, "g")
    group = f"coop-{uuid.uuid4().hex[:6]}"
    extra = {"partition.assignment.strategy": "cooperative-sticky"}
    out, stop, live = [], threading.Event(), {}
    first = threading.Thread(target=_confluent_member, args=(gbroker, group, topic, out, stop, extra, live))
    first.start()
    assert _wait_all(lambda: sum(max(v, 0) for v in committed(gbroker, group, topic).values()), 1)
    second = threading.Thread(target=_confluent_member, args=(gbroker, group, topic, out, stop, extra, live))
    second.start()

    # The incremental rebalance: the first member revokes half, then the
    # newcomer is given it (two rebalances).
    _check_live_split(live, 2)
    stop.set()
    first.join(DEADLINE_S)
    second.join(DEADLINE_S)
    assert len(out) == 2 and not first.is_alive() and not second.is_alive(), out


# ---------------------------------------------------------------- members that leave or die

def test_member_leaves_and_member_dies(gbroker):
    topic = make_topic(gbroker, "g")
    group = f"die-{uuid.uuid4().hex[:6]}"
    members = [Member(gbroker, group, topic, CLASSIC_MEMBER) for _ in range(3)]
    try:
        wait_split(members)
        members[0].leave()
        wait_split(members[1:], timeout_s=10)
        started = time.monotonic()
        members[1].kill()
        wait_split(members[2:], timeout_s=15)
        # session.timeout.ms=2000 plus one rebalance: well under 15 s.
        assert time.monotonic() - started < 15
        # The survivor owns everything now; it consumes and commits what the
        # dead member left (bounded wait: it may still be fetching).
        deadline = time.monotonic() + 30
        offsets = committed(gbroker, group, topic)
        while sum(offsets.values()) != N_RECORDS and time.monotonic() < deadline:
            time.sleep(0.5)
            offsets = committed(gbroker, group, topic)
    finally:
        for m in members:
            m.stop()
    assert sum(offsets.values()) == N_RECORDS, offsets


# ---------------------------------------------------------------- restart


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_committed_offsets_survive_restart(broker_factory, sig):
    broker = broker_factory(dict(OVERRIDES))
    topic = make_topic(broker, "g")
    group = "restart"
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    c.commit(offsets=[TopicPartition(topic, p, 7 + p, f"meta-{p}") for p in range(PARTITIONS)],
             asynchronous=False)
    c.close()
    broker.restart(sig)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        assert [(tp.offset, tp.metadata) for tp in committed] == [(7 + p, f"meta-{p}") for p in range(PARTITIONS)]
        c.subscribe([topic])
        first = {}
        deadline = time.monotonic() + DEADLINE_S
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                first.setdefault(m.partition(), m.offset())
        assert first == {p: 7 + p for p in range(PARTITIONS)}
    finally:
        c.close()


# ---------------------------------------------------------------- static membership


def test_static_member_restart_without_rebalance(gbroker):
    topic = make_topic(gbroker, "g")
    group = f"static-{uuid.uuid4().hex[:6]}"
    conf = {"bootstrap.servers": gbroker.bootstrap, "group.id": group, "group.instance.id": "inst-1",
            "session.timeout.ms": 10000, "auto.offset.reset": "earliest"}

    def run_once():
        c = ck.Consumer(conf)
        c.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.1)
        assignment = sorted(tp.partition for tp in c.assignment())
        c.close()  # a static member sends no LeaveGroup
        return assignment

    assert run_once() == list(range(PARTITIONS))
    rebalances = gbroker.log_text().count(f"group {group}: preparing to rebalance")
    assert run_once() == list(range(PARTITIONS))
    assert gbroker.log_text().count(f"group {group}: preparing to rebalance") == rebalances


# ---------------------------------------------------------------- admin


def test_admin_describe_list_delete(gbroker):
    topic = make_topic(gbroker, "g")
    group = f"adm-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    out, stop = [], threading.Event()
    t = threading.Thread(target=_confluent_member, args=(gbroker, group, topic, out, stop))
    t.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        desc = None
        while time.monotonic() < deadline:
            desc = admin.describe_consumer_groups([group])[group].result(10)
            if str(desc.state).endswith("STABLE") and desc.members and desc.members[0].assignment.topic_partitions:
                break
            time.sleep(0.2)
        assert str(desc.state).endswith("STABLE")
        assert desc.partition_assignor == "range" and len(desc.members) == 1
        assert sorted(tp.partition for tp in desc.members[0].assignment.topic_partitions) == list(range(PARTITIONS))
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
        assert group in listed
        res = admin.delete_consumer_groups([group])[group]
        with pytest.raises(ck.KafkaException) as exc:
            res.result(10)
        assert exc.value.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP
        # Let the member finish consuming and committing before it stops
        # (it became Stable before it had read everything).
        expected = {p: N_RECORDS // PARTITIONS for p in range(PARTITIONS)}
        deadline = time.monotonic() + DEADLINE_S
        while committed(gbroker, group, topic) != expected and time.monotonic() < deadline:
            time.sleep(0.3)
    finally:
        stop.set()
        t.join(DEADLINE_S)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if str(admin.describe_consumer_groups([group])[group].result(10).state).endswith("EMPTY"):
            break
        time.sleep(0.2)
    assert committed(gbroker, group, topic) == {p: N_RECORDS // PARTITIONS for p in range(PARTITIONS)}
    admin.delete_consumer_groups([group])[group].result(10)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    assert committed(gbroker, group, topic) == {p: -1001 for p in range(PARTITIONS)}


# ---------------------------------------------------------------- hostile and odd input


def _call(client, key, version, data):
    spec = API_TABLE[key]
    req_cls = spec.request_class(version)
    body = encode_to_bytes(_build(req_cls, data))
    resp = client.request(key, version, body)
    return decode(spec.response_class(version), resp, 0)[0]


def _build(cls, data):
    from kafkapy.server.handlers import construct

    return construct(cls, data)


def test_hostile_input_gets_kafka_errors_and_others_keep_working(gbroker):
    topic = make_topic(gbroker, "g", n=0)
    with RawClient.connect(gbroker.bootstrap) as raw:
        # JoinGroup with an empty protocol list.
        r = _call(raw, 11, 4, {"group_id": "hostile", "session_timeout": 10000, "rebalance_timeout": 10000,
                               "member_id": "", "protocol_type": "consumer", "protocols": []})
        assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        # Heartbeats for an unknown group and an unknown member.
        r = _call(raw, 12, 2, {"group_id": "nope", "generation_id": 1, "member_id": "m"})
        assert r.error_code == E.UNKNOWN_MEMBER_ID
        # Session timeout out of bounds.
        r = _call(raw, 11, 4, {"group_id": "hostile", "session_timeout": 10, "rebalance_timeout": 10,
                               "member_id": "", "protocol_type": "consumer",
                               "protocols": [{"name": "range", "metadata": b""}]})
        assert r.error_code == E.INVALID_SESSION_TIMEOUT
        # A v4 join gets MEMBER_ID_REQUIRED, then joins; v0 has no rebalance timeout.
        r = _call(raw, 11, 4, {"group_id": "hostile", "session_timeout": 10000, "rebalance_timeout": 10000,
                               "member_id": "", "protocol_type": "consumer",
                               "protocols": [{"name": "range", "metadata": b"m" * 200_000}]})
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id
        r = _call(raw, 11, 4, {"group_id": "hostile", "session_timeout": 10000, "rebalance_timeout": 10000,
                               "member_id": r.member_id, "protocol_type": "consumer",
                               "protocols": [{"name": "range", "metadata": b"m" * 200_000}]})
        assert r.error_code == E.NONE and r.generation_id == 1 and len(r.members[0].metadata) == 200_000
        member, gen = r.member_id, r.generation_id
        r = _call(raw, 12, 2, {"group_id": "hostile", "generation_id": gen, "member_id": "stranger"})
        assert r.error_code == E.UNKNOWN_MEMBER_ID
        r = _call(raw, 12, 2, {"group_id": "hostile", "generation_id": gen + 5, "member_id": member})
        assert r.error_code == E.ILLEGAL_GENERATION
        r = _call(raw, 14, 2, {"group_id": "hostile", "generation_id": gen, "member_id": member,
                               "assignments": []})
        assert r.error_code == E.NONE
        # Stale-generation and oversized-metadata commits.
        commit = {"group_id": "hostile", "member_id": member, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                            "committed_metadata": ""}]}]}
        r = _call(raw, 8, 6, dict(commit, generation_id_or_member_epoch=gen - 1))
        assert r.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
        big = {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                              "committed_metadata": "x" * 5000}]}
        r = _call(raw, 8, 6, dict(commit, generation_id_or_member_epoch=gen, topics=[big]))
        assert r.topics[0].partitions[0].error_code == E.OFFSET_METADATA_TOO_LARGE
        # A v0 JoinGroup (no rebalance timeout) of another group still works.
        r = _call(raw, 11, 0, {"group_id": "v0-group", "session_timeout": 6000, "member_id": "",
                               "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
        assert r.error_code == E.NONE and r.member_id
    # Garbage bytes on a group API close that connection only.
    with RawClient.connect(gbroker.bootstrap) as raw:
        raw.send_request(11, 4, b"\xff\xff\xff")
        with pytest.raises(Exception):
            raw.recv_frame(5)
    # The coordinator keeps serving other groups.
    out, stop = [], threading.Event()
    t = threading.Thread(target=_confluent_member,
                         args=(gbroker, "after-hostile", make_topic(gbroker, "g", n=12), out, stop))
    t.start()
    time.sleep(4)
    stop.set()
    t.join(DEADLINE_S)
    assert out and out[0]["assignment"] == set(range(PARTITIONS)) and len(out[0]["seen"]) == 12
