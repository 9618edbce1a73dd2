"""KafkaJS 2.2.4 (npm ``kafkajs``) against real kafkapy brokers.

KafkaJS negotiates each API's version from ApiVersions within its own fixed
ranges (Produce v0-7, Fetch v0-11, Metadata v0-6, JoinGroup v0-5,
OffsetFetch v1-4, DescribeConfigs v0-2, CreateTopics v0-3, ...), all
non-flexible, so these tests cover the older halves of kafkapy's ranges that
the other clients skip.  The client runs in node through
tests/support/kafkajs/driver.js, one process per step, which takes a JSON
command and prints a JSON result; this file asserts on those results and
cross-checks with confluent-kafka where a second client's view matters.

KafkaJS ships only the gzip codec: snappy, lz4 and zstd need the separate
``kafkajs-snappy``/``kafkajs-lz4``/zstd codec packages, which are not test
dependencies, so only gzip is produced here (the driver reports the codecs
it has, checked below).

``make test`` installs kafkajs into ``.venv/node`` (``make install-kafkajs``:
npm, keyed by a version stamp); these tests skip only if ``node`` itself is
missing, and fail then under CI. Runs in ~40 s on two shared cores (the
three-broker case ~15 s of it, mostly the cluster's start and stop).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafkapy.server.security.scram_store import add_scram_credentials
from support.broker import free_port
from support.clients import module_broker

REPO_ROOT = Path(__file__).resolve().parents[2]
DRIVER = REPO_ROOT / "tests" / "support" / "kafkajs" / "driver.js"
KAFKAJS_VERSION = "2.2.4"
# Bound on one driver process: the driver exits by itself after
# processTimeoutMs (45 s); this only catches a node that ignores that.
DRIVER_TIMEOUT_S = 60

NODE = shutil.which("node")


@pytest.fixture(autouse=True, scope="module")
def _node_present():
    """Skip without node on a developer machine; under CI (``CI`` set, where
    `make test` installs Debian's nodejs and npm, then kafkajs) fail."""
    if NODE is None:
        reason = "node is not installed (make test installs Debian's nodejs and npm, then kafkajs)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def _node_modules() -> Path:
    """Where ``make install-kafkajs`` put kafkajs: <venv>/node/node_modules."""
    candidates = [Path(os.environ["KAFKAPY_NODE_MODULES"])] if os.environ.get("KAFKAPY_NODE_MODULES") else []
    candidates += [Path(sys.prefix) / "node" / "node_modules", REPO_ROOT / ".venv" / "node" / "node_modules"]
    for path in candidates:
        if (path / "kafkajs" / "package.json").exists():
            return path
    pytest.fail(f"kafkajs is not installed in any of {[str(p) for p in candidates]}: run `make install-kafkajs`")


def run_driver(bootstrap, op, **fields) -> tuple[dict, str]:
    """Run one driver command: its JSON answer and node's stderr."""
    cmd = {"op": op, "brokers": bootstrap.split(","), **fields}
    env = dict(os.environ, NODE_PATH=str(_node_modules()))
    proc = subprocess.run([NODE, str(DRIVER), json.dumps(cmd)], capture_output=True, text=True,
                          timeout=DRIVER_TIMEOUT_S, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"driver printed nothing (exit {proc.returncode}); stderr:\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1]), proc.stderr


def kafkajs(bootstrap, op, **fields):
    """Run one driver command; the result, or AssertionError with the error and node's stderr."""
    answer, stderr = run_driver(bootstrap, op, **fields)
    assert answer["ok"], f"{op} failed: {answer['error']}\nstderr:\n{stderr[-4000:]}"
    return answer["result"]


def error_type(error):
    """The Kafka error name of a driver-reported error (under KafkaJS's retry wrapper, if any)."""
    while error.get("cause"):
        error = error["cause"]
    return error.get("type")


REAUTH_MS = 3000
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def jsbroker(tmp_path_factory):
    """One broker for the module: PLAINTEXT (the harness's probe and most
    tests) and SASL_PLAINTEXT with PLAIN (alice) and SCRAM-SHA-256 (bob)."""
    port, sasl_port = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    def prepare(broker):
        add_scram_credentials(str(broker.log_dirs[0]), "bob", "SCRAM-SHA-256", "bob-secret")
        broker.sasl_bootstrap = f"127.0.0.1:{sasl_port}"

    with module_broker(tmp_path_factory, {
        "num.partitions": 1, "num.io.threads": 2, "auto.create.topics.enable": False,
        "listeners": listeners, "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        # SCRAM sessions last REAUTH_MS (KIP-368): KafkaJS re-authenticates on the same connection.
        "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": REAUTH_MS},
            name="kafkajs", port=port, before_start=prepare) as broker:
        yield broker


def create_topic(bootstrap, topic, partitions=1, replication_factor=1):
    result = kafkajs(bootstrap, "admin", calls=[["createTopics", {
        "topics": [{"topic": topic, "numPartitions": partitions, "replicationFactor": replication_factor}],
        "waitForLeaders": True}]])
    assert result[0] == {"ok": True, "value": True}, result


def confluent_values(bootstrap, topic, expect, isolation="read_committed"):
    """What confluent-kafka reads from the start of ``topic`` (no group)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"cf-{topic}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                         "isolation.level": isolation})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < expect and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.key(), msg.value(), dict(msg.headers() or [])))
    finally:
        consumer.close()
    return got


# ------------------------------------------------------------------- producer


@pytest.mark.parametrize("acks", [-1, 1, 0])
def test_produce_acks_and_consume(jsbroker, acks):
    topic = f"js-acks{acks}".replace("-1", "all")
    create_topic(jsbroker.bootstrap, topic)
    result = kafkajs(jsbroker.bootstrap, "produce", topic=topic, acks=acks, count=10, sends=2)
    if acks != 0:
        # Produce v7 answers: the base offset of each send, in order.
        assert [[(r["partition"], r["errorCode"], int(r["baseOffset"])) for r in send] for send in result["results"]] \
            == [[(0, 0, 0)], [(0, 0, 10)]]
    got = kafkajs(jsbroker.bootstrap, "consume", topic=topic, groupId=f"g-{topic}", expect=20)["records"]
    assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in got] == \
        [(i, f"k{i % 10}", f"v{i // 10}-{i % 10}", {"seq": str(i % 10)}) for i in range(20)]


def test_produce_gzip_read_by_another_client(jsbroker):
    topic = "js-gzip"
    create_topic(jsbroker.bootstrap, topic)
    result = kafkajs(jsbroker.bootstrap, "produce", topic=topic, acks=-1, count=50, compression="gzip")
    assert result["results"][0][0]["errorCode"] == 0
    # Only gzip (1) ships with kafkajs; None is 0.
    assert sorted(result["codecs"]) == [1], result["codecs"]
    got = confluent_values(jsbroker.bootstrap, topic, 50)
    assert got == [(f"k{i}".encode(), f"v0-{i}".encode(), {"seq": str(i).encode()}) for i in range(50)]
    # gzip is kept as sent (compression.type=producer): one compressed batch on disk.
    segment = next((jsbroker.log_dirs[0] / f"{topic}-0").glob("*.log")).read_bytes()
    attributes = int.from_bytes(segment[21:23], "big")
    assert attributes & 0x7 == 1, attributes


def test_idempotent_producer(jsbroker):
    topic = "js-idempotent"
    create_topic(jsbroker.bootstrap, topic, partitions=2)
    result = kafkajs(jsbroker.bootstrap, "produce", topic=topic, acks=-1, count=20, sends=3, idempotent=True)
    per_send = [{r["partition"]: int(r["baseOffset"]) for r in send} for send in result["results"]]
    assert len(per_send) == 3 and all(len(s) == 2 for s in per_send), per_send
    # Offsets advance by what each send put in each partition: no duplicates.
    got = confluent_values(jsbroker.bootstrap, topic, 60)
    assert sorted(v for _, v, _ in got) == sorted(f"v{s}-{i}".encode() for s in range(3) for i in range(20))


# ------------------------------------------------------------------- consumer group


def test_group_of_two_rebalances_commits_and_resumes(jsbroker):
    topic, group = "js-group", "js-group-g"
    create_topic(jsbroker.bootstrap, topic, partitions=4)
    kafkajs(jsbroker.bootstrap, "produce", topic=topic, acks=-1, count=40, prefix="first-")
    report = kafkajs(jsbroker.bootstrap, "group", topic=topic, groupId=group, partitions=4, initial=40, more=40)
    a, b = report["a"], report["b"]
    # A alone first (all four partitions), then a generation with both members.
    assert sorted(a["joins"][0]["assignment"][topic]) == [0, 1, 2, 3]
    last_a, last_b = a["joins"][-1], b["joins"][-1]
    assert last_a["memberId"] != last_b["memberId"]
    assert sorted(last_a["assignment"][topic] + last_b["assignment"][topic]) == [0, 1, 2, 3]
    assert last_a["assignment"][topic] and last_b["assignment"][topic]
    # Every record was delivered; the new ones to the member that owned the partition.
    values = {r["value"] for r in a["records"] + b["records"]}
    assert values >= {f"first-0-{i}" for i in range(40)} | {f"more-{i}" for i in range(40)}
    for member, last in ((a, last_a), (b, last_b)):
        assert {r["partition"] for r in member["records"] if r["value"].startswith("more-")} <= set(last["assignment"][topic])
    assert a["commits"] and b["commits"]

    # Committed offsets are the partitions' ends (KafkaJS's admin: OffsetFetch v4; ListOffsets).
    offsets, ends, described = kafkajs(jsbroker.bootstrap, "admin", calls=[
        ["fetchOffsets", {"groupId": group, "topics": [topic]}],
        ["fetchTopicOffsets", topic],
        ["describeGroups", [group]]])
    ends = {p["partition"]: int(p["high"]) for p in ends["value"]}
    assert sum(ends.values()) == 80
    assert {p["partition"]: int(p["offset"]) for p in offsets["value"][0]["partitions"]} == ends
    assert described["value"]["groups"][0]["state"] == "Empty"
    assert described["value"]["groups"][0]["protocolType"] == "consumer"

    # A restarted member resumes from the committed offsets: only the new records.
    kafkajs(jsbroker.bootstrap, "produce", topic=topic, acks=-1, count=12, prefix="after-")
    got = kafkajs(jsbroker.bootstrap, "consume", topic=topic, groupId=group, expect=12, settleMs=500)["records"]
    assert sorted(r["value"] for r in got) == sorted(f"after-0-{i}" for i in range(12))
    assert all(r["offset"] >= ends[r["partition"]] for r in got)


# ------------------------------------------------------------------- admin


def test_admin(jsbroker):
    topic = "js-admin"
    calls = [
        ["createTopics", {"topics": [{"topic": topic, "numPartitions": 2, "replicationFactor": 1,
                                      "configEntries": [{"name": "retention.ms", "value": "3600000"}]}],
                          "waitForLeaders": True}],
        # TOPIC_ALREADY_EXISTS, which KafkaJS reports as false
        ["createTopics", {"topics": [{"topic": topic, "numPartitions": 2}]}],
        ["fetchTopicMetadata", {"topics": [topic]}],
        ["describeConfigs", {"includeSynonyms": False, "resources": [
            {"type": "TOPIC", "name": topic, "configNames": ["retention.ms", "cleanup.policy"]}]}],
        ["createPartitions", {"topicPartitions": [{"topic": topic, "count": 5}]}],
        ["fetchTopicMetadata", {"topics": [topic]}],
        ["createPartitions", {"topicPartitions": [{"topic": topic, "count": 3}]}],
        ["listTopics", None],
        ["deleteTopics", {"topics": [topic], "timeout": 10000}],
        ["listTopics", None],
        ["deleteTopics", {"topics": [topic], "timeout": 10000}],
    ]
    r = kafkajs(jsbroker.bootstrap, "admin", calls=calls, retries=1)
    assert r[0] == {"ok": True, "value": True}
    assert r[1] == {"ok": True, "value": False}, r[1]
    meta = r[2]["value"]["topics"]
    assert [(t["name"], sorted(p["partitionId"] for p in t["partitions"])) for t in meta] == [(topic, [0, 1])]
    assert all(p["leader"] == 0 and p["replicas"] == [0] and p["isr"] == [0] for p in meta[0]["partitions"])
    configs = r[3]["value"]["resources"][0]
    assert configs["errorCode"] == 0 and configs["resourceName"] == topic
    entries = {e["configName"]: e for e in configs["configEntries"]}
    assert entries["retention.ms"]["configValue"] == "3600000" and not entries["retention.ms"]["isDefault"]
    assert entries["cleanup.policy"]["configValue"] == "delete" and entries["cleanup.policy"]["isDefault"]
    assert r[4] == {"ok": True}
    assert sorted(p["partitionId"] for p in r[5]["value"]["topics"][0]["partitions"]) == [0, 1, 2, 3, 4]
    assert not r[6]["ok"] and error_type(r[6]["error"]) == "INVALID_PARTITIONS", r[6]
    assert topic in r[7]["value"]
    assert r[8] == {"ok": True}
    assert topic not in r[9]["value"]
    # KafkaJS retries the retriable error, then wraps it.
    assert not r[10]["ok"] and error_type(r[10]["error"]) == "UNKNOWN_TOPIC_OR_PARTITION", r[10]



def test_committed_offset_below_the_log_start_resets(jsbroker):
    """deleteTopicRecords (DeleteRecords v1) moves the log start; a group
    whose committed offset is now below it gets OFFSET_OUT_OF_RANGE from
    Fetch v11 and KafkaJS resets to the earliest offset (ListOffsets v3),
    reading from the new log start."""
    topic, group = "js-log-start", "js-log-start-g"
    create_topic(jsbroker.bootstrap, topic)
    kafkajs(jsbroker.bootstrap, "produce", topic=topic, acks=-1, count=10)
    r = kafkajs(jsbroker.bootstrap, "admin", retries=0, calls=[  # KafkaJS would retry OFFSET_OUT_OF_RANGE
        ["fetchTopicMetadata", {"topics": [topic]}],  # KafkaJS's deleteTopicRecords needs it loaded
        ["deleteTopicRecords", {"topic": topic, "partitions": [{"partition": 0, "offset": "4"}]}],
        ["fetchTopicOffsets", topic],
        ["deleteTopicRecords", {"topic": topic, "partitions": [{"partition": 0, "offset": "11"}]}]])
    assert [x["ok"] for x in r[:3]] == [True] * 3, r
    assert [(p["low"], p["high"]) for p in r[2]["value"]] == [("4", "10")]
    # Past the high watermark: OFFSET_OUT_OF_RANGE for the partition, nothing deleted.
    assert r[3]["error"]["cause"]["partitions"] == [{"partition": 0, "offset": "11", "type": "OFFSET_OUT_OF_RANGE"}], r[3]
    # The group's offset 1 (KafkaJS's setOffsets joins the group and sleeps out a 5 s poll: confluent-kafka commits it).
    confluent_kafka = pytest.importorskip("confluent_kafka")
    committer = confluent_kafka.Consumer({"bootstrap.servers": jsbroker.bootstrap, "group.id": group})
    committer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 1)], asynchronous=False)
    committer.close()
    got = kafkajs(jsbroker.bootstrap, "consume", topic=topic, groupId=group, expect=6, settleMs=300)["records"]
    assert [x["offset"] for x in got] == [4, 5, 6, 7, 8, 9]

# ------------------------------------------------------------------- transactions


def test_transactions(jsbroker):
    topic, source, group = "js-txn", "js-txn-source", "js-txn-g"
    create_topic(jsbroker.bootstrap, topic, partitions=2)
    create_topic(jsbroker.bootstrap, source)
    steps = kafkajs(jsbroker.bootstrap, "txn", transactionalId="js-txn-id", steps=[
        {"sends": [{"topic": topic, "count": 5, "prefix": "c1-"}], "end": "commit"},
        {"sends": [{"topic": topic, "count": 5, "prefix": "a1-"}], "end": "abort"},
        {"sends": [{"topic": topic, "count": 5, "prefix": "c2-"}],
         "offsets": {"consumerGroupId": group, "topics": [{"topic": source, "partitions": [{"partition": 0, "offset": "7"}]}]},
         "end": "commit"},
        {"sends": [{"topic": topic, "count": 3, "prefix": "a2-"}],
         "offsets": {"consumerGroupId": group, "topics": [{"topic": source, "partitions": [{"partition": 0, "offset": "99"}]}]},
         "end": "abort"},
    ])
    assert [s["ok"] for s in steps] == [True] * 4, steps
    # read_committed (KafkaJS's default readUncommitted: false) sees only the committed ten.
    got = kafkajs(jsbroker.bootstrap, "consume", topic=topic, groupId="js-txn-reader", expect=10, settleMs=700)
    assert sorted(r["value"] for r in got["records"]) == sorted([f"c1-{i}" for i in range(5)] + [f"c2-{i}" for i in range(5)])
    # read_uncommitted sees the aborted ones too.
    got = kafkajs(jsbroker.bootstrap, "consume", topic=topic, groupId="js-txn-dirty", expect=18, readUncommitted=True)
    assert len({r["value"] for r in got["records"]}) == 18
    # The offsets sent in the committed transaction, not the aborted one's.
    offsets = kafkajs(jsbroker.bootstrap, "admin", calls=[["fetchOffsets", {"groupId": group, "topics": [source]}]])
    assert [(p["partition"], p["offset"]) for p in offsets[0]["value"][0]["partitions"]] == [(0, "7")]
    # Another client agrees.
    assert sorted(v for _, v, _ in confluent_values(jsbroker.bootstrap, topic, 10)) == \
        sorted(f"{p}-{i}".encode() for p in ("c1", "c2") for i in range(5))



def test_transactional_id_fencing(jsbroker):
    """A second producer's InitProducerId (v1) aborts the first one's open
    transaction and fences it: the zombie's Produce v7 and EndTxn v1 get
    INVALID_PRODUCER_EPOCH (EndTxn below v2 reports PRODUCER_FENCED so), and
    read_committed readers see only the new producer's record."""
    topic = "js-fence"
    create_topic(jsbroker.bootstrap, topic)
    report = kafkajs(jsbroker.bootstrap, "fence", topic=topic, transactionalId="js-fence-id", retries=2)
    assert error_type(report["zombieSend"]["error"]) == "INVALID_PRODUCER_EPOCH", report
    assert error_type(report["zombieCommit"]["error"]) == "INVALID_PRODUCER_EPOCH", report
    assert report["freshCommit"] == {"ok": True}
    got = kafkajs(jsbroker.bootstrap, "consume", topic=topic, groupId="js-fence-reader", expect=1, settleMs=700)
    assert [r["value"] for r in got["records"]] == ["fresh"]


def test_read_committed_waits_at_the_lso_and_the_marker_wakes_it(jsbroker):
    """KafkaJS's read_committed Fetch v11 stops at the last stable offset
    while a transaction is open (the plain records after it wait too), and
    its long poll (maxWaitTimeInMs 8 s) is answered when the commit marker
    moves the LSO, as Kafka's marker append completes delayed fetches; it
    used to sleep out the whole wait."""
    topic = "js-lso"
    create_topic(jsbroker.bootstrap, topic)
    r = kafkajs(jsbroker.bootstrap, "lso", topic=topic, transactionalId="js-lso-id", maxWaitMs=8000)
    assert r["whileOpen"] == ["plain-0"]
    assert r["afterCommit"] == ["plain-0", "txn-1", "plain-2", "plain-3"]
    assert r["commitLatencyMs"] < 3000, r

# ------------------------------------------------------------------- SASL


@pytest.mark.parametrize("sasl", [
    {"mechanism": "plain", "username": "alice", "password": "alice-secret"},
    {"mechanism": "scram-sha-256", "username": "bob", "password": "bob-secret"},
], ids=["plain", "scram-sha-256"])
def test_sasl(jsbroker, sasl):
    """SaslHandshake v1 + SaslAuthenticate v1 on every connection KafkaJS
    opens (bootstrap, leader, coordinator), then a produce and a group read."""
    topic = f"js-sasl-{sasl['mechanism']}"
    # SCRAM sessions end after REAUTH_MS here: KafkaJS must re-authenticate
    # only within its threshold of that end. Its default (10 s) is longer
    # than the session, so it would start one before every request, and
    # Kafka refuses a second re-authentication within a second (the
    # handshake then answers ILLEGAL_SASL_STATE), as kafkapy does.
    auth = {"sasl": sasl, "reauthenticationThreshold": 1000}
    r = kafkajs(jsbroker.sasl_bootstrap, "admin", **auth, calls=[
        ["createTopics", {"topics": [{"topic": topic, "numPartitions": 1}], "waitForLeaders": True}],
        ["describeCluster", None]])
    assert r[0] == {"ok": True, "value": True}, r
    # Metadata answers the SASL listener's address, not the PLAINTEXT one.
    assert [f"{b['host']}:{b['port']}" for b in r[1]["value"]["brokers"]] == [jsbroker.sasl_bootstrap]
    kafkajs(jsbroker.sasl_bootstrap, "produce", **auth, topic=topic, acks=-1, count=5)
    got = kafkajs(jsbroker.sasl_bootstrap, "consume", **auth, topic=topic, groupId=f"g-{topic}", expect=5)
    assert [r["value"] for r in got["records"]] == [f"v0-{i}" for i in range(5)]
    # A wrong password is Kafka's SASL_AUTHENTICATION_FAILED.
    answer, _ = run_driver(jsbroker.sasl_bootstrap, "admin", retries=0, calls=[["listTopics", None]],
                           sasl={**sasl, "password": "wrong-password"})
    assert not answer["ok"] and answer["error"]["name"] == "KafkaJSSASLAuthenticationError", answer


# ------------------------------------------------------------------- cluster


def test_cluster_rf3(make_cluster):
    """Three brokers and ZooKeeper: KafkaJS creates an RF 3 topic through the
    controller it finds in Metadata, produces idempotently with acks=-1 to
    each partition's leader, reads in a group through the coordinator
    FindCoordinator names (a 6-partition RF 3 __consumer_offsets), and runs
    transactions over the three leaders."""
    cluster, _ = make_cluster()
    topic = "js-rf3"
    create_topic(cluster.bootstrap, topic, partitions=3, replication_factor=3)
    meta = kafkajs(cluster.bootstrap, "admin", calls=[["fetchTopicMetadata", {"topics": [topic]}],
                                                      ["describeCluster", None]])
    partitions = meta[0]["value"]["topics"][0]["partitions"]
    assert [sorted(p["replicas"]) for p in partitions] == [[1, 2, 3]] * 3
    assert len({p["leader"] for p in partitions}) == 3  # Kafka's placement spreads the leaders
    assert sorted(b["nodeId"] for b in meta[1]["value"]["brokers"]) == [1, 2, 3]
    assert meta[1]["value"]["controller"] in (1, 2, 3)
    result = kafkajs(cluster.bootstrap, "produce", topic=topic, acks=-1, count=30, idempotent=True)
    assert sorted(r["partition"] for r in result["results"][0]) == [0, 1, 2]
    got = kafkajs(cluster.bootstrap, "consume", topic=topic, groupId="js-rf3-g", expect=30)["records"]
    assert sorted(r["value"] for r in got) == sorted(f"v0-{i}" for i in range(30))
    # Transactions over the three leaders (committed, aborted): the
    # coordinator writes two markers with WriteTxnMarkers to the other
    # leaders, one locally; read_committed sees the committed one only.
    steps = kafkajs(cluster.bootstrap, "txn", transactionalId="js-rf3-txn", steps=[
        {"sends": [{"topic": topic, "count": 3, "prefix": f"{end}{p}-", "partition": p} for p in (0, 1, 2)],
         "end": end} for end in ("commit", "abort")])
    assert [s["ok"] for s in steps] == [True] * 2, steps
    got = kafkajs(cluster.bootstrap, "consume", topic=topic, groupId="js-rf3-g2", expect=39, settleMs=500)["records"]
    assert sorted(r["value"] for r in got if not r["value"].startswith("v0-")) == \
        sorted(f"commit{p}-{i}" for p in (0, 1, 2) for i in range(3))
    # Every replica has the records: the ISR stayed full.
    meta = kafkajs(cluster.bootstrap, "admin", calls=[["fetchTopicMetadata", {"topics": [topic]}]])
    assert [sorted(p["isr"]) for p in meta[0]["value"]["topics"][0]["partitions"]] == [[1, 2, 3]] * 3


def test_sasl_reauthentication(jsbroker):
    """KIP-368 with KafkaJS: SaslAuthenticate v1 tells it the session lifetime
    (REAUTH_MS); KafkaJS re-authenticates on the same connection once within
    reauthenticationThreshold of the end, and a group read spanning several
    lifetimes goes on without the broker closing a connection."""
    sasl = {"mechanism": "scram-sha-256", "username": "bob", "password": "bob-secret"}
    topic = "js-sasl-reauth"
    create_topic(jsbroker.bootstrap, topic)
    kafkajs(jsbroker.bootstrap, "produce", topic=topic, acks=-1, count=5)
    answer, stderr = run_driver(jsbroker.sasl_bootstrap, "consume", sasl=sasl, topic=topic, groupId=f"g-{topic}",
                                expect=5, settleMs=2 * REAUTH_MS, reauthenticationThreshold=REAUTH_MS - 1000,
                                logLevel="DEBUG")
    assert answer["ok"], answer
    assert [r["value"] for r in answer["result"]["records"]] == [f"v0-{i}" for i in range(5)]
    connected = stderr.count("Connecting {")
    authenticated = stderr.count("Response SaslAuthenticate(")
    # SCRAM takes two SaslAuthenticate round trips: more than two per connection is a re-authentication.
    assert authenticated >= 2 * connected + 2, (connected, authenticated)
    assert "Connection error" not in stderr and "closed" not in stderr.lower(), stderr[-3000:]
