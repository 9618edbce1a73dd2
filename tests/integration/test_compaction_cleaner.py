"""The log cleaner on a real broker with real clients (confluent-kafka), as
Kafka 3.9 cleans: dirty-ratio scheduling, min.compaction.lag.ms, small
segments merged, transaction markers removed after delete.retention.ms once
their transaction's data is gone, and a SIGKILL during cleaning that loses or
duplicates no offset."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from support.clients import create_topic
from support.transactions import producer as txn_producer

from kafkapy._core import load

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.timeout(240)
batch = load("batch")
TIMEOUT_S = 30
CLEANER = {"log.cleaner.backoff.ms": "100"}


def read_all(bs, topic, isolation="read_uncommitted"):
    """``(offset, key, value)`` of everything from the earliest offset to the end."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"cc-{topic}-{isolation}", "isolation.level": isolation,
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got = []
    done = False
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline and not done:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is None:
                got.append((m.offset(), m.key(), m.value()))
            elif m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                done = True
    finally:
        c.close()
    assert done, f"{topic}: the end was not reached"
    offsets = [o for o, _k, _v in got]
    assert offsets == sorted(set(offsets)), "offsets duplicated or out of order"
    return got


def batches_on_disk(part_dir: Path):
    """``(segment base, batch header)`` of every batch in the partition's segment files."""
    out = []
    for f in sorted(part_dir.glob("*.log")):
        buf = f.read_bytes()
        headers, _end, _err = batch.scan_batches(buf, 0, -1, True)
        out += [(int(f.name[:20]), h) for h in headers]
    return out


def produce(p, topic, items):
    delivered = []

    def on_delivery(err, msg):
        assert err is None, err
        delivered.append((msg.offset(), msg.key(), msg.value()))

    for key, value in items:
        p.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
    assert p.flush(TIMEOUT_S) == 0
    return delivered


def test_cleaner_schedules_merges_and_removes_markers(broker_factory):
    b = broker_factory(CLEANER)
    bs = b.bootstrap
    create_topic(bs, "cc", 1, config={"cleanup.policy": "compact", "segment.bytes": "1024",
                                      "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"})
    create_topic(bs, "cc-young", 1, config={"cleanup.policy": "compact", "segment.bytes": "1024",
                                            "min.cleanable.dirty.ratio": "0.01",
                                            "min.compaction.lag.ms": "600000"})
    t = txn_producer(bs, "cc-txn")
    t.begin_transaction()                                  # offsets 0-4, COMMIT marker at 5
    for i in range(5):
        t.produce("cc", key=b"t%d" % i, value=b"txn1-%d" % i, partition=0)
    t.commit_transaction(TIMEOUT_S)
    t.begin_transaction()                                  # offsets 6-10, ABORT marker at 11
    for i in range(5):
        t.produce("cc", key=b"a%d" % i, value=b"aborted-%d" % i, partition=0)
    t.flush(TIMEOUT_S)
    t.abort_transaction(TIMEOUT_S)
    t.begin_transaction()                                  # the producer's last transaction: stays
    t.produce("cc", key=b"last-txn", value=b"kept", partition=0)
    t.commit_transaction(TIMEOUT_S)

    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 800})  # a batch fits a 1 KB segment
    expected = {b"last-txn": b"kept"}
    expected.update({b"t%d" % i: b"plain-t%d" % i for i in range(5)})
    produce(p, "cc", expected.items() - {(b"last-txn", b"kept")})
    young = produce(p, "cc-young", [(b"y%d" % (i % 3), b"young-%d" % i + b"." * 100) for i in range(40)])
    part = b.log_dirs[0] / "cc-0"

    def markers():
        return {h.base_offset for _s, h in batches_on_disk(part) if h.attributes & 0x20}

    assert {5, 11} <= markers()
    first_trickle = None

    def merged_span():
        """The most offsets a segment holding trickle offsets spans: a 1 KB
        segment of ~100-byte records holds at most 10, so 30 means merged
        (emptied trickle segments merge into the one before them, which
        keeps one empty batch of theirs: the segment may start before the
        trickle)."""
        bases = sorted({s for s, _h in batches_on_disk(part)})
        return max((b2 - b1 for b1, b2 in zip(bases, bases[1:]) if b2 >= first_trickle + 30), default=0)

    deadline = time.monotonic() + 60
    rnd = 0
    while time.monotonic() < deadline and ({5, 11} & markers() or merged_span() < 30):
        # A trickle of new dirty data (about one 1 KB segment a round) keeps
        # the dirty ratio above 0.01, so every cleaner pass runs.
        items = [(b"k%d" % (i % 10), b"r%d-%d-" % (rnd, i) + b"x" * 80) for i in range(10)]
        done = produce(p, "cc", items)
        first_trickle = first_trickle if first_trickle is not None else min(o for o, _k, _v in done)
        expected.update(items)
        rnd += 1
        time.sleep(0.3)
    assert not {5, 11} & markers(), "markers of transactions with no data left were not removed"
    assert merged_span() >= 30, "small segments were not merged"
    on_disk = batches_on_disk(part)
    # The live transaction's marker and its data stay (an active producer's last transaction).
    txn_batches = [h for _s, h in on_disk if h.producer_id >= 0 and h.attributes & 0x10]
    assert any(h.attributes & 0x20 for h in txn_batches) and any(not h.attributes & 0x20 for h in txn_batches)
    # The aborted transaction's .txnindex entry went with its marker.
    assert all(f.stat().st_size == 0 for f in part.glob("*.txnindex"))

    for isolation in ("read_uncommitted", "read_committed"):
        records = read_all(bs, "cc", isolation)
        last = {}
        for _o, k, v in records:
            last[k] = v
        assert last == expected, isolation  # no aborted record, every key's last value
        assert len(records) < len(expected) + 10 * rnd  # and compacted

    # Young records (min.compaction.lag.ms 10 min) are untouched, passes later.
    assert read_all(bs, "cc-young") == young


