"""LeaderEpochFileCache: a partition's leader epochs and the file that keeps them.

Job (Kafka's ``LeaderEpochFileCache``): which offset each leader epoch of
the partition started at, as (epoch, start_offset) entries in increasing
order of both; ``assign`` records a new epoch, ``truncate`` drops the
entries a truncation or a new log start left outside the log, and
``end_offset_for`` answers OffsetsForLeaderEpoch.

File format: ``<partition dir>/leader-epoch-checkpoint``, Kafka's text
checkpoint (``0``, the entry count, then ``<epoch> <start_offset>`` lines;
``storage.checkpoints``), written whole to ``.tmp`` and renamed over. A
write is fsynced with its directory unless the caller asks otherwise:
``assign`` on the append path does not (the rename is atomic against a
process crash), and ``Log.flush`` makes the file durable with the data it
describes (``flush``).

Ownership: the file is shared by every process that opens the partition;
an object of this class belongs to one ``Log`` in one process and keeps a
copy of the entries (``_entries``, None until read) that another process
may have made stale, so callers drop it (``invalidate``) where another
process may have written the file. The slot's ``PartitionState.leader_epoch``
mirrors the file's latest epoch and is written only here (``write``), so an
append knows the file is current without reading it. Not thread-safe:
every method is called with the partition lock held.
"""

import os

from kafkapy.storage import checkpoints


class LeaderEpochFileCache:
    """The leader epochs of the partition at ``dir_path``; ``state`` is its
    slot (``PartitionState``), ``fsync`` the log's (anything but ``os.fsync``
    skips every fsync, as for the log's other files)."""

    def __init__(self, dir_path: str, state, fsync=os.fsync):
        self.path = os.path.join(dir_path, checkpoints.LEADER_EPOCH_CHECKPOINT)
        self._state = state
        self._fsync = fsync
        self._entries: list[tuple[int, int]] | None = None

    def invalidate(self) -> None:
        """Forget the cached entries: another process may have written the file."""
        self._entries = None

    def entries(self) -> list[tuple[int, int]]:
        """The cached entries (read from the file if not cached); do not change the list."""
        if self._entries is None:
            self._entries = checkpoints.read_leader_epoch_checkpoint(self.path)
        return self._entries

    def write(self, entries: list[tuple[int, int]], durable: bool = True) -> None:
        checkpoints.write_leader_epoch_checkpoint(self.path, entries,
                                                  fsync=durable and self._fsync is os.fsync)
        self._entries = list(entries)
        # The slot mirrors the file's latest epoch (written only here, under
        # the lock), so an append need not read the file to know it is current.
        self._state.leader_epoch = entries[-1][0] if entries else -1

    @staticmethod
    def trimmed(entries, log_start_offset: int, log_end_offset: int) -> list[tuple[int, int]]:
        """Kafka's truncateFromEnd(LEO) then truncateFromStart(log start): entries starting at or
        past the end go; entries wholly before the start go, the last of them moved up to it."""
        kept = [(e, o) for e, o in entries if o < log_end_offset]
        first_after = 0
        while first_after < len(kept) and kept[first_after][1] <= log_start_offset:
            first_after += 1
        if first_after > 0:
            epoch, _ = kept[first_after - 1]
            kept = [(epoch, log_start_offset)] + kept[first_after:]
        return kept

    def truncate(self, log_start_offset: int, log_end_offset: int) -> list[tuple[int, int]]:
        """Keep only the entries inside [log_start_offset, log_end_offset)
        (``trimmed``), rewriting the file if that changed them; returns the entries."""
        entries = self.entries()
        trimmed = self.trimmed(entries, log_start_offset, log_end_offset)
        if trimmed != entries:
            self.write(trimmed)
        return trimmed

    def clear(self) -> None:
        """No epochs (Kafka's clearAndFlush: a log truncated fully)."""
        self.write([])

    def assign(self, leader_epoch: int, start_offset: int) -> None:
        """Kafka's assign: ``leader_epoch`` starts at ``start_offset``, unless
        the latest epoch is already that one or later."""
        if leader_epoch < 0 or self._state.leader_epoch >= leader_epoch:
            # The common case: saves every worker a read of the checkpoint on
            # its first append to each partition (~15 us x 10,000 partitions).
            return
        entries = self.entries()
        if entries and entries[-1][0] >= leader_epoch:
            return
        # Another process may have written the file since we cached it.
        self._entries = None
        entries = self.entries()
        if entries and entries[-1][0] >= leader_epoch:
            return
        # Not fsynced here: two fsyncs on the first append to every partition
        # made producing to 1,000 new partitions 20x slower than to one
        # (Kafka moved this off the append path too, KAFKA-15046). The rename
        # is atomic against a process crash; flush() makes it durable along
        # with the data it describes.
        self.write(entries + [(leader_epoch, start_offset)], durable=False)

    def epoch_entries(self) -> list[tuple[int, int]]:
        """The entries as the file holds them now (a copy)."""
        self._entries = None
        return list(self.entries())

    def latest_epoch(self) -> int:
        entries = self.epoch_entries()
        return entries[-1][0] if entries else -1

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch <= ``epoch``, its end offset), or (-1, -1);
        the latest epoch ends at ``log_end_offset``."""
        entries = self.epoch_entries()
        for i in range(len(entries) - 1, -1, -1):
            e, _ = entries[i]
            if e <= epoch:
                end = entries[i + 1][1] if i + 1 < len(entries) else log_end_offset
                return e, end
        return -1, -1

    def flush(self) -> None:
        """fsync the file (``assign`` left it to the log's flush)."""
        checkpoints.fsync_if_exists(self.path)
