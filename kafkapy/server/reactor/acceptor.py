"""The acceptor: accepts connections and deals them round-robin to processors.

Owned by the acceptor process. The listening sockets are bound by the
supervisor (so a port conflict fails start-up before anything forks) and
inherited; accepted file descriptors travel to processors over UNIX
socketpairs with SCM_RIGHTS.

Connection limits (Kafka's ConnectionQuotas; ``server/quotas/connections.py``):
each accepted connection is counted in the shared counts, which the owning
processor counts out when it closes it. Over ``max.connections.per.ip`` (or
its override) it is closed at once. A listener at ``max.connections``
(its own or the broker's) is taken out of the selector until a connection
closes (the kernel's backlog holds new ones; Kafka's acceptor blocks the same
way, per listener), polled every ``_SLOT_POLL_S``. Over
``max.connection.creation.rate`` an accepted connection is held for its
throttle time before it is handed on, and its listener accepts nothing
meanwhile; over its IP entity's ``connection_creation_rate`` it is closed
after its throttle time. The time each listener spends unable to accept is added up in the
shared counts (Kafka's AcceptorBlockedPercent).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import selectors
import socket
import time

from kafkapy.metrics import quotas as quota_metrics
from kafkapy.server import child_signals

log = logging.getLogger("kafkapy.network")

# How often a blocked listener looks for a free slot: connections are counted
# out by the processors (another process), so the acceptor polls.
_SLOT_POLL_S = 0.01


def acceptor_main(listen_sockets: list[socket.socket], processor_sockets: list[socket.socket],
                  limits=None) -> None:
    stopping = False

    def on_term(*_):
        nonlocal stopping
        stopping = True

    child_signals.on_stop(on_term)
    sel = selectors.DefaultSelector()
    woken = child_signals.wake_on_signal()
    sel.register(woken, selectors.EVENT_READ, None)
    for index, ls in enumerate(listen_sockets):
        ls.setblocking(False)
        # The byte sent with each descriptor: the listener's index (metrics
        # count connections per listener).
        sel.register(ls, selectors.EVENT_READ, bytes((index,)))
    turn = 0
    next_report = time.monotonic()
    # listener index -> (held socket or None, monotonic time until which it waits,
    # when the listener stopped accepting)
    paused: dict[int, list] = {}

    def hand_over(index: int, sock: socket.socket) -> None:
        nonlocal turn
        target = processor_sockets[turn % len(processor_sockets)]
        turn += 1
        try:
            socket.send_fds(target, [bytes((index,))], [sock.fileno()])
        except OSError as exc:
            log.warning("could not hand a connection to a processor: %s", exc)
            if limits is not None:
                limits.quotas.dec(index, _peer_ip(sock))
        finally:
            sock.close()

    closing: list = []  # (monotonic time, order, socket): throttled by an IP quota, closed then
    order = itertools.count()
    while not stopping:
        if limits is not None:
            limits.refresh()  # dynamic max.connections* (a no-op unless the metadata moved)
        timeout = _SLOT_POLL_S if paused else 0.5
        if closing:
            now = time.monotonic()
            while closing and closing[0][0] <= now:
                heapq.heappop(closing)[2].close()
            if closing:
                timeout = min(timeout, max(0.0, closing[0][0] - now))
        for key, _ in sel.select(timeout):
            if key.data is None:
                child_signals.drain(woken)
                continue
            index = key.data[0]
            # Accept a burst, but bounded, so SIGTERM is noticed promptly.
            for _ in range(64):
                if limits is not None and not limits.slot_available(index):
                    _pause(sel, listen_sockets, paused, index, None, 0.0)
                    break
                try:
                    sock, addr = key.fileobj.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:  # EMFILE and friends: keep serving
                    log.warning("accept failed: %s", exc)
                    break
                if limits is None:
                    hand_over(index, sock)
                    continue
                ip = addr[0] if isinstance(addr, tuple) else ""
                ip_throttle_ms = limits.ip_throttle_ms(ip, int(time.time() * 1000)) if ip else 0
                if ip_throttle_ms > 0:
                    # over its IP's connection_creation_rate: closed after the throttle
                    heapq.heappush(closing, (time.monotonic() + ip_throttle_ms / 1000.0, next(order), sock))
                    continue
                if not limits.quotas.inc(index, ip, limits.per_ip(ip)):
                    log.info("closing a connection from %s: over max.connections.per.ip (%d)",
                             ip, limits.per_ip(ip))
                    sock.close()
                    continue
                throttle_ms = limits.accept_throttle_ms(index, int(time.time() * 1000))
                if throttle_ms > 0:
                    _pause(sel, listen_sockets, paused, index, sock, throttle_ms / 1000.0)
                    break
                hand_over(index, sock)
        if paused:
            _resume(sel, listen_sockets, paused, limits, hand_over)
        if limits is not None:
            next_report = _report_blocked(limits, paused, next_report)
    for _, _, sock in closing:
        sock.close()
    for held in paused.values():
        if held[0] is not None:
            limits.quotas.dec(held[3], _peer_ip(held[0]))
            held[0].close()
    for ls in listen_sockets:
        ls.close()


# AcceptorBlockedPercent: the share of each interval a listener could not accept.
_REPORT_S = 0.5
_last_blocked: dict = {}


def _report_blocked(limits, paused, next_report: float) -> float:
    now = time.monotonic()
    if now < next_report:
        return next_report
    probe = quota_metrics.probe()
    for index, name in enumerate(limits.names):
        # blocked seconds so far, the pause going on included (added to the shared count when it ends)
        total = limits.quotas.blocked_ns(index) / 1e9 + (now - paused[index][2] if index in paused else 0.0)
        before, at = _last_blocked.get(index, (total, now - _REPORT_S))
        _last_blocked[index] = (total, now)
        probe.acceptor_blocked(name, min(1.0, max(0.0, (total - before) / max(now - at, 1e-3))))
    return now + _REPORT_S


def _peer_ip(sock: socket.socket) -> str:
    try:
        return sock.getpeername()[0]
    except OSError:
        return ""


def _pause(sel, listen_sockets, paused, index: int, sock, wait_s: float) -> None:
    """Stop accepting on listener ``index`` (a held connection waits ``wait_s``)."""
    now = time.monotonic()
    paused[index] = [sock, now + wait_s, now, index]
    sel.unregister(listen_sockets[index])


def _resume(sel, listen_sockets, paused, limits, hand_over) -> None:
    now = time.monotonic()
    for index in list(paused):
        sock, until, since, _ = paused[index]
        if now < until:
            continue
        if sock is not None:
            paused[index][0] = None
            hand_over(index, sock)
        if not limits.slot_available(index):
            continue
        del paused[index]
        limits.quotas.blocked(index, int((now - since) * 1e9))
        sel.register(listen_sockets[index], selectors.EVENT_READ, bytes((index,)))
