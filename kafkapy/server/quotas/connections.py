"""Connection limits (Kafka's ConnectionQuotas), shared by the acceptor and the
processors.

The acceptor counts a connection in when it accepts it, the processor that
owns it counts it out when it closes it; the counts live in a ``memfd`` mapped
``MAP_SHARED`` by the supervisor's ``Broker`` before it forks
(``ConnectionQuotas.for_config``), under one ``lockf`` byte (released by the
kernel if a process dies). Kafka's rules:

* ``max.connections.per.ip`` (``max.connections.per.ip.overrides``:
  ``host:count,...``, hosts resolved at start): a connection over its IP's
  limit is closed right after accept (TooManyConnectionsException).
* ``max.connections`` broker-wide and per listener
  (``listener.name.<l>.max.connections``): at the limit the acceptor stops
  accepting on that listener (the kernel's backlog holds new connections)
  until a connection closes; the broker-wide limit does not apply to the
  inter-broker listener (Kafka's protected listener). The time a listener
  spends blocked is Kafka's AcceptorBlockedPercent.
* ``max.connection.creation.rate`` per listener and broker-wide (not for the
  inter-broker listener): each accept is recorded in a rate over
  ``quota.window.num`` x ``quota.window.size.seconds``; over the rate the
  accepted connection waits the throttle time (Kafka's QuotaUtils, bounded by
  one window) before it
  is handed to a processor, and the listener accepts nothing meanwhile.
* ``connection_creation_rate`` of IP entities (``/config/ips/<ip>`` or
  ``<default>``, set with AlterClientQuotas / ``kafkapy-configs
  --entity-type ips``; KIP-612): over its rate a connection from that IP is
  not counted and is closed after its throttle time (Kafka's
  DelayedCloseSocket). Entities named by host name are not resolved here
  (only addresses).

Layout (8-byte words): total count, then per listener (up to
``MAX_LISTENERS``) its count and blocked nanoseconds, then the per-IP table:
``IP_CAPACITY`` slots of (16-byte address, count), linear probing.
"""

from __future__ import annotations

import ipaddress
import logging
import socket

from kafkapy.metadata.model import DEFAULT_ENTITY, ENTITY_IPS, ip_name
from kafkapy.server.quotas.shm import SharedWords
from kafkapy.server.quotas.table import QuotaTable, sensor_key

log = logging.getLogger("kafkapy.network")

MAX_LISTENERS = 16
IP_CAPACITY = 8192
_PROBES = 128
_TOTAL = 0
_LISTENERS = 1  # per listener: count, blocked ns
_IPS = _LISTENERS + 2 * MAX_LISTENERS
_SLOT = 3  # address (2 words), count
INT_MAX = 2**31 - 1


def ip_words(ip: str) -> tuple:
    """An address as two nonzero-keyed words (IPv4 as its v4-mapped IPv6 form)."""
    try:
        addr = ipaddress.ip_address(ip.split("%")[0])
    except ValueError:
        addr = ipaddress.IPv6Address(0)
    if isinstance(addr, ipaddress.IPv4Address):
        addr = ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + addr.packed)
    packed = addr.packed
    hi = int.from_bytes(packed[:8], "big", signed=True)
    lo = int.from_bytes(packed[8:], "big", signed=True)
    return (hi or 1), lo


def normal_ip(ip: str) -> str:
    """An address in one form (an IPv4-mapped IPv6 address as IPv4); ValueError if
    it is not an address."""
    addr = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return str(addr)


def parse_overrides(text: str) -> dict:
    """``max.connections.per.ip.overrides``: ``host:count,...`` -> {ip: count}
    (Kafka resolves host names once, at start)."""
    out = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"Invalid entry in max.connections.per.ip.overrides: {item}")
        try:
            ip = str(ipaddress.ip_address(host.strip("[]")))
        except ValueError:
            ip = socket.gethostbyname(host)
        out[ip] = int(count)
    return out


