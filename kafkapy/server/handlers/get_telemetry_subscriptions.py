"""GetTelemetrySubscriptions (key 71), v0 (KIP-714).

Contract (Kafka 3.9's ClientMetricsManager with no client-metrics
subscriptions; see ``kafkapy.server.client_metrics``): the zero
``client_instance_id`` gets a new id, any other is kept; the answer carries
the instance's subscription id, no requested metrics (nothing is
subscribed), the 5-minute push interval, ``telemetry.max.bytes`` (1 MiB),
delta temporality and the codecs a push may use (zstd, lz4, gzip, snappy).
A Get sooner than the push interval after the instance's last Get or Push ->
THROTTLING_QUOTA_EXCEEDED (89) with nothing else set. Not advertised in
ApiVersions (as Kafka 3.9 without a telemetry receiver plugin).
"""

from kafkapy.server.client_metrics import MANAGER
from kafkapy.server.handlers import construct

API_KEY = 71


def handle(ctx, request):
    return construct(ctx.response_class(), MANAGER.get_subscriptions(request.client_instance_id, ctx.now_ms))
