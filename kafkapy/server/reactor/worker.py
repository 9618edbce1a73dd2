"""A handler worker (Kafka's KafkaRequestHandler) and request dispatch.

Owned by one worker process, single-threaded: takes descriptors from the
shared request queue, decodes, calls the API handler, and sends the encoded
response to the processor owning the connection. An answer whose handler
set a ``Hold`` (handlers/__init__.py) is kept aside and sent when ready or
expired, asked after each request and every 10 ms while idle, so a wait on
metadata never holds the worker. Each worker has its own
``Broker`` view (metadata cache, open logs); consistency between workers comes
from the shared partition table and the partition locks (docs/architecture.md).
"""

from __future__ import annotations

import logging
import queue
import time

from kafkapy.coordinator.handlers import client_host
from kafkapy.metrics import probes
from kafkapy.protocol import fetch_request_wire, produce_wire
from kafkapy.protocol.api import API_TABLE, API_VERSIONS_KEY
from kafkapy.protocol.codec import DecodeError, decode
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.headers import encode_response, read_request_header, skip_tagged_fields
from kafkapy.replication.purgatory import DelayedOperation
from kafkapy.server.handlers import HANDLERS, CloseConnection, NoResponse, RequestContext, api_versions
from kafkapy.server.handlers.fetch import API_KEY as FETCH_KEY
from kafkapy.server.handlers.produce import API_KEY as PRODUCE_KEY
from kafkapy.server.quotas import enforce as quota_enforce
from kafkapy.server.quotas.throttle import THROTTLED
from kafkapy.server.reactor.channel import CLOSE, DELAY, NOREPLY, SEND

log = logging.getLogger("kafkapy.request")
# handle_request's kind for an answer the worker keeps aside (never sent as such).
HELD = -1
# A request handled for longer than this is logged: its client is waiting.
_SLOW_S = 10.0
# The most frequent requests' one-pass readers, by API key (protocol/produce_wire.py,
# protocol/fetch_request_wire.py), from their FIRST_VERSION on.
_ONE_PASS_READERS = {PRODUCE_KEY: produce_wire, FETCH_KEY: fetch_request_wire}


class Decoded:
    """A request that decoded and is to be handled: what ``finish_request`` needs."""

    __slots__ = ("header", "spec", "version", "flexible", "request", "response")

    def __init__(self, header, spec, version, flexible, request):
        self.header = header
        self.spec = spec
        self.version = version
        self.flexible = flexible
        self.response = None  # the response entity finish_request encoded last
        self.request = request


def prepare_request(buf: memoryview):
    """Decode one request frame (without its size prefix).

    Returns a ``Decoded``, or ``(kind, payload)`` when the request is answered
    (or the connection closed) without reaching a handler: undecodable
    header or body, unknown key, unsupported version, ApiVersions outside its
    range. Shared by the handler workers and the group
    coordinator process, so both treat malformed input alike.
    """
    try:
        header = read_request_header(buf)
    except DecodeError as exc:
        log.info("closing connection: undecodable request header (%s)", exc)
        return CLOSE, None
    spec = API_TABLE.get(header.api_key)
    version = header.api_version
    if spec is None:
        log.info("closing connection: unknown api key %d", header.api_key)
        return CLOSE, None
    if header.api_key == API_VERSIONS_KEY and not spec.min_version <= version <= spec.max_version:
        # Kafka answers an ApiVersions it cannot parse in v0 format, with
        # UNSUPPORTED_VERSION and its own range, so the client can downgrade.
        body = api_versions.build_response(0, ErrorCode.UNSUPPORTED_VERSION)
        return SEND, encode_response(header.correlation_id, body, False)
    if not spec.served_from <= version <= spec.max_version:
        log.info("closing connection: %s v%d is not supported", spec.name, version)
        return CLOSE, None
    flexible = spec.is_flexible(version)
    try:
        offset = header.offset
        if flexible:
            offset = skip_tagged_fields(buf, offset)
        request = None
        # The most frequent requests, read in one pass (None: the codec reads them).
        wire = _ONE_PASS_READERS.get(header.api_key)
        if wire is not None and version >= wire.FIRST_VERSION:
            request = wire.decode_request(spec.request_class(version), version, buf, offset)
        if request is None:
            request, _ = decode(spec.request_class(version), buf, offset)
    except DecodeError as exc:
        log.info("closing connection: malformed %s v%d request (%s)", spec.name, version, exc)
        return CLOSE, None
    return Decoded(header, spec, version, flexible, request)


