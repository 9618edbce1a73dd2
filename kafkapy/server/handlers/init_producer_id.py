"""InitProducerId (key 22), v0-v5 (v5 only adds an error code), for idempotent
(non-transactional) producers.

Contract: with a null transactional id the broker hands out a fresh producer
id with epoch 0, whatever producer id/epoch the request carries (v3+ sends
its current ones after a fatal sequence error; Kafka blindly issues a new id
for non-transactional producers). Producer ids are unique across restarts:
they come from blocks reserved in the metadata store.
A non-null transactional id needs the transaction coordinator, which kafkapy
does not have yet: COORDINATOR_NOT_AVAILABLE (15), which clients treat as
retriable, with a log line saying why.
"""

import logging

from kafkapy.protocol.errors import ErrorCode

API_KEY = 22
log = logging.getLogger("kafkapy.request")


def handle(ctx, request):
    cls = ctx.response_class()
    if request.transactional_id is not None:
        log.warning("InitProducerId for transactional id %r: transactions are not supported",
                    request.transactional_id)
        return _response(cls, ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1)
    producer_id = ctx.broker.producer_id_manager.generate_producer_id()
    return _response(cls, ErrorCode.NONE, producer_id, 0)


def _response(cls, error_code, producer_id, epoch):
    from kafkapy.server.handlers import construct

    return construct(cls, {"throttle_time": 0, "error_code": int(error_code),
                           "producer_id": producer_id, "producer_epoch": epoch})
