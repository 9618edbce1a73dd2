"""What authorization costs a request: in-process, the checks the Produce,
Fetch and Metadata handlers add, with ACLs off and on; end to end, produce
throughput and broker CPU with the authorizer off and on, same run.

Run:  .venv/bin/python perf/bench_acls.py [--acls 10000] [--end-to-end] [--records 200000]

In-process (no broker): the handlers' own authorization code on decoded kio
requests (``produce._denied``, ``fetch._allowed_check``, the Metadata
filter), over an ``EmbeddedAclStore`` on a real shared partition table (so
the ``acl_generation`` read is the shared-memory one), with ``--acls``
literal topic ACLs plus 100 prefixed ones for the principal and others.
Disabled is ``getattr(broker, "authorizer", None)`` and a None test, which is
all a handler does without ``authorizer.class.name``. "miss" is a decision
not memoized yet (the first request after an ACL change, per process);
"hit" every later one.

End to end (``--end-to-end``): one broker with a SASL_PLAINTEXT listener,
started twice (authorizer off, then on with an ALLOW Write for the user on
the topic); a confluent-kafka producer sends ``--records`` 100-byte records
with linger.ms=0 (many small requests: the per-request cost shows) and
then 1 KiB records batched (linger.ms=5); figures are records/s and the
broker's CPU per 10^5 records.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from kafkapy.metadata.acl_store import EmbeddedAclStore  # noqa: E402
from kafkapy.protocol import acls as A  # noqa: E402
from kafkapy.protocol.api import API_TABLE  # noqa: E402
from kafkapy.protocol.entities import construct  # noqa: E402
from kafkapy.server.handlers import fetch as fetch_handler  # noqa: E402
from kafkapy.server.handlers import produce as produce_handler  # noqa: E402
from kafkapy.server.security.authorizer import Authorizer  # noqa: E402
from kafkapy.storage.shared import SharedPartitionTable  # noqa: E402

USER = "User:alice"


def _per_call_us(fn, n: int) -> float:
    fn()
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n * 1e6


def _authorizer(work: str, n_acls: int) -> Authorizer:
    table = SharedPartitionTable(64, os.path.join(work, "table.lock"))
    store = EmbeddedAclStore(work, table)
    auth = Authorizer(store, frozenset({"User:admin"}), False)
    # One write for all (the store's update is per resource; bulk-load the file the same way it is written).
    acls = {A.ResourcePattern(A.TOPIC, f"t{i}", A.LITERAL): frozenset({
        A.AccessControlEntry(USER if i % 2 == 0 else f"User:u{i}", "*", A.WRITE, A.ALLOW),
        A.AccessControlEntry(USER, "*", A.READ, A.ALLOW)}) for i in range(n_acls)}
    acls.update({A.ResourcePattern(A.TOPIC, f"p{i}-", A.PREFIXED): frozenset({
        A.AccessControlEntry(f"User:u{i}", "*", A.READ, A.ALLOW)}) for i in range(100)})
    with table.lock_all():
        store._write(acls)
    table.increment("acl_generation")
    return auth


def _ctx(auth, api_key):
    return SimpleNamespace(broker=SimpleNamespace(authorizer=auth), principal=USER, peer_host="127.0.0.1",
                           api_key=api_key)


def in_process(n_acls: int) -> list:
    rows = []
    with tempfile.TemporaryDirectory() as work:
        auth = _authorizer(work, n_acls)
        produce = construct(API_TABLE[0].request_class(9), {
            "transactional_id": None, "acks": 1, "timeout": 1000,
            "topic_data": [{"name": "t0", "partition_data": [{"index": 0, "records": b"\x00" * 61}]}]})
        produce10 = construct(API_TABLE[0].request_class(9), {
            "transactional_id": None, "acks": 1, "timeout": 1000,
            "topic_data": [{"name": f"t{2 * i}", "partition_data": [{"index": 0, "records": b"\x00" * 61}]}
                           for i in range(10)]})
        off, on = _ctx(None, 0), _ctx(auth, 0)

        def disabled():
            a = getattr(off.broker, "authorizer", None)
            if a is not None:
                raise AssertionError

        rows.append(("any request, ACLs off (getattr + None test)", _per_call_us(disabled, 200000)))
        rows.append(("Produce, 1 topic, hit", _per_call_us(lambda: produce_handler._denied(on, auth, produce), 50000)))
        rows.append(("Produce, 10 topics, hit", _per_call_us(lambda: produce_handler._denied(on, auth, produce10),
                                                             20000)))

        def produce_miss():
            auth._memo = {}
            produce_handler._denied(on, auth, produce)

        rows.append(("Produce, 1 topic, miss (memo dropped)", _per_call_us(produce_miss, 20000)))
        fctx = _ctx(auth, 1)
        names = [f"t{2 * (i % 10)}" for i in range(100)]

        def fetch(k):
            allowed = fetch_handler._allowed_check(fctx, auth, -1)
            for name in names[:k]:
                allowed(name)

        rows.append(("Fetch, 1 partition, hit", _per_call_us(lambda: fetch(1), 50000)))
        rows.append(("Fetch, 100 partitions of 10 topics, hit", _per_call_us(lambda: fetch(100), 5000)))
        rows.append(("Fetch from a follower (ClusterAction), hit",
                     _per_call_us(lambda: fetch_handler._allowed_check(fctx, auth, 1)("t0"), 50000)))
        topics = [f"t{i}" for i in range(min(n_acls, 1000))]
        mctx = _ctx(auth, 3)
        rows.append((f"Metadata, all {len(topics)} topics filtered, hit",
                     _per_call_us(lambda: [t for t in topics if auth.allowed(mctx, A.DESCRIBE, A.TOPIC, t)], 200)))

        def reload():
            auth.store.table.increment("acl_generation")
            auth.allowed(on, A.WRITE, A.TOPIC, "t0")

        rows.append((f"reload after an ACL change ({n_acls} + 100 patterns, per process)", _per_call_us(reload, 5)))
    return rows


def end_to_end(records: int) -> list:
    import confluent_kafka
    import confluent_kafka.admin

    from support.broker import BrokerProcess, free_port

    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="a" user_admin="a" user_alice="b";')

    # The broker is its process group's leader: its tree is the group.
    from _brokers import timed_produce

    rows = []
    for authorizer in ("", "kafka.security.authorizer.AclAuthorizer"):
        with tempfile.TemporaryDirectory() as work:
            plain, sasl = free_port(), free_port()
            listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}"
            broker = BrokerProcess(Path(work), {
                "listeners": listeners, "advertised.listeners": listeners,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                "authorizer.class.name": authorizer, "super.users": "User:admin"}, port=plain).start()
            try:
                conf = {"bootstrap.servers": f"127.0.0.1:{sasl}", "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanisms": "PLAIN"}
                admin = confluent_kafka.admin.AdminClient({**conf, "sasl.username": "admin", "sasl.password": "a"})
                for f in admin.create_topics([confluent_kafka.admin.NewTopic("bench", 1, 1)]).values():
                    f.result(30)
                if authorizer:
                    for f in admin.create_acls([confluent_kafka.admin.AclBinding(
                            confluent_kafka.admin.ResourceType.TOPIC, "bench",
                            confluent_kafka.admin.ResourcePatternType.LITERAL, "User:alice", "*",
                            confluent_kafka.admin.AclOperation.WRITE,
                            confluent_kafka.admin.AclPermissionType.ALLOW)]).values():
                        f.result(30)
                for label, size, linger, count in (("100 B, linger 0", 100, 0, records // 10),
                                                   ("1 KiB, linger 5", 1024, 5, records)):
                    producer = confluent_kafka.Producer({**conf, "sasl.username": "alice", "sasl.password": "b",
                                                         "linger.ms": linger, "acks": 1,
                                                         "queue.buffering.max.messages": 1000000})
                    elapsed, cpu = timed_produce(producer, "bench", b"x" * size, count, broker.pgid)
                    rows.append((f"ACLs {'on ' if authorizer else 'off'} {label}", count / elapsed,
                                 cpu / count * 1e5))
            finally:
                broker.stop()
                broker.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--acls", type=int, default=10000)
    parser.add_argument("--end-to-end", action="store_true")
    parser.add_argument("--records", type=int, default=200000)
    args = parser.parse_args()
    print(f"in-process, {args.acls} literal topic ACLs + 100 prefixed (microseconds per request):")
    for what, us in in_process(args.acls):
        print(f"  {what:<60} {us:10.2f}")
    if args.end_to_end:
        print("end to end, SASL_PLAINTEXT, acks=1 (records/s, broker CPU s per 10^5 records):")
        for what, rate, cpu in end_to_end(args.records):
            print(f"  {what:<40} {rate:12.0f} {cpu:8.3f}")


if __name__ == "__main__":
    main()
