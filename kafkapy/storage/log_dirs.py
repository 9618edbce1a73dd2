"""Which log dirs are offline (Kafka's LogDirFailureChannel and LogManager's
live log dirs).

An I/O error on a log dir (an append, a roll, a flush, an index or snapshot
write, a checkpoint) takes the whole dir offline in this broker, as Kafka
3.9 does: its partitions stop being served (KAFKA_STORAGE_ERROR, 56), the
broker keeps serving the partitions of its other dirs, and the dir stays
offline until the broker restarts (Kafka never brings a failed dir back
while running). ENOSPC is such an I/O error: a full disk is a failed dir.
With every dir offline the broker stops (the supervisor's watch loop).

State and ownership: the offline set is one word of the shared partition
table, the named counter ``offline_log_dirs`` (bit i: ``log.dirs[i]``), so
every process of the broker (supervisor, handler workers, the group
coordinator, replica fetchers, the controller child) sees a failure found
by any of them with one shared-memory read. Bits are only ever set, under
the table lock, by whichever process met the error (``mark_offline``); the
same call bumps the metadata generation counter, so every process's
``ReplicaManager`` re-reads its partitions on its next request and lets go
of those in the dir (``ReplicaManager.update_metadata``). Without a table
(tools, unit tests) the set is this object's own.

The word has 63 usable bits, so at most 63 log dirs are tracked; a broker
with more refuses to start (``ValueError``).
"""

from __future__ import annotations

import logging
import os

from kafkapy.storage.errors import KafkaStorageError

log = logging.getLogger("kafkapy.storage")

OFFLINE_LOG_DIRS = "offline_log_dirs"
MAX_LOG_DIRS = 63


class LogDirFailureChannel:
    def __init__(self, log_dirs, table=None, generation_counter: str | None = None):
        """``table``: the broker's SharedPartitionTable (None: a per-object
        set); ``generation_counter``: the table counter to bump when a dir
        goes offline (the metadata generation every process follows)."""
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        if len(self.log_dirs) > MAX_LOG_DIRS:
            raise ValueError(f"at most {MAX_LOG_DIRS} log.dirs are supported, got {len(self.log_dirs)}")
        self._bit = {d: 1 << i for i, d in enumerate(self.log_dirs)}
        self._table = table
        self._generation_counter = generation_counter
        self._local_mask = 0

    # -- reading (any process, no lock: one aligned word) -------------------------------
    def offline_mask(self) -> int:
        if self._table is None:
            return self._local_mask
        return self._table.counter(OFFLINE_LOG_DIRS)

    def is_offline(self, log_dir: str) -> bool:
        """``log_dir``: one of ``log.dirs`` (absolute)."""
        return bool(self.offline_mask() & self._bit.get(log_dir, 0))

    def offline_dirs(self) -> list[str]:
        mask = self.offline_mask()
        return [d for d in self.log_dirs if mask & self._bit[d]]

    def live_dirs(self) -> list[str]:
        mask = self.offline_mask()
        return [d for d in self.log_dirs if not mask & self._bit[d]]

    def all_offline(self) -> bool:
        return not self.live_dirs()

    def check_online(self, partition_dir: str) -> None:
        """KafkaStorageError if the partition directory lies in an offline dir."""
        parent = os.path.dirname(os.path.abspath(partition_dir))
        if self.is_offline(parent):
            raise KafkaStorageError(f"log dir {parent} is offline", parent)

    # -- failing ---------------------------------------------------------------------
    def mark_offline(self, log_dir: str, message: str = "") -> bool:
        """Take ``log_dir`` offline for every process; True if this call did
        (it was online). A dir that is not one of ``log.dirs`` is ignored."""
        bit = self._bit.get(log_dir)
        if bit is None:
            return False
        table = self._table
        if table is None:
            if self._local_mask & bit:
                return False
            self._local_mask |= bit
        else:
            with table.lock_all():  # re-entrant: increment takes it again
                if table.counter(OFFLINE_LOG_DIRS) & bit:
                    return False
                table.increment(OFFLINE_LOG_DIRS, bit)
                if self._generation_counter:
                    table.increment(self._generation_counter)
        log.error("%s", message or f"I/O error in log dir {log_dir}")
        log.warning("Stopping serving replicas in dir %s: it is offline until the broker restarts%s", log_dir,
                    "" if self.live_dirs() else " (no log dir is left: the broker stops)")
        return True

    def io_error(self, partition_dir: str, exc: OSError, what: str) -> KafkaStorageError:
        """Kafka's maybeHandleIOException: an OSError met while ``what`` (e.g.
        "appending to foo-0") in ``partition_dir`` takes its log dir offline;
        returns the KafkaStorageError to raise or answer."""
        parent = os.path.dirname(os.path.abspath(partition_dir))
        message = f"Error while {what} in dir {parent}: {exc}"
        self.mark_offline(parent, message)
        return KafkaStorageError(message, parent)
