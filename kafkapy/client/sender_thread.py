"""One destination broker's sender thread: a queue drained into one request
at a time over one blocking connection (Kafka's InterBrokerSendThread with
one request in flight per node).

The transaction coordinator's marker senders (``coordinator/transaction/
marker_channel._Destination``: WriteTxnMarkers to a partition leader) and a
partition leader's verification senders (``server/txn_verification``:
AddPartitionsToTxn ``verify_only`` to a transaction coordinator) are this
with their own request: a subclass gives ``exchange(address, items) ->
answer`` (one request for every item queued meanwhile, over ``socket``),
``done(items, answer)`` and ``failed(items, exc)`` (the connection or the
answer failed: the items in flight and every item queued behind them, so
none waits behind a dead broker; the connection is closed and opened again
for the next request). Both run on the sender thread.

Ownership: ``_items``, ``address``, ``_sock`` and ``_stopping`` are guarded
by ``_cond``; the socket is used by the sender thread only.
"""

from __future__ import annotations

import logging
import socket
import threading

from kafkapy.client.blocking import open_socket

log = logging.getLogger("kafkapy.client")

# How long ``join`` waits for the thread (a thread in a socket call is woken
# by shutting its socket down; only a TLS connect cannot be woken).
JOIN_TIMEOUT_S = 2.0


class SenderThread:
    def __init__(self, name: str, client_id: bytes, security, timeout_s: float):
        self.name = name
        self.client_id = client_id
        self.security = security  # kafkapy.client.security.ClientSecurity or None (PLAINTEXT)
        self.timeout_s = timeout_s  # every socket operation, so one request-answer at most ~this
        self.address = None
        self._items: list = []
        self._cond = threading.Condition()
        self._stopping = False
        self._sock = None
        self._sock_address = None
        self._correlation_id = 0
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    # -- the owner's side (any thread) ---------------------------------------------

    def enqueue(self, address, items) -> None:
        with self._cond:
            self.address = address
            self._items.extend(items)
            self._cond.notify()

    def forget(self, keep) -> int:
        """Drop queued (not yet sent) items ``keep(item)`` rejects; how many."""
        with self._cond:
            before = len(self._items)
            self._items = [i for i in self._items if keep(i)]
            return before - len(self._items)

    def signal_stop(self) -> None:
        """Tell the thread to stop and wake it from a wait or a socket call."""
        with self._cond:
            self._stopping = True
            sock = self._sock
            self._cond.notify()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a recv/send in progress
            except OSError:
                pass

    def join(self) -> None:
        self.thread.join(JOIN_TIMEOUT_S)
        if self.thread.is_alive():
            log.warning("%s did not stop in %.0f s", self.name, JOIN_TIMEOUT_S)

    # -- the subclass's side (the sender thread) -----------------------------------

    def exchange(self, address, items):
        raise NotImplementedError

    def done(self, items, answer) -> None:
        raise NotImplementedError

    def failed(self, items, exc: BaseException) -> None:
        raise NotImplementedError

    def next_correlation_id(self) -> int:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        return self._correlation_id

    def socket(self, address):
        """The connection to ``address``, opened if there is none to it."""
        if self._sock is not None and self._sock_address == address:
            return self._sock
        self._close()
        sock = open_socket(address, self.timeout_s, self.security, self.client_id)
        with self._cond:
            if self._stopping:
                sock.close()
                raise OSError("stopping")
            self._sock, self._sock_address = sock, address
        return sock

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._items and not self._stopping:
                        self._cond.wait()
                    if self._stopping:
                        return
                    items, self._items = self._items, []
                    address = self.address
                try:
                    answer = self.exchange(address, items)
                except Exception as exc:  # noqa: BLE001 - any failure answers its items (never lost)
                    with self._cond:
                        if self._stopping:
                            return
                        behind, self._items = self._items, []
                    self._close()
                    self.failed(items + behind, exc)
                    continue
                self.done(items, answer)
        finally:
            self._close()

    def _close(self) -> None:
        with self._cond:
            sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


def stop_all(senders) -> None:
    """Stop ``senders`` (their connections closed): every one told first, so
    they wind down together, then each joined."""
    for sender in senders:
        sender.signal_stop()
    for sender in senders:
        sender.join()
