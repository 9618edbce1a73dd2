"""SaslHandshake (key 17), v0-1, as it reaches a handler worker.

Contract: on a SASL listener the handshake and the authentication are done
by the processor owning the connection, before any request reaches a worker
(``kafkapy.server.security.sasl``, Kafka's SaslServerAuthenticator in the
network layer). A SaslHandshake that reaches a worker came on a PLAINTEXT or
SSL listener, or after authentication completed when no re-authentication
can begin (the session has no lifetime, or the last one began less than a
second ago; KIP-368): ILLEGAL_SASL_STATE (34) and no mechanisms, as KafkaApis
answers.
"""

from kafkapy.protocol.errors import ErrorCode

API_KEY = 17


def handle(ctx, request):
    return ctx.response_class()(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=())
