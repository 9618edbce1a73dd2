"""Quota enforcement around one request in a handler worker (Kafka's
KafkaApis quota paths: ``sendResponseMaybeThrottle``, produce, fetch and the
controller-mutation quota of the topic admin requests).

``handle(manager, quotas, ctx, decoded, buf_size, handler, finish)`` runs the
handler and returns the worker's ``(kind, payload)``; when a quota was
violated, ``(THROTTLED, (kind, payload, throttle_ms, client_throttles))``
with ``throttle_time`` set in the response (``throttle.py`` says what the
processor does). Called only when some quota is configured
(``QuotaManager.quotas(md)`` is not None): the worker's path without quotas
does not come here.

Exempt, as in Kafka: inter-broker requests (LeaderAndIsr, StopReplica,
UpdateMetadata, ControlledShutdown, WriteTxnMarkers, a follower's Fetch)
and ApiVersions / SASL requests. Group and transaction coordinator requests
are served by the coordinator process and are not measured.
"""

from __future__ import annotations

import dataclasses
import time

from kafkapy._core.types import FileRegion
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct
from kafkapy.server.quotas.manager import CONTROLLER_MUTATION, FETCH, PRODUCE, REQUEST, SECONDS_TO_PERCENTAGE
from kafkapy.server.quotas.throttle import THROTTLED, client_throttles
from kafkapy.server.reactor.channel import DELAY, NOREPLY, SEND

PRODUCE_KEY, FETCH_KEY, CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 0, 1, 19, 20, 37
# ClusterAction and session requests: never throttled (Kafka's exemptions)
EXEMPT_KEYS = frozenset((4, 5, 6, 7, 17, 18, 27, 36))
# KIP-599: the first versions whose mutations are refused (THROTTLING_QUOTA_EXCEEDED)
# instead of accepted and throttled.
STRICT_FROM = {CREATE_TOPICS: 6, DELETE_TOPICS: 5, CREATE_PARTITIONS: 3}


def user_of(principal: str) -> str:
    """Kafka's KafkaPrincipal.getName: ``User:alice`` -> ``alice``."""
    return principal.partition(":")[2] if ":" in principal else principal


def response_size(parts) -> int:
    return sum(p.length if type(p) is FileRegion else len(p) for p in parts)


def handle(manager, quotas, ctx, decoded, buf_size: int, handler, finish):
    api_key = ctx.api_key
    if api_key in EXEMPT_KEYS:
        return finish(decoded, handler(ctx, decoded.request))
    user, client = user_of(ctx.principal), ctx.client_id or ""
    request = decoded.request
    started = time.monotonic()
    throttle = 0
    if api_key == PRODUCE_KEY and quotas.enabled(PRODUCE):
        throttle = manager.record(quotas, PRODUCE, user, client, buf_size + 4)
    mutations = None
    if api_key in STRICT_FROM and quotas.enabled(CONTROLLER_MUTATION):
        if ctx.api_version >= STRICT_FROM[api_key]:
            exceeded = manager.exceeded(quotas, CONTROLLER_MUTATION, user, client)
            if exceeded:
                manager.throttled(quotas, CONTROLLER_MUTATION, user, client, exceeded)
                response = _refuse_mutations(ctx, request, exceeded)
                kind, payload = finish(decoded, response)
                return _throttled(ctx, decoded, kind, payload, exceeded)
        mutations = _partitions_before(ctx, request)
    response = handler(ctx, request)
    kind, payload = finish(decoded, response)
    if mutations is not None and kind == SEND:
        count = _mutated(ctx, request, response, mutations)
        if count:
            throttle = max(throttle, manager.record(quotas, CONTROLLER_MUTATION, user, client, count))
    fetch_throttle = 0
    if api_key == FETCH_KEY and kind == SEND and quotas.enabled(FETCH) and _is_consumer(ctx, request):
        size = response_size(payload)
        fetch_throttle = manager.record(quotas, FETCH, user, client, size)
        if fetch_throttle and getattr(response, "session_id", 0) == 0:
            # Kafka answers a throttled fetch empty and takes its bytes back
            # (FetchContext.getThrottledResponse); a session's answer is kept,
            # its partitions' state having moved with it.
            manager.unrecord(quotas, FETCH, user, client, size)
            response = construct(ctx.response_class(), {"throttle_time": fetch_throttle, "error_code": 0,
                                                         "session_id": 0, "responses": []})
        throttle = max(throttle, fetch_throttle)
    if quotas.enabled(REQUEST):
        handler_s = time.monotonic() - started
        throttle = max(throttle, manager.record(quotas, REQUEST, user, client, handler_s * SECONDS_TO_PERCENTAGE))
    if not throttle or kind not in (SEND, NOREPLY, DELAY):
        return kind, payload
    if kind == SEND:
        if any(f.name == "throttle_time" for f in dataclasses.fields(response)):
            response = dataclasses.replace(response, throttle_time=throttle)
        kind, payload = finish(decoded, response)
    elif kind == DELAY and hasattr(response, "throttle_ms"):
        # an acks=all produce answered later (by the processor, when its
        # replicas caught up) carries the throttle time too
        response.throttle_ms = throttle
        kind, payload = finish(decoded, response)
    _count_throttle(manager, quotas, ctx, user, client, throttle)
    return _throttled(ctx, decoded, kind, payload, throttle)