def test_markers_go_once_their_data_is_gone_and_read_committed_sees_the_committed_values(broker_factory):
    """Kafka 3.9 on a compacted topic rolled by time (segment.ms): five
    transactions of one transactional producer (T0 commits k0-k4, T1 aborts
    k0-k6, T2 commits k0-k2, T3 aborts k5-k6, T4 commits k4), then plain
    writes of k3 and k4. A marker goes (a delete horizon first, then after
    delete.retention.ms) once its transaction has no data left: T1's and
    T3's (aborted records go at once), T0's (every key superseded), and
    T4's once the idle producer is past producer.id.expiration.ms (its last
    batch is kept for it until then). T2's stays: k0-k2 are its. After
    that, kafkapy-dump-log shows T2's marker as the only control batch, the
    .txnindex files are empty, and read_committed and read_uncommitted
    consumers both read exactly each key's last committed value, before and
    after a SIGKILL and restart."""
    import contextlib
    import io

    from kafkapy.tools import dump_log

    b = broker_factory({**CLEANER, "producer.id.expiration.ms": "2000"})
    bs = b.bootstrap
    topic = "cct-txn"
    create_topic(bs, topic, 1, config={"cleanup.policy": "compact", "segment.ms": "300",
                                       "delete.retention.ms": "1000", "min.cleanable.dirty.ratio": "0.01"})
    t = txn_producer(bs, "cct-txn")
    expected = {}
    for rnd, (keys, commit) in enumerate([(range(5), True), (range(7), False), (range(3), True),
                                          (range(5, 7), False), (range(4, 5), True)]):
        t.begin_transaction()
        items = [(b"k%d" % i, b"%s-%d-%d" % (b"committed" if commit else b"aborted", rnd, i)) for i in keys]
        for key, value in items:
            t.produce(topic, key=key, value=value, partition=0)
        t.flush(TIMEOUT_S)
        if commit:
            t.commit_transaction(TIMEOUT_S)
            expected.update(items)
        else:
            t.abort_transaction(TIMEOUT_S)
    part = b.log_dirs[0] / f"{topic}-0"

    def markers():
        return {h.base_offset for _s, h in batches_on_disk(part) if h.attributes & 0x20}

    # A marker is written after EndTxn is answered: wait until all five were
    # seen (none can go before delete.retention.ms, 1 s, has passed).
    seen = set()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(seen) < 5:
        seen |= markers()
        time.sleep(0.05)
    assert len(seen) == 5, seen
    t2_marker = sorted(seen)[2]
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    plain = [(b"k3", b"plain-3"), (b"k4", b"plain-4")]
    produce(p, topic, plain)
    expected.update(plain)

    deadline = time.monotonic() + 60
    rnd = 0
    while time.monotonic() < deadline and markers() != {t2_marker}:
        # One record of one key every 0.4 s: each append past segment.ms
        # rolls the active segment (Kafka rolls on append), so the markers
        # become cleanable and every pass finds the log dirty.
        produce(p, topic, [(b"tick", b"%d" % rnd)])
        expected[b"tick"] = b"%d" % rnd
        rnd += 1
        time.sleep(0.4)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert dump_log.main(["--files", ",".join(sorted(str(f) for f in part.glob("*.log")))]) == 0
    control = [line for line in out.getvalue().splitlines() if "isControl: true" in line]
    assert [line.split()[1] for line in control] == [str(t2_marker)], out.getvalue()
    assert "deleteHorizonMs: OptionalLong.empty" in control[0]  # its data is there: no horizon yet
    assert all(f.stat().st_size == 0 for f in part.glob("*.txnindex"))
    t.flush(TIMEOUT_S)
    for restarted in (False, True):
        if restarted:
            # Recovery rebuilds producer state, the LSO and the .txnindex
            # files from the cleaned log: the readers see the same.
            b.stop(signal.SIGKILL)
            b.start()
        for isolation in ("read_committed", "read_uncommitted"):
            records = read_all(bs, topic, isolation)
            assert {k: v for _o, k, v in records} == expected, (isolation, restarted)
            assert not [v for _o, _k, v in records if v.startswith(b"aborted")], (isolation, restarted)
            assert len(records) <= len(expected) + 1, (isolation, restarted)  # compacted: at most one older tick


