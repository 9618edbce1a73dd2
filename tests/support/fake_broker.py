"""A stand-in broker for testing the harness itself: ``fake_broker.py PROPS``.

Listens on the port of ``listeners`` and answers every request frame with its
correlation id followed by an empty ApiVersions body (error 0, no APIs).
``fake.*`` properties make it misbehave: ``fake.exit.code=N`` exits at once,
``fake.ignore.sigterm=true`` ignores SIGTERM, ``fake.orphan=true`` forks a
child that outlives it (a leak the harness must catch).
"""

import os
import selectors
import signal
import socket
import struct
import sys
import time

# Bound on the fake's life so a harness bug cannot leave it running: 60 s.
MAX_LIFETIME_S = 60.0


def read_props(path):
    props = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                props[key.strip()] = value.strip()
    return props


def main():
    props = read_props(sys.argv[1])
    print(f"fake broker starting pid={os.getpid()}", flush=True)
    if "fake.exit.code" in props:
        print("fake broker failing on purpose", file=sys.stderr, flush=True)
        return int(props["fake.exit.code"])
    if props.get("fake.ignore.sigterm") == "true":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if props.get("fake.orphan") == "true" and os.fork() == 0:
        time.sleep(MAX_LIFETIME_S)
        os._exit(0)
    port = int(props["listeners"].rsplit(":", 1)[1])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    sel = selectors.DefaultSelector()
    sel.register(server, selectors.EVENT_READ)
    buffers = {}
    deadline = time.monotonic() + MAX_LIFETIME_S
    while time.monotonic() < deadline:
        for key, _ in sel.select(0.2):
            if key.fileobj is server:
                conn, _ = server.accept()
                sel.register(conn, selectors.EVENT_READ)
                buffers[conn] = b""
                continue
            conn = key.fileobj
            data = conn.recv(65536)
            if not data:
                sel.unregister(conn)
                conn.close()
                del buffers[conn]
                continue
            buf = buffers[conn] + data
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                size = struct.unpack_from(">i", buf)[0]
                frame, buf = buf[4:4 + size], buf[4 + size:]
                correlation_id = struct.unpack_from(">i", frame, 4)[0]
                body = struct.pack(">ihi", correlation_id, 0, 0)
                conn.sendall(struct.pack(">i", len(body)) + body)
            buffers[conn] = buf
    return 0


if __name__ == "__main__":
    sys.exit(main())
