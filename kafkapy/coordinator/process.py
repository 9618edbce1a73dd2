"""The group-coordinator process: owns every consumer group's state.

Group APIs (``owner="coordinator"`` in the API table) are routed by the
processors to ``channel.coordinator_requests`` instead of the shared queue, so
exactly one process holds group state in memory and can park JoinGroup /
SyncGroup responses until the rebalance completes.
"""

from __future__ import annotations

import logging
import queue
import signal

log = logging.getLogger("kafkapy.coordinator")


def coordinator_main(broker_factory, channel, config) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stopped via the queue
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    broker = broker_factory(-1)
    requests = channel.coordinator_requests
    while True:
        try:
            desc = requests.get(1.0)
        except queue.Empty:
            continue
        if desc is None:
            break
        # No group API is advertised yet: nothing can arrive here.
        log.error("coordinator got a request but serves no API yet; closing the connection")
        from kafkapy.server.reactor.channel import CLOSE

        channel.response_pipes[desc[0]].send((desc[1], CLOSE, None))
    broker.close()