def finish_request(decoded: Decoded, response):
    """``(kind, payload)`` for a handler's result (may raise if encoding fails)."""
    if response is NoResponse:
        return NOREPLY, None
    if response is CloseConnection:
        return CLOSE, None
    if isinstance(response, DelayedOperation):
        return DELAY, response.to_wire()
    header = decoded.header
    decoded.response = response
    probes.request.response_built(header.api_key, response)
    response_header_flexible = decoded.flexible and header.api_key != API_VERSIONS_KEY
    return SEND, encode_response(header.correlation_id, response, response_header_flexible)


def handle_request(broker, buf: memoryview, deadline_ms: int = 0, listener: int = 0,
                   principal: str = "User:ANONYMOUS", peer_host: str = "", verification=None):
    """Handle one request frame (without its size prefix).

    Returns ``(kind, payload)`` for the processor: SEND with the response
    parts, NOREPLY, CLOSE, or DELAY with the ``DelayedOperation`` to park
    (its ``to_wire()`` tuple); or ``(HELD, (kind, payload, decoded, hold))``
    when the handler set a ``Hold``: the worker sends it later (``Held``).
    Never raises: a handler bug answers the connection with a close, as Kafka
    does for requests it cannot parse or answer. ``verification``: a
    Produce's coordinator answers (``RequestContext.verification``).
    """
    decoded = prepare_request(buf)
    if not isinstance(decoded, Decoded):
        return decoded
    header = decoded.header
    ctx = RequestContext(broker, header.api_key, decoded.version, header.correlation_id,
                         header.client_id, deadline_ms)
    if listener or principal != "User:ANONYMOUS":
        ctx.listener = listener
        ctx.principal = principal
    if verification is not None:  # a Produce run again by its processor (server/txn_verification.py)
        ctx.verification = verification
    if peer_host:
        # ACL hosts are Java's InetAddress.getHostAddress(): IPv6 uncompressed, v4-mapped as v4.
        ctx.peer_host = peer_host if ":" not in peer_host else client_host(peer_host)[1:]
    try:
        # Client quotas (server/quotas/enforce.py): only when some quota is configured.
        manager = getattr(broker, "quotas", None)
        quotas = manager.quotas(broker.metadata()) if manager is not None else None
        if quotas is not None:
            kind, payload = quota_enforce.handle(manager, quotas, ctx, decoded, len(buf), HANDLERS[header.api_key],
                                                 finish_request)
        else:
            kind, payload = finish_request(decoded, HANDLERS[header.api_key](ctx, decoded.request))
        if ctx.hold is not None and kind in (SEND, THROTTLED):
            return HELD, (kind, payload, decoded, ctx.hold)
        return kind, payload
    except Exception:
        # A bug in one handler must cost one connection, never the worker
        # (whose death stops the whole broker).
        log.exception("%s v%d request failed; closing the connection", decoded.spec.name, decoded.version)
        return CLOSE, None


class Held:
    """The answers this worker keeps aside (``Hold``): ``(processor, conn id,
    kind, payload, decoded, hold)`` each, sent by ``settle`` once ready,
    expired, or (``stopping``) at once."""

    POLL_S = 0.01  # how often an idle worker asks them again

    def __init__(self, pipes):
        self.pipes = pipes
        self.answers: list = []

    def __len__(self) -> int:
        return len(self.answers)

    def add(self, processor_id: int, conn_id: int, held: tuple) -> None:
        self.answers.append((processor_id, conn_id) + held)

    def settle(self, stopping: bool = False) -> None:
        if not self.answers:
            return
        now = time.monotonic()
        waiting = []
        for answer in self.answers:
            processor_id, conn_id, kind, payload, decoded, hold = answer
            try:
                if not hold.ready():
                    if not stopping and now < hold.deadline:
                        waiting.append(answer)
                        continue
                    kind, payload = _expired(kind, payload, decoded, hold)
            except Exception:
                log.exception("%s v%d: a held answer failed; closing the connection", decoded.spec.name,
                              decoded.version)
                kind, payload = CLOSE, None
            self.pipes[processor_id].send((conn_id, kind, payload))
        self.answers = waiting