def test_sigkill_during_cleaning_loses_and_duplicates_nothing(broker_factory):
    """The broker is SIGKILLed the moment a cleaner pass has a ``.cleaned`` or
    ``.swap`` file on disk (mid-rename dance), and restarted: every key's last
    acknowledged value is at its offset, no offset is duplicated or invented,
    and the log end is where it was."""
    b = broker_factory({"log.cleaner.backoff.ms": "20"})
    bs = b.bootstrap
    create_topic(bs, "cck", 1, config={"cleanup.policy": "compact", "segment.bytes": "16384",
                                       "min.cleanable.dirty.ratio": "0.01"})
    part = b.log_dirs[0] / "cck-0"
    delivered = []
    hits = 0
    for attempt in range(5):
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 8000})
        for rnd in range(10):
            delivered += produce(p, "cck", [(b"k%d" % (i % 200), b"%d-%d-%d-" % (attempt, rnd, i) + b"v" * 80)
                                            for i in range(400)])
        deadline = time.monotonic() + 10
        caught = False
        while time.monotonic() < deadline and not caught:
            caught = any(n.endswith((".cleaned", ".swap")) for n in os.listdir(part))
            time.sleep(0.0005)  # a group's .cleaned lives for its write and fsync (ms); leave the broker a core
        b.stop(signal.SIGKILL)
        hits += caught
        b.start()
        assert not [n for n in os.listdir(part) if n.endswith((".swap", ".cleaned"))]
        if hits >= 2:
            break
    assert hits >= 1, "no SIGKILL landed inside a cleaner pass"
    last_delivered = {}
    for o, k, v in delivered:
        last_delivered[k] = (o, v)
    by_offset = {o: (k, v) for o, k, v in delivered}

    def check():
        records = read_all(bs, "cck")
        # Nothing corrupted or invented, each key's last acknowledged value at
        # its offset, the log end where it was.
        assert all(by_offset[o] == (k, v) for o, k, v in records)
        assert {k: (o, v) for o, k, v in records} == last_delivered
        assert records[-1][0] == max(by_offset)
        return len(records)

    check()  # right after the last restart
    deadline = time.monotonic() + 30
    while check() >= len(delivered) and time.monotonic() < deadline:  # the restarted cleaner finishes
        time.sleep(0.5)
    assert check() < len(delivered), "nothing was compacted after the restarts"


