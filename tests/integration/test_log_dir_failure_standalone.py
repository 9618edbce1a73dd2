"""Log-dir failure on a standalone broker: a log dir on a small tmpfs fills up.

The broker has two log dirs, the first on the ordinary disk (it holds the
metadata store), the second a 1 MiB tmpfs this test mounts (root only;
skipped with the reason otherwise). A
topic's partition lands in each (a new partition goes to the dir holding the
fewest). Producing to the tmpfs partition until the file system is full
takes that dir offline, as Kafka 3.9 does with an IOException: the produce
that met ENOSPC and every request after it answer KAFKA_STORAGE_ERROR (56)
for that partition, DescribeLogDirs answers the dir with 56, and the broker
keeps serving the other dir's partition (no child died). The dir stays
offline until a restart (Kafka's way); after the space is given back
(remount with a larger size) and the broker restarted, every acknowledged
record is read back from the recovered dir and produce works again.

A second test puts the only log dir on the tmpfs: when it fails the broker
stops with a non-zero exit (Kafka's "all log dirs have failed"). A third
starts a broker with a dir that cannot be loaded: it is offline from the
start and the broker serves the other.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from support.raw_api import call
from support.small_fs import remount, small_filesystem

TOPIC_SMALL = "on-small-fs"
TOPIC_BIG = "on-big-fs"
RECORD = b"x" * 20_000  # ~50 of them fill 1 MiB
MAX_SENDS = 200  # 4 MB: the 1 MiB tmpfs is full long before
STORAGE_ERROR = 56


@pytest.fixture
def small_fs(tmp_path):
    """A 1 MiB tmpfs at tmp_path/small (set up before the broker, so unmounted after it stopped)."""
    with small_filesystem(tmp_path / "small", "1m") as path:
        yield path


def _producer(bootstrap: str):
    from kafka import KafkaProducer

    # retries=0: each send's own answer is what the test looks at.
    return KafkaProducer(bootstrap_servers=bootstrap, acks=1, retries=0, linger_ms=0,
                         max_request_size=2_000_000, request_timeout_ms=10_000)


def _create_topics(bootstrap: str, *names: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})
    futures = client.create_topics([NewTopic(n, 1, 1) for n in names], request_timeout=15)
    for n in names:
        futures[n].result(15)


def _fill(producer, topic: str) -> tuple[list[tuple[int, bytes]], Exception]:
    """Send until a send fails: ``([(offset, value)] acknowledged, the error)``."""
    from kafka.errors import KafkaError

    acked = []
    for i in range(MAX_SENDS):
        value = i.to_bytes(4, "big") + RECORD
        try:
            meta = producer.send(topic, value).get(timeout=15)
        except KafkaError as exc:
            return acked, exc
        acked.append((meta.offset, value))
    raise AssertionError(f"{MAX_SENDS} records of {len(RECORD)} bytes fit a 1 MiB file system")


def _consume_all(bootstrap: str, topic: str, expected: int) -> dict[int, bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             fetch_max_bytes=4_000_000, max_partition_fetch_bytes=4_000_000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = {}
        deadline = time.monotonic() + 20
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    got[r.offset] = r.value
        return got
    finally:
        consumer.close()


def _list_offsets_error(bootstrap: str, topic: str) -> int:
    answer = call(bootstrap, 2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return answer.topics[0].partitions[0].error_code


def _fetch_error(bootstrap: str, topic: str) -> int:
    answer = call(bootstrap, 1, 11, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1_000_000,
                                     "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                                         {"topic": topic, "partitions": [
                                             {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                              "log_start_offset": -1, "partition_max_bytes": 1_000_000}]}],
                                     "forgotten_topics_data": [], "rack_id": ""})
    return answer.responses[0].partitions[0].error_code


def _describe_log_dirs(bootstrap: str) -> dict:
    answer = call(bootstrap, 35, 4, {"topics": None})
    return {r.log_dir: (r.error_code, {(t.name, p.partition_index) for t in r.topics for p in t.partitions})
            for r in answer.results}


def test_full_log_dir_goes_offline_and_other_dir_keeps_serving(small_fs, broker_factory, tmp_path):
    big = tmp_path / "big"
    # The tmpfs second: the first log dir holds the metadata store, whose
    # failure stops the broker (as Kafka's metadata log dir).
    broker = broker_factory({"log.dirs": f"{big},{small_fs}", "num.io.threads": 2,
                             "auto.create.topics.enable": False})
    bootstrap = broker.bootstrap
    _create_topics(bootstrap, TOPIC_BIG)  # a tie: the first dir
    _create_topics(bootstrap, TOPIC_SMALL)  # the dir with fewer partitions: the tmpfs
    assert (small_fs / f"{TOPIC_SMALL}-0").is_dir() and (big / f"{TOPIC_BIG}-0").is_dir()

    producer = _producer(bootstrap)
    try:
        producer.send(TOPIC_BIG, b"before").get(timeout=15)
        acked, error = _fill(producer, TOPIC_SMALL)
        assert acked, "nothing fit before the file system was full"
        assert getattr(error, "errno", None) == STORAGE_ERROR, repr(error)
        # The dir is offline now: every request for its partition answers 56,
        # at once (not a timeout, not a closed connection).
        from kafka.errors import KafkaStorageError

        with pytest.raises(KafkaStorageError):
            producer.send(TOPIC_SMALL, b"after").get(timeout=15)
        assert _list_offsets_error(bootstrap, TOPIC_SMALL) == STORAGE_ERROR
        assert _fetch_error(bootstrap, TOPIC_SMALL) == STORAGE_ERROR
        # The other dir's partition is served as before.
        after = producer.send(TOPIC_BIG, b"after").get(timeout=15)
        assert after.offset == 1
    finally:
        producer.close()
    assert [v for _o, v in sorted(_consume_all(bootstrap, TOPIC_BIG, 2).items())] == [b"before", b"after"]
    dirs = _describe_log_dirs(bootstrap)
    assert dirs[str(small_fs)] == (STORAGE_ERROR, set())
    assert dirs[str(big)] == (0, {(TOPIC_BIG, 0)})
    assert broker.running, broker.log_tail()
    assert "Stopping serving replicas in dir " + str(small_fs) in broker.log_text()

    # Kafka brings an offline dir back only with a restart: give the space
    # back, restart, and everything acknowledged is there.
    broker.stop()
    remount(small_fs, "16m")
    broker.start()
    got = _consume_all(bootstrap, TOPIC_SMALL, len(acked))
    assert set(acked) <= set(got.items()), f"lost {len(set(acked) - set(got.items()))} of {len(acked)}"
    producer = _producer(bootstrap)
    try:
        meta = producer.send(TOPIC_SMALL, b"space is back").get(timeout=15)
    finally:
        producer.close()
    assert meta.offset == max(got) + 1
    assert _describe_log_dirs(bootstrap)[str(small_fs)][0] == 0


def test_broker_stops_when_its_only_log_dir_fails(small_fs, broker_factory):
    broker = broker_factory({"log.dirs": str(small_fs), "num.io.threads": 2})
    topic = f"only-{uuid.uuid4().hex[:6]}"
    _create_topics(broker.bootstrap, topic)
    producer = _producer(broker.bootstrap)
    try:
        _acked, error = _fill(producer, topic)
    finally:
        producer.close()
    assert getattr(error, "errno", None) == STORAGE_ERROR, repr(error)
    deadline = time.monotonic() + 15
    while broker.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert broker.proc.poll() not in (None, 0), broker.log_tail()
    assert "all log dirs" in broker.log_text()
    assert not os.path.exists(small_fs / ".kafka_cleanshutdown")


def test_a_dir_that_fails_to_load_is_offline_and_the_broker_starts(broker_factory, tmp_path):
    """Kafka's loadLogs: an I/O error loading a dir leaves it offline and the
    broker starts with the others (here a segment that is a directory:
    opening it fails with EISDIR)."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    (bad / "broken-0" / "00000000000000000000.log").mkdir(parents=True)
    broker = broker_factory({"log.dirs": f"{good},{bad}", "num.io.threads": 2,
                             "auto.create.topics.enable": False})
    _create_topics(broker.bootstrap, TOPIC_BIG)
    assert (good / f"{TOPIC_BIG}-0").is_dir()  # placed in the live dir only
    dirs = _describe_log_dirs(broker.bootstrap)
    assert dirs[str(bad)] == (STORAGE_ERROR, set()) and dirs[str(good)][0] == 0
    producer = _producer(broker.bootstrap)
    try:
        assert producer.send(TOPIC_BIG, b"v").get(timeout=15).offset == 0
    finally:
        producer.close()
    assert f"Error while loading its logs in dir {bad}" in broker.log_text()
