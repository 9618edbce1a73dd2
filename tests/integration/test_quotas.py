"""Client quotas against a real broker: AlterClientQuotas / DescribeClientQuotas
round trips (exact, default and any matches, strict, validate_only, Kafka's
errors), kafkapy-configs for users and clients, and enforcement: a producer
held to 1 MB/s over 10 s beside an unlimited one, throttle times reported to
clients (librdkafka's throttle callback and statistics, raw frames), the
connection muted after a throttled response (KIP-219) or the response held
for an old request version, a consumer held to its byte rate, and the
controller mutation quota's THROTTLING_QUOTA_EXCEEDED."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from support.clients import create_topic, module_broker
from support.quotas import Connection, alter, describe, produce_request

from kafkapy.protocol.errors import ErrorCode as E

pytestmark = pytest.mark.timeout(180)

MB = 1024 * 1024
EXACT, DEFAULT, ANY = 0, 1, 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with module_broker(tmp_path_factory, {"num.io.threads": 2}) as b:
        create_topic(b.bootstrap, "quota-t", 1)
        yield b


def _configs(broker, *args) -> subprocess.CompletedProcess:
    tool = Path(sys.executable).parent / "kafkapy-configs"
    return subprocess.run([str(tool), "--bootstrap-server", broker.bootstrap, *args], capture_output=True,
                          text=True, timeout=60)


def test_alter_and_describe_round_trip(broker):
    b = broker.bootstrap
    r = alter(b, {"user": "rt-alice"}, {"producer_byte_rate": 1024, "request_percentage": 50.5})
    assert [(e.error_code, e.error_message) for e in r.entries] == [(E.NONE, None)]
    alter(b, {"user": "rt-alice", "client-id": "rt-c1"}, {"consumer_byte_rate": 2048})
    alter(b, {"user": None}, {"controller_mutation_rate": 10})
    alter(b, {"user": None, "client-id": None}, {"producer_byte_rate": 4096})
    # the entity's other keys stay when one is removed
    alter(b, {"user": "rt-alice"}, {"request_percentage": None, "absent_key": None})
    code, found = describe(b, [("user", EXACT, "rt-alice")], strict=True)
    assert (code, found) == (E.NONE, {(("user", "rt-alice"),): {"producer_byte_rate": 1024.0}})
    code, found = describe(b, [("user", EXACT, "rt-alice")], strict=False)  # with its client entities
    assert found == {(("user", "rt-alice"),): {"producer_byte_rate": 1024.0},
                     (("user", "rt-alice"), ("client-id", "rt-c1")): {"consumer_byte_rate": 2048.0}}
    code, found = describe(b, [("user", DEFAULT, None)], strict=True)
    assert found == {(("user", None),): {"controller_mutation_rate": 10.0}}
    code, found = describe(b, [("user", DEFAULT, None), ("client-id", DEFAULT, None)], strict=True)
    assert found == {(("user", None), ("client-id", None)): {"producer_byte_rate": 4096.0}}
    code, found = describe(b, [("user", ANY, None), ("client-id", ANY, None)], strict=True)
    assert {k for k in found if k[0][1] in ("rt-alice", None)} == {
        (("user", "rt-alice"), ("client-id", "rt-c1")), (("user", None), ("client-id", None))}
    # validate_only checks and stores nothing
    r = alter(b, {"client-id": "rt-v"}, {"producer_byte_rate": 5}, validate_only=True)
    assert r.entries[0].error_code == E.NONE
    assert describe(b, [("client-id", EXACT, "rt-v")], strict=True)[1] == {}
    r = alter(b, {"client-id": "rt-v"}, {"producer_byte_rate": 5.5}, validate_only=True)
    assert (r.entries[0].error_code, r.entries[0].error_message) == (
        E.INVALID_REQUEST, "Configuration producer_byte_rate must be a LONG value")
    r = alter(b, {"client-id": "rt-v"}, {"bogus": 1})
    assert (r.entries[0].error_code, r.entries[0].error_message) == (
        E.INVALID_REQUEST, "Invalid configuration key bogus")
    r = alter(b, {"client-id": ""}, {"producer_byte_rate": 1})
    assert (r.entries[0].error_code, r.entries[0].error_message) == (E.INVALID_REQUEST, "Empty client-id not supported")
    r = alter(b, {"group": "g"}, {"producer_byte_rate": 1}, version=0)
    assert r.entries[0].error_code == E.INVALID_REQUEST
    assert describe(b, [("user", EXACT, "a"), ("user", EXACT, "b")])[0] == E.INVALID_REQUEST
    assert describe(b, [("group", ANY, None)], version=0)[0] == E.UNSUPPORTED_VERSION
    assert describe(b, [("", ANY, None)])[0] == E.INVALID_REQUEST
    # IP entities: connection_creation_rate only, an address or a name that resolves
    r = alter(b, {"ip": "127.0.0.9"}, {"connection_creation_rate": 5})
    assert r.entries[0].error_code == E.NONE
    assert describe(b, [("ip", EXACT, "127.0.0.9")], strict=True)[1] == {
        (("ip", "127.0.0.9"),): {"connection_creation_rate": 5.0}}
    assert describe(b, [("ip", EXACT, "127.0.0.9"), ("user", ANY, None)])[0] == E.INVALID_REQUEST
    r = alter(b, {"ip": "127.0.0.9"}, {"producer_byte_rate": 5})
    assert (r.entries[0].error_code, r.entries[0].error_message) == (
        E.INVALID_REQUEST, "Invalid configuration key producer_byte_rate")
    r = alter(b, {"ip": "no such host.invalid"}, {"connection_creation_rate": 5})
    assert (r.entries[0].error_code, r.entries[0].error_message) == (
        E.INVALID_REQUEST, "no such host.invalid is not a valid IP or resolvable host.")
    alter(b, {"ip": "127.0.0.9"}, {"connection_creation_rate": None})
        # default users' quotas come before client-id quotas (Kafka's order): the
    # other tests' clients are ANONYMOUS users, so leave none behind
    alter(b, {"user": None}, {"controller_mutation_rate": None})
    alter(b, {"user": None, "client-id": None}, {"producer_byte_rate": None})
    assert describe(b, [("user", DEFAULT, None)])[1] == {}


def test_kafkapy_configs_users_and_clients(broker):
    p = _configs(broker, "--entity-type", "users", "--entity-name", "cfg-bob", "--entity-type", "clients",
                 "--entity-default", "--alter", "--add-config", "producer_byte_rate=1048576,request_percentage=200")
    assert (p.returncode, p.stdout) == (0, "Completed updating config for user cfg-bob.\n"), p.stderr
    p = _configs(broker, "--user", "cfg-bob", "--client-defaults", "--describe")
    assert p.stdout == ("Quota configs for user-principal 'cfg-bob', the default client-id are "
                        "producer_byte_rate=1048576.0, request_percentage=200.0\n"), p.stderr
    p = _configs(broker, "--entity-type", "clients", "--entity-name", "cfg-c", "--alter",
                 "--add-config", "consumer_byte_rate=10000000")
    assert p.stdout == "Completed updating config for client cfg-c.\n", p.stderr
    p = _configs(broker, "--entity-type", "clients", "--entity-name", "cfg-c", "--describe")
    assert p.stdout == "Quota configs for client-id 'cfg-c' are consumer_byte_rate=1.0E7\n"
    p = _configs(broker, "--entity-type", "users", "--entity-default", "--alter", "--add-config",
                 "consumer_byte_rate=3000")
    assert p.stdout == "Completed updating default config for users in the cluster.\n", p.stderr
    p = _configs(broker, "--entity-type", "clients", "--entity-name", "cfg-c", "--alter",
                 "--delete-config", "producer_byte_rate")
    assert p.returncode != 0 and "Invalid config(s): producer_byte_rate" in p.stderr
    p = _configs(broker, "--entity-type", "clients", "--entity-name", "cfg-c", "--alter",
                 "--delete-config", "consumer_byte_rate")
    assert p.returncode == 0
    assert _configs(broker, "--entity-type", "clients", "--entity-name", "cfg-c", "--describe").stdout == ""
    assert _configs(broker, "--user-defaults", "--alter", "--delete-config", "consumer_byte_rate").returncode == 0
    # SCRAM credentials share the user's entity with its quotas: each alteration keeps the other
    p = _configs(broker, "--entity-type", "users", "--entity-name", "cfg-carol", "--alter", "--add-config",
                 "producer_byte_rate=2048")
    assert p.returncode == 0, p.stderr
    p = _configs(broker, "--entity-type", "users", "--entity-name", "cfg-carol", "--alter", "--add-config",
                 "SCRAM-SHA-256=[iterations=8192,password=carol-secret],SCRAM-SHA-512=[password=carol-secret]")
    assert p.stdout == "Completed updating config for user cfg-carol.\n", p.stderr
    p = _configs(broker, "--entity-type", "users", "--entity-name", "cfg-carol", "--describe")
    assert p.stdout == ("Quota configs for user-principal 'cfg-carol' are producer_byte_rate=2048.0\n"
                        "SCRAM credential configs for user-principal 'cfg-carol' are "
                        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"), p.stderr
    assert "carol-secret" not in p.stdout
    p = _configs(broker, "--entity-type", "users", "--entity-name", "cfg-carol", "--alter", "--add-config",
                 "SCRAM-SHA-256=[password=x],producer_byte_rate=1")
    assert p.returncode != 0 and "Cannot alter both quota and SCRAM credential configs" in p.stderr
    p = _configs(broker, "--entity-type", "clients", "--entity-name", "c", "--alter", "--add-config",
                 "SCRAM-SHA-256=[password=x]")
    assert p.returncode != 0 and "Only quota configs can be added for 'clients'" in p.stderr


def test_throttled_response_then_muted_connection(broker):
    """KIP-219 (Produce v9): the answer comes at once with its throttle time, and
    the connection is not read again until that time has passed. Produce v3
    (a client that does not throttle itself): the answer itself waits."""
    b = broker.bootstrap
    for client in ("raw-new", "raw-old"):
        alter(b, {"client-id": client}, {"producer_byte_rate": 80 * 1024})
    # ~900 KB (under max.message.bytes) against a bucket of 10 s x 80 KB/s: ~1 s
    request = produce_request("quota-t", 100_000, records=9)
    conn = Connection(b, "raw-new")
    try:
        response, took = conn.call(0, 9, request)
        assert response.responses[0].partition_responses[0].error_code == E.NONE
        throttle_ms = response.throttle_time.total_seconds() * 1000 \
            if hasattr(response.throttle_time, "total_seconds") else response.throttle_time
        assert 500 <= throttle_ms <= 4000, throttle_ms
        assert took < 1.0  # sent right away
        _, muted_s = conn.call(18, 0, {})
        assert muted_s >= 0.8 * throttle_ms / 1000, (muted_s, throttle_ms)
    finally:
        conn.close()
    conn = Connection(b, "raw-old")
    try:
        response, took = conn.call(0, 3, request)
        throttle_ms = response.throttle_time.total_seconds() * 1000 \
            if hasattr(response.throttle_time, "total_seconds") else response.throttle_time
        assert throttle_ms >= 500
        assert took >= 0.8 * throttle_ms / 1000, (took, throttle_ms)  # the answer was held
    finally:
        conn.close()


def _produce_for(bootstrap, client_id, seconds, warmup_s, out, throttles):
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "acks": 1,
                  "queue.buffering.max.kbytes": 2048, "batch.size": 200_000,
                  "throttle_cb": lambda ev: throttles.append((client_id, ev.throttle_time))})
    payload = b"x" * 10_000
    measured = [0]
    started = time.monotonic()
    window = (started + warmup_s, started + warmup_s + seconds)

    def delivered(err, msg):
        if err is None and window[0] <= time.monotonic() < window[1]:
            measured[0] += len(msg.value())

    while time.monotonic() < window[1]:  # bounded by the measurement window
        try:
            p.produce("quota-t", payload, callback=delivered)
        except BufferError:
            p.poll(0.005)
        p.poll(0)
    p.purge()
    p.flush(10)
    out[client_id] = measured[0] / seconds


def test_producer_held_to_its_quota_while_another_is_not(broker):
    b = broker.bootstrap
    alter(b, {"client-id": "held"}, {"producer_byte_rate": MB})
    out, throttles = {}, []
    threads = [threading.Thread(target=_produce_for, args=(b, c, 10.0, 4.0, out, throttles))
               for c in ("held", "free")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert abs(out["held"] - MB) <= 0.1 * MB, out["held"] / MB
    assert out["free"] >= 5 * MB, out["free"] / MB  # not slowed to anything near the quota
    assert any(c == "held" and t > 0 for c, t in throttles)  # reported to the client
    assert not any(c == "free" for c, _ in throttles)


def test_consumer_held_to_its_byte_rate(broker):
    b = broker.bootstrap
    create_topic(b, "quota-c", 1)
    p = Producer({"bootstrap.servers": b, "linger.ms": 20})
    for _ in range(750):
        p.produce("quota-c", b"c" * 4000)
    p.flush(30)
    alter(b, {"client-id": "slow-consumer"}, {"consumer_byte_rate": 100 * 1024})
    got = {}
    stats = []
    for client in ("slow-consumer", "fast-consumer"):
        c = Consumer({"bootstrap.servers": b, "group.id": f"g-{client}", "client.id": client,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "max.partition.fetch.bytes": 128 * 1024,
                      "statistics.interval.ms": 500, "stats_cb": lambda s, c=client: stats.append((c, s))})
        c.assign([TopicPartition("quota-c", 0, 0)])
        total, deadline = 0, time.monotonic() + 4.0
        while time.monotonic() < deadline and total < 3_000_000:  # bounded by time
            for m in c.consume(100, 0.2):
                if m.error() is None:
                    total += len(m.value())
        got[client] = total
        c.close()
    assert got["fast-consumer"] == 3_000_000
    # ~100 KB/s over at least the 10 s the first window counts as, plus one fetch
    assert got["slow-consumer"] <= 1_700_000, got
    throttled = [max((br.get("throttle", {}).get("max", 0) for br in json.loads(s)["brokers"].values()),
                     default=0) for c, s in stats if c == "slow-consumer"]
    assert max(throttled, default=0) > 0


def test_controller_mutation_quota_refuses_strict_versions(broker):
    b = broker.bootstrap
    alter(b, {"client-id": "mutator"}, {"controller_mutation_rate": 1})
    conn = Connection(b, "mutator")
    try:
        # 12 partitions against 1/s and a bucket of 10 s of it: 2 s of throttle
        r, _ = conn.call(19, 6, {"topics": [{"name": "mut-1", "num_partitions": 12, "replication_factor": 1,
                                             "assignments": [], "configs": []}], "timeout": 10000,
                                 "validate_only": False})
        assert r.topics[0].error_code == E.NONE
        throttle_ms = r.throttle_time.total_seconds() * 1000 \
            if hasattr(r.throttle_time, "total_seconds") else r.throttle_time
        assert throttle_ms > 0
        # that connection is muted for the throttle time; another of the same
        # client is not, and its strict (v6) creation is refused while over
        other = Connection(b, "mutator")
        try:
            r, took = other.call(19, 6, {"topics": [{"name": "mut-2", "num_partitions": 1, "replication_factor": 1,
                                                     "assignments": [], "configs": []}], "timeout": 10000,
                                         "validate_only": False})
            assert (r.topics[0].name, r.topics[0].error_code) == ("mut-2", E.THROTTLING_QUOTA_EXCEEDED)
            assert took < 0.8 * throttle_ms / 1000  # answered at once, not after the other's mute
            # an old version (v5) is accepted, and throttled
            r, _ = other.call(19, 5, {"topics": [{"name": "mut-3", "num_partitions": 1, "replication_factor": 1,
                                                  "assignments": [], "configs": []}], "timeout": 10000,
                                      "validate_only": False})
            assert r.topics[0].error_code == E.NONE
        finally:
            other.close()
    finally:
        conn.close()


def test_request_percentage_throttles_handler_time(broker):
    """request_percentage=1: a client may use 1 % of one handler; its burst
    allowance (10 windows of it: 0.1 s of handler time) spent, Metadata v12
    answers carry a throttle time, bounded by one quota window (Kafka's
    ClientRequestQuotaManager)."""
    b = broker.bootstrap
    alter(b, {"client-id": "busy"}, {"request_percentage": 1})
    conn = Connection(b, "busy")
    try:
        throttle_ms, deadline = 0, time.monotonic() + 20
        for _ in range(5000):  # bounded in count and time
            r, _ = conn.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
            t = r.throttle_time
            throttle_ms = t.total_seconds() * 1000 if hasattr(t, "total_seconds") else t
            if throttle_ms or time.monotonic() > deadline:
                break
        assert 0 < throttle_ms <= 1000, throttle_ms
    finally:
        conn.close()
    conn = Connection(b, "not-busy")  # another client id is not throttled
    try:
        r, _ = conn.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
        t = r.throttle_time
        assert (t.total_seconds() if hasattr(t, "total_seconds") else t) == 0
    finally:
        conn.close()
