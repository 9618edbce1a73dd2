"""Client telemetry (KIP-714) as Kafka 3.9's ClientMetricsManager answers it
with no client-metrics subscriptions and no telemetry receiver plugin.

With no subscription every client gets the same empty set: no requested
metrics, Kafka's default push interval (5 min), delta temporality, and the
codecs a push may use. A GetTelemetrySubscriptions with the zero id gets a
new client instance id. Each instance is cached for
``max(60 s, 3 x push interval)`` after its last request (LRU, 16384), and its
requests are paced as Kafka paces them: a Get sooner than the push interval
after the last Get or Push, or a Push sooner than that after the last Push
(unless a Get came in between, or it is the terminating one), is
THROTTLING_QUOTA_EXCEEDED. A Push is checked for a terminated instance
(INVALID_REQUEST), its subscription id (UNKNOWN_SUBSCRIPTION_ID), its codec
(UNSUPPORTED_COMPRESSION_TYPE) and ``telemetry.max.bytes`` (Kafka's default,
1 MiB: TELEMETRY_TOO_LARGE); the metrics themselves go nowhere, as with
Kafka's empty receiver plugin.

Kafka 3.9 leaves both APIs out of ApiVersions unless a receiver plugin is
configured (``ApiSpec.advertised``), so clients do not call them; a client
that does is answered as above, as a KRaft broker does (a ZooKeeper-mode
3.9 broker has no ClientMetricsManager and does not serve them at all).

Ownership: one ``ClientMetricsManager`` per handler-worker process, used by
that process's single handler thread; never shared. Workers do not share
their caches, as Kafka's brokers do not: an instance unknown to a worker is
created there, with the same subscription id (it is computed, not drawn).
"""

from __future__ import annotations

import base64
import uuid
from collections import OrderedDict

import crc32c

from kafkapy.protocol.errors import ErrorCode

DEFAULT_PUSH_INTERVAL_MS = 5 * 60 * 1000  # ClientMetricsConfigs.DEFAULT_INTERVAL_MS
TELEMETRY_MAX_BYTES = 1024 * 1024  # telemetry.max.bytes default
# CompressionType ids ZSTD, LZ4, GZIP, SNAPPY, in Kafka's order of preference.
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
_KNOWN_COMPRESSION_TYPES = range(0, 5)  # none, gzip, snappy, lz4, zstd
_CACHE_MAX_SIZE = 16384
_CACHE_EXPIRY_MS = 60 * 1000
# Uuid.RESERVED: the zero id and the metadata topic's id (0, 1).
_RESERVED = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})


def java_uuid_hash(u: uuid.UUID) -> int:
    """Java's ``Uuid.hashCode()`` as a signed int32."""
    xor = (u.int >> 64) ^ (u.int & 0xFFFFFFFFFFFFFFFF)
    h = ((xor >> 32) ^ xor) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def subscription_id(metrics: list[str], push_interval_ms: int, instance_id: uuid.UUID) -> int:
    """Kafka's computeSubscriptionId: CRC32C of ``metrics.toString() + interval``
    (Java's set formatting: ``[]`` when empty) XOR the instance id's hash."""
    text = "[" + ", ".join(metrics) + "]" + str(push_interval_ms)
    crc = crc32c.crc32c(text.encode("utf-8"))
    value = (crc ^ java_uuid_hash(instance_id)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def new_instance_id() -> uuid.UUID:
    """Kafka's ``Uuid.randomUuid()``: random, not reserved, and whose base64
    form does not start with '-' (it would read as a command-line option)."""
    while True:
        u = uuid.uuid4()
        if u not in _RESERVED and not base64.urlsafe_b64encode(u.bytes).startswith(b"-"):
            return u


class ClientInstance:
    __slots__ = ("instance_id", "subscription_id", "push_interval_ms", "metrics", "terminating",
                 "last_get_ms", "last_push_ms", "expires_ms")

    def __init__(self, instance_id: uuid.UUID):
        self.instance_id = instance_id
        self.metrics: list[str] = []  # no subscriptions: nothing requested
        self.push_interval_ms = DEFAULT_PUSH_INTERVAL_MS
        self.subscription_id = subscription_id(self.metrics, self.push_interval_ms, instance_id)
        self.terminating = False
        self.last_get_ms = 0
        self.last_push_ms = 0
        self.expires_ms = 0

    def may_get(self, now_ms: int) -> bool:
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def may_push(self, now_ms: int) -> bool:
        # A push right after a Get is accepted early: clients jitter the
        # interval (0.5x-1.5x).
        if self.last_get_ms > self.last_push_ms or now_ms - self.last_push_ms >= self.push_interval_ms:
            self.last_push_ms = now_ms
            return True
        return False


class ClientMetricsManager:
    def __init__(self, cache_max_size: int = _CACHE_MAX_SIZE):
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self._cache_max_size = cache_max_size

    def _instance(self, instance_id: uuid.UUID, now_ms: int) -> ClientInstance:
        inst = self._instances.get(instance_id)
        if inst is None or inst.expires_ms <= now_ms:
            inst = ClientInstance(instance_id)
            self._instances[instance_id] = inst
            while len(self._instances) > self._cache_max_size:
                self._instances.popitem(last=False)
        self._instances.move_to_end(instance_id)
        inst.expires_ms = now_ms + max(_CACHE_EXPIRY_MS, 3 * inst.push_interval_ms)
        return inst

    def get_subscriptions(self, instance_id, now_ms: int) -> dict:
        """GetTelemetrySubscriptions answer (a dict for ``construct``)."""
        if instance_id is None or instance_id.int == 0:
            instance_id = new_instance_id()
            while instance_id in self._instances:
                instance_id = new_instance_id()
        inst = self._instance(instance_id, now_ms)
        if not inst.may_get(now_ms):
            return _get_error(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        return {"throttle_time": 0, "error_code": ErrorCode.NONE, "client_instance_id": instance_id,
                "subscription_id": inst.subscription_id,
                "accepted_compression_types": list(ACCEPTED_COMPRESSION_TYPES),
                "push_interval": inst.push_interval_ms, "telemetry_max_bytes": TELEMETRY_MAX_BYTES,
                "delta_temporality": True, "requested_metrics": list(inst.metrics)}

    def push(self, request, now_ms: int) -> int:
        """PushTelemetry: the error code."""
        instance_id = request.client_instance_id
        if instance_id is None or instance_id in _RESERVED:
            return ErrorCode.INVALID_REQUEST
        inst = self._instance(instance_id, now_ms)
        try:
            return self._check_push(inst, request, now_ms)
        finally:
            inst.terminating = request.terminating

    @staticmethod
    def _check_push(inst: ClientInstance, request, now_ms: int) -> int:
        if inst.terminating:
            return ErrorCode.INVALID_REQUEST
        if not inst.may_push(now_ms) and not request.terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if request.subscription_id != inst.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if request.compression_type not in _KNOWN_COMPRESSION_TYPES:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if request.metrics is not None and len(request.metrics) > TELEMETRY_MAX_BYTES:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE


def _get_error(code: int) -> dict:
    # Kafka's getErrorResponse: only the error code is set.
    return {"throttle_time": 0, "error_code": code, "client_instance_id": uuid.UUID(int=0),
            "subscription_id": 0, "accepted_compression_types": [], "push_interval": 0,
            "telemetry_max_bytes": 0, "delta_temporality": False, "requested_metrics": []}


# The worker process's manager (see Ownership above).
MANAGER = ClientMetricsManager()