def test_the_cleaner_is_a_process_of_its_own_and_a_stop_mid_pass_is_clean(broker_factory):
    """Compaction runs in the ``log-cleaner`` child (none with
    log.cleaner.enable=false). SIGTERM while a pass has a ``.cleaned`` file
    on disk: the broker exits 0 with its clean-shutdown marker (the pass is
    given up between groups, its files removed), and after a restart every
    key's last acknowledged value is at its offset."""
    b = broker_factory({"log.cleaner.backoff.ms": "20"})
    bs = b.bootstrap
    assert sum("log-cleaner" in t for t in _titles(b, "log-cleaner")) == 1
    create_topic(bs, "cct", 1, config={"cleanup.policy": "compact", "segment.bytes": "16384",
                                       "min.cleanable.dirty.ratio": "0.01"})
    part = b.log_dirs[0] / "cct-0"
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 8000})
    delivered = []
    caught = False
    for rnd in range(20):  # bounded: until a pass is caught with a .cleaned file
        delivered += produce(p, "cct", [(b"k%d" % (i % 200), b"%d-%d-" % (rnd, i) + b"v" * 80) for i in range(400)])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not caught:
            caught = any(n.endswith(".cleaned") for n in os.listdir(part))
            time.sleep(0.0005)
        if caught:
            break
    assert caught, "no cleaner pass was seen writing"
    assert b.stop(signal.SIGTERM) == 0, b.log_tail()
    assert (b.log_dirs[0] / ".kafka_cleanshutdown").exists()
    assert not [n for n in os.listdir(part) if n.endswith((".swap", ".cleaned"))]
    b.start()
    last = {k: (o, v) for o, k, v in delivered}
    records = read_all(bs, "cct")
    assert {k: (o, v) for o, k, v in records} == last
    assert records[-1][0] == max(o for o, _k, _v in delivered)


def test_no_cleaner_process_when_the_cleaner_is_disabled(broker_factory):
    b = broker_factory({"log.cleaner.enable": "false"})
    titles = _titles(b, "acceptor")  # the cleaner is forked before the acceptor
    assert not any("log-cleaner" in t for t in titles), titles


def _titles(broker, wanted: str) -> list[str]:
    """The broker's processes' titles once one of them names ``wanted`` (a
    child sets its title just after it forks), at most 10 s."""
    from support.broker import process_group_members

    deadline = time.monotonic() + 10
    while True:
        titles = [cmd for _pid, _state, cmd in process_group_members(broker.pgid)]
        if any(wanted in t for t in titles) or time.monotonic() > deadline:
            return titles
        time.sleep(0.05)


def test_cleaner_metrics_are_exported(broker_factory):
    """max-dirty-percent, max-clean-time-secs and cleaner-recopy-percent on the
    Prometheus endpoint after a cleaner pass over a compacted topic."""
    import re
    import urllib.request

    from support.broker import free_port

    port = free_port()
    b = broker_factory({**CLEANER, "prometheus.port": port})
    create_topic(b.bootstrap, "ccm", 1, config={"cleanup.policy": "compact", "segment.bytes": "1024"})
    # Never due (Kafka cleans above the ratio, and none is above 1.0): it
    # stays all dirty, so every pass reports 100 % as the dirtiest.
    create_topic(b.bootstrap, "ccm-dirty", 1, config={"cleanup.policy": "compact", "segment.bytes": "1024",
                                                      "min.cleanable.dirty.ratio": "1.0"})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "batch.size": 800})
    produce(p, "ccm", [(b"k%d" % (i % 3), b"v%d-" % i + b"x" * 80) for i in range(60)])
    produce(p, "ccm-dirty", [(b"k%d" % (i % 3), b"v%d-" % i + b"x" * 80) for i in range(60)])

    def gauges():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
        return {name: float(v) for name, v in re.findall(
            r"^(kafka_log_logcleaner\w+)(?:\{[^}]*\})? (\S+)$", text, re.M)}

    deadline = time.monotonic() + 20
    got = gauges()
    dirtiest = got.get("kafka_log_logcleanermanager_max_dirty_percent", 0)
    while time.monotonic() < deadline and (got.get("kafka_log_logcleaner_cleaner_recopy_percent", 0) <= 0
                                           or dirtiest < 100):
        time.sleep(0.2)
        got = gauges()
        dirtiest = max(dirtiest, got.get("kafka_log_logcleanermanager_max_dirty_percent", 0))
    assert dirtiest == 100, got
    assert 0 < got["kafka_log_logcleaner_cleaner_recopy_percent"] < 100, got
    assert got["kafka_log_logcleaner_max_clean_time_secs"] > 0, got


