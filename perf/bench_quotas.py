"""What client quotas cost a request: in-process, the code the worker runs per
request with no quota configured, with quotas configured for other clients,
and for a quota'd client (a shared-table record); end to end, produce
throughput and broker CPU with no quota, a quota for another client, and a
quota (never reached) for the producing client, same run.

Run:  .venv/bin/python perf/bench_quotas.py [--end-to-end] [--records 200000]

In-process (no broker): a real ``MetadataCache`` over an
``EmbeddedMetadataStore`` on a real shared partition table (so the metadata
generation read is the shared-memory one) and a real ``QuotaTable``. "no
quota" is what ``worker.handle_request`` adds: ``broker.metadata()`` and
``QuotaManager.quotas`` (None). "another client's quota" adds the cached
resolution that finds none; "quota'd client" a record into the shared table
(two ``lockf`` calls, the bucket and Kafka's Rate over 12 samples).

End to end (``--end-to-end``): one broker started once; a confluent-kafka
producer (client id ``bench``) sends ``--records`` // 10 100-byte records
with linger.ms=0 (many small requests: the per-request cost shows), first
with no quota, then with ``producer_byte_rate`` set for another client id,
then for ``bench`` itself (1 GB/s: recorded, never throttled); records/s and
the broker's CPU per 10^5 records.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from kafkapy.metadata.embedded import EmbeddedMetadataStore  # noqa: E402
from kafkapy.metadata.model import client_entity  # noqa: E402
from kafkapy.server.config import BrokerConfig  # noqa: E402
from kafkapy.server.metadata_cache import MetadataCache  # noqa: E402
from kafkapy.server.quotas.manager import PRODUCE, QuotaManager  # noqa: E402
from kafkapy.server.quotas.table import QuotaTable  # noqa: E402
from kafkapy.storage.shared import SharedPartitionTable  # noqa: E402


def in_process() -> list:
    work = tempfile.mkdtemp(prefix="bench-quotas-")
    config = BrokerConfig.from_props({"log.dirs": work}, warn_unknown=False)
    table = SharedPartitionTable(capacity=64, lock_path=os.path.join(work, "locks"))
    store = EmbeddedMetadataStore(work, table)
    store.update(lambda md: None)  # a running broker's generation counter exists
    cache = MetadataCache(config, store, 0)
    manager = QuotaManager(config, QuotaTable(11, 1024))

    def added():  # worker.handle_request's lines
        quotas = manager.quotas(cache.metadata()) if manager is not None else None
        return quotas

    def other_client():
        quotas = manager.quotas(cache.metadata())
        return manager.record(quotas, PRODUCE, "ANONYMOUS", "unlimited", 1000)

    def quotad_client():
        quotas = manager.quotas(cache.metadata())
        return manager.record(quotas, PRODUCE, "ANONYMOUS", "bench", 1000)

    rows = [("no quota configured", _per_call_us(added, 200_000))]
    store.alter_entity_configs(client_entity("bench"), {"producer_byte_rate": "1000000000"})
    rows.append(("quotas configured, not for this client", _per_call_us(other_client, 100_000)))
    rows.append(("quota'd client (shared-table record)", _per_call_us(quotad_client, 20_000)))
    return rows


def _per_call_us(fn, n: int) -> float:
    return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6


def end_to_end(records: int) -> list:
    import confluent_kafka
    import confluent_kafka.admin

    from support.quotas import alter
    from support.broker import BrokerProcess

    # The broker is its process group's leader: its tree is the group.
    from _brokers import timed_produce

    rows = []
    with tempfile.TemporaryDirectory() as work:
        broker = BrokerProcess(Path(work)).start()
        try:
            admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
            for f in admin.create_topics([confluent_kafka.admin.NewTopic("bench", 1, 1)]).values():
                f.result(30)
            count = records // 10
            for label, client in (("no quota", None), ("another client's quota", "other"),
                                  ("quota'd client (never reached)", "bench")):
                if client is not None:
                    alter(broker.bootstrap, {"client-id": client}, {"producer_byte_rate": 1e9})
                producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "bench",
                                                     "linger.ms": 0, "acks": 1,
                                                     "queue.buffering.max.messages": 1000000})
                elapsed, cpu = timed_produce(producer, "bench", b"x" * 100, count, broker.pgid)
                rows.append((f"{label}, 100 B, linger 0", count / elapsed, cpu / count * 1e5))
        finally:
            broker.stop()
            broker.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--end-to-end", action="store_true")
    parser.add_argument("--records", type=int, default=200000)
    args = parser.parse_args()
    print("in-process (microseconds per request):")
    for what, us in in_process():
        print(f"  {what:<45} {us:10.2f}")
    if args.end_to_end:
        print("end to end, acks=1 (records/s, broker CPU s per 10^5 records):")
        for what, rate, cpu in end_to_end(args.records):
            print(f"  {what:<45} {rate:12.0f} {cpu:8.3f}")


if __name__ == "__main__":
    main()
