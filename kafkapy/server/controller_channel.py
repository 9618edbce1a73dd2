"""The broker's side of its controller: controlled shutdown, and the local door.

* ``controlled_shutdown``: a stopping broker asks the controller to move its
  leaderships away first (Kafka's ``KafkaServer.controlledShutdown``), over
  the one blocking connection (``kafkapy.client.blocking``).
* The local door (``LocalDoor``, ``ask_controller``): ControlledShutdown,
  ElectLeaders and the reassignment APIs arrive at a handler worker, but the
  controller runs in this broker's controller child; the worker hands the
  request through an abstract Unix socket and reads the answer.

The controller's own connections to the brokers are
``kafkapy.controller.channel_manager``.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import os
import socket
import struct
import threading
import time

from kafkapy.client.blocking import BlockingConnection, recv_exactly
from kafkapy.controller.channel_manager import endpoint_for

log = logging.getLogger("kafkapy.controller")


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
