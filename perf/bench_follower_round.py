"""One replication round in-process: the leader's follower Fetch handler and
the replica fetcher's receive-decode-append, without sockets or processes.

Run:  .venv/bin/python perf/bench_follower_round.py [--rounds 300] [--batch-kib 224]
      [--partitions 1] [--profile]

A leader and a follower ``Partition`` on one shared table (as in
tests/unit/server/test_replica_fetcher_loop.py); the fetcher is the real
``ReplicaFetcher`` whose leader endpoint calls the leader's Fetch handler,
encodes the answer with the codec, reads the file regions the processor
would sendfile into one frame and decodes it with the client's decoder, as
``Connection._dispatch`` does. Each round appends one batch of
``--batch-kib`` 1 KiB records per partition to the leader (an acks=1
produce, not timed) and runs one fetcher round (fetch, append, and the next
fetch's high watermark). Prints microseconds per round for the fetcher side
(request build and encode, answer decode, append; ``--codec``: through the
generic codec as before replication.fetch_wire) and the leader side (request
decode, handler, answer encode), and
with ``--profile`` the cProfile of the whole round. Under callgrind
(``valgrind --tool=callgrind``) the instruction counts of two ``--rounds``
give the per-round cost independent of the machine's load.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from support.storage import make_batch, open_log, records_of  # noqa: E402

from kafkapy.client._schema import build  # noqa: E402
from kafkapy.metadata.model import BrokerInfo, EndPoint, Metadata, PartitionState, TopicInfo  # noqa: E402
from kafkapy.protocol.api import API_TABLE  # noqa: E402
from kafkapy.protocol.codec import Parts, decode, encode  # noqa: E402
from kafkapy.replication import fetch_wire  # noqa: E402
from kafkapy.replication.partition import Partition  # noqa: E402
from kafkapy.server.config import BrokerConfig  # noqa: E402
from kafkapy.server.fetch_session import FetchSessionCache  # noqa: E402
from kafkapy.server.handlers import RequestContext  # noqa: E402
from kafkapy.server.handlers import fetch as fetch_handler  # noqa: E402
from kafkapy.server.replica_fetcher import ReplicaFetcher  # noqa: E402
from kafkapy.storage.shared import SharedPartitionTable  # noqa: E402

LEADER, FOLLOWER = 0, 1


class Timer:
    def __init__(self):
        self.leader_s = 0.0


class ReplicaManager:
    def __init__(self, partitions):
        self.partitions = partitions

    def get_partition(self, topic, index):
        return self.partitions.get((topic, index))

    def wake_delayed_operations(self, slots=None, high_watermark_only=False):
        pass


def _materialize(parts) -> bytearray:
    out = bytearray()
    for part in parts:
        if isinstance(part, (bytes, bytearray, memoryview)):
            out += part
        else:  # a FileRegion: what the processor would sendfile
            with open(part.path, "rb") as f:
                f.seek(part.position)
                out += f.read(part.length)
    return out


class Leader:
    """The fetcher's LeaderEndPoint, answered by the leader's handler in-process."""

    def __init__(self, env, leader_id, address, client_id, broker_id, timeout_ms):
        self.env = env
        self.leader_id = leader_id
        self.fetch_sessions = FetchSessionCache(64, 120_000)
        self.decoder = API_TABLE[1].response_class(12)

    def send_fetch(self, values, callback):
        # The fetcher's side: the request's bytes (LeaderEndPoint.send_fetch).
        request_class = API_TABLE[1].request_class(12)
        if self.env.codec:
            out = Parts()
            encode(build(request_class, values), out)
            body = b"".join(bytes(x) for x in out.parts())
        else:
            body = bytes(fetch_wire.encode_fetch_request(values))
        t0 = time.perf_counter()
        # The leader's side: decode the request, handle it, encode the answer.
        request, _ = decode(request_class, body, 0)
        ctx = RequestContext(SimpleNamespace(replica_manager=self.env.leader_rm, fetch_sessions=self.fetch_sessions),
                             1, 12, 1, "f", 0)
        response = fetch_handler.handle(ctx, request)
        out = Parts()
        encode(response, out)
        frame = _materialize(out.parts())  # the socket's bytes (sendfile + recv)
        self.env.timer.leader_s += time.perf_counter() - t0
        # The fetcher's side again: Connection._dispatch's decoder.
        if self.env.codec:
            decoded, _ = decode(self.decoder, frame, 0)
        else:
            decoded = fetch_wire.decode_fetch_response(frame, 0)
        callback(decoded, None)

    def fileno(self):
        return -1

    def close(self):
        pass


def make_env(tmp: str, partitions: int, codec: bool = False):
    table = SharedPartitionTable(capacity=1024, lock_path=os.path.join(tmp, "partitions.lock"))
    topic_id = uuid.UUID(int=7)
    env = SimpleNamespace(timer=Timer(), logs=[], table=table, codec=codec)
    leaders, followers = {}, {}
    for i in range(partitions):
        for name, broker, into in (("leader", LEADER, leaders), ("follower", FOLLOWER, followers)):
            slot = table.allocate()
            lg = open_log(Path(tmp) / f"{name}-{i}", state=table.slot(slot))
            env.logs.append(lg)
            into[("t", i)] = Partition("t", i, topic_id, lg, slot, broker, assume_leader=False)
    env.leader_rm, env.follower_rm = ReplicaManager(leaders), ReplicaManager(followers)
    md = Metadata(cluster_mode=True, brokers={
        b: BrokerInfo(b, "127.0.0.1", 9000 + b, None, (EndPoint("127.0.0.1", 9000 + b, "PLAINTEXT"),))
        for b in (LEADER, FOLLOWER)})
    md.topics["t"] = TopicInfo("t", topic_id, partitions, {}, {
        i: PartitionState((LEADER, FOLLOWER), LEADER, 1, (LEADER, FOLLOWER)) for i in range(partitions)})
    for i in range(partitions):
        leaders[("t", i)].make_leader(1, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
        followers[("t", i)].make_follower(LEADER, 1, (LEADER, FOLLOWER), 0)
    env.broker = SimpleNamespace(broker_id=FOLLOWER, metadata=lambda: md, store=SimpleNamespace(generation=1),
                                 replica_manager=env.follower_rm)
    config = BrokerConfig.from_props({"log.dirs": os.path.join(tmp, "cfg"), "broker.id": FOLLOWER,
                                      "replica.fetch.wait.max.ms": 0})
    env.fetcher = ReplicaFetcher(0, env.broker, config, lambda *a: Leader(env, *a))
    env.leaders, env.followers = leaders, followers
    return env


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--batch-kib", type=int, default=224, help="1 KiB records per partition per round")
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--codec", action="store_true",
                   help="the fetcher's request and answer through the generic codec (as before fetch_wire)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafkapy-follower-round-") as tmp:
        env = make_env(tmp, args.partitions, args.codec)
        batch = records_of(make_batch(args.batch_kib, value_size=1024))
        fetcher = env.fetcher
        for _ in range(3):  # sessions established, caught up
            fetcher.run_once(timeout_s=0)
        # The cyclic collector off for the rounds: a full collection landing
        # in one run and not in another (any change of allocations moves
        # them) shifted callgrind's per-round counts by ~2 %.
        gc.collect()
        gc.disable()
        prof = cProfile.Profile() if args.profile else None
        total = 0.0
        for _ in range(args.rounds):
            for partition in env.leaders.values():
                partition.append_records_to_leader(memoryview(bytearray(batch)), 1)
            t0 = time.perf_counter()
            if prof is not None:
                prof.enable()
            # run_once without its wait: answers come back inside send_fetches
            fetcher.maybe_update_assignment()
            fetcher.send_fetches()
            fetcher.process_answers()
            if prof is not None:
                prof.disable()
            total += time.perf_counter() - t0
        leader_s = env.timer.leader_s
        assert all(f.log_end_offset == env.leaders[k].log_end_offset for k, f in env.followers.items())
        print(f"{args.rounds} rounds of {args.partitions} x {args.batch_kib} KiB: "
              f"fetcher side {1e6 * (total - leader_s) / args.rounds:.1f} us/round, "
              f"leader side {1e6 * leader_s / args.rounds:.1f} us/round (handler, encode, materialize)")
        if prof is not None:
            print("-- whole round (the leader's handler and encode inside send_fetch)")
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        for lg in env.logs:
            lg.close()
        env.table.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