class ConnectionQuotas:
    """The shared counts (module docstring); the limits are each process's config."""

    _inherited: "ConnectionQuotas | None" = None

    @classmethod
    def for_config(cls, config) -> "ConnectionQuotas":
        if cls._inherited is None:
            cls._inherited = cls()
        return cls._inherited

    def __init__(self):
        self._shared = SharedWords("kafkapy-connections", _IPS + IP_CAPACITY * _SLOT)
        self._q = self._shared.q
        self._acquire = self._shared.acquire
        self._release = self._shared.release

    def _ip_slot(self, key: tuple, create: bool) -> int:
        q = self._q
        hi, lo = key
        start = ((hi ^ lo) & 0x7FFFFFFFFFFFFFFF) % IP_CAPACITY
        free = -1
        for i in range(_PROBES):
            base = _IPS + ((start + i) % IP_CAPACITY) * _SLOT
            if q[base] == hi and q[base + 1] == lo:
                return base
            if free < 0 and q[base + 2] == 0:
                free = base
            if q[base] == 0:
                break
        if create and free >= 0:
            q[free], q[free + 1], q[free + 2] = hi, lo, 0
            return free
        return -1

    # -- the acceptor ------------------------------------------------------------------
    def inc(self, listener: int, ip: str, max_per_ip: int) -> bool:
        """Count a new connection in; False (not counted) when its IP is at its limit."""
        q = self._q
        self._acquire()
        try:
            slot = self._ip_slot(ip_words(ip), True)
            if slot >= 0:
                if q[slot + 2] >= max_per_ip:
                    return False
                q[slot + 2] += 1
            elif max_per_ip < INT_MAX:
                return False  # no room to count it: refuse rather than not enforce
            q[_TOTAL] += 1
            q[_LISTENERS + 2 * listener] += 1
            return True
        finally:
            self._release()

    def slot_available(self, listener: int, max_listener: int, max_broker: int, protected: bool) -> bool:
        """Kafka's connectionSlotAvailable (reads without the lock: one word each)."""
        q = self._q
        return q[_LISTENERS + 2 * listener] < max_listener and (protected or q[_TOTAL] < max_broker)

    def blocked(self, listener: int, ns: int) -> None:
        self._q[_LISTENERS + 2 * listener + 1] += ns  # written by the acceptor alone

    # -- the processors ------------------------------------------------------------------
    def dec(self, listener: int, ip: str) -> None:
        """Count a closed connection out (the processor that owned it)."""
        q = self._q
        self._acquire()
        try:
            slot = self._ip_slot(ip_words(ip), False)
            if slot >= 0 and q[slot + 2] > 0:
                q[slot + 2] -= 1
            if q[_TOTAL] > 0:
                q[_TOTAL] -= 1
            if q[_LISTENERS + 2 * listener] > 0:
                q[_LISTENERS + 2 * listener] -= 1
        finally:
            self._release()

    # -- facts (metrics, tests) -------------------------------------------------------------
    def total(self) -> int:
        return self._q[_TOTAL]

    def listener_count(self, listener: int) -> int:
        return self._q[_LISTENERS + 2 * listener]

    def blocked_ns(self, listener: int) -> int:
        return self._q[_LISTENERS + 2 * listener + 1]

    def ip_count(self, ip: str) -> int:
        self._acquire()
        try:
            slot = self._ip_slot(ip_words(ip), False)
            return self._q[slot + 2] if slot >= 0 else 0
        finally:
            self._release()


