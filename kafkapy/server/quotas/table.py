"""The broker's quota accounting, shared by every handler worker.

Kafka keeps one ``Sensor`` per quota entity and quota type in the broker's
one JVM; kafkapy's requests of one client are handled by any of
``num.io.threads`` worker processes (and a client's connections may sit on
several processors), so the sensors live where every worker sees them: a
``memfd`` mapped ``MAP_SHARED`` by the supervisor's ``Broker`` before it
forks (``QuotaTable.for_config``; children inherit the mapping), as the fetch
session table does. No process owns it; recording is one short critical
section under byte 0's ``lockf`` lock (released by the kernel if a worker
dies) plus a thread lock (a worker's kazoo threads never record).

A sensor is Kafka 3.9's ``Rate`` over a ``SampledStat``: ``samples`` windows
of ``window_ms`` each (``quota.window.num`` x ``quota.window.size.seconds``;
the controller mutation quota has its own pair) plus one slot for a window
overlapping the monitored span. A record adds to the current window, or
starts the next one when the current is ``window_ms`` old; a window whose
last event is ``samples x window_ms`` old is reset; the rate is the sum over
the time since the oldest window began, counted as at least ``samples - 1``
full windows (``Rate.windowSize``), so a new client's first burst is
measured over ~10 s.

Throttling is decided by the sensor's token bucket, Kafka's ``TokenBucket``
(KIP-599, which Kafka 3.9 uses for the controller mutation quota): it holds
up to ``(samples - 1) x window`` seconds of quota (a new client's burst, as
the Rate's padding allows), refills at the quota, a record takes its value
out, and a negative balance is throttled for ``-tokens / quota`` seconds.
Kafka 3.9 throttles byte and request quotas from the Rate instead
(``(rate - quota) / quota x window``); measured here with a saturating
producer at 1 MB/s that lets the client in as bursts of ~10 MB every ~12 s
(when the window holding the previous burst expires), so 10 s windows saw
1.1 or 0.13 MB/s; with the bucket every 10 s window after the first burst
sees the quota (docs/architecture.md, "Quotas and connection limits"). The
Rate is still kept: it is what the byte-rate metrics report.

Slots: a sensor is found by a 128-bit digest of its key (quota type, user
tag, client-id tag: Kafka's metric tags) with linear probing over
``capacity`` slots; a slot whose newest window has expired is free for
reuse, as Kafka expires inactive sensors. If no slot is found within the
probe bound the record is not throttled (logged once).

Layout of a slot (8-byte words): digest (2), current window index, last
record time, throttle time total and count (the throttle-time metric), then
per window its start time (int64, -1: unused), its last event's time and
its sum (float64).
"""

from __future__ import annotations

import hashlib
import logging
import struct

from kafkapy.server.quotas.shm import SharedWords

log = logging.getLogger("kafkapy.quotas")

DEFAULT_CAPACITY = 4096
MAX_SAMPLES = 64
_PROBES = 64
_HEADER_WORDS = 8
_D0, _D1, _CURRENT, _LAST, _THROTTLE_SUM, _THROTTLE_COUNT, _TOKENS, _TOKENS_AT = range(_HEADER_WORDS)
_DIGEST = struct.Struct("=qq")
_SAMPLE = 3  # start, last event, sum


def sensor_key(quota_type: str, user_tag: str, client_tag: str) -> tuple:
    """The digest words of a sensor (never 0, 0: an empty slot)."""
    d0, d1 = _DIGEST.unpack(hashlib.blake2b(
        f"{quota_type}\0{user_tag}\0{client_tag}".encode("utf-8", "surrogatepass"), digest_size=16).digest())
    return (d0 or 1), d1


