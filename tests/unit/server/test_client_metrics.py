"""Client telemetry pacing and instance cache (kafkapy.server.client_metrics)
with an explicit clock: Kafka's ClientMetricsManager rules, step by step."""

import uuid
from types import SimpleNamespace

from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.server.client_metrics import (
    DEFAULT_PUSH_INTERVAL_MS as INTERVAL,
    ClientMetricsManager,
    java_uuid_hash,
    subscription_id,
)

T0 = 1_700_000_000_000


def push(m, instance, sub, now, terminating=False, compression_type=0, metrics=b""):
    return m.push(SimpleNamespace(client_instance_id=instance, subscription_id=sub, terminating=terminating,
                                  compression_type=compression_type, metrics=metrics), now)


def test_get_is_paced_by_the_push_interval_since_the_last_get_or_push():
    m = ClientMetricsManager()
    first = m.get_subscriptions(uuid.UUID(int=0), T0)
    instance = first["client_instance_id"]
    assert first["error_code"] == E.NONE and instance.int not in (0, 1)
    assert m.get_subscriptions(instance, T0 + INTERVAL - 1)["error_code"] == E.THROTTLING_QUOTA_EXCEEDED
    assert m.get_subscriptions(instance, T0 + INTERVAL)["error_code"] == E.NONE
    assert push(m, instance, first["subscription_id"], T0 + INTERVAL + 10) == E.NONE
    # The push moved the base: a Get an interval after the Get but not after the push waits.
    assert m.get_subscriptions(instance, T0 + 2 * INTERVAL)["error_code"] == E.THROTTLING_QUOTA_EXCEEDED
    assert m.get_subscriptions(instance, T0 + 2 * INTERVAL + 10)["error_code"] == E.NONE


def test_push_pacing_and_terminating():
    m = ClientMetricsManager()
    got = m.get_subscriptions(uuid.UUID(int=0), T0)
    instance, sub = got["client_instance_id"], got["subscription_id"]
    assert push(m, instance, sub, T0 + 1) == E.NONE  # right after a Get: early is fine (jitter)
    assert push(m, instance, sub, T0 + 2) == E.THROTTLING_QUOTA_EXCEEDED
    assert push(m, instance, sub, T0 + 1 + INTERVAL) == E.NONE
    assert push(m, instance, sub, T0 + 2 + INTERVAL, terminating=True) == E.NONE
    assert push(m, instance, sub, T0 + 3 * INTERVAL) == E.INVALID_REQUEST


def test_an_instance_unknown_here_is_created_with_the_same_subscription_id():
    # Another worker (or broker) gave the id: the subscription id is computed, not drawn.
    instance = uuid.uuid4()
    expected = subscription_id([], INTERVAL, instance)
    assert push(ClientMetricsManager(), instance, expected, T0) == E.NONE
    assert ClientMetricsManager().get_subscriptions(instance, T0)["subscription_id"] == expected


def test_subscription_id_is_kafkas_formula():
    # Uuid.hashCode: (int)(x >> 32) ^ (int)x with x = msb ^ lsb.
    u = uuid.UUID(int=(0x0123456789ABCDEF << 64) | 0xFEDCBA9876543210)
    x = 0x0123456789ABCDEF ^ 0xFEDCBA9876543210  # 0xFFFFFFFFFFFFFFFF
    assert x == 0xFFFFFFFFFFFFFFFF and java_uuid_hash(u) == 0  # 0xFFFFFFFF ^ 0xFFFFFFFF
    import crc32c

    crc = crc32c.crc32c(b"[]300000")
    assert subscription_id([], 300000, u) == (crc - (1 << 32) if crc >= 1 << 31 else crc)


def test_instance_cache_is_bounded_and_expires():
    m = ClientMetricsManager(cache_max_size=2)
    ids = [m.get_subscriptions(uuid.UUID(int=0), T0)["client_instance_id"] for _ in range(3)]
    assert len(m._instances) == 2 and ids[0] not in m._instances
    # An instance is forgotten max(60 s, 3 x interval) after its last
    # request: a terminated one refuses pushes until then, not after.
    got = m.get_subscriptions(uuid.UUID(int=0), T0)
    instance, sub = got["client_instance_id"], got["subscription_id"]
    assert push(m, instance, sub, T0, terminating=True) == E.NONE
    assert push(m, instance, sub, T0 + 3 * INTERVAL - 1) == E.INVALID_REQUEST
    assert push(m, instance, sub, T0 + 6 * INTERVAL - 1) == E.NONE
