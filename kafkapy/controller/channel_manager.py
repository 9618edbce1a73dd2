"""The controller's connections to the brokers (Kafka's ControllerChannelManager).

While a broker is controller, its controller child holds one
``RequestSendThread`` per live broker (itself included): a queue of
LeaderAndIsr v7 / UpdateMetadata v8 / StopReplica v4 requests and a thread
that sends them one at a time over a blocking socket to the broker's
endpoint of ``inter.broker.listener.name`` (the first advertised listener by
default), request header v2 with client id ``kafkapy-controller-<id>``, and
reads each answer before the next request (one in flight, as Kafka's).

A request that cannot be sent or answered (connection refused or lost, no
answer within ``controller.socket.timeout.ms``) closes the socket and is
tried again after a back-off (Kafka's 100 ms, doubled up to 1 s here), until
it is answered or the broker is removed: a broker that died (its
registration went) is removed with its queue, as Kafka drops it; it gets
what it needs again when it returns (``ControllerState.on_brokers_started``).
An answer goes to the request's callback on the send thread, which only
queues it for the controller's event thread.

Bounded: each queue holds at most ``MAX_QUEUED`` requests (more is a
controller that cannot keep up with a dead-slow broker: the oldest requests
are dropped with an error in the log, and the broker is sent what is
current at its next start), every socket operation has a timeout, and
``shutdown`` waits a bounded time for each thread.

Ownership: created by the elected controller's event thread, which is the
only caller of ``add_broker``/``remove_broker``/``send``/``shutdown``; each
send thread owns its socket.
"""

from __future__ import annotations

import collections
import logging
import socket
import threading

from kafkapy.client.blocking import open_socket, request

log = logging.getLogger("kafkapy.controller")

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
VERSIONS = {LEADER_AND_ISR: 7, STOP_REPLICA: 4, UPDATE_METADATA: 8}
MAX_QUEUED = 10_000
_BACKOFF_S, _MAX_BACKOFF_S = 0.1, 1.0


def endpoint_for(info, listener_name: str):
    """``(host, port)`` of ``info``'s endpoint of ``listener_name`` (its host/port when
    it lists no endpoints), or None."""
    for ep in info.endpoints:
        if ep.listener_name == listener_name:
            return ep.host, ep.port
    if not info.endpoints:
        return info.host, info.port
    return None


class RequestSendThread:
    """One broker's queue and sender (see the module docstring)."""

    def __init__(self, broker_id: int, address, client_id: str, timeout_s: float, security=None):
        self.broker_id = broker_id
        self.address = address
        self.security = security
        self.client_id = client_id.encode()
        self.timeout_s = timeout_s
        self.queue: collections.deque = collections.deque()
        self.cond = threading.Condition()
        self.stopped = False
        self.sock = None
        self.correlation_id = 0
        self.thread = threading.Thread(target=self._run, name=f"controller-send-{broker_id}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def put(self, api_key: int, values: dict, callback) -> None:
        with self.cond:
            if len(self.queue) >= MAX_QUEUED:
                dropped = self.queue.popleft()
                log.error("controller queue to broker %d is full: dropping a request of API %d",
                          self.broker_id, dropped[0])
            self.queue.append((api_key, values, callback))
            self.cond.notify()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.queue.clear()
            self.cond.notify()
        self._close()

    def join(self, timeout_s: float) -> None:
        if self.thread is not threading.current_thread():
            self.thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.queue and not self.stopped:
                    self.cond.wait(1.0)
                if self.stopped:
                    return
                api_key, values, callback = self.queue[0]
            response = self._send_until_answered(api_key, values)
            with self.cond:
                if self.stopped:
                    return
                self.queue.popleft()
            if callback is not None and response is not None:
                try:
                    callback(response)
                except Exception:
                    log.exception("controller: callback for API %d from broker %d failed", api_key,
                                  self.broker_id)

    def _send_until_answered(self, api_key: int, values: dict):
        backoff = _BACKOFF_S
        while not self.stopped:  # bounded: stop() ends it, each try is bounded by timeouts
            try:
                return self._call(api_key, values)
            except (OSError, ValueError, ConnectionError) as exc:
                log.info("controller request %d to broker %d at %s:%d failed (%s); retrying", api_key,
                         self.broker_id, *self.address, exc)
                self._close()
                with self.cond:
                    self.cond.wait_for(lambda: self.stopped, backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
        return None

    def _call(self, api_key: int, values: dict):
        if self.sock is None:
            self.sock = open_socket(self.address, self.timeout_s, self.security, self.client_id)
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        return request(self.sock, api_key, VERSIONS[api_key], values, self.correlation_id, self.client_id)

    def _close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the send thread if it is blocked in recv
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass


class ControllerChannelManager:
    def __init__(self, controller_id: int, listener_name: str, timeout_ms: int = 30000, security=None):
        self.controller_id = controller_id
        self.listener_name = listener_name
        self.security = security  # kafkapy.client.security.ClientSecurity, None: PLAINTEXT
        self.timeout_s = timeout_ms / 1000
        self.brokers: dict = {}  # broker id -> RequestSendThread

    def add_broker(self, info) -> None:
        address = endpoint_for(info, self.listener_name)
        if address is None:
            log.error("broker %d has no endpoint for listener %s: the controller cannot reach it",
                      info.broker_id, self.listener_name)
            return
        current = self.brokers.get(info.broker_id)
        if current is not None:
            if current.address == address:
                return
            self.remove_broker(info.broker_id)
        sender = RequestSendThread(info.broker_id, address, f"kafkapy-controller-{self.controller_id}",
                                   self.timeout_s, self.security)
        self.brokers[info.broker_id] = sender
        sender.start()

    def remove_broker(self, broker_id: int) -> None:
        sender = self.brokers.pop(broker_id, None)
        if sender is not None:
            sender.stop()

    def send(self, broker_id: int, api_key: int, values: dict, callback=None) -> bool:
        """Queue a request for ``broker_id``; False if it is not a known live broker."""
        sender = self.brokers.get(broker_id)
        if sender is None:
            return False
        sender.put(api_key, values, callback)
        return True

    def shutdown(self, timeout_s: float = 0.5) -> None:
        senders = list(self.brokers.values())
        self.brokers.clear()
        for sender in senders:
            sender.stop()
        for sender in senders:
            sender.join(timeout_s)