class QuotaTable:
    """Shared sensors (module docstring). Owned by nobody; every process records."""

    _inherited: "QuotaTable | None" = None

    @classmethod
    def for_config(cls, config) -> "QuotaTable":
        """The process tree's table: the first call (the supervisor's Broker,
        before it forks) creates it; later calls return the same one."""
        if cls._inherited is None:
            cls._inherited = cls(max(config["quota.window.num"], config["controller.quota.window.num"]))
        return cls._inherited

    def __init__(self, samples: int, capacity: int = DEFAULT_CAPACITY):
        self.samples = max(1, min(MAX_SAMPLES, samples))
        self.capacity = capacity
        self.slot_words = _HEADER_WORDS + _SAMPLE * (self.samples + 1)
        self._shared = SharedWords("kafkapy-quotas", capacity * self.slot_words)
        self._q = self._shared.q
        self._d = self._shared.d
        self._acquire = self._shared.acquire
        self._release = self._shared.release
        self._warned = False

    # -- slots ---------------------------------------------------------------------
    def _find(self, key: tuple, now_ms: int, expire_ms: int, create: bool) -> int:
        """The slot's first word, or -1. Under the lock."""
        q = self._q
        d0, d1 = key
        start = (d1 & 0x7FFFFFFFFFFFFFFF) % self.capacity
        free = -1
        for i in range(min(_PROBES, self.capacity)):
            base = ((start + i) % self.capacity) * self.slot_words
            w0 = q[base + _D0]
            if w0 == d0 and q[base + _D1] == d1:
                return base
            if free < 0 and (w0 == 0 or now_ms - q[base + _LAST] >= expire_ms):
                free = base
            if w0 == 0:
                break  # never used: the key is not further on
        if not create or free < 0:
            if create and not self._warned:
                self._warned = True
                log.warning("quota table full (%d sensors): some clients are not throttled", self.capacity)
            return -1
        q[free + _D0], q[free + _D1] = d0, d1
        q[free + _CURRENT] = 0
        q[free + _LAST] = now_ms
        q[free + _THROTTLE_SUM] = q[free + _THROTTLE_COUNT] = 0
        q[free + _TOKENS_AT] = -1  # a full bucket
        for s in range(self.samples + 1):
            at = free + _HEADER_WORDS + _SAMPLE * s
            q[at] = q[at + 1] = -1
            self._d[at + 2] = 0.0
        q[free + _HEADER_WORDS] = q[free + _HEADER_WORDS + 1] = now_ms
        return free

    def _rate(self, base: int, now_ms: int, samples: int, window_ms: int) -> tuple:
        """(rate per second, window size in ms) of a slot (Kafka's Rate.measure and
        windowSize); obsolete windows are reset on the way (purgeObsoleteSamples:
        by their last event, so a window overlapping the monitored span counts)."""
        q, d = self._q, self._d
        expire = samples * window_ms
        total = 0.0
        oldest = now_ms
        for s in range(samples + 1):
            at = base + _HEADER_WORDS + _SAMPLE * s
            started = q[at]
            if started < 0:
                continue
            if now_ms - q[at + 1] >= expire:
                q[at] = q[at + 1] = now_ms
                d[at + 2] = 0.0
            else:
                total += d[at + 2]
            if q[at] < oldest:
                oldest = q[at]
        elapsed = now_ms - oldest
        full = elapsed // window_ms
        if full < samples - 1:
            elapsed += (samples - 1 - full) * window_ms
        elapsed = max(elapsed, 1)
        return total * 1000.0 / elapsed, elapsed

    # -- recording -------------------------------------------------------------------
    def record(self, key: tuple, value: float, now_ms: int, bound: float | None, samples: int,
               window_ms: int) -> tuple:
        """Add ``value`` to the sensor ``key`` (``sensor_key``) at ``now_ms``; returns
        ``(rate, throttle_ms)``: Kafka's QuotaUtils.throttleTime when the rate is
        above ``bound`` (None: no check), else 0."""
        samples = max(1, min(samples, self.samples))
        q, d = self._q, self._d
        self._acquire()
        try:
            base = self._find(key, now_ms, samples * window_ms, True)
            if base < 0:
                return 0.0, 0
            current = q[base + _CURRENT]
            if current > samples:
                current = 0
            at = base + _HEADER_WORDS + _SAMPLE * current
            if q[at] < 0 or now_ms >= q[at] + window_ms:
                current = (current + 1) % (samples + 1)
                at = base + _HEADER_WORDS + _SAMPLE * current
                q[at] = now_ms
                d[at + 2] = 0.0
                q[base + _CURRENT] = current
            d[at + 2] += value
            q[at + 1] = now_ms
            q[base + _LAST] = now_ms
            rate, _window = self._rate(base, now_ms, samples, window_ms)
            throttle = 0
            if bound is not None:
                # Kafka's TokenBucket: burst = (samples - 1) windows of quota
                burst = (samples - 1) * window_ms / 1000.0 * bound
                at = q[base + _TOKENS_AT]
                tokens = burst if at < 0 else min(burst, d[base + _TOKENS] + bound * (now_ms - at) / 1000.0)
                tokens = min(burst, tokens - value)
                d[base + _TOKENS] = tokens
                q[base + _TOKENS_AT] = now_ms
                if tokens < 0:
                    throttle = int(round(-tokens / bound * 1000.0)) if bound > 0 else window_ms * samples
            return rate, throttle
        finally:
            self._release()

    def throttled(self, key: tuple, throttle_ms: int) -> None:
        """Count a throttle of the sensor (the throttle-time metric's sum and count)."""
        q = self._q
        self._acquire()
        try:
            base = self._find(key, 0, 1 << 62, False)
            if base >= 0:
                q[base + _THROTTLE_SUM] += throttle_ms
                q[base + _THROTTLE_COUNT] += 1
        finally:
            self._release()

    def rate(self, key: tuple, now_ms: int, samples: int, window_ms: int) -> float:
        """The sensor's rate now (0.0 if it has none)."""
        self._acquire()
        try:
            base = self._find(key, now_ms, 1 << 62, False)
            return self._rate(base, now_ms, max(1, min(samples, self.samples)), window_ms)[0] if base >= 0 else 0.0
        finally:
            self._release()