def _throttled(ctx, decoded, kind, payload, throttle_ms: int):
    return THROTTLED, (kind, payload, throttle_ms, client_throttles(ctx.api_key, ctx.api_version))


def _count_throttle(manager, quotas, ctx, user, client, throttle_ms) -> None:
    """The throttle-time metric and counts of the quota types this request is measured by."""
    types = [REQUEST]
    if ctx.api_key == PRODUCE_KEY:
        types.append(PRODUCE)
    elif ctx.api_key == FETCH_KEY:
        types.append(FETCH)
    elif ctx.api_key in STRICT_FROM:
        types.append(CONTROLLER_MUTATION)
    for quota_type in types:
        if quotas.enabled(quota_type):
            manager.throttled(quotas, quota_type, user, client, throttle_ms)


def _is_consumer(ctx, request) -> bool:
    state = getattr(request, "replica_state", None)
    replica_id = state.replica_id if state is not None else getattr(request, "replica_id", -1)
    return replica_id < 0


# -- controller mutations (KIP-599) ------------------------------------------------------

def _partitions_before(ctx, request) -> dict:
    """The partition counts of the topics a request names, before it runs."""
    md = ctx.broker.metadata()
    names = [t.name for t in getattr(request, "topics", ()) or ()]
    names += [n for n in getattr(request, "topic_names", ()) or ()]
    return {n: md.topics[n].num_partitions for n in names if n is not None and n in md.topics}


def _mutated(ctx, request, response, before: dict) -> int:
    """Partitions the request created or deleted (successful topics only)."""
    if request.validate_only if hasattr(request, "validate_only") else False:
        return 0
    api_key = ctx.api_key
    ok = set()
    for r in getattr(response, "topics", None) or getattr(response, "responses", None) or \
            getattr(response, "results", None) or ():
        if r.error_code == ErrorCode.NONE and r.name is not None:
            ok.add(r.name)
    if api_key == CREATE_TOPICS:
        md = ctx.broker.metadata()
        total = 0
        for t in request.topics:
            if t.name in ok:
                info = md.topics.get(t.name)
                total += info.num_partitions if info is not None else max(t.num_partitions, 1)
        return total
    if api_key == DELETE_TOPICS:
        return sum(n for name, n in before.items() if name in ok)
    return sum(max(0, t.count - before.get(t.name, t.count)) for t in request.topics if t.name in ok)


def _refuse_mutations(ctx, request, throttle_ms: int):
    """Every topic of a strict request answered THROTTLING_QUOTA_EXCEEDED."""
    message = "The throttling quota has been exceeded."
    code = ErrorCode.THROTTLING_QUOTA_EXCEEDED
    if ctx.api_key == CREATE_TOPICS:
        topics = [{"name": t.name, "error_code": code, "error_message": message, "num_partitions": -1,
                   "replication_factor": -1, "configs": None} for t in request.topics]
        return construct(ctx.response_class(), {"throttle_time": throttle_ms, "topics": topics})
    if ctx.api_key == DELETE_TOPICS:
        names = [t.name for t in request.topics] if getattr(request, "topics", None) else list(request.topic_names)
        return construct(ctx.response_class(), {"throttle_time": throttle_ms, "responses": [
            {"name": n, "error_code": code, "error_message": message} for n in names]})
    return construct(ctx.response_class(), {"throttle_time": throttle_ms, "results": [
        {"name": t.name, "error_code": code, "error_message": message} for t in request.topics]})
