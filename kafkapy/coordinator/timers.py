"""A timer heap for the single-threaded coordinator loop (Kafka's purgatory timers).

Owned by the coordinator process's thread; never shared. The loop asks
``next_deadline_ms()`` and uses it as its queue timeout, then ``run_due``.
Cancelling marks an entry dead instead of re-heapifying (O(1)); dead entries
fall out when they come due.
"""

from __future__ import annotations

import heapq
import itertools


class Timer:
    __slots__ = ("deadline_ms", "fn", "cancelled", "initial")

    def __init__(self, deadline_ms: int, fn):
        self.deadline_ms = deadline_ms
        self.fn = fn
        self.cancelled = False
        self.initial = False  # a group's InitialDelayedJoin (never completes early)

    def cancel(self) -> None:
        self.cancelled = True


class Timers:
    def __init__(self):
        self._heap: list = []
        self._seq = itertools.count()

    def schedule(self, deadline_ms: int, fn) -> Timer:
        timer = Timer(deadline_ms, fn)
        heapq.heappush(self._heap, (deadline_ms, next(self._seq), timer))
        return timer

    def next_deadline_ms(self) -> int | None:
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def run_due(self, now_ms: int, limit: int = 10_000) -> int:
        """Run timers due at ``now_ms`` (at most ``limit``, so a storm of
        expiries cannot starve request handling); returns how many ran."""
        ran = 0
        heap = self._heap
        while heap and heap[0][0] <= now_ms and ran < limit:
            _, _, timer = heapq.heappop(heap)
            if timer.cancelled:
                continue
            timer.cancelled = True
            timer.fn()
            ran += 1
        return ran

    def __len__(self) -> int:
        return sum(1 for _, _, t in self._heap if not t.cancelled)