def _expired(kind, payload, decoded, hold):
    """The answer to send for a hold whose deadline passed: ``hold.expire``'s
    response to the one built (its throttling kept)."""
    new_kind, new_payload = finish_request(decoded, hold.expire(decoded.response))
    if kind == THROTTLED:
        _inner_kind, _inner, throttle_ms, throttles = payload
        return THROTTLED, (new_kind, new_payload, throttle_ms, throttles)
    return new_kind, new_payload


def worker_main(worker_id: int, broker_factory, channel) -> None:
    broker = broker_factory(worker_id)
    requests = channel.requests
    arenas = [a.view for a in channel.arenas]
    pipes = channel.response_pipes
    held = Held(pipes)
    probe = probes.request
    # With metrics on, an idle worker wakes every 0.5 s to publish what it
    # counted and its idle ratio; otherwise it just blocks.
    poll_s = None if probe is probes.NULL_REQUEST else 0.5
    monotonic = time.monotonic
    while True:
        waited_at = monotonic()
        try:
            req = requests.get(worker_id, Held.POLL_S if held else poll_s)
        except queue.Empty:
            now = monotonic()
            probe.waited(now - waited_at)
            probe.maybe_publish(now)
            held.settle()
            continue
        if req is None:
            break
        started = monotonic()
        probe.waited(started - waited_at)
        buf = req.view(arenas)
        api_key = int.from_bytes(buf[:2], "big") if req.size >= 2 else -1
        kind, payload = handle_request(broker, buf, req.deadline_ms, req.listener, req.principal,
                                       req.peer_host)
        done = monotonic()
        if done - started > _SLOW_S:
            log.warning("a request (api key %d) took %.1f s in the handler", api_key, done - started)
        # A re-run of a parked fetch (deadline_ms set) waited in a processor,
        # not in the queue: its queue time was counted on the first pass.
        probe.request_handled(api_key, -1.0 if req.deadline_ms else started - req.put_s,
                              done - started)
        if kind == HELD:
            held.add(req.processor_id, req.conn_id, payload)
        else:
            pipes[req.processor_id].send((req.conn_id, kind, payload))
        held.settle()
        probe.maybe_publish(done)
    held.settle(stopping=True)
    probes.publish()
    broker.close()


# The APIs clients call on every request or poll: the newest versions of each
# (what current clients send; deployed ones lag a few versions behind).
_HOT_API_KEYS = (0, 1, 2, 3, 8, 9, 10, 11, 12, 14, 18)
_HOT_VERSIONS = 5


def warm_up() -> None:
    """Import and plan, once in the supervisor before it forks, the request
    and response classes workers and processors use most: the newest version
    of every API, and the newest five of the hot ones (~80 pairs, ~0.3 s).

    Loaded lazily instead, each worker paid the import (kio's dataclasses)
    and the codec's plan on its own first request of each version: in a
    three-broker cluster that was a fifth of the handlers' CPU in a 5 s
    benchmark, and a first request taking ~50 ms is a latency outlier for
    whoever sent it. Forked children share the result."""
    from kafkapy.protocol.readers import _read_plan
    from kafkapy.protocol.writers import _write_plan

    for key, spec in API_TABLE.items():
        oldest = spec.max_version - _HOT_VERSIONS + 1 if key in _HOT_API_KEYS else spec.max_version
        for version in range(max(spec.served_from, oldest), spec.max_version + 1):
            try:
                _read_plan(spec.request_class(version))
                _write_plan(spec.response_class(version))
            except (ImportError, AttributeError):
                log.warning("no schema for %s v%d", spec.name, version)


def now_ms() -> int:
    return int(time.time() * 1000)
