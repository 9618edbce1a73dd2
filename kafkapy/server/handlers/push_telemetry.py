"""PushTelemetry (key 72), v0 (KIP-714).

Contract (Kafka 3.9's ClientMetricsManager with no receiver plugin; see
``kafkapy.server.client_metrics``), in Kafka's order: a null or reserved
instance id -> INVALID_REQUEST (42); a push after the instance's
terminating push -> INVALID_REQUEST; sooner than the push interval after
the last push (and no Get between; the terminating push is exempt) ->
THROTTLING_QUOTA_EXCEEDED (89); another subscription id than the
instance's -> UNKNOWN_SUBSCRIPTION_ID (117); an unknown codec id ->
UNSUPPORTED_COMPRESSION_TYPE (76); metrics over ``telemetry.max.bytes`` ->
TELEMETRY_TOO_LARGE (118); otherwise NONE and the metrics are dropped (no
plugin to hand them to). Not advertised in ApiVersions (as Kafka 3.9
without a telemetry receiver plugin).
"""

from kafkapy.server.client_metrics import MANAGER
from kafkapy.server.handlers import construct

API_KEY = 72


def handle(ctx, request):
    return construct(ctx.response_class(), {"throttle_time": 0,
                                            "error_code": MANAGER.push(request, ctx.now_ms)})
