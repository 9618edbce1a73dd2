"""The transaction coordinator's own cost per commit, in-process (issue 11):
the coordinator over a real standalone Broker object (metadata store,
replica manager, logs in a temporary dir; no processes, sockets or clients),
timing AddPartitionsToTxn, EndTxn to its answer and to the end of its markers
and CompleteCommit, each ``__transaction_state`` append and the local marker
append, over ``--commits`` one-partition transactions of one record.

What is left of a commit's broker share in perf/bench_transactions.py is the
request path around these calls. Run:
``.venv/bin/python perf/txn_phases.py [--commits N] [--records N --size B]``
(one-record transactions by default: their small batches make the
catch-up's header walk from the offset index longer than 100 KB batches do).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kafkapy._core.records_py import build_batch
from kafkapy.coordinator.transaction.coordinator import TransactionCoordinatorState
from kafkapy.coordinator.transaction.marker_channel import LocalMarkerWriter, TransactionMarkerChannel
from kafkapy.coordinator.transaction.state_store import TransactionStateStore
from kafkapy.coordinator.transaction.transaction_coordinator import TransactionCoordinator, txn_config
from kafkapy.server import config as c
from kafkapy.server.broker import Broker
from kafkapy.server.config import BrokerConfig
from kafkapy.storage.log_manager import LogManager
from kafkapy.storage.shared import SharedPartitionTable


def _us(values) -> str:
    return f"{statistics.median(values) * 1e6:.0f} us"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=300)
    ap.add_argument("--records", type=int, default=1,
                    help="records of --size bytes in each transaction's one batch (the benchmark's: 1000 x 100)")
    ap.add_argument("--size", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        tmp = Path(work)
        config = BrokerConfig.from_props({
            "log.dirs": str(tmp / "logs"), "listeners": "PLAINTEXT://127.0.0.1:9092", "broker.id": "0",
            "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "5"})
        table = SharedPartitionTable(capacity=64, lock_path=str(tmp / "locks"))
        broker = Broker(config, table, LogManager(config.log_dirs, c.log_config_for(config, {}), 0))
        try:
            clock = lambda: int(time.time() * 1000)  # noqa: E731
            state = TransactionCoordinatorState(txn_config(config), broker.producer_id_manager.generate_producer_id,
                                                clock)
            store = TransactionStateStore(broker, config)
            channel = TransactionMarkerChannel(LocalMarkerWriter(broker))
            txn = TransactionCoordinator(state, store, channel)
            assert store.ensure() == 0
            for p in range(5):
                txn.load(p, 0)
            broker.admin.create_topic("out", 1, {})
            answers = []
            txn.init_producer_id("t1", 60000, -1, -1, answers.append)
            pid = answers[0].producer_id
            persists, markers = {}, []
            persist, send = store.persist, channel.send

            def timed_persist(p):
                t = time.perf_counter()
                try:
                    return persist(p)
                finally:
                    persists.setdefault(p.kind, []).append(time.perf_counter() - t)

            def timed_send(m):
                t = time.perf_counter()
                try:
                    return send(m)
                finally:
                    markers.append(time.perf_counter() - t)

            store.persist, channel.send = timed_persist, timed_send
            log = broker.replica_manager.get_partition("out", 0).log
            add, answered, whole = [], [], []
            records = [(b"k", b"v" * args.size, [], 1)] * args.records
            for seq in range(args.commits):
                t = time.perf_counter()
                txn.add_partitions("t1", pid, 0, [("out", 0)], lambda a: None)
                add.append(time.perf_counter() - t)
                with log.lock():  # the transaction's record, as a produce would leave it
                    data = build_batch(records, producer_id=pid, producer_epoch=0, base_sequence=seq * args.records,
                                       is_transactional=True, base_offset=log.log_end_offset)
                    log.append_as_follower(memoryview(bytearray(data)))
                    log.update_high_watermark(log.log_end_offset)
                got = []
                t = time.perf_counter()
                txn.end_txn("t1", pid, 0, True, lambda a: got.append(time.perf_counter()))
                answered.append(got[0] - t)
                whole.append(time.perf_counter() - t)
            print(f"{args.commits} commits of {args.records} x {args.size} B, medians:")
            print(f"AddPartitionsToTxn {_us(add)}; EndTxn to its answer {_us(answered)}, "
                  f"with markers and CompleteCommit {_us(whole)}")
            for kind, values in persists.items():
                print(f"  __transaction_state append ({kind}): {_us(values)}")
            print(f"  local marker (acks=-1): {_us(markers)}")
        finally:
            broker.close()
            table.close()


if __name__ == "__main__":
    main()
