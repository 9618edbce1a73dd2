"""API handlers: one module per API, each opening with its contract.

A handler takes ``(ctx, request)`` — the decoded kio request entity — and
returns the response entity, ``NoResponse`` (acks=0 produce), or a
``replication.purgatory.DelayedOperation`` (a long-poll fetch, or an acks=-1
produce the ISR has not all got) that the processor parks until it completes
or expires.
Handlers write responses as plain dicts and build them with
``construct(response_class, data)`` (``kafkapy.protocol.entities``), which
keeps each handler independent of the version being answered.
"""

from __future__ import annotations

import dataclasses
import datetime
import time

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.entities import _plan, construct  # noqa: F401  (handlers import them from here too)
from kafkapy.protocol.errors import ErrorCode


class _NoResponse:
    def __repr__(self):
        return "NoResponse"


NoResponse = _NoResponse()


class _CloseConnection:
    def __repr__(self):
        return "CloseConnection"


# acks=0 produce that failed: Kafka closes the connection so the producer notices.
CloseConnection = _CloseConnection()


class Hold:
    """An answer that waits before it is sent, without holding the worker
    (Kafka's DelayedCreatePartitions: a purgatory operation completed by
    metadata). A handler that sets ``ctx.hold`` returns the response it
    would send once ``ready()``; the worker keeps it aside and goes on with
    other requests, asking ``ready()`` after each one it handles and every
    10 ms while idle. Ready, the response is sent as it was built (quota
    throttling included); at ``deadline`` (monotonic seconds) or when the
    worker stops, ``expire(response)`` gives the response to send instead.
    Both run in the worker's one thread."""

    __slots__ = ("ready", "expire", "deadline")

    def __init__(self, ready, expire, deadline: float):
        self.ready = ready
        self.expire = expire
        self.deadline = deadline


def hold_topics(ctx, pending, field: str, started: float, timeout_ms: int) -> None:
    """Hold the answer (``ctx.hold``) while ``pending()``, the topic names
    still waited on, is not empty, up to ``timeout_ms`` from ``started``
    (monotonic seconds): Kafka's DelayedCreatePartitions and
    DelayedDeleteTopics. Past it, each topic still pending answers
    REQUEST_TIMED_OUT in the response's ``field`` list. Nothing is held when
    ``timeout_ms`` is 0 or less (Kafka answers at once) or nothing is
    pending now."""
    if timeout_ms <= 0 or not pending():
        return

    def expire(response):
        late = pending()
        return dataclasses.replace(response, **{field: tuple(
            _timed_out(t) if t.name in late else t for t in getattr(response, field))})

    ctx.hold = Hold(lambda: not pending(), expire, started + timeout_ms / 1000)


def _timed_out(result):
    fields = {"error_code": int(ErrorCode.REQUEST_TIMED_OUT)}
    if hasattr(result, "error_message"):
        fields["error_message"] = None
    return dataclasses.replace(result, **fields)


class RequestContext:
    __slots__ = ("broker", "api_key", "api_version", "correlation_id", "client_id",
                 "deadline_ms", "now_ms", "listener", "principal", "peer_host", "hold", "verification")

    def __init__(self, broker, api_key, api_version, correlation_id, client_id, deadline_ms):
        self.broker = broker
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.deadline_ms = deadline_ms  # 0 on first attempt; a DelayedFetch's deadline when it runs again
        self.now_ms = int(time.time() * 1000)
        # The connection's listener (index into config.listeners) and its
        # authenticated principal (kafkapy.server.security; for ACLs).
        self.listener = 0
        self.principal = "User:ANONYMOUS"
        # The client's address, for ACL host matching: carried only while an
        # authorizer is configured (Broker.authorizer), else "".
        self.peer_host = ""
        self.hold = None  # a Hold the handler set: its answer waits (see Hold)
        # A Produce's second run after KIP-890 verification (DelayedVerification.verified()), else None.
        self.verification = None

    @property
    def listener_name(self) -> str | None:
        config = getattr(self.broker, "static_config", None)
        return config.listeners[self.listener].listener_name if config is not None else None

    def response_class(self):
        return API_TABLE[self.api_key].response_class(self.api_version)


def advertised_endpoint(broker_info, listener_name: str):
    """``(host, port)`` of a broker's advertised endpoint for ``listener_name``
    (Kafka answers Metadata and FindCoordinator with the endpoints of the
    listener the request came on); the first one when it has none by that
    name (a broker registered before listeners had names)."""
    for ep in broker_info.endpoints:
        if ep.listener_name == listener_name:
            return ep.host, ep.port
    return broker_info.host, broker_info.port


HANDLERS: dict = {}



def duration_ms(value) -> int:
    """A request's duration field (kio's ``i32Timedelta``: a timedelta, or
    the int milliseconds our codec leaves) in milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def _register():
    """Every module of this package with an ``API_KEY`` handles that API."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        key = getattr(module, "API_KEY", None)
        # A handler is served only once the API table lists its versions.
        if key is not None and key in API_TABLE:
            HANDLERS[key] = module.handle
    workers_keys = {k for k, spec in API_TABLE.items() if spec.owner == "worker"}
    missing = workers_keys - set(HANDLERS)
    assert not missing, f"API table lists keys without handlers: {missing}"


_register()
