"""The log-cleaner process: Kafka's LogCleaner threads, as one child of the supervisor.

Every ``log.cleaner.backoff.ms`` it runs a cleaner pass
(``storage.cleaner.clean_logs``: the due ``cleanup.policy=compact`` logs,
dirtiest first) over the compacted logs this broker hosts, leader or
follower replicas alike, as Kafka's cleaner does. A pass reads and writes
without the partitions' locks and takes each only to decide and to swap
(docs/architecture.md, "The log cleaner"), so a long pass holds up no
producer and, in its own process, none of the supervisor's work (retention,
flushes, checkpoints, the metrics endpoint, watching the children) nor the
group coordinator's, whose ``__consumer_offsets`` it cleans too (the
coordinator appends to the active segment; a pass rewrites only inactive
ones, and the coordinator's process reloads the list on the bumped
generation).

Single-threaded, with its own ``Broker`` view as a worker's, whose effective
config (dynamic keys included) gives each pass its settings. The supervisor's
stop (``child_signals``) gives up the pass in progress between two groups (a
group is swapped whole or not at all) and exits 0; a SIGKILL at any point
leaves the log as the swap's commit point says (the LogLoader completes a
committed swap at load).
"""

from __future__ import annotations

import logging
import time

from kafkapy.metrics import probes
from kafkapy.server import child_signals
from kafkapy.storage.cleaner import CleanerConfig, Throttler, clean_logs

log = logging.getLogger("kafkapy.cleaner")

# How often a waiting cleaner looks whether it was told to stop.
_STOP_POLL_S = 0.1


def compacted_logs(broker) -> list:
    """The logs of compacted topics this broker hosts (internal ones too)."""
    broker.replica_manager.sync_partitions()
    return [lg for lg in list(broker.log_manager.logs.values()) if "compact" in lg.config.cleanup_policy]


def cleaner_main(broker_factory) -> None:
    stopping = False

    def on_term(*_):
        nonlocal stopping
        stopping = True

    child_signals.on_stop(on_term)
    broker = broker_factory(-1)
    # The cleaner's settings are read from the effective broker config (its
    # dynamic layers included) where they are used, so an AlterConfigs of a
    # log.cleaner.* key applies from the next pass, the I/O rate and the
    # back-off even to the one in progress (Kafka reconfigures its LogCleaner).
    throttler = Throttler(lambda: broker.config["log.cleaner.io.max.bytes.per.second"])
    try:
        while not stopping:
            waited_from = time.monotonic()
            # Bounded by log.cleaner.backoff.ms, read again at each look.
            while not stopping and time.monotonic() < waited_from + broker.config["log.cleaner.backoff.ms"] / 1000:
                time.sleep(_STOP_POLL_S)
            if stopping:
                break
            try:
                clean_logs(compacted_logs(broker), int(time.time() * 1000), CleanerConfig.from_broker(broker.config),
                           should_stop=lambda: stopping, throttler=throttler)
            except Exception:
                log.exception("log cleaning failed")
            probes.publish()
    finally:
        broker.close()