class ConnectionLimits:
    """One acceptor's view of the limits (its config), and the creation-rate sensors
    (kept in the process tree's ``QuotaTable``)."""

    def __init__(self, config, listeners, quotas: ConnectionQuotas, rates: QuotaTable | None = None, store=None):
        from kafkapy.server.metadata_cache import MetadataCache

        self.quotas = quotas
        self.rates = rates
        # The metadata store through this process's MetadataCache: the IP
        # entities' connection_creation_rate and the effective broker config
        # (static + dynamic, Kafka's precedence), read again only when the
        # metadata moved.
        self.cache = MetadataCache(config, store, config["broker.id"]) if store is not None else None
        self._md = None
        self._ip_rates: dict = {}
        self.samples = config["quota.window.num"]
        self.window_ms = config["quota.window.size.seconds"] * 1000
        inter = getattr(config, "inter_broker_listener_name", None)
        self.names = [ep.listener_name for ep in listeners]
        # Only with several listeners is one the protected inter-broker listener.
        self.protected = [len(self.names) > 1 and n == inter for n in self.names]
        self._applied = config
        self._apply(config)

    def _apply(self, config) -> None:
        """Take ``config``'s limits, all or none (the overrides, which may
        resolve host names, first)."""
        from kafkapy.server.security import listener_value

        overrides = parse_overrides(config["max.connections.per.ip.overrides"])
        self.max_listener = [listener_value(config, n, "max.connections") for n in self.names]
        self.listener_rate = [listener_value(config, n, "max.connection.creation.rate") for n in self.names]
        self.overrides = overrides
        self.max_per_ip = config["max.connections.per.ip"]
        self.max_broker = config["max.connections"]
        self.broker_rate = config["max.connection.creation.rate"]

    def refresh(self) -> None:
        """Take the dynamic broker configs' connection limits (Kafka's
        DynamicConnectionQuota) when the effective config changed. Connections
        already counted stay; the new limits apply to the next accept."""
        if self.cache is None:
            return
        config = self.cache.config
        if config is self._applied:
            return
        self._applied = config
        try:
            self._apply(config)
        except (ValueError, OSError) as exc:
            log.error("keeping the connection limits: the dynamic ones do not apply: %s", exc)
            return
        log.info("connection limits now: max.connections %d, max.connections.per.ip %d (overrides %s), "
                 "max.connection.creation.rate %d", self.max_broker, self.max_per_ip, self.overrides or "none",
                 self.broker_rate)

    def per_ip(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_per_ip)

    def slot_available(self, listener: int) -> bool:
        return self.quotas.slot_available(listener, self.max_listener[listener], self.max_broker,
                                          self.protected[listener])

    def ip_rates(self) -> dict:
        """{ip or DEFAULT_ENTITY: connection_creation_rate} of the IP entities."""
        if self.cache is None:
            return {}
        md = self.cache.metadata()
        if md is not self._md:
            self._md = md
            rates = {}
            for key, config in md.entity_configs.items():
                raw = config.get("connection_creation_rate") if key[0] == ENTITY_IPS else None
                if raw is None:
                    continue
                name = ip_name(key)
                try:
                    rate = int(raw)
                    name = name if name == DEFAULT_ENTITY else normal_ip(name)
                except ValueError:
                    continue  # a host name, or an unreadable value
                if rate < INT_MAX:
                    rates[name] = rate
            self._ip_rates = rates
        return self._ip_rates

    def ip_throttle_ms(self, ip: str, now_ms: int) -> int:
        """Kafka's recordIpConnectionMaybeThrottle: record a connection from ``ip``
        against its IP quota; over it, the time to hold it before closing it (the
        connection is then taken back out of the rate)."""
        rates = self.ip_rates()
        if not rates or self.rates is None:
            return 0
        ip = normal_ip(ip)
        limit = rates.get(ip, rates.get(DEFAULT_ENTITY))
        if limit is None:
            return 0
        key = sensor_key("connection-creation-ip", ip, "")
        throttle = self.rates.record(key, 1.0, now_ms, float(limit), self.samples, self.window_ms)[1]
        if throttle:
            self.rates.record(key, -1.0, now_ms, None, self.samples, self.window_ms)
        return min(throttle, self.window_ms)

    def accept_throttle_ms(self, listener: int, now_ms: int) -> int:
        """Record one accept in the listener's (and, unless protected, the broker's)
        connection-creation rate; the time to hold it (Kafka's
        recordConnectionAndGetThrottleTimeMs)."""
        if self.rates is None:
            return 0
        throttle = 0
        limit = self.listener_rate[listener]
        if limit < INT_MAX:
            throttle = self.rates.record(sensor_key("connection-creation", self.names[listener], ""), 1.0,
                                         now_ms, float(limit), self.samples, self.window_ms)[1]
        if not self.protected[listener] and self.broker_rate < INT_MAX:
            throttle = max(throttle, self.rates.record(sensor_key("connection-creation", "", ""), 1.0, now_ms,
                                                       float(self.broker_rate), self.samples, self.window_ms)[1])
        return min(throttle, self.window_ms)  # QuotaUtils.boundedThrottleTime, one window at most