def test_consumer_offsets_are_compacted_by_the_log_cleaner(broker_factory):
    """``__consumer_offsets`` is cleaned by the log-cleaner process with the
    same passes as any compacted log (log.cleaner.backoff.ms, dirtiest first,
    when due) while its coordinator appends to it: 300
    commits of one group's offset shrink to the last one per key below the
    active segment, and the group still reads its last commit."""
    b = broker_factory({**CLEANER, "offsets.topic.segment.bytes": 2048, "offsets.topic.num.partitions": 1,
                        "offsets.topic.replication.factor": 1})
    create_topic(b.bootstrap, "co", 1)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "co-group", "enable.auto.commit": False})
    try:
        for i in range(300):
            c.commit(offsets=[TopicPartition("co", 0, i + 1)], asynchronous=False)
        part = b.log_dirs[0] / "__consumer_offsets-0"
        assert max(h.base_offset for _s, h in batches_on_disk(part)) >= 299  # 300 commits were written
        # log.cleaner.backoff.ms is 100 ms here: well before Kafka's default 15 s
        deadline = time.monotonic() + 10
        while len(batches_on_disk(part)) > 60 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(batches_on_disk(part)) <= 60, len(batches_on_disk(part))
        [tp] = c.committed([TopicPartition("co", 0)], timeout=TIMEOUT_S)
        assert tp.offset == 300
    finally:
        c.close()


def test_the_cleaner_io_rate_holds_a_pass_until_raised_at_run_time(broker_factory):
    """log.cleaner.io.max.bytes.per.second holds the cleaner's reads and
    writes to a rate (Kafka's Throttler) and is dynamic (Kafka's LogCleaner is
    reconfigurable): at 1,000 B/s a pass over ~350 KB of log would take
    minutes, so nothing is compacted for seconds; raised with
    IncrementalAlterConfigs, the pass in progress goes on and compacts."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    b = broker_factory({**CLEANER, "log.cleaner.io.max.bytes.per.second": "1000"})
    bs = b.bootstrap
    # Kafka's throttler lets the bytes of its first 300 ms check interval
    # through unchecked: the log is written after it.
    time.sleep(1)
    create_topic(bs, "ccr", 1, config={"cleanup.policy": "compact", "segment.bytes": "16384",
                                       "min.cleanable.dirty.ratio": "0.01"})
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 8000})
    delivered = produce(p, "ccr", [(b"k%d" % (i % 50), b"%d-" % i + b"v" * 100) for i in range(3000)])
    time.sleep(3)  # 30 cleaner back-offs: unthrottled, the log is compacted well within this
    assert len(read_all(bs, "ccr")) == len(delivered), "compacted while held to 1,000 B/s"
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("log.cleaner.io.max.bytes.per.second", "1e12", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bs})  # kept until its future resolves
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    deadline = time.monotonic() + 30
    records = read_all(bs, "ccr")
    while len(records) >= len(delivered) and time.monotonic() < deadline:
        time.sleep(0.5)
        records = read_all(bs, "ccr")
    assert len(records) < len(delivered), "not compacted after the rate was raised"
    assert {k: (o, v) for o, k, v in records} == {k: (o, v) for o, k, v in delivered}
