"""Per-process quota enforcement (Kafka's ClientQuotaManager family).

One ``QuotaManager`` per handler worker (owned by its one handler thread;
never shared); what workers share is ``QuotaTable``'s accounting and the
metadata store's entity configs (``Metadata.entity_configs``), which it
re-reads only when the metadata generation moved.

Quota types and what they measure, as Kafka:

* ``Produce`` — ``producer_byte_rate``: the Produce request's size;
* ``Fetch`` — ``consumer_byte_rate``: a consumer's Fetch response size,
  record bytes sent with sendfile included (a throttled sessionless fetch is
  answered empty and its bytes taken back, Kafka's ``getThrottledResponse``);
* ``Request`` — ``request_percentage``: handler time, as percent of one
  thread per second (100 = one handler busy all the time); throttle time
  bounded by one quota window (ClientRequestQuotaManager);
* ``ControllerMutation`` — ``controller_mutation_rate``: partitions created
  (CreateTopics, CreatePartitions) or deleted (DeleteTopics) per second.

Resolution (Kafka's DefaultQuotaCallback): a request's (user, client-id)
maps to the metric tags of the most specific entity with a quota of that
type, in Kafka's order: /users/<u>/clients/<c>, /users/<u>/clients/<default>,
/users/<u>, /users/<default>/clients/<c>, /users/<default>/clients/<default>,
/users/<default>, /clients/<c>, /clients/<default>. The tags name the sensor
(``QuotaTable``), so clients sharing a user quota share its rate, and each
client-id under a default client quota has its own.

Cost without quotas: ``enabled(md)`` is a dict lookup on the metadata object
(cached per generation); no record, no lock.
"""

from __future__ import annotations

import math
import time

from kafkapy.metadata.model import DEFAULT_ENTITY, entity_names
from kafkapy.metrics.quotas import probe
from kafkapy.server.quotas import entities
from kafkapy.server.quotas.table import QuotaTable, sensor_key

PRODUCE, FETCH, REQUEST, CONTROLLER_MUTATION = "Produce", "Fetch", "Request", "ControllerMutation"
QUOTA_KEY = {
    PRODUCE: entities.PRODUCER_BYTE_RATE,
    FETCH: entities.CONSUMER_BYTE_RATE,
    REQUEST: entities.REQUEST_PERCENTAGE,
    CONTROLLER_MUTATION: entities.CONTROLLER_MUTATION_RATE,
}
# ClientRequestQuotaManager.NanosToPercentagePerSecond, for seconds.
SECONDS_TO_PERCENTAGE = 100.0

_NONE = object()


class Quotas:
    """The quota overrides of one metadata generation: type -> {(user, client): bound},
    names unsanitized, ``DEFAULT_ENTITY`` for defaults, None for an absent part."""

    __slots__ = ("overrides", "resolved")

    def __init__(self, entity_configs):
        self.overrides = {t: {} for t in QUOTA_KEY}
        for key, config in entity_configs.items():
            if key[0] not in ("users", "clients"):
                continue  # IP entities: the acceptor's (connections.py)
            user, client = entity_names(key)
            for quota_type, config_key in QUOTA_KEY.items():
                raw = config.get(config_key)
                if raw is not None:
                    try:
                        bound = float(raw)
                    except ValueError:
                        continue
                    if math.isfinite(bound):  # NaN or Infinity (a DOUBLE may be set so) bounds nothing
                        self.overrides[quota_type][(user, client)] = max(bound, 0.0)
        self.resolved: dict = {}

    def enabled(self, quota_type: str) -> bool:
        return bool(self.overrides[quota_type])

    def resolve(self, quota_type: str, user: str, client_id: str):
        """``(user tag, client tag, bound)`` of the quota applying, or None."""
        cache_key = (quota_type, user, client_id)
        found = self.resolved.get(cache_key, _NONE)
        if found is _NONE:
            found = self.resolved[cache_key] = self._resolve(self.overrides[quota_type], user, client_id)
        return found

    @staticmethod
    def _resolve(quotas: dict, user: str, client: str):
        d = DEFAULT_ENTITY
        # Kafka's order; the metric tags (user, client) each entity counts under
        for entity, tags in (((user, client), (user, client)), ((user, d), (user, client)),
                             ((user, None), (user, "")), ((d, client), (user, client)),
                             ((d, d), (user, client)), ((d, None), (user, "")),
                             ((None, client), ("", client)), ((None, d), ("", client))):
            bound = quotas.get(entity)
            if bound is not None:
                return tags[0], tags[1], bound
        return None


