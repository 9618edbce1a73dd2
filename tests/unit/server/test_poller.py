"""The processor's Poller against selectors.EpollSelector: the same ready
sets and events for the same registrations (read, write, both; a peer's
close and a reset, reported as both and masked by what was asked), and the
same errors for registering twice or dropping what is not there."""

from __future__ import annotations

import selectors
import socket

import pytest

from kafkapy.server.reactor.poller import Poller

R, W = selectors.EVENT_READ, selectors.EVENT_WRITE


def _both(pairs):
    """Each (socket, events) registered in a Poller and an EpollSelector."""
    poller, reference = Poller(), selectors.EpollSelector()
    for i, (sock, events) in enumerate(pairs):
        poller.register(sock, events, i)
        reference.register(sock, events, i)
    return poller, reference


def _ready(poller, reference, timeout=0):
    ours = sorted(poller.select(timeout))
    theirs = sorted((key.data, events) for key, events in reference.select(timeout))
    return ours, theirs


@pytest.mark.parametrize("events", [R, W, R | W])
def test_the_same_events_as_epollselector(events):
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    poller, reference = _both([(a, events), (c, events)])
    try:
        ours, theirs = _ready(poller, reference)
        assert ours == theirs
        b.send(b"x")
        ours, theirs = _ready(poller, reference)
        assert ours == theirs
        assert ((0, events) in ours) == bool(events & R) or events & W
        d.close()  # c's peer hangs up: readable (EOF) and writable (an error to come)
        ours, theirs = _ready(poller, reference)
        assert ours == theirs
        assert (1, events) in ours
    finally:
        poller.close()
        reference.close()
        for s in (a, b, c):
            s.close()


@pytest.fixture
def pair():
    """A socket pair and a Poller, closed after the test."""
    a, b = socket.socketpair()
    poller = Poller()
    yield a, b, poller
    poller.close()
    a.close()
    b.close()


def test_modify_and_unregister_change_what_is_reported(pair):
    a, b, poller = pair
    poller.register(a, R, "conn")
    assert poller.select(0) == []
    poller.modify(a, W, "conn2")
    assert poller.select(0) == [("conn2", W)]
    b.send(b"x")
    poller.modify(a, R | W, "conn3")
    assert poller.select(0) == [("conn3", R | W)]
    poller.unregister(a)
    assert poller.select(0) == []
    with pytest.raises(KeyError):
        poller.unregister(a)
    with pytest.raises(KeyError):
        poller.modify(a, R, None)
    poller.register(a.fileno(), R, "by fd")
    with pytest.raises(KeyError):
        poller.register(a, R, "twice")
    assert poller.select(0) == [("by fd", R)]
    fd = a.fileno()
    a.close()  # unregistering a closed descriptor is quiet, as selectors' is
    poller.unregister(fd)
    assert poller.select(0) == []


def test_a_timeout_waits_and_none_is_not_cut_short(pair):
    import time

    a, b, poller = pair
    poller.register(a, R, "conn")
    started = time.monotonic()
    assert poller.select(0.05) == []
    assert time.monotonic() - started >= 0.05
