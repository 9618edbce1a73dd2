"""The acceptor: accepts connections and deals them round-robin to processors.

Owned by the acceptor process. The listening sockets are bound by the
supervisor (so a port conflict fails start-up before anything forks) and
inherited; accepted file descriptors travel to processors over UNIX
socketpairs with SCM_RIGHTS.
"""

from __future__ import annotations

import logging
import selectors
import signal
import socket

log = logging.getLogger("kafkapy.network")


def acceptor_main(listen_sockets: list[socket.socket], processor_sockets: list[socket.socket]) -> None:
    stopping = False

    def on_term(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sel = selectors.DefaultSelector()
    for index, ls in enumerate(listen_sockets):
        ls.setblocking(False)
        # The byte sent with each descriptor: the listener's index (metrics
        # count connections per listener).
        sel.register(ls, selectors.EVENT_READ, bytes((index,)))
    turn = 0
    while not stopping:
        for key, _ in sel.select(0.5):
            # Accept a burst, but bounded, so SIGTERM is noticed promptly.
            for _ in range(64):
                try:
                    sock, _addr = key.fileobj.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:  # EMFILE and friends: keep serving
                    log.warning("accept failed: %s", exc)
                    break
                target = processor_sockets[turn % len(processor_sockets)]
                turn += 1
                try:
                    socket.send_fds(target, [key.data], [sock.fileno()])
                except OSError as exc:
                    log.warning("could not hand a connection to a processor: %s", exc)
                finally:
                    sock.close()
    for ls in listen_sockets:
        ls.close()