class QuotaManager:
    """A worker's view (module docstring)."""

    def __init__(self, config, table: QuotaTable, clock_ms=None):
        self.table = table
        self.window_ms = config["quota.window.size.seconds"] * 1000
        self.samples = config["quota.window.num"]
        self.controller_window_ms = config["controller.quota.window.size.seconds"] * 1000
        self.controller_samples = config["controller.quota.window.num"]
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._md = None
        self._quotas = None

    @classmethod
    def for_config(cls, config) -> "QuotaManager":
        return cls(config, QuotaTable.for_config(config))

    def quotas(self, md) -> Quotas | None:
        """The overrides of ``md`` (None: no quota of any type), cached per metadata object."""
        if md is not self._md:
            self._md = md
            q = Quotas(md.entity_configs) if md.entity_configs else None
            self._quotas = q if q is not None and any(q.overrides.values()) else None
        return self._quotas

    def _window(self, quota_type: str) -> tuple:
        if quota_type == CONTROLLER_MUTATION:
            return self.controller_samples, self.controller_window_ms
        return self.samples, self.window_ms

    def record(self, quotas: Quotas, quota_type: str, user: str, client_id: str, value: float,
               now_ms: int | None = None) -> int:
        """Record ``value`` for the client's quota of ``quota_type``; the throttle time
        in ms (0: within its quota, or no quota applies)."""
        found = quotas.resolve(quota_type, user, client_id)
        if found is None:
            return 0
        user_tag, client_tag, bound = found
        samples, window_ms = self._window(quota_type)
        now_ms = self.clock_ms() if now_ms is None else now_ms
        rate, throttle = self.table.record(sensor_key(quota_type, user_tag, client_tag), value, now_ms,
                                           bound, samples, window_ms)
        probe().recorded(quota_type, user_tag, client_tag, rate)
        if quota_type == REQUEST:
            throttle = min(throttle, window_ms)  # QuotaUtils.boundedThrottleTime
        return throttle

    def unrecord(self, quotas: Quotas, quota_type: str, user: str, client_id: str, value: float) -> None:
        """Take ``value`` back (a throttled fetch answered empty)."""
        found = quotas.resolve(quota_type, user, client_id)
        if found is not None:
            samples, window_ms = self._window(quota_type)
            self.table.record(sensor_key(quota_type, found[0], found[1]), -value, self.clock_ms(), None,
                              samples, window_ms)

    def exceeded(self, quotas: Quotas, quota_type: str, user: str, client_id: str) -> int:
        """Strict quotas (KIP-599): the throttle time if the client's rate is above its
        bound now, before recording anything; else 0."""
        found = quotas.resolve(quota_type, user, client_id)
        if found is None:
            return 0
        samples, window_ms = self._window(quota_type)
        rate, throttle = self.table.record(sensor_key(quota_type, found[0], found[1]), 0.0, self.clock_ms(),
                                           found[2], samples, window_ms)
        return throttle

    def throttled(self, quotas: Quotas, quota_type: str, user: str, client_id: str, throttle_ms: int) -> None:
        found = quotas.resolve(quota_type, user, client_id)
        if found is not None:
            self.table.throttled(sensor_key(quota_type, found[0], found[1]), throttle_ms)
            probe().throttled(quota_type, found[0], found[1], throttle_ms)
