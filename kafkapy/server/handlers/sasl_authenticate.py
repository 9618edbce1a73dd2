"""SaslAuthenticate (key 36), v0-2, as it reaches a handler worker.

Contract: tokens are evaluated by the processor during authentication
(``kafkapy.server.security.sasl``), also during a re-authentication (KIP-368,
begun by a SaslHandshake the processor accepts). One reaching a worker came on
a listener without SASL or after authentication completed: ILLEGAL_SASL_STATE
(34) with Kafka's message, as KafkaApis answers.
"""

from kafkapy.protocol.errors import ErrorCode

API_KEY = 36


def handle(ctx, request):
    return ctx.response_class()(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                error_message="SaslAuthenticate request received after successful authentication",
                                auth_bytes=b"")
