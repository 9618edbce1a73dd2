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
import hashlib
import logging
import marshal
import os
import socket
import struct
import threading
import time

from kafkapy.client.blocking import BlockingConnection, open_socket, recv_exactly, request

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


# -- controlled shutdown: the broker's side (Kafka's KafkaServer.controlledShutdown) ----------------

CONTROLLED_SHUTDOWN = 7
_CONTROLLED_SHUTDOWN_VERSION = 3  # what Kafka 3.9 sends (IBP >= 2.4)


def controlled_shutdown(config, broker_id: int, metadata, connect_timeout_ms: int = 30000,
                        broker_epoch: int = -1, sleep=time.sleep) -> bool:
    """Ask the controller to move this broker's leaderships away before it stops;
    True when it answered that none remain. Kafka's loop: up to
    ``controlled.shutdown.max.retries`` tries, each to the controller that
    ``metadata()`` (the broker's image) names, at its
    ``inter.broker.listener.name`` endpoint; an error, partitions remaining,
    no known controller or a failed connection (``request.timeout.ms``) is
    followed by ``controlled.shutdown.retry.backoff.ms`` and another try.
    ``broker_epoch`` -1 is Kafka's UNKNOWN_BROKER_EPOCH, which the controller
    accepts without its staleness check (the supervisor has no session to
    read the registration's czxid from)."""
    retries = config["controlled.shutdown.max.retries"]
    backoff_s = config["controlled.shutdown.retry.backoff.ms"] / 1000
    request_timeout_s = config["request.timeout.ms"] / 1000
    client_id = f"kafkapy-broker-{broker_id}-controlled-shutdown".encode()
    from kafkapy.server.security.inter_broker import client_security

    security = client_security(config)
    values = {"broker_id": broker_id, "broker_epoch": broker_epoch}
    for attempt in range(retries):  # bounded: retries x (connect + request timeout + back-off)
        md = metadata()
        controller = md.brokers.get(md.controller_id)
        address = endpoint_for(controller, config.inter_broker_listener_name) if controller else None
        if address is None:
            log.info("controlled shutdown: no controller known in the metadata")
        else:
            try:
                with BlockingConnection(address, connect_timeout_ms / 1000, security, client_id) as conn:
                    conn.settimeout(request_timeout_s)
                    started = time.monotonic()
                    response = conn.request(CONTROLLED_SHUTDOWN, _CONTROLLED_SHUTDOWN_VERSION, values)
                took_ms = (time.monotonic() - started) * 1000
                if response.error_code != 0:
                    log.info("controlled shutdown request returned after %.0f ms with error %d", took_ms,
                             response.error_code)
                elif not response.remaining_partitions:
                    log.info("controlled shutdown request returned successfully after %.0f ms", took_ms)
                    return True
                else:
                    log.info("controlled shutdown request returned after %.0f ms with %d partitions remaining "
                             "to move: %s", took_ms, len(response.remaining_partitions),
                             [(p.topic_name, p.partition_index) for p in response.remaining_partitions[:20]])
            except (OSError, ValueError, ConnectionError) as exc:
                log.warning("error during controlled shutdown, possibly because leader movement took longer "
                            "than request.timeout.ms: %s", exc)
        if attempt < retries - 1:
            sleep(backoff_s)
            log.info("retrying controlled shutdown (%d retries remaining)", retries - attempt - 1)
    log.warning("proceeding to do an unclean shutdown as all the controlled shutdown attempts failed (%d tries)",
                retries)
    return False


# -- the controller's local door: a handler worker asks the controller child -------------------------
#
# ControlledShutdown and ElectLeaders arrive at a handler worker of the
# controller's broker, but the controller is the broker's controller child.
# The child serves an abstract Unix socket named after the broker's first log
# dir (unique per broker on a host; nothing on disk to clean up); a worker
# connects, sends one marshalled request tuple and reads one marshalled answer.
# The child answers ("not_controller",) while it is not the elected
# controller; a worker that finds no door answers NOT_CONTROLLER too.

_DOOR_FRAME = struct.Struct(">I")
_DOOR_MAX_BYTES = 64 * 1024 * 1024
_DOOR_MAX_CONNECTIONS = 32


def door_address(config) -> str:
    key = hashlib.sha1(os.path.realpath(config.log_dirs[0]).encode()).hexdigest()[:24]
    return "\0kafkapy-controller-" + key


def _send_frame(sock, message) -> None:
    data = marshal.dumps(message)
    sock.sendall(_DOOR_FRAME.pack(len(data)) + data)


def _read_frame(sock):
    size = _DOOR_FRAME.unpack(recv_exactly(sock, _DOOR_FRAME.size))[0]
    if size > _DOOR_MAX_BYTES:
        raise ValueError(f"door frame of {size} bytes")
    return marshal.loads(recv_exactly(sock, size))


def ask_controller(config, message: tuple, timeout_s: float):
    """The controller child's answer to ``message``, ("not_controller",) when it
    has no door open, or None when it did not answer within ``timeout_s``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        try:
            sock.connect(door_address(config))
        except (ConnectionRefusedError, FileNotFoundError):
            return ("not_controller",)
        _send_frame(sock, message)
        return _read_frame(sock)
    except (OSError, ValueError, EOFError):
        return None
    finally:
        sock.close()


class LocalDoor:
    """The controller child's side: ``answer(message) -> reply`` runs on a thread
    per connection (at most ``_DOOR_MAX_CONNECTIONS`` at once; ``answer`` is
    bounded by the timeout the message carries)."""

    def __init__(self, config, answer):
        self.answer = answer
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(door_address(config))
        self.sock.listen(_DOOR_MAX_CONNECTIONS)
        self.sock.settimeout(0.5)
        self.slots = threading.BoundedSemaphore(_DOOR_MAX_CONNECTIONS)
        self.stopped = False
        self.thread = threading.Thread(target=self._accept, name="controller-door", daemon=True)

    def start(self) -> "LocalDoor":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped = True
        self.thread.join(2)
        self.sock.close()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if not self.slots.acquire(timeout=1.0):
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), name="controller-door-conn", daemon=True).start()

    def _serve(self, conn) -> None:
        try:
            conn.settimeout(5.0)
            message = _read_frame(conn)
            conn.settimeout(None)
            reply = self.answer(message)
            conn.settimeout(5.0)
            _send_frame(conn, reply)
        except Exception:
            log.exception("controller door: a request failed")
        finally:
            conn.close()
            self.slots.release()
